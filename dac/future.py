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
