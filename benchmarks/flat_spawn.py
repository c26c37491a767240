"""A wide, flat spawn: one top call spawns ``n`` naps, split off one task or handed
out from the root's pool.

The top call of a plain ``@spawn`` function is the one task (a leaf runs it, thieves
split its spawns off: half the deque at a time); with ``@spawn(depth=1)`` the root
expands the top and its pool holds the ``n`` calls, handed down with the thesis'
counts. Both run the same naps on the same kept tree, interleaved:

    efficiency = (n * ms / leaves) / elapsed

Measured on 2 cores, 20 leaves, 1360 naps of 30 ms (the shape of the thesis' Table
6.5): split off the one task 0.76-0.78 (four runs), from the root's pool 0.96-0.98.
Split off, the leaf running the top call answered each SPLIT 0.1-0.5 s after it was
sent while the root sent it one RETURN per result: between two of its naps it read
at most 16 messages and the root sent about 20, so the SPLIT came behind a backlog
(0.51-0.57 then, six runs). RETURNs to one child now go at most every 5 ms, the
results of that time as one (``stealing.roles.node.Node.hold_return``). Since a
ring is answered where it finds the program's code (a leaf in its nap reads the
SPLIT then, not after the nap: ``dac.stealable.StealableContext._answer``), split
off 0.91-0.93 against 0.86-0.88 (four runs each, interleaved; the pool 0.96-0.98).
See docs/scale.md.

Run:  python benchmarks/flat_spawn.py                  # 20 leaves, 1360 x 30 ms, 2 runs
      python benchmarks/flat_spawn.py --quick          # a small run (tests)
Its last line is a JSON object. Exit status: 0 (figures are reported, not asserted).
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]       # this checkout's dac; leaves follow

import dac  # noqa: E402
from naps import nap  # noqa: E402


@dac.spawn
def flat(n: int, ms: float) -> int:
    """``n`` naps spawned by the top call, which is the one task."""
    return sum(dac.sync(*[nap(ms) for _ in range(n)]))


@dac.spawn(depth=1)
def flat_from_pool(n: int, ms: float) -> int:
    """The same naps, expanded by the root into its pool."""
    return sum(dac.sync(*[nap(ms) for _ in range(n)]))


WAYS = {"split": flat, "pool": flat_from_pool}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--leaves", type=int, default=20)
    ap.add_argument("--n", type=int, default=1360, help="naps the top call spawns")
    ap.add_argument("--ms", type=float, default=30.0, help="each nap (ms)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="4 leaves, 80 naps of 5 ms")
    args = ap.parse_args()
    if args.quick:
        args.leaves, args.n, args.ms, args.repeat = 4, 80, 5.0, 1
    ideal = args.n * args.ms / 1000.0 / args.leaves
    runs: dict = {way: [] for way in WAYS}
    many = args.leaves > 64 * (os.cpu_count() or 1)
    with dac.Runtime(procs=args.leaves, root_helps=False, oversubscribe=many) as rt:
        rt.run(flat, 2 * args.leaves, 1.0)                  # warm: start-up
        for _ in range(args.repeat):
            for way, fn in WAYS.items():                    # interleaved
                report = rt.run_report(fn, args.n, args.ms)
                assert report.result == args.n, (way, report.result)
                st = report.stats
                runs[way].append({"elapsed_s": round(report.elapsed_s, 4),
                                  "efficiency": round(ideal / report.elapsed_s, 4),
                                  "tasks": st["tasks"], "split_tasks": st["split_tasks"],
                                  "steals_split": st["steals_split"]})
    print(f"{args.n} naps of {args.ms:g} ms spawned by one call, {args.leaves} leaves "
          f"(ideal {ideal:.3f} s), {args.repeat} interleaved runs:")
    for way, rs in runs.items():
        effs = [r["efficiency"] for r in rs]
        what = "split off the one task" if way == "split" else "from the root's pool"
        print(f"  {what:24s} efficiency {min(effs):.2f}-{max(effs):.2f} (median "
              f"{statistics.median(effs):.2f}); elapsed "
              f"{', '.join(str(r['elapsed_s']) for r in rs)} s")
    print(json.dumps({"leaves": args.leaves, "n": args.n, "ms": args.ms, "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
