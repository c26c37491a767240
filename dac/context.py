"""Where a ``@spawn`` call is being made, which decides what the call does.

* No context (plain Python code): the call runs serially and returns its value — the
  serial elision of the program.
* ``SerialContext``: inside a serially executed call (serial elision, or a task inside
  a leaf). Nested calls run inline and return done futures.
* ``Expansion`` (``dac.expansion``): on the root, above the spawn depth. Calls at the
  spawn depth become tasks for the leaves; the others run here.
"""

from __future__ import annotations

import contextvars
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Sequence, Union

from stealing.host.stack import CHUNKED_STACK, on_fresh_stack

from .errors import SyncError, safe_repr
from .future import Done, Future, done

if sys.platform != "win32":
    import resource

if TYPE_CHECKING:
    from .expansion import Expansion
    from .spawn import SpawnFunction
    from .stealable import StealableContext

    # what a @spawn call may find as ``current()`` (SerialContext is below)
    Context = Union["SerialContext", StealableContext, Expansion]


# The active context of this thread, or None. A context variable, not a
# ``threading.local``: each thread still has its own (a thread starts in an empty
# context, so a serial call in one thread is serial whatever another thread runs),
# and a spawn's hot path reads it in 8 ns where a ``threading.local`` attribute costs
# 33 ns (CPython 3.11, measured here); a store costs the same, about 40 ns. A signal
# handler (``dac.ticker``) runs in the context of the code it interrupts, so what it
# sets is what that code reads next.
_current: contextvars.ContextVar[Context | None] = contextvars.ContextVar(
    "dac_context", default=None)
current = _current.get          # () -> the active context (the hot paths bind it)
set_current = _current.set      # (ctx) -> a token, unused

# Interpreter frames (as counted against sys.getrecursionlimit()) one level of the
# user's recursion costs, where plain Python costs one: the user's frame, then the
# function @spawn returned (dac.spawn_call; SpawnFunction.__call__ for a signature it
# cannot read) (serial), or that function, Expansion.call and Expansion._call (on
# the root, above the spawn depth). Before 3.12 every call made from C (an instance's
# __call__, a call with *args) counts once more: the written function is called
# from Python, so it costs 2 there, the generic path 3, which the limit allows.
# (CPython 3.12 bounds those calls by a fixed C recursion limit instead, about 500
# levels here on 3.12.1, which no setting lifts; 3.13 does not.)
SERIAL_FRAMES = 2 if sys.version_info >= (3, 12) else 3
EXPANSION_FRAMES = 4 if sys.version_info >= (3, 12) else 5


class SerialContext:
    """Runs every spawned call at once, in this process.

    The function ``@spawn`` returns does what ``call`` does itself, without the
    extra frame (a serial recursion must go as deep as plain Python's). ``depth`` is
    the recursion depth where the serial run started: a task's depth on a leaf, 0
    outside ``run``.
    A leaf's task runs in one too below its horizon (``leaf``: see ``dac.stealable``).
    """

    __slots__ = ("depth", "leaf")

    depth: int
    leaf: StealableContext | None
    whole_sync = False  # (its own fast paths are ``dac.context.sync``'s)

    def __init__(self, depth: int = 0, leaf: StealableContext | None = None) -> None:
        self.depth = depth
        # the leaf's context this one stands in for below its horizon (its ``below``;
        # ``dac.stealable``), None for the serial elision and a serial task
        self.leaf = leaf

    def call(self, sf: SpawnFunction, args: tuple, kwargs: dict) -> Future:
        return done(sf.fn(*args, **kwargs))

    def sync(self, futures: Sequence[Any]) -> Any:
        return _values(futures)


def _values(futures: Sequence[Any]) -> Any:
    """The values of done futures (``futures`` as given to ``sync``, checked here):
    one value for one future, else a tuple."""
    for f in futures:
        if not isinstance(f, Future):
            raise SyncError(f"sync() takes futures returned by @spawn functions, "
                            f"got {type(f).__name__} {safe_repr(f)}")
    if len(futures) == 1:
        return futures[0].result()
    return tuple(f.result() for f in futures)


def run_serially(sf: SpawnFunction, args: tuple, kwargs: dict, depth: int = 0,
                 use_leaf: bool = False) -> Any:
    """Call ``sf`` in a serial context and return the plain value.

    While it runs the recursion limit is raised by ``SERIAL_FRAMES``, so the user's
    function recurses as deep as it would as plain Python (see ``deeper``).
    """
    deeper(SERIAL_FRAMES)
    saved = current()
    set_current(SerialContext(depth))
    try:
        if use_leaf and sf.leaf is not None:
            return sf.leaf(*args, **kwargs)
        return sf.fn(*args, **kwargs)
    finally:
        set_current(saved)
        undeeper()


# a top call of the serial elision this long or longer: the function's next one runs
# on a fresh stretch of the frame stack (``run_top``)
FRESH_STACK_S = 1e-3


def run_top(sf: SpawnFunction, args: tuple, kwargs: dict) -> Any:
    """A ``@spawn`` call outside ``run`` (the serial elision's top): ``run_serially``,
    on a fresh stretch of the interpreter's frame stack (``stealing.host.stack``, as a
    leaf serves), so that a deep recursion does not map and unmap a frame chunk each
    time it crosses a chunk's end: UTS T3's elision (depth 1572) made 316,000 such
    pairs and took 10.2-10.9 s, 7.5-8.1 s on a fresh stack (2 runs each). The chunk costs
    about 14 us a call, which a call of microseconds should not pay: a function whose
    last top call took under ``FRESH_STACK_S`` runs its next one where it is."""
    began = time.perf_counter()
    try:
        if not CHUNKED_STACK or sf.__dict__.get("_short_top"):
            return run_serially(sf, args, kwargs)
        return on_fresh_stack(run_serially, sf, args, kwargs)
    finally:
        sf._short_top = time.perf_counter() - began < FRESH_STACK_S


def _c_stack_levels() -> int | None:
    """How many levels of a recursion through ``SpawnFunction.__call__`` the C stack
    holds, or None where the interpreter guards its C stack itself (3.12+).

    Before 3.12 such a level also spends C stack (about 1.2 KB: the calls made from
    C), which plain Python's own frames do not; a limit raised past this would turn a
    RecursionError into a segmentation fault. 2 KB a level leaves a margin.
    """
    if sys.version_info >= (3, 12):
        return None
    size = _main_stack_size()
    if threading.stack_size():
        size = min(size, threading.stack_size())
    return size // 2048


def _main_stack_size() -> int:
    """The main thread's C stack: the soft ``RLIMIT_STACK``, 8 MB when it is
    unlimited, 1 MB where it cannot be read (Windows' main thread)."""
    if sys.platform == "win32":
        return 1 << 20
    size = 8 << 20
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_STACK)
        if soft != resource.RLIM_INFINITY and soft > 0:
            size = soft
    except (OSError, ValueError):
        size = 1 << 20
    return size


_C_STACK_LEVELS = _c_stack_levels()
_limit_lock = threading.Lock()
_users = 0              # deeper() calls not yet undone, all threads
_base = 0               # the limit found by the first of them, restored by the last
_raised = 0             # the limit they set


def deeper(factor: int) -> None:
    """Multiply the recursion limit by ``factor`` (frames per level of the user's
    recursion) until the matching ``undeeper``, as far as the C stack allows.

    The limit is one for the whole interpreter: the first of nested or concurrent
    users (threads) raises it, the last restores it. A larger factor coming in while
    it is raised raises it further. A limit the user's code set meanwhile is kept.
    """
    global _users, _base, _raised
    with _limit_lock:
        limit = sys.getrecursionlimit()
        if not _users:
            _base = _raised = limit
        _users += 1
        want = _base * factor
        if _C_STACK_LEVELS is not None and want > _C_STACK_LEVELS * factor:
            want = max(_base, _C_STACK_LEVELS * factor)
        if want > _raised and limit == _raised:
            sys.setrecursionlimit(want)
            _raised = want


def undeeper() -> None:
    """End one ``deeper``; the last one restores the limit it found."""
    global _users
    with _limit_lock:
        _users -= 1
        if not _users and sys.getrecursionlimit() == _raised:
            sys.setrecursionlimit(_base)


class _Nothing:
    """What ``sync`` finds in a parameter no future came for."""

    def __repr__(self) -> str:
        return "<no future>"


_NOTHING: Any = _Nothing()


def sync(first: Any = _NOTHING, second: Any = _NOTHING, /, *more: Any) -> Any:
    """Wait for spawned calls and return their values: ``sync(*futures)``.

    ``sync(f)`` returns f's value, ``sync(f, g)`` a tuple of values, and
    ``sync(kids)`` of one list (or any iterable) of futures a list of their values,
    as long as ``kids``: 0, 1 or many (``sum(sync(kids))`` works however many children
    a call has). ``sync()`` waits for every call spawned so far by the current call and
    returns None. A spawned call also waits for all its children before it returns (an
    implicit ``sync()``).

    (Two parameters of their own, not ``*futures``: ``sync(f, g)`` packs no tuple,
    and done futures are checked first: 78 ns against 131-155 ns here.)
    """
    # Done futures (``Done``: always done), in any context: the serial elision's (all
    # of them) and a leaf's plain calls, below its horizon (dac.stealable). A
    # generator and a method call per future cost 200 ns a spawn, a third of the
    # elision's.
    if first.__class__ is Done:
        if second.__class__ is Done:
            if not more:
                return first._value, second._value
        elif second is _NOTHING:
            return first._value
    elif first.__class__ is list and second is _NOTHING:   # sync(kids): a loop, no call
        values = []
        for f in first:
            if f.__class__ is not Done:
                break
            values.append(f._value)
        else:
            return values
    ctx = current()
    if ctx is None:
        raise SyncError("sync() called outside a spawned call: use it inside a function "
                        "decorated with @dac.spawn")
    # a leaf's context (dac.stealable) takes every form of the call as it came
    if first is _NOTHING:                   # sync(): every call spawned so far
        if isinstance(ctx, SerialContext):
            return None                     # (each ran at once)
        return ctx.sync(()) if ctx.whole_sync else ctx.sync_all()
    futures: tuple = (first,) if second is _NOTHING else (first, second, *more)
    if ctx.whole_sync:
        return ctx.sync(futures)
    if len(futures) == 1 and not isinstance(futures[0], Future):
        return sync_iterable(ctx, futures[0])
    return ctx.sync(futures)


def sync_iterable(current: Context, group: Any) -> list:
    """``sync(kids)``: the values of an iterable of futures, as a list."""
    if isinstance(group, (str, bytes)) or not hasattr(group, "__iter__"):
        raise SyncError(f"sync() takes futures returned by @spawn functions, or one "
                        f"list of them; got {type(group).__name__} {safe_repr(group)}")
    futures = tuple(group)
    if not futures:
        return []
    values = current.sync(futures)
    return [values] if len(futures) == 1 else list(values)
