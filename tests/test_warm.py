"""A warm tree (``dac up`` / ``status`` / ``down``) and the scripts that attach to it.

Every tree here lives in a folder of the test's own (``DAC_TREE_DIR``), so a tree the
user may have up is never touched, and the scripts run as a user runs them: separate
processes, started in their own session, with this session's process tag.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import signal
import stat
import sys
import time

import pytest
from proctools import (
    dac_processes,
    finish,
    launch,
    new_tag,
    tagged_pids,
    wait_for,
    wait_for_no_processes,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIENT = os.path.join(ROOT, "tests", "scripts", "warm_client.py")
DAC = shutil.which("dac", path=os.path.dirname(sys.executable)) or "dac"
FIB = {15: 610, 16: 987, 17: 1597, 18: 2584}


class Tree:
    """A warm tree in its own folder, and the commands and scripts that use it."""

    def __init__(self, folder: str):
        self.folder = folder
        self.tag = new_tag()

    def start(self, args, cwd=ROOT):
        return launch(args, self.tag, cwd=cwd)

    def command(self, *args, timeout=120, cwd=ROOT):
        code, out, err, _ = finish(self.start(list(args), cwd=cwd), timeout)
        return code, out, err

    def dac(self, *args, timeout=120):
        return self.command(DAC, *args, timeout=timeout)

    def client(self, *args, timeout=120, cwd=ROOT):
        code, out, err = self.command(sys.executable, CLIENT, *args, timeout=timeout,
                                      cwd=cwd)
        assert code == 0, err
        return json.loads(out.strip().splitlines()[-1]), err

    def info(self) -> dict:
        with open(os.path.join(self.folder, "tree.json")) as f:
            return json.load(f)

    def status(self) -> dict:
        code, out, err = self.dac("status", "--json")
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    t = Tree(str(tmp_path / "tree"))
    monkeypatch.setenv("DAC_TREE_DIR", t.folder)    # the scripts inherit both
    monkeypatch.setenv("DAC_ATTACH", "1")
    yield t
    t.dac("down")
    assert wait_for_no_processes(t.tag, timeout=10) == {}


@pytest.fixture
def up_tree(tree):
    code, out, err = tree.dac("up", "--procs", "2", "--preload", "dac.execution")
    assert code == 0, err
    assert "warm tree up" in out and "2 leaves" in out
    return tree


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# dac up / status / down ------------------------------------------------------------
def test_up_status_down_leave_no_process(tree):
    code, out, err = tree.dac("up", "--procs", "2")
    assert code == 0, err
    info = tree.info()
    server = info["pid"]
    assert info["leaves"] == 2 and os.path.exists(f"/proc/{server}")
    mode = stat.S_IMODE(os.stat(os.path.join(tree.folder, "tree.json")).st_mode)
    assert mode == 0o600 and stat.S_IMODE(os.stat(tree.folder).st_mode) == 0o700
    st = tree.status()
    assert st["pid"] == server and st["runs"] == 0 and st["holder"] is None
    roles = sorted(p["role"] for p in st["processes"])
    assert roles == ["leaf", "leaf", "root"]
    assert set(dac_processes(tree.tag)) == {p["pid"] for p in st["processes"]
                                            if p["role"] == "leaf"}
    code, out, _ = tree.dac("status")
    assert code == 0 and f"pid {server}" in out and "2 leaves" in out and "idle" in out
    code, out, err = tree.dac("up", "--procs", "2")
    assert code == 2 and "already up" in err
    code, out, err = tree.dac("down")
    assert code == 0 and f"pid {server} stopped" in out
    assert wait_for(lambda: not os.path.exists(f"/proc/{server}"), 10)
    assert wait_for_no_processes(tree.tag, timeout=10) == {}
    assert not os.path.exists(os.path.join(tree.folder, "tree.json"))
    assert not os.path.exists(os.path.join(tree.folder, "tree.sock"))
    code, out, _ = tree.dac("status")
    assert code == 1 and "no warm tree" in out


def test_an_idle_tree_does_not_spin(up_tree):
    pids = [p["pid"] for p in up_tree.status()["processes"]]
    before = {pid: cpu_seconds(pid) for pid in pids}
    time.sleep(3.0)
    used = {pid: cpu_seconds(pid) - before[pid] for pid in pids}
    assert max(used.values()) < 0.15, used         # under 5% of a core each



@pytest.mark.parametrize("removed", ["folder", "tree.json", "tree.sock"])
def test_a_tree_nobody_can_find_any_more_ends(up_tree, removed):
    """Its folder (or the tree file, or the socket) removed under it, no ``dac down``
    could stop a tree and no script attach to it: it ends by itself, with its leaves.
    Before, it stayed up idle for good (CI: a benchmark's Ctrl-C cut its own
    ``dac down``, then it removed the tree's folder)."""
    server = up_tree.info()["pid"]
    if removed == "folder":
        shutil.rmtree(up_tree.folder)
    else:
        os.unlink(os.path.join(up_tree.folder, removed))
    assert wait_for(lambda: not os.path.exists(f"/proc/{server}"), 10), removed
    assert wait_for_no_processes(up_tree.tag, timeout=10) == {}

# attaching -------------------------------------------------------------------------
def test_dac_run_attaches_and_says_so_once(up_tree):
    leaves = sorted(p["pid"] for p in up_tree.status()["processes"] if p["role"] == "leaf")
    first, err = up_tree.client("fib", "15")
    assert first["result"] == 610 and first["attached"] is True
    assert first["spawns"] == 0 and first["leaves"] == leaves
    assert err.count("attached to the warm tree") == 1
    second, _ = up_tree.client("fib", "17")
    assert second["result"] == 1597 and second["leaves"] == leaves
    st = up_tree.status()
    assert st["runs"] == 2 and st["scripts"] == 2 and st["restarts"] == 0


def test_a_runtime_and_the_dac_command_attach(up_tree):
    out, err = up_tree.client("runtime", "15")
    assert out["first"] == 610 and out["result"] == 987
    assert out["first_attached"] is True and out["attached"] is True
    assert err.count("attached to the warm tree") == 1
    code, stdout, err = up_tree.dac("run", CLIENT, "fib", "16")
    assert code == 0, err
    assert json.loads(stdout.strip().splitlines()[-1])["attached"] is True
    code, stdout, err = up_tree.dac("run", "--no-attach", CLIENT, "fib", "16")
    ran = json.loads(stdout.strip().splitlines()[-1])
    assert code == 0 and ran["result"] == 987 and ran["attached"] is False
    assert ran["spawns"] == 2 and "attached" not in err
    assert up_tree.status()["runs"] == 3


def test_a_run_of_another_shape_spawns_its_own_tree(up_tree):
    out, err = up_tree.client("fib", "15", "1")
    assert out["result"] == 610 and out["attached"] is False and out["spawns"] == 1
    assert "it has 2 leaves and this run asks for 1" in err
    assert up_tree.status()["runs"] == 0


def test_two_scripts_at_once_are_served_one_after_the_other(up_tree):
    a = up_tree.start([sys.executable, CLIENT, "naps", "20", "150"])     # 1.5 s
    assert wait_for(lambda: up_tree.status()["holder"] is not None, 30)
    b = up_tree.start([sys.executable, CLIENT, "naps", "12", "30"])
    ra, rb = finish(a, 60), finish(b, 60)
    assert ra[0] == 0 and rb[0] == 0, (ra[2], rb[2])
    out_a = json.loads(ra[1].strip().splitlines()[-1])
    out_b = json.loads(rb[1].strip().splitlines()[-1])
    assert out_a["result"] == sum(range(20)) and out_b["result"] == sum(range(12))
    assert out_a["attached"] and out_b["attached"]
    assert f"serving pid {a.pid}" in rb[2] and "waiting" in rb[2]
    assert up_tree.status()["runs"] == 2


def test_a_script_killed_while_attached_leaves_the_tree_healthy(up_tree):
    leaves = {p["pid"] for p in up_tree.status()["processes"] if p["role"] == "leaf"}
    victim = up_tree.start([sys.executable, CLIENT, "naps", "40", "100"])
    assert wait_for(lambda: up_tree.status()["holder"] == victim.pid, 30)
    time.sleep(0.5)                                 # its tasks are on the leaves
    os.kill(victim.pid, signal.SIGKILL)
    finish(victim, 10)
    out, _ = up_tree.client("fib", "16")
    assert out["result"] == 987 and out["attached"] is True
    assert set(out["leaves"]) == leaves             # the same leaves, still warm
    st = up_tree.status()
    assert st["holder"] is None and st["restarts"] == 0 and st["runs"] == 1


def test_a_failing_task_is_the_scripts_error_and_the_tree_goes_on(up_tree):
    out, _ = up_tree.client("fail")
    assert out["error"] == "TaskError" and "no 3 here" in out["message"]
    assert out["cause"] == "ValueError('no 3 here')"
    again, _ = up_tree.client("fib", "15")
    assert again["result"] == 610 and again["attached"] is True
    assert up_tree.status()["restarts"] == 1        # its leaf waited to be stopped


def test_a_process_error_ends_that_job_only(up_tree):
    """A leaf that cannot load a script's functions says why; the tree stays up (its
    leaves are spawned afresh once the script lets go) and the next script runs."""
    script = os.path.join(ROOT, "tests", "scripts", "unbuildable_kernel.py")
    code, out, err = up_tree.command(sys.executable, script, "--catch")
    assert code == 0, err
    first, second = out.splitlines()[:2]
    assert first.startswith("ProcessError|leaf|loading the job's functions|")
    assert second == "next 610"
    assert "attached to the warm tree" in err
    again, _ = up_tree.client("fib", "15")
    assert again["result"] == 610 and again["attached"] is True
    assert up_tree.status()["restarts"] == 1


def test_what_tasks_print_reaches_the_attached_script(up_tree):
    script = os.path.join(ROOT, "tests", "scripts", "task_prints.py")
    code, out, err = up_tree.command(sys.executable, script, "30")
    assert code == 0, err
    lines = [l for l in (out + err).splitlines() if ") line 00" in l]
    assert len(lines) == 30 and all(l.startswith("(leaf ") for l in lines)
    assert "total 30" in err and "attached to the warm tree" in err


def test_dac_status_shows_the_shape_after_grow_and_shrink(up_tree):
    code, out, err = up_tree.dac("grow", "2")
    assert code == 0, err
    assert up_tree.status()["leaves"] == 4
    code, out, err = up_tree.dac("status")
    assert "4 leaves" in out
    code, out, err = up_tree.dac("shrink", "2")
    assert code == 0, err
    assert up_tree.status()["leaves"] == 2


def test_an_edited_module_runs_its_new_code(up_tree, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    source = ("import dac\nLOADED = {loaded!r}\nFACTOR = {factor}\n\n"
              "@dac.spawn(depth=1)\ndef value_sum(n):\n"
              "    if n <= 1:\n        return [FACTOR * n, LOADED]\n"
              "    a, b = dac.sync(value_sum(n - 1), value_sum(n - 2))\n"
              "    return [a[0] + b[0], min(a[1], b[1])]\n")
    mod = work / "warm_mod.py"
    mod.write_text(source.format(loaded="first", factor=1))
    first, _ = up_tree.client("module", cwd=str(work))
    again, _ = up_tree.client("module", cwd=str(work))
    assert first["result"] == [3, "first"] and again["result"] == [3, "first"]
    time.sleep(0.01)
    mod.write_text(source.format(loaded="second", factor=10))
    edited, _ = up_tree.client("module", cwd=str(work))
    assert edited["result"] == [30, "second"]


# when the tree is gone or must not be used ----------------------------------------
def test_a_killed_tree_falls_back_to_a_tree_of_its_own(up_tree):
    server = up_tree.info()["pid"]
    os.kill(server, signal.SIGKILL)
    assert wait_for_no_processes(up_tree.tag, timeout=10) == {}     # leaves' watchdog
    out, err = up_tree.client("fib", "15")
    assert out["result"] == 610 and out["attached"] is False and out["spawns"] == 2
    assert not os.path.exists(os.path.join(up_tree.folder, "tree.json"))


def test_a_tree_that_does_not_answer_is_passed_over(up_tree):
    server = up_tree.info()["pid"]
    os.kill(server, signal.SIGSTOP)
    try:
        out, err = up_tree.client("fib", "15")
    finally:
        os.kill(server, signal.SIGCONT)
    assert out["result"] == 610 and out["attached"] is False
    assert f"the warm tree (pid {server}) does not answer" in err
    assert err.count("does not answer") == 1            # its 5 s wait is paid once
    again, _ = up_tree.client("fib", "15")          # awake again, it serves
    assert again["attached"] is True and again["result"] == 610


def _tree_file(folder, **info):
    from stealing.warm.folder import write_tree_file
    os.makedirs(folder, mode=0o700, exist_ok=True)
    base = {"pid": os.getpid(), "uid": os.getuid(), "leaves": 2,
            "socket": os.path.join(folder, "tree.sock")}
    return write_tree_file(folder, dict(base, **info))


def test_a_tree_file_others_may_write_is_refused(tmp_path, monkeypatch, capfd):
    """Never read: a run says why and spawns a tree of its own; dac status refuses."""
    import dac
    from dac import warm_tree as warm
    folder = str(tmp_path / "tree")
    path = _tree_file(folder)
    os.chmod(path, 0o666)
    monkeypatch.setenv("DAC_TREE_DIR", folder)
    monkeypatch.setenv("DAC_ATTACH", "1")
    report = dac.run_report(dac_fib, 10, procs=2)
    assert report.result == 55 and report.stats["attached"] is False
    err = capfd.readouterr().err
    assert f"dac's warm tree file {path} cannot be trusted: others may use it (mode " \
           f"0666)" in err and "this run starts a tree of its own" in err
    with pytest.raises(dac.DacError, match=r"tree\.json cannot be trusted: others may "
                       r"use it \(mode 0666\)"):
        warm.status()


def test_another_users_tree_file_is_refused(tmp_path, monkeypatch):
    import dac
    from stealing.warm.folder import read_tree_file
    folder = str(tmp_path / "tree")
    _tree_file(folder)
    real = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real + 4242)
    with pytest.raises(dac.DacError, match=rf"belongs to uid {real}, not to you"):
        read_tree_file(folder)


def test_a_wrong_tree_file_is_refused_with_what_is_wrong(tmp_path):
    import dac
    from stealing.warm.folder import TreeFileError, read_tree_file
    folder = str(tmp_path / "tree")
    path = _tree_file(folder)
    with open(path, "w") as f:
        f.write("{not json")
    with pytest.raises(TreeFileError, match=r"tree\.json cannot be read"):
        read_tree_file(folder)
    with open(path, "w") as f:
        json.dump({"pid": "abc", "uid": 0}, f)
    with pytest.raises(TreeFileError, match=r"not a dac tree file: pid \(str\), "
                       r"started_ticks \(missing\), socket \(missing\), leaves"):
        read_tree_file(folder)
    os.chmod(folder, 0o777)
    with pytest.raises(dac.DacError, match=r"folder .* \(mode 0777\)"):
        read_tree_file(folder)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another user")
def test_another_user_cannot_attach(up_tree):
    sock_path = up_tree.info()["socket"]
    pid = os.fork()
    if pid == 0:                                    # pragma: no cover (child)
        import socket
        code = 0
        try:
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(sock_path)
            code = 1                                # it should not get this far
            s.sendall(b"x")
            if s.recv(1) == b"":
                code = 2
        except OSError:
            code = 0
        os._exit(code)
    _, raw = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(raw) == 0


import dac  # noqa: E402


@dac.spawn
def dac_fib(n):
    if n < 2:
        return n
    a, b = dac.sync(dac_fib(n - 1), dac_fib(n - 2))
    return a + b


def test_dac_own_modules_are_never_taken_for_a_script_s():
    """A warm leaf forgets a script's modules when another script comes (a project's
    ``utils`` must not serve the next one). dac's own modules are the installation's
    even from a checkout that is not installed (an editable install). They were taken
    for a script's there: a leaf could then forget and import
    ``stealing.transport.protocol`` again, making a second ``Results`` class (a likely
    cause of the "not the same object" pickling error a full test run once saw)."""
    from stealing.roles.script_env import ScriptModules
    modules = ScriptModules()
    for name in ("stealing.transport.protocol", "dac.spawn", "launcher.cli"):
        assert modules._is_script(name, importlib.import_module(name)) is None, name


def test_a_warm_leaf_judges_each_module_once(tmp_path, monkeypatch):
    """A warm leaf notes the script modules a job loaded at the job's end: a module
    is judged (its file's real path) once, not at every job (it resolved the paths of
    all ~530 modules of a leaf with numba again, 14 ms a job), a module loaded since
    is judged and stamped, and a forgotten one is judged again when imported afresh;
    the judged modules are not held once gone (their clones must be free to go)."""
    import gc
    import weakref

    from stealing.roles import script_env
    (tmp_path / "dac_judged_mod.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    modules = script_env.ScriptModules()
    modules.note()
    modules.note()      # (the first imported sysconfig's data, judged now)
    modules.stamps.clear()      # the test's own helpers: never forgotten here
    calls: list[str] = []
    real = os.path.realpath
    monkeypatch.setattr(script_env.os.path, "realpath",
                        lambda p: calls.append(p) or real(p))
    try:
        modules.note()
        assert calls == []
        module = importlib.import_module("dac_judged_mod")
        modules.note()
        assert calls == [module.__file__]
        assert modules.stamps["dac_judged_mod"][0] == real(module.__file__)
        gone = weakref.ref(module)
        del module
        (tmp_path / "dac_judged_mod.py").write_text("X = 22\n")   # edited
        assert modules.refresh() == ["dac_judged_mod"]
        gc.collect()
        assert gone() is None
        assert importlib.import_module("dac_judged_mod").X == 22
        modules.note()
        assert "dac_judged_mod" in modules.stamps
    finally:
        sys.modules.pop("dac_judged_mod", None)


@pytest.mark.parametrize("how", ["ctrl-c", "sigkill"])
def test_dac_up_ended_while_its_leaves_start_leaves_no_tree(how, tmp_path, monkeypatch):
    """The server runs in a session of its own (a Ctrl-C in the terminal does not reach
    it). `dac up` interrupted while its leaves start stops the server it started; a
    `dac up` that cannot (SIGKILL, as `timeout` or an interrupted `subprocess.run`
    sends) still leaves no tree: the server sees its pipe close before `dac up`
    acknowledged the tree, and ends with what it spawned."""
    from dac import warm_tree as warm
    folder = str(tmp_path / "tree")
    monkeypatch.setenv("DAC_TREE_DIR", folder)     # launch's environment takes it
    tag = new_tag()
    proc = launch([DAC, "up", "--procs", "2"], tag, cwd=ROOT)

    def servers():
        return [p for p in tagged_pids(tag, python_only=True) if warm._is_server(p)]

    assert wait_for(servers, 60)
    time.sleep(0.3)                                 # its tree is being spawned
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)          # what a terminal's Ctrl-C does
        code, out, err, seconds = finish(proc, 60)
        assert code not in (0, None) and seconds < 30, (code, out, err)
    else:
        proc.kill()
        finish(proc, 10)
    assert wait_for_no_processes(tag, timeout=30) == {}
    # (the leaves go first; with nobody waiting for it, the server ends after them)
    assert wait_for(lambda: not servers(), 30) and warm.status() is None


def test_dac_up_interrupted_while_a_spawn_holds_its_server_ends_it_without_waiting(
        tmp_path, monkeypatch):
    """MPI holds the server in a spawn (here a leaf that never reaches MPI_Init):
    `dac up`'s SIGTERM to it waited for the spawn's return, and its SIGKILL 10 s
    later left MPI's shared memory in /dev/shm. The spawn's watcher ends it 2 s on."""
    from dac import warm_tree as warm
    from proctools import STALLED_CHILD, assert_no_new_shm, mpi_shm_files, tagged_env
    folder = str(tmp_path / "tree")
    (tmp_path / "sitecustomize.py").write_text(STALLED_CHILD)
    stalled = tmp_path / "stalled"
    monkeypatch.setenv("DAC_TREE_DIR", folder)
    monkeypatch.setenv("DAC_SPAWN_TIMEOUT", "100")
    monkeypatch.setenv("DAC_TEST_STALLED", str(stalled))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(tmp_path), tagged_env("x")["PYTHONPATH"]]))
    before = mpi_shm_files()
    tag = new_tag()
    proc = launch([DAC, "up", "--procs", "2"], tag, cwd=ROOT)
    assert wait_for(lambda: stalled.exists() and stalled.read_text(), 60)
    time.sleep(1.0)                 # its sibling in MPI_Init, the server in the spawn
    os.killpg(proc.pid, signal.SIGINT)              # what a terminal's Ctrl-C does
    code, out, err, seconds = finish(proc, 60)
    assert code in (130, -signal.SIGINT) and seconds < 8, (code, seconds, err)
    assert wait_for_no_processes(tag, timeout=10) == {}
    assert warm.status() is None
    with open(os.path.join(folder, "tree.log")) as f:
        assert "dac: interrupted (SIGTERM) while starting 2 process(es) on this " \
               "machine" in f.read()
    assert_no_new_shm(before)


def test_a_server_whose_starter_ends_unacknowledged_stops_after_it_is_up(tmp_path,
                                                                          monkeypatch):
    """Even once its tree is up and the tree file written, a server whose `dac up`
    never acknowledged it (ended between the tree file and its report) stops."""
    import subprocess
    from dac import warm_tree as warm
    from proctools import tagged_env
    folder = str(tmp_path / "tree")
    monkeypatch.setenv("DAC_TREE_DIR", folder)
    from stealing.warm import folder as W
    tag = new_tag()
    lock = W.take_up_lock(W.make_tree_dir())        # as `dac up` takes it
    starter, ack = os.pipe()
    spec = json.dumps({"topology": None, "options": {"procs": 2, "preload": []},
                       "lock_fd": lock, "starter_fd": starter})
    proc = subprocess.Popen([sys.executable, "-m", "dac.warm_tree", spec], cwd=ROOT,
                            env=tagged_env(tag), pass_fds=(lock, starter),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    os.close(starter)
    os.close(lock)
    try:
        assert wait_for(lambda: os.path.exists(os.path.join(folder, "tree.json")), 60)
        assert warm.status()["leaves"] == 2         # up and answering
    finally:
        os.close(ack)                               # `dac up` gone, nothing said
    assert proc.wait(30) is not None
    assert wait_for_no_processes(tag, timeout=30) == {}
    assert warm.status() is None
