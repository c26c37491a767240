"""Unbalanced Tree Search on 2 leaves vs the sequential loop and the serial elision.

The irregular-recursion yardstick (examples/uts.py; T3 by default: binomial, 4,112,897
nodes, depth 1572). Four figures per repetition, measured one after the other in the
same process, so a slow spell of a shared machine falls on all of them alike:

  seq      ``count_sequential(tree)``: a loop over an explicit stack, no futures
  elision  ``uts(tree, root, 0)`` outside ``dac.run``: the @spawn recursion, serially
  kept     ``rt.run(uts, ...)`` on a ``dac.Runtime(procs=2)`` started, and warmed by a
           small tree, before the first repetition: compute only, no start-up
  fresh    ``dac.run(uts, ..., procs=2)``: a new process tree every time, spawn,
           start-up and shut-down included (interpreter start excluded)

Speed-up = baseline time / dac time, taken per repetition (each pair measured side by
side), then min / median / max over the repetitions. The elision is the fair baseline
for the scheduler (same code, same futures); the sequential loop is what a user would
write without dac.

Why T3 is hard: its subtrees are wildly unequal (most of the root's 2000 children are
leaves, a handful hold most of the tree). Counted with the sequential loop: 233 of the
2000 root subtrees are more than a leaf, and the largest (child 120) has 2,381,505
nodes, 58% of the tree, so one task per root child could never beat 4112897 / 2381505
= 1.73x on any number of leaves. dac splits running tasks: the top call is the one task
(the root runs none of it) and the other leaf takes the oldest spawns of the leaf that
runs it, at every level; the leaves' busy seconds are printed.

Run:  python benchmarks/uts.py                # T3, 3 repetitions (~3 min on 2 cores)
      python benchmarks/uts.py --tree T1 --repeat 5
      python benchmarks/uts.py --tree default --repeat 2 --json    # a quick smoke run
Exit status: 0 (figures are reported, not asserted), 1 on a wrong node count.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples")]   # this checkout's dac, not an
                                                         # installed one (leaves follow)

import uts  # noqa: E402  (examples/uts.py; the leaves import it by name too)

import dac  # noqa: E402

VARIANTS = ("seq", "elision", "kept", "fresh")


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - t0, value


def spread(values):
    """(min, median, max)."""
    return min(values), statistics.median(values), max(values)


def measure(tree, repeat, procs):
    """Times and results of every variant, ``repeat`` interleaved repetitions."""
    root = uts.rng_init(tree.seed)
    times = {v: [] for v in VARIANTS}
    results = set()
    kept_stats = []
    warm = uts.TREES["default"]
    with dac.Runtime(procs=procs) as rt:
        rt.run(uts.uts, warm, uts.rng_init(warm.seed), 0)      # spawn, imports, first job
        for _ in range(repeat):
            dt, value = timed(uts.count_sequential, tree)
            times["seq"].append(dt)
            results.add(value)
            dt, value = timed(uts.uts, tree, root, 0)
            times["elision"].append(dt)
            results.add(value)
            dt, report = timed(rt.run_report, uts.uts, tree, root, 0)
            times["kept"].append(dt)
            results.add(report.result)
            kept_stats.append(report.stats)
            dt, value = timed(dac.run, uts.uts, tree, root, 0, procs=procs)
            times["fresh"].append(dt)
            results.add(value)
    return times, results, kept_stats


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", default="T3", choices=sorted(uts.TREES))
    ap.add_argument("--repeat", type=int, default=3, help="interleaved repetitions")
    ap.add_argument("--procs", type=int, default=2, help="leaf processes")
    ap.add_argument("--json", action="store_true", help="also print one JSON line")
    args = ap.parse_args(argv)
    tree = uts.TREES[args.tree]
    uts.ensure_recursion_limit(tree)        # before the tree starts: leaves inherit it

    load0 = os.getloadavg()[0]
    times, results, kept_stats = measure(tree, args.repeat, args.procs)
    load = (load0, os.getloadavg()[0])
    nodes, deepest = sorted(results)[0]
    correct = len(results) == 1 and (tree.nodes is None or nodes == tree.nodes)

    print(f"UTS {args.tree}: {nodes} nodes, depth {deepest} "
          f"({'correct' if correct else 'WRONG: ' + str(sorted(results))}); "
          f"{args.procs} leaves; {args.repeat} interleaved repetitions; "
          f"load average {load[0]:.1f} before, {load[1]:.1f} after, {os.cpu_count()} cores")
    print(f"{'':9}{'time s (min / median / max)':>30}   "
          f"{'speed-up vs elision':>24}   {'speed-up vs seq':>24}")
    rows = {}
    for v in VARIANTS:
        ratio_el = [e / t for e, t in zip(times["elision"], times[v])]
        ratio_seq = [s / t for s, t in zip(times["seq"], times[v])]
        rows[v] = {"times_s": times[v], "vs_elision": ratio_el, "vs_seq": ratio_seq}
        fmt = "%6.3f / %6.3f / %6.3f"
        print(f"{v:9}{fmt % spread(times[v]):>30}   {fmt % spread(ratio_el):>24}   "
              f"{fmt % spread(ratio_seq):>24}")
    best = min(range(args.repeat), key=lambda i: times["kept"][i])
    st = kept_stats[best]
    busy = {p["role"] + str(i): round(p["busy_s"], 2)
            for i, p in enumerate(st["processes"])}
    print(f"kept run (fastest): spawn depth {st['depth']}, {st['tasks']} tasks, "
          f"busy s per process {busy}")
    if args.json:
        print(json.dumps({"tree": args.tree, "nodes": nodes, "depth": deepest,
                          "correct": correct, "procs": args.procs, "repeat": args.repeat,
                          "variants": rows, "kept_depth": st["depth"],
                          "kept_tasks": st["tasks"], "kept_busy_s": busy,
                          "load_average": load, "cores": os.cpu_count()}))
    return 0 if correct else 1


if __name__ == "__main__":
    sys.exit(main())
