"""Compare the numba N-Queens leaf kernel with the same algorithm in C.

Measures the sequential time of ``count_all(N)`` from
``examples/nqueens_kernels.py`` against ``benchmarks/nqueens.c`` built with
``cc -O3 -march=native``.  Numba JIT compilation / cache loading is excluded
by a warm-up call; the C side times only the count (reported by the binary
itself).  Each side runs ``--repeat`` times and the best time is kept.  The
target is numba/C <= 1.3.

Run:  python benchmarks/leaf_vs_c.py --n 15 16
      python benchmarks/leaf_vs_c.py --n 15 16 --repeat 5 --json
Exit status: 0 ok, 1 wrong count, 2 no working C compiler.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

from nqueens_kernels import KNOWN_COUNTS, count_all  # noqa: E402

TARGET = 1.3


def find_cc():
    """Path of a C compiler ($CC, cc, gcc or clang), or None."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def build_c(tmpdir):
    """Compile nqueens.c into tmpdir; return the binary path (exit 2 on failure)."""
    cc = find_cc()
    if cc is None:
        print("error: no C compiler found (tried $CC, cc, gcc, clang)", file=sys.stderr)
        sys.exit(2)
    exe = os.path.join(tmpdir, "nqueens")
    cmd = [cc, "-O3", "-march=native", "-o", exe, os.path.join(HERE, "nqueens.c")]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        print("error: C build failed: %s\n%s" % (" ".join(cmd), res.stderr), file=sys.stderr)
        sys.exit(2)
    return exe


def run_c(exe, n):
    """One run of the C binary: (count, seconds)."""
    out = subprocess.run([exe, str(n)], capture_output=True, text=True, check=True).stdout
    count, secs = out.split()
    return int(count), float(secs)


def run_numba(n):
    """One timed call of count_all(n): (count, seconds)."""
    t0 = time.perf_counter()
    count = count_all(n)
    return count, time.perf_counter() - t0


def best_of(fn, n, repeat):
    """Best time over `repeat` runs; raise if counts disagree between runs."""
    counts, times = set(), []
    for _ in range(repeat):
        c, t = fn(n)
        counts.add(c)
        times.append(t)
    if len(counts) != 1:
        raise RuntimeError("inconsistent counts for N=%d: %s" % (n, counts))
    return counts.pop(), min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[15, 16], help="board sizes")
    ap.add_argument("--repeat", type=int, default=3, help="runs per side (best kept)")
    ap.add_argument("--json", action="store_true", help="print one JSON line instead of a table")
    args = ap.parse_args(argv)

    tmpdir = tempfile.mkdtemp(prefix="nqueens_c_")
    try:
        exe = build_c(tmpdir)
        count_all(6)  # warm-up: JIT compile or load from numba cache

        rows, ok = [], True
        for n in args.n:
            c_count, c_t = best_of(lambda k: run_c(exe, k), n, args.repeat)
            nb_count, nb_t = best_of(run_numba, n, args.repeat)
            expected = KNOWN_COUNTS.get(n)
            correct = c_count == nb_count and (expected is None or nb_count == expected)
            ok &= correct
            ratio = nb_t / c_t if c_t > 0 else float("inf")
            rows.append({"n": n, "count": nb_count, "c_count": c_count, "correct": correct,
                         "c_s": c_t, "numba_s": nb_t, "ratio": ratio,
                         "within_target": ratio <= TARGET})
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

    if args.json:
        print(json.dumps({"target": TARGET, "repeat": args.repeat, "results": rows}))
    else:
        print("%4s %12s %10s %10s %12s %s" % ("N", "count", "C s", "numba s", "numba/C", "<=%.1f" % TARGET))
        for r in rows:
            flag = "yes" if r["within_target"] else "NO"
            if not r["correct"]:
                flag += " (WRONG COUNT: C=%d numba=%d)" % (r["c_count"], r["count"])
            print("%4d %12d %10.3f %10.3f %12.3f %s"
                  % (r["n"], r["count"], r["c_s"], r["numba_s"], r["ratio"], flag))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
