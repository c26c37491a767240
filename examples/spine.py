"""A deep, narrow recursion: a spine of spawns, each beside a few milliseconds of work.

    spine(n) = work(n) + spine(n - 1)        (both spawned, then synced)

Every level spawns one piece of work and the rest of the spine. Split at the top (the
root expanding to a spawn depth), almost all the work sits in the one task that holds
the rest of the spine, so a task farm runs it serially; a work stealer (every spawn
stealable) runs the pieces of work beside the spine. `benchmarks/spine.py` measures it.

    python examples/spine.py                 # LEVELS MS: default 300 levels of 3 ms
    python examples/spine.py 100 1           # 100 levels of 1 ms
"""

import sys
import time

import dac


def busy(ms: float, scale: int) -> int:
    """About ``ms`` milliseconds of pure-Python arithmetic (``scale`` loops per ms)."""
    total = 0
    for k in range(int(ms * scale)):
        total = (total + k * k) % 1000003
    return total


def loops_per_ms() -> int:
    """Calibrates ``busy`` on this machine."""
    n, t0 = 20000, time.perf_counter()
    busy(n / 1000, 1000)
    return max(1, int(n / ((time.perf_counter() - t0) * 1000)))


@dac.spawn
def work(i, ms, scale):
    return busy(ms, scale) + i


@dac.spawn
def spine(n, ms, scale):
    if n == 0:
        return 0
    a, b = dac.sync(work(n, ms, scale), spine(n - 1, ms, scale))
    return a + b


def plain_spine(n, ms, scale):
    """The same program without dac (a loop: the spine is the recursion)."""
    return sum(busy(ms, scale) + i for i in range(1, n + 1))


def main():
    levels = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    ms = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * levels + 100))
    scale = loops_per_ms()
    t0 = time.perf_counter()
    report = dac.run_report(spine, levels, ms, scale)
    elapsed = time.perf_counter() - t0
    assert report.result == plain_spine(levels, ms, scale)
    from stealing.observe.stats import format_stats, grain_text
    print(f"spine of {levels} levels x {ms} ms: {report.result} in {elapsed:.3f} s "
          f"({grain_text(report.stats)})")
    print(format_stats(report.stats))


if __name__ == "__main__":
    main()
