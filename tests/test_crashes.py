"""A process of the run dies without a Python exception: the run ends with
``LostProcessError`` naming it, the user's shell lives on, nothing is left.

Every case runs as ``bash -c 'python script ...; echo after'``: MPICH's process manager
used to kill the root's whole process group (the shell included) when a spawned
process died, so a missing ``after`` shows a killed shell.
"""

import os
import re
import signal
import sys
import time

import pytest
from proctools import (
    dac_processes,
    finish,
    launch,
    leftover_shm,
    marked_pids,
    new_tag,
    wait_for,
    wait_for_no_processes,
)

HERE = os.path.dirname(os.path.abspath(__file__))
CRASH = os.path.join(HERE, "scripts", "crash_run.py")
DAC_RUN = f"{sys.executable} -c 'import sys; from launcher.cli import main; " \
          f"sys.exit(main())' run"


def in_shell(command: str, tag: str):
    return launch(["bash", "-c", f"{command}; echo after rc=$?"], tag,
                  cwd=os.path.dirname(HERE))


def crash(how: str, procs: int = 2, mode: str = "persistent", head: str = "",
          timeout: float = 60):
    tag, t0 = new_tag(), time.time()
    proc = in_shell(f"{head or sys.executable} {CRASH} {procs} {how} {mode}", tag)
    code, out, err, _ = finish(proc, timeout)
    return tag, t0, code, out, err


def lost_line(out: str) -> dict:
    m = re.search(r"^lost: (.*)$", out, re.M)
    assert m, out
    return dict(part.split("=", 1) for part in m.group(1).split(" ", 5))


def assert_nothing_left(tag, t0):
    assert wait_for_no_processes(tag, timeout=10) == {}
    assert leftover_shm(t0) == []


def test_os_exit_in_a_task_names_the_leaf_and_the_task_and_spares_the_shell():
    tag, t0, code, out, err = crash("exit")
    assert code == 0 and "after rc=1" in out, (out, err)
    lost = lost_line(out)
    assert lost["role"] == "leaf" and lost["exit_code"] == "7"
    assert lost["signal"] == "None" and lost["task"] == "crashing(3, 'exit', '')"
    assert re.search(r"LostProcessError: the run lost a process: leaf pid \d+ on \S+ "
                     r"exited with code 7 while running crashing\(3, 'exit', ''\)", err)
    assert "BAD TERMINATION" not in out + err
    assert_nothing_left(tag, t0)


def test_a_segfault_in_native_code_is_reported_with_its_signal():
    tag, t0, code, out, err = crash("segv")
    assert "after rc=1" in out, (out, err)
    lost = lost_line(out)
    assert lost["signal"] == "11" and lost["exit_code"] == "None"
    assert lost["task"] == "crashing(3, 'segv', '')"
    assert "killed by signal 11 (SIGSEGV)" in err
    assert_nothing_left(tag, t0)


def test_a_crash_in_a_spawn_per_batch_leaf():
    tag, t0, code, out, err = crash("exit", mode="spawn")
    assert "after rc=1" in out, (out, err)
    if "lost:" in out:
        assert lost_line(out)["exit_code"] == "7"
    else:       # the loss came while the root was starting the next leaf, which MPI
        # can no longer do: the root ends with a message instead of the exception
        assert re.search(r"dac: the run lost a process while starting 1 more on this "
                         r"machine: leaf pid \d+ on \S+ exited with code 7", err), err
    assert_nothing_left(tag, t0)


def test_a_crash_under_dac_run_names_the_leaf_not_the_root():
    tag, t0, code, out, err = crash("exit", head=DAC_RUN)
    assert "after rc=1" in out, (out, err)
    assert lost_line(out)["role"] == "leaf"
    assert "BAD TERMINATION" not in out + err
    assert_nothing_left(tag, t0)


@pytest.mark.parametrize("role", ["leaf", "router"])
def test_kill_9_of_a_process_from_outside(tmp_path, role):
    tag, t0 = new_tag(), time.time()
    mark = str(tmp_path / "marks")
    proc = in_shell(f"{sys.executable} {CRASH} 5 wait persistent {mark}", tag)
    def working_leaves():           # the root may run tasks too while leaves start
        leaves = marked_pids(mark) & set(dac_processes(tag))
        return leaves if len(leaves) == 5 else None

    leaves = wait_for(working_leaves, 60)
    assert leaves, finish(proc, 5)
    others = set(dac_processes(tag)) - leaves
    victim = min(others if role == "router" else leaves)
    assert len(others) == 2                         # procs=5: two routers
    os.kill(victim, signal.SIGKILL)
    code, out, err, seconds = finish(proc, 30)
    assert "after rc=1" in out, (out, err)
    lost = lost_line(out)
    assert lost["role"] == role and lost["pid"] == str(victim)
    assert lost["signal"] == "9" and "killed by signal 9 (SIGKILL)" in err
    assert_nothing_left(tag, t0)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_ending_the_root_after_its_runs_spares_the_shell(sig):
    tag, t0 = new_tag(), time.time()
    proc = in_shell(f"{sys.executable} {CRASH} 2 after", tag)
    pid = wait_for(lambda: _pid_of(proc), 60)
    assert pid, finish(proc, 5)
    os.kill(pid, sig)
    code, out, err, _ = finish(proc, 30)
    assert re.search(r"after rc=\d+", out), (out, err)       # the shell lived on
    assert_nothing_left(tag, t0)


def _pid_of(proc):
    """The root's pid, from the line the script prints after its run (value 28)."""
    lines = [proc.stdout.readline()]
    while lines[-1] and not lines[-1].startswith("pid "):
        lines.append(proc.stdout.readline())
    assert "value 28\n" in lines, lines
    return int(lines[-1].split()[1]) if lines[-1] else None


def test_no_spawn_after_a_lost_process_in_the_same_python():
    tag, t0 = new_tag(), time.time()
    script = (f"import sys, runpy\nsys.argv = [{CRASH!r}, '2', 'exit']\nimport dac\n"
              f"try:\n    runpy.run_path({CRASH!r}, run_name='__main__')\n"
              f"except dac.LostProcessError:\n    print('first run lost a leaf')\n"
              f"sys.path.insert(0, {HERE!r})\nimport programs\n"
              f"try:\n    dac.run(programs.fib, 15, procs=2)\n"
              f"except dac.DacError as exc:\n    print('second:', exc)\n")
    proc = launch([sys.executable, "-c", script], tag)
    rc, out, err, _ = finish(proc, 60)
    assert "first run lost a leaf" in out, (out, err)
    assert re.search(r"second: MPI in this process can no longer start processes: an "
                     r"earlier run lost leaf pid \d+ on \S+ \(exited with code 7\)", out)
    assert rc == 0
    assert_nothing_left(tag, t0)


def test_a_crash_in_the_figure_5_4_tree_leaves_no_shared_memory():
    # 14 leaves under 6 routers, most of them still starting when the task crashes:
    # their MPI shared-memory segments (12 files, 25 MB per crash before) must go too
    tag, t0, code, out, err = crash("exit", procs=14, timeout=120)
    assert "after rc=1" in out, (out, err)
    assert lost_line(out)["exit_code"] == "7"
    assert_nothing_left(tag, t0)
