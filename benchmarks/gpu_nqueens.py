"""N-Queens on a GPU leaf: kernel rate against one CPU leaf, and a whole mixed run.

    python benchmarks/gpu_nqueens.py                    # N = 16 17 18, needs a CUDA GPU
    python benchmarks/gpu_nqueens.py --n 9 --simulate   # numba's CUDA simulator (tiny N)

Part 1 (in this process' children only; the root never touches CUDA): the boards of
depth ``--depth`` are solved (a) by one CPU process with the numba kernel
``nqueens_kernels.count_from``, one board after the other, and (b) by one GPU process
with ``nqueens_gpu.count_batch`` in one launch (transfers included). Both rates are in
boards per second, after a warm-up call; target at N = 18: GPU >= 50x one CPU leaf.

Part 2: ``examples/nqueens.py``'s ``queens`` on this machine's CPU leaves plus one GPU
leaf (rate-sized batches), against the CPU leaves alone: elapsed time, tasks done by the
GPU leaf and its largest batch.

Without a GPU (and without --simulate) it says so and exits with status 2.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")
sys.path.insert(0, EXAMPLES)

RATE = r"""
import sys, time, json
sys.path.insert(0, {examples!r})
import numpy as np
from nqueens_kernels import children, count_from
n, depth, kind = {n}, {depth}, {kind!r}
boards = [(0, 0, 0)]
for _ in range(depth):
    boards = [c for b in boards for c in children(n, *b)]
a = np.array(boards, dtype=np.int64).reshape(-1, 3)
if kind == "cpu":
    count_from(n, *map(int, a[0]))
    t = time.perf_counter(); total = sum(int(count_from(n, *map(int, b))) for b in a)
else:
    from nqueens_gpu import count_batch
    count_batch(np.full(1, n), a[:1, 0], a[:1, 1], a[:1, 2])
    t = time.perf_counter()
    total = int(count_batch(np.full(len(a), n), a[:, 0], a[:, 1], a[:, 2]).sum())
dt = time.perf_counter() - t
print(json.dumps({{"boards": len(a), "seconds": dt, "total": total}}))
"""


def rate(n, depth, kind, simulate):
    env = dict(os.environ)
    if simulate:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    res = subprocess.run([sys.executable, "-c", RATE.format(examples=EXAMPLES, n=n,
                                                            depth=depth, kind=kind)],
                         capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-2000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def gpu_present() -> bool:
    """Asked in a child process, so this one never initializes CUDA."""
    res = subprocess.run([sys.executable, "-c", "from numba import cuda; "
                          "print(cuda.is_available())"], capture_output=True, text=True)
    return res.stdout.strip() == "True"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[16, 17, 18])
    ap.add_argument("--depth", type=int, default=4, help="depth of the boards (tasks)")
    ap.add_argument("--simulate", action="store_true", help="numba's CUDA simulator")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not args.simulate and not gpu_present():
        print("gpu_nqueens: no usable CUDA GPU on this machine (numba.cuda.is_available() "
              "is False); run on a GPU host, or with --simulate at a tiny N",
              file=sys.stderr)
        return 2
    from nqueens_kernels import KNOWN_COUNTS

    rows = []
    for n in args.n:
        cpu, gpu = (rate(n, args.depth, k, args.simulate) for k in ("cpu", "gpu"))
        assert cpu["total"] == gpu["total"] == KNOWN_COUNTS.get(n, cpu["total"])
        row = {"n": n, "boards": cpu["boards"],
               "cpu_rate": cpu["boards"] / cpu["seconds"],
               "gpu_rate": gpu["boards"] / gpu["seconds"]}
        row["gpu_over_cpu"] = row["gpu_rate"] / row["cpu_rate"]
        rows.append(row)
    print(f"boards of depth {args.depth}; rates in boards/s "
          f"({'simulator' if args.simulate else 'GPU'})")
    print(f"{'N':>3} {'boards':>8} {'1 CPU leaf':>12} {'1 GPU leaf':>12} {'GPU/CPU':>8}")
    for r in rows:
        target = " (target >= 50)" if r["n"] == 18 else ""
        print(f"{r['n']:>3} {r['boards']:>8} {r['cpu_rate']:>12.1f} {r['gpu_rate']:>12.1f}"
              f" {r['gpu_over_cpu']:>8.2f}{target}")

    from nqueens import queens

    import dac
    n = args.n[-1]
    mixed = dac.run_report(queens, n, 0, 0, 0, gpus=1, gpu_simulate=args.simulate,
                           depth=args.depth)
    cpu_only = dac.run_report(queens, n, 0, 0, 0, depth=args.depth)
    gpu_leaf = [p for p in mixed.stats["processes"] if p.get("device", -1) >= 0][0]
    print(f"\nN={n} whole run: CPU leaves alone {cpu_only.elapsed_s:.3f} s, with one GPU "
          f"leaf {mixed.elapsed_s:.3f} s ({cpu_only.elapsed_s / mixed.elapsed_s:.2f}x); "
          f"the GPU leaf solved {gpu_leaf['tasks']} of {mixed.stats['tasks']} tasks, "
          f"largest batch {gpu_leaf.get('largest_batch')}")
    if args.json:
        print(json.dumps({"rates": rows, "mixed_s": mixed.elapsed_s,
                          "cpu_only_s": cpu_only.elapsed_s,
                          "gpu_tasks": gpu_leaf["tasks"], "tasks": mixed.stats["tasks"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
