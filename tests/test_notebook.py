"""dac in a Jupyter kernel, driven by nbclient as a notebook runs: a cell whose run
fails outside a task (a kernel that cannot be rebuilt in a leaf) raises a
``ProcessError`` in that cell only; the next cells run right in the same kernel, with
its state, what their tasks print shows in the cell, and a numba kernel defined in a
cell is cached."""

from __future__ import annotations

import os

import pytest
from proctools import CHECKOUT, new_tag, wait_for_no_processes

nbformat = pytest.importorskip("nbformat", reason="the notebook test needs nbformat "
                               "(the test extra)")
nbclient = pytest.importorskip("nbclient", reason="the notebook test needs nbclient "
                               "(the test extra)")

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")


def _kernel_cell() -> str:
    """unbuildable_kernel.py without its ``__main__`` part: a ``leaf=`` kernel whose
    global unpickles only in the process that made it (here: the Jupyter kernel)."""
    with open(os.path.join(SCRIPTS, "unbuildable_kernel.py")) as f:
        return f.read().split('if __name__ == "__main__":')[0] + "state = 42\n"


CELLS = [
    # 0: the kernel that cannot be rebuilt in a leaf, and some state
    _kernel_cell(),
    # 1: fails
    "dac.run(total, 1600, procs=2, depth=2, root_helps=False)",
    # 2: the same kernel runs the next run
    'print("fib", dac.run(plain, 15, procs=2), "state", state)',
    # 3: a kernel of a cell, cached; tasks print
    '''@njit(cache=True)
def cube(n):
    return n * n * n
@spawn
def cubes(n):
    print("cubes of", n)
    return cube(n)
@spawn(depth=1)
def all_cubes(k):
    return sum(sync([cubes(i) for i in range(k)]))
print("cubes", dac.run(all_cubes, 6, procs=2, root_helps=False))''',
]


def test_a_failing_cell_leaves_the_kernel_usable(tmp_path, monkeypatch):
    tag = new_tag()
    monkeypatch.setenv("DAC_TEST_TAG", tag)                 # the kernel's processes
    monkeypatch.setenv("DAC_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "xdg").mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))    # IPython's cache
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [CHECKOUT] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                                     allow_errors=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = [c.get("outputs", []) for c in nb.cells]
    assert not any(o["output_type"] == "error" for o in outputs[0] + outputs[2] +
                   outputs[3]), outputs
    [error] = [o for o in outputs[1] if o["output_type"] == "error"]
    assert error["ename"] == "ProcessError"
    assert error["evalue"].startswith("leaf pid ")
    assert "failed loading the job's functions: RuntimeError: LIMIT unpickles only" \
        in error["evalue"]
    text = lambda cell: "".join(o.get("text", "") for o in cell)     # noqa: E731
    assert "fib 610 state 42" in text(outputs[2])
    assert "cubes 225" in text(outputs[3])
    printed = [line for line in text(outputs[3]).splitlines()
               if line.startswith("(leaf ") and "cubes of" in line]
    assert sorted(int(line.split()[-1]) for line in printed) == list(range(6))
    # the cell's kernel is cached (numba finds the cell's source on the leaves too:
    # dac sends the lines with the function, so its IPython cache serves them)
    cached = [f for _, _, files in os.walk(tmp_path) for f in files]
    assert any(".cube-" in f and f.endswith(".nbi") for f in cached), cached
    assert wait_for_no_processes(tag, timeout=10) == {}
