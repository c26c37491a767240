"""One task raises at once while the other leaf sleeps in its task.

    python busy_failure.py SECONDS

Prints the TaskError that comes back, then makes a second run to show the process is
still usable.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import programs  # noqa: E402

import dac  # noqa: E402


def main():
    secs = float(sys.argv[1])
    t0 = time.perf_counter()
    try:
        dac.run(programs.one_fails_others_sleep, 2, secs, procs=2, tasks_per_leaf=1)
        print("no error", flush=True)
    except dac.TaskError as exc:
        print(f"TaskError {exc.type_name}: {exc.message} after "
              f"{time.perf_counter() - t0:.2f} s", flush=True)
    print(f"then fib(15) = {dac.run(programs.fib, 15, procs=2)}", flush=True)


if __name__ == "__main__":
    main()
