"""examples/spine.py: the deep narrow recursion gives the plain loop's value, serially
and on 2 leaves, deeper than Python's default recursion limit allows a plain call."""

import os
import sys

import dac

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "examples"))

import spine  # noqa: E402


def test_spine_serially_and_on_two_leaves():
    # 40 levels of about 1 ms: the other leaf is up and steals long before they are
    # done (a thief found empty-handed is paid a poll, 2 ms, later; 40 levels of 2 us
    # could all be done by then)
    scale = spine.loops_per_ms()
    expected = spine.plain_spine(40, 1.0, scale)
    assert spine.spine(40, 1.0, scale) == expected
    report = dac.run_report(spine.spine, 40, 1.0, scale, procs=2)
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
