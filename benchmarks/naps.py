"""Tasks that sleep instead of computing, for benchmarks that measure the scheduler
with more leaves than cores: ``naps(n, ms)`` spawns ``n`` calls of ``nap(ms)``, each
a task of the root's pool (``depth=1``)."""

import time

import dac


@dac.spawn
def nap(ms: float) -> int:
    time.sleep(ms / 1000.0)
    return 1


@dac.spawn(depth=1)
def naps(n: int, ms: float) -> int:
    return sum(dac.sync(*[nap(ms) for _ in range(n)]))
