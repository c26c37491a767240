"""@spawn programs of tests/test_hardening.py (importable, so the leaves import them by
reference)."""

from __future__ import annotations

import sys

from dac import spawn, sync


@spawn(depth=1)
def deep(n, levels):
    """Two tasks; each recurses ``levels`` deep in its leaf (every level a @spawn call
    run serially there) and the bottom raises."""
    if n == 0:
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * levels))  # 3 frames a level
        return sink(levels)
    a, b = sync(deep(n - 1, levels), deep(n - 1, levels))
    return a + b


@spawn
def sink(k):
    if k == 0:
        raise ValueError("the bottom of the recursion")
    return sync(sink(k - 1)) + 1


class Fragile:
    """Pickles in a leaf, refuses to be unpickled (on the root, which unpickles
    results)."""

    def __init__(self, v):
        self.v = v

    def __setstate__(self, state):
        raise ValueError(f"Fragile refuses to be unpickled (state {state})")


@spawn(depth=1)
def fragile(n):
    """fragile(4) on the root waits for the task fragile(3), whose result is a Fragile."""
    if n > 3:
        return sync(fragile(3)).v
    return Fragile(n)


@spawn(depth=1)
def hog(n):
    """The task hog(0) raises MemoryError() with no message (as a failed allocation
    does); hog(2) above the spawn depth does the same on the root."""
    if n == 0 or n == 2:
        raise MemoryError()
    a, b = sync(hog(n - 1), hog(n - 1))
    return a + b
