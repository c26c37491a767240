"""The thesis' Table 6.6 (§6.4.3): a run that gets more processors part way through.

The thesis started N-Queens 19 on one node and added two nodes a minute (``lamgrow``)
up to nine: 410 s against 1998 s on one node. Here a run starts with half the leaves
and ``Runtime.grow`` adds the other half ``--at`` seconds in; it is compared with runs
that have all the leaves, and half of them, from the start. The tasks sleep instead of
computing (a binary tree of ``--depth`` levels, ``--ms`` per node, every spawn
stealable), so 8 or 16 leaves act as that many processors on 2 cores and the figure
measures the scheduler, not the CPU.

    ideal(grow) = at + (work - at * half) / all       (seconds; work = nodes * ms)

Reported for each way, as medians and ranges over ``--repeat`` interleaved runs on a
tree started beforehand (the compute-only figure), with the steals the added leaves
made and the tasks they ran. ``--quick`` is a small run for the test suite.

Run:  python benchmarks/grow.py                  # 4 -> 8 leaves, 3 repetitions
      python benchmarks/grow.py --leaves 16 --depth 11
Exit status: 0 (figures are reported, not asserted).
"""

import argparse
import json
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]       # this checkout's dac; leaves follow

import dac  # noqa: E402


@dac.spawn(depth=0)
def nap_tree(depth: int, ms: float) -> int:
    """A binary tree of naps: every node sleeps ``ms``, then spawns two children."""
    time.sleep(ms / 1000.0)
    if depth == 0:
        return 1
    a, b = nap_tree(depth - 1, ms), nap_tree(depth - 1, ms)
    dac.sync()
    return a.result() + b.result()


def _grow(rt, count: int) -> None:
    """Add ``count`` leaves to the running tree (from the timer's thread): not if the
    run ended first (Ctrl-C)."""
    try:
        rt.grow(count)
    except dac.DacError:
        pass


def one_run(way: str, leaves: int, depth: int, ms: float, at: float) -> dict:
    half = leaves // 2
    with dac.Runtime(procs=leaves if way == "all" else half) as rt:
        rt.start()
        rt.run(nap_tree, 1, 0.0)            # every leaf ready and warm before timing
        timer = None
        if way == "grow":
            timer = threading.Timer(at, _grow, args=(rt, leaves - half))
            timer.start()
        try:
            report = rt.run_report(nap_tree, depth, ms)
        finally:                        # Ctrl-C: no growing a tree that is gone
            if timer is not None:
                timer.cancel()
                timer.join()
    assert report.result == 2 ** depth, report.result
    added = [p for p in report.stats["processes"] if p.get("joined") == "grow"]
    return {"way": way, "elapsed_s": report.elapsed_s,
            "added_tasks": sum(p["tasks"] for p in added),
            "added_busy_s": sum(p["busy_s"] for p in added),
            "steals_split": report.stats["steals_split"],
            "leaves_added": report.stats["leaves_added"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--leaves", type=int, default=8, help="leaves at the end (even)")
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--ms", type=float, default=10.0, help="sleep per node (ms)")
    ap.add_argument("--at", type=float, default=None,
                    help="seconds into the run when half the leaves are added "
                         "(default: a quarter of the ideal half-leaves time)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a small run (tests)")
    ap.add_argument("--json", action="store_true", help="one JSON line at the end")
    args = ap.parse_args()
    if args.quick:
        args.leaves, args.depth, args.ms, args.repeat = 4, 7, 10.0, 1
    half = args.leaves // 2
    nodes = 2 ** (args.depth + 1) - 1
    work = nodes * args.ms / 1000.0
    at = args.at if args.at is not None else 0.25 * work / half
    ideal = {"half": work / half, "all": work / args.leaves,
             "grow": at + (work - at * half) / args.leaves}
    runs = {w: [] for w in ("half", "grow", "all")}
    for _ in range(args.repeat):
        for way in runs:
            runs[way].append(one_run(way, args.leaves, args.depth, args.ms, at))
    print(f"Table 6.6 reproduced: {nodes} naps of {args.ms:g} ms ({work:.2f} s of work), "
          f"{half} leaves, {args.leaves - half} more added at {at:.2f} s")
    print(f"{'way':<6}{'leaves':>8}{'median s':>10}{'range s':>16}{'ideal s':>9}"
          f"{'ideal/med':>10}{'added leaves ran':>18}")
    out = {}
    for way, rs in runs.items():
        times = [r["elapsed_s"] for r in rs]
        med = statistics.median(times)
        shape = {"half": f"{half}", "all": f"{args.leaves}",
                 "grow": f"{half}->{args.leaves}"}[way]
        added = "" if way != "grow" else \
            f"{statistics.median(r['added_tasks'] for r in rs):.0f} tasks, " \
            f"{statistics.median(r['added_busy_s'] for r in rs):.2f} s"
        print(f"{way:<6}{shape:>8}{med:>10.3f}{min(times):>8.3f}-{max(times):<7.3f}"
              f"{ideal[way]:>9.3f}{ideal[way] / med:>10.2f}{added:>18}")
        out[way] = {"median_s": med, "times": times, "ideal_s": ideal[way], "runs": rs}
    g, h, a = (out[w]["median_s"] for w in ("grow", "half", "all"))
    print(f"grow/half {g / h:.2f} (ideal {ideal['grow'] / ideal['half']:.2f}), "
          f"grow/all {g / a:.2f} (ideal {ideal['grow'] / ideal['all']:.2f}); "
          f"thesis: 410 s growing 1 -> 9 nodes against 1998 s on one node (0.21)")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
