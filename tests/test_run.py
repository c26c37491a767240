"""Real runs on spawned MPI processes: values, argument and result types, depth control,
dependent spawns, and a Runtime kept alive across runs."""

import numpy as np
import programs
import pytest

import dac


@pytest.fixture(scope="module")
def rt():
    """One tree of 2 leaves for the whole module."""
    with dac.Runtime(procs=2) as runtime:
        yield runtime


def root_tasks(report):
    """Tasks the root made: ``tasks`` also counts spawns split off them and run on
    another leaf (``split_tasks``)."""
    return report.stats["tasks"] - report.stats["split_tasks"]


# --- fresh trees ------------------------------------------------------------------------
@pytest.mark.parametrize("procs", [1, 2])
def test_fib_on_a_fresh_tree(procs):
    report = dac.run_report(programs.fib, 20, procs=procs)
    assert report.result == 6765
    stats = report.stats
    # the top is the one task (a plain function on CPU leaves); others are splits
    assert root_tasks(report) == 1 and stats["tasks"] == 1 + stats["split_tasks"]
    assert stats["passes"] == 0 and stats["root_calls"] == 0
    assert stats["spawns"] == procs
    assert [p["role"] for p in stats["processes"]] == ["root"] + ["leaf"] * procs
    assert report.elapsed_s > 0


def test_every_spawned_process_reports_where_its_start_went():
    report = dac.run_report(programs.fib, 18, procs=4, branches=2, min_procs=2)
    assert report.result == 2584
    spawned = [p for p in report.stats["processes"] if p["role"] != "root"]
    assert {p["role"] for p in spawned} == {"router", "leaf"}
    for p in spawned:
        steps = p["startup"]
        assert set(steps) == ({"python_s", "mpi_s", "init_s", "ready_s"} |
                              ({"imports_s"} if p["role"] == "leaf" else set()))
        assert all(v >= 0 for v in steps.values()), steps
        parts = steps["python_s"] + steps["mpi_s"] + steps["init_s"] + \
            steps.get("imports_s", 0)
        assert parts <= steps["ready_s"] + 1e-3, steps
    assert max(p["startup"]["ready_s"] for p in spawned) <= report.stats["startup_s"] + 0.01


def test_run_returns_the_value_of_run_report():
    assert dac.run(programs.fib, 16, procs=1) == 987


# The automatic depth: on GPU or spawn-per-batch leaves the root expands the top to the
# shallowest depth giving enough tasks (on CPU workers the top call is the one task:
# tests/test_top_task.py).
def test_auto_depth_distributes_a_recursion_smaller_than_the_target():
    report = dac.run_report(programs.napping_sum_leaf, 0, 512, 0.0, procs=5,
                            leaf_mode="spawn")
    assert report.result == sum(range(512))
    assert 2 <= report.stats["passes"] <= root_tasks(report) + 1
    assert report.stats["tasks"] >= 5            # at least one task per leaf


def test_auto_depth_reaches_the_target_when_the_recursion_allows():
    # procs=2: target max(16*2, 2*(2*5)) = 32 tasks, reached at depth 5
    report = dac.run_report(programs.napping_sum_leaf, 0, 512, 0.0, procs=2,
                            leaf_mode="spawn")
    assert report.result == sum(range(512))
    assert report.stats["depth"] == 5
    assert root_tasks(report) == 32


def test_auto_depth_does_not_run_the_leaves_work_on_the_root(tmp_path):
    """Fewer tasks at depth 1 than the target made the root try depth 2, which ran
    every call of depth 1 here, before any leaf started: 20 naps of 60 ms (the
    leaves' work) took 1.2 s on the root. A deeper trial now stops once it takes
    longer than its budget, and the depth above is kept."""
    mark = tmp_path / "ran"
    report = dac.run_report(programs.naps_marked, 20, 60.0, str(mark), procs=2,
                            root_helps=False)
    assert report.result == 20
    import os
    pids = mark.read_text().split()
    on_root = pids.count(str(os.getpid()))
    assert on_root <= 2, f"{on_root} of the 20 naps ran on the root"
    assert report.stats["depth"] == 1 and report.stats["tasks"] == 20


def test_run_option_depth_sets_the_spawn_depth():
    report = dac.run_report(programs.fib, 20, procs=2, depth=4)
    assert report.result == 6765
    assert report.stats["depth"] == 4
    assert root_tasks(report) == programs.fib_calls_at_depth(20, 4) == 16


# --- methods ------------------------------------------------------------------------------
def test_a_method_runs_on_two_leaves():
    report = dac.run_report(programs.Fibber(3).fib, 20, procs=2)
    assert report.result == 3 * 6765
    assert report.stats["tasks"] > 0 and report.stats["spawns"] == 2
    leaves = [p for p in report.stats["processes"] if p["role"] == "leaf"]
    assert len(leaves) == 2


def test_methods_static_and_class_methods_on_a_runtime(rt):
    f = programs.Fibber(2)
    assert rt.run(f.total, list(range(100))) == 2 * 4950
    assert rt.run(programs.Fibber.fib, f, 18) == 2 * 2584       # self given explicitly
    assert rt.run(programs.Fibber.static_fib, 18) == 2584
    assert rt.run(f.static_sum, 0, 300) == sum(range(300))
    assert rt.run(programs.SubFibber.class_sum, 0, 300) == ("SubFibber", sum(range(300)))
    report = rt.run_report(programs.SubFibber(1).class_count, 40)     # a linear chain
    assert report.result == ("SubFibber", 40) and root_tasks(report) == 1


# --- deep recursions ---------------------------------------------------------------------
def test_a_task_recursing_900_levels_deep_runs_in_a_leaf():
    # depth=1: the root runs chain(901), its one task chain(900) recurses in the leaf
    report = dac.run_report(programs.chain, 901, procs=1, depth=1, root_helps=False)
    assert report.result == 901
    assert (report.stats["tasks"], report.stats["depth"]) == (1, 1)
    assert [p["tasks"] for p in report.stats["processes"] if p["role"] == "leaf"] == [1]


def test_a_cutoff_first_holding_250_levels_down_is_respected():
    # spawn-per-batch leaves: the root expands the top, its one task is chain_cut(50)
    report = dac.run_report(programs.chain_cut, 300, procs=1, leaf_mode="spawn")
    assert report.result == 300
    assert report.stats["tasks"] == 1
    assert report.stats["depth"] == 250


def test_a_cutoff_250_levels_down_on_a_worker_recurses_in_its_leaf():
    # the top call is the task: 250 levels of spawns above the grain, 50 plain below
    report = dac.run_report(programs.chain_cut, 300, procs=1)
    assert report.result == 300
    assert report.stats["tasks"] == 1
    assert report.stats["root_calls"] == 0 and report.stats["depth"] == 0


def test_a_cutoff_that_never_holds_runs_on_the_root_like_serial_code(no_spawning):
    report = dac.run_report(programs.chain_uncut, 700, procs=1, leaf_mode="spawn")
    assert report.result == 700
    assert (report.stats["tasks"], report.stats["passes"]) == (0, 1)


def test_a_cutoff_that_never_holds_on_a_worker_spawns_every_call():
    report = dac.run_report(programs.chain_uncut, 700, procs=1)
    assert report.result == 700
    assert (report.stats["tasks"], report.stats["root_calls"]) == (1, 0)


# --- one Runtime, many runs ---------------------------------------------------------------
@pytest.mark.parametrize("n", range(1, 15))
def test_nqueens_counts(rt, n):
    assert rt.run(programs.queens_nb, n, 0, 0, 0) == programs.QUEENS[n]


def test_runtime_reuses_its_tree(rt):
    first = rt.run_report(programs.fib, 18)
    second = rt.run_report(programs.fib, 19)
    assert (first.result, second.result) == (2584, 4181)
    leaves = [sorted(p["pid"] for p in r.stats["processes"] if p["role"] == "leaf")
              for r in (first, second)]
    assert len(leaves[0]) == 2 and leaves[0] == leaves[1]
    # the tree was built before these runs: no spawn and no start-up counted
    assert second.stats["spawns"] == 0
    assert second.stats["startup_s"] == 0
    assert rt.report is second


def test_mutual_recursion(rt):
    assert rt.run(programs.ping, 16) == programs.plain_ping(16)
    assert rt.run(programs.pong, 13) == programs.plain_pong(13)


def test_keyword_arguments(rt):
    # 64 calls without children napping 10 ms each: the second leaf, idle, steals
    report = rt.run_report(programs.weighted_sum, 3, 300, scale=5, offset=-2, nap=0.01)
    assert report.result == sum(5 * i - 2 for i in range(3, 300))
    assert report.stats["split_tasks"] >= 1


def test_list_results(rt):
    assert rt.run(programs.squares_list, 0, 150) == [i * i for i in range(150)]


def test_dict_results(rt):
    result = rt.run(programs.residues, 10, 1000, 7)
    expected = {r: sum(1 for i in range(10, 1000) if i % 7 == r) for r in range(7)}
    assert type(result) is dict
    assert result == expected


def test_numpy_array_results(rt):
    result = rt.run(programs.cubes_array, 0, 700)
    assert isinstance(result, np.ndarray) and result.dtype == np.int64
    np.testing.assert_array_equal(result, np.arange(700, dtype=np.int64) ** 3)


def test_dataclass_results(rt):
    values = tuple((i * 7919) % 1009 - 500 for i in range(400))
    result = rt.run(programs.summarize, values)
    assert type(result) is programs.Summary
    assert result == programs.Summary(400, sum(values), min(values), max(values))


def test_explicit_depth_option_of_spawn(rt):
    report = rt.run_report(programs.fib_depth3, 18)
    assert report.result == programs.plain_fib(18)
    assert root_tasks(report) == programs.fib_calls_at_depth(18, 3) == 8


def test_cutoff_option_of_spawn():
    # the root's expansion (spawn-per-batch leaves): a task per call where it holds
    report = dac.run_report(programs.fib_cutoff, 20, procs=2, leaf_mode="spawn")
    assert report.result == 6765
    assert report.stats["tasks"] == programs.fib_calls_under_cutoff(20, programs._small)
    assert report.stats["tasks"] == 89


def test_cutoff_option_of_spawn_on_workers(rt):
    report = rt.run_report(programs.fib_cutoff, 20)
    assert report.result == 6765
    assert report.stats["root_calls"] == 0
    assert report.stats["tasks"] == 1 + report.stats["split_tasks"]


def test_dependent_spawns_take_one_pass_per_step(rt):
    report = rt.run_report(programs.iterate_affine, 2, 4)
    x = 2
    for _ in range(4):
        x = 3 * x + 1
    assert report.result == x == 202
    assert report.stats["passes"] == 5           # the first, then one per result
    assert report.stats["tasks"] == 4


def test_dependent_spawns_in_two_stages(rt):
    report = rt.run_report(programs.two_stage, 12)
    assert report.result == programs.plain_two_stage(12)
    assert report.stats["passes"] >= 3
    assert report.stats["tasks"] == 12 + 11


def test_mergesort_example_equals_numpy_sort(rt):
    import mergesort  # examples/mergesort.py (on sys.path)
    data = np.random.default_rng(7).integers(0, 1 << 40, 6000)
    report = rt.run_report(mergesort.mergesort, data)
    assert report.stats["tasks"] > 1
    np.testing.assert_array_equal(report.result, np.sort(data))


def test_a_leaf_named_by_reference_is_imported_in_the_leaves_only():
    import sys

    import dac
    # programs.queens_ref names its leaf "refleaf:count" (a module only leaves import)
    report = dac.run_report(programs.queens_ref, 8, 0, 0, 0, procs=2, depth=2)
    assert report.result == programs.QUEENS[8]
    assert "refleaf" not in sys.modules
    assert report.stats["processes"][0]["tasks"] == 0      # the root could not help


def test_a_branch_spawns_after_its_sync_while_another_branch_still_works(rt):
    """No barrier across the tree: the fast branch's second task starts as soon as its
    first result is in, long before the slow branch's first task ends."""
    rt.run(programs.fib, 14)                     # every leaf ready: the root only schedules
    report = rt.run_report(programs.slow_and_fast_branches, 1.5)
    (slow_first, slow_second), (fast_first, fast_second) = report.result
    assert [s[0] for s in (slow_first, slow_second, fast_first, fast_second)] == \
        ["first", "second", "first", "second"]
    assert fast_second[1] < slow_first[2] - 0.5
    assert slow_second[1] >= slow_first[2]
    assert report.stats["tasks"] == 4
    assert report.stats["passes"] >= 3


def test_passes_over_a_big_top_are_paced():
    """1024 tasks under 1023 frames at the root: a pass re-runs the unfinished frames,
    so it comes at most every 1 / PASS_SHARE times its own cost, not once per result
    a frame waits on (that was hundreds of passes, a fifth of fib's speed)."""
    report = dac.run_report(programs.range_sum, 0, 1024, 0.002, procs=2, depth=10,
                            root_helps=False)
    assert report.result == sum(range(1024))
    assert root_tasks(report) == 1024
    assert 2 <= report.stats["passes"] <= 40


def test_a_leaf_loads_none_of_the_roots_modules():
    """A leaf imports its own role's code: not the root's scheduler, the router's policy,
    topology files or spawning (a third of a leaf's start-up CPU, paid by every leaf)."""
    with dac.Runtime(procs=2) as runtime:
        report = runtime.run_report(programs.modules_loaded, programs.ROOT_SIDE_MODULES)
    pid, loaded = report.result
    leaves = [p["pid"] for p in report.stats["processes"] if p["role"] == "leaf"]
    assert pid in leaves
    assert loaded == []


# --- the root's garbage collector -------------------------------------------------------
@pytest.mark.parametrize("fail", [False, True])
def test_the_root_collects_garbage_again_after_a_run(rt, fail):
    """The root's passes over the top run with the cyclic collector paused, and the
    drive keeps the first pass's objects frozen out of its sight (dac.expansion,
    dac.driving); both end with the run, whether it returns or raises."""
    import gc
    programs.GC_SEEN.clear()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    if fail:
        with pytest.raises(dac.TaskError, match="fails after its sync"):
            rt.run(programs.fib_noting_gc, 12, True)
    else:
        assert rt.run(programs.fib_noting_gc, 12) == 144
    # frames at depth 0 and 1 ran here, paused, pass after pass
    assert len(programs.GC_SEEN) >= 3 and not any(programs.GC_SEEN)
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_plain_task_payload_is_the_same_bytes_as_its_task_call():
    from dac import task_call
    from dac.task_call import TaskCall
    for args in [(1, 2.5, "x", b"y", None, True), (), (2**70, -1)]:
        call = TaskCall(7, "f#0", 3, args, {})
        plain, script = task_call.write_noting(call, "a test call", True)
        assert plain == task_call.write(call, "a test call") and script is None
        assert task_call.read(plain) == call


def test_objects_the_program_froze_stay_frozen_through_a_run(rt):
    import gc
    marker = [["a list the program froze"]]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert rt.run(programs.fib_noting_gc, 10) == 55
        # a frozen object is outside the collector's generations (gc.get_objects)
        assert not any(o is marker for o in gc.get_objects())
        assert 0 < gc.get_freeze_count() <= frozen and gc.isenabled()
    finally:
        gc.unfreeze()
    assert any(o is marker for o in gc.get_objects())
