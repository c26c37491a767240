"""What recording a timeline costs: N-Queens (the example's numba kernel and spawn tree)
on one kept tree, runs with ``Runtime.timeline`` set and unset, interleaved.

    cost = median(with) / median(without) - 1          (target: <= 3% at N = 15)

Both ways run on the same processes, so only the recording differs (and, for runs with
it, writing the page, which is timed apart). ``--quick`` is a small run for the tests.

Run:  python benchmarks/timeline_cost.py            # N = 15, 5 repetitions
Exit status: 0 (figures are reported, not asserted).
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
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples"), HERE]

from nqueens import queens  # noqa: E402

import dac  # noqa: E402

SOLUTIONS = {8: 92, 10: 724, 12: 14200, 13: 73712, 14: 365596, 15: 2279184}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=15)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a small run (tests)")
    ap.add_argument("--json", action="store_true", help="one JSON line at the end")
    args = ap.parse_args()
    if args.quick:
        args.n, args.repeat = 10, 1
    folder = tempfile.TemporaryDirectory(prefix="dac-timeline-")
    page = os.path.join(folder.name, "run.html")
    times = {"without": [], "with": []}
    writes = []
    with folder, dac.Runtime(preload=["nqueens_kernels"]) as rt:
        rt.run(queens, 8, 0, 0, 0)              # every leaf ready, kernels loaded
        for _ in range(args.repeat):
            for way in ("without", "with"):
                rt.timeline = page if way == "with" else None
                t0 = time.perf_counter()
                report = rt.run_report(queens, args.n, 0, 0, 0)
                whole = time.perf_counter() - t0
                assert report.result == SOLUTIONS.get(args.n, report.result)
                times[way].append(report.elapsed_s)
                if way == "with":
                    writes.append(whole - report.elapsed_s)
        size = os.path.getsize(page)
    base = statistics.median(times["without"])
    cost = statistics.median(times["with"]) / base - 1
    print(f"timeline cost, N-Queens {args.n}, {args.repeat} interleaved runs each:")
    for way, ts in times.items():
        print(f"  {way:<8} median {statistics.median(ts):.3f} s "
              f"(range {min(ts):.3f}-{max(ts):.3f})")
    print(f"  cost {cost * 100:+.1f}% (target <= 3%); the page: {size} bytes, written in "
          f"{statistics.median(writes) * 1000:.0f} ms after the run")
    if args.json:
        print(json.dumps({"times": times, "cost": cost, "page_bytes": size}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
