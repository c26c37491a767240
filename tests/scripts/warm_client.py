"""A script for the warm-tree tests; prints one JSON line about its run.

    warm_client.py fib N [PROCS]        dac.run_report(fib, N)
    warm_client.py runtime N            two runs in one Runtime
    warm_client.py naps COUNT MS        COUNT tasks that sleep MS each, summed
    warm_client.py fail                 a task raises ValueError
    warm_client.py module               a function of warm_mod.py (next to the cwd)
"""

import json
import os
import sys
import time

import dac


@dac.spawn
def fib(n):
    if n < 2:
        return n
    a, b = dac.sync(fib(n - 1), fib(n - 2))
    return a + b


@dac.spawn(depth=1)
def naps(lo, hi, ms):
    """One task per number in [lo, hi): each sleeps ``ms`` and gives its number."""
    if hi - lo == 1:
        time.sleep(ms / 1000.0)
        return lo
    mid = (lo + hi) // 2
    a, b = dac.sync(naps(lo, mid, ms), naps(mid, hi, ms))
    return a + b


@dac.spawn(depth=2)
def fails(n):
    if n == 3:
        raise ValueError(f"no {n} here")
    if n <= 1:
        return n
    a, b = dac.sync(fails(n - 1), fails(n - 2))
    return a + b


def report(r, **extra):
    leaves = sorted(p["pid"] for p in r.stats["processes"] if p["role"] == "leaf")
    print(json.dumps(dict(result=r.result, attached=r.stats["attached"],
                          spawns=r.stats["spawns"], leaves=leaves, pid=os.getpid(),
                          **extra)), flush=True)


def main():
    mode = sys.argv[1]
    if mode == "fib":
        procs = int(sys.argv[3]) if len(sys.argv) > 3 else 2
        report(dac.run_report(fib, int(sys.argv[2]), procs=procs))
    elif mode == "runtime":
        with dac.Runtime(procs=2) as rt:
            first = rt.run_report(fib, int(sys.argv[2]))
            report(rt.run_report(fib, int(sys.argv[2]) + 1), first=first.result,
                   first_attached=first.stats["attached"])
    elif mode == "naps":
        count, ms = int(sys.argv[2]), float(sys.argv[3])
        print("started", flush=True)
        report(dac.run_report(naps, 0, count, ms, procs=2))
    elif mode == "fail":
        try:
            dac.run(fails, 6, procs=2)
        except dac.TaskError as exc:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc),
                              "cause": repr(exc.exception)}))
    elif mode == "module":
        sys.path.insert(0, os.getcwd())
        import warm_mod
        report(dac.run_report(warm_mod.value_sum, 4, procs=2))


if __name__ == "__main__":
    main()
