"""Latent calls: the unstarted spawns of a fast clone's list comprehension.

A fast clone (``dac.clone``) runs a spawn as a plain call, so a comprehension of
spawns runs its first call's whole subtree before its later calls even exist: on a
leaf whose task has gone below its horizon, the unstarted siblings along the running
path are calls not yet made, and a thief that asked got only what the leaf spawned
after it asked (UTS T3, in its deep and narrow tail: a node or a few a split, the
thief idle a tenth of the job). Lazy task creation makes those siblings stealable
without making them tasks. A comprehension of spawns in a clone,
``[f(a, x) for x in xs]``, runs over a list of its items registered on this
process's stack of *batches* (``BATCHES``), with the values of the function's locals
its calls read (``a``); a thief takes the last unstarted items of the oldest batches
(the shallowest: ``StealableContext.split``), makes their calls' arguments with the
comprehension's own expressions (a function written beside the clone), and the
batch, once it has run the rest, waits for their values.

The thief's share is cut off the end of the list, which the comprehension's
iterator has not reached: a list iterator reads the list's length at each step, and
an item it has handed out is started (``__length_hint__`` counts those it has not).
A signal's handler that splits runs between two bytecodes, so an item is either
handed out or left whole. The arguments of a taken call are made when it is taken,
not just before it would have run here: between the two orders a spawn allows
(every spawn's arguments made first, as deque entries do, or each just before its
call, as the elision does), with the locals the comprehension read.

Batches are written only in a leaf's clones and made only in a leaf's task, where
thieves are. Costs there: one batch per comprehension run (a list of its items, a
flat record pushed and popped), nothing per call: about 1,800 instructions a batch
of 8 calls (``valgrind --tool=cachegrind``, a 58,301-node UTS tree in the leaf's
stand-in: 1.017x the instructions of the elision, 1.002x with no batch made),
2,300 with a record of two tuples, a thread's ident compared and the stack's last
record read before popping it. A batch an exception left (caught above it) is
dropped by the next batch to end below it, or when its task ends.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .stealable import Entry, StealableContext

# the running batches of this process, oldest first: (the iterator over a batch's
# items, what its clone knows: the @spawn function, make_args, whether the target is
# a tuple of names; then the values of the locals its calls read); pushed and popped by
# the clone's own code (``dac.clone._BATCH``), which knows its batch by the record's
# identity: a thief that cuts a batch puts a copy of its record in its place, so
# its end takes the slow path (``end``) and waits for the calls taken
BATCHES: list[tuple] = []
# batches are written only in a leaf's clones (``LEAF``: set where a leaf starts,
# ``dac.execution.Executor.warm_up``, and by its context; the serial elision of the
# program's own process, where nothing steals, keeps its comprehensions as they are)
# and made only while a leaf's task runs, in its thread (``on()``: True there, set
# by ``StealableContext.run_task``; a context variable, so another thread, which
# starts in an empty context, reads False, in 20 ns where comparing a thread's
# ident cost 60)
LEAF = False
_ON: contextvars.ContextVar[bool] = contextvars.ContextVar("dac_batches", default=False)
on = _ON.get
_pop = BATCHES.pop
# id(iterator) of a batch -> (the leaf's context, the entries of its items taken)
TAKEN: dict[int, tuple[StealableContext, list[Entry]]] = {}


def turn(value: bool) -> None:
    """Batches made (True) or not (False) by the clones' comprehensions run in this
    thread from now on (a leaf's task starts or ends)."""
    _ON.set(value)


def end(rec: tuple, popped: tuple, out: list) -> list:
    """The values of a batch (``out``: those of the calls it ran), ended where its
    clone's own code popped a record not its own (``popped``: a copy of its record
    a thief left, or a batch an exception left above it): with the values of the
    calls thieves took, once back."""
    it = rec[0]
    if popped[0] is not it:         # (a batch left above it: dropped)
        TAKEN.pop(id(popped[0]), None)
        if not _drop_to(it):
            return out              # (dropped already: not expected, but no harm)
        _pop()
    taken = TAKEN.pop(id(it), None)
    if taken is not None:
        taken[0].wait_taken(taken[1])
        out += [e._value for e in taken[1]]
    return out


def _drop_to(it: Iterator) -> bool:
    """The batches above that of ``it`` dropped (an exception left them, caught in
    between); False where ``it`` has none."""
    for i in range(len(BATCHES) - 1, -1, -1):
        if BATCHES[i][0] is it:
            drop_above(i + 1)
            return True
    return False


def drop_above(size: int) -> None:
    """The batches above the first ``size`` gone (a task ended: any left were left
    by an exception)."""
    for rec in BATCHES[size:]:
        TAKEN.pop(id(rec[0]), None)
    del BATCHES[size:]


def unstarted(rec: tuple) -> int:
    """How many items of a batch have not started (a thief may take them all)."""
    n: int = rec[0].__length_hint__()
    return n


def items(rec: tuple) -> list:
    """The list a batch's iterator goes over (its unstarted items at its end)."""
    seq: list = rec[0].__reduce__()[1][0]
    return seq


def arguments(rec: tuple, item: Any) -> tuple:
    """The arguments of the call the batch would make for ``item``."""
    _, make_args, unpack = rec[1]
    values = rec[2:]
    args: tuple = make_args(*values, *item) if unpack else make_args(*values, item)
    return args


def cut(rec: tuple, entries: list[Entry], ctx: StealableContext) -> None:
    """The last ``len(entries)`` items of a batch taken by a thief (``entries`` stand
    for their calls, in order): the batch waits for them after those it runs, its
    record replaced by a copy (its end then misses it and calls ``end``)."""
    del items(rec)[-len(entries):]
    before = TAKEN.get(id(rec[0]))
    TAKEN[id(rec[0])] = (ctx, entries if before is None else entries + before[1])
    for i in range(len(BATCHES) - 1, -1, -1):
        if BATCHES[i] is rec:
            BATCHES[i] = (rec[0], *rec[1:])
            break
