"""The context of a task on a leaf: spawns go on a deque that other leaves steal from.

Satin's and Cilk's model inside one leaf process. A ``@spawn`` call above the grain
pushes an *entry* (the call, not yet run) on the leaf's deque and returns it as a
pending ``Future``; ``sync`` runs the newest entries here, in the order a serial run
would (work first, LIFO), until the futures it waits for are done. A thief (another
leaf, through the router tree) takes the *oldest* entries, which are the shallowest
calls and so the largest pieces of work: the leaf's worker asks for them with
``split``, and the results come back through ``deliver``. A ``sync`` on an entry that
was stolen lets the worker run other work until its result is back (``Worker.wait``).

The grain (lazy task creation, after Mohr, Kranz and Halstead): an entry costs about
half a microsecond more than a plain call, so a leaf makes entries only where thieves
need them. A spawn is an entry while it is made less than ``HORIZON`` levels below its
task's top call (``horizon``, a level of this leaf's stack); deeper, it is a plain
call, as in the serial elision. The deque then holds the unstarted siblings along the
top of the running path: the oldest, the shallowest, is the biggest piece a thief can
get, and a task a thief takes has top levels of its own. Below the task's top call, a
spawn above the horizon is an entry only while the deque holds fewer than ``WIDE``
entries (the top call's own spawns always are): in a wide tree the top ``HORIZON``
levels hold thousands of calls (N-Queens 12: 12, then about 10, 8, 6 a node), each of
them an entry, where a deque of a few shallow entries is all thieves need; a binary
tree's holds one a level, as before. On 2 leaves (``work_first.py --small``, three
interleaved pairs): N-Queens 12 1.48-1.63x its elision against 1.25-1.48x, the leaves'
CPU 1.21-1.29x the elision's against 1.32-1.47x; Langford 11 1.84-1.88x against
1.62-1.74x (CPU 1.05-1.08x against 1.12-1.21x); fib, UTS T3 and the comb within their
spread; N-Queens 12's default 1.05x the best ``depth=`` against 1.22x (one run each).
When a thief asks and the deque is empty
(the leaf runs a plain call below the horizon), it takes the unstarted calls of the
comprehensions of spawns running there (``dac.latent``: the last half of each, the
shallowest first, ``LATENT_MIN`` calls or more). With none, every spawn is an entry (``EVERY``)
until a poll ``POLL_S`` later pays the thief from those made meanwhile (``_due``):
the spawns of the running call, and of its callers as they return; the thief gets the
oldest half of those at the shallowest level (``_take_shallowest``). Then
the horizon is back where the task's top put it (``_place_horizon``). Spawns that come
slowly (``SLOW``) are all entries: beside work of a millisecond a spawn, an entry
costs nothing. Measured on 2 leaves (``benchmarks/work_first.py``), fib 32 ran at
0.65-0.69x its elision with every spawn an entry, and at 1.23-1.35x so. Making spawns
entries by the number of entries on the deque instead (while it holds fewer than
two, or every k-th spawn) was tried and dropped: a plain call runs its whole
subtree before its later siblings even exist, so a thief found only deep, small
entries (UTS T3: one node a steal, 1.1x the elision). A leaf alone in its run does
the same as one with peers (a leaf added by ``grow`` may steal from it): it once
made a spawn an entry while its deque held fewer than two, and ran the body, not
the clone, below them; in one process (``benchmarks/spawn_cost.py``'s stand-in)
fib 30 took 8.7x its elision, N-Queens 12 2.1x, UTS T3 1.3x and Langford 11 1.2x,
where a leaf with peers took 1.00-1.03x.
The grain of a function with ``cutoff=`` or ``leaf=`` (``grain_fixed``): its calls
above the grain are entries like any other; a call at the grain (its ``cutoff``
holds, it is ``depth=`` deep, or for ``leaf=`` alone, as deep as the run needs for
its target count of tasks: ``Grain``) is an entry that runs as the user asked of a
task, the ``leaf=`` function or the body with every nested call of such a function
plain (``serial``). So the root runs none of these functions' code either, and a
thief gets whole calls above the grain or at it, never below it.
Every entry's run is a *scope* that waits, before it returns, for the entries made
under it (the implicit ``sync`` at the end of a spawned call); ``sync()`` with no
argument waits for the current scope's entries. Entries are numbered as they are
made, so a scope is just the first number made under it (``base``): its entries
still on the deque are those at the deque's new end numbered from ``base`` on
(thieves take from the old end), and those out with thieves are found by the
newest number they took (``stolen_top``). No object per scope, no counts to keep.
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Sequence
from time import perf_counter as _clock  # read before every entry's run
from typing import TYPE_CHECKING, Any

import stealing

from . import clone, context, latent, task_call, ticker
from .errors import Lazy, SerializationError, SyncError, safe_repr
from .future import _PENDING, Done, Future, done
from .serialize import dumps_function, loads
from .task_call import TaskCall

if TYPE_CHECKING:
    from stealing.roles.executor import Worker
    from stealing.tree.tasks import Result, SplitId, Task

    from .errors import SpawnCall

    from .spawn import SpawnFunction

HORIZON = 4         # levels of each task whose spawns are entries
WIDE = 8            # ... below the task's top call, while the deque holds fewer entries
EVERY = sys.maxsize     # a horizon below every level: every spawn an entry
SLOW = 32           # spawns between two polls (2 ms) at or under which each is an entry
MAX_GRAIN_DEPTH = 48    # as the root's automatic depth (dac.expansion.MAX_AUTO_DEPTH)
LATENT_MIN = 32         # calls a split takes off batches (dac.latent), at least
POLL_S = 2e-3       # how often a running task lets its worker read messages (a probe costs ~10-60 µs)
SLOW_GAP = POLL_S / SLOW    # a tick this long before the next spawn: spawns are slow
SLOW_TICK_S = 0.05  # the clock's ticks where the parent rings the leaf (``dac.ticker``)
RING_RETRIES = 5    # polls after a ring that found nothing, 2, 4, ... 10 ms apart: a
#                     net for a ring ahead of a send that completes late (a look finds
#                     any message already there: the second look, stealing.transport.mailbox)

# Interpreter frames one level of the user's recursion costs in a leaf task: the
# user's frame, then the spawn's function and StealableContext.call (a plain call),
# or sync, StealableContext.sync and _run (an entry); before 3.12 calls made from C
# count once more.
LEAF_FRAMES = 4 if sys.version_info >= (3, 12) else 5


# where the runtime's and Python's own code lives: a signal that finds the task
# running there leaves the messages to the next spawn (``_user_code``); found when
# a leaf loads a job (``dac.execution.Executor.prepare``), else when its first task
# arms the ticker, not at every ``import dac`` (sysconfig: about 2 ms), nor in a
# signal's handler (an import there, in a task that was importing,
# broke CPython 3.11's import lock: ``KeyError`` in ``_ModuleLock.acquire``)
_NOT_USER: list[tuple[str, ...]] = []


def learn_runtime_dirs() -> None:
    """Find the folders ``_user_code`` tells the runtime's code by, once."""
    if not _NOT_USER:
        _NOT_USER.append(_runtime_dirs())


def _runtime_dirs() -> tuple[str, ...]:
    import sysconfig  # lazy: only a leaf's first ring in a task needs it
    paths = sysconfig.get_paths()
    dirs = {os.path.dirname(os.path.abspath(__file__)),
            os.path.dirname(os.path.abspath(stealing.__file__)),
            *(paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib"))}
    return tuple(sorted(os.path.join(d, "") for d in dirs if d))


def _user_code(frame: Any) -> bool:
    """The signal came while the program's own code ran (no runtime frame above
    it, which may be half way through a change of the deque or a message): not
    the runtime's code (``dac``, ``stealing``, a ``@spawn`` function's written
    code), nor Python's library or an installed package's it may be calling."""
    if not _NOT_USER:
        return False
    code = frame.f_code.co_filename
    return not code.startswith(_NOT_USER[0]) and not code.startswith("<") and \
        "_dac_sf" not in frame.f_globals


class Entry(Future):
    """A spawned call on the deque: a future whose value the leaf computes later;
    ``seq`` its number (entries are numbered as they are made), ``level`` the
    nesting level of the call that spawned it (for ``sync()``)."""

    __slots__ = ("seq", "level")
    seq: int
    level: int
    _call: SpawnCall                # always the call (a plain Future may hold its text)


_new_entry = object.__new__


class Grain:
    """What an entry of a ``grain_fixed`` function holds in place of the function:
    the function, whether the call is at its grain (``at``) and its recursion depth,
    which a thief's task carries (``TaskCall.serial``, ``depth``). ``fn`` runs the
    call here: the function's body above the grain; at it, the ``leaf=`` function or
    the body with nested grain calls plain."""

    __slots__ = ("sf", "at", "depth", "fn")

    def __init__(self, sf: SpawnFunction, at: bool, depth: int) -> None:
        self.sf, self.at, self.depth = sf, at, depth
        self.fn = self._serially if at else self._first_level if depth == 1 else sf.fn

    def _serially(self, *args: Any, **kwargs: Any) -> Any:
        ctx = context.current()
        assert isinstance(ctx, StealableContext)    # an entry runs in its leaf's context
        ctx.serial += 1
        try:
            leaf = self.sf.leaf
            return (leaf if leaf is not None else self.sf.serial_body())(*args, **kwargs)
        finally:
            ctx.serial -= 1

    def _first_level(self, *args: Any, **kwargs: Any) -> Any:
        """A call one level below the top, run where it was spawned: the top call
        has made its calls (it waits for them), so their count fixes the grain."""
        ctx = context.current()
        assert isinstance(ctx, StealableContext)
        if ctx.counting:
            ctx.fix_grain()
        return self.sf.fn(*args, **kwargs)

    def describe(self, args: tuple, kwargs: dict) -> str:
        return self.sf.describe(args, kwargs)


def grain_depth(target: int, branching: int) -> int:
    """The depth of the grain of ``leaf=`` functions given neither ``depth=`` nor
    ``cutoff=``: the shallowest where ``branching`` calls a level make ``target``
    calls (as the root's automatic depth aimed for, with no pass over the top)."""
    b = max(2, branching)
    depth, calls = 1, b
    while calls < target and depth < MAX_GRAIN_DEPTH:
        calls *= b
        depth += 1
    return depth


class StealableContext:
    """The ``@spawn`` context of tasks on one leaf (one per leaf process)."""

    whole_sync = True   # ``dac.context.sync`` hands every call to ``sync`` as given

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        latent.LEAF = True              # (clones written from now on: batches)
        self.deque: deque[Entry] = deque()
        self.seq = 0                    # the number of the next entry
        self.base = 0                   # the first number of the running scope
        self.stolen: dict[int, Entry] = {}   # number -> Entry taken by a thief
        self.stolen_top = -1            # the newest seq of those, -1: none
        self.next_number = 0
        self.owed = 0                   # tasks a thief asked for while nothing was here
        self.owed_at = 0.0              # ... since then (the clock)
        self.depth = 0                  # recursion depth of the running task's root
        self.level = 0                  # calls under way on this stack (see sync_all)
        self.origin = 0                 # level - origin: the depth of a call made now
        self.serial = 0                 # calls at their grain under way on this stack
        self.target: int | None = None  # tasks the run aims for (the top task says)
        self.grain: int | None = None   # the grain depth of leaf= functions (fixed once)
        self.top_calls = 0              # calls of such functions the top task made
        self.counting = False           # ... and it may make more: the grain waits
        self.grains: dict[tuple[int, bool, int], Grain] = {}
        self.table: dict[str, SpawnFunction] = {}   # the job's {key: SpawnFunction}
        self.keys: dict[int, str] = {}    # id(SpawnFunction) -> key, for split payloads
        self.functions: dict[bytes, SpawnFunction] = {}   # bytes -> SpawnFunction
        self.blobs: dict[int, bytes] = {}  # id(SpawnFunction) -> its bytes (not in table)
        self.countdown = 1              # spawns until the next poll ...
        self.interval = 1               # ... and between two polls, sized by the clock
        self.last_poll = time.perf_counter()
        # a spawn made at a level above this one is an entry (the spawn's function
        # pushes it itself); below it, a plain call (see the module's docstring)
        self.horizon = -1
        self.top_horizon = -1           # ... where the running task's top puts it
        self.open_to = -1               # a spawn at or above it: an entry past WIDE too
        # the context a task runs in below the horizon: a serial one (a spawn there
        # is the elision's plain call: no count, no level) that the ticker's tick
        # turns back into this one (``_tick``); this one itself while no ticker runs
        # (another thread, a program's own SIGALRM handler)
        self.below: StealableContext | context.SerialContext = self
        self._serial_below = context.SerialContext(0, self)     # (``below`` while ticking)
        self.woke = False               # a tick turned a task back: the next poll is its
        self.ticked = 0.0               # ... at this time (the clock)
        self.rung = False               # ... and it was the parent's ring
        self.missed = 0                 # polls since a ring that found no message
        self.asked = False              # a ring found this context: the next look polls
        self.skipped = 0                # spawns that did not poll since the last poll
        self.polling = 0                # > 0: reading messages, or pickling for them
        self.asked_for = False          # a thief has asked this leaf for work (split)

    # the spawn path (the spawn's function makes plain calls) -------------
    def call(self, sf: SpawnFunction, args: tuple, kwargs: dict) -> Future:
        """A ``@spawn`` call that the spawn's function could not settle itself:
        a plain call, or an entry on the deque."""
        if self.countdown <= 0:
            self._poll()
        run: SpawnFunction | Grain = sf
        if sf.grain_fixed and not self.serial:  # (below a call at its grain: plain)
            run = self._grain_of(sf, args, kwargs)
        if self.serial and sf.grain_fixed or (
                self.level >= self.horizon or self.level > self.open_to
                and len(self.deque) >= WIDE) and not sf.grain_fixed:
            self.level += 1
            try:
                return done(run.fn(*args, **kwargs))
            finally:
                self.level -= 1
        entry = _new_entry(Entry)
        entry._value = _PENDING
        entry._call = (run, args, kwargs)   # type: ignore[assignment]
        entry.level = self.level
        entry.seq = self.seq
        self.seq += 1
        self.deque.append(entry)
        if self.owed and self._due(_clock()):
            self._pay()
        return entry

    def _grain_of(self, sf: SpawnFunction, args: tuple, kwargs: dict) -> Grain:
        """What runs a call of ``sf`` (``grain_fixed``) made now: the ``Grain`` of its
        depth, at the grain or above it."""
        depth = self.level - self.origin
        at = self._at_grain(sf, args, kwargs, depth)
        key = (id(sf), at, depth)
        grain = self.grains.get(key)
        if grain is None or grain.sf is not sf:
            grain = self.grains[key] = Grain(sf, at, depth)
        return grain

    def _at_grain(self, sf: SpawnFunction, args: tuple, kwargs: dict,
                  depth: int) -> bool:
        """A call at ``depth`` is at ``sf``'s grain: its ``cutoff`` holds, else it is
        ``depth=`` deep, else (``leaf=`` alone) as deep as ``grain_depth`` says, from
        the calls the top task made one level down (counted until it is fixed)."""
        if sf.cutoff is not None:
            return bool(sf.cutoff(*args, **kwargs) if kwargs else sf.cutoff(*args))
        if sf.depth is not None:
            return depth >= sf.depth
        if self.grain is None:
            if self.target is None:
                return True         # a task of the root's expansion: it was the grain
            if depth <= 1:
                if depth == 1:
                    self.top_calls += 1
                    self.counting = True
                return depth == 0 and self.target <= 1
            self.fix_grain()
        assert self.grain is not None
        return depth >= self.grain

    def fix_grain(self) -> None:
        """The top call's calls are counted (one of them runs, or spawns): the grain
        of ``leaf=`` functions is fixed, and a split owed meanwhile can be paid.
        A split waits for it: fixed from the first calls alone, N-Queens 14's grain
        was 2 levels deeper than its 14 calls give (1.5 times the leaves' CPU)."""
        assert self.target is not None
        self.grain = grain_depth(self.target, self.top_calls)
        self.counting = False

    def sync(self, futures: Sequence[Any]) -> Any:
        """Every ``sync(...)`` in a leaf, its arguments as given (``dac.context.sync``
        hands them all here: one call less on the path of every internal node of a
        recursion). Run or wait for each future, newest entries first; ``sync(kids)``
        of one list gives a list."""
        group = futures
        if len(futures) == 1 and futures[0].__class__ is list:
            group = futures[0]
        for f in group:
            if f.__class__ is not Entry and f.__class__ is not Done and \
                    f.__class__ is not Future:
                return self._sync_other(futures)
        self._wait_for(group)
        # (no generator for one or two: it cost about 100 ns a spawn)
        if len(futures) == 2:
            return futures[0]._value, futures[1]._value
        if group is not futures:
            return [f._value for f in group]
        if len(futures) == 1:
            return futures[0]._value
        if not futures:
            return self.sync_all()
        return tuple([f._value for f in futures])

    def _sync_other(self, futures: Sequence[Any]) -> Any:
        """``sync(kids)`` of an iterable other than a list, futures of a subclass,
        or a mistake (``SyncError``)."""
        if len(futures) == 1 and not isinstance(futures[0], Future):
            if futures[0].__class__ is list:       # holding something else
                self._settle(futures[0])
            return context.sync_iterable(self, futures[0])
        self._settle(futures)
        if len(futures) == 1:
            return futures[0]._value
        return tuple([f._value for f in futures])

    def _settle(self, futures: Sequence[Any]) -> None:
        """Run or wait for each of ``futures``, newest entries first."""
        for f in futures:
            if not isinstance(f, Future):
                raise SyncError(f"sync() takes futures returned by @spawn functions, "
                                f"got {type(f).__name__} {safe_repr(f)}")
        self._wait_for(futures)

    def _wait_for(self, futures: Sequence[Future]) -> None:
        """Run entries here, newest first, until each of ``futures`` is done, or
        wait for it where a thief took it. Where one run here raises, the others
        still on the deque run before the exception goes up (``_finish``)."""
        d = self.deque
        for f in futures:
            while f._value is _PENDING:
                if d:
                    try:
                        self._run_next()
                    except Exception:
                        self._finish(futures)
                        raise
                else:                       # split off to another leaf: wait for it
                    self._wait_stolen(futures)

    def _finish(self, futures: Sequence[Future]) -> None:
        """A ``sync`` whose call raised runs its calls still on the deque (their own
        exceptions dropped: the first goes up), as a ``sync`` of plain Python's
        calls had run the ones before the call that raised; left there, they ran at
        the caller's scope end, where one that raised again escaped the caller's
        ``try`` (a frame at the top of a task, or under its last entry:
        ``_horizon_of_last``). Those out with thieves are waited for at that end."""
        d = self.deque
        for f in futures:
            while f._value is _PENDING and any(e is f for e in d):
                try:
                    self._run_next()
                except Exception:           # noqa: BLE001 - the first one goes up
                    pass

    def _wait_stolen(self, futures: Sequence[Future]) -> None:
        """Wait for those of ``futures`` not done: the deque is empty, so thieves
        hold them all. One wait for them all: a wait per future withdrew the leaf's
        idle request at each result and sent it again at the next wait, two
        messages a result (256 sleeping leaves, where a task waits for several
        children split off)."""
        rest = [f for f in futures if f._value is _PENDING]
        self.worker.wait(lambda: all(f._value is not _PENDING for f in rest))

    def sync_all(self) -> None:
        """``sync()``: wait for the entries the calling function made. Its entries on
        the deque and any above them (left by calls it made that returned without
        syncing) run here; then it waits for those that thieves took."""
        d, level = self.deque, self.level
        while d and d[-1].level >= level:
            self._run_next()
        base = self.base
        if self.stolen_top >= base:
            stolen = [e for e in self.stolen.values() if e.seq >= base and e.level >= level]
            if stolen:
                self._wait_stolen(stolen)

    def _run_next(self) -> None:
        """Run the newest entry here, as a scope of its own; or, once ``POLL_S`` has
        passed, read messages instead and let the caller look again (a thief may
        have taken it). The look at the clock (a few tens of ns beside the entry's
        microseconds) keeps a sync that runs entries which spawn nothing (the leaves
        of the recursion, after a fast descent made the spawn count between polls
        large) reading messages. Read before the entry is taken: a call spawned just
        before a long nap, then synced, went to a thief that asked meanwhile.
        A ring that came while the runtime's code ran (``_tick``) polls here too."""
        if (self.asked or _clock() - self.last_poll >= POLL_S) and self._poll():
            return
        d = self.deque
        entry = d.pop()
        sf, args, kwargs = entry._call
        # (inline, not shared with run_here: a frame more per level made a 900-deep
        # chain of entries overflow the leaf's recursion limit; the try costs
        # nothing until something raises)
        saved = self.base
        self.base = base = self.seq
        self.level += 1
        around = None if d or self.level < self.horizon or not self.asked_for \
            else self._horizon_of_last()    # the last entry, spawning under the horizon
        try:
            value = sf.fn(*args, **kwargs) if kwargs else sf.fn(*args)
            if around is not None:
                self._horizon_back(around)
            if (d and d[-1].seq >= base) or self.stolen_top >= base:   # (the usual
                self._drain(base)                                     # case: no call)
        except BaseException:
            self._unwound(saved, around)
            raise
        self.base = saved
        self.level -= 1
        entry._value = value

    def _unwound(self, saved: int, around: tuple[int, int] | None) -> None:
        """An entry's run raised: its scope and level (and a last entry's horizon)
        are put back, for a caller that catches the exception goes on in its own
        (a failure that ends the task needs none of it: ``run_task`` puts back
        what it saved)."""
        self.base = saved
        self.level -= 1
        if around is not None:
            self._horizon_back(around)

    def _horizon_of_last(self) -> tuple[int, int]:
        """Once a thief has asked this leaf for work (``asked_for``), the deque's
        last entry, made above the horizon but spawning under it, runs with a horizon
        of its own ``HORIZON`` levels below it: its spawns there are entries, as the
        task's top spawns were (returns what ``_horizon_back`` puts back; not a frame
        around the entry's run: a chain of entries is as deep as before). A binary
        tree's entries are then a band of ``HORIZON`` levels at the task's top and
        one under each last entry, down the tree: 30 entries every 4 levels. Under
        the task's horizon alone, a leaf that ran its last entry held nothing for a
        thief until that entry ended: fib 32 on 2 leaves, on a started tree, paid a
        thief's owed split from a poll's spawns deep in the tree again and again
        (19-30 splits in its slow jobs: 122-201 ms against 121-149 ms for
        ``depth=4``; 119-136 ms with this)."""
        around = self.top_horizon, self.open_to
        self.top_horizon = self.level + HORIZON
        self.horizon, self.open_to = self.top_horizon, self.level
        return around

    def _horizon_back(self, around: tuple[int, int]) -> None:
        """The task's horizon again, after its last entry's (``_horizon_of_last``),
        unless a thief owed made every spawn an entry meanwhile."""
        self.top_horizon = around[0]
        if self.horizon != EVERY:
            self.horizon, self.open_to = around

    def _drain(self, base: int) -> None:
        """Wait for every entry of the scope that begins at ``base``: those on the
        deque are its newest."""
        d = self.deque
        while d and d[-1].seq >= base:
            self._run_next()
        if self.stolen_top >= base:
            self.worker.wait(lambda: self.stolen_top < base)

    def _poll(self) -> bool:
        """Let the worker read its messages, about every ``POLL_S`` seconds: the
        number of spawns between two polls follows the measured spawn rate, where
        each spawn is counted; below the horizon, where none is, the ticker says
        when, and the time from its tick to the next spawn whether they are slow.
        While spawns are slow (each one would poll) and the parent's ring signals
        the task, a poll comes only after a ring, else ``SLOW_TICK_S`` after the
        last (a net for a ring lost): 256 sleeping leaves on 2 cores polled 1.3
        times a node, each probe with cold caches (efficiency 0.48-0.53; 0.52-0.56
        so). The spawns let by are counted (``skipped``) and let by only while they
        come ``SLOW_GAP`` apart or more, so that spawns which speed up again space
        the polls out again. False when it did not poll."""
        now = time.perf_counter()
        spent = now - self.last_poll
        if self.interval == 1 and spent >= SLOW_GAP * self.skipped and not (
                self.asked or self.rung or self.missed or self.woke or self.owed) \
                and spent < (SLOW_TICK_S if ticker.rings_signal() else POLL_S):
            self.skipped += self.countdown <= 0     # a spawn's (not a sync's)
            self.countdown = 1          # spawns come slowly, and nothing rang
            return False
        made = self.interval + self.skipped     # spawns counted since the last poll
        self.last_poll = now
        self.skipped = 0
        self.asked = False
        rung, self.rung = self.rung, False
        if self.woke:                   # the first spawn after a tick
            self.woke = False
            if now - self.ticked > SLOW_GAP:
                self.interval = 1       # spawns come slowly (see _place_horizon)
        elif self.below is self or self.horizon == EVERY:   # each spawn counted
            # at most doubled per poll (one short sample must not postpone the next
            # poll by thousands of spawns: they may each take long), cut at once
            fit = int(made * POLL_S / spent) if spent > 0 else 1 << 16
            self.interval = max(1, min(1 << 16, 2 * self.interval, fit))
        self.countdown = self.interval
        if self.owed and self.deque and self._due(now):   # what spawns made since
            self._pay()
        ticker.take_rings()             # the rings of the messages read now
        if self.worker.poll():
            self.missed = 0
        elif rung or self.missed:       # rung, but MPI shows no message yet
            self.missed += 1
            if self.missed <= RING_RETRIES:
                ticker.soon(POLL_S * self.missed)
            else:
                self.missed = 0
        self._place_horizon()
        return True

    def _tick(self, rung: bool, frame: Any = None) -> None:
        """The ticker's tick or the parent's ring (``dac.ticker``): a task that
        runs below the horizon comes back to this context, whose next spawn polls.
        A ring that finds the task in this context makes its next spawn poll: its
        spawns are counted there, but it may go below the horizon before the count
        runs out, where nothing but a signal wakes it, and the ring is spent (with
        the two other lost rings, ``ticker.take_rings`` and ``run_here``: UTS T3 on
        2 leaves, 11-14 splits of about 200 a run waited 41-50 ms for the clock's
        next tick). Only the count: the spawn may come late (the task may be waiting
        at ``sync``), which says nothing of how fast spawns come (``_poll``). A tick
        or a ring in this context also routes the clones: a clone's frames may run
        here with plain calls in their slots (a nested call put them back after a
        wake), and nothing else brings them back (``run_here`` does so where a
        thief is owed and the clock paused: on UTS T3 a split was owed 805-889 ms,
        until the subtree under those frames ended). Where a ring finds the task
        in the program's own code, its messages are read at once (``_answer``), not
        at the next spawn, which may be a nap or a long loop away."""
        if rung and frame is not None and not self.polling and _user_code(frame) \
                and self._answer():
            return
        if self.below is not self:
            now = context.current()
            if now is self.below:
                self.woken()
                self.rung = rung
            elif now is self:
                clone.route()
                if rung:
                    self.countdown = 0
                    self.asked = True

    def _answer(self) -> bool:
        """Read the messages now, from the signal's handler (``_tick``): True when
        there were some and no thief is owed work (nothing left for the next
        spawn to do)."""
        self.polling += 1
        try:
            ticker.take_rings()
            if not self.worker.poll():
                return False
            self.missed = 0
            self._place_horizon()
            return not self.owed
        finally:
            self.polling -= 1

    def woken(self) -> StealableContext:
        """Back from the serial context below the horizon: the next spawn polls."""
        context.set_current(self)
        self.countdown = 0
        self.woke = True
        self.ticked = _clock()
        clone.route()               # a fast clone's next spawn comes here (run_here)
        return self

    def run_here(self, sf: SpawnFunction, args: tuple, kwargs: dict) -> Any:
        """A spawn made by a fast clone's frame after a wake (``dac.clone``): the body,
        run here as a scope (as ``_run_next`` runs an entry), whose own spawns are
        entries where thieves need them; the spawn counts towards the next poll.
        Then, unless every spawn is to be an entry (``EVERY``: a thief is owed work,
        or spawns come slowly) or the parent rang meanwhile (the next spawn polls:
        ``_tick``), the clone's frames go on as plain calls in the context below
        the horizon, which the next tick wakes again."""
        self.countdown -= 1
        if self.countdown <= 0:
            self._poll()
        saved = self.base
        self.base = base = self.seq
        self.level += 1
        try:
            value = sf.fn(*args, **kwargs)
            d = self.deque
            if (d and d[-1].seq >= base) or self.stolen_top >= base:
                self._drain(base)
            return value
        finally:
            self.base = saved
            self.level -= 1
            if self.below is not self:
                if self.countdown > 0 and self.horizon != EVERY:
                    clone.direct()
                    context.set_current(self.below)
                else:       # a ring came meanwhile (``_tick``), or a thief is owed
                    clone.route()   # work: the clones' next spawn polls here (a
                    #                 nested call may have put them back)

    # a task --------------------------------------------------------------------
    def run_task(self, sf: SpawnFunction, args: tuple, kwargs: dict, depth: int,
                 use_leaf: bool, grain: int | None = None,
                 target: int | None = None) -> Any:
        """Run one task (a task of the root, or an entry split off elsewhere) as the
        root scope of this leaf's stack; nested tasks (run while a ``sync`` waits)
        stack their scopes on it. ``use_leaf``: the call is at its function's grain
        (``Grain``); ``target``: it is the run's top call, whose grain is found here;
        ``grain``: the grain depth a worker fixed for the run."""
        saved = (context.current(), self.base, self.depth, self.level, self.origin,
                 self.serial, self.horizon, self.top_horizon, self.open_to,
                 len(latent.BATCHES))
        outer = saved[0] is not self        # not a task run while another one waits
        latent.turn(True)                   # (its clones' comprehensions: batches)
        sf.ready()                          # (its clone written before the clock runs)
        if outer and ticker.start(          # (armed by _place_horizon below)
                self._tick, POLL_S, getattr(self.worker, "ring_fd", None), SLOW_TICK_S,
                paused=True):
            self.below = self._serial_below
            learn_runtime_dirs()            # (before a signal's handler needs them)
        context.set_current(self)
        self.base = base = self.seq
        self.depth = depth
        self.origin = self.level - depth
        self.level += 1
        self.top_horizon = self.level + HORIZON
        self._place_horizon()
        at = self._begin_grain(sf, args, kwargs, depth, use_leaf, grain, target)
        if self.worker.owed:                # a split came before this task started:
            self.asked_for = True
            self.owed, self.worker.owed = self.worker.owed, 0
            self.owed_at, self.asked = -1.0, True   # paid at its first look (_due)
        context.deeper(LEAF_FRAMES)
        try:
            if at and sf.leaf is not None:
                return sf.leaf(*args, **kwargs)
            value = (sf.serial_body() if self.serial else sf.fn)(*args, **kwargs)
            self._drain(base)
            return value
        except BaseException:
            self._forget()
            raise
        finally:
            self._end_task(saved, outer)

    def _end_task(self, saved: tuple, outer: bool) -> None:
        """Put back what ``run_task`` saved: the state of the task this one ran in
        while it waited at ``sync``, or of none (``outer``: the ticker stops). A
        waiting task gets its horizon back and, placed again, the clock that goes
        with it: a task run in the wait may end with the clock paused (a thief it
        owed, paid from its deque, left every spawn an entry until its next poll),
        and the waiting task's frames below its horizon ran with no signal to wake
        them (UTS T3 on 2 leaves: a split reached its victim 750-880 ms late in
        three jobs of four, its thief idle all that while)."""
        (state, self.base, self.depth, self.level, self.origin, self.serial,
         self.horizon, self.top_horizon, self.open_to, batches) = saved
        latent.drop_above(batches)
        context.undeeper()
        context.set_current(state)
        if not outer:
            self._place_horizon()
        else:
            latent.turn(False)
            if self.below is not self:
                ticker.stop()
                self.below = self

    def _begin_grain(self, sf: SpawnFunction, args: tuple, kwargs: dict, depth: int,
                     use_leaf: bool, grain: int | None, target: int | None) -> bool:
        """The grain of a task starting (see ``run_task``): True when its call is at
        its function's grain."""
        if target is not None:              # the run's top call: a new grain
            self.target, self.grain, self.top_calls = target, None, 0
            self.counting = False
        elif grain is not None:
            self.grain = grain
        at = use_leaf or (target is not None and sf.grain_fixed and
                          self._at_grain(sf, args, kwargs, depth))
        self.serial = 1 if at and sf.grain_fixed else 0
        return at

    def _forget(self) -> None:
        """A task failed or the leaf was stopped: the run is over, and the entries
        (and what thieves took) of every task on this stack with it."""
        self.deque.clear()
        self.stolen.clear()
        self.stolen_top = -1
        self.owed = 0
        self.serial = 0
        self.counting = False

    # thieves ---------------------------------------------------------------------
    def split(self, want: int) -> list:
        """The oldest half of the entries (at least one) as tasks for a thief, however
        few it asked for (``want`` > 0); with none here, unstarted calls of the
        comprehensions running below the horizon (``_take_latent``); with none of
        those either, owe them until the next spawn.
        Half, not the thief's batch size: on a spine of 300 levels x 3 ms, batches of
        50 ms of work made 9 steals, each leaving the thief idle for a round trip to a
        busy victim (about 10 ms on 2 shared cores): 1.58-1.61x the elision; halving
        the deque makes 1-2 steals and 1.65-1.79x."""
        if want <= 0:
            self.owed = 0
            self._place_horizon()
            return []
        self.asked_for = True
        if self.counting:                   # the grain is not fixed yet: owed
            self.owed = want
            return []
        out = self._take(want) or self._take_latent()
        self.owed = 0 if out else want
        if not out:                 # every spawn an entry until it is paid
            self.owed_at = _clock()
            self._place_horizon()
        return out

    def _due(self, now: float) -> bool:
        """A split owed is paid now: ``POLL_S`` after it was asked, from the spawns
        made meanwhile.
        Paid at the next spawn, a thief got the one call made then, deep in the
        tree: on 2 leaves fib 32 ran at 1.29x its elision, N-Queens 13 at 1.60x,
        UTS T3 at 1.34x and the comb at 1.21x; paid a poll later, at 1.43x, 1.78x,
        1.49x and 1.68x (one run each)."""
        return now - self.owed_at >= POLL_S

    def _pay(self) -> None:
        if self.counting:                   # owed until the grain is fixed
            return
        self.owed = 0
        given = self._take_shallowest()
        self._place_horizon()
        if given:
            self.worker.offer(given)

    def _place_horizon(self) -> None:
        """Where spawns turn plain calls: nowhere (``EVERY``) while a thief is owed
        work, or while spawns are slow (``SLOW`` or fewer between two polls: an
        entry's half microsecond is nothing beside them, and a comb's spine of 3 ms
        levels is all there to steal); else ``HORIZON`` levels below the task's top
        call. Every spawn an entry from a thief's first empty-handed request to the
        end of the task ran fib 32 on 2 leaves at 1.11x its elision (a leaf's first
        task lasts the whole run), against 1.43x with the horizon back once the
        thief was paid; put back ``HORIZON`` levels below the call running then, it
        made every spawn of Langford 9 an entry."""
        if self.owed or self.interval <= SLOW:
            self.horizon = self.open_to = EVERY
            if self.below is not self:  # no level below the horizon: every spawn
                # polls by its count; a ring is answered at once while the deque
                # holds something to give (a task of one node arms nothing)
                ticker.rings_only() if self.deque else ticker.pause()
        else:
            self.horizon = self.top_horizon
            self.open_to = self.top_horizon - HORIZON
            if self.below is not self:
                ticker.resume(POLL_S)

    def _take(self, want: int) -> list:
        """The oldest half of the deque (see ``split``), whatever ``want`` says."""
        d = self.deque
        return self._give([d[i] for i in range((len(d) + 1) // 2)])

    def _take_latent(self) -> list:
        """With the deque empty: the last half (at least one) of the unstarted items
        of each batch that has any, oldest (shallowest) first, until ``LATENT_MIN``
        calls are taken (``dac.latent``): the shallowest calls not yet made on this
        leaf's stack."""
        out: list = []
        self.polling += 1           # (their arguments and pickles run the program's code)
        try:
            for rec in latent.BATCHES:      # (nothing pushes or pops while it polls)
                left = latent.unstarted(rec)
                if left:
                    out += self._take_items(rec, latent.items(rec)[-((left + 1) // 2):])
                    if len(out) >= LATENT_MIN:
                        break
        finally:
            self.polling -= 1
        return out

    def _take_items(self, rec: tuple, items: list) -> list:
        """Tasks for the last of a batch's ``items`` whose calls can be made and
        travel, from the end back to the first that cannot (a batch gives up a run
        of its last items); the batch then waits for them."""
        out: list = []
        entries: list[Entry] = []
        for item in reversed(items):
            try:
                args = latent.arguments(rec, item)
            except Exception:       # (raised where the batch runs it, if it does)
                break
            entry = _new_entry(Entry)
            entry._value = _PENDING
            entry._call = (rec[1][0], args, {})
            entry.seq = entry.level = -1    # (no scope waits for it: its batch does)
            task = self._as_task(entry)
            if task is None:
                break
            out.append(task)
            entries.append(entry)
        if out:
            out.reverse()
            entries.reverse()
            latent.cut(rec, entries, self)
        return out

    def wait_taken(self, entries: list[Entry]) -> None:
        """Wait for the calls thieves took off a batch (``dac.latent``): in this
        context, whose next spawn polls (``woken``): the batch's frames may run in
        the context below the horizon, and a task run in the wait would take itself
        for the leaf's outer task and, ending, stop the clock and the batches of
        the task still running."""
        if context.current() is not self:
            self.woken()
        self.worker.wait(lambda: all(e._value is not _PENDING for e in entries))

    def _take_shallowest(self) -> list:
        """A split owed, paid from the spawns made since it was asked: the oldest
        half (at least one) of the entries at the shallowest level among them, the
        biggest pieces there are. Not half of them all: those are mostly deep calls
        of the one running path (a split of UTS T3 handed a thief 456 and 857 tasks,
        most of one node, each pickled for it and its result sent back)."""
        d = self.deque
        if not d:
            return []
        top = min([e.level for e in d])
        level = [e for e in d if e.level == top]
        return self._give(level[:(len(level) + 1) // 2])

    def _give(self, chosen: list[Entry]) -> list:
        """``chosen`` entries of the deque as tasks for a thief, taken off it; one
        whose arguments cannot travel stays where it was."""
        out, taken = [], set()
        self.polling += 1               # (a pickled argument runs the program's code)
        try:
            for entry in chosen:
                task = self._as_task(entry)
                if task is not None:
                    out.append(task)
                    taken.add(entry.seq)
        finally:
            self.polling -= 1
        if taken:
            kept = [e for e in self.deque if e.seq not in taken]
            self.deque.clear()
            self.deque.extend(kept)
        return out

    def _as_task(self, entry: Entry) -> Task | None:
        """``((path, number), payload)`` for a thief, or None if it cannot be pickled."""
        sf, args, kwargs = entry._call
        serial, depth = None, self.depth
        if sf.__class__ is Grain:           # a grain_fixed function's call
            grain: Grain = sf
            sf, serial, depth = grain.sf, grain.at, grain.depth
        args, kwargs = sf.trim(args, kwargs)
        key = self._key(sf)
        number = self.next_number
        tid: SplitId = (self.worker.path, number)
        try:
            blob = None
            if key is None:
                blob = self.blobs.get(id(sf))
                if blob is None:
                    blob = self.blobs[id(sf)] = dumps_function(sf)
            call = TaskCall(tid, key, depth, args, kwargs, blob)
            if serial is not None:
                call = call._replace(serial=serial, grain=self.grain)
            payload = task_call.write(call, Lazy("an argument of", entry._call))
        except SerializationError:
            return None
        self.next_number += 1
        self.stolen[number] = entry
        if entry.seq > self.stolen_top:
            self.stolen_top = entry.seq
        return tid, payload

    def _key(self, sf: SpawnFunction) -> str | None:
        """The job table's key of ``sf`` (every leaf has the table), or None when
        ``sf`` is not in it (a function only other @spawn functions call): then the
        function travels with the task."""
        if len(self.keys) != len(self.table):
            self.keys = {id(v): k for k, v in self.table.items()}
        return self.keys.get(id(sf))

    def function(self, call: TaskCall) -> SpawnFunction:
        """The SpawnFunction a task names: a key of the table, or its bytes (unpickled
        once per leaf)."""
        if call.key is not None:
            return self.table[call.key]
        blob = call.function
        assert blob is not None             # a call without a key carries its function
        sf = self.functions.get(blob)
        if sf is None:
            sf = self.functions[blob] = loads(blob)
        return sf

    def deliver(self, results: list[Result]) -> None:
        """Results of entries thieves took: their futures are done now."""
        self.polling += 1
        try:
            for tid, blob in results:
                assert type(tid) is tuple   # a split id: (this leaf's path, number)
                entry = self.stolen.pop(tid[1], None)
                if entry is None:       # its task failed meanwhile (``_forget``)
                    continue
                entry._value = loads(blob)
        finally:
            self.polling -= 1
        self.stolen_top = max((e.seq for e in self.stolen.values()), default=-1)
