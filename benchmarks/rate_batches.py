"""Batches sized by measured rate against the thesis' fixed tasks_per_leaf, with one
host emulated 5x slower (CPU only).

    python benchmarks/rate_batches.py
    python benchmarks/rate_batches.py --tasks 2048 --nap 0.002 --json

Two leaves on one cluster, one of them 5x slower (``slowdown = 5``: it sleeps four
times as long as each task took). Tasks are ``range_sum`` leaves that sleep ``--nap``
seconds (no CPU, so the two leaves do not compete for the 2 cores). Reported per mode:
the tasks each leaf executed (ideal split 5:1), the spread of the leaves' busy times
(they should finish together), total time, batches.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

import dac  # noqa: E402
from stealing.tree.topology import Cluster, Host, Topology  # noqa: E402


@dac.spawn
def nap_sum(lo, hi, nap):
    if hi - lo == 1:
        time.sleep(nap)
        return lo
    mid = (lo + hi) // 2
    a, b = dac.sync(nap_sum(lo, mid, nap), nap_sum(mid, hi, nap))
    return a + b


def run(tasks, nap, batch, tpl):
    topo = Topology([Cluster("c", [Host("fast", 1), Host("slow", 1, slowdown=5.0)])])
    depth = tasks.bit_length() - 1
    rep = dac.run_report(nap_sum, 0, tasks, nap, topology=topo.localized(), depth=depth,
                         batch=batch, tasks_per_leaf=tpl, root_helps=False)
    assert rep.result == sum(range(tasks))
    fast, slow = sorted((p for p in rep.stats["processes"] if p["role"] == "leaf"),
                        key=lambda p: -p["tasks"])
    return {"batch": batch, "tasks_per_leaf": tpl, "fast_tasks": fast["tasks"],
            "slow_tasks": slow["tasks"], "ratio": fast["tasks"] / max(1, slow["tasks"]),
            "busy_spread_s": abs(fast["busy_s"] - slow["busy_s"]),
            "solve_s": rep.elapsed_s - rep.stats["startup_s"],
            "batches": rep.stats["batches"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1024, help="a power of two")
    ap.add_argument("--nap", type=float, default=0.002)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = [run(args.tasks, args.nap, "rate", 5)] + \
        [run(args.tasks, args.nap, "fixed", tpl) for tpl in (5, 40)]
    print(f"{args.tasks} tasks of {args.nap * 1000:g} ms, one leaf 5x slower "
          f"(ideal split 5.0)")
    print(f"{'batch':>6} {'tpl':>4} {'fast':>6} {'slow':>6} {'ratio':>6} "
          f"{'busy spread s':>13} {'solve s':>8} {'batches':>8}")
    for r in rows:
        print(f"{r['batch']:>6} {r['tasks_per_leaf']:>4} {r['fast_tasks']:>6} "
              f"{r['slow_tasks']:>6} {r['ratio']:>6.2f} {r['busy_spread_s']:>13.3f} "
              f"{r['solve_s']:>8.3f} {r['batches']:>8}")
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
