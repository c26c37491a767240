"""Tasks that do what serial scripts do: read stdin, leave a thread, read sys.argv,
recurse deeply under a raised recursion limit.

    python odd_tasks.py input|thread|argv|recursion [extra args...]
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dac  # noqa: E402


def chain(n):
    return 0 if n == 0 else 1 + chain(n - 1)


@dac.spawn(depth=1)
def task(i, what):
    if what == "input":
        return input()
    if what == "thread":
        threading.Thread(target=time.sleep, args=(300,)).start()     # not a daemon
        return i
    if what == "argv":
        return list(sys.argv)
    if what == "recursion":
        return chain(2500)
    raise ValueError(what)


@dac.spawn
def top(what, n):
    return dac.sync(*[task(i, what) for i in range(n)])


def main():
    what = sys.argv[1]
    if what == "recursion":
        sys.setrecursionlimit(4000)
    t0 = time.monotonic()
    try:
        values = dac.run(top, what, 4, procs=2, root_helps=False)
        print(f"values {values!r}", flush=True)
    except dac.TaskError as exc:
        print(f"error {exc.type_name}: {exc.message} after "
              f"{time.monotonic() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
