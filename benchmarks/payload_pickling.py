"""Cost of pickling a task payload on the root: ``dac.serialize.dumps_payload`` (which
also names the script classes and functions a payload refers to, so they can be sent to
the leaves once) against the baseline ``dac.serialize.dumps`` (plain ``pickle.dumps``,
what the root used before), measured in the same run, and against the alternative of
scanning the plain pickle for ``b"__main__"`` (``dumps`` + scan).

Payloads are ``(task id, key, depth, args, kwargs)`` with args: an int (fib), two ints,
NumPy arrays of 1 000 and 1 000 000 float64 (these three kinds take the plain path), a
list of 100 000 ints, a list of 1 000 arrays of 10 floats, and a list of 1 000
``Fraction`` objects (the worst case of the noting pickler: one Python call per
object). Each figure is the best of 7 repeats (other work on the machine disturbs the
mean, not the minimum).

Target: ints, tuples and arrays within ~0.2 us or ~5% of the baseline.

Run:  python benchmarks/payload_pickling.py [--json]
"""

import argparse
import fractions
import json
import os
import pickle
import sys
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from dac.serialize import dumps, dumps_payload  # noqa: E402


def payloads() -> dict:
    rng = np.random.default_rng(0)
    args = {
        "int": (30,),
        "two ints": (3, 4),
        "array 1e3": (rng.random(1000),),
        "array 1e6": (rng.random(1_000_000),),
        "list 1e5 ints": (list(range(100_000)),),
        "1e3 arrays": ([rng.random(10) for _ in range(1000)],),
        "1e3 objects": ([fractions.Fraction(i, 7) for i in range(1000)],),
    }
    return {name: (17, "fib#0", 4, a, {}) for name, a in args.items()}


def best(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number


def scan(obj):
    blob = dumps(obj, "x")
    return b"__main__" in blob, blob


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for name, obj in payloads().items():
        size = len(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))
        number = 20000 if size < 10_000 else 20
        base = best(lambda: dumps(obj, "x"), number)
        scalars = all(type(a) in (int, float, str) for a in obj[3])    # as the root does
        ours = best(lambda: dumps_payload(obj, "x", obj[3], scalars), number)
        scanned = best(lambda: scan(obj), number)
        rows.append({"payload": name, "bytes": size, "dumps_us": base * 1e6,
                     "dumps_payload_us": ours * 1e6, "pickle_and_scan_us": scanned * 1e6})
    if args.json:
        print(json.dumps(rows))
        return
    print(f"{'payload':16s} {'bytes':>9s} {'dumps':>13s} {'dumps_payload':>14s} "
          f"{'dumps+scan':>12s}")
    for r in rows:
        print(f"{r['payload']:16s} {r['bytes']:9d} {r['dumps_us']:11.2f}us "
              f"{r['dumps_payload_us']:12.2f}us {r['pickle_and_scan_us']:10.2f}us")


if __name__ == "__main__":
    main()
