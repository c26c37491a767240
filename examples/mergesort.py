"""Parallel merge sort of a NumPy array: the combine step is real data.

    python examples/mergesort.py 2000000

The root splits the array down to the spawn depth; leaves sort their pieces (NumPy's
sort); the root merges the sorted halves on the way back up with a numba merge.
"""

import argparse

import numpy as np
from numba import njit

from dac import run_report, spawn, sync


@njit(cache=True)
def merge(a, b):
    """Merge two sorted arrays into one sorted array."""
    out = np.empty(a.size + b.size, a.dtype)
    i = j = k = 0
    while i < a.size and j < b.size:
        if b[j] < a[i]:
            out[k] = b[j]
            j += 1
        else:
            out[k] = a[i]
            i += 1
        k += 1
    while i < a.size:
        out[k] = a[i]
        i += 1
        k += 1
    while j < b.size:
        out[k] = b[j]
        j += 1
        k += 1
    return out


def sort_piece(a):
    return np.sort(a, kind="stable")


@spawn(leaf=sort_piece)
def mergesort(a):
    if a.size <= 1:
        return a.copy()
    mid = a.size // 2
    left, right = sync(mergesort(a[:mid]), mergesort(a[mid:]))
    return merge(left, right)


def main(argv=None):
    from stealing.observe.stats import format_stats
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("size", type=int, nargs="?", default=1_000_000)
    ap.add_argument("--procs", type=int, default=None)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    data = np.random.default_rng(args.seed).integers(0, 1 << 40, args.size)
    report = run_report(mergesort, data, procs=args.procs)
    ok = bool(np.array_equal(report.result, np.sort(data)))
    print(f"sorted {args.size} integers in {report.elapsed_s:.3f} s, correct: {ok}")
    print(format_stats(report.stats))
    return ok


if __name__ == "__main__":
    main()
