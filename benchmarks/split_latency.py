"""How long a thief's split takes to reach its victim: the root's SPLIT to the leaf's
take, from a message trace of UTS T3 (or the spine) on a kept ``Runtime(procs=2)``.

A busy leaf reads its messages when its task polls: by the count of its spawns in the
leaf's own context, and below the horizon when a signal wakes it, the parent's ring
(``SIGIO`` on its doorbell) or the clock's tick (``dac.ticker``: 50 ms where the parent
rings). A ring that is lost leaves a thief waiting for that tick, so the delays show
it: on UTS T3, 11-14 of about 200 splits a run took 41-50 ms before the three fixes
of 2026-11-27 (docs/performance.md); after them the median is 0.1 ms, and 1-2 of
400-500 a run still take 35-50 ms (the job's first split, while the leaves load the
job; a victim kept off its core by the other processes). Every process writes
its trace (``DAC_TRACE_DIR``, set here to a folder of its own before dac is
imported); ``stealing.observe.trace.delivery_delays`` pairs the sends and the takes.

Run:  python benchmarks/split_latency.py                 # UTS T3, 3 runs (~20 s)
      python benchmarks/split_latency.py --program spine --repeat 5
      python benchmarks/split_latency.py --tree default --repeat 1   # seconds
Its last line is a JSON object. Exit status: 0 (figures are reported, not asserted),
1 on a wrong answer.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples")]
TRACES = tempfile.mkdtemp(prefix="dac-split-latency-")
os.environ["DAC_TRACE_DIR"] = TRACES        # read when dac's trace module is imported

import spine  # noqa: E402  (examples/spine.py)
import uts  # noqa: E402  (examples/uts.py)

import dac  # noqa: E402
from stealing.observe.trace import delivery_delays  # noqa: E402

SLOW_S = 5e-3       # a split slower than this waited for something besides its ring


def trace_lines() -> list[str]:
    """Every trace line written so far, then the files emptied for the next run."""
    lines = []
    for name in os.listdir(TRACES):
        path = os.path.join(TRACES, name)
        with open(path, "r+") as f:
            lines += f.read().splitlines()
            f.truncate(0)
    return lines


def figures(delays: list) -> dict:
    """Count, median, 90th percentile and largest delay (ms); the slow ones."""
    ms = sorted(d * 1000 for d, _, _ in delays) or [0.0]
    slow = [m for m in ms if m > SLOW_S * 1000]
    return {"splits": len(delays), "median_ms": round(statistics.median(ms), 3),
            "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 3), "max_ms": round(ms[-1], 3),
            "slow": len(slow), "slow_ms": round(sum(slow), 1)}


def measured(rt: dac.Runtime, call: tuple, want: object) -> tuple[dict, bool]:
    """One run of ``call`` on ``rt``: its splits' figures, and whether it was right."""
    trace_lines()
    t0 = time.perf_counter()
    result = rt.run(*call)
    elapsed = time.perf_counter() - t0
    row = figures(delivery_delays(trace_lines(), "SPLIT"))
    row["elapsed_s"] = round(elapsed, 3)
    return row, result == want


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", choices=("uts", "spine"), default="uts")
    ap.add_argument("--tree", default="T3", choices=sorted(uts.TREES), help="UTS tree")
    ap.add_argument("--repeat", type=int, default=3, help="runs on the kept Runtime")
    args = ap.parse_args(argv)
    if args.program == "uts":
        tree = uts.TREES[args.tree]
        uts.ensure_recursion_limit(tree)    # before the tree starts: leaves inherit it
        call = (uts.uts, tree, uts.rng_init(tree.seed), 0)
        want = uts.count_sequential(tree)       # (nodes, deepest depth)
        name = f"UTS {args.tree}"
    else:
        scale = spine.loops_per_ms()
        call = (spine.spine, 300, 3.0, scale)
        want = spine.plain_spine(300, 3.0, scale)
        name = "spine 300 x 3 ms"
    rows, ok = [], True
    try:
        # a tree of its own: a warm tree's processes (``dac up``) write no trace here,
        # and attached to one the benchmark read 0 splits
        with dac.Runtime(procs=2, attach=False) as rt:
            rt.run(*call)               # spawn, imports, first job
            for _ in range(args.repeat):
                row, right = measured(rt, call, want)
                ok &= right
                rows.append(row)
                print(f"{name}: {row['splits']} splits, median {row['median_ms']} ms, "
                      f"90% within {row['p90_ms']} ms, slowest {row['max_ms']} ms; "
                      f"{row['slow']} over {SLOW_S * 1000:g} ms ({row['slow_ms']} ms in "
                      f"all); run {row['elapsed_s']:.2f} s{'' if right else ' WRONG'}")
    finally:                            # (a Ctrl-C too: the traces go)
        for file in os.listdir(TRACES):
            os.unlink(os.path.join(TRACES, file))
        os.rmdir(TRACES)
    print(json.dumps({"program": name, "repeat": args.repeat, "runs": rows,
                      "correct": ok, "traces": TRACES}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
