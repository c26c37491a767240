"""examples/spine.py: the deep narrow recursion gives the plain loop's value, serially
and on 2 leaves, deeper than Python's default recursion limit allows a plain call."""

import os
import sys

import dac

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "examples"))

import spine  # noqa: E402


def test_spine_serially_and_on_two_leaves():
    expected = spine.plain_spine(40, 0.05, 1000)
    assert spine.spine(40, 0.05, 1000) == expected
    report = dac.run_report(spine.spine, 40, 0.05, 1000, procs=2)
    assert report.result == expected
    assert report.stats["tasks"] >= 2


def test_a_spine_deeper_than_the_default_limit():
    # Python's default limit, whatever an earlier test in this process set (UTS's
    # deep trees raise it)
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        assert spine.spine(900, 0.0, 1) == spine.plain_spine(900, 0.0, 1)
        assert sys.getrecursionlimit() == 1000      # put back after the serial run
    finally:
        sys.setrecursionlimit(saved)
