"""The top is a task: the root runs none of the user's code (issue 21, "no serial top").

Where every leaf is a persistent CPU worker and the function leaves the grain to dac
(no ``depth=``, ``cutoff=``, ``leaf=`` or ``gpu_batch=``), the job's first call goes to a
leaf as its one task and work spreads by splitting spawns off running tasks. No frame
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


def test_the_root_still_expands_a_function_with_a_kernel():
    """``leaf=`` (and GPU or spawn-per-batch leaves): the root expands the top to the
    grain, as the thesis' method does, so the kernel's tasks are sized up front."""
    report = dac.run_report(programs.queens, 8, 0, 0, 0, procs=2)
    assert report.result == 92
    assert report.stats["depth"] >= 1 and report.stats["root_calls"] >= 1


def test_the_depth_option_keeps_the_root_expansion():
    report = dac.run_report(programs.fib, 20, procs=2, depth=3)
    assert report.result == 6765
    # the 7 frames above depth 3 run on the root, again in each later pass
    assert report.stats["depth"] == 3 and report.stats["passes"] >= 2
    assert report.stats["root_calls"] >= 7 * 2
