"""Count all solutions of the N-Queens problem on a work-stealing tree of processes.

    python examples/nqueens.py 12            # this machine, all cores
    python examples/nqueens.py 15 --procs 4  # four leaf processes
    python examples/nqueens.py 18 --gpu      # plus one GPU leaf (numba-CUDA kernel)
    python examples/nqueens.py 10 --gpu --simulate   # the kernel in numba's simulator
    dac run --json examples/nqueens.py 14    # JSON report as the last line

The Python body below places the first queens (thesis §5.4): the top call is a task
on a leaf, its spawns above the grain are split off to other leaves, and every call at
the grain is solved by the numba bitmask kernel ``count_from`` (same arguments). With
``--gpu`` the root expands the top to the spawn depth (the thesis' method), and a GPU
leaf solves whole batches of boards with ``nqueens_gpu.count_batch``, one CUDA thread
per board.

Spawned interpreters start cold, so when run as a script this file starts the process
tree first and its leaves import the kernels at once (``preload``). The root needs only
``children`` (plain Python): the leaf and GPU functions are named as
``"module:function"``, so the root never imports numba at all.
"""

import argparse
import os
import sys

import dac

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=12, help="board size (default 12)")
    ap.add_argument("--procs", type=int, default=None, help="leaf processes")
    ap.add_argument("--leaf-mode", choices=("persistent", "spawn"), default=None)
    ap.add_argument("--depth", type=int, default=None, help="spawn depth (default auto)")
    ap.add_argument("--tasks-per-leaf", type=int, default=None)
    ap.add_argument("--gpu", action="store_true", help="add one GPU leaf on this machine")
    ap.add_argument("--simulate", action="store_true",
                    help="with --gpu: run the kernel in numba's CUDA simulator")
    args = ap.parse_args(argv)
    if args.n < 1:
        ap.error("n must be >= 1")
    return args


def start_runtime(args):
    depth = args.depth
    if args.gpu and depth is None:      # a few thousand tasks: the GPU leaf splits its
        depth = max(2, min(args.n - 15, 3))     # own batches further (nqueens_gpu)
    return dac.Runtime(procs=args.procs, leaf_mode=args.leaf_mode, depth=depth,
                       tasks_per_leaf=args.tasks_per_leaf, gpus=1 if args.gpu else None,
                       gpu_simulate=args.simulate or None,
                       preload=["nqueens_kernels"]).start()


if __name__ == "__main__":
    ARGS = parse_args()
    RUNTIME = start_runtime(ARGS)

from nqueens_boards import children  # noqa: E402


@dac.spawn(leaf="nqueens_kernels:count_from", gpu_batch="nqueens_gpu:count_batch")
def queens(n, cols, d1, d2):
    """Solutions completing the partial board (cols, d1, d2) of an n x n board."""
    if cols == (1 << n) - 1:
        return 1
    futures = [queens(n, c, a, b) for c, a, b in children(n, cols, d1, d2)]
    dac.sync()
    return sum(f.result() for f in futures)


def main(args, runtime):
    from stealing.observe.stats import format_stats, grain_text
    with runtime:
        report = runtime.run_report(queens, args.n, 0, 0, 0)
    print(f"{args.n}-queens: {report.result} solutions in {report.elapsed_s:.3f} s "
          f"({grain_text(report.stats)})")
    print(format_stats(report.stats))
    return report.result


if __name__ == "__main__":
    main(ARGS, RUNTIME)
