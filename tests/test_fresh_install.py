"""What a new user meets first, with today's dependencies (the newest cloudpickle
included): script functions and their numba kernels reach the leaves intact, with their
file names and on-disk caches; a process that fails outside a task says why in a few
lines and leaves the caller able to run again; ``sync`` of a list; whole lines of
output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
from proctools import (
    CHECKOUT,
    finish,
    launch,
    leftover_shm,
    new_tag,
    tagged_env,
    wait_for_no_processes,
)

import dac
from dac import SyncError, spawn, sync

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")


def run_script(path, *args, timeout=120, cwd=None, env=None):
    """Run a script in its own session; returns (code, stdout, stderr) once its
    processes are gone and nothing of it is left in /dev/shm."""
    tag = new_tag()
    began = time.time()
    if env:
        proc = subprocess.Popen([sys.executable, path, *map(str, args)],
                                env={**tagged_env(tag), **env}, cwd=cwd,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
    else:
        proc = launch([sys.executable, path, *map(str, args)], tag, cwd=cwd)
    code, out, err, _ = finish(proc, timeout)
    assert wait_for_no_processes(tag, timeout=10) == {}
    assert leftover_shm(began) == []
    return code, out, err


# --- script functions and kernels ------------------------------------------------------
def test_the_installed_cloudpickle_is_the_one_these_tests_ran_with():
    """For the record of a run: which cloudpickle this suite exercised (CI installs the
    newest; cloudpickle 3.1.3 renamed every function it pickles by value
    ``<dynamic-code>``, which broke numba's cache in the leaves)."""
    import cloudpickle
    print(f"cloudpickle {cloudpickle.__version__}")
    from dac.serialize import dumps_function, loads
    from dac.spawn import spawn_function

    @spawn
    def here(n):
        return n + 1

    sf = spawn_function(here)
    back = loads(dumps_function(sf))
    assert back.fn.__code__.co_filename == __file__
    assert back.fn.__code__.co_firstlineno == sf.fn.__code__.co_firstlineno
    assert back.fn(1) == 2


def test_a_script_with_its_own_cached_kernels_runs_and_reuses_the_cache(tmp_path):
    script = tmp_path / "own_kernel.py"
    shutil.copy(os.path.join(SCRIPTS, "own_kernel.py"), script)
    first = run_script(str(script), cwd=str(tmp_path))
    code, out, err = first
    assert code == 0, err
    assert "sum_squares 1365205336000" in out
    assert "triangles [0, 1, 3, 6, 10, 15, 21, 28]" in out
    assert "hits 0" in out                      # compiled here, written to the cache
    cached = os.listdir(tmp_path / "__pycache__")
    assert any(n.startswith("own_kernel.triangle-") and n.endswith(".nbi") for n in cached)
    code, out, err = run_script(str(script), cwd=str(tmp_path))
    assert code == 0, err
    hits = int(out.split("hits ")[1].split()[0])
    assert hits >= 1                            # the second run loaded it
    assert "without an on-disk cache" not in err


def test_a_kernel_whose_file_is_not_on_the_host_is_cached_by_its_code(tmp_path,
                                                                       monkeypatch):
    """A notebook cell or a host without the user's files: numba finds no file for the
    kernel, so dac caches it under DAC_CACHE_DIR, keyed by its code."""
    monkeypatch.setenv("DAC_CACHE_DIR", str(tmp_path / "cache"))
    namespace: dict = {}
    source = "def cube(n):\n    return n * n * n\n"
    exec(compile(source, "/nonexistent/cell-7.py", "exec"), namespace)
    from dac.kernels import CodeCache, cached_njit
    kernel = cached_njit(namespace["cube"], {})
    assert isinstance(kernel._cache, CodeCache)
    assert kernel(3) == 27
    files = [f for _, _, fs in os.walk(tmp_path / "cache") for f in fs]
    assert any(f.startswith("cell-7.cube-1.") and f.endswith(".nbi") for f in files)
    again = cached_njit(namespace["cube"], {})
    assert again(4) == 64 and sum(again.stats.cache_hits.values()) == 1
    assert os.stat(tmp_path / "cache").st_mode & 0o077 == 0


def test_a_task_error_names_the_script_file_line_and_source():
    script = os.path.join(SCRIPTS, "failing_line.py")
    code, out, err = run_script(script)
    assert code == 1
    with open(script) as f:
        line = next(i for i, text in enumerate(f, 1) if "THE FAILING LINE" in text)
    assert f'File "{script}", line {line}, in check' in err
    assert 'raise ValueError(f"bad item {i}")  # THE FAILING LINE' in err
    assert "dac.errors.TaskError: task check(3) raised ValueError: bad item 3" in err
    # the traceback starts at the user's function, not in dac's leaf
    remote = err.split("--- traceback where it was raised ---")[1]
    assert "stealing/roles/leaf.py" not in remote and "dac/stealable.py" not in remote


# --- failures outside a task -----------------------------------------------------------
def test_a_kernel_that_cannot_be_rebuilt_ends_the_run_in_a_few_lines():
    code, out, err = run_script(os.path.join(SCRIPTS, "unbuildable_kernel.py"))
    assert code == 1
    lines = err.splitlines()
    assert len(lines) <= 30, err
    assert err.count("RuntimeError: LIMIT unpickles only in pid") == 2  # head, cause
    assert "dac.errors.ProcessError: leaf pid " in err
    assert "failed loading the job's functions: RuntimeError: LIMIT unpickles only" in err
    assert err.count("Traceback (most recent call last)") == 2  # the root's, the leaf's


def test_after_a_process_error_the_next_run_in_the_same_process_works():
    code, out, err = run_script(os.path.join(SCRIPTS, "unbuildable_kernel.py"),
                                "--catch")
    assert code == 0, err
    first, second = out.splitlines()[:2]
    assert first.startswith("ProcessError|leaf|loading the job's functions|RuntimeError|"
                            "LIMIT unpickles only in pid")
    assert second == "next 610"


def test_a_process_error_carries_its_process_and_cause():
    err = dac.ProcessError("leaf", 12, "n01", "loading the job's functions",
                           "RuntimeError", "no", "Traceback ...\n",
                           exception=RuntimeError("no"))
    assert isinstance(err, dac.DacError) and not isinstance(err, dac.TaskError)
    assert str(err).startswith("leaf pid 12 on n01 failed loading the job's functions: "
                               "RuntimeError: no")
    import pickle
    back = pickle.loads(pickle.dumps(err))
    assert (back.role, back.pid, back.host, back.doing) == ("leaf", 12, "n01",
                                                            "loading the job's functions")
    assert isinstance(back.exception, RuntimeError)


def test_a_process_that_dies_before_it_can_report_says_why(tmp_path):
    """A spawned process that fails where it cannot speak MPI (here: its trace file,
    broken on purpose by a sitecustomize that only the spawned processes run) leaves
    its traceback to its monitor, and the root's LostProcessError shows it."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "if sys.argv[:1] == ['-c']:\n"
        "    import stealing.observe.trace\n"
        "    def broken(who):\n"
        "        raise OSError('the trace folder is gone (a test)')\n"
        "    stealing.observe.trace.open_trace = broken\n")
    script = tmp_path / "s.py"
    script.write_text("import sys\nsys.path.insert(0, %r)\nimport dac, programs\n"
                      "try:\n    dac.run(programs.fib, 12, procs=1)\n"
                      "except dac.LostProcessError as e:\n    print('LOST', e)\n"
                      % os.path.join(CHECKOUT, "tests"))
    path = os.pathsep.join([CHECKOUT, str(tmp_path)])
    code, out, err = run_script(str(script), env={"PYTHONPATH": path}, timeout=60)
    assert code == 0, err
    assert "LOST the run lost a process: leaf pid" in out
    assert "exited with code 1" in out
    assert "OSError: the trace folder is gone (a test)" in out
    assert "Traceback" not in err           # nothing printed by the process itself


# --- sync of a list --------------------------------------------------------------------
@spawn
def children(k):
    """``k`` children, each worth its index plus one."""
    return sum(sync([leaf_value(i) for i in range(k)]))


@spawn
def leaf_value(i):
    return i + 1


@spawn
def kinds(k):
    got = sync(leaf_value(i) for i in range(k))       # any iterable
    return type(got).__name__, got


@pytest.mark.parametrize("k, total", [(0, 0), (1, 1), (3, 6)])
def test_sum_of_sync_of_a_list_is_right_for_0_1_and_3_children(k, total):
    assert children(k) == total                         # the serial elision
    assert dac.run(children, k, procs=2, depth=1) == total


def test_sync_of_an_iterable_gives_a_list_and_bad_arguments_say_so():
    assert kinds(2) == ("list", [1, 2])
    assert kinds(0) == ("list", [])
    assert dac.run(kinds, 1, procs=1, depth=1) == ("list", [1])

    @spawn
    def bad(what):
        return sync(what)

    for what, shown in ((3, "int 3"), ("ab", "str 'ab'")):
        with pytest.raises(SyncError, match=f"or one list of them; got {shown}"):
            bad(what)


# --- output ----------------------------------------------------------------------------
def test_500_lines_printed_by_tasks_on_2_leaves_arrive_whole_and_once():
    code, out, err = run_script(os.path.join(SCRIPTS, "task_prints.py"), 500)
    assert code == 0, err
    assert "total 500" in err
    got = {}
    for stream, text in (("out", out), ("err", err)):
        for line in text.splitlines():
            if line == "total 500":
                continue
            prefix, _, rest = line.partition(") ")
            assert prefix.startswith("(leaf ") and prefix[6:].isdigit(), line
            word, number, body = rest.split(" ", 2)
            i = int(number)
            assert word == "line" and body == "x" * (i % 50) + " end", line
            assert (stream == "err") == (i % 10 == 0), line
            got[i] = got.get(i, 0) + 1
    assert got == {i: 1 for i in range(500)}


def test_dac_run_no_prefix_prints_the_lines_bare():
    tag = new_tag()
    proc = launch([sys.executable, "-m", "launcher.cli", "run", "--no-prefix", "--quiet",
                   os.path.join(SCRIPTS, "task_prints.py"), "40"], tag, cwd=CHECKOUT)
    code, out, err, _ = finish(proc, 120)
    assert wait_for_no_processes(tag, timeout=10) == {}
    assert code == 0, err
    lines = sorted(out.splitlines())
    assert len(lines) == 36 and all(line.startswith("line 00") for line in lines)
    assert "(leaf" not in out + err
