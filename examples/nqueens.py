"""Count all solutions of the N-Queens problem on a work-stealing tree of processes.

    python examples/nqueens.py 12            # this machine, all cores
    python examples/nqueens.py 15 --procs 4  # four leaf processes
    dac run --json examples/nqueens.py 14    # JSON report as the last line

The Python body below runs on the root above the spawn depth (it places the first
queens, thesis §5.4); every call at the spawn depth is a task, solved in a leaf by the
numba bitmask kernel ``count_from`` (same arguments).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from nqueens_kernels import children, count_from  # noqa: E402

from dac import run_report, spawn, sync  # noqa: E402


@spawn(leaf=count_from)
def queens(n, cols, d1, d2):
    """Solutions completing the partial board (cols, d1, d2) of an n x n board."""
    if cols == (1 << n) - 1:
        return 1
    futures = [queens(n, c, a, b) for c, a, b in children(n, cols, d1, d2)]
    sync()
    return sum(f.result() for f in futures)


def main(argv=None):
    from stealing.stats import format_stats
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=12, help="board size (default 12)")
    ap.add_argument("--procs", type=int, default=None, help="leaf processes")
    ap.add_argument("--leaf-mode", choices=("persistent", "spawn"), default="persistent")
    ap.add_argument("--depth", type=int, default=None, help="spawn depth (default auto)")
    ap.add_argument("--tasks-per-leaf", type=int, default=5)
    args = ap.parse_args(argv)
    if args.n < 1:
        ap.error("n must be >= 1")
    report = run_report(queens, args.n, 0, 0, 0, procs=args.procs,
                        leaf_mode=args.leaf_mode, depth=args.depth,
                        tasks_per_leaf=args.tasks_per_leaf)
    print(f"{args.n}-queens: {report.result} solutions in {report.elapsed_s:.3f} s "
          f"(spawn depth {report.stats['depth']})")
    print(format_stats(report.stats))
    return report.result


if __name__ == "__main__":
    main()
