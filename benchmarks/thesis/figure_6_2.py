"""Thesis Figure 6.2 (§6.2): work pushing against work stealing, and how evenly the load
spreads over the processors.

The thesis pushed N = 19's boards round-robin to processes created all at once (30
boards each, 7 nodes) and compared with stealing: 320 s against 316 s, but the nodes'
load average had a standard deviation of 1.48 against 0.38. Here the same N-Queens
boards (the example's numba kernel, boards ``--depth`` queens deep) are solved twice
on the same leaves: *pushed*, dealt round-robin into one task per leaf before the run
(a leaf's task cannot be split: nothing moves once it is dealt), and *stolen*, one task
per board with dac's stealing. Reported: the run time and each leaf's busy time, with
their spread ((max - min) / mean) and standard deviation.

Run:  python benchmarks/thesis/figure_6_2.py             # N = 15, 2 leaves
      python benchmarks/thesis/figure_6_2.py --n 16 --leaves 4
      python benchmarks/thesis/figure_6_2.py --quick     # a small run (tests)
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import figure, run_main, table  # noqa: E402
from nqueens_boards import children  # noqa: E402
from nqueens_kernels import KNOWN_COUNTS  # noqa: E402

import dac  # noqa: E402


@dac.spawn
def dealt(n, boards):
    """One leaf's share of a pushed run: its boards, one after the other."""
    from nqueens_kernels import count_from
    return sum(count_from(n, c, a, b) for c, a, b in boards)


@dac.spawn(depth=1)
def push(n, hands):
    return sum(dac.sync(*[dealt(n, hand) for hand in hands]))


@dac.spawn
def board(n, c, a, b):
    from nqueens_kernels import count_from
    return count_from(n, c, a, b)


@dac.spawn(depth=1)
def steal(n, boards):
    return sum(dac.sync(*[board(n, *b) for b in boards]))


def boards_at(n, depth):
    level = [(0, 0, 0)]
    for _ in range(depth):
        level = [kid for b in level for kid in children(n, *b)]
    return level


def spread(values):
    mean = statistics.mean(values)
    return (max(values) - min(values)) / mean if mean else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=15)
    ap.add_argument("--leaves", type=int, default=2)
    ap.add_argument("--depth", type=int, default=3, help="queens placed per board")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--figure", default="figure_6_2.png")
    ap.add_argument("--quick", action="store_true", help="a small run (tests)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.n, args.repeat = 11, 1
    boards = boards_at(args.n, args.depth)
    hands = [boards[i::args.leaves] for i in range(args.leaves)]
    ways = {"pushed": (push, hands), "stolen": (steal, boards)}
    out = {w: [] for w in ways}
    # (depth=1: the hands are the tasks; an automatic depth would try one level
    # deeper first, which runs a whole hand on the root)
    with dac.Runtime(procs=args.leaves, batch="fixed", tasks_per_leaf=1, depth=1,
                     root_helps=False, preload=["nqueens_kernels"]) as pushed_rt, \
            dac.Runtime(procs=args.leaves, root_helps=False,
                        preload=["nqueens_kernels"]) as stolen_rt:
        runtimes = {"pushed": pushed_rt, "stolen": stolen_rt}
        for way, rt in runtimes.items():
            rt.run(board, args.n, 0, 0, 0)              # leaves ready, kernel loaded
        for _ in range(args.repeat):
            for way, (fn, arg) in ways.items():
                rep = runtimes[way].run_report(fn, args.n, arg)
                if rep.result != KNOWN_COUNTS.get(args.n, rep.result):
                    raise SystemExit(f"wrong count {rep.result}")
                busy = [p["busy_s"] for p in rep.stats["processes"]
                        if p["role"] == "leaf"]
                out[way].append({"elapsed_s": rep.elapsed_s, "busy": busy,
                                 "spread": spread(busy),
                                 "stdev": statistics.pstdev(busy)})
    best = {w: min(rs, key=lambda r: r["elapsed_s"]) for w, rs in out.items()}
    table(f"Figure 6.2 reproduced: N-Queens {args.n}, {len(boards)} boards "
          f"({args.depth} queens placed), {args.leaves} leaves, best of {args.repeat}",
          ["way", "seconds", "leaf busy s", "spread", "stdev s"],
          [[w, r["elapsed_s"], " ".join(f"{b:.2f}" for b in r["busy"]), r["spread"],
            r["stdev"]] for w, r in best.items()])
    print("thesis (N=19, 7 nodes): pushing 320 s, stealing 316 s; load average "
          "standard deviation 1.48 against 0.38")

    def draw(plt):
        fig, ax = plt.subplots(figsize=(6, 3.5))
        w = 0.38
        for k, (way, r) in enumerate(best.items()):
            ax.bar([i + (k - 0.5) * w for i in range(args.leaves)], r["busy"], w,
                   label=f"{way}: {r['elapsed_s']:.2f} s")
        ax.set_xticks(range(args.leaves), [f"leaf {i}" for i in range(args.leaves)])
        ax.set_ylabel("busy seconds")
        ax.set_title(f"Figure 6.2: work pushing vs stealing, N-Queens {args.n}")
        ax.legend()
        return fig
    print(figure(args.figure, draw))
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    run_main(main, "figure_6_2")
