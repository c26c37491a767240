"""How fast NumPy arrays move to a leaf and back, against a copy in this process.

A task's array arguments and results travel beside the message's pickle stream
(``stealing.transport.frames``): between processes of one host those of 512 KiB or more
through shared memory (``stealing.transport.segments``: written once by the sender,
mapped by the receiver), others over MPI. This times, on a warm tree of 2 leaves:

  to a leaf    ``run(nbytes_of, a)``: the array goes to a leaf, an int comes back
  back         ``run(ones, n)``: a leaf makes the array (its time is in the figure)
               and it comes back
  copy         ``a.copy()`` here: one pass over fresh memory, the ceiling a transfer
               that copies once cannot pass

for arrays of 1, 16 and 160 MB; each figure is the median of --repeat runs, as MB/s
of the whole ``run`` call, and each transfer's ratio to the copy. A run's own round
trips cost about 2-3 ms whatever it carries (``run(nbytes_of, a 1-element array)``,
timed too): "beyond a run" is the array's size over the time a run of it takes beyond
that, and "16 at once" the same for one task that takes 16 such arrays (a steadier
figure for small arrays, whose time is mostly the run's).

Run:  python benchmarks/array_transfer.py
      python benchmarks/array_transfer.py --sizes 1 16 --repeat 3 --json
Exit status: 0 (figures are reported, not asserted).
"""

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import dac  # noqa: E402


@dac.spawn
def nbytes_of(a):
    return int(a.nbytes)


@dac.spawn
def nbytes_all(arrays):
    return sum(int(a.nbytes) for a in arrays)


@dac.spawn
def ones(n):
    return np.ones(n)


def median_s(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[1, 16, 160], help="MB")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="last line: the rows as JSON")
    args = ap.parse_args(argv)
    rows = {}
    with dac.Runtime(procs=2) as rt:
        tiny = np.ones(1)
        rt.run(nbytes_of, tiny)                          # the tree is up and warm
        empty = median_s(lambda: rt.run(nbytes_of, tiny), args.repeat)
        for mb in args.sizes:
            n = int(mb * 1_000_000) // 8
            a = np.ones(n)
            assert rt.run(nbytes_of, a) == a.nbytes
            assert rt.run(ones, n).sum() == n
            many = [np.ones(n) for _ in range(16)]
            assert rt.run(nbytes_all, many) == 16 * a.nbytes
            s = {"to a leaf": median_s(lambda: rt.run(nbytes_of, a), args.repeat),
                 "16 at once": median_s(lambda: rt.run(nbytes_all, many), args.repeat),
                 "back": median_s(lambda: rt.run(ones, n), args.repeat),
                 "copy": median_s(a.copy, args.repeat)}
            row = {k: round(mb / v, 1) for k, v in s.items() if k != "16 at once"}
            row["16 at once"] = round(16 * mb / max(s["16 at once"] - empty, 1e-6), 1)
            row["to a leaf beyond a run"] = round(mb / max(s["to a leaf"] - empty, 1e-6), 1)
            row["run ms"] = round(1e3 * empty, 2)
            rows[f"{mb:g}"] = row
    print(f"{'MB':>5} {'to a leaf MB/s':>15} {'beyond a run':>13} {'16 at once':>11} "
          f"{'back MB/s':>10} {'copy MB/s':>10} {'to/copy':>8} {'back/copy':>9}")
    for mb, r in rows.items():
        print(f"{mb:>5} {r['to a leaf']:>15.0f} {r['to a leaf beyond a run']:>13.0f} "
              f"{r['16 at once']:>11.0f} "
              f"{r['back']:>10.0f} {r['copy']:>10.0f} {r['to a leaf'] / r['copy']:>8.2f} "
              f"{r['back'] / r['copy']:>9.2f}")
    print(f"a run of a 1-element array: {1e3 * empty:.2f} ms")
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
