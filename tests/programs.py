"""@spawn programs used by the tests.

They live in an importable module (not in the test files) so that the leaves, which get
the root's ``sys.path``, import them by reference. Everything here is pure Python except
``queens_nb``, whose numba leaf is imported lazily, inside the leaf, on first use: only
runs of ``queens_nb`` pay for importing numba in their leaves.
"""

from __future__ import annotations

import gc
import importlib.util
import itertools
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from dac import spawn, sync

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "examples")
if EXAMPLES not in sys.path:
    sys.path.append(EXAMPLES)          # nqueens_kernels, mergesort (also in the leaves)

QUEENS = {1: 1, 2: 0, 3: 0, 4: 2, 5: 10, 6: 4, 7: 40, 8: 92, 9: 352, 10: 724,
          11: 2680, 12: 14200, 13: 73712, 14: 365596}


# --- Fibonacci ------------------------------------------------------------------------
@spawn
def fib(n):
    if n < 2:
        return n
    a, b = sync(fib(n - 1), fib(n - 2))
    return a + b


@spawn(depth=3)
def fib_depth3(n):
    if n < 2:
        return n
    a, b = sync(fib_depth3(n - 1), fib_depth3(n - 2))
    return a + b


GC_SEEN: list = []     # gc.isenabled() in the frames that ran here, on the root


@spawn(depth=2)
def fib_noting_gc(n, fail=False):
    """fib, noting whether the garbage collector runs in its frames above the spawn
    depth (those run on the root during the expansion's passes); ``fail``: the top
    raises after its children are in."""
    if n < 2:
        return n
    GC_SEEN.append(gc.isenabled())
    a, b = sync(fib_noting_gc(n - 1), fib_noting_gc(n - 2))
    if fail:
        raise ValueError(f"the top of fib({n}) fails after its sync")
    return a + b


def _small(n):
    return n < 12


@spawn(cutoff=_small)
def fib_cutoff(n):
    if n < 2:
        return n
    a, b = sync(fib_cutoff(n - 1), fib_cutoff(n - 2))
    return a + b


def plain_fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def fib_calls_at_depth(n, depth):
    """How many calls of the naive fib recursion sit exactly ``depth`` levels below
    ``fib(n)`` (the tasks of a run at that spawn depth)."""
    if depth == 0:
        return 1
    if n < 2:
        return 0
    return fib_calls_at_depth(n - 1, depth - 1) + fib_calls_at_depth(n - 2, depth - 1)


def fib_calls_under_cutoff(n, small):
    """Tasks of a cutoff run: the calls where ``small`` first holds."""
    if small(n):
        return 1
    if n < 2:
        return 0
    return fib_calls_under_cutoff(n - 1, small) + fib_calls_under_cutoff(n - 2, small)


# --- N-Queens -------------------------------------------------------------------------
from nqueens_boards import children  # noqa: E402  (plain Python, no numba)


def count_from_py(n, cols, d1, d2):
    """Sequential pure-Python completion count (the leaf of ``queens``)."""
    full = (1 << n) - 1
    if cols == full:
        return 1
    return sum(count_from_py(n, c, a, b) for c, a, b in children(n, cols, d1, d2))


@spawn(leaf=count_from_py)
def queens(n, cols, d1, d2):
    if cols == (1 << n) - 1:
        return 1
    futures = [queens(n, c, a, b) for c, a, b in children(n, cols, d1, d2)]
    sync()
    return sum(f.result() for f in futures)


def count_from_numba(n, cols, d1, d2):
    from nqueens_kernels import count_from  # numba, imported in the leaf on demand
    return int(count_from(n, cols, d1, d2))


@spawn(leaf=count_from_numba)
def queens_nb(n, cols, d1, d2):
    if cols == (1 << n) - 1:
        return 1
    futures = [queens_nb(n, c, a, b) for c, a, b in children(n, cols, d1, d2)]
    sync()
    return sum(f.result() for f in futures)


# --- mutual recursion ---------------------------------------------------------------
@spawn
def ping(n):
    """ping(n) = pong(n-1) + ping(n-2) + 1; pong(n) = 2*ping(n-1) + pong(n-3)."""
    if n <= 0:
        return 1
    a, b = sync(pong(n - 1), ping(n - 2))
    return a + b + 1


@spawn
def pong(n):
    if n <= 0:
        return 2
    a, b = sync(ping(n - 1), pong(n - 3))
    return 2 * a + b


def plain_ping(n, memo={}):
    if n <= 0:
        return 1
    key = ("ping", n)
    if key not in memo:
        memo[key] = plain_pong(n - 1) + plain_ping(n - 2) + 1
    return memo[key]


def plain_pong(n, memo={}):
    if n <= 0:
        return 2
    key = ("pong", n)
    if key not in memo:
        memo[key] = 2 * plain_ping(n - 1) + plain_pong(n - 3)
    return memo[key]


# --- deep linear recursions -------------------------------------------------------------
@spawn
def chain(n):
    """n, by a linear recursion n levels deep."""
    if n == 0:
        return 0
    return sync(chain(n - 1)) + 1


def plain_chain(n):
    return 0 if n == 0 else plain_chain(n - 1) + 1


def _at_most_50(n):
    return n <= 50


@spawn(cutoff=_at_most_50)
def chain_cut(n):
    """chain whose calls become tasks once n <= 50: chain_cut(300)'s one task is
    chain_cut(50), 250 levels down."""
    if n == 0:
        return 0
    return sync(chain_cut(n - 1)) + 1


def _never(n):
    return False


@spawn(cutoff=_never)
def chain_uncut(n):
    """chain whose cutoff never holds: it all runs on the root, as serial code."""
    if n == 0:
        return 0
    return sync(chain_uncut(n - 1)) + 1


# --- methods ------------------------------------------------------------------------------
class Fibber:
    """fib(n) * scale by @spawn methods: the instance goes first in every call and
    travels with every task."""

    def __init__(self, scale):
        self.scale = scale

    @spawn
    def fib(self, n):
        if n < 2:
            return self.scale * n
        a, b = sync(self.fib(n - 1), self.fib(n - 2))
        return a + b

    @spawn
    def total(self, values):
        """scale * sum(values), by halving, children called with a keyword."""
        if len(values) <= 2:
            return self.scale * sum(values)
        mid = len(values) // 2
        return sum(sync(self.total(values[:mid]), self.total(values=values[mid:])))

    @staticmethod
    @spawn
    def static_fib(n):                       # @staticmethod above @spawn
        if n < 2:
            return n
        a, b = sync(Fibber.static_fib(n - 1), Fibber.static_fib(n - 2))
        return a + b

    @spawn
    @staticmethod
    def static_sum(lo, hi):                  # @spawn above @staticmethod
        if hi - lo <= 2:
            return sum(range(lo, hi))
        mid = (lo + hi) // 2
        return sum(sync(Fibber.static_sum(lo, mid), Fibber.static_sum(mid, hi)))

    @classmethod
    @spawn
    def class_sum(cls, lo, hi):              # @classmethod above @spawn
        if hi - lo <= 2:
            return (cls.__name__, sum(range(lo, hi)))
        mid = (lo + hi) // 2
        (name, a), (_, b) = sync(cls.class_sum(lo, mid), cls.class_sum(mid, hi))
        return (name, a + b)

    @spawn
    @classmethod
    def class_count(cls, n):                 # @spawn above @classmethod
        if n == 0:
            return (cls.__name__, 0)
        name, k = sync(cls.class_count(n - 1))
        return (name, k + 1)


class SubFibber(Fibber):
    pass


class LockedFibber(Fibber):
    """A Fibber holding a lock: it cannot travel to the leaves."""

    def __init__(self, scale):
        import threading
        super().__init__(scale)
        self.lock = threading.Lock()


# --- keyword arguments --------------------------------------------------------------
@spawn
def weighted_sum(lo, hi, *, scale=1, offset=0, nap=0.0):
    """sum(scale * i + offset for i in range(lo, hi)), children called with kwargs.

    Each call without children sleeps ``nap`` seconds: long enough, an idle leaf is
    sure to steal one of these calls, keywords and all."""
    if hi - lo <= 4:
        if nap:
            time.sleep(nap)
        return sum(scale * i + offset for i in range(lo, hi))
    mid = (lo + hi) // 2
    a = weighted_sum(lo, hi=mid, scale=scale, offset=offset, nap=nap)
    b = weighted_sum(lo=mid, hi=hi, nap=nap, offset=offset, scale=scale)
    return sum(sync(a, b))


# --- results of several types -------------------------------------------------------
@dataclass(frozen=True)
class Summary:
    count: int
    total: int
    low: int
    high: int


@spawn
def squares_list(lo, hi):
    if hi - lo <= 3:
        return [i * i for i in range(lo, hi)]
    mid = (lo + hi) // 2
    a, b = sync(squares_list(lo, mid), squares_list(mid, hi))
    return a + b


@spawn
def residues(lo, hi, m):
    """{r: how many i in [lo, hi) have i % m == r}."""
    if hi - lo <= 5:
        out = {}
        for i in range(lo, hi):
            out[i % m] = out.get(i % m, 0) + 1
        return out
    mid = (lo + hi) // 2
    a, b = sync(residues(lo, mid, m), residues(mid, hi, m))
    return {k: a.get(k, 0) + b.get(k, 0) for k in set(a) | set(b)}


@spawn
def cubes_array(lo, hi):
    if hi - lo <= 8:
        return np.arange(lo, hi, dtype=np.int64) ** 3
    mid = (lo + hi) // 2
    a, b = sync(cubes_array(lo, mid), cubes_array(mid, hi))
    return np.concatenate([a, b])


@spawn
def summarize(values):
    """A Summary of a tuple of ints."""
    if len(values) <= 3:
        return Summary(len(values), sum(values), min(values), max(values))
    mid = len(values) // 2
    a, b = sync(summarize(values[:mid]), summarize(values[mid:]))
    return Summary(a.count + b.count, a.total + b.total, min(a.low, b.low),
                   max(a.high, b.high))


# --- dependent spawns: later spawns use earlier results -------------------------------
@spawn(depth=1)
def affine(x):
    return 3 * x + 1


@spawn(depth=5)
def iterate_affine(x, steps):
    """Applies affine ``steps`` times; each call needs the previous result."""
    for _ in range(steps):
        x = sync(affine(x))
    return x


@spawn(depth=1)
def square(x):
    return x * x


@spawn(depth=5)
def two_stage(n):
    """Squares 0..n-1 in parallel, then squares each sum of neighbours."""
    first = [square(i) for i in range(n)]
    sync()
    values = [f.result() for f in first]
    second = [square(values[i] + values[i + 1]) for i in range(n - 1)]
    sync()
    return sum(f.result() for f in second)


def plain_two_stage(n):
    values = [i * i for i in range(n)]
    return sum((values[i] + values[i + 1]) ** 2 for i in range(n - 1))


# --- a fixed, countable number of tasks ---------------------------------------------
@spawn
def range_sum(lo, hi, nap=0.0):
    """sum(range(lo, hi)) by halving; with ``depth=k`` a run makes exactly 2**k tasks
    when hi - lo >= 2**k. ``nap`` seconds of sleep per call that has no children keep
    the leaves busy without burning the CPU."""
    if hi - lo <= 1:
        if nap:
            time.sleep(nap)
        return lo if hi > lo else 0
    mid = (lo + hi) // 2
    a, b = sync(range_sum(lo, mid, nap), range_sum(mid, hi, nap))
    return a + b


@spawn
def napping_sum(lo, hi, nap):
    """Like range_sum, but every call with hi - lo <= 8 sleeps ``nap`` once (tasks)."""
    if hi - lo <= 8:
        time.sleep(nap)
        return sum(range(lo, hi))
    mid = (lo + hi) // 2
    a, b = sync(napping_sum(lo, mid, nap), napping_sum(mid, hi, nap))
    return a + b


def plain_napping_sum(lo, hi, nap):
    """``napping_sum`` serially (the kernel of ``napping_sum_leaf``)."""
    if hi - lo <= 8:
        time.sleep(nap)
        return sum(range(lo, hi))
    mid = (lo + hi) // 2
    return plain_napping_sum(lo, mid, nap) + plain_napping_sum(mid, hi, nap)


@spawn(leaf=plain_napping_sum)
def napping_sum_leaf(lo, hi, nap):
    """``napping_sum`` with a ``leaf=`` kernel: the root expands it (automatic depth)."""
    if hi - lo <= 8:
        time.sleep(nap)
        return sum(range(lo, hi))
    mid = (lo + hi) // 2
    a, b = sync(napping_sum_leaf(lo, mid, nap), napping_sum_leaf(mid, hi, nap))
    return a + b


# --- failures -----------------------------------------------------------------------
@spawn
def divide_range(lo, hi, bad):
    """sum(100 // (i - bad) for i in range(lo, hi)) by halving: the task holding
    i == bad raises ZeroDivisionError."""
    if hi - lo == 1:
        return 100 // (lo - bad)
    mid = (lo + hi) // 2
    a, b = sync(divide_range(lo, mid, bad), divide_range(mid, hi, bad))
    return a + b


@spawn
def slow_divide(lo, hi, bad, nap):
    """divide_range whose calls without children sleep ``nap`` seconds first."""
    if hi - lo == 1:
        time.sleep(nap)
        return 100 // (lo - bad)
    mid = (lo + hi) // 2
    a, b = sync(slow_divide(lo, mid, bad, nap), slow_divide(mid, hi, bad, nap))
    return a + b


@spawn(depth=1)
def fail_or_sleep(i, secs):
    if i == 0:
        raise RuntimeError("task 0 fails at once")
    time.sleep(secs)
    return i


@spawn
def one_fails_others_sleep(n, secs):
    """Task 0 raises at once; tasks 1..n-1 sleep ``secs`` seconds."""
    futures = [fail_or_sleep(i, secs) for i in range(n)]
    sync()
    return sum(f.result() for f in futures)


@spawn
def fails_at_top(n):
    """Raises in the top frame after its tasks are solved (above the spawn depth)."""
    total = sync(fib(n))
    if total > 0:
        raise ValueError(f"top frame refuses total {total}")
    return total


@spawn
def fails_before_spawning(n):
    raise KeyError(f"no such key {n}")


class UnprintableError(ValueError):
    """An exception whose text cannot be had: ``str()`` of it raises."""

    def __str__(self):
        raise RuntimeError("no text for this error")


class Unrepresentable:
    """A picklable argument whose ``repr()`` raises."""

    def __repr__(self):
        raise RuntimeError("no repr for this argument")


@spawn(depth=1)
def fails_unprintably(n, tag=None):
    """Raises UnprintableError in the call with n == 0 (a task when n > 0)."""
    if n == 0:
        raise UnprintableError("lost text")
    return sync(fails_unprintably(n - 1, tag))


@spawn
def echo(value):
    return value


@spawn
def pass_to_child(value):
    return sync(echo(value))


def make_unpicklable(kind):
    import threading
    return (i for i in range(3)) if kind == "generator" else threading.Lock()


@spawn
def unpicklable_to_child(kind):
    """The top frame makes a generator or a lock and passes it to a task."""
    return sync(echo(1), echo(make_unpicklable(kind)))


@spawn
def returns_unpicklable(n):
    import threading
    if n == 0:
        return threading.Lock()
    return sync(returns_unpicklable(n - 1))


@spawn
def result_before_sync(n):
    f = fib(n)
    return f.result() + 1               # no sync: the value is not known on the root


@spawn
def sync_non_future(n):
    return sync(n)


@spawn
def sync_lists(n):
    """``sync`` of lists of futures: empty, one, ``n``; then of a list holding ``n``
    itself after a future (a SyncError naming it)."""
    if n < 0:
        return n
    kids = [sync_lists(0) for _ in range(n)]
    values = sync(kids), sync([sync_lists(-1)]), sync([])
    if n == 3:
        sync([sync_lists(-1), n])
    return values


_drift = itertools.count()


@spawn
def drifting(n):
    """Chooses its children's arguments with a module-level counter: every pass over
    the top of the recursion makes different calls."""
    k = next(_drift)
    a, b = sync(square(n + k), square(n))
    return a + b


# --- long runs for Ctrl-C and cleanup tests -------------------------------------------
@spawn(depth=1)
def slow_task(i, secs, mark):
    if mark:
        with open(mark, "a") as f:
            f.write(f"{os.getpid()}\n")
    time.sleep(secs)
    return i


@spawn(depth=5)
def naps(durations, mark=""):
    """One task per duration: task i sleeps durations[i] seconds."""
    futures = [slow_task(i, secs, mark) for i, secs in enumerate(durations)]
    sync()
    return sum(f.result() for f in futures)



# --- GPU leaves (numba's CUDA simulator in the tests) ----------------------------------
def count_batch_lazy(n, cols, d1, d2):
    """examples/nqueens_gpu.count_batch, imported inside the GPU leaf on first use."""
    from nqueens_gpu import count_batch
    return count_batch(n, cols, d1, d2)


@spawn(leaf=count_from_py, gpu_batch=count_batch_lazy)
def queens_gpu(n, cols, d1, d2):
    if cols == (1 << n) - 1:
        return 1
    futures = [queens_gpu(n, c, a, b) for c, a, b in children(n, cols, d1, d2)]
    sync()
    return sum(f.result() for f in futures)



@spawn(leaf="refleaf:count")
def queens_ref(n, cols, d1, d2):
    if cols == (1 << n) - 1:
        return 1
    futures = [queens_ref(n, c, a, b) for c, a, b in children(n, cols, d1, d2)]
    sync()
    return sum(f.result() for f in futures)


# --- branches that spawn after a sync, at their own pace --------------------------------
@spawn(depth=2)
def timed_stage(kind, nap):
    """A task: sleeps ``nap`` seconds; returns ``(kind, start, end)`` (``time.time()``)."""
    start = time.time()
    time.sleep(nap)
    return kind, start, time.time()


@spawn(depth=2)
def two_step_branch(nap):
    """A first task, then a second one spawned only after the first's result is in."""
    first = sync(timed_stage("first", nap))
    second = sync(timed_stage("second", 0.0))
    return first, second


@spawn(depth=2)
def slow_and_fast_branches(nap):
    """Two branches of two steps each; the first branch's first step sleeps ``nap``."""
    slow, fast = two_step_branch(nap), two_step_branch(0.0)
    sync()
    return slow.result(), fast.result()


@spawn
def raises_an_unpicklable_exception(n):
    """Raises an exception of a class made at run time, which pickle cannot name: the
    failure is reported without the object."""
    cls = type("LeafOnlyError", (Exception,), {"__module__": "no_such_module"})
    raise cls(f"made on the leaf: {n}")


_kept_futures: list = []


@spawn(depth=1)
def keeps_a_future(n):
    """Keeps the first pending future it makes (a mistake: futures belong to a run)."""
    f = square(n)
    if not _kept_futures:
        _kept_futures.append(f)
    return sync(f)


@spawn(depth=1)
def syncs_a_kept_future(n):
    """Syncs on a future kept from another run: no task of this run produces it."""
    sync(square(n))
    return sync(_kept_futures[0])


@spawn
def nap_marked(ms, mark):
    """Sleeps ``ms`` (the leaves' work), writing its pid to ``mark`` first."""
    import os
    import time
    with open(mark, "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(ms / 1000.0)
    return 1


@spawn(depth=1)
def naps_marked(n, ms, mark):
    return sum(sync(*[nap_marked(ms, mark) for _ in range(n)]))


# --- the top is a task (no replay) ------------------------------------------------------
def _value_of(x):
    """What ``valued`` computes for ``x`` (checked against the run's answer)."""
    return round(x * 1000003) % 997


@spawn
def valued(x, nap):
    time.sleep(nap)
    return _value_of(x)


@spawn
def random_top(k, nap):
    """Draws ``k`` random numbers at the top and spawns one call on each: replayed, the
    top would draw other numbers (``ReplayMismatchError``); run once, the answer holds
    the numbers drawn and their values, which must agree."""
    import random
    picks = [random.random() for _ in range(k)]
    return picks, sync([valued(x, nap) for x in picks])


@spawn
def marked_frames(depth, path, mark):
    """A binary tree whose every frame appends ``<path> <pid>`` to ``mark`` before it
    spawns (a side effect in every frame: each must happen exactly once)."""
    with open(mark, "a") as f:
        f.write(f"{path or 'top'} {os.getpid()}\n")
    if depth == 0:
        time.sleep(0.002)
        return 1
    a, b = sync(marked_frames(depth - 1, path + "0", mark),
                marked_frames(depth - 1, path + "1", mark))
    return 1 + a + b


@spawn
def long_nap(seconds):
    """One task that spawns nothing: every other leaf waits for work all along."""
    time.sleep(seconds)
    return seconds


@spawn
def waits_for_stolen(nap):
    """Spawns ``long_nap(nap)`` and naps 0.3 s, so the other leaf splits it off; then
    waits at ``sync`` for it with nothing else to run."""
    f = long_nap(nap)
    time.sleep(0.3)
    return sync(f)


# --- what a leaf imports ----------------------------------------------------------------
ROOT_SIDE_MODULES = ("dac.runtime", "dac.driving", "dac.expansion", "stealing.roles.root",
                     "stealing.roles.router", "stealing.roles.node", "stealing.tree.policy",
                     "stealing.tree.topology", "stealing.transport.spawning", "json",
                     "shutil", "tempfile",
                     "secrets")     # (5 ms of a spawned process's 35 ms of imports)


@spawn
def modules_loaded(names):
    """Which of ``names`` the process running this call has imported, with its pid."""
    import sys
    return os.getpid(), sorted(n for n in names if n in sys.modules)


def _mark(mark, path, kind):
    with open(mark, "a") as f:
        f.write(f"{path or 'top'} {os.getpid()} {kind}\n")


def marked_leaf_kernel(depth, path, mark):
    """The ``leaf=`` function of ``marked_leafy``: the subtree's count, marked once."""
    _mark(mark, path, "leaf")
    time.sleep(0.005)
    return 2 ** (depth + 1) - 1


@spawn(leaf=marked_leaf_kernel)
def marked_leafy(depth, path, mark):
    """``marked_frames`` with a ``leaf=`` function: frames above the grain mark
    ``fn``, calls at it run the kernel, which marks ``leaf``."""
    _mark(mark, path, "fn")
    if depth == 0:
        return 1
    a, b = sync(marked_leafy(depth - 1, path + "0", mark),
                marked_leafy(depth - 1, path + "1", mark))
    return 1 + a + b


def _three_left(depth, path, mark):
    return depth <= 3


@spawn(cutoff=_three_left)
def marked_cut(depth, path, mark):
    """``marked_frames`` with a ``cutoff=``: calls with 3 levels or fewer below them
    are the grain; everything under a grain call runs where it did, serially."""
    _mark(mark, path, "fn")
    if depth == 0:
        time.sleep(0.003)
        return 1
    a, b = sync(marked_cut(depth - 1, path + "0", mark),
                marked_cut(depth - 1, path + "1", mark))
    return 1 + a + b


@spawn(leaf=marked_leaf_kernel)
def random_leafy(k, mark):
    """``random_top`` for a function with a ``leaf=`` function: the top draws ``k``
    numbers and spawns on each a call whose kernel marks it."""
    import random
    picks = [random.random() for _ in range(k)]
    return picks, sync([marked_leafy(2, f"{x!r}", mark) for x in picks])


@spawn
def module_origin(name):
    """Where a leaf finds the top-level module ``name`` (None: nowhere)."""
    spec = importlib.util.find_spec(name)
    return None if spec is None else spec.origin


@spawn
def environment_variable(name):
    """The value of ``name`` in a leaf's environment (None: unset)."""
    return os.environ.get(name)


# --- the interpreter's frame stack (stealing.host.stack.on_fresh_stack) ----------------------
def _bottom():
    return 0


def _descend(d, n):
    if d:
        return _descend(d - 1, n)
    for _ in range(n):
        _bottom()
    return 0


def chunk_faults(depths=400, n=200):
    """The most page faults one of ``depths`` recursions (0 to depths - 1 deep) took
    for calling a function ``n`` times at its bottom: about ``n`` where that call
    crosses the end of the interpreter's 16 KiB frame chunk (each call maps a fresh
    chunk, and unmaps it on return), a few elsewhere."""
    import resource
    worst = 0
    for d in range(depths):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        _descend(d, n)
        worst = max(worst, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return worst


@spawn
def chunk_faults_in_a_task(depths, n):
    return chunk_faults(depths, n)


@spawn
def fresh_stack_now(nap):
    """Whether this call runs on a fresh stretch of the frame stack (``on_fresh_stack``
    is among its callers), after a nap of ``nap`` seconds."""
    from stealing.host.stack import on_fresh_stack
    time.sleep(nap)
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code is on_fresh_stack.__code__:
            return True
        frame = frame.f_back
    return False


# --- a thief's task at its grain gets the defaults its call travelled without ---------
def times_k(n, k):
    """A kernel that takes every parameter (no defaults, as a numba kernel may)."""
    time.sleep(0.05)
    return n * k


@spawn(leaf=times_k, cutoff=lambda n, k=10: n < 100)
def scaled(n, k=10):
    """``scaled(1000)``: 16 calls at the grain, each given ``k`` explicitly (the
    default's own object, 10): 1200."""
    if n >= 100:
        return sum(sync([scaled(i, 10) for i in range(16)]))
    return n * k
