"""The top is a task: the root runs none of the user's code (issue 21, "no serial top").

Where every leaf is a persistent CPU worker (and the run has no ``depth`` option), the
job's first call goes to a leaf as its one task and work spreads by splitting spawns
off running tasks; a function's ``depth=``, ``cutoff=`` or ``leaf=`` sets the grain on
the workers (``dac.stealable.Grain``). No frame
runs twice, so a top that draws random numbers or has side effects behaves as the
serial program does.
"""

import os

import programs
import pytest

import dac


@pytest.fixture(scope="module")
def rt():
    """One tree of 2 leaves for the module's runs on a kept tree."""
    with dac.Runtime(procs=2) as runtime:
        yield runtime


def frames_marked(mark):
    lines = mark.read_text().split("\n")[:-1]
    return [line.split() for line in lines]


def test_a_top_drawing_random_numbers_gives_a_consistent_answer():
    report = dac.run_report(programs.random_top, 6, 0.05, procs=3)
    picks, values = report.result
    assert len(set(picks)) == 6
    assert values == [programs._value_of(x) for x in picks]
    assert report.stats["root_calls"] == 0 and report.stats["passes"] == 0
    assert report.stats["depth"] == 0


def test_random_numbers_at_the_top_are_drawn_on_a_leaf_each_run(rt):
    first, _ = rt.run(programs.random_top, 4, 0.0)
    second, _ = rt.run(programs.random_top, 4, 0.0)
    assert first != second


@pytest.mark.parametrize("procs", [1, 4])
def test_a_side_effect_in_every_frame_happens_exactly_once(tmp_path, procs):
    mark = tmp_path / "frames"
    report = dac.run_report(programs.marked_frames, 6, "", str(mark), procs=procs)
    assert report.result == 2 ** 7 - 1
    frames = frames_marked(mark)
    paths = [path for path, _ in frames]
    assert len(paths) == 127 and len(set(paths)) == 127       # each frame once
    assert paths[0] == "top"
    root = str(os.getpid())
    assert root not in {pid for _, pid in frames}       # none ran on the root
    if procs > 1:       # the work spread by splits of the one task
        assert len({pid for _, pid in frames}) >= 2
        assert report.stats["tasks"] == 1 + report.stats["split_tasks"]
        assert report.stats["steals_split"] >= 1
    else:
        assert report.stats["tasks"] == 1


def test_a_function_with_a_kernel_is_a_task_at_the_top_too():
    """``leaf=``: the top is the one task as well; its worker makes the calls above
    the grain entries and runs the kernel at it (issue 21: no replay for any
    function a worker can run)."""
    report = dac.run_report(programs.queens, 8, 0, 0, 0, procs=2)
    assert report.result == 92
    assert report.stats["root_calls"] == 0 and report.stats["passes"] == 0
    assert report.stats["depth"] == 0


def kinds_marked(mark):
    frames = [line.split() for line in mark.read_text().split("\n")[:-1]]
    return {kind: [(path, pid) for path, pid, k in frames if k == kind]
            for kind in ("fn", "leaf")}


def depth_of(path):
    return 0 if path == "top" else len(path)


@pytest.mark.parametrize("procs", [1, 4])
def test_a_leaf_kernel_runs_once_at_the_grain_and_every_frame_above_it_once(
        tmp_path, procs):
    """No ``depth=`` or ``cutoff=``: the grain is as deep as the run's target count
    of tasks needs (at least 16 a leaf), found on the worker from the top's
    branching; every frame above it runs the body once, every call at it the
    kernel once, none on the root. On one leaf too (its spawns are plain calls)."""
    mark = tmp_path / "frames"
    report = dac.run_report(programs.marked_leafy, 8, "", str(mark), procs=procs)
    assert report.result == 2 ** 9 - 1
    kinds = kinds_marked(mark)
    fn, leaf = [p for p, _ in kinds["fn"]], [p for p, _ in kinds["leaf"]]
    grain = {depth_of(p) for p in leaf}
    assert len(grain) == 1
    d = grain.pop()
    assert 2 ** d >= 16 * procs and 2 ** (d - 1) < 2 * 16 * procs * 4
    assert len(leaf) == len(set(leaf)) == 2 ** d          # each call at the grain once
    assert len(fn) == len(set(fn)) == 2 ** d - 1          # each frame above it once
    assert {depth_of(p) for p in fn} == set(range(d))
    assert fn[0] == "top"
    pids = {pid for _, pid in kinds["fn"] + kinds["leaf"]}
    assert str(os.getpid()) not in pids
    assert report.stats["root_calls"] == 0 and report.stats["passes"] == 0
    if procs > 1:
        assert len(pids) >= 2 and report.stats["split_tasks"] >= 1


def test_a_cutoff_grain_runs_everything_below_it_where_the_grain_call_ran(tmp_path):
    """``cutoff=``: calls where it holds are the grain; the calls under one run in
    its process, serially (plain calls), each exactly once."""
    mark = tmp_path / "frames"
    report = dac.run_report(programs.marked_cut, 7, "", str(mark), procs=3)
    assert report.result == 2 ** 8 - 1
    frames = kinds_marked(mark)["fn"]
    paths = [p for p, _ in frames]
    assert len(paths) == len(set(paths)) == 2 ** 8 - 1
    pid_of = dict(frames)
    grain = [p for p in paths if depth_of(p) == 4]          # depth 7 - 3 left
    assert len(grain) == 16
    for g in grain:                 # the 15 calls under a grain call ran with it
        under = [p for p in paths if p.startswith(g)]
        assert len(under) == 15 and {pid_of[p] for p in under} == {pid_of[g]}
    assert str(os.getpid()) not in pid_of.values()
    assert report.stats["root_calls"] == 0 and report.stats["split_tasks"] >= 1


def test_a_random_top_of_a_function_with_a_kernel_gives_a_consistent_answer(tmp_path):
    mark = tmp_path / "frames"
    report = dac.run_report(programs.random_leafy, 6, str(mark), procs=3)
    picks, values = report.result
    assert len(set(picks)) == 6 and values == [7] * 6
    kinds = kinds_marked(mark)
    paths = [p for p, _ in kinds["fn"] + kinds["leaf"]]
    assert len(paths) == len(set(paths))            # no frame ran twice
    assert {repr(x) for x in picks} <= set(paths)   # each pick's call ran once
    assert report.stats["root_calls"] == 0


def test_one_shot_leaves_keep_the_root_expansion():
    """Spawn-per-batch leaves (the thesis' model) run one batch and end: they are no
    workers, so the root expands the top to the grain for them."""
    report = dac.run_report(programs.queens, 8, 0, 0, 0, procs=2,
                            leaf_mode="spawn")
    assert report.result == 92
    assert report.stats["depth"] >= 1 and report.stats["root_calls"] >= 1


def test_the_depth_option_keeps_the_root_expansion():
    report = dac.run_report(programs.fib, 20, procs=2, depth=3)
    assert report.result == 6765
    # the 7 frames above depth 3 run on the root, again in each later pass
    assert report.stats["depth"] == 3 and report.stats["passes"] >= 2
    assert report.stats["root_calls"] >= 7 * 2
