"""Per-task overhead and parallel efficiency with small tasks (~1 ms and ~0.1 ms).

A ``@spawn`` Fibonacci whose calls with ``n <= K`` are tasks (``cutoff``), each solved in
a leaf by a numba ``fib_leaf`` (same recursion as examples/fib.py, defined in this script). K is calibrated here by timing
``fib_leaf`` in-process so that the mean task (a mix of fib(K) and fib(K-1) calls) takes
about --task-ms (default 1 and 0.1 ms). The same N (chosen so that numba fib(N) takes
about --seconds, or given with --n) is used for every task size.

Baseline, measured in the same run, per task size: the same top recursion run serially in
this process with the numba leaf at the same cutoff (the sum over tasks of the numba task
time), best of 3: its time T_seq and CPU seconds C_seq. The whole numba ``fib_leaf(N)``
is shown for information (on this machine it is often slower than the cut version).

Parallel run, on 2 leaves: a ``Runtime`` with one warm-up job (builds the tree, loads the
numba cache in the leaves), then the measured job on the same tree, so start-up is
excluded and the figures are per task:

* T_par   = the measured job's elapsed_s (root expansion + solving + replay);
* efficiency = T_seq / (2 * T_par);
* overhead per task = (sum of cpu_s of all processes of the job - C_seq) / tasks, in us.

A "cold" line also gives a single fresh ``run_report`` (elapsed_s - startup_s; its CPU
includes spawning the tree and loading the numba cache in each leaf).

Targets: overhead <= 20 us/task; efficiency >= 95% (1 ms tasks), >= 75% (0.1 ms tasks).

Run:  python benchmarks/task_overhead.py                  # ~3 s of work per run
      python benchmarks/task_overhead.py --seconds 1 --task-ms 1 0.1 --json
"""

import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")
sys.path.insert(0, EXAMPLES)

from numba import njit  # noqa: E402

from dac import Runtime, run_report, spawn, sync  # noqa: E402


# Defined here, not imported from examples/fib.py: a self-recursive @njit function that
# lives in an importable module fails in the leaves with "numba jitted function aborted
# due to unresolved symbol" (numba's by-value pickling of the dispatcher rebuilds it, but
# its recursive global still names the module's dispatcher). From __main__ it travels
# whole by value, as examples/fib.py run as a script does.
@njit(cache=True)
def fib_leaf(n):
    """Sequential naive Fibonacci (numba)."""
    if n < 2:
        return n
    return fib_leaf(n - 1) + fib_leaf(n - 2)

TARGET_US = 20.0
TARGET_EFF = {1.0: 0.95, 0.1: 0.75}
PROCS = 2


def make_fib(k):
    """A @spawn Fibonacci whose calls with n <= k are tasks solved by fib_leaf."""

    @spawn(cutoff=lambda n: n <= k, leaf=fib_leaf)
    def fib_tasks(n):
        if n < 2:
            return n
        a, b = sync(fib_tasks(n - 1), fib_tasks(n - 2))
        return a + b

    return fib_tasks


def fib_serial_cut(n, k):
    """The same top recursion, serial, numba leaf at the cutoff (T_seq_cut)."""
    if n <= k:
        return fib_leaf(n)
    return fib_serial_cut(n - 1, k) + fib_serial_cut(n - 2, k)


def fibnum(m):
    a, b = 0, 1
    for _ in range(m):
        a, b = b, a + b
    return a


def best_time(fn, *args, repeat=5):
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best


def leaf_times(kmax=40):
    """Seconds of fib_leaf(k) for k up to the first that takes >= 50 ms."""
    times = {}
    for k in range(10, kmax + 1):
        times[k] = best_time(fib_leaf, k, repeat=5 if k < 30 else 2)
        if times[k] > 0.05:
            break
    return times


def mean_task_s(times, k):
    """Mean task time for cutoff n <= k: fib(k) and fib(k-1) tasks in ratio phi : 1."""
    phi = (1 + 5 ** 0.5) / 2
    return (phi * times[k] + times[k - 1]) / (phi + 1)


def calibrate(times, target_s):
    ks = [k for k in times if k - 1 in times]
    return min(ks, key=lambda k: abs(math.log(mean_task_s(times, k) / target_s)))


def pick_n(times, seconds):
    kmax = max(times)
    return kmax + max(0, round(math.log(seconds / times[kmax]) / math.log((1 + 5 ** 0.5) / 2)))


def job_figures(rep, c_seq, t_seq):
    procs = rep.stats["processes"]
    cpu_all = sum(p["cpu_s"] for p in procs)
    tasks = rep.stats["tasks"]
    return {"elapsed_s": rep.elapsed_s, "startup_s": rep.stats["startup_s"],
            "t_par_s": rep.elapsed_s - rep.stats["startup_s"], "tasks": tasks,
            "batches": rep.stats["batches"], "steals_local": rep.stats["steals_local"],
            "steals_failed": rep.stats["steals_failed"], "cpu_all_s": cpu_all,
            "cpu_by_role": {r: sum(p["cpu_s"] for p in procs if p["role"] == r)
                            for r in ("root", "router", "leaf")},
            "leaf_busy_s": [p["busy_s"] for p in procs if p["role"] == "leaf"],
            "leaf_idle_s": [p["idle_s"] for p in procs if p["role"] == "leaf"],
            "efficiency": t_seq / (PROCS * (rep.elapsed_s - rep.stats["startup_s"])),
            "overhead_us_per_task": (cpu_all - c_seq) / tasks * 1e6 if tasks else None,
            "result": rep.result}


def measure(n, k, target_ms, repeat, cold, tpl):
    fibk = make_fib(k)
    expect = fibnum(n)
    seq = []
    for _ in range(3):
        c0, t0 = time.process_time(), time.perf_counter()
        fib_serial_cut(n, k)
        seq.append((time.perf_counter() - t0, time.process_time() - c0))
    t_seq, c_seq = min(seq)
    row = {"task_ms_target": target_ms, "k": k, "n": n, "t_seq_s": t_seq, "c_seq_s": c_seq,
           "all_t_seq_s": [t for t, _ in seq], "expected_tasks": fibnum(n - k + 2)}
    warm_runs = []
    with Runtime(procs=PROCS, tasks_per_leaf=tpl) as rt:
        rt.run_report(fibk, k + 3)            # warm-up job: tree built, leaf JIT cache loaded
        for _ in range(repeat):
            warm_runs.append(job_figures(rt.run_report(fibk, n), c_seq, t_seq))
    row["warm"] = min(warm_runs, key=lambda f: f["t_par_s"])
    row["warm_all_t_par_s"] = [f["t_par_s"] for f in warm_runs]
    row["mean_task_ms"] = 1e3 * sum(row["warm"]["leaf_busy_s"]) / row["warm"]["tasks"]
    if cold:
        row["cold"] = job_figures(run_report(fibk, n, procs=PROCS, tasks_per_leaf=tpl),
                                  c_seq, t_seq)
    row["correct"] = all(f["result"] == expect for f in warm_runs + [row.get("cold")] if f)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task-ms", type=float, nargs="+", default=[1.0, 0.1],
                    help="target mean task durations in ms (default 1 0.1)")
    ap.add_argument("--seconds", type=float, default=3.0,
                    help="sequential work per run: N is chosen so fib_leaf(N) takes this")
    ap.add_argument("--n", type=int, default=None, help="fib(N) (overrides --seconds)")
    ap.add_argument("--tasks-per-leaf", type=int, default=5,
                    help="dac tasks_per_leaf (default 5, dac's default)")
    ap.add_argument("--repeat", type=int, default=2, help="measured jobs per size (best kept)")
    ap.add_argument("--no-cold", dest="cold", action="store_false",
                    help="skip the fresh run_report line")
    ap.add_argument("--json", action="store_true", help="also print one JSON line of figures")
    args = ap.parse_args(argv)

    fib_leaf(5)                                             # JIT / cache load
    times = leaf_times()
    n = args.n if args.n is not None else pick_n(times, args.seconds)
    t_whole = best_time(fib_leaf, n, repeat=2)

    rows = []
    for ms in args.task_ms:
        k = calibrate(times, ms / 1e3)
        rows.append(measure(n, k, ms, args.repeat, args.cold, args.tasks_per_leaf))

    print("fib(%d) with numba leaf tasks on %d leaves, tasks_per_leaf %d; whole numba "
          "fib(%d): %.3f s" % (n, PROCS, args.tasks_per_leaf, n, t_whole))
    print("%7s %3s %8s %7s %7s %8s %8s %8s %10s %9s %8s %s"
          % ("task ms", "K", "job", "tasks", "task ms", "T_par s", "T_seq s", "eff %",
             "us/task", "cpu all", "batches", "targets"))
    for r in rows:
        for job in ("warm", "cold"):
            f = r.get(job)
            if f is None:
                continue
            goal = TARGET_EFF.get(r["task_ms_target"])
            tgt = ""
            if job == "warm":
                tgt = "eff>=%s %s, <=%g us %s" % (
                    "%.0f%%" % (100 * goal) if goal else "-",
                    ("ok" if f["efficiency"] >= goal else "MISSED") if goal else "",
                    TARGET_US, "ok" if f["overhead_us_per_task"] <= TARGET_US else "MISSED")
            print("%7.2f %3d %8s %7d %7.3f %8.3f %8.3f %8.1f %10.1f %9.3f %8d %s%s"
                  % (r["task_ms_target"], r["k"], job, f["tasks"], r["mean_task_ms"],
                     f["t_par_s"], r["t_seq_s"], 100 * f["efficiency"],
                     f["overhead_us_per_task"], f["cpu_all_s"], f["batches"], tgt,
                     "" if r["correct"] else "  WRONG RESULT"))
    print("warm = 2nd+ job on a built tree (no start-up); cold = fresh run, "
          "T_par = elapsed_s - startup_s.")
    print("task ms = mean leaf busy time per task; us/task = (cpu all - sequential cpu) / tasks.")
    if args.json:
        print(json.dumps({"n": n, "tasks_per_leaf": args.tasks_per_leaf,
                          "t_whole_fib_s": t_whole,
                          "leaf_times_s": times, "targets": {"us_per_task": TARGET_US,
                                                             "efficiency": TARGET_EFF},
                          "results": rows}))
    return 0 if all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
