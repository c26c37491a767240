"""What another local user, a crafted state file or an odd use cannot do to a run.

A second local user is created for the attacks (skipped, with the reason, where that
is impossible: not root, no useradd); its steps run as that user (``setpriv``), so what
it makes is really its own. Every test also checks that nothing of a run is left.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest
from proctools import (
    CHECKOUT,
    dac_processes,
    finish,
    launch,
    leftover_shm,
    new_tag,
    tagged_env,
    wait_for,
    wait_for_no_processes,
)

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")
DAC = [sys.executable, "-m", "launcher.cli"]
FIB15 = ("import sys\nsys.path.insert(0, %r)\nimport dac, programs\n"
         "print('fib', dac.run(programs.fib, 15, procs=2))\n"
         % os.path.join(CHECKOUT, "tests"))


# --- a second local user -----------------------------------------------------------
@pytest.fixture(scope="module")
def other_user():
    """``(name, uid, gid)`` of a user made for the test, removed after."""
    if os.getuid() != 0:
        pytest.skip("a second local user needs root to be made (useradd)")
    if not shutil.which("useradd") or not shutil.which("setpriv"):
        pytest.skip("a second local user needs useradd and setpriv")
    name = f"dacx{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["useradd", "-M", "-N", "-s", "/bin/sh", name],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make a second user: {made.stderr.strip()}")
    import pwd
    entry = pwd.getpwnam(name)
    yield name, entry.pw_uid, entry.pw_gid
    subprocess.run(["userdel", name], capture_output=True)


def as_user(user, *command, cwd=None):
    """Run ``command`` as the other user; returns the CompletedProcess."""
    _name, uid, gid = user
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}",
                           "--clear-groups", *command], capture_output=True,
                          text=True, cwd=cwd, timeout=60)


@pytest.fixture
def shared():
    """A world-writable folder standing for /tmp (``TMPDIR``, in a folder the other
    user may enter), a home of the user's own, and the environment of a run that
    uses them (no XDG or DAC folder set)."""
    import pathlib
    import tempfile
    top = pathlib.Path(tempfile.mkdtemp(prefix="dac-hostile-"))
    os.chmod(top, 0o755)
    tmp = top / "tmp"
    tmp.mkdir()
    os.chmod(tmp, 0o1777)
    home = top / "home"
    home.mkdir(mode=0o700)
    env = {"TMPDIR": str(tmp), "HOME": str(home)}
    yield tmp, home, env
    shutil.rmtree(top, ignore_errors=True)


def victim_env(tag: str, extra: dict) -> dict:
    env = tagged_env(tag)
    for var in ("XDG_RUNTIME_DIR", "DAC_STATE_DIR", "XDG_CACHE_HOME", "DAC_TREE_DIR"):
        env.pop(var, None)
    env.update(extra)
    return env


def run_as_victim(args, extra: dict, cwd=None, timeout=120):
    tag, began = new_tag(), time.time()
    proc = subprocess.run(args, env=victim_env(tag, extra), capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)
    assert wait_for_no_processes(tag, timeout=10) == {}
    assert leftover_shm(began) == []
    return proc


def test_a_squatted_state_folder_is_never_used(other_user, shared, tmp_path):
    """The other user makes <tmp>/dac-<uid> first, world-writable, with a run record
    naming a file of the victim through ``..``, and a launcher folder: the victim's
    run neither reads nor writes there, says where it keeps its state instead, and
    the file survives."""
    tmp, home, env = shared
    squat = tmp / f"dac-{os.getuid()}"
    precious = home / "precious"
    precious.write_text("keep me")
    planted = squat / "runs" / "999999-1-run-planted"
    attack = (f"mkdir -p {planted} && chmod -R 777 {squat} && "
              f"printf '/dev/shm/mpich_shm_m/../../../{precious}' > {planted}/shm-1 && "
              f"mkdir -p {squat}/runs/1-1-mpiexec-x && "
              f"printf '#!/bin/sh\\ntouch {tmp}/owned\\n' > {squat}/runs/1-1-mpiexec-x/mpiexec")
    made = as_user(other_user, "sh", "-c", attack)
    assert made.returncode == 0, made.stderr
    script = tmp_path / "s.py"
    script.write_text(FIB15)
    done = run_as_victim([sys.executable, str(script)], env)
    assert done.returncode == 0, done.stderr
    assert "fib 610" in done.stdout
    assert f"dac: {squat} is not yours alone (it belongs to uid {other_user[1]}" in \
        done.stderr
    state = home / ".cache" / "dac" / f"state-{socket.gethostname()}"
    assert f"keeping dac's state in {state} instead" in done.stderr
    assert precious.read_text() == "keep me"
    assert (planted / "shm-1").exists()             # never read, never removed
    assert not (tmp / "owned").exists()             # the planted launcher never ran
    assert sorted(os.listdir(squat / "runs")) == ["1-1-mpiexec-x", "999999-1-run-planted"]
    for folder, dirs, files in os.walk(state):     # what the victim made: its own alone
        for name in [folder, *(os.path.join(folder, f) for f in files)]:
            st = os.lstat(name)
            assert st.st_uid == os.getuid() and st.st_mode & 0o077 == 0, name


def test_a_squatted_tree_folder_does_not_deny_the_warm_tree(other_user, shared,
                                                            tmp_path):
    tmp, home, env = shared
    squat = tmp / f"dac-{os.getuid()}"
    made = as_user(other_user, "sh", "-c", f"mkdir -p {squat}/tree && chmod -R 777 {squat}")
    assert made.returncode == 0, made.stderr
    tag = new_tag()
    envs = victim_env(tag, dict(env, DAC_ATTACH="1"))
    try:
        up = subprocess.run(DAC + ["up", "--procs", "2"], env=envs, capture_output=True,
                            text=True, timeout=120, cwd=CHECKOUT)
        assert up.returncode == 0, up.stderr
        script = tmp_path / "s.py"
        script.write_text(FIB15)
        attached = subprocess.run([sys.executable, str(script)], env=envs,
                                  capture_output=True, text=True, timeout=120)
        assert "fib 610" in attached.stdout and "attached to the warm tree" in \
            attached.stderr, attached.stderr
        assert os.listdir(squat / "tree") == []
    finally:
        down = subprocess.run(DAC + ["down"], env=envs, capture_output=True, text=True,
                              timeout=60, cwd=CHECKOUT)
    assert "stopped after" in down.stdout, down.stderr
    assert wait_for_no_processes(tag, timeout=10) == {}


def test_the_other_user_cannot_use_the_warm_tree_socket(other_user, tmp_path):
    tag = new_tag()
    envs = dict(tagged_env(tag), DAC_TREE_DIR=str(tmp_path / "tree"))
    up = subprocess.run(DAC + ["up", "--procs", "1"], env=envs, capture_output=True,
                        text=True, timeout=120, cwd=CHECKOUT)
    assert up.returncode == 0, up.stderr
    try:
        sock = str(tmp_path / "tree" / "tree.sock")
        probe = as_user(other_user, sys.executable, "-c",
                        "import socket, sys\ns = socket.socket(socket.AF_UNIX)\n"
                        f"s.settimeout(5)\ns.connect({sock!r})\n", cwd="/")
        assert probe.returncode != 0 and "Permission denied" in probe.stderr
    finally:
        subprocess.run(DAC + ["down"], env=envs, capture_output=True, timeout=60,
                       cwd=CHECKOUT)
    assert wait_for_no_processes(tag, timeout=10) == {}


def test_a_shared_memory_name_that_climbs_out_is_never_removed(tmp_path):
    from stealing.host.shm import is_mpi_shm, unlink_shm
    precious = tmp_path / "precious"
    precious.write_text("x")
    crafted = f"/dev/shm/mpich_shm_m/../../..{precious}"
    assert not is_mpi_shm(crafted)
    unlink_shm([crafted, str(precious), f"/dev/shm/../..{precious}"])
    assert precious.exists()
    assert is_mpi_shm("/dev/shm/mpich_shm_3e1f3286_0")
    assert is_mpi_shm("/dev/shm/ucx_shm_posix_1e96f6d2")


# --- crafted state files -----------------------------------------------------------
@pytest.fixture
def tree_dir(tmp_path, monkeypatch):
    folder = tmp_path / "tree"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("DAC_TREE_DIR", str(folder))
    return folder


def dac_cmd(*args, timeout=60):
    return subprocess.run(DAC + list(args), capture_output=True, text=True,
                          timeout=timeout, cwd=CHECKOUT)


def write_tree(folder, **info):
    path = folder / "tree.json"
    path.write_text(json.dumps(info))
    os.chmod(path, 0o600)
    return path


def test_a_tree_file_naming_a_live_unrelated_process_is_stale(tree_dir):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        write_tree(tree_dir, pid=sleeper.pid, started_ticks=1, uid=os.getuid(),
                   leaves=2, socket=str(tree_dir / "tree.sock"))
        t0 = time.monotonic()
        down = dac_cmd("down")
        assert time.monotonic() - t0 < 5
        assert down.returncode == 0
        assert f"removed a stale warm tree file: its server (pid {sleeper.pid}) is " \
               f"gone" in down.stdout
        assert sleeper.poll() is None               # never signalled
        assert not (tree_dir / "tree.json").exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_damaged_tree_file_stops_nothing_and_dac_down_clears_it(tree_dir, tmp_path,
                                                                  monkeypatch):
    write_tree(tree_dir)
    (tree_dir / "tree.json").write_text("{not json")
    monkeypatch.setenv("DAC_ATTACH", "1")
    script = tmp_path / "s.py"
    script.write_text(FIB15)
    tag = new_tag()
    code, out, err, _ = finish(launch([sys.executable, str(script)], tag), 120)
    assert code == 0 and "fib 610" in out, err
    assert "tree.json cannot be read" in err and "starts a tree of its own" in err
    status = dac_cmd("status")
    assert status.returncode == 2 and "tree.json cannot be read" in status.stderr
    down = dac_cmd("down")
    assert down.returncode == 0 and "removed a damaged warm tree file" in down.stdout
    again = dac_cmd("status")
    assert again.returncode == 1 and "no warm tree is up" in again.stdout
    assert wait_for_no_processes(tag, timeout=10) == {}


def test_a_tree_file_with_a_wrong_type_says_which(tree_dir):
    write_tree(tree_dir, pid="abc", started_ticks=1, uid=os.getuid(), leaves=2,
               socket="x")
    status = dac_cmd("status")
    assert status.returncode == 2
    assert "is not a dac tree file: pid (str)" in status.stderr
    assert "Traceback" not in status.stderr


def test_two_dac_up_at_once_give_one_tree_and_one_refusal(tree_dir):
    tag = new_tag()
    env = dict(tagged_env(tag), DAC_TREE_DIR=str(tree_dir))
    procs = [subprocess.Popen(DAC + ["up", "--procs", "2"], env=env, cwd=CHECKOUT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    try:
        codes = sorted(r[2] for r in results)
        assert codes == [0, 2], results
        refused = next(r for r in results if r[2] == 2)[1]
        assert "already up" in refused or "another `dac up` is starting" in refused
        status = json.loads(dac_cmd("status", "--json").stdout)
        assert status["leaves"] == 2 and len(dac_processes(tag)) == 2
    finally:
        down = dac_cmd("down")
    assert "stopped after" in down.stdout
    assert wait_for_no_processes(tag, timeout=10) == {}
    import psutil  # noqa: F401  (ipykernel brings it) - no dac.warm_tree server left
    left = [p for p in psutil.process_iter(["cmdline", "environ"])
            if "dac.warm_tree" in " ".join(p.info["cmdline"] or [])
            and (p.info["environ"] or {}).get("DAC_TEST_TAG") == tag]
    assert left == []


def test_shrink_says_what_it_did_and_refuses_what_it_cannot(tree_dir):
    tag = new_tag()
    env = dict(tagged_env(tag), DAC_TREE_DIR=str(tree_dir))

    def cmd(*args):
        return subprocess.run(DAC + list(args), env=env, cwd=CHECKOUT,
                              capture_output=True, text=True, timeout=120)
    try:
        assert cmd("up", "--procs", "2").returncode == 0
        first = cmd("shrink", "1")
        assert first.returncode == 2
        assert "shrink 1: only 0 of the tree's 2 leaves can be let go" in first.stderr
        assert cmd("grow", "1").returncode == 0
        many = cmd("shrink", "3")
        assert many.returncode == 2 and "only 1 of the tree's 3 leaves" in many.stderr
        assert "nothing changed" in many.stderr
        one = cmd("shrink", "1")
        assert one.returncode == 0
        assert "let go 1 leaf: the warm tree pid" in one.stdout
        assert "has 2 leaves now" in one.stdout
    finally:
        cmd("down")
    assert wait_for_no_processes(tag, timeout=10) == {}


# --- odd uses -------------------------------------------------------------------------
def test_a_forked_child_cannot_use_its_parents_mpi_and_harms_nothing():
    tag, began = new_tag(), time.time()
    code, out, err, _ = finish(launch([sys.executable,
                                       os.path.join(SCRIPTS, "fork_after_run.py")], tag),
                               120)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "parent 610" and lines[1] == "kept 144"
    assert lines[2].startswith("child refused: this process (pid ")
    assert "was forked from pid" in lines[2] and "'spawn' or 'forkserver'" in lines[2]
    assert lines[3:] == ["kept again 233", "parent again 987"]
    assert wait_for_no_processes(tag, timeout=10) == {}
    assert leftover_shm(began) == []


def test_processes_a_task_started_end_with_their_leaf(tmp_path):
    marker = f"dac-orphan-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "s.py"
    script.write_text(
        "import subprocess, dac\n"
        "@dac.spawn(depth=1)\n"
        "def start(i):\n"
        f"    subprocess.Popen(['sleep', '300', {marker!r}], start_new_session=True,\n"
        "                     stderr=subprocess.DEVNULL)\n"
        "    return i\n"
        "@dac.spawn(depth=1)\n"
        "def all_of(n):\n"
        "    return sum(dac.sync([start(i) for i in range(n)]))\n"
        "print('sum', dac.run(all_of, 4, procs=2, root_helps=False))\n")
    code, out, err, _ = finish(launch([sys.executable, str(script)], new_tag()), 120)
    assert code == 0 and "sum 6" in out, err

    def sleepers():
        found = []
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(pid)
            except OSError:
                continue
        return found
    assert wait_for(lambda: not sleepers(), timeout=10), sleepers()


def test_options_and_paths_are_checked_before_anything_starts(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    bad = dac_cmd("run", "--fault-tolerant", "--max-attempts", "-1", str(script))
    assert bad.returncode == 2 and "must be an integer >= 1, got -1" in bad.stderr
    bad = dac_cmd("run", "--timeline", "out.xyz", str(script))
    assert bad.returncode == 2
    assert "timeline must be the path of an .html page or a .png image" in bad.stderr
    bad = dac_cmd("run", "--timeline", str(tmp_path / "no" / "t.html"), str(script))
    assert bad.returncode == 2 and "the folder" in bad.stderr and "does not exist" in \
        bad.stderr
    assert "ran" not in bad.stdout and "Traceback" not in bad.stderr
    binary = tmp_path / "t.toml"
    binary.write_bytes(bytes(range(256)))
    bad = dac_cmd("topology", "check", str(binary))
    assert bad.returncode == 2 and "is not a text file" in bad.stderr


def test_a_deleted_working_folder_is_a_clear_error(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    proc = subprocess.Popen(["/bin/sh", "-c", f"rmdir {gone} && exec {sys.executable} "
                             f"-m launcher.cli run {os.path.join(SCRIPTS, 'failing_line.py')}"],
                            cwd=str(gone), env=tagged_env(new_tag()),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "the current folder was deleted (or moved)" in err and "Traceback" not in err


def test_leftovers_of_a_killed_run_go_with_the_next_run(tmp_path):
    """A root killed by SIGKILL in the middle of a run cannot clean up: the next run
    of the same user removes its run folder and the MPI files it left."""
    from stealing.host.userdirs import runs_dir
    script = tmp_path / "long.py"
    script.write_text("import sys\nsys.path.insert(0, %r)\nimport dac\n"
                      "from nested_programs import sleep_tree\n"
                      "print(dac.run(sleep_tree, 10, 50.0, procs=2))\n"
                      % os.path.join(CHECKOUT, "tests"))
    tag, began = new_tag(), time.time()
    proc = launch([sys.executable, str(script)], tag)
    assert wait_for(lambda: len(dac_processes(tag)) >= 2, timeout=30)
    time.sleep(1.0)
    folders = [f for f in os.listdir(runs_dir()) if f.startswith(f"{proc.pid}-")]
    assert folders
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert wait_for_no_processes(tag, timeout=15) == {}
    second = tmp_path / "s.py"
    second.write_text(FIB15)
    code, out, err, _ = finish(launch([sys.executable, str(second)], new_tag()), 120)
    assert code == 0 and "fib 610" in out, err
    assert not [f for f in os.listdir(runs_dir()) if f.startswith(f"{proc.pid}-")]
    assert leftover_shm(began) == []
