"""A run one of whose processes dies without a Python exception.

    python crash_run.py PROCS HOW [LEAF_MODE [MARK]]

HOW: ``exit`` (the task holding 3 calls ``os._exit(7)``), ``segv`` (it dereferences a
null pointer), ``wait`` (every task sleeps 60 s after writing its pid to MARK: the test
kills a process from outside), ``after`` (the run succeeds, then the script prints its
pid and sleeps: the test signals the root). Prints ``lost: ...`` with what
``LostProcessError`` says, then lets the error end the script (exit code 1).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dac  # noqa: E402


@dac.spawn(depth=1)
def crashing(i, how, mark):
    if mark:
        with open(mark, "a") as f:
            f.write(f"{os.getpid()}\n")
    if how == "wait":
        time.sleep(60)
    if i == 3 and how == "exit":
        os._exit(7)
    if i == 3 and how == "segv":
        import ctypes
        ctypes.string_at(0)
    time.sleep(0.05)
    return i


@dac.spawn
def top(n, how, mark):
    return sum(dac.sync(*[crashing(i, how, mark) for i in range(n)]))


def main():
    procs, how = int(sys.argv[1]), sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "persistent"
    mark = sys.argv[4] if len(sys.argv) > 4 else ""
    try:
        # (the root runs no 60 s task itself while its leaves start: root_helps off;
        # depth=1: each crashing(i) is a task of its own, which the error names)
        value = dac.run(top, 8, how, mark, procs=procs, branches=2, min_procs=2, leaf_mode=mode,
                        root_helps=how != "wait", depth=1)
    except dac.LostProcessError as exc:
        print(f"lost: role={exc.role} pid={exc.pid} host={exc.host} "
              f"exit_code={exc.exit_code} signal={exc.signal} task={exc.task}",
              flush=True)
        raise
    print(f"value {value}", flush=True)
    if how == "after":
        print(f"pid {os.getpid()}", flush=True)
        time.sleep(60)


if __name__ == "__main__":
    main()
