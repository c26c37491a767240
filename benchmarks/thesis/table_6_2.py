"""Thesis Table 6.2: steals by message (persistent leaves) vs a new leaf process per steal
(spawn-per-batch), and the start-up cost of one spawned leaf.

The thesis (N = 19, 8 nodes, 20/10/5 tasks per steal): 267.31 / 259.49 / 253.03 s by
message against 268.52 / 264.28 / 263.38 s spawning: spawning costs little at coarse
grain and more as the grain shrinks. The table below puts those beside ours.

Part 1 (thesis Table 6.2): N-Queens (--n, default 15) on 2 leaf slots, for
tasks_per_leaf 40 / 20 / 10 / 5, once with ``leaf_mode="persistent"`` (one leaf process
per slot receives batch after batch) and once with ``leaf_mode="spawn"`` (every batch runs
in a freshly spawned leaf process). The persistent run is the baseline of the same row:
ratio = elapsed(spawn) / elapsed(persistent). The spawn depth is fixed (--depth, default 2)
so every row solves the same set of tasks. Figures: elapsed_s, elapsed_s - startup_s,
batches, spawns, tasks.

Part 2: start-up cost of one spawned leaf. A subprocess (this script with --probe) runs
N-Queens (--probe-n, default 8: the counting itself is negligible) with procs=1, a fixed
depth and tasks_per_leaf large enough that all tasks form ONE batch; it prints startup_s
(spawn + interpreter + imports until the leaf is ready) and the leaf's busy_s (= the first
batch's busy time, dominated by numba JIT compilation or cache loading of count_from).
Both parts turn dac's ``root_helps`` off (the root would otherwise solve most tasks of a
small board itself while the leaves start, and the modes would not be compared);
--root-helps turns it back on for part 1 (the root's tasks are in the "root" column).
"cold": NUMBA_CACHE_DIR points at a fresh temporary directory; "warm": the same directory
again, now filled. The whole subprocess time (from outside) is shown too.

Run:  python benchmarks/thesis/table_6_2.py                 # N=15, tpl 40 20 10 5
      python benchmarks/thesis/table_6_2.py --n 12 --tpl 10 5 --probe-repeat 2 --json
      python benchmarks/thesis/table_6_2.py --quick             # a small run (tests)
A figure (--figure FILE.png, default table_6_2.png) shows the two modes' times.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _common import figure, run_main  # noqa: E402  (puts examples/ and benchmarks/ on the path)
from _timing import timed_run  # noqa: E402
from nqueens import queens  # noqa: E402  (examples/nqueens.py: leaf = numba count_from)
from nqueens_kernels import KNOWN_COUNTS  # noqa: E402

from dac import run_report  # noqa: E402


def one_run(n, mode, tpl, depth, root_helps):
    rep = run_report(queens, n, 0, 0, 0, procs=2, leaf_mode=mode, tasks_per_leaf=tpl,
                     batch="fixed", depth=depth, root_helps=root_helps)
    st = rep.stats
    leaves = [p for p in st["processes"] if p["role"] == "leaf"]
    return {"elapsed_s": rep.elapsed_s, "startup_s": st["startup_s"],
            "no_startup_s": rep.elapsed_s - st["startup_s"], "batches": st["batches"],
            "spawns": st["spawns"], "tasks": st["tasks"],
            "leaf_busy_s": sum(p["busy_s"] for p in leaves),
            "leaf_cpu_s": sum(p["cpu_s"] for p in leaves),
            "leaf_processes": sum(p.get("processes", 1) for p in leaves),
            "root_tasks": sum(p["tasks"] for p in st["processes"] if p["role"] == "root"),
            "correct": rep.result == KNOWN_COUNTS.get(n, rep.result)}


def probe(n, depth):
    """Child side of part 2: one leaf, one batch; prints one JSON line."""
    t0 = time.perf_counter()
    rep = run_report(queens, n, 0, 0, 0, procs=1, depth=depth, tasks_per_leaf=100000,
                     batch="fixed",
                     root_helps=False)    # every task goes to the leaf, in one batch
    leaf = [p for p in rep.stats["processes"] if p["role"] == "leaf"][0]
    print(json.dumps({"elapsed_s": rep.elapsed_s, "startup_s": rep.stats["startup_s"],
                      "first_batch_busy_s": leaf["busy_s"], "leaf_cpu_s": leaf["cpu_s"],
                      "batches": rep.stats["batches"], "tasks": rep.stats["tasks"],
                      "in_process_s": time.perf_counter() - t0,
                      "correct": rep.result == KNOWN_COUNTS.get(n, rep.result)}))


def run_probe(n, depth, cache_dir):
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    cmd = [sys.executable, os.path.abspath(__file__), "--probe", "--probe-n", str(n),
           "--probe-depth", str(depth)]
    whole, stdout = timed_run(cmd, env=env)
    out = json.loads(stdout.strip().splitlines()[-1])
    out["whole_command_s"] = whole
    out["cache_files"] = sum(len(f) for _, _, f in os.walk(cache_dir))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=15, help="board size for part 1 (default 15)")
    ap.add_argument("--root-helps", action="store_true",
                    help="let the root solve tasks while the leaves start (dac's default; "
                         "off here so that the leaves do all the work being compared)")
    ap.add_argument("--tpl", type=int, nargs="+", default=[40, 20, 10, 5],
                    help="tasks_per_leaf values (default 40 20 10 5)")
    ap.add_argument("--depth", type=int, default=2, help="spawn depth for part 1 (default 2)")
    ap.add_argument("--probe-n", type=int, default=8, help="board size for part 2")
    ap.add_argument("--probe-depth", type=int, default=2)
    ap.add_argument("--probe-repeat", type=int, default=2,
                    help="cold/warm probe pairs (each with a fresh cache dir)")
    ap.add_argument("--skip-modes", action="store_true", help="only part 2")
    ap.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help="also print one JSON line of figures")
    ap.add_argument("--figure", default="table_6_2.png", help="where the figure goes "
                    "('' for none)")
    ap.add_argument("--quick", action="store_true", help="a small run (tests)")
    args = ap.parse_args(argv)
    if args.quick:
        args.n, args.tpl, args.probe_repeat = 10, [10, 5], 1

    if args.probe:
        probe(args.probe_n, args.probe_depth)
        return 0

    rows = []
    if not args.skip_modes:
        for tpl in args.tpl:
            per = one_run(args.n, "persistent", tpl, args.depth, args.root_helps)
            spw = one_run(args.n, "spawn", tpl, args.depth, args.root_helps)
            rows.append({"tpl": tpl, "persistent": per, "spawn": spw,
                         "ratio_elapsed": spw["elapsed_s"] / per["elapsed_s"],
                         "ratio_no_startup": spw["no_startup_s"] / per["no_startup_s"]})

    probes = []
    for _ in range(args.probe_repeat):
        cache = tempfile.mkdtemp(prefix="dac_numba_cache_")
        try:
            cold = run_probe(args.probe_n, args.probe_depth, cache)
            warm = run_probe(args.probe_n, args.probe_depth, cache)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        probes.append({"cold": cold, "warm": warm})

    ok = all(r[m]["correct"] for r in rows for m in ("persistent", "spawn")) and \
        all(p[c]["correct"] for p in probes for c in ("cold", "warm"))
    if rows:
        print("N-Queens N=%d, depth %d, 2 leaf slots, root_helps=%s: persistent vs "
              "spawn-per-batch leaves" % (args.n, args.depth, args.root_helps))
        print("%4s %-10s %9s %9s %10s %8s %7s %7s %5s %9s %9s"
              % ("tpl", "mode", "elapsed", "startup", "no-startup", "batches", "spawns",
                 "tasks", "root", "leaf busy", "leaf cpu"))
        for r in rows:
            for m in ("persistent", "spawn"):
                f = r[m]
                print("%4d %-10s %9.3f %9.3f %10.3f %8d %7d %7d %5d %9.3f %9.3f%s"
                      % (r["tpl"], m, f["elapsed_s"], f["startup_s"], f["no_startup_s"],
                         f["batches"], f["spawns"], f["tasks"], f["root_tasks"],
                         f["leaf_busy_s"],
                         f["leaf_cpu_s"], "" if f["correct"] else "  WRONG COUNT"))
            print("%4s %-10s %9.2fx %20.2fx" % ("", "ratio", r["ratio_elapsed"],
                                               r["ratio_no_startup"]))
        print()
    print("Start-up of one spawned leaf (procs=1, N=%d, one batch), numba cache cold vs warm"
          % args.probe_n)
    print("%-5s %9s %16s %9s %9s %10s %7s %7s"
          % ("cache", "startup", "1st batch busy", "leaf cpu", "elapsed", "whole cmd",
             "batches", "files"))
    for p in probes:
        for c in ("cold", "warm"):
            f = p[c]
            print("%-5s %9.3f %16.3f %9.3f %9.3f %10.3f %7d %7d%s"
                  % (c, f["startup_s"], f["first_batch_busy_s"], f["leaf_cpu_s"],
                     f["elapsed_s"], f["whole_command_s"], f["batches"], f["cache_files"],
                     "" if f["correct"] else "  WRONG COUNT"))
    print("startup = spawn + interpreter + imports until the leaf is ready; 1st batch busy "
          "includes numba JIT (cold) or cache load (warm); files = entries in the cache dir.")
    thesis = {20: (267.31, 268.52), 10: (259.49, 264.28), 5: (253.03, 263.38)}
    if rows:
        print("\nbeside the thesis (N=19, 8 nodes; spawn / message):")
        for r in rows:
            t = thesis.get(r["tpl"])
            print("  tpl %3d: ours %.2fx%s" % (r["tpl"], r["ratio_elapsed"],
                  "" if t is None else ", thesis %.3fx (%.2f s / %.2f s)"
                  % (t[1] / t[0], t[1], t[0])))

        def draw(plt):
            fig, ax = plt.subplots(figsize=(6, 3.5))
            xs = [str(r["tpl"]) for r in rows]
            w = 0.38
            ax.bar([i - w / 2 for i in range(len(xs))],
                   [r["persistent"]["elapsed_s"] for r in rows], w, label="by message")
            ax.bar([i + w / 2 for i in range(len(xs))],
                   [r["spawn"]["elapsed_s"] for r in rows], w, label="new process")
            ax.set_xticks(range(len(xs)), xs)
            ax.set_xlabel("tasks per steal (tasks_per_leaf)")
            ax.set_ylabel("seconds")
            ax.set_title(f"Table 6.2: N-Queens {args.n}, 2 leaves")
            ax.legend()
            return fig
        print(figure(args.figure, draw))
    if args.json:
        print(json.dumps({"n": args.n, "depth": args.depth, "root_helps": args.root_helps,
                          "modes": rows,
                          "probe_n": args.probe_n, "probes": probes}))
    return 0 if ok else 1


if __name__ == "__main__":
    run_main(main, "table_6_2")
