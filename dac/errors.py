"""Errors a dac user can catch. Each says what went wrong and where."""

from __future__ import annotations


class DacError(Exception):
    """Base of dac's own errors."""


class TaskError(DacError):
    """A task raised an exception; the run was ended and every process of it exited.

    ``type_name``, ``message`` and ``remote_traceback`` describe the exception where it
    happened (a leaf, or the root while expanding and combining); ``task`` names the
    call, e.g. ``fib(3)``; ``where`` names the process (``leaf pid 1234 on host``).
    """

    def __init__(self, type_name: str, message: str, remote_traceback: str,
                 task: str = "", where: str = ""):
        self.type_name = type_name
        self.message = message
        self.remote_traceback = remote_traceback
        self.task = task
        self.where = where
        head = f"task {task} raised {type_name}: {message}" if task else \
            f"{type_name}: {message}"
        if where:
            head += f" (in {where})"
        super().__init__(head)

    def __str__(self) -> str:
        text = self.args[0]
        if self.remote_traceback:
            text += "\n--- traceback where it was raised ---\n" + \
                self.remote_traceback.rstrip()
        return text

    def __reduce__(self):
        return (TaskError, (self.type_name, self.message, self.remote_traceback,
                            self.task, self.where))


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


def safe_str(obj, what: str = "the exception") -> str:
    """``str(obj)``, or a placeholder naming why it failed.

    Used where a message is built for an error already under way (a failed task): a
    broken ``__str__`` of the user's must neither replace that error nor kill the
    process reporting it.
    """
    try:
        return str(obj)
    except Exception as exc:                                # noqa: BLE001
        return f"<str() of {what} failed: {exception_text(exc)}>"


def safe_repr(obj, what: str = "the value") -> str:
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
