"""How fast NumPy arrays move to a leaf and back, against a copy in this process.

A task's array arguments and results travel beside the message's pickle stream, sent
from their own memory and received into the buffer the leaf's array then uses
(``stealing.transport.frames``). This times, on a warm tree of 2 leaves:

  to a leaf    ``run(nbytes_of, a)``: the array goes to a leaf, an int comes back
  back         ``run(ones, n)``: a leaf makes the array (its time is in the figure)
               and it comes back
  copy         ``a.copy()`` here: one pass over fresh memory, the ceiling a transfer
               that copies once cannot pass

for arrays of 1, 16 and 160 MB; each figure is the median of --repeat runs, as MB/s
of the whole ``run`` call, and each transfer's ratio to the copy.

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
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 160], help="MB")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="last line: the rows as JSON")
    args = ap.parse_args(argv)
    rows = {}
    with dac.Runtime(procs=2) as rt:
        rt.run(nbytes_of, np.ones(4))                    # the tree is up and warm
        for mb in args.sizes:
            n = mb * 1_000_000 // 8
            a = np.ones(n)
            assert rt.run(nbytes_of, a) == a.nbytes
            assert rt.run(ones, n).sum() == n
            s = {"to a leaf": median_s(lambda: rt.run(nbytes_of, a), args.repeat),
                 "back": median_s(lambda: rt.run(ones, n), args.repeat),
                 "copy": median_s(a.copy, args.repeat)}
            rows[mb] = {k: round(mb / v, 1) for k, v in s.items()}
    print(f"{'MB':>5} {'to a leaf MB/s':>15} {'back MB/s':>10} {'copy MB/s':>10} "
          f"{'to/copy':>8} {'back/copy':>9}")
    for mb, r in rows.items():
        print(f"{mb:>5} {r['to a leaf']:>15.0f} {r['back']:>10.0f} {r['copy']:>10.0f} "
              f"{r['to a leaf'] / r['copy']:>8.2f} {r['back'] / r['copy']:>9.2f}")
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
