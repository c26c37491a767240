"""dac beside its peers on N-Queens: the whole command a user types, and the compute alone.

Every way runs the same numba kernel (``nqueens_kernels.count_from``):

    seq          the kernel on the whole board, in one process
    pool         multiprocessing.Pool (fork), one task per placement of the first two
                 queens (``nqueens_task``)
    ppe          concurrent.futures.ProcessPoolExecutor, the same tasks
    mpi4py       mpi4py.futures.MPIPoolExecutor (spawned workers), the same tasks
    dac-cold     dac as a user first writes it: a @spawn N-Queens and dac.run
    dac-advice   the README's start-up advice: Runtime(preload=...).start() first,
                 then the script's own imports (examples/nqueens.py)
    dac-warm     the dac-cold script while a warm tree is up (``dac up`` once, before
                 the repetitions; one run on it first, as a user's earlier script)

Two figures per way and board size N, each from its own fresh process:

    whole    the command from outside: interpreter, imports, workers or tree, compute
    compute  inside the process, after start-up and a warm-up solve of N = 10: one
             solve of N (what is left when start-up is paid elsewhere)

Repetitions are interleaved (every way once, then again) and the table gives the
median and the range, with the speed-up of the median over the sequential way's. Peers
that are not installed are skipped with a note. All dac ways use a private tree folder,
so a tree the user may have up is not touched; the cold ways never attach.

Run:  python benchmarks/peers.py                    # N = 14 16, 3 repetitions
      python benchmarks/peers.py --n 12 --repeat 1 --ways seq pool dac-cold --json
Exit status: 0 (figures are reported, not asserted), 1 on a wrong solution count.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "examples")
WAYS = ("seq", "pool", "ppe", "mpi4py", "dac-cold", "dac-advice", "dac-warm")
WARM_UP_N = 10
CORES = len(os.sched_getaffinity(0))


# one way, in its own process ------------------------------------------------------
def _paths():
    for p in (ROOT, EXAMPLES, HERE):
        if p not in sys.path:
            sys.path.insert(0, p)


def way_seq():
    from nqueens_kernels import count_from
    return lambda n: count_from(n, 0, 0, 0), None


def way_pool():
    import multiprocessing

    from nqueens_task import count_task, two_queen_boards
    pool = multiprocessing.get_context("fork").Pool(CORES)
    return (lambda n: sum(pool.map(count_task, two_queen_boards(n), chunksize=1)),
            pool.terminate)


def way_ppe():
    from concurrent.futures import ProcessPoolExecutor

    from nqueens_task import count_task, two_queen_boards
    ex = ProcessPoolExecutor(CORES)
    return (lambda n: sum(ex.map(count_task, two_queen_boards(n))),
            lambda: ex.shutdown(cancel_futures=True))


def way_mpi4py():
    from mpi4py.futures import MPIPoolExecutor
    from nqueens_task import count_task, two_queen_boards
    ex = MPIPoolExecutor(max_workers=CORES, path=[ROOT, EXAMPLES, HERE])
    return lambda n: sum(ex.map(count_task, two_queen_boards(n))), ex.shutdown


def _dac_queens():
    from nqueens_boards import children

    import dac

    @dac.spawn(leaf="nqueens_kernels:count_from")
    def queens(n, cols, d1, d2):
        if cols == (1 << n) - 1:
            return 1
        futures = [queens(n, c, a, b) for c, a, b in children(n, cols, d1, d2)]
        dac.sync()
        return sum(f.result() for f in futures)
    return dac, queens


def way_dac_cold(keep: bool):
    dac, queens = _dac_queens()
    if not keep:                        # the script as first written: one dac.run
        return lambda n: dac.run(queens, n, 0, 0, 0), None
    rt = dac.Runtime()
    return lambda n: rt.run(queens, n, 0, 0, 0), rt.close


def way_dac_advice(keep: bool):
    import dac
    rt = dac.Runtime(preload=["nqueens_kernels"]).start()     # before anything else
    dac, queens = _dac_queens()
    return lambda n: rt.run(queens, n, 0, 0, 0), rt.close


def run_way(way: str, n: int, mode: str) -> dict:
    _paths()
    keep = mode == "compute"
    if way in ("dac-cold", "dac-warm"):
        solve, close = way_dac_cold(keep)
    elif way == "dac-advice":
        solve, close = way_dac_advice(keep)
    else:
        solve, close = globals()["way_" + way.replace("-", "_")]()
    try:
        if keep:
            solve(WARM_UP_N)
        t0 = time.perf_counter()
        count = solve(n)
        seconds = time.perf_counter() - t0
    finally:
        if close is not None:
            close()
    return {"way": way, "n": n, "mode": mode, "count": count, "compute_s": seconds}


# the driver -----------------------------------------------------------------------
def installed(way: str) -> str | None:
    """Why ``way`` cannot run here, or None."""
    need = {"mpi4py": "mpi4py.futures"}.get(way)
    if need is None:
        return None
    import importlib.util
    try:
        found = importlib.util.find_spec(need) is not None
    except ImportError:
        found = False
    return None if found else f"{need} is not installed"


def launch(way, n, mode, env) -> tuple:
    """``(whole command seconds, the way's report)``."""
    cmd = [sys.executable, os.path.abspath(__file__), "--way", way, "--board", str(n),
           "--mode", mode]
    t0, began = time.perf_counter(), time.time()
    # in a session of its own: an MPICH launcher ends its whole process group when
    # interrupted, and this process must live on to take the warm tree down
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=900)
    except BaseException:               # Ctrl-C, or the timeout: end the way's run
        try:
            os.killpg(proc.pid, signal.SIGINT)
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        except ProcessLookupError:      # it ended meanwhile
            pass
        # mpi4py.futures' workers interrupted in MPI's start leave their shared
        # memory (1-2 MB a run in /dev/shm): remove what the way's processes made
        from stealing.host.shm import sweep_unused_shm  # lazy: only after a Ctrl-C
        sweep_unused_shm(began)
        raise
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{way} N={n} {mode} failed ({proc.returncode}):\n"
                           f"{err[-3000:]}")
    return seconds, json.loads(out.strip().splitlines()[-1])


def environments(folder: str) -> tuple:
    base = dict(os.environ, DAC_TREE_DIR=folder, DAC_ATTACH="0")
    base["PYTHONPATH"] = os.pathsep.join([ROOT] + ([base["PYTHONPATH"]]
                                                   if base.get("PYTHONPATH") else []))
    # mpi4py.futures in an MPICH singleton starts `mpiexec` from PATH: MPICH's own
    # (with Open MPI's wheel beside it, `mpiexec` is Open MPI's and the pool hangs)
    from stealing.transport.mpi import find_mpiexec
    bindir = os.path.join(folder, "bin")
    os.makedirs(bindir, exist_ok=True)
    mpiexec, shim = find_mpiexec(), os.path.join(bindir, "mpiexec")
    if mpiexec and not os.path.exists(shim):
        with open(shim, "w") as f:      # (hydra finds its proxy beside its argv[0])
            f.write(f'#!/bin/sh\nexec "{mpiexec}" "$@"\n')
        os.chmod(shim, 0o700)
    base["PATH"] = os.pathsep.join([bindir, os.path.dirname(sys.executable),
                                    base.get("PATH", "")])
    return base, dict(base, DAC_ATTACH="1")


def dac_cli(args, env) -> None:
    subprocess.run([sys.executable, "-m", "launcher.cli", *args], cwd=ROOT, env=env,
                   check=True, capture_output=True, text=True)


def take_down(env) -> None:
    """``dac down``, seen through to its end: a Ctrl-C landing here (the user's
    first, as the run ends, or a second) must not cut it short, or the warm tree
    would outlive the benchmark. In a session of its own, so the Ctrl-C does not
    reach it either; a failure is said, not raised (this runs in a ``finally``)."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "launcher.cli", "down"], cwd=ROOT,
                                env=env, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
        while proc.returncode is None:
            try:
                proc.wait()
            except KeyboardInterrupt:
                print("(taking the warm tree down first)", file=sys.stderr, flush=True)
        if proc.returncode != 0:
            err.seek(0)
            print(f"warning: `dac down` failed ({proc.returncode}): {err.read()[-2000:]}",
                  file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[14, 16])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ways", nargs="+", choices=WAYS, default=list(WAYS))
    ap.add_argument("--json", action="store_true", help="one JSON object at the end")
    ap.add_argument("--way", help=argparse.SUPPRESS)
    ap.add_argument("--board", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--mode", choices=("whole", "compute"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.way:                                     # one way, in this process
        print(json.dumps(run_way(args.way, args.board, args.mode)))
        return 0

    sys.path.insert(0, EXAMPLES)
    from nqueens_boards import KNOWN_COUNTS
    skipped = {w: why for w in args.ways if (why := installed(w))}
    ways = [w for w in args.ways if w not in skipped]
    for w, why in skipped.items():
        print(f"note: {w} skipped: {why}")
    folder = tempfile.mkdtemp(prefix="dac-peers-tree-")
    cold_env, warm_env = environments(folder)
    times = {(w, n, m): [] for w in ways for n in args.n for m in ("whole", "compute")}
    wrong = []
    try:
        if "dac-warm" in ways:      # (in the try: a Ctrl-C during `dac up` takes it down)
            dac_cli(["up", "--preload", "dac.execution,numpy,numba,nqueens_kernels"],
                    cold_env)
            launch("dac-warm", WARM_UP_N, "whole", warm_env)     # the tree's first script
        for _ in range(args.repeat):
            for n in args.n:
                for w in ways:
                    for mode in ("whole", "compute"):
                        env = warm_env if w == "dac-warm" else cold_env
                        whole, rep = launch(w, n, mode, env)
                        if rep["count"] != KNOWN_COUNTS.get(n, rep["count"]):
                            wrong.append((w, n, mode, rep["count"]))
                        times[(w, n, mode)].append(whole if mode == "whole"
                                                   else rep["compute_s"])
    finally:
        if "dac-warm" in ways:      # (no tree up, if `dac up` failed: nothing to do)
            take_down(cold_env)
        import shutil
        shutil.rmtree(folder, ignore_errors=True)
    table = summarize(times, ways, args.n)
    print(render(table, ways, args.n, args.repeat))
    if args.json:
        print(json.dumps({"cores": CORES, "repeat": args.repeat, "skipped": skipped,
                          "tree_folder": folder, "figures": table}))
    if wrong:
        print(f"WRONG solution counts: {wrong}")
        return 1
    return 0


def summarize(times: dict, ways, sizes) -> list:
    rows = []
    for n in sizes:
        for mode in ("whole", "compute"):
            base = statistics.median(times[("seq", n, mode)]) if ("seq", n, mode) in \
                times else None
            for w in ways:
                ts = times[(w, n, mode)]
                med = statistics.median(ts)
                rows.append({"n": n, "mode": mode, "way": w, "min_s": min(ts),
                             "median_s": med, "max_s": max(ts),
                             "speedup": base / med if base else None})
    return rows


def render(rows, ways, sizes, repeat) -> str:
    lines = [f"N-Queens, {CORES} cores, {repeat} interleaved repetitions; seconds "
             f"(median, min-max) and speed-up of the median over seq"]
    for n in sizes:
        for mode in ("whole", "compute"):
            lines.append(f"\nN = {n}, {'whole command' if mode == 'whole' else 'compute only'}")
            for r in rows:
                if r["n"] == n and r["mode"] == mode:
                    sp = f"x{r['speedup']:.2f}" if r["speedup"] else ""
                    lines.append(f"  {r['way']:<11} {r['median_s']:7.3f} s  "
                                 f"({r['min_s']:.3f}-{r['max_s']:.3f})  {sp}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
