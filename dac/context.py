"""Where a ``@spawn`` call is being made, which decides what the call does.

* No context (plain Python code): the call runs serially and returns its value — the
  serial elision of the program.
* ``SerialContext``: inside a serially executed call (serial elision, or a task inside
  a leaf). Nested calls run inline and return done futures.
* ``Expansion`` (``dac.expansion``): on the root, above the spawn depth. Calls at the
  spawn depth become tasks for the leaves; the others run here.
"""

from __future__ import annotations

from .errors import SyncError, safe_repr
from .future import Future

current = None          # the active context of this process, or None


class SerialContext:
    """Runs every spawned call at once, in this process."""

    __slots__ = ("depth",)

    def __init__(self, depth: int = 0):
        self.depth = depth

    def call(self, sf, args, kwargs) -> Future:
        self.depth += 1
        try:
            return Future(sf.fn(*args, **kwargs))
        finally:
            self.depth -= 1

    def sync(self, futures):
        return _values(futures)


def _values(futures):
    for f in futures:
        if not isinstance(f, Future):
            raise SyncError(f"sync() takes futures returned by @spawn functions, "
                            f"got {type(f).__name__} {safe_repr(f)}")
    if len(futures) == 1:
        return futures[0].result()
    return tuple(f.result() for f in futures)


def run_serially(sf, args, kwargs, depth: int = 0, use_leaf: bool = False):
    """Call ``sf`` in a serial context and return the plain value."""
    global current
    saved = current
    current = SerialContext(depth)
    try:
        if use_leaf and sf.leaf is not None:
            return sf.leaf(*args, **kwargs)
        return sf.fn(*args, **kwargs)
    finally:
        current = saved


def sync(*futures):
    """Wait for spawned calls and return their values.

    ``sync(f)`` returns f's value, ``sync(f, g)`` a tuple of values. ``sync()`` waits for
    every call spawned so far by the current call and returns None. A spawned call also
    waits for all its children before it returns (an implicit ``sync()``).
    """
    if current is None:
        raise SyncError("sync() called outside a spawned call: use it inside a function "
                        "decorated with @dac.spawn")
    if not futures:
        return None if isinstance(current, SerialContext) else current.sync_all()
    return current.sync(futures)
