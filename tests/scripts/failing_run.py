"""Runs a computation one of whose tasks raises ZeroDivisionError; prints what came back.

    python failing_run.py PROCS LEAF_MODE [NAP [BAD [DEPTH]]]

slow_divide(0, 2**DEPTH * 2, BAD, NAP) at spawn depth DEPTH: the task holding BAD fails.

Run in a subprocess by the tests: if dac ends badly, only this process dies.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import programs  # noqa: E402

import dac  # noqa: E402


def main():
    procs, mode = int(sys.argv[1]), sys.argv[2]
    nap = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    bad = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    depth = int(sys.argv[5]) if len(sys.argv) > 5 else 7
    t0 = time.perf_counter()
    try:
        value = dac.run(programs.slow_divide, 0, 2 ** depth * 2, bad, nap,
                        procs=procs, leaf_mode=mode, depth=depth)
        print(f"no error, value {value}", flush=True)
    except dac.TaskError as exc:
        print(f"TaskError {exc.type_name} {exc.task} after "
              f"{time.perf_counter() - t0:.2f} s", flush=True)
    # the process is still usable: a second run works
    print(f"then fib(15) = {dac.run(programs.fib, 15, procs=procs, leaf_mode=mode)}",
          flush=True)


if __name__ == "__main__":
    main()
