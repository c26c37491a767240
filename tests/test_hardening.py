"""Hardening: script classes as data, bounds on what a run may ask for, and messages that
say what went wrong (deep tracebacks, results that do not unpickle, MemoryError), and
the root's memory across many runs."""

import os
import re
import sys

import hardening_programs as hp
import programs
import pytest
from proctools import finish, launch, new_tag, wait_for_no_processes

import dac
from dac import TaskError
from dac.errors import shorten_traceback
from stealing.tree.topology import TopologyError

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")


def run_script(name, *args, timeout=120):
    """Runs tests/scripts/NAME in its own session; returns (code, stdout, stderr, tag)."""
    tag = new_tag()
    proc = launch([sys.executable, os.path.join(SCRIPTS, name), *map(str, args)], tag)
    code, out, err, _seconds = finish(proc, timeout)
    return code, out, err, tag


# --- classes and functions of the user's script ------------------------------------------
def test_script_classes_travel_as_arguments_and_come_back_as_the_roots_own():
    code, out, err, tag = run_script("script_classes.py")
    assert wait_for_no_processes(tag, timeout=5) == {}
    assert code == 0, f"exit code {code}, stderr {err[-1500:]!r}"
    assert out.splitlines() == [
        "total 40",                                 # 8 tasks, each got Box(5)
        "collect [Box(v=1), Box(v=2), Box(v=3), Box(v=4)] True",
        "nest [[Box(v=1), [Box(v=2)]], [Box(v=1), [Box(v=2)]]] True",
        "apply 42",                                 # double(10) + double(11)
        "root class True 3",                        # not replaced by a copy
    ]


# --- bounds: no spawn storms ---------------------------------------------------------
CORES = os.cpu_count() or 1
LIMIT = 64 * CORES
ON_CORES = f"which has {CORES} core{'s' if CORES > 1 else ''}: more than 64 per core " \
    f"({LIMIT}) is a spawn storm, not a faster run. Pass oversubscribe=True to start " \
    f"them anyway"


def test_more_than_64_leaves_per_core_are_refused_before_spawning(no_spawning):
    asked = max(10000, LIMIT + 1)
    with pytest.raises(ValueError) as info:
        dac.run(programs.fib, 10, procs=asked)
    assert str(info.value) == (f"procs={asked} asks for {asked} leaf processes on this "
                               f"machine, {ON_CORES}")


def test_oversubscribe_allows_more_leaves_and_64_per_core_need_nothing(no_spawning):
    assert len(dac.Runtime(procs=LIMIT).plan.leaves()) == LIMIT
    rt = dac.Runtime(procs=LIMIT + 1, oversubscribe=True)
    assert len(rt.plan.leaves()) == LIMIT + 1
    with pytest.raises(TypeError, match="oversubscribe must be True or False, got 'yes'"):
        dac.Runtime(procs=2, oversubscribe="yes")


def _big_topology(tmp_path, small, big):
    path = tmp_path / "big.toml"
    path.write_text(f'[[clusters]]\nname = "small"\nhosts = [{{ name = "{small}", '
                    f'slots = 2 }}]\n\n[[clusters]]\nname = "big"\n'
                    f'hosts = [{{ name = "{big}", slots = {LIMIT}, gpus = 1 }}]\n')
    return str(path)


def test_a_topology_mapped_here_with_local_has_the_same_bound(no_spawning, tmp_path):
    path = _big_topology(tmp_path, "node01", "node02")
    with pytest.raises(TopologyError) as info:
        dac.Runtime(topology=path, local=True)
    assert str(info.value) == (
        f"{path} (--local): clusters: local=True puts all {LIMIT + 3} leaves of the "
        f"topology on this machine (slots and gpus of every host; cluster 'big' alone "
        f"has {LIMIT + 1}), {ON_CORES}")
    rt = dac.Runtime(topology=path, local=True, oversubscribe=True)
    assert len(rt.plan.leaves()) == LIMIT + 3


def test_a_topology_without_local_is_not_bounded_by_this_machine(no_spawning, tmp_path):
    # its hosts are other machines (here they resolve to this one, as a cluster's
    # login node may): their slots are the file's business
    rt = dac.Runtime(topology=_big_topology(tmp_path, "localhost", "127.0.0.1"))
    assert len(rt.plan.leaves()) == LIMIT + 3


# --- messages: deep recursion ------------------------------------------------------------
def test_a_deep_recursion_in_a_task_gives_a_short_traceback_with_the_raising_line():
    with pytest.raises(TaskError) as info:
        dac.run(hp.deep, 1, 500, procs=1, root_helps=False)
    err = info.value
    assert (err.type_name, err.message) == ("ValueError", "the bottom of the recursion")
    assert err.task == "deep(0, 500)"
    text = str(err)
    assert len(text.splitlines()) < 100             # was 4524 lines
    # the top levels are deque entries run by sync (sink's frame and dac's), the
    # rest sink's clone (one frame a level): each run of them shown once, with a
    # count of the levels left out
    repeats = [int(n) for n in re.findall(r"\n  \[Previous (?:\d+ frames|line) repeated "
                                          r"(\d+) more times\]\n", text)]
    assert max(repeats) >= 100 and sum(repeats) < 500
    assert 2 <= text.count("return sync(sink(k - 1)) + 1") <= 8
    assert text.endswith('    raise ValueError("the bottom of the recursion")\n'
                         'ValueError: the bottom of the recursion')


def _ping(n):
    if n == 0:
        raise KeyError("no pong")
    return _pong(n - 1)


def _pong(n):
    return _ping(n - 1)


def test_shorten_traceback_keeps_what_does_not_repeat():
    import traceback
    try:
        try:
            _ping(200)
        except KeyError as exc:
            raise RuntimeError("while ponging") from exc
    except RuntimeError:
        text = traceback.format_exc()
    short = shorten_traceback(text)
    lines, kept = text.splitlines(), short.splitlines()
    assert len(lines) > 400 and len(kept) < 40
    assert kept.count("  [Previous 2 frames repeated 98 more times]") == 1
    # everything but the repeats is there, in order: both exceptions, the raising line
    rest = [line for line in kept if not line.startswith("  [Previous")]
    it = iter(lines)
    assert all(line in it for line in rest)
    for line in ("KeyError: 'no pong'", '    raise KeyError("no pong")',
                 "The above exception was the direct cause of the following exception:",
                 "RuntimeError: while ponging"):
        assert line in kept
    assert shorten_traceback(short) == short


# --- messages: a result that does not unpickle on the root ------------------------------
def test_a_result_that_cannot_be_unpickled_on_the_root_names_the_task():
    import inspect
    lines, first = inspect.getsourcelines(hp.Fragile.__setstate__)
    raising = first + next(i for i, line in enumerate(lines) if "raise" in line)
    with pytest.raises(dac.SerializationError) as info:
        dac.run(hp.fragile, 4, procs=1, root_helps=False)
    assert str(info.value) == (
        "the result of fragile(3) was computed but cannot be unpickled on the root: "
        "ValueError: Fragile refuses to be unpickled (state {'v': 3}) (in __setstate__, "
        f"{hp.__file__}:{raising})")


# --- messages: MemoryError -------------------------------------------------------------
def test_a_memory_error_without_message_says_out_of_memory_and_where():
    import socket
    with pytest.raises(TaskError) as info:
        dac.run(hp.hog, 1, procs=1, root_helps=False)
    err = info.value
    assert (err.type_name, err.task) == ("MemoryError", "hog(0)")
    assert err.message == "out of memory (MemoryError raised with no message)"
    pid = int(err.where.split()[2])
    assert err.where == f"leaf pid {pid} on {socket.gethostname()}" and pid != os.getpid()
    assert str(err).splitlines()[0] == (
        f"task hog(0) raised MemoryError: out of memory (MemoryError raised with no "
        f"message) (in leaf pid {pid} on {socket.gethostname()})")


def test_a_memory_error_on_the_root_says_out_of_memory(no_spawning):
    with pytest.raises(TaskError) as info:
        dac.run(hp.hog, 2, procs=1)
    assert info.value.message == "out of memory (MemoryError raised with no message)"
    assert info.value.where == "the root, above the spawn depth"


# --- memory of the root across fresh runs ------------------------------------------------
def test_fresh_runs_leave_no_python_memory_behind_on_the_root():
    # Python objects only: the ~0.1 MB that MPICH and UCX keep per spawned child (see
    # the README, "Memory") is native memory that tracemalloc does not see
    import gc
    import tracemalloc
    for _ in range(2):
        dac.run(programs.fib, 15, procs=2)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20):
            assert dac.run(programs.fib, 15, procs=2) == 610
        gc.collect()
        per_run = (tracemalloc.get_traced_memory()[0] - before) / 20
    finally:
        tracemalloc.stop()
    assert per_run < 8_000, f"{per_run:.0f} bytes per run"      # measured: 250-420
