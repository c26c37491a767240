"""N-Queens on a GPU leaf: kernel rates against one CPU leaf, and whole mixed runs.

    python benchmarks/gpu_nqueens.py                    # N = 16 17 18, needs a CUDA GPU
    python benchmarks/gpu_nqueens.py --n 9 --simulate   # numba's CUDA simulator (tiny N)

Part 1 (in this process' children only; the root never touches CUDA): the boards of
depth ``--depth`` are solved (a) by one CPU process with the numba kernel
``nqueens_kernels.count_from``, one board after the other, on ``--cpu-sample`` boards
taken at an even stride over all of them (N = 18 has 36,264 boards of depth 4: about ten
minutes on one core), and (b) by one GPU process with ``nqueens_gpu.count_batch`` in one
launch over all of them (transfers included); the GPU's total is checked against the
known count and its per-board counts against the CPU's on the sample. Rates are in
boards per second, after a warm-up call. For the largest N the GPU is also timed at the
depths ``--gpu-depths`` (more, smaller boards fill more of the device).

Part 2: ``examples/nqueens.py``'s ``queens`` as whole dac runs at ``--run-depth``: one GPU
leaf beside one CPU leaf (``procs=1, gpus=1``: the least a topology allows), the GPU
leaf beside every core's CPU leaf, and the CPU leaves alone. Each runtime starts once;
its first run (the numba compiles) is a warm-up, then ``--repeat`` runs are timed
(``--cpu-repeat`` for the CPU leaves alone, which take longest). Each is set beside the
GPU alone: one launch over all the boards of that depth, no dac.

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
n, depth, kind, sample = {n}, {depth}, {kind!r}, {sample}
boards = [(0, 0, 0)]
for _ in range(depth):
    boards = [c for b in boards for c in children(n, *b)]
a = np.array(boards, dtype=np.int64).reshape(-1, 3)
picked = np.linspace(0, len(a) - 1, min(sample, len(a))).astype(np.int64)
if kind == "cpu":
    count_from(n, *map(int, a[0]))
    t = time.perf_counter()
    counts = [int(count_from(n, *map(int, b))) for b in a[picked]]
    dt = time.perf_counter() - t
    out = {{"boards": len(picked), "seconds": dt, "counts": counts}}
else:
    from nqueens_gpu import count_batch
    count_batch(np.full(1, n), a[:1, 0], a[:1, 1], a[:1, 2])
    t = time.perf_counter()
    got = count_batch(np.full(len(a), n), a[:, 0], a[:, 1], a[:, 2])
    dt = time.perf_counter() - t
    out = {{"boards": len(a), "seconds": dt, "total": int(got.sum()),
           "counts": [int(c) for c in got[picked]]}}
print(json.dumps(out))
"""


def rate(n, depth, kind, simulate, sample):
    """One CPU or GPU process' rate on the boards of ``depth`` (see the module's doc)."""
    env = dict(os.environ)
    if simulate:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    res = subprocess.run([sys.executable, "-c", RATE.format(
        examples=EXAMPLES, n=n, depth=depth, kind=kind, sample=sample)],
        capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-2000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def gpu_present() -> bool:
    """Asked in a child process, so this one never initializes CUDA."""
    res = subprocess.run([sys.executable, "-c", "from numba import cuda; "
                          "print(cuda.is_available())"], capture_output=True, text=True)
    return res.stdout.strip() == "True"


def gpu_alone(n, depth, simulate, sample, known):
    """The GPU's one launch over every board of ``depth``, its total checked."""
    g = rate(n, depth, "gpu", simulate, sample)
    assert g["total"] == known, (n, depth, g["total"], known)
    return {"depth": depth, "boards": g["boards"], "seconds": g["seconds"],
            "gpu_rate": g["boards"] / g["seconds"]}


def rates(args, known):
    """Part 1: one CPU leaf against one GPU leaf, boards per second, for each N."""
    rows = []
    for n in args.n:
        cpu = rate(n, args.depth, "cpu", args.simulate, args.cpu_sample)
        gpu = rate(n, args.depth, "gpu", args.simulate, args.cpu_sample)
        assert gpu["total"] == known.get(n, gpu["total"]), (n, gpu["total"])
        assert cpu["counts"] == gpu["counts"], f"N={n}: CPU and GPU disagree on the sample"
        row = {"n": n, "boards": gpu["boards"], "cpu_sample": cpu["boards"],
               "cpu_rate": cpu["boards"] / cpu["seconds"],
               "gpu_rate": gpu["boards"] / gpu["seconds"]}
        row["gpu_over_cpu"] = row["gpu_rate"] / row["cpu_rate"]
        rows.append(row)
    return rows


def whole_runs(args, known):
    """Part 2: timed dac runs of N-Queens with and without the GPU leaf."""
    from nqueens import queens

    import dac
    n, depth = args.n[-1], args.run_depth
    cores = len(os.sched_getaffinity(0))
    configs = [("GPU leaf + 1 CPU leaf", {"procs": 1, "gpus": 1}, args.repeat),
               (f"GPU leaf + {cores} CPU leaves", {"gpus": 1}, args.repeat),
               (f"{cores} CPU leaves", {}, args.cpu_repeat)][:2 if args.no_cpu_alone else 3]
    out = []
    for name, opts, repeat in configs:
        with dac.Runtime(depth=depth, gpu_simulate=args.simulate or None, **opts) as rt:
            first = rt.run_report(queens, n, 0, 0, 0)
            reports = [rt.run_report(queens, n, 0, 0, 0) for _ in range(repeat)]
        for r in [first, *reports]:
            assert r.result == known.get(n, first.result), (name, r.result)
        startup = first.stats.get("startup_s") or 0.0
        times = [r.elapsed_s for r in reports] or [first.elapsed_s - startup]
        last = (reports or [first])[-1]
        procs = last.stats["processes"]
        gpu = [p for p in procs if p.get("device", -1) >= 0]
        root = [p for p in procs if p["role"] == "root"][0]
        out.append({"name": name, "startup_s": startup, "first_s": first.elapsed_s,
                    "times": times, "tasks": last.stats["tasks"],
                    "gpu_tasks": gpu[0]["tasks"] if gpu else 0,
                    "largest_batch": gpu[0].get("largest_batch") if gpu else None,
                    "gpu_busy_s": gpu[0]["busy_s"] if gpu else 0.0,
                    "gpu_batches": gpu[0]["batches"] if gpu else 0,
                    "root_cpu_s": root["cpu_s"]})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[16, 17, 18])
    ap.add_argument("--depth", type=int, default=4, help="depth of the boards (part 1)")
    ap.add_argument("--cpu-sample", type=int, default=300,
                    help="boards the CPU rate is measured on (an even stride over all)")
    ap.add_argument("--gpu-depths", type=int, nargs="*", default=[5, 6],
                    help="more depths at which the GPU is timed, for the largest N")
    ap.add_argument("--run-depth", type=int, default=None,
                    help="spawn depth of the whole runs (default: examples/nqueens.py's "
                         "with --gpu)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs with the GPU leaf")
    ap.add_argument("--cpu-repeat", type=int, default=0,
                    help="timed runs of the CPU leaves alone after the first (0: the "
                         "first, start-up taken off)")
    ap.add_argument("--no-rates", action="store_true",
                    help="skip part 1 but the GPU alone (--gpu-depths and the runs' depth)")
    ap.add_argument("--no-cpu-alone", action="store_true",
                    help="skip the whole runs of the CPU leaves alone")
    ap.add_argument("--simulate", action="store_true", help="numba's CUDA simulator")
    args = ap.parse_args(argv)
    if args.run_depth is None:
        args.run_depth = max(2, min(args.n[-1] - 15, 3))
    if not args.simulate and not gpu_present():
        print("gpu_nqueens: no usable CUDA GPU on this machine (numba.cuda.is_available() "
              "is False); run on a GPU host, or with --simulate at a tiny N",
              file=sys.stderr)
        return 2
    from nqueens_kernels import KNOWN_COUNTS as known

    rows = [] if args.no_rates else rates(args, known)
    n = args.n[-1]
    alone = {}
    if rows:
        where = "simulator" if args.simulate else "GPU"
        print(f"boards of depth {args.depth}; rates in boards/s ({where}); CPU on "
              f"{args.cpu_sample} boards")
        print(f"{'N':>3} {'boards':>8} {'1 CPU leaf':>12} {'1 GPU leaf':>12} {'GPU/CPU':>8}")
        for r in rows:
            print(f"{r['n']:>3} {r['boards']:>8} {r['cpu_rate']:>12.1f} "
                  f"{r['gpu_rate']:>12.1f} {r['gpu_over_cpu']:>8.2f}")
        alone[args.depth] = {"depth": args.depth, "boards": rows[-1]["boards"],
                             "seconds": rows[-1]["boards"] / rows[-1]["gpu_rate"],
                             "gpu_rate": rows[-1]["gpu_rate"]}
    depths = set(args.gpu_depths + [args.run_depth])
    for d in sorted(depths - set(alone)):
        alone[d] = gpu_alone(n, d, args.simulate, args.cpu_sample, known[n])
    print(f"\nN={n}, the GPU alone, one launch over every board:")
    for d, g in sorted(alone.items()):
        print(f"  depth {d}: {g['boards']:>9} boards in {g['seconds']:.3f} s "
              f"({g['gpu_rate']:.0f} boards/s)")

    runs = whole_runs(args, known)
    base = alone[args.run_depth]["seconds"]
    print(f"\nN={n} whole dac runs at depth {args.run_depth} (start-up apart; the GPU alone "
          f"takes {base:.3f} s):")
    for r in runs:
        lo, hi = min(r["times"]), max(r["times"])
        print(f"  {r['name']:<26} {lo:.3f}-{hi:.3f} s ({base / hi:.2f}-{base / lo:.2f}x the "
              f"GPU alone); start-up {r['startup_s']:.1f} s, first run {r['first_s']:.1f} s; "
              f"GPU leaf ran {r['gpu_tasks']} of {r['tasks']} tasks, largest batch "
              f"{r['largest_batch']}")
        print(f"  {'':<26} last run: GPU leaf busy {r['gpu_busy_s']:.2f} s in "
              f"{r['gpu_batches']} batches, the root's CPU {r['root_cpu_s']:.2f} s")
    print(json.dumps({"rates": rows, "gpu_alone": list(alone.values()), "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
