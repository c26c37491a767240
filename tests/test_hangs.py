"""What hung or misbehaved in leaves that serial Python handles: stdin, leftover
threads, sys.argv, recursion limits, a python started without its venv on PATH, and
Ctrl-C under ``dac run`` with routers."""

import os
import re
import signal
import sys

import pytest

from proctools import (
    STALLED_CHILD,
    assert_no_new_shm,
    dac_processes,
    finish,
    launch,
    marked_pids,
    mpi_shm_files,
    new_tag,
    tagged_env,
    wait_for,
    wait_for_no_processes,
)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ODD = os.path.join(HERE, "scripts", "odd_tasks.py")
LONG_RUN = os.path.join(HERE, "scripts", "long_run.py")


def run_script(args, timeout=60, env=None):
    tag = new_tag()
    if env is None:
        proc = launch(args, tag, cwd=ROOT)
    else:
        import subprocess
        proc = subprocess.Popen(args, env=dict(env, DAC_TEST_TAG=tag), cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
    code, out, err, seconds = finish(proc, timeout)
    assert wait_for_no_processes(tag, timeout=10) == {}
    return code, out, err, seconds


def test_input_in_a_task_raises_eof_error_at_once():
    code, out, err, seconds = run_script([sys.executable, ODD, "input"], timeout=60)
    m = re.search(r"error EOFError: EOF when reading a line after ([\d.]+) s", out)
    assert m, (out, err)
    assert code == 0 and float(m.group(1)) < 20


def test_a_thread_left_running_by_a_task_does_not_keep_anything_alive():
    code, out, err, seconds = run_script([sys.executable, ODD, "thread"], timeout=60)
    assert code == 0 and "values (0, 1, 2, 3)" in out, (out, err)
    assert seconds < 30          # the leaves' threads sleep 300 s


def test_tasks_see_the_scripts_argv():
    code, out, err, _ = run_script([sys.executable, ODD, "argv", "--flag", "x y"])
    assert code == 0, err
    argv = [ODD, "argv", "--flag", "x y"]
    assert f"values {tuple([argv] * 4)!r}" in out, out


def test_leaves_take_the_scripts_recursion_limit():
    code, out, err, _ = run_script([sys.executable, ODD, "recursion"])
    assert code == 0 and "values (2500, 2500, 2500, 2500)" in out, (out, err)


def test_a_venv_python_run_by_full_path_without_the_venv_on_path():
    # IDEs, cron and systemd start a venv's python by its full path, PATH untouched:
    # MPICH's singleton start used to look for mpiexec on PATH and then hang
    env = {k: v for k, v in tagged_env("x").items() if k not in ("VIRTUAL_ENV",)}
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and os.path.abspath(p) != os.path.abspath(bindir)
                                  and not os.access(os.path.join(p, "mpiexec"), os.X_OK))
    code, out, err, seconds = run_script(
        [sys.executable, "examples/fib.py", "15"], timeout=60, env=env)
    assert code == 0 and "fib(15) = 610" in out, (out, err)
    assert "PMI" not in err


def test_one_ctrl_c_under_dac_run_with_routers_is_one_keyboard_interrupt(tmp_path):
    tag = new_tag()
    mark = str(tmp_path / "marks")
    proc = launch([sys.executable, "-c", "import sys; from launcher.cli import main; "
                   "sys.exit(main())", "run", LONG_RUN, "5", "400", "0.25", mark], tag,
                  cwd=ROOT)
    assert wait_for(lambda: len(marked_pids(mark) & set(dac_processes(tag))) >= 5, 60)
    os.killpg(proc.pid, signal.SIGINT)          # what a terminal's Ctrl-C does
    code, out, err, seconds = finish(proc, 20)
    assert wait_for_no_processes(tag, timeout=5) == {}
    assert code != 0 and seconds < 15 and "finished" not in out
    assert err.count("KeyboardInterrupt") == 1, err
    assert err.count("Traceback") == 1, err
    assert "sock write error" not in err and "[proxy" not in err, err


UNREACHABLE = """[[clusters]]
name = "far"
hosts = [{ name = "127.0.0.2", slots = 2 }]
"""


def _port_22_open(host: str) -> bool:
    import socket
    try:
        socket.create_connection((host, 22), timeout=2).close()
        return True
    except OSError:
        return False


def test_a_host_that_resolves_but_cannot_be_reached_is_refused_before_any_spawn(tmp_path):
    if _port_22_open("127.0.0.2"):
        import pytest
        pytest.skip("an ssh server answers on 127.0.0.2 here")
    topo = tmp_path / "far.toml"
    topo.write_text(UNREACHABLE)
    env = {k: v for k, v in tagged_env("x").items()
           if not k.startswith(("HYDRA_", "SLURM_"))}
    code, out, err, seconds = run_script(
        [sys.executable, "-c", "import sys; from launcher.cli import main; "
         "sys.exit(main())", "run", "--topology", str(topo), "examples/fib.py", "15"],
        timeout=60, env=env)
    assert code == 2 and seconds < 30, (out, err)
    assert f"dac: {topo}: clusters[far].hosts: host '127.0.0.2' resolves but cannot be " \
           f"reached: its ssh port 127.0.0.2:22 does not answer" in err


def test_a_spawn_that_never_returns_ends_the_run_with_a_clear_message(tmp_path):
    # a launcher that hangs (as ssh to a host that stopped answering does): MPICH's
    # spawn waits forever; dac's deadline ends the run and everything it started
    launcher = tmp_path / "hang.sh"
    pids = tmp_path / "launcher.pid"
    launcher.write_text(f"#!/bin/sh\necho $$ >> {pids}\nexec sleep 300\n")
    launcher.chmod(0o755)
    topo = tmp_path / "far.toml"
    topo.write_text(UNREACHABLE)
    env = dict(tagged_env("x"), HYDRA_LAUNCHER="ssh", HYDRA_LAUNCHER_EXEC=str(launcher),
               DAC_SPAWN_TIMEOUT="3")
    code, out, err, seconds = run_script(
        [sys.executable, "-c", "import sys; from launcher.cli import main; "
         "sys.exit(main())", "run", "--topology", str(topo), "examples/fib.py", "15"],
        timeout=60, env=env)
    assert code == 1 and seconds < 30, (out, err)
    assert "dac: starting 2 process(es) on 127.0.0.2 did not finish within 3 s " \
           "(DAC_SPAWN_TIMEOUT)" in err
    started = [int(p) for p in pids.read_text().split()]
    assert started
    assert wait_for(lambda: not any(os.path.exists(f"/proc/{p}") for p in started), 5)


def test_a_spawn_that_times_out_leaves_no_shared_memory_behind(tmp_path):
    # the children the deadline killed had made MPICH's node segment (2 MB for two;
    # 270 MB for 256 leaves on this machine): it stayed in /dev/shm after the run
    (tmp_path / "sitecustomize.py").write_text(STALLED_CHILD)
    before = mpi_shm_files()
    env = tagged_env("x")
    env.update(PYTHONPATH=os.pathsep.join([str(tmp_path), env["PYTHONPATH"]]),
               DAC_SPAWN_TIMEOUT="10")
    code, out, err, seconds = run_script(
        [sys.executable, "examples/fib.py", "15"], timeout=60, env=env)
    assert code == 1, (out, err)
    assert "dac: starting 2 process(es) on this machine did not finish within 10 s " \
           "(DAC_SPAWN_TIMEOUT): a process did not reach MPI_Init, or 2 processes in " \
           f"one call are too many for this machine's {os.cpu_count()} core(s)" in err
    assert_no_new_shm(before)


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_signal_during_a_spawn_that_does_not_return_ends_the_run(tmp_path, how):
    # MPI_Comm_spawn holds the root until it returns: Python ran the handler only
    # then (a spawn of 256 processes on 2 cores took minutes), or at the deadline;
    # now the spawn's watcher ends the run 2 s on (GRACE_S)
    import subprocess
    import time
    (tmp_path / "sitecustomize.py").write_text(STALLED_CHILD)
    stalled = tmp_path / "stalled"
    before = mpi_shm_files()
    tag = new_tag()
    env = tagged_env(tag)
    env.update(PYTHONPATH=os.pathsep.join([str(tmp_path), env["PYTHONPATH"]]),
               DAC_SPAWN_TIMEOUT="100", DAC_TEST_STALLED=str(stalled))
    proc = subprocess.Popen([sys.executable, "examples/fib.py", "15"], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert wait_for(lambda: stalled.exists() and stalled.read_text(), 60)
    time.sleep(1.0)                 # its sibling in MPI_Init, the root in the spawn
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)      # what a terminal's Ctrl-C does
    else:
        os.kill(proc.pid, signal.SIGTERM)
    code, out, err, seconds = finish(proc, 60)
    assert wait_for_no_processes(tag, timeout=10) == {}
    assert wait_for(lambda: not os.path.exists(f"/proc/{stalled.read_text()}"), 5)
    name, status = ("Ctrl-C", 130) if how == "ctrl-c" else ("SIGTERM", 143)
    assert code == status and seconds < 20, (code, seconds, err)
    assert f"dac: interrupted ({name}) while starting 2 process(es) on this machine" \
        in err, err
    assert_no_new_shm(before)


EXITING = os.path.join(HERE, "scripts", "exiting_task.py")


@pytest.mark.parametrize("depth", [0, 2, 3])
def test_sys_exit_in_a_task_ends_the_program_as_in_plain_python(depth):
    """One behaviour at every depth: the caller gets the task's SystemExit, so the
    script ends with its status (before: raw on the root, a TaskError on a leaf)."""
    code, out, err, _ = run_script([sys.executable, EXITING, "exit", str(depth)])
    assert code == 3, (out, err[-2000:])
    assert "not reached" not in out and "Error" not in err, err[-2000:]


@pytest.mark.parametrize("depth", [0, 2, 3])
def test_keyboard_interrupt_raised_by_a_task_reaches_the_caller_as_such(depth):
    code, out, err, _ = run_script([sys.executable, EXITING, "interrupt", str(depth)])
    assert code in (130, -signal.SIGINT), (code, err[-2000:])
    assert err.rstrip().endswith("KeyboardInterrupt"), err[-2000:]
    if depth:       # raised from the TaskError that says which call and where
        assert "TaskError: task walk(2, " in err and "raised KeyboardInterrupt" in err, \
            err[-2000:]
        assert "leaf pid" in err


STUCK_FINALIZE = """
import time
import dac
from stealing.transport import mpi

@dac.spawn
def double(n):
    return 2 * n

print(dac.run(double, 21, procs=2), flush=True)
mpi.CLOSE_S = 2.0
mpi._state["MPI"].Finalize = lambda: time.sleep(300)   # as MPICH's, waiting on a peer
"""


def test_an_mpi_finalize_that_never_returns_ends_the_process_with_a_message():
    # MPI_Finalize spins inside MPICH while a peer cannot do its part, where no
    # Ctrl-C reaches Python: a bound ends the process instead of a silent hang
    code, out, err, seconds = run_script([sys.executable, "-c", STUCK_FINALIZE])
    assert out.strip() == "42", (out, err)
    assert code == 1 and seconds < 30, (code, seconds, err)
    assert "dac: MPI_Finalize did not return within 2 s (a process of a run ended " \
           "without closing its link?): exiting without it. Ending the run" in err, err


def test_a_deadline_ends_a_call_that_cannot_return_as_soon_as_its_check_says_so():
    script = ("import time\nfrom stealing.transport.deadline import Deadline\n"
              "began = time.monotonic()\n"
              "with Deadline(1.0, 'never'):\n    time.sleep(0.2)\n"
              "print('returned in time', flush=True)\n"
              "with Deadline(60.0, 'the timeout', lambda: 'a peer was lost' if "
              "time.monotonic() - began > 0.5 else None):\n    time.sleep(300)\n")
    code, out, err, seconds = run_script([sys.executable, "-c", script])
    assert out == "returned in time\n" and code == 1 and seconds < 10, (out, err)
    assert re.fullmatch(r"dac: a peer was lost\. Ending the run \(pid \d+\)\.\n", err), err
