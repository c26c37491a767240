"""Errors a dac user can catch. Each says what went wrong and where."""

from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

# The base and the errors a run's processes report are below dac: see stealing.exceptions.
from stealing.exceptions import (  # noqa: F401
    DacError,
    LostProcessError,
    ProcessError,
    RemoteError,
    TaskError,
    shorten_traceback,
)

if TYPE_CHECKING:
    from .spawn import SpawnFunction

    # a call as it is kept until a message names it: (function, args, kwargs)
    SpawnCall = Tuple[SpawnFunction, tuple, dict]


class ReplayMismatchError(DacError):
    """The recursion above the spawn depth did not repeat itself.

    dac expands the top of the recursion, solves the tasks it finds, then runs the top
    again with the results known. Both passes must make the same calls with the same
    arguments; randomness or outside state above the spawn depth breaks that.
    """


class SerializationError(DacError, TypeError):
    """An argument, a result or a function cannot be pickled to go to another process."""


class SyncError(DacError, RuntimeError):
    """``sync`` was used where it has no meaning (outside a spawned call, non-futures)."""


def exception_message(exc: BaseException) -> str:
    """``str(exc)``, or what happened when that is empty: a bare ``MemoryError()`` (what
    Python raises when an allocation fails) or ``KeyError()`` would otherwise reach the
    user as "MemoryError: " and nothing more. A ``__str__`` that raises gives a
    placeholder (see ``safe_str``)."""
    text = safe_str(exc)
    if text:
        return text
    name = type(exc).__name__
    if isinstance(exc, MemoryError):
        return f"out of memory ({name} raised with no message)"
    return f"({name} raised with no message)"


def safe_str(obj: object, what: str = "the exception") -> str:
    """``str(obj)``, or a placeholder naming why it failed.

    Used where a message is built for an error already under way (a failed task): a
    broken ``__str__`` of the user's must neither replace that error nor kill the
    process reporting it.
    """
    try:
        return str(obj)
    except Exception as exc:                                # noqa: BLE001
        return f"<str() of {what} failed: {exception_text(exc)}>"


def safe_repr(obj: object, what: str = "the value") -> str:
    """``repr(obj)``, or a placeholder naming why it failed (see ``safe_str``)."""
    try:
        return repr(obj)
    except Exception as exc:                                # noqa: BLE001
        return f"<repr() of {what} failed: {exception_text(exc)}>"


def exception_text(exc: BaseException) -> str:
    """``Type: text`` of an exception raised by a failed ``str()``/``repr()`` (its own
    text may fail too: then ``?``)."""
    try:
        text = str(exc)
    except Exception:                                       # noqa: BLE001
        text = "?"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Lazy:
    """A message naming a call, formatted only if an error needs it: describing a
    call costs a ``repr`` of every argument (a large array's is slow)."""

    __slots__ = ("what", "call")

    def __init__(self, what: str, call: SpawnCall) -> None:
        self.what: str
        self.call: SpawnCall
        self.what, self.call = what, call

    def __str__(self) -> str:
        sf, args, kwargs = self.call
        return f"{self.what} {sf.describe(args, kwargs)}"
