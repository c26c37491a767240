"""Thesis §6.4.1: steals through a tree of routers against one central pool, as the
leaves grow.

The thesis ran N = 19 on 4 nodes with an extra level of routers and with the root
serving every steal itself: 71.10 s against 71.03 s, so a router level costs almost
nothing there. Here the leaves grow from 4 to 32 (``--leaves``) on an irregular tree of
sleeping tasks (``benchmarks/sleep_scale.py``: every spawn stealable, one task at the
start, work only by splitting), so dozens of leaves fit on 2 cores and the figure
measures the scheduler. Each size runs the thesis' tree (``branches = 2``,
``min_procs = 2``: routers above pairs of leaves) and a flat one (the root spawns every
leaf: one central pool), interleaved:

    efficiency = (total sleep / leaves) / elapsed        (1.0: no leaf ever waited)

Run:  python benchmarks/thesis/section_6_4_1.py              # 4 8 16 32 leaves
      python benchmarks/thesis/section_6_4_1.py --leaves 8 16 --repeat 3
      python benchmarks/thesis/section_6_4_1.py --quick      # a small run (tests)
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import figure, run_main, table  # noqa: E402
from sleep_scale import count, nap_tree  # noqa: E402

import dac  # noqa: E402


def one_run(leaves, shape, seed, limit, p, ms, nodes):
    # the thesis' tree (routers above pairs of leaves) against one central pool
    extra = {"min_procs": 4 * leaves} if shape == "central" else \
        {"branches": 2, "min_procs": 2}
    with dac.Runtime(procs=leaves, **extra) as rt:
        rt.run(nap_tree, seed, 0, 0, 3, p, 1.0)             # start-up out of the way
        report = rt.run_report(nap_tree, seed, 0, 0, limit, p, ms)
    assert report.result == nodes, (report.result, nodes)
    routers = sum(1 for q in report.stats["processes"] if q["role"] == "router")
    ideal = nodes * ms / 1000.0 / leaves
    return {"elapsed_s": report.elapsed_s, "efficiency": ideal / report.elapsed_s,
            "routers": routers}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--leaves", type=int, nargs="+", default=[4, 8, 16, 32])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--ms", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--p", type=float, default=0.70)
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--figure", default="section_6_4_1.png")
    ap.add_argument("--quick", action="store_true", help="a small run (tests)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.leaves, args.repeat, args.limit, args.ms = [4], 1, 9, 5.0
    nodes = count(args.seed, 0, 0, args.limit, args.p)
    rows, out = [], {}
    for leaves in args.leaves:
        runs = {"routers": [], "central": []}
        for _ in range(args.repeat):
            for shape in runs:
                runs[shape].append(one_run(leaves, shape, args.seed, args.limit, args.p,
                                           args.ms, nodes))
        med = {s: statistics.median(r["elapsed_s"] for r in rs) for s, rs in runs.items()}
        eff = {s: statistics.median(r["efficiency"] for r in rs) for s, rs in runs.items()}
        rows.append([leaves, runs["routers"][0]["routers"], med["routers"], eff["routers"],
                     med["central"], eff["central"], med["routers"] / med["central"]])
        out[leaves] = {"runs": runs, "efficiency": eff}
    table(f"§6.4.1 reproduced: {nodes} sleeping nodes of {args.ms:g} ms, medians of "
          f"{args.repeat}", ["leaves", "routers", "routers s", "eff", "central s", "eff",
                             "routers/central"], rows)
    print("thesis (N=19, 4 nodes): routers 71.10 s, central 71.03 s: 1.001")

    def draw(plt):
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(args.leaves, [r[3] for r in rows], "o-", label="tree of routers")
        ax.plot(args.leaves, [r[5] for r in rows], "s--", label="one central pool")
        ax.set_xscale("log", base=2)
        ax.set_xticks(args.leaves, [str(n) for n in args.leaves])
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("leaves")
        ax.set_ylabel("efficiency")
        ax.set_title("§6.4.1: routers vs a central pool (sleeping tasks)")
        ax.legend()
        return fig
    print(figure(args.figure, draw))
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    run_main(main, "section_6_4_1")
