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
