"""dac under a real Slurm: a single-node cluster made from Debian's packages.

``tests/slurm/single_node.sh`` installs slurmctld, slurmd and munge where they are
missing, configures one node (this machine) and starts the daemons. The tests then run
N-Queens the two ways a Slurm user would: ``sbatch`` of a script whose root spawns its
tree (the batch step is an MPI singleton), and ``srun -n 3`` (inside ``sbatch`` too),
where the ranks are the tree and nothing is spawned. A task alone under ``srun`` is
refused a spawn, with the way that works named. Skipped, with the script's reason,
only where Slurm cannot be installed or started (not root, no apt).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from proctools import new_tag, tagged_env, tagged_pids, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(HERE)
SETUP = os.path.join(HERE, "slurm", "single_node.sh")
NQUEENS = os.path.join(CHECKOUT, "examples", "nqueens.py")
N, SOLUTIONS = 10, 724
TIMEOUT = 180


@pytest.fixture(scope="module")
def slurm():
    was_up = subprocess.run(["pgrep", "-x", "slurmctld"], capture_output=True).returncode == 0
    try:
        done = subprocess.run(["sh", SETUP], capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"Slurm could not be set up here: {exc}")
    if done.returncode != 0 or "ready" not in done.stdout:
        reason = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
        print(f"\nSlurm tests skipped: {reason[0]}")
        pytest.skip(f"Slurm could not be set up here: {reason[0]}")
    yield
    if not was_up:
        subprocess.run(["sh", SETUP, "stop"], capture_output=True, timeout=60)


def run(args: list[str], tag: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT,
                          env=tagged_env(tag), cwd=CHECKOUT)


def sbatch(tmp_path, body: str, tag: str) -> str:
    """Submit a batch script of 3 tasks running ``body`` and wait for it; its output."""
    out = tmp_path / "job.out"
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\n#SBATCH -n 3\n#SBATCH -o {out}\n{body}\n")
    done = run(["sbatch", "--wait", str(script)], tag)
    text = out.read_text() if out.exists() else ""
    assert done.returncode == 0, f"sbatch: {done.stdout}{done.stderr}\njob output:\n{text}"
    return text


def summary(out: str) -> tuple[int, int]:
    """How many times the answer line came, and the run's spawn count."""
    answers = out.count(f"{N}-queens: {SOLUTIONS} solutions")
    m = re.search(r"start-up [\d.]+ s, (\d+) spawns", out)
    assert m, out
    return answers, int(m[1])


def test_sbatch_spawns_the_tree_from_the_batch_step(slurm, tmp_path):
    tag = new_tag()
    out = sbatch(tmp_path, f"{sys.executable} {NQUEENS} {N} --procs 2", tag)
    assert summary(out) == (1, 2), out
    assert wait_for(lambda: not tagged_pids(tag), timeout=10.0), tagged_pids(tag)


def test_srun_ranks_in_sbatch(slurm, tmp_path):
    tag = new_tag()
    out = sbatch(tmp_path, f"srun {sys.executable} {NQUEENS} {N}", tag)
    assert summary(out) == (1, 0), out                 # once, nothing spawned
    assert "leaf" in out and out.count("\nleaf ") == 2, out
    assert wait_for(lambda: not tagged_pids(tag), timeout=10.0), tagged_pids(tag)


def test_srun_ranks(slurm):
    tag = new_tag()
    done = run(["srun", "-n", "3", sys.executable, NQUEENS, str(N)], tag)
    assert done.returncode == 0, done.stdout + done.stderr
    assert summary(done.stdout) == (1, 0), done.stdout
    assert wait_for(lambda: not tagged_pids(tag), timeout=10.0), tagged_pids(tag)


def test_srun_runs_an_unseen_script_on_three_processes(slurm, tmp_path):
    from test_ranks import SOLUTIONS as ANSWERS
    from test_ranks import launched, reports
    code, out, err, most, left = launched(tmp_path, ["srun", "-n", "3"], ["9"])
    assert code == 0, f"{out}\n{err}"
    assert [(r["result"], r["roles"], r["spawns"]) for r in reports(out)] == \
        [(ANSWERS[9], ["root", "leaf", "leaf"], 0)]
    assert out.count("script begins") == 1
    assert most == 3, f"{most} python processes at once"
    assert not left


def test_a_task_alone_under_srun_is_refused_a_spawn(slurm):
    tag = new_tag()
    done = run(["srun", "-n", "1", sys.executable, NQUEENS, "8"], tag)
    assert done.returncode != 0
    assert "could not be started on this machine (not tried: under srun a spawn asks " \
        "Slurm for a new job step" in done.stderr, done.stderr
    assert "srun -n P python script.py" in done.stderr
    assert wait_for(lambda: not tagged_pids(tag), timeout=10.0), tagged_pids(tag)
