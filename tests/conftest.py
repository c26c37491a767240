"""Shared fixtures: every test module must leave no dac process behind, and every test
the session's import path as it found it.

A dac process is one whose command line holds ``stealing.roles.process``; the tests count only
those carrying this session's ``DAC_TEST_TAG`` environment variable (see proctools.py),
so runs of other programs on the machine at the same time (benchmarks) do not count.
"""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)        # programs.py, proctools.py (also for the leaves)

import proctools  # noqa: E402  (sets the session's process tag in os.environ)

# A warm tree the user has up (`dac up`) is never used by the tests: runs spawn their
# own trees unless a test (test_warm.py) says otherwise, with a folder of its own.
os.environ["DAC_ATTACH"] = "0"
os.environ["DAC_TREE_DIR"] = os.path.join(
    __import__("tempfile").gettempdir(), f"dac-tests-tree-{os.getpid()}")


@pytest.fixture(scope="module", autouse=True)
def no_leftover_processes():
    """After each module, no process of this session's runs is alive (5 s grace)."""
    yield
    left = proctools.wait_for_no_processes(timeout=5.0)
    assert not left, f"dac processes left after the module: {left}"


@pytest.fixture(autouse=True)
def import_path_kept():
    """A test leaves ``sys.path`` as it found it: the leaves of every later test adopt
    this process's path, and a folder put first there made its modules the ones the
    leaves imported (benchmarks/spine.py for the tests' spine: 3 CI failures)."""
    before = list(sys.path)
    yield
    after, sys.path[:] = list(sys.path), before
    assert after == before, f"the test changed sys.path: {after[:4]} (was {before[:4]})"


@pytest.fixture(autouse=True)
def recursion_limit_kept():
    """A test leaves the recursion limit as it found it: a program may raise it for
    itself (``examples/uts.py`` does, for its deep trees), and the tests of dac's own
    limit (``tests/test_serial.py``) read the interpreter's default; run after
    ``tests/test_uts.py`` in one process, they failed."""
    before = sys.getrecursionlimit()
    yield
    sys.setrecursionlimit(before)


@pytest.fixture
def no_spawning(monkeypatch):
    """Makes any attempt to spawn a dac process fail the test."""
    import stealing.roles.node

    def refuse(*_args, **_kwargs):
        raise AssertionError("a dac process was spawned")

    monkeypatch.setattr(stealing.roles.node, "spawn", refuse)
