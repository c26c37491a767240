"""Kill processes of a running tree in a given order; report how the run ended.

    python kill_order.py KIND[,KIND...] [PROCS]

KIND: ``leaf``, ``leaf-monitor``, ``router``, ``router-monitor`` (a process of the tree
or the monitor beside it), ``mpiexec``, ``proxy`` (MPI's process manager and its
proxy). Once every leaf is ready and the run is under way, a thread SIGKILLs one
process of each kind, in order, 0.2 s apart. The run (a tree of naps, about 12 s of
work for 4 leaves) must end with a ``DacError`` soon after the first kill; the last
stdout line is JSON: the error's type and text, the seconds from the first kill to the
error, and the pids killed. The script then ends normally (exit 0).
"""

import json
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from nested_programs import sleep_tree  # noqa: E402

import dac  # noqa: E402
from stealing.host.procs import children_named, descendants, table  # noqa: E402


def ppid(pid):
    return table().get(pid, ("?", 0))[1]


def find(kind, sched):
    procs = sched.processes()
    if kind in ("leaf", "router", "leaf-monitor", "router-monitor"):
        role = kind.split("-")[0]
        pids = [p["pid"] for p in procs if p["role"] == role]
        if not pids:
            return None
        return ppid(pids[-1]) if kind.endswith("monitor") else pids[-1]
    names = table()
    managers = descendants(children_named("mpiexec"))
    want = "mpiexec" if kind == "mpiexec" else "hydra_pmi_proxy"
    found = [p for p in managers if names.get(p, ("",))[0].startswith(want)]
    return found[0] if found else None


def main():
    kinds = sys.argv[1].split(",")
    procs = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    rt = dac.Runtime(procs=procs, branches=2, min_procs=2,   # the thesis' tree: routers
                     root_helps=False)
    rt.start()
    rt.run(sleep_tree, 2, 1.0)                  # every leaf ready
    killed, first = [], []

    def killer():
        time.sleep(0.5)
        for kind in kinds:
            pid = find(kind, rt.scheduler)
            if pid:
                if not first:
                    first.append(time.monotonic())
                os.kill(pid, signal.SIGKILL)
                killed.append([kind, pid])
            time.sleep(0.2)

    threading.Thread(target=killer, daemon=True).start()
    error, message = None, ""
    try:
        rt.run(sleep_tree, 12, 12.0)
    except dac.DacError as exc:
        error, message = type(exc).__name__, str(exc).splitlines()[0]
    took = time.monotonic() - first[0] if first else None
    rt.close()
    print(json.dumps({"error": error, "message": message, "seconds": took,
                      "killed": killed}))


if __name__ == "__main__":
    main()
