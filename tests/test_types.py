"""The shape of the code of dac, stealing and launcher: every function annotated and the
type checker content (mypy, configured in pyproject.toml), no function longer than 50
lines, and an import inside a function only where it saves start-up time, saying so.

A function-local import ends with a comment ``# lazy: <why>`` (numba, CUDA, numpy,
mpi4py, cloudpickle and matplotlib cost 0.1-1 s to import: a spawned router or a plain
``dac --help`` must not pay for them).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dac", "stealing", "launcher")
LONGEST = 50
FILES = sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def functions(tree: ast.AST) -> list:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def too_long(source: str) -> list:
    """``["name (N lines)"]`` of the functions longer than ``LONGEST`` lines."""
    return [f"{f.name} ({f.end_lineno - f.lineno + 1} lines)"
            for f in functions(ast.parse(source))
            if f.end_lineno - f.lineno + 1 > LONGEST]


def unexplained_local_imports(source: str) -> list:
    """Line numbers of imports inside functions without a ``# lazy:`` comment."""
    lines = source.splitlines()
    found = []
    for f in functions(ast.parse(source)):
        for node in ast.walk(f):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if "# lazy:" not in lines[node.end_lineno - 1]:
                    found.append(node.lineno)
    return sorted(set(found))


def unannotated(source: str) -> list:
    """Names of functions with a parameter or the return left unannotated."""
    found = []
    for f in functions(ast.parse(source)):
        a = f.args
        params = [p for p in a.posonlyargs + a.args + a.kwonlyargs
                  if p.arg not in ("self", "cls")]
        params += [p for p in (a.vararg, a.kwarg) if p is not None]
        if f.returns is None or any(p.annotation is None for p in params):
            found.append(f.name)
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_function_is_longer_than_50_lines(path):
    assert too_long(path.read_text()) == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_function_imports_only_what_saves_start_up_and_says_so(path):
    assert unexplained_local_imports(path.read_text()) == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_function_is_annotated(path):
    assert unannotated(path.read_text()) == []


def test_the_checks_find_what_they_look_for():
    source = ("def f(x):\n    import os\n    return x\n"
              "def g(x: int) -> int:\n    import numpy  # lazy: 0.1 s\n"
              + "    x += 1\n" * LONGEST + "    return x\n")
    assert too_long(source) == [f"g ({LONGEST + 3} lines)"]
    assert unexplained_local_imports(source) == [2]
    assert unannotated(source) == ["f"]


def test_the_type_checker_finds_no_error():
    """mypy with the project's settings (pyproject.toml: every function typed)."""
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert done.stdout.startswith("Success: no issues found")
