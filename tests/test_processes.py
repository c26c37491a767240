"""No process of a run is left: after runs that pass, fail, or are interrupted."""

import json
import os
import signal
import subprocess
import sys
import time

import programs
import pytest
from proctools import (
    dac_processes,
    finish,
    launch,
    leftover_shm,
    marked_pids,
    new_tag,
    tagged_env,
    wait_for,
    wait_for_no_processes,
)

import dac
from stealing.transport.mpi_env import set_defaults as set_mpi_defaults

HERE = os.path.dirname(os.path.abspath(__file__))
LONG_RUN = os.path.join(HERE, "scripts", "long_run.py")


def test_runtime_processes_exist_while_open_and_end_after():
    assert wait_for_no_processes(timeout=5) == {}
    with dac.Runtime(procs=2) as rt:
        report = rt.run_report(programs.fib, 16)
        leaves = {p["pid"] for p in report.stats["processes"] if p["role"] == "leaf"}
        assert set(dac_processes()) == leaves and len(leaves) == 2
    assert wait_for_no_processes(timeout=5) == {}


def test_routers_and_leaves_end_after_a_run():
    with dac.Runtime(procs=5, branches=2, min_procs=2) as rt:     # 2 routers
        report = rt.run_report(programs.fib, 16)
        pids = {p["pid"] for p in report.stats["processes"] if p["role"] != "root"}
        assert len(pids) == 7
        assert set(dac_processes()) == pids
    assert wait_for_no_processes(timeout=5) == {}


def _switches(pid):
    """How many times ``pid`` was scheduled off a CPU: each wake-up counts one."""
    with open(f"/proc/{pid}/status") as f:
        return sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)


def test_the_monitors_of_an_idle_tree_never_wake():
    """A monitor sleeps until its child ends or the root does (the root's pidfd): one
    that looked twice a second made 128 leaves' monitors take 0.27-0.45 CPU-s of a
    6 s job on 2 cores, and kept every idle warm tree waking."""
    with dac.Runtime(procs=5, branches=2, min_procs=2) as rt:     # 2 routers, 5 leaves
        assert rt.run(programs.fib, 12) == 144
        workers = dac_processes()
        monitors = set(dac_processes(monitors=True)) - set(workers)
        assert len(workers) == 7 and len(monitors) == 7
        time.sleep(0.6)                     # (a monitor looks until its child's INIT)
        before = {pid: _switches(pid) for pid in monitors}
        time.sleep(1.6)                     # three looks, had they looked every 0.5 s
        assert {pid: _switches(pid) for pid in monitors} == before
    assert wait_for_no_processes(timeout=5) == {}


def test_no_process_left_after_dac_run():
    assert dac.run(programs.fib, 17, procs=2) == 1597
    assert wait_for_no_processes(timeout=5) == {}


def test_failed_run_ends_its_tree_and_the_next_run_builds_a_new_one():
    with dac.Runtime(procs=2) as rt:
        first = rt.run_report(programs.fib, 15)
        old = set(dac_processes())
        assert len(old) == 2
        with pytest.raises(dac.TaskError):
            rt.run(programs.divide_range, 0, 64, 9)
        assert wait_for_no_processes(timeout=5) == {}
        second = rt.run_report(programs.fib, 15)
        new = set(dac_processes())
        assert len(new) == 2 and not new & old
        assert first.result == second.result == 610
        assert second.stats["spawns"] == 2          # a new tree was spawned
    assert wait_for_no_processes(timeout=5) == {}


def test_no_process_left_after_spawn_per_batch_runs():
    # 64 naps of 0.03 s: the root helps only while the first two leaves start (a few
    # tenths of a second), so more than their first batches is left and leaves are
    # spawned again (with tasks of no length the root could eat the whole round)
    report = dac.run_report(programs.range_sum, 0, 64, 0.03, procs=2, leaf_mode="spawn",
                            depth=6)
    assert report.result == sum(range(64))
    assert report.stats["spawns"] >= 3
    assert report.stats["spawns"] == report.stats["batches"]   # one leaf per batch
    assert wait_for_no_processes(timeout=5) == {}


# --- interrupting the root -----------------------------------------------------------------
DAC_RUN = [sys.executable, "-c", "import sys; from launcher.cli import main; "
           "sys.exit(main())", "run"]


def start_long_run(tmp_path, procs, durations_or_n, secs=0.0, via_dac_run=False):
    """Starts scripts/long_run.py (by python, or by `dac run`); returns (process, tag,
    marker file)."""
    tag = new_tag()
    mark = str(tmp_path / "marks")
    head = DAC_RUN if via_dac_run else [sys.executable]
    proc = launch(head + [LONG_RUN, str(procs), str(durations_or_n), str(secs), mark],
                  tag)
    return proc, tag, mark


def wait_for_working_leaves(proc, tag, mark, count):
    """Waits until ``count`` processes other than the root have started tasks."""
    def working():
        pids = marked_pids(mark) - {proc.pid}
        return pids if len(pids) >= count else None

    leaves = wait_for(working, 60)
    if not leaves:
        proc.kill()
        pytest.fail(f"leaves never started tasks: {finish(proc, 10)}")
    assert leaves <= set(dac_processes(tag))
    return leaves


def test_ctrl_c_on_the_root_ends_the_run_and_every_process(tmp_path):
    proc, tag, mark = start_long_run(tmp_path, 2, 400, 0.25)
    wait_for_working_leaves(proc, tag, mark, 2)
    proc.send_signal(signal.SIGINT)
    code, out, err, seconds = finish(proc, 15)
    assert code is not None, f"the root did not exit within 15 s after SIGINT: {err}"
    assert code != 0
    assert "finished" not in out
    assert wait_for_no_processes(tag, timeout=5) == {}


def test_ctrl_c_with_routers_ends_every_process(tmp_path):
    proc, tag, mark = start_long_run(tmp_path, 5, 400, 0.25)
    wait_for_working_leaves(proc, tag, mark, 5)
    assert len(dac_processes(tag)) == 7
    proc.send_signal(signal.SIGINT)
    code, out, err, seconds = finish(proc, 15)
    assert code is not None and code != 0
    assert wait_for_no_processes(tag, timeout=5) == {}


def test_killing_the_root_leaves_no_process(tmp_path):
    t0 = time.time()
    proc, tag, mark = start_long_run(tmp_path, 2, 400, 0.25)
    wait_for_working_leaves(proc, tag, mark, 2)
    proc.kill()
    code, *_ = finish(proc, 10)
    assert code == -signal.SIGKILL
    assert wait_for_no_processes(tag, timeout=10) == {}
    # the killed root could not remove MPI's shared memory; the next root does
    assert dac.run(programs.fib, 10, procs=1) == 55
    assert leftover_shm(t0) == []


def test_ctrl_c_with_one_busy_leaf_raises_keyboard_interrupt(tmp_path):
    for attempt in range(3):            # timing-dependent: every attempt must pass
        tag = new_tag()
        mark = str(tmp_path / f"marks{attempt}")
        # two tasks, one per leaf: one returns at once, the other sleeps 30 s
        proc = launch([sys.executable, LONG_RUN, "2", "0,30", "0", mark, "persistent",
                       "1"], tag)
        wait_for_working_leaves(proc, tag, mark, 2)
        proc.send_signal(signal.SIGINT)
        code, out, err, seconds = finish(proc, 20)
        assert wait_for_no_processes(tag, timeout=5) == {}
        assert "KeyboardInterrupt" in err, f"exit code {code}, stderr {err[-500:]!r}"


def test_ctrl_c_to_the_process_group_of_a_singleton_leaves_nothing(tmp_path):
    # `python script.py` is an MPI singleton: the terminal's Ctrl-C reaches the whole
    # foreground group, but not the singleton's process manager (dac starts it in a
    # session of its own), so the script gets one KeyboardInterrupt and ends its tree
    proc, tag, mark = start_long_run(tmp_path, 2, 400, 0.25)
    wait_for_working_leaves(proc, tag, mark, 2)
    os.killpg(proc.pid, signal.SIGINT)
    code, out, err, seconds = finish(proc, 15)
    assert code != 0 and seconds < 15
    assert "finished" not in out
    assert err.count("KeyboardInterrupt") == 1, err
    assert wait_for_no_processes(tag, timeout=5) == {}


def test_ctrl_c_in_a_terminal_under_dac_run_raises_keyboard_interrupt(tmp_path):
    # `dac run` runs the script in its own process, as python does
    proc, tag, mark = start_long_run(tmp_path, 2, 400, 0.25, via_dac_run=True)
    # (the root may have marked tasks too): wait for leaves
    assert wait_for(lambda: len(marked_pids(mark) & set(dac_processes(tag))) >= 2, 60)
    os.killpg(proc.pid, signal.SIGINT)
    code, out, err, seconds = finish(proc, 15)
    assert wait_for_no_processes(tag, timeout=5) == {}
    assert code != 0 and seconds < 15
    assert "KeyboardInterrupt" in err, f"exit code {code}, stderr {err[-500:]!r}"
    assert "finished" not in out


def test_ctrl_c_in_the_middle_of_a_spawn_leaves_no_process_and_no_shared_memory():
    """The interrupt comes while MPI_Comm_spawn starts 16 leaves: the processes it
    started are unknown to the tree, yet they end, and the MPI shared memory they
    made goes (before: one segment left in /dev/shm each time). The script catches
    the KeyboardInterrupt once the spawn returns, or, where the spawn took 2 s more,
    the spawn's watcher ended the run (``stealing.transport.deadline``)."""
    tag, t0 = new_tag(), time.time()
    proc = launch([sys.executable, os.path.join(HERE, "scripts", "cut_spawn.py"), "16",
                   "0.3"], tag)
    code, out, err, _ = finish(proc, 60)
    assert code == 130 and ("interrupted" in out or "dac: interrupted (Ctrl-C) while "
                            "starting 16 process(es)" in err), (out, err[-2000:])
    assert wait_for_no_processes(tag, timeout=10) == {}
    assert leftover_shm(t0) == []


def test_a_leaf_sees_no_package_of_dac_as_a_top_level_module():
    """A spawned process puts the folder holding the ``stealing`` package on its path
    (for a checkout that is not installed), never the package's own folder: that made
    ``transport``, ``tree``, ``host`` (stealing's subpackages) top-level modules in
    every leaf, hiding the user's or an installed module of the same name."""
    names = ["transport", "tree", "host", "roles", "observe", "warm"]
    with dac.Runtime(procs=1) as rt:
        found = {name: rt.run(programs.module_origin, name) for name in names}
    assert found == dict.fromkeys(names), found
    assert dac.run(programs.module_origin, "stealing", procs=1).endswith(
        os.path.join("stealing", "__init__.py"))


MPI_ENV_SCRIPT = """\
import json, os, sys
sys.path.insert(0, {tests!r})
import dac
from programs import environment_variable
leaf = dac.run(environment_variable, "UCX_MEM_EVENTS", procs=1)
print(json.dumps([os.environ.get("UCX_MEM_EVENTS"), leaf]))
"""


@pytest.mark.parametrize("given, seen", [(None, "no"), ("yes", "yes")])
def test_mpi_starts_without_ucx_memory_hooks_unless_the_environment_asks(tmp_path,
                                                                         given, seen):
    """UCX's memory hooks cost about 40 ms of CPU a process when its library loads
    (``stealing.transport.mpi_env``): the root and every spawned process start MPI
    with ``UCX_MEM_EVENTS=no``, unless the user's environment says otherwise."""
    tag = new_tag()
    env = tagged_env(tag)
    env.pop("UCX_MEM_EVENTS", None)     # (this test process set it when MPI started)
    if given is not None:
        env["UCX_MEM_EVENTS"] = given
    script = tmp_path / "mpi_env.py"
    script.write_text(MPI_ENV_SCRIPT.format(tests=HERE))
    ran = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout.strip().splitlines()[-1]) == [seen, seen]
    assert wait_for_no_processes(tag, timeout=5) == {}


def test_mpi_environment_defaults_leave_what_the_user_set(monkeypatch):
    monkeypatch.setenv("UCX_LOG_LEVEL", "info")
    monkeypatch.delenv("UCX_MEM_EVENTS", raising=False)
    set_mpi_defaults()
    assert os.environ["UCX_LOG_LEVEL"] == "info"
    assert os.environ["UCX_MEM_EVENTS"] == "no"


@pytest.mark.parametrize("cut", [0, 5])
def test_ctrl_c_while_the_root_introduces_its_new_processes_ends_cleanly_and_soon(cut):
    """The interrupt comes after the spawn returned, as the root sends INIT to its
    8 leaves: those that got none yet take the STOP that comes instead and say BYE,
    so the tree stops at once and MPI finalizes. Before: they died of the unexpected
    STOP, the root waited 10 s for BYEs that never came, and MPI_Finalize crashed
    (exit code 139; on a slower machine it spun: a Ctrl-C that hung)."""
    tag, t0 = new_tag(), time.time()
    proc = launch([sys.executable, os.path.join(HERE, "scripts", "cut_introductions.py"),
                   "8", str(cut)], tag)
    code, out, err, _ = finish(proc, 60)
    assert code == 130 and "interrupted; stopped in" in out, (code, out, err[-2000:])
    stopped = float(out.split("stopped in ")[1].split()[0])
    assert stopped < 5, out
    assert wait_for_no_processes(tag, timeout=10) == {}
    assert leftover_shm(t0) == []


@pytest.mark.parametrize("cut", [0, 5])
def test_processes_whose_root_is_killed_before_their_init_end_with_it(cut):
    """The root dies (SIGKILL: no stop, no goodbye) as it sends INIT to its 8 new
    leaves: those it introduced end as any leaf whose root is gone (their monitor
    watches it), and those still waiting for their INIT, which know no root yet, are
    ended by MPI's process manager, which ends the job when the root's link to it
    closes. Nothing is left either way."""
    tag = new_tag()
    proc = launch([sys.executable, os.path.join(HERE, "scripts", "cut_introductions.py"),
                   "8", str(cut), "kill"], tag)
    code, out, err, _ = finish(proc, 60)
    assert code == -signal.SIGKILL and "killed" in out, (code, out, err[-2000:])
    assert wait_for_no_processes(tag, timeout=5) == {}
