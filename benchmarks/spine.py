"""A deep narrow recursion on 2 leaves against its serial elision (examples/spine.py).

Per repetition, interleaved: the plain loop, the serial elision (the ``@spawn`` program
called outside ``dac.run``), a kept ``dac.Runtime(procs=2)`` (warmed first: compute
only) and a fresh ``dac.run`` (start-up included). Speed-up = elision time / time;
min, median and max over ``--repeat`` runs. Target of the work-stealing redesign:
>= 1.7x the elision on 2 leaves; a split at the top of the recursion stays below 1.

Run:  python benchmarks/spine.py                 # 300 levels of 3 ms, 3 repetitions
      python benchmarks/spine.py --levels 200 --ms 2 --repeat 5 --json
"""

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))

from spine import loops_per_ms, plain_spine, spine  # noqa: E402

import dac  # noqa: E402


def timed(fn, *args):
    t0 = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - t0, value


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", type=int, default=300)
    ap.add_argument("--ms", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * args.levels + 100))
    scale = loops_per_ms()
    call = (args.levels, args.ms, scale)
    expected = plain_spine(*call)
    times = {"loop": [], "elision": [], "kept": [], "fresh": []}
    with dac.Runtime(procs=args.procs) as rt:
        rt.run(spine, 5, args.ms, scale)                 # warm: tree up, code loaded
        for _ in range(args.repeat):
            for name, run in (("loop", lambda: plain_spine(*call)),
                              ("elision", lambda: spine(*call)),
                              ("kept", lambda: rt.run(spine, *call)),
                              ("fresh", lambda: dac.run(spine, *call,
                                                        procs=args.procs))):
                seconds, value = timed(run)
                if value != expected:
                    sys.exit(f"{name}: wrong value {value} (expected {expected})")
                times[name].append(seconds)
    print(f"spine of {args.levels} levels x {args.ms} ms, {args.procs} leaves, "
          f"{args.repeat} repetitions; seconds and speed-up over the elision of the "
          f"same repetition (min / median / max)")
    out = {}
    for name, ts in times.items():
        ratios = sorted(e / t for e, t in zip(times["elision"], ts))
        out[name] = {"seconds": ts, "speedup_vs_elision": ratios}
        print(f"  {name:<8} {min(ts):7.3f} {statistics.median(ts):7.3f} {max(ts):7.3f} s"
              f"   x{ratios[0]:.2f} / x{statistics.median(ratios):.2f} / "
              f"x{ratios[-1]:.2f}")
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
