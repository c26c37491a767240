"""A script with its own ``@njit(cache=True)`` kernels: one as ``leaf=``, one called
from a task's body. Prints the answers and how many times the leaves found the kernels
in numba's on-disk cache (a second run of the script must find them there).

    python own_kernel.py
"""

from numba import njit

import dac
from dac import spawn, sync


@njit(cache=True)
def squares(lo, hi):
    total = 0
    for i in range(lo, hi):
        total += i * i
    return total


@spawn(leaf=squares)
def sum_squares(lo, hi):
    if hi - lo <= 1000:
        return squares(lo, hi)
    mid = (lo + hi) // 2
    a, b = sync(sum_squares(lo, mid), sum_squares(mid, hi))
    return a + b


@njit(cache=True)
def triangle(n):
    return n * (n + 1) // 2


@spawn
def probe(n):
    """A task calling a script kernel from its body: the value, and the cache hits of
    the kernel in this process so far."""
    value = triangle(n)
    return value, sum(triangle.stats.cache_hits.values())


@spawn
def probes(k):
    return sync([probe(i) for i in range(k)])


if __name__ == "__main__":
    with dac.Runtime(procs=2, depth=1, root_helps=False) as rt:
        print("sum_squares", rt.run(sum_squares, 0, 16000))
        got = rt.run(probes, 8)
    print("triangles", [v for v, _ in got])
    print("hits", max(h for _, h in got))
