"""A run that loses a process on the way, started by ``dac run --fault-tolerant``.

    dac run --fault-tolerant lose_run.py PROGRAM PROCS LEAF_MODE KILL [MARK]

PROGRAM: ``queens`` (N-Queens 13, Python leaves), ``fib`` (fib 37, a spawn per call),
``nested`` (a binary tree of 10 levels of 5 ms naps, every spawn stealable), ``once``
(16 tasks of 40 ms; the first attempt of task 5 kills its own process with SIGKILL,
writing its pid to MARK first). KILL: ``none``, or the role of a process the script
SIGKILLs from a thread 0.4 s after one is ready (``leaf`` or ``router``, the newest one
that is alive). The last stdout line is JSON: the value, the expected value, the pid killed and
the statistics.
"""

import json
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from nested_programs import sleep_tree  # noqa: E402
from programs import fib, queens  # noqa: E402

import dac  # noqa: E402


@dac.spawn(depth=1)
def once(i, mark):
    if i == 5 and mark and not os.path.exists(mark):
        with open(mark, "w") as f:
            f.write(f"{os.getpid()}\n")
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.04)
    return i


@dac.spawn
def once_all(n, mark):
    return sum(dac.sync(*[once(i, mark) for i in range(n)]))


PROGRAMS = {
    "queens": (queens, (13, 0, 0, 0), 73712),
    "fib": (fib, (37,), 24157817),     # (long enough to be killed mid-task: 1-2 s)
    "nested": (sleep_tree, (10, 5.0), 2 ** 10),
}


def cpu_s(pid):
    """Seconds of CPU ``pid`` has used (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_busy(pid, until):
    """Wait until ``pid`` computes (30 ms of CPU within 0.1 s), or ``until``: on a
    slow machine the newest leaf may not have work 0.4 s after it is ready, and
    killing it then would cost no task."""
    while time.monotonic() < until:
        before = cpu_s(pid)
        time.sleep(0.1)
        if cpu_s(pid) - before >= 0.03:
            return


def main():
    program, procs, mode, kill = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    mark = sys.argv[5] if len(sys.argv) > 5 else ""
    if program == "once":
        fn, args, expected = once_all, (16, mark), sum(range(16))
    else:
        fn, args, expected = PROGRAMS[program]
    rt = dac.Runtime(procs=procs, branches=2, min_procs=2,   # routers to lose
                     leaf_mode=mode)
    rt.start()
    killed = []

    def targets():
        sched = rt.scheduler
        return [p["pid"] for p in (sched.processes() if sched else [])
                if p["role"] == kill and os.path.exists(f"/proc/{p['pid']}")]

    def killer():
        end = time.monotonic() + 60
        while not targets() and time.monotonic() < end:     # READY (a slow machine)
            time.sleep(0.05)
        time.sleep(0.4)
        pids = targets()
        if pids and program in ("queens", "fib"):   # computing: kill it mid-task
            wait_busy(pids[-1], until=time.monotonic() + 10)
        if pids:                # the newest: a spawn-per-batch leaf lives one batch
            os.kill(pids[-1], signal.SIGKILL)
            killed.append(pids[-1])

    if kill != "none":
        threading.Thread(target=killer, daemon=True).start()
    report = rt.run_report(fn, *args)
    rt.close()
    stats = {k: v for k, v in report.stats.items() if k != "processes"}
    print(json.dumps({"value": report.result, "expected": expected, "killed": killed,
                      "elapsed_s": report.elapsed_s, "stats": stats,
                      "processes": report.stats["processes"]}))


if __name__ == "__main__":
    main()
