"""Expansion and replay: how the root turns a recursive call into tasks and back.

Where the leaves cannot split a running task (GPU leaves, spawn-per-batch leaves) or
a spawn depth is given (``@spawn(depth=...)``, the run's ``depth`` option), the root
runs the top of the recursion; elsewhere the top call is the one task and nothing
here runs the user's code (``Expansion.top_target``). A call at the spawn depth (or whose ``cutoff``
holds) becomes a task and returns a pending future; a call above it runs here. A frame
that must ``sync`` on a pending future is suspended (abandoned) and its parent goes on,
so one pass finds every task the top of the recursion can reach, and notes the tasks
the suspended frames wait on (``blockers``). The leaves solve the tasks while the root
waits; as soon as a blocker's result is in, the root runs the top again with the results
known so far (``dac.driving``): frames resume their combine steps, and a frame whose
later spawns depend on earlier results sends those tasks at once, while other branches
are still at work (no barrier across the tree). Frames that finish are remembered by
their call path, so a pass re-runs only what is unfinished.

Both passes must make the same calls with the same arguments: every call is recorded by
its path (the indices of the calls leading to it) with its function and a digest of its
arguments, and a difference raises ``ReplayMismatchError``.
"""

from __future__ import annotations

import gc
import hashlib
import pickle
import time
import traceback
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Tuple

from stealing.transport.frames import taker
from stealing.tree.tasks import Blob

from . import context, task_call
from .errors import DacError, Lazy, ReplayMismatchError, TaskError, exception_message
from .future import Future
from .serialize import dumps_function, script_entry, script_key
from .task_call import TaskCall

if TYPE_CHECKING:
    from .errors import SpawnCall
    from .spawn import SpawnFunction

CallPath = Tuple[int, ...]      # the indices of the calls leading to a call, from the top

MAX_AUTO_DEPTH = 48
PROBE_MIN_S = 0.05      # a deeper trial pass may take this long ...
PROBE_FACTOR = 4.0      # ... or this many times the pass above it, then it is dropped


class Suspend(BaseException):
    """Raised in a frame that syncs on a pending future (never seen by user code that
    catches ``Exception``)."""


class OverBudget(BaseException):
    """A deeper trial pass of ``choose_depth`` ran past its time: the root was doing the
    leaves' work (calls one level down that compute, sleep or wait), so it stops."""


_SIMPLE = frozenset((int, float, str, bytes, bool, type(None)))


# the fingerprint of the top call: its arguments are the run's own objects in every
# pass (hashing them cost a 160 MB array 0.25 s a pass)
_TOP = "the run's arguments"


def _fingerprint(args: tuple, kwargs: dict, path: CallPath) -> Any:
    """What identifies a call's arguments across passes: the arguments themselves when
    they are plain scalars (cheap to compare), else a digest of their pickle (large
    buffers, NumPy arrays, hashed where they lie); None when they cannot be pickled (a
    frame above the spawn depth needs no pickling); ``_TOP`` for the top call."""
    if _SIMPLE.issuperset(map(type, args)):
        if not kwargs:
            return args
        if _SIMPLE.issuperset(map(type, kwargs.values())):
            return args, tuple(sorted(kwargs.items()))
    if not path:
        return _TOP
    bufs: list[pickle.PickleBuffer] = []
    try:
        blob = pickle.dumps((args, kwargs), pickle.HIGHEST_PROTOCOL,
                            buffer_callback=taker(bufs))
    except Exception:                                       # noqa: BLE001
        return None
    digest = hashlib.blake2b(blob, digest_size=16)
    for buf in bufs:    # by CRC-32 (4.3 GB/s here, blake2b 1 GB/s): a digest that tells
        digest.update(zlib.crc32(buf.raw()).to_bytes(4, "little"))  # passes apart
    return digest.digest()      # (bytes: a tuple means scalars, see Expansion.call)


class Frame:
    """A call above the spawn depth that runs on the root: where it is, and the futures
    of the calls it has made so far (its implicit sync at return waits on them)."""

    __slots__ = ("path", "depth", "nchild", "children")

    def __init__(self, path: CallPath, depth: int) -> None:
        self.nchild: int
        self.children: list[Future]
        self.path, self.depth, self.nchild, self.children = path, depth, 0, []


class Task:
    """A call at the spawn depth, ready to send: its id, path and payload, and the
    script's classes and functions the payload names (``{name: object}``)."""

    __slots__ = ("tid", "path", "sf", "payload", "call", "script")

    def __init__(self, tid: int, path: CallPath, sf: SpawnFunction, payload: Blob,
                 call: SpawnCall, script: dict[str, Any] | None = None) -> None:
        self.tid, self.path, self.sf, self.payload, self.call = tid, path, sf, payload, call
        self.script = script


class Expansion:
    """The context of the root's passes over the top of the recursion."""

    whole_sync = False  # (``sync(kids)`` goes the general way: ``context.sync``)

    def __init__(self, auto_depth: int,
                 sink: Callable[[Expansion], None] | None = None,
                 top_target: int | None = None, freeze: bool = False) -> None:
        self.auto_depth = auto_depth
        self.freeze = freeze         # a pass ends by freezing what is alive (run_pass)
        # the top call is the one task, whatever its function's grain, and its worker
        # finds the grain (dac.stealable) aiming for this many tasks; None: the root
        # expands the top to the grain
        self.top_target = top_target
        self.sink = sink             # called with the expansion after each new task
        self.records: dict = {}      # path -> (function key, argument digest)
        self.results: dict = {}      # path of a task -> its value
        self.finished: dict = {}     # path of a frame above the spawn depth -> its value
        self.tasks: dict = {}        # path -> Task, every task ever found
        self.new_tasks: list = []    # tasks found by the current pass
        self.pending: dict = {}      # a pending task future of this pass -> its path
        self.blockers: set = set()   # paths of the tasks suspended frames wait on
        self.stack: list[Frame] = []
        self.auto_used = False       # some call became a task by the automatic depth
        self.deadline: float | None = None   # perf_counter time a trial pass must end by
        self.max_task_depth = 0
        self.calls = 0               # the user's calls run here, over every pass
        self.first: tuple[bool, Any] = (False, None)   # (done, value) of the first pass

    # one pass -----------------------------------------------------------------
    def run_pass(self, sf: SpawnFunction, args: tuple, kwargs: dict) -> tuple[bool, Any]:
        """Run the top call once; returns ``(done, value)``.

        The cyclic garbage collector waits until the pass is over: a pass makes a few
        objects a task that all live on (futures, paths, payloads), and the collections
        their allocations set off scanned them again and again (N-Queens 15 at depth 5,
        89,428 tasks: 9.8-17.6 us a task with it, 6.6-7.9 without). A frame's own
        garbage cycles wait for the pass's end. With ``freeze`` (a run whose program
        froze nothing itself: the run unfreezes at its end) the pass's objects are then
        frozen out of the collector's sight, before its first collection would scan
        them all (0.1 s of the root's 1.25 s for those 89,428 tasks)."""
        self.new_tasks = []
        self.pending = {}
        self.blockers = set()
        context.deeper(context.EXPANSION_FRAMES)      # as deep as plain Python
        saved = context.current()
        context.set_current(self)
        collecting = gc.isenabled()
        gc.disable()            # see the docstring
        try:
            fut = self._call(sf, args, kwargs, (), 0)
        finally:
            if collecting:
                if self.freeze:
                    gc.freeze()
                gc.enable()
            context.set_current(saved)
            context.undeeper()
        return fut.done(), (fut.result() if fut.done() else None)

    def call(self, sf: SpawnFunction, args: tuple, kwargs: dict) -> Future:
        """A ``@spawn`` call made by the running frame (through the function that
        ``@spawn`` returned)."""
        frame = self.stack[-1]
        path = frame.path + (frame.nchild,)
        frame.nchild += 1
        fut = self._call(sf, args, kwargs, path, frame.depth + 1)
        frame.children.append(fut)
        return fut

    def is_task(self, sf: SpawnFunction, args: tuple, kwargs: dict, depth: int) -> bool:
        """The call goes to the leaves: its ``cutoff=``, else its ``depth=``, else the
        automatic depth says so."""
        if self.top_target is not None:
            return True                     # (the top call: nothing else runs here)
        if sf.cutoff is not None:
            return bool(sf.cutoff(*args, **kwargs) if kwargs else sf.cutoff(*args))
        if sf.depth is not None:
            return depth >= sf.depth
        if depth >= self.auto_depth:
            self.auto_used = True
            return True
        return False

    def _new_task(self, call: SpawnCall, path: CallPath, depth: int) -> None:
        """The call at ``path`` is a task found by this pass: pickled, kept, and handed
        to the sink (which may send it at once)."""
        sf, args, kwargs = call
        tid = len(self.tasks)
        fingerprint = _fingerprint(args, kwargs, path)    # a tuple: scalars
        payload, script = task_call.write_noting(
            TaskCall(tid, sf.key, depth, args, kwargs, None, *self._top_grain()),
            Lazy("an argument of", call), type(fingerprint) is tuple)
        self._check(path, sf, fingerprint, call)
        task = Task(tid, path, sf, payload, call, script)
        self.tasks[path] = task
        self.new_tasks.append(task)
        self.max_task_depth = max(self.max_task_depth, depth)
        if self.sink is not None:
            self.sink(self)

    def _top_grain(self) -> tuple[bool | None, None, int | None]:
        """``TaskCall``'s ``serial``, ``grain`` and ``target`` for a task found here:
        the top call as the one task has no grain yet (its worker finds it)."""
        if self.top_target is None:
            return None, None, None
        return False, None, self.top_target

    def _call(self, sf: SpawnFunction, args: tuple, kwargs: dict, path: CallPath,
              depth: int) -> Future:
        call: SpawnCall = (sf, args, kwargs)                # described only when a message needs it
        if self.is_task(sf, args, kwargs, depth):
            if path in self.results:            # replaying a solved task: no pickling
                self._check(path, sf, _fingerprint(args, kwargs, path), call)
                return Future(self.results[path], call)
            if path not in self.tasks:
                self._new_task(call, path, depth)
            fut = Future(call=call)
            self.pending[fut] = path
            return fut
        self._check(path, sf, _fingerprint(args, kwargs, path), call)
        if path in self.finished:
            return Future(self.finished[path], call)
        if self.deadline is not None and time.perf_counter() > self.deadline and \
                not getattr(self.sink, "started", False):     # (kept once it streams)
            raise OverBudget()
        frame = Frame(path, depth)
        self.calls += 1
        self.stack.append(frame)
        try:
            value = sf.fn(*args, **kwargs)
            if not all(f.done() for f in frame.children):     # implicit sync at return
                self._blocked(frame.children)
                return Future(call=call)
        except Suspend:
            return Future(call=call)
        except DacError:
            raise
        except Exception as exc:
            raise TaskError(type(exc).__name__, exception_message(exc),
                            traceback.format_exc(),
                            sf.describe(args, kwargs),
                            "the root, above the spawn depth", exception=exc) from exc
        finally:
            self.stack.pop()
        self.finished[path] = value
        return Future(value, call)

    def _check(self, path: CallPath, sf: SpawnFunction, fingerprint: Any,
               call: SpawnCall) -> None:
        seen = self.records.get(path)
        if seen is None:
            self.records[path] = (sf.key, fingerprint, call)
        elif seen[0] != sf.key or (fingerprint is not None and seen[1] is not None
                                   and seen[1] != fingerprint):
            was, now = seen[2][0].describe(*seen[2][1:]), sf.describe(*call[1:])
            raise ReplayMismatchError(
                f"the recursion above the spawn depth changed between passes: call "
                f"#{'.'.join(map(str, path)) or 'top'} was {was} and is now {now}. "
                f"Calls above the spawn depth must be deterministic (no randomness or "
                f"outside state); lower the spawn depth or make them deterministic.")

    # sync -----------------------------------------------------------------------
    def sync(self, futures: Sequence[Any]) -> Any:
        for f in futures:
            if type(f) is Future and not f.done():
                self._blocked((f,))
                raise Suspend()
        return context._values(futures)

    def sync_all(self) -> None:
        children = self.stack[-1].children
        if not all(f.done() for f in children):
            self._blocked(children)
            raise Suspend()
        return None

    def _blocked(self, futures: Iterable[Future]) -> None:
        """Note the task the frame about to suspend waits on first. A frame waiting on
        a suspended frame needs nothing more: that frame noted its own task."""
        for f in futures:
            if not f.done():
                path = self.pending.get(f)
                if path is not None:
                    self.blockers.add(path)
                return


def function_table(tasks: Iterable[Task], sent: set[str]) -> dict[str, bytes]:
    """``{key: pickled SpawnFunction}`` for the functions of ``tasks`` not yet sent,
    and the script's classes and functions their arguments name (by value, for the
    leaves' ``__main__``)."""
    table: dict[str, bytes] = {}
    for t in tasks:
        if t.sf.key not in sent and t.sf.key not in table:
            table[t.sf.key] = dumps_function(t.sf)
        for name, obj in (t.script or {}).items():
            key = script_key(name, obj)
            if key not in sent and key not in table:
                table[key] = script_entry(name, obj)
    return table


def choose_depth(sf: SpawnFunction, args: tuple, kwargs: dict, target: int,
                 fixed: int | None = None,
                 sink: Callable[[Expansion], None] | None = None,
                 top: bool = False, freeze: bool = False) -> Expansion:
    """The first pass, at the shallowest automatic depth giving ``target`` tasks.

    Deepening stops when the count reaches ``target``, when the automatic depth decided
    nothing (only ``depth=``/``cutoff=`` functions), when the count stops growing, or at
    ``MAX_AUTO_DEPTH``. ``top``: no pass runs the user's code, the top call is the
    one task (its worker finds the grain, aiming for ``target`` tasks). If going deeper reached the bottom of the recursion (the pass
    finished with no task at all), the previous depth is kept: the leaves, not the root,
    must do the work. A pass that reaches ``target`` is the one kept, so a ``sink``
    may start sending its tasks as soon as it has that many. ``freeze``: see
    ``Expansion.run_pass``.
    """
    if top:
        exp = Expansion(0, sink, top_target=target, freeze=freeze)
        exp.first = exp.run_pass(sf, args, kwargs)
        return exp
    if fixed is not None:
        exp = Expansion(fixed, sink, freeze=freeze)
        exp.first = exp.run_pass(sf, args, kwargs)
        return exp
    previous: Expansion | None = None
    took = 0.0
    for depth in range(1, MAX_AUTO_DEPTH + 1):
        exp = Expansion(depth, sink, freeze=freeze)
        start = time.perf_counter()
        if previous is not None and not getattr(sink, "started", False):
            # a deeper trial runs one more level of calls here; when they are the
            # leaves' work (a nap, a kernel), it would do it all before any leaf starts
            exp.deadline = start + max(PROBE_MIN_S, PROBE_FACTOR * took)
        try:
            exp.first = exp.run_pass(sf, args, kwargs)
        except OverBudget:
            assert previous is not None     # only a deeper trial pass has a budget
            return previous
        exp.deadline = None             # the passes after the first have no budget
        took = time.perf_counter() - start
        count = len(exp.new_tasks)
        if count == 0 and exp.first[0]:
            return previous if previous is not None else exp
        if count >= target or not exp.auto_used or \
                (previous is not None and count <= len(previous.new_tasks)):
            return exp
        previous = exp
    return exp
