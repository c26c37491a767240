"""@spawn programs whose tasks spawn stealable children (``dac.stealable``).

Most use ``depth=0``: the root hands the whole call to one leaf as a single task, so
any other leaf gets work only by splitting that task's spawns. They live in an
importable module so that the leaves import them by reference.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from dac import object_state, spawn, sync


@spawn(depth=0)
def sleep_tree(depth: int, ms: float) -> int:
    """A balanced binary tree of ``2**depth`` sleeps of ``ms``: returns how many."""
    if depth == 0:
        time.sleep(ms / 1000.0)
        return 1
    a = sleep_tree(depth - 1, ms)
    b = sleep_tree(depth - 1, ms)
    return sum(sync(a, b))


@spawn(depth=0)
def sleep_spine(n: int, ms: float) -> int:
    """A spine: each level sleeps ``ms`` beside the rest of the spine; returns n."""
    if n == 0:
        return 0
    a, b = sync(nap(ms), sleep_spine(n - 1, ms))
    return a + b


@spawn
def nap(ms: float) -> int:
    time.sleep(ms / 1000.0)
    return 1


@spawn(depth=0)
def busy_tree(depth: int, loops: int) -> int:
    """A binary tree of small CPU loops (the sum of ``range(loops)`` at each of its
    ``2**depth`` leaves), written with ``sync()`` and ``result()``."""
    if depth == 0:
        return sum(range(loops))
    kids = [busy_tree(depth - 1, loops) for _ in range(2)]
    sync()
    return kids[0].result() + kids[1].result()


def plain_busy_tree(depth: int, loops: int) -> int:
    return (2 ** depth) * sum(range(loops))


@spawn(depth=0)
def merge_sort(a: np.ndarray, ms: float = 0.0) -> np.ndarray:
    """Merge sort with the merge done in the frame that spawned the two halves (the
    leaf that owns the frame, whichever leaves sorted the halves)."""
    if a.size <= 64:
        if ms:
            time.sleep(ms / 1000.0)
        return np.sort(a, kind="stable")
    mid = a.size // 2
    left, right = sync(merge_sort(a[:mid], ms), merge_sort(a[mid:], ms))
    out = np.empty(a.size, a.dtype)
    i = j = 0
    for k in range(a.size):          # the combine step, in Python, where the frame is
        if j >= right.size or (i < left.size and left[i] <= right[j]):
            out[k] = left[i]
            i += 1
        else:
            out[k] = right[j]
            j += 1
    return out


@spawn(depth=0)
def deepening(limit: int, ms: float) -> list:
    """Spawns that depend on earlier results (spawn after sync): each round's width is
    the previous round's total mod 5, plus 2; returns every round's total."""
    totals = []
    width = 2
    for _ in range(limit):
        parts = [nap_value(i, ms) for i in range(width)]
        sync()
        total = sum(p.result() for p in parts)
        totals.append(total)
        width = total % 5 + 2
    return totals


@spawn
def nap_value(i: int, ms: float) -> int:
    time.sleep(ms / 1000.0)
    return i * i + 1


def plain_deepening(limit: int) -> list:
    totals, width = [], 2
    for _ in range(limit):
        total = sum(i * i + 1 for i in range(width))
        totals.append(total)
        width = total % 5 + 2
    return totals


@spawn(depth=0)
def even(n: int, ms: float) -> bool:
    """Mutual recursion through two @spawn functions, each level beside a nap; only
    ``even`` is in the job's table (``odd`` travels with the split work)."""
    if n == 0:
        return True
    a, b = sync(odd(n - 1, ms), nap(ms))
    return a


@spawn
def odd(n: int, ms: float) -> bool:
    if n == 0:
        return False
    a, b = sync(even(n - 1, ms), nap(ms))
    return a


@dataclass(frozen=True)
class Pair:
    left: object
    right: object


@spawn(depth=0)
def shapes(depth: int, ms: float):
    """Results of several types travel back from stolen children: ints, strings,
    tuples, dicts, NumPy arrays and a dataclass of this module."""
    if depth == 0:
        time.sleep(ms / 1000.0)
        return 1
    a, b, c, d = sync(shapes(depth - 1, ms), as_text(depth, ms), as_array(depth, ms),
                      as_dict(depth, ms))
    return Pair((a, b), (c.tolist(), d))


@spawn
def as_text(depth, ms):
    time.sleep(ms / 1000.0)
    return f"level {depth}"


@spawn
def as_array(depth, ms):
    time.sleep(ms / 1000.0)
    return np.arange(depth, dtype=np.int64)


@spawn
def as_dict(depth, ms):
    time.sleep(ms / 1000.0)
    return {"depth": depth, "half": depth / 2}


def plain_shapes(depth: int):
    if depth == 0:
        return 1
    return Pair((plain_shapes(depth - 1), f"level {depth}"),
                (list(range(depth)), {"depth": depth, "half": depth / 2}))


@dataclass(frozen=True)
class Knobs:
    ms: float
    label: str = "knobs"


@spawn(depth=0)
def knob_tree(depth: int, knobs: Knobs) -> tuple:
    """(nodes, nodes whose ``knobs`` kept its inline values before their spawns,
    ... after their sync) of a binary tree of naps, each node passing on the object
    it was given (``dac.object_state``: a task's argument, and the sender's object
    once it sent a copy to a thief)."""
    time.sleep(knobs.ms / 1000.0)
    before = int(object_state.has_inline_values(knobs))
    if depth == 0:
        return 1, before, before
    (n1, b1, a1), (n2, b2, a2) = sync(knob_tree(depth - 1, knobs),
                                      knob_tree(depth - 1, knobs))
    after = int(object_state.has_inline_values(knobs))
    return 1 + n1 + n2, before + b1 + b2, after + a1 + a2


class Boom(ValueError):
    pass


@spawn(depth=0)
def fails_deep(depth: int, bad: int, ms: float) -> int:
    """A binary tree of naps in which leaf number ``bad`` raises Boom."""
    return _fails(depth, 0, bad, ms)


@spawn
def _fails(depth: int, index: int, bad: int, ms: float) -> int:
    if depth == 0:
        time.sleep(ms / 1000.0)
        if index == bad:
            raise Boom(f"leaf {index} of the tree failed")
        return 1
    a, b = sync(_fails(depth - 1, 2 * index, bad, ms),
                _fails(depth - 1, 2 * index + 1, bad, ms))
    return a + b


@spawn(depth=0)
def deep_spine(n: int) -> int:
    """A spine ``n`` levels deep, each level beside a tiny spawn: deeper than Python's
    default recursion limit (the script raises it; leaves follow the root's limit)."""
    if n == 0:
        return 0
    a, b = sync(one(), deep_spine(n - 1))
    return a + b


@spawn
def one() -> int:
    return 1


@spawn
def ident(i: int) -> int:
    return i


@spawn(depth=0)
def fan_and_watch(n: int, ctx, peak: list) -> int:
    """Spawns ``ident(0..n-1)``, noting the length of ``ctx``'s deque after each
    spawn in ``peak``; returns their sum (run in-process, on a StealableContext)."""
    futures = []
    for i in range(n):
        futures.append(ident(i))
        peak.append(len(ctx.deque))
    sync()
    return sum(f.result() for f in futures)


@spawn(depth=0)
def fan_of_naps(n: int, ms: float) -> int:
    """``n`` naps spawned at once, then synced: returns n."""
    futures = [nap(ms) for _ in range(n)]
    sync()
    return sum(f.result() for f in futures)


@spawn(depth=0)
def fan_then_split(n: int, ctx, stolen: list) -> int:
    """Spawns ``ident(0..n-1)``, lets a thief ask ``ctx`` for 2 of them, answers the
    stolen calls itself (as their thief would: results through ``deliver``), and
    returns the sum (run in-process, on a StealableContext)."""
    return _spawn_and_pay(n, ctx, stolen)


def _spawn_and_pay(n: int, ctx, stolen: list) -> int:
    """``fan_then_split``'s body (a plain function: its spawns are its caller's)."""
    from dac.serialize import dumps, loads
    futures = [ident(i) for i in range(n)]
    stolen.extend(ctx.split(2))
    ctx.deliver([(tid, dumps(loads(payload)[3][0], "a result"))
                 for tid, payload in stolen])
    sync()
    return sum(f.result() for f in futures)


@spawn(depth=0)
def fan_split_off(n: int, ctx, stolen: list, form: str) -> int:
    """Spawns ``ident(0..n-1)``, lets a thief take what ``ctx.split(n)`` gives (kept
    in ``stolen``, for the worker's ``wait`` to answer), then syncs them all in
    ``form``: ``"list"`` (``sync(futures)``) or ``"all"`` (``sync()``); their sum."""
    futures = [ident(i) for i in range(n)]
    stolen.extend(ctx.split(n))
    if form == "list":
        return sum(sync(futures))
    sync()
    return sum(f.result() for f in futures)


def _one(depth: int, i: int) -> int:
    return 1


@spawn(leaf=_one)
def counted(depth: int, i: int) -> int:
    """A call of a ``leaf=`` function below the top: a binary tree ``depth`` deep,
    whose calls at the grain count 1 (the kernel) as the body would not."""
    if depth == 0:
        return 1
    a, b = sync(counted(depth - 1, 2 * i), counted(depth - 1, 2 * i + 1))
    return a + b


@spawn(leaf=_one)
def split_while_counting(n: int, ctx, log: list) -> int:
    """The top of a ``leaf=`` function: spawns ``counted(4, i)`` for i < n, a thief
    asking ``ctx`` for work after the second (run in-process, on a StealableContext
    whose worker answers what it is paid, as the thief would)."""
    futures = []
    for i in range(n):
        futures.append(counted(4, i))
        if i == 1:
            log.append(ctx.split(1))
    sync()
    return sum(f.result() for f in futures)


@spawn(depth=0)
def sync_forms(n: int) -> tuple:
    """Every form of ``sync`` a leaf takes, each over entries made just before it:
    two, three, one future; a list, a tuple, a generator, an empty list; then
    ``sync()`` (with ``result()``) and a list holding something else."""
    two = sync(ident(1), ident(2))
    three = sync(ident(3), ident(4), ident(5))
    one = sync(ident(6))
    as_list = sync([ident(i) for i in range(n)])
    as_tuple = sync(tuple(ident(i) for i in range(n)))
    as_generator = sync(ident(i) for i in range(n))
    empty = sync([])
    kids = [ident(7), ident(8)]
    sync()
    return two, three, one, as_list, as_tuple, as_generator, empty, \
        [k.result() for k in kids]


@spawn(depth=0)
def sync_mistake(form: str):
    """``sync`` given something that is not a future, in the form ``form``."""
    f = ident(1)
    if form == "list":
        return sync([f, 2])
    if form == "pair":
        return sync(f, "two")
    return sync(3)


@spawn(depth=0)
def fan_tree(width: int, depth: int) -> int:
    """A tree ``width`` wide at every level, ``depth`` deep, each child spawned:
    returns its leaves, ``width ** depth``."""
    if depth == 0:
        return 1
    return sum(sync([fan_tree(width, depth - 1) for _ in range(width)]))


@spawn(depth=0)
def lopsided(n: int) -> int:
    """fib's shape: the older spawn (``n - 1``) holds more work than the newer one
    (``n - 2``), which ``sync`` runs first; returns fib(n + 1)."""
    if n < 2:
        return 1
    a, b = sync(lopsided(n - 1), lopsided(n - 2))
    return a + b


@spawn(depth=0)
def binary(depth: int) -> int:
    """A binary tree ``depth`` deep, both halves spawned: returns 2**depth."""
    if depth == 0:
        return 1
    a, b = sync(binary(depth - 1), binary(depth - 1))
    return a + b


@spawn
def where(depth: int, seen: list) -> int:
    """A binary tree ``depth`` deep whose leaves note the context they run in: its
    class's name, and whether it stands in for a leaf's (``dac.stealable``'s
    ``below``)."""
    if depth == 0:
        from dac.context import current
        current = current()
        seen.append((type(current).__name__, getattr(current, "leaf", None) is not None))
        return 1
    a, b = sync(where(depth - 1, seen), where(depth - 1, seen))
    return a + b


LEAF_CALLS: list[int] = []


def count_leaf(n: int) -> int:
    LEAF_CALLS.append(n)
    return 1


@spawn(cutoff=lambda n: n <= 2, leaf=count_leaf)
def graded(n: int) -> int:
    """2**n by its body; a call at its grain (n <= 2) runs ``count_leaf``: 1."""
    if n == 0:
        return 1
    a, b = sync(graded(n - 1), graded(n - 1))
    return a + b


@spawn
def chain_to(levels: int, n: int, nap_s: float = 0.0) -> int:
    """``levels`` spawns one below the other, then ``graded(n)`` (or a nap of
    ``nap_s`` seconds, returning 0)."""
    if levels == 0:
        if nap_s:
            time.sleep(nap_s)
            return 0
        return sync(graded(n))
    return sync(chain_to(levels - 1, n, nap_s))


@spawn
def timers(fd: int, seen: list) -> int:
    """Note the clock's period and whether ``fd`` signals (``O_ASYNC``) while the
    task runs."""
    import fcntl
    import signal
    seen.append((signal.getitimer(signal.ITIMER_REAL)[1],
                 bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ASYNC)))
    return 1


@spawn
def slow_chain(levels: int, fd: int, seen: list) -> int:
    """``levels`` spawns one below the other, 3 ms apart, then ``timers``."""
    if levels == 0:
        return sync(timers(fd, seen))
    time.sleep(0.003)
    return sync(slow_chain(levels - 1, fd, seen))


@spawn
def nap_after_ring(levels: int, ring, nap: float, out: dict) -> int:
    """``levels`` spawns one below the other, slow ones: the last but one spawns
    two calls (something a thief could take), rings the leaf's doorbell, naps
    ``nap`` seconds (``out["woke"]``: when it woke), then spawns the last."""
    if levels == 0:
        return 0
    if levels == 1:
        a, b = one_more(0), one_more(1)
        ring()
        time.sleep(nap)
        out["woke"] = time.perf_counter()
        return sync(a) + sync(b) - 2 + sync(nap_after_ring(0, ring, nap, out))
    time.sleep(0.003)
    return 1 + sync(nap_after_ring(levels - 1, ring, nap, out))


@spawn
def slow_comb(levels: int, ms: float) -> int:
    """``levels`` spawns one below the other, ``ms`` apart, each beside a call that
    waits on the deque until the end (something a thief could take): ``levels``."""
    if levels == 0:
        return 0
    a = one_more(0)
    time.sleep(ms / 1000.0)
    return sync(slow_comb(levels - 1, ms)) + sync(a)


@spawn
def slow_then_fast(levels: int, ms: float, depth: int, ctx, seen: list) -> int:
    """``slow_comb``, then ``where`` (fast spawns): the leaf's spawns between two
    polls (``ctx.interval``) after each."""
    got = sync(slow_comb(levels, ms))
    seen.append(ctx.interval)
    got += sync(where(depth, []))
    seen.append(ctx.interval)
    return got


@spawn
def one_more(x: int) -> int:
    """A task that spawns nothing (as a thief's task of one UTS node)."""
    return x + 1


@spawn
def ring_then_descend(levels: int, ring, worker, out: list, ctx) -> int:
    """At the task's top (its leaf's own context ``ctx``, thousands of spawns before
    its next poll by count, the last one just made) ``ring()`` the doorbell and wait
    for the signal; then ``levels`` nested calls down, past the horizon, where plain
    calls spin until the worker polls again (or half a second): ``out`` gets the
    seconds from the end of that wait to the poll."""
    if not out:
        ctx.countdown = 1 << 12
        polls = len(worker.polled)
        ring()
        time.sleep(0.01)            # the signal is taken here (the leaf's own context)
        ctx.last_poll = time.perf_counter()     # as if it had just polled by count
        out[:] = [ctx.last_poll, polls]
    if levels:
        return sync(ring_then_descend(levels - 1, ring, worker, out, ctx))
    while len(worker.polled) == out[1] and time.perf_counter() - out[0] < 0.5:
        one_more(0)                 # a plain call below the horizon
    out[:] = [worker.polled[out[1]] - out[0] if len(worker.polled) > out[1] else None]
    return 1



@spawn
def owe_then_fan(n: int, ctx, stolen: list) -> int:
    """A task run nested in a waiting one on ``ctx``: a thief asks before it has
    spawned anything (owed: every spawn an entry, the clock paused), then it spawns
    ``ident(0..n-1)`` and the thief takes 2 of them (``stolen``), whose results it
    delivers itself, as their thief would; the sum."""
    assert ctx.split(1) == []
    return _spawn_and_pay(n, ctx, stolen)


@spawn
def wait_then_descend(n: int, st: dict) -> int:
    """The top call (``n`` levels) spawns one child, which a thief takes from the
    leaf's context (``st["ctx"]``; its sync then waits: ``st["worker"].wait``), then
    goes ``n`` calls down, past the horizon, where plain calls spin until the
    worker polls (or half a second): ``st["waited"]`` the seconds from the end of
    the wait to that poll, None if none came."""
    if n < 0:
        return 0
    if "t" not in st:
        a = wait_then_descend(-1, st)
        st["stolen"].extend(st["ctx"].split(1))
        sync(a)
        st["polls"] = len(st["worker"].polled)
        st["t"] = time.perf_counter()
        st["ctx"].last_poll = st["t"]           # as if it had just polled
    if n:
        return sync(wait_then_descend(n - 1, st))
    while len(st["worker"].polled) == st["polls"] and time.perf_counter() - st["t"] < 0.5:
        sync(wait_then_descend(-1, st))         # a plain call below the horizon
    polled = st["worker"].polled
    st["waited"] = polled[st["polls"]] - st["t"] if len(polled) > st["polls"] else None
    return 1


@spawn
def ring_when_routed(n: int, st: dict) -> int:
    """A binary recursion ``n`` deep on a leaf with a doorbell (``st``: its context,
    ``ring``, ``worker``). The first bottom call that runs in the leaf's own context
    (a spawn of the fast clone, routed there after a tick woke the task below its
    horizon) rings and waits for the signal, then returns to the clone's frames;
    from then on the calls stop recursing once the worker polled or half a second
    passed (``st["t"]``: when that call returned)."""
    if "t" in st:
        if len(st["worker"].polled) > st["polls"] or time.perf_counter() - st["t"] > 0.5:
            return 0
    elif n == 0 and _context_now() is st["ctx"]:
        st["polls"] = len(st["worker"].polled)
        st["ring"]()
        time.sleep(0.01)            # the signal is taken here (the leaf's own context)
        st["ctx"].last_poll = time.perf_counter()   # as if it had just polled
        st["t"] = time.perf_counter()
        return 1
    if n == 0:
        return 1
    a = ring_when_routed(n - 1, st)
    b = ring_when_routed(n - 1, st)
    return sync(a) + sync(b)


def _context_now():
    from dac.context import current
    return current()


SPLITTER: dict = {}     # the leaf's context a program splits (an in-process test's)


@spawn
def chain_then_fan(chain: int, depth: int, width: int) -> int:
    """``chain`` levels of one call each, then a tree ``depth`` deep of ``width``
    calls a node, each level a comprehension of spawns: its leaves (``width **
    depth``). At the first leaf, a thief's split of ``SPLITTER["ctx"]`` (its deque
    is empty there: every level above holds one call, started) is kept in
    ``SPLITTER["taken"]``."""
    if chain:
        return sum(sync([chain_then_fan(chain - 1, depth, width) for _ in range(1)]))
    if depth == 0:
        if "taken" not in SPLITTER:
            SPLITTER["taken"] = SPLITTER["ctx"].split(1)
        return 1
    return sum(sync([chain_then_fan(0, d, width) for d in [depth - 1] * width]))


@spawn
def binary_asked(depth: int, at: tuple) -> int:
    """``binary(depth)`` whose leaves, counted in the order they run, ask
    ``SPLITTER["ctx"]`` for a split at the counts in ``at`` (as a thief's request
    that reached the leaf then); what each split took goes to ``SPLITTER["sizes"]``
    and the tasks to ``SPLITTER["taken"]``."""
    if depth == 0:
        n = SPLITTER["leaves"] = SPLITTER.get("leaves", 0) + 1
        if n in at:
            taken = SPLITTER["ctx"].split(1)
            SPLITTER.setdefault("sizes", []).append(len(taken))
            SPLITTER.setdefault("taken", []).extend(taken)
        return 1
    a, b = sync(binary_asked(depth - 1, at), binary_asked(depth - 1, at))
    return a + b


@spawn
def fails(k: int, log: list) -> int:
    log.append(k)
    raise ValueError(f"call {k} failed")


@spawn
def catches_its_sync(log: list) -> str:
    """A ``sync`` of two calls that both raise, caught: at the top of a task both are
    entries, and the newest runs first."""
    try:
        sync(fails(1, log), fails(2, log))
    except ValueError as e:
        return str(e)
    return "nothing raised"


@spawn
def level_around_a_catch(log: list) -> tuple:
    """The level and scope of ``SPLITTER["ctx"]`` before and after a caught ``sync``."""
    ctx = SPLITTER["ctx"]
    before = (ctx.level, ctx.base)
    try:
        sync(fails(1, log), fails(2, log))
    except ValueError:
        pass
    return before, (ctx.level, ctx.base)
