"""Failures: task exceptions, unpicklable data, bad options, non-deterministic frames."""

import os
import sys
import threading

import programs
import pytest
from proctools import finish, launch, new_tag, wait_for_no_processes

import dac
from dac import ReplayMismatchError, SerializationError, TaskError

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")


def test_no_spawning_fixture_really_blocks_spawns(no_spawning):
    with pytest.raises(AssertionError, match="a dac process was spawned"):
        dac.run(programs.fib, 15, procs=1)


# --- exceptions in tasks -----------------------------------------------------------------
# Failing runs in this process use one leaf or an idle tree: see the xfail tests below
# for what happens to the root when a sibling leaf is still busy.
def test_exception_in_a_task_raises_task_error():
    with pytest.raises(TaskError) as info:
        dac.run(programs.divide_range, 0, 64, 37, procs=1, depth=3)
    err = info.value
    assert err.type_name == "ZeroDivisionError"
    assert err.message == "integer division or modulo by zero"
    assert "ZeroDivisionError: integer division or modulo by zero" in str(err)
    # the task holding i == 37 at depth 3 covers [32, 40)
    assert err.task == "divide_range(32, 40, 37)"
    assert err.where.startswith("leaf pid ")
    assert "return 100 // (lo - bad)" in err.remote_traceback
    assert "programs.py" in err.remote_traceback
    assert "return 100 // (lo - bad)" in str(err)


def test_a_task_error_carries_the_exception_object_as_its_cause():
    with pytest.raises(TaskError) as info:
        dac.run(programs.divide_range, 0, 64, 37, procs=1, depth=3, root_helps=False)
    err = info.value
    assert type(err.exception) is ZeroDivisionError
    assert err.exception.args == ("integer division or modulo by zero",)
    assert err.__cause__ is err.exception


def test_an_exception_that_cannot_travel_is_reported_without_the_object():
    with pytest.raises(TaskError) as info:
        dac.run(programs.raises_an_unpicklable_exception, 3, procs=1, depth=0,
                root_helps=False)
    err = info.value
    assert (err.type_name, err.message) == ("LeafOnlyError", "made on the leaf: 3")
    assert err.task == "raises_an_unpicklable_exception(3)"
    assert err.where.startswith("leaf pid ")
    assert err.exception is None and err.__cause__ is None


def test_an_exception_whose_class_is_missing_where_the_error_is_read():
    import pickle
    import sys
    import types
    module = types.ModuleType("dac_test_gone")
    module.GoneError = type("GoneError", (Exception,), {"__module__": "dac_test_gone"})
    sys.modules["dac_test_gone"] = module
    try:
        blob = pickle.dumps(TaskError("GoneError", "x", "tb", "f(1)", "leaf pid 1",
                                      exception=module.GoneError("x")))
    finally:
        del sys.modules["dac_test_gone"]
    err = pickle.loads(blob)
    assert (err.type_name, err.task, err.remote_traceback) == ("GoneError", "f(1)", "tb")
    assert err.exception is None


def test_task_error_is_a_dac_error():
    assert issubclass(TaskError, dac.DacError)


def test_a_run_after_a_failed_run_works():
    with pytest.raises(TaskError):
        dac.run(programs.divide_range, 0, 16, 3, procs=1, depth=2)
    assert dac.run(programs.fib, 18, procs=2) == 2584


def test_a_runtime_runs_again_after_a_task_error():
    with dac.Runtime(procs=2) as rt:
        assert rt.run(programs.fib, 15) == 610
        with pytest.raises(TaskError, match="ZeroDivisionError"):
            rt.run(programs.divide_range, 0, 32, 5)
        assert rt.run(programs.fib, 16) == 987
        assert rt.run(programs.divide_range, 0, 32, 40) == sum(
            100 // (i - 40) for i in range(32))


def run_script(name, *args, timeout=60):
    """Runs tests/scripts/NAME in its own session; returns (code, stdout, stderr, tag)."""
    tag = new_tag()
    proc = launch([sys.executable, os.path.join(SCRIPTS, name), *map(str, args)], tag)
    code, out, err, _seconds = finish(proc, timeout)
    return code, out, err, tag


@pytest.mark.parametrize("procs, mode", [
    (5, "persistent"),
    (2, "spawn"),
    pytest.param(5, "spawn"),
])
def test_task_error_in_trees_with_routers_and_one_shot_leaves(procs, mode):
    code, out, err, tag = run_script("failing_run.py", procs, mode)
    assert wait_for_no_processes(tag, timeout=5) == {}
    assert code == 0, f"exit code {code}, stderr {err[-800:]!r}"
    lines = out.splitlines()
    assert lines[0].startswith("TaskError ZeroDivisionError slow_divide(2, 4, 3, 0.0)")
    assert lines[1] == "then fib(15) = 610"


def test_task_error_while_another_leaf_is_busy():
    # the kill depends on timing (about 4 runs in 5 here): every attempt must pass
    for _attempt in range(5):
        code, out, err, tag = run_script("busy_failure.py", 5)
        assert wait_for_no_processes(tag, timeout=5) == {}
        assert code == 0, f"exit code {code}, stderr {err[-800:]!r}"
        lines = out.splitlines()
        assert lines[0].startswith("TaskError RuntimeError: task 0 fails at once after")
        assert lines[1] == "then fib(15) = 610"


def test_exception_in_a_frame_above_the_spawn_depth_after_the_tasks():
    with pytest.raises(TaskError) as info:
        dac.run(programs.fails_at_top, 15, procs=2, depth=1)
    err = info.value
    assert err.type_name == "ValueError"
    assert err.message == "top frame refuses total 610"
    assert err.task == "fails_at_top(15)"
    assert "the root" in err.where
    assert 'raise ValueError(f"top frame refuses total {total}")' in err.remote_traceback


def test_exception_in_the_top_frame_before_any_task(no_spawning):
    with pytest.raises(TaskError) as info:
        dac.run(programs.fails_before_spawning, 3, procs=2, depth=1)
    assert info.value.type_name == "KeyError"
    assert "no such key 3" in info.value.message
    assert "raise KeyError" in info.value.remote_traceback


def test_exception_in_the_top_frame_when_the_top_is_a_task():
    """A plain function's top call is the one task: it fails on a leaf, after its
    children's results are in, and the error names the call and the leaf."""
    with pytest.raises(TaskError) as info:
        dac.run(programs.fails_at_top, 15, procs=2)
    err = info.value
    assert (err.type_name, err.message) == ("ValueError", "top frame refuses total 610")
    assert err.task == "fails_at_top(15)"
    assert "leaf" in err.where and "the root" not in err.where
    assert 'raise ValueError(f"top frame refuses total {total}")' in err.remote_traceback
    assert isinstance(err.exception, ValueError)


def test_unpicklable_result_of_a_task():
    with pytest.raises(TaskError) as info:
        dac.run(programs.returns_unpicklable, 3, procs=1, depth=2)
    assert info.value.type_name == "SerializationError"
    assert "cannot be pickled" in info.value.message


# --- exceptions and arguments that cannot be printed ------------------------------------
UNPRINTABLE = "<str() of the exception failed: RuntimeError: no text for this error>"
UNREPRESENTABLE = ("<repr() of a Unrepresentable failed: RuntimeError: no repr for this "
                   "argument>")


@pytest.mark.parametrize("root_helps", [False, True])
def test_an_exception_whose_str_raises_in_a_task_is_a_task_error(root_helps):
    # without root_helps the leaf runs the task; with it, maybe the root (_run_here)
    with pytest.raises(TaskError) as info:
        dac.run(programs.fails_unprintably, 1, procs=1, root_helps=root_helps)
    err = info.value
    assert err.type_name == "UnprintableError"
    assert err.message == UNPRINTABLE
    assert err.task == "fails_unprintably(0, None)"
    if not root_helps:
        assert err.where.startswith("leaf pid ")
    assert 'raise UnprintableError("lost text")' in err.remote_traceback
    assert f"task fails_unprintably(0, None) raised UnprintableError: {UNPRINTABLE}" \
        in str(err)
    assert wait_for_no_processes(timeout=5) == {}


def test_an_argument_whose_repr_raises_is_named_by_a_placeholder_in_a_leaf():
    with pytest.raises(TaskError) as info:
        dac.run(programs.fails_unprintably, 1, programs.Unrepresentable(), procs=1,
                root_helps=False)
    assert info.value.type_name == "UnprintableError"
    assert info.value.task == f"fails_unprintably(0, {UNREPRESENTABLE})"
    assert wait_for_no_processes(timeout=5) == {}


def test_an_unprintable_exception_above_the_spawn_depth(no_spawning):
    with pytest.raises(TaskError) as info:
        dac.run(programs.fails_unprintably, 0, programs.Unrepresentable(), procs=1)
    err = info.value
    assert err.type_name == "UnprintableError"
    assert err.message == UNPRINTABLE
    assert err.task == f"fails_unprintably(0, {UNREPRESENTABLE})"
    assert err.where == "the root, above the spawn depth"


def test_a_task_whose_argument_repr_raises_succeeds():
    # a leaf must not describe a call (repr of its arguments) unless it failed
    value = dac.run(programs.pass_to_child, programs.Unrepresentable(), procs=1, depth=1,
                    root_helps=False)
    assert type(value) is programs.Unrepresentable


def test_task_failure_survives_unprintable_exceptions_and_arguments():
    from dac import task_call
    from dac.execution import task_failure
    payload = task_call.write(task_call.TaskCall(
        7, "fails_unprintably#3", 1, (0, programs.Unrepresentable()),
        {"tag": programs.Unrepresentable()}), "a test payload")
    err = task_failure(payload, programs.UnprintableError("x"), "tb text")
    assert err.type_name == "UnprintableError"
    assert err.message == UNPRINTABLE
    assert err.task == f"fails_unprintably(0, {UNREPRESENTABLE}, tag={UNREPRESENTABLE})"
    assert err.remote_traceback == "tb text"
    assert err.where.startswith("leaf pid ")


def test_sync_of_a_non_future_whose_repr_raises_is_a_sync_error(no_spawning):
    with pytest.raises(dac.SyncError, match="got Unrepresentable <repr\\(\\) of the value "
                                            "failed: RuntimeError: no repr"):
        programs.sync_non_future(programs.Unrepresentable())


# --- misuse of futures inside a run --------------------------------------------------------
def test_result_of_a_pending_future_inside_a_run(no_spawning):
    with pytest.raises(dac.SyncError, match=r"fib\(20\) is not known yet"):
        dac.run(programs.result_before_sync, 20, procs=2, depth=1)


def test_sync_of_a_non_future_inside_a_run(no_spawning):
    with pytest.raises(dac.SyncError, match="got int 4"):
        dac.run(programs.sync_non_future, 4, procs=2, depth=1)


def test_sync_of_a_non_future_in_a_top_that_is_a_task():
    with pytest.raises(TaskError) as info:
        dac.run(programs.sync_non_future, 4, procs=2)
    assert info.value.type_name == "SyncError"
    assert "got int 4" in info.value.message
    assert isinstance(info.value.exception, dac.SyncError)


def test_sync_of_lists_in_a_leaf_gives_lists_and_refuses_a_non_future():
    zero = ([], [-1], [])
    assert dac.run(programs.sync_lists, 2, procs=2) == ([zero, zero], [-1], [])
    assert programs.sync_lists(2) == ([zero, zero], [-1], [])        # the elision
    with pytest.raises(TaskError) as info:
        dac.run(programs.sync_lists, 3, procs=2)
    assert info.value.type_name == "SyncError"
    assert "got int 3" in info.value.message


def test_a_stolen_call_at_its_grain_gives_its_kernel_the_defaults_it_travelled_without():
    # scaled(i, 10) travels as scaled(i) (10 is the default's own object); the
    # kernel times_k(n, k) takes k, as it does for the calls run where they were made
    # (16 calls of 50 ms: the second leaf is up and steals long before they are done)
    report = dac.run_report(programs.scaled, 1000, procs=2)
    assert report.result == 1200 == programs.scaled(1000)
    assert report.stats["split_given"] >= 1 and report.stats["tasks"] >= 2


# --- data that cannot travel -----------------------------------------------------------
UNPICKLABLE = [("generator", "<generator object", "cannot pickle 'generator' object"),
               ("lock", "<unlocked _thread.lock", "cannot pickle '_thread.lock' object")]


@pytest.mark.parametrize("kind, shown, reason", UNPICKLABLE, ids=["generator", "lock"])
def test_unpicklable_task_argument_is_reported_before_spawning(no_spawning, kind, shown,
                                                               reason):
    with pytest.raises(SerializationError) as info:
        dac.run(programs.unpicklable_to_child, kind, procs=2, depth=1)
    text = str(info.value)
    assert f"an argument of echo({shown}" in text
    assert "cannot be pickled to send it to another process" in text
    assert reason in text


@pytest.mark.parametrize("kind, shown, reason", UNPICKLABLE, ids=["generator", "lock"])
def test_unpicklable_task_argument_raises_serialization_error(no_spawning, kind, shown,
                                                              reason):
    with pytest.raises(SerializationError, match=r"an argument of echo\("):
        dac.run(programs.unpicklable_to_child, kind, procs=2, depth=1)


@pytest.mark.parametrize("value", [(i for i in range(3)), threading.Lock()],
                         ids=["generator", "lock"])
def test_unpicklable_argument_of_the_run_raises_before_spawning(no_spawning, value):
    # the top frame runs on the root and never travels: the task it feeds does
    with pytest.raises(SerializationError, match=r"an argument of echo\("):
        dac.run(programs.pass_to_child, value, procs=2, depth=1)


def test_serialization_error_is_a_type_error():
    assert issubclass(SerializationError, TypeError)
    assert issubclass(SerializationError, dac.DacError)


def test_runtime_survives_an_unpicklable_argument():
    with dac.Runtime(procs=1) as rt:
        assert rt.run(programs.fib, 12) == 144
        with pytest.raises(SerializationError):
            rt.run(programs.pass_to_child, threading.Lock())
        report = rt.run_report(programs.fib, 13)
        assert report.result == 233
        assert report.stats["spawns"] == 0          # same tree as before


# --- bad options ----------------------------------------------------------------------
def test_unknown_option_raises_type_error_naming_it(no_spawning):
    with pytest.raises(TypeError, match="unknown dac option.*bogus_option"):
        dac.run(programs.fib, 10, procs=1, bogus_option=3)
    with pytest.raises(TypeError, match="tasks_per_lef"):
        dac.Runtime(tasks_per_lef=3)


@pytest.mark.parametrize("options, name", [
    (dict(branches=1), "branches"),
    (dict(steal_factor=1), "steal_factor"),
    (dict(steal_factor=0.9), "steal_factor"),
    (dict(min_procs=0), "min_procs"),
    (dict(tasks_per_leaf=0), "tasks_per_leaf"),
    (dict(procs=0), "procs"),
    (dict(leaf_mode="fork"), "leaf_mode"),
    (dict(depth=-1), "depth"),
])
def test_invalid_scheduler_parameters_raise_value_error_before_spawning(
        no_spawning, options, name):
    with pytest.raises(ValueError, match=name):
        dac.run(programs.fib, 10, **options)


def test_missing_topology_file_is_reported_before_spawning(no_spawning, tmp_path):
    path = str(tmp_path / "clusters.toml")
    with pytest.raises(dac.DacError, match="clusters.toml") as info:
        dac.run(programs.fib, 10, topology=path)
    assert isinstance(info.value, ValueError)
    assert "no such file" in str(info.value)


# --- frames above the spawn depth must be deterministic ---------------------------------
def test_non_deterministic_frame_raises_replay_mismatch():
    with pytest.raises(ReplayMismatchError) as info:
        dac.run(programs.drifting, 5, procs=1, depth=1)
    text = str(info.value)
    assert "changed between passes" in text
    assert "call #0 was square(" in text and "is now square(" in text


def test_replay_mismatch_with_a_runtime_then_a_good_run():
    with dac.Runtime(procs=1, depth=1) as rt:
        with pytest.raises(ReplayMismatchError):
            rt.run(programs.drifting, 3)
        assert rt.run(programs.iterate_affine, 1, 2) == 13


@pytest.mark.parametrize("options, error, text", [
    ({"remote": "eager"}, ValueError, "remote must be one of prefetch, blocking"),
    ({"batch": "dynamic"}, ValueError, "batch must be one of rate, fixed"),
    ({"batch_s": 0}, ValueError, "batch_s must be a number of seconds > 0"),
    ({"gpus": -1}, ValueError, "gpus must be an integer >= 0"),
    ({"preload": "numba"}, TypeError, "preload must be a list of module names"),
    ({"leaf_mode": "forked"}, ValueError, "leaf_mode must be one of persistent, spawn"),
    ({"depth": -2}, ValueError, "depth must be an integer >= 0"),
])
def test_invalid_runtime_options_are_refused_before_spawning(no_spawning, options, error,
                                                             text):
    with pytest.raises(error, match=text):
        dac.run(programs.fib, 10, **options)


def test_procs_with_a_topology_file_is_refused(no_spawning, tmp_path):
    topo = tmp_path / "t.toml"
    topo.write_text('[[clusters]]\nname = "a"\nhosts = [{ name = "localhost", slots = 1 }]\n')
    with pytest.raises(ValueError, match="procs= sets the leaves of the default topology"):
        dac.run(programs.fib, 10, topology=str(topo), procs=2)


def test_a_future_kept_from_another_run_is_an_error_not_a_hang():
    with dac.Runtime(procs=1) as rt:
        assert rt.run(programs.keeps_a_future, 3) == 9
        with pytest.raises(dac.DacError, match="waiting on futures that no task will "
                                               "produce"):
            rt.run(programs.syncs_a_kept_future, 4)
