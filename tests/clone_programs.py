"""Programs for the fast clone's tests (``dac.clone``): bodies that get a clone, and
bodies refused one, each for one reason."""

from __future__ import annotations

import sys

import dac
from dac import latent, spawn, sync


def clone_frame() -> bool:
    """True where the caller runs its function's fast clone (a code object other
    than the body's own)."""
    frame = sys._getframe(1)
    body = frame.f_globals[frame.f_code.co_name].__wrapped__
    return frame.f_code is not body.__code__


@spawn
def fib(n: int) -> int:
    if n < 2:
        return n
    a = fib(n - 1)
    b = fib(n - 2)
    x, y = sync(a, b)
    return x + y


@spawn
def below(n: int) -> tuple[int, int]:
    """A binary tree ``n`` deep: (its leaves, those that ran as the clone)."""
    if n == 0:
        return 1, int(clone_frame())
    x, y = sync(below(n - 1), below(n - 1))
    return x[0] + y[0], x[1] + y[1]


@spawn
def kids(n: int) -> int:
    """The nodes of a tree whose node ``n`` has ``n`` children ``0 .. n-1``: 2**n."""
    return 1 + sum(sync([kids(i) for i in range(n)]))


@spawn
def appended(n: int, seen: list) -> int:
    """``kids`` again, its futures appended to a list one by one, ``dac.sync`` named
    through the module, and a ``sync()`` that waits for nothing left."""
    if n == 0:
        seen.append(clone_frame())
        return 1
    group = []
    for i in range(n):
        group.append(appended(i, seen))
    appended(0, seen)
    dac.sync()
    return 1 + sum(dac.sync(group))


@spawn
def frames(n: int, seen: list) -> int:
    """A chain ``n`` deep whose bottom notes how many frames of ``frames`` are above it."""
    if n == 0:
        frame, count = sys._getframe(), 0
        while frame is not None:
            count += frame.f_code.co_name == "frames"
            frame = frame.f_back
        seen.append(count)
        return 0
    return sync(frames(n - 1, seen)) + 1


@spawn
def results(n: int) -> int:
    """``kids`` again, read as ``examples/uts.py`` once did: ``sync()``, then a loop
    over the futures calling ``.result()``, and one future read so too."""
    if n == 0:
        return 1
    futures = [results(i) for i in range(n - 1)]
    last = results(n - 1)
    dac.sync()
    total = sum(f.result() for f in futures)
    for f in futures:
        total += 0 * f.result()
    return 1 + total + last.result()


# --- refused, each for the reason in its name ------------------------------------
@spawn
def reads_result(n: int) -> int:
    return 0 if n == 0 else reads_result(n - 1).result() + 1


@spawn
def asks_done(n: int) -> int:
    if n == 0:
        return 0
    a = asks_done(n - 1)
    dac.sync()
    return a.result() + 1 if a.done() else -1


@spawn
def loop_name_kept(n: int) -> int:
    if n == 0:
        return 0
    futures = [loop_name_kept(n - 1)]
    for f in futures:
        kept = f
    return sync(kept) + 1


@spawn
def calls_another(n: int) -> int:
    return 0 if n == 0 else sync(fib(n)) + sync(calls_another(n - 1))


@spawn
def returns_a_future(n: int) -> object:
    return 0 if n == 0 else returns_a_future(n - 1)


@spawn
def prints_a_future(n: int) -> int:
    if n == 0:
        return 0
    a = prints_a_future(n - 1)
    print(a)
    return sync(a)


@spawn
def syncs_starred(n: int) -> int:
    return 0 if n == 0 else sync(*[syncs_starred(n - 1)]) + 1


@spawn
def holds_a_lambda(n: int) -> int:
    return 0 if n == 0 else max(sync([holds_a_lambda(n - 1)]), key=lambda v: -v)


@spawn(cutoff=lambda n: n < 6)
def grain_below(n: int) -> tuple[int, int]:
    """``below`` with its grain set 6 levels above the bottom: nested calls there are
    plain calls, so the clone runs them."""
    if n == 0:
        return 1, int(clone_frame())
    x, y = sync(grain_below(n - 1), grain_below(n - 1))
    return x[0] + y[0], x[1] + y[1]


FUTURES: list = []


@spawn
def keeps_a_global(n: int) -> int:
    global FUTURES
    if n == 0:
        return 0
    FUTURES = [keeps_a_global(n - 1)]
    return sync(FUTURES)[0] + 1


def closure() -> object:
    @spawn
    def inner(n: int) -> int:
        return n
    return inner


@spawn
def pairs_fanned(n: int, width: int) -> int:
    """A tree of ``width ** n`` leaves whose calls come from a comprehension over
    tuples (a batch whose target is a tuple of names): how many leaves."""
    if n == 0:
        return 1
    return sum(sync([pairs_fanned(m, w) for m, w in [(n - 1, width)] * width]))


@spawn
def filtered(n: int) -> int:
    """``kids`` through comprehensions a batch does not take: a condition, two
    loops, one inside another comprehension (their calls run as written)."""
    if n == 0:
        return 1
    a = sum(sync([filtered(i) for i in range(n) if i >= 0]))
    b = sum(sync([filtered(i) for i in range(n) for _ in range(1)]))
    c = sum([sum(sync([filtered(i) for i in range(j, j + 1)])) for j in range(n)])
    assert a == b == c
    return 1 + a


@spawn
def caught_below(n: int, seen: list) -> int:
    """A comprehension of spawns whose deepest call raises, caught two levels up:
    the batch it left behind is dropped by the next batch to end under it."""
    if n == 0:
        raise ValueError("at the bottom")
    if n == 2:
        try:
            sync([caught_below(n - 1, seen) for _ in range(2)])
        except ValueError:
            seen.append(len(latent.BATCHES))
        return 0
    return sum(sync([caught_below(n - 1, seen) for _ in range(2)]))


@spawn
def batches_seen(n: int, seen: list) -> int:
    """A binary tree of ``2 ** n`` leaves, each noting how many batches are on the
    process's stack as it runs (``dac.latent``)."""
    if n == 0:
        seen.append(len(latent.BATCHES))
        return 1
    return sum(sync([batches_seen(m, seen) for m in [n - 1] * 2]))


def in_a_thread(n: int, seen: list) -> int:
    """``batches_seen(n, seen)`` run in a thread of its own; its value."""
    import threading
    out: list = []
    thread = threading.Thread(target=lambda: out.append(batches_seen(n, seen)))
    thread.start()
    thread.join()
    return out[0]


@spawn
def appends_while_looping(n: int) -> int:
    """How many values the loop over ``sync(kids)`` sees at each level (2), while its
    body spawns more into ``kids``: the loop runs over the values ``sync`` returned,
    not the list the body grows (a clone that ran over ``kids`` itself would not
    end)."""
    if n == 0:
        return 1
    kids = [appends_while_looping(n - 1) for _ in range(2)]
    seen = 0
    for _value in sync(kids):
        seen += 1
        kids.append(appends_while_looping(0))
    return seen


@spawn
def sums_over_kids(n: int) -> int:
    """``2 ** n`` by a loop over ``sync(kids)`` whose body does not name ``kids``
    (the clone runs over ``kids`` itself, with no copy)."""
    if n == 0:
        return 1
    kids = [sums_over_kids(n - 1) for _ in range(2)]
    total = 0
    for value in sync(kids):
        total += value
    return total
