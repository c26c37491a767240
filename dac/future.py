"""The value of a spawned call, available after ``sync``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import SyncError

if TYPE_CHECKING:
    from .errors import SpawnCall

_PENDING = object()


class Future:
    """What a ``@spawn`` call returns inside a computation.

    A future is *done* once its value is known. ``sync(f)`` waits for it and returns
    the value; ``f.result()`` returns the value of a done future.
    """

    __slots__ = ("_value", "_call")

    def __init__(self, value: Any = _PENDING, call: SpawnCall | str = "") -> None:
        self._value: Any
        self._call: SpawnCall | str
        self._value = value
        self._call = call

    def done(self) -> bool:
        return self._value is not _PENDING

    def result(self) -> Any:
        if self._value is _PENDING:
            raise SyncError(f"the result of {self._describe() or 'this spawned call'} is "
                            f"not known yet: call sync() on it first")
        return self._value

    def _describe(self) -> str:
        call = self._call            # "name(args)" or (SpawnFunction, args, kwargs)
        if isinstance(call, tuple):
            return call[0].describe(call[1], call[2])
        return call

    def __repr__(self) -> str:
        state = f"done value={self._value!r}" if self.done() else "pending"
        return f"<Future {self._describe()} {state}>"


class Done(Future):
    """The future of a call run at once (the serial elision's spawns, a leaf's plain
    calls): the spawn's hot path makes one per call, so it is made as cheaply as
    CPython allows. ``Done()`` runs C code only (``object.__init__``, no Python
    ``__init__``) and the value is its one store: 49 ns against 73 ns for
    ``object.__new__(Future)`` and two stores (CPython 3.11, measured here). ``_call``
    is the class's, a done call's text being empty (it shadows the slot, so a
    ``Done`` never holds a call)."""

    __slots__ = ()
    __init__ = object.__init__
    _call = ""


def done(value: Any) -> Done:
    """A ``Done`` future holding ``value`` (where a call runs at once off the hot
    path, which writes these two lines itself)."""
    f = Done()
    f._value = value
    return f
