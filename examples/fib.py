"""Fibonacci by naive recursion, the classic divide-and-conquer demo.

    python examples/fib.py 32
    python examples/fib.py 35 --depth 6     # calls at recursion depth 6 are tasks

Each call spawns two children and adds their values. The top call is a task on a
leaf; calls above the grain (chosen by that leaf from the run's size) are split off to
other leaves, and each call at it runs the numba function ``fib_leaf``. With
``--depth`` the root expands the top to that depth and sends the calls there as tasks.
"""

import argparse

from numba import njit

from dac import run_report, spawn, sync


@njit(cache=True)
def fib_leaf(n):
    """Sequential naive Fibonacci (same recursion, compiled)."""
    if n < 2:
        return n
    return fib_leaf(n - 1) + fib_leaf(n - 2)


@spawn(leaf=fib_leaf)
def fib(n):
    if n < 2:
        return n
    a, b = sync(fib(n - 1), fib(n - 2))
    return a + b


def main(argv=None):
    from stealing.observe.stats import format_stats, grain_text
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=32)
    ap.add_argument("--procs", type=int, default=None, help="leaf processes")
    ap.add_argument("--depth", type=int, default=None, help="spawn depth (default auto)")
    ap.add_argument("--leaf-mode", choices=("persistent", "spawn"), default="persistent")
    args = ap.parse_args(argv)
    report = run_report(fib, args.n, procs=args.procs, depth=args.depth,
                        leaf_mode=args.leaf_mode)
    print(f"fib({args.n}) = {report.result} in {report.elapsed_s:.3f} s "
          f"({grain_text(report.stats)})")
    print(format_stats(report.stats))
    return report.result


if __name__ == "__main__":
    main()
