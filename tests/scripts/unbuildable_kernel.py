"""A script whose ``leaf=`` kernel cannot be rebuilt in a leaf: its global ``LIMIT``
unpickles only in the process that made it. The first run must end with a
``ProcessError`` naming the cause; the second run, in the same process, must work.

    python unbuildable_kernel.py [--catch]

Without ``--catch`` the error ends the script (the test counts its stderr lines).
"""

import os
import sys

from numba import njit

import dac
from dac import spawn, sync

ROOT_PID = os.getpid()


def _rebuild(value, pid):
    if os.getpid() != pid:
        raise RuntimeError(f"LIMIT unpickles only in pid {pid}, the script's own")
    return Limit(value)


class Limit(int):
    """An int (numba reads it as a constant) that only its own process can unpickle."""

    def __reduce__(self):
        return (_rebuild, (int(self), ROOT_PID))


LIMIT = Limit(1000)


@njit(cache=True)
def small_sum(n):
    total = 0
    for i in range(n):
        total += i % LIMIT
    return total


@spawn(leaf=small_sum)
def total(n):
    if n < 100:
        return small_sum(n)
    a, b = sync(total(n // 2), total(n - n // 2))
    return a + b


@spawn
def plain(n):
    if n < 2:
        return n
    return sum(sync([plain(n - 1), plain(n - 2)]))


if __name__ == "__main__":
    if "--catch" in sys.argv:
        try:
            dac.run(total, 1600, procs=2, depth=2, root_helps=False)
        except dac.ProcessError as exc:
            print("ProcessError", exc.role, exc.doing, exc.type_name, exc.message,
                  sep="|")
        print("next", dac.run(plain, 15, procs=2))
    else:
        dac.run(total, 1600, procs=2, depth=2, root_helps=False)
