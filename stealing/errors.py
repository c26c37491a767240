"""The framework's errors that cross processes, at the bottom of the import graph.

Users know them as ``dac.DacError``, ``dac.TaskError`` and ``dac.LostProcessError``:
``dac.errors`` re-exports them, and their ``__module__`` says so. They are defined here,
below ``dac`` and ``launcher``, so that an error of a lower layer
(``launcher.topology.TopologyError``) is a ``DacError`` too, and so that a leaf reports a
failed task as the exception object the root raises (as ``concurrent.futures`` and
``mpi4py.futures`` do), while imports still only go down (DESIGN §8).
"""

from __future__ import annotations

import pickle


class DacError(Exception):
    """Base of dac's own errors."""

    __module__ = "dac.errors"       # its public home: tracebacks and pickles name it there


class TaskError(DacError):
    """A task raised an exception; the run was ended and every process of it exited.

    ``type_name``, ``message`` and ``remote_traceback`` describe the exception where it
    happened (a leaf, or the root while expanding and combining); ``task`` names the
    call, e.g. ``fib(3)``; ``where`` names the process (``leaf pid 1234 on host``).
    ``exception`` is the exception object itself when it could travel (it pickles, and
    its class exists here), else None; it is the error's ``__cause__`` when raised.
    """

    __module__ = "dac.errors"

    def __init__(self, type_name: str, message: str, remote_traceback: str,
                 task: str = "", where: str = "", exception: BaseException | None = None):
        self.type_name = type_name
        self.message = message
        self.remote_traceback = remote_traceback
        self.task = task
        self.where = where
        self._exception_blob = _pickled(exception)
        self._exception = exception
        head = f"task {task} raised {type_name}: {message}" if task else \
            f"{type_name}: {message}"
        if where:
            head += f" (in {where})"
        super().__init__(head)

    @property
    def exception(self) -> BaseException | None:
        if self._exception is None and self._exception_blob is not None:
            try:
                self._exception = pickle.loads(self._exception_blob)
            except Exception:                               # noqa: BLE001
                self._exception_blob = None     # its class is not importable here
        return self._exception

    def __str__(self) -> str:
        text = self.args[0]
        if self.remote_traceback:
            text += "\n--- traceback where it was raised ---\n" + \
                shorten_traceback(self.remote_traceback).rstrip()
        return text

    def __reduce__(self):
        return (_task_error, (self.type_name, self.message, self.remote_traceback,
                              self.task, self.where, self._exception_blob))


def _task_error(type_name, message, remote_traceback, task, where, blob):
    """A ``TaskError`` from its pickle: the original exception stays pickled until
    asked for (its class may not exist in the process that reads the error)."""
    err = TaskError(type_name, message, remote_traceback, task, where)
    err._exception_blob = blob
    return err


def _pickled(exc) -> bytes | None:
    """``exc`` pickled with its arguments (not its traceback), or None when it cannot
    be: the error is reported all the same, without the object."""
    if exc is None:
        return None
    try:
        return pickle.dumps(exc, pickle.HIGHEST_PROTOCOL)
    except Exception:                                       # noqa: BLE001
        return None


class LostProcessError(TaskError):
    """A process of the run ended without a Python exception: a task called
    ``os._exit``, native code crashed, the process was killed, or its host went away.

    The run ended and every other process of it exited. ``role``, ``pid``, ``host``
    name the process; ``exit_code`` (or ``signal``, the number of the signal that
    killed it) says how it ended; ``task`` names the call it was running, if known.
    """

    __module__ = "dac.errors"

    def __init__(self, role: str, pid: int, host: str, how: str, exit_code=None,
                 signal=None, task: str = ""):
        self.role, self.pid, self.host = role, pid, host
        self.how, self.exit_code, self.signal = how, exit_code, signal
        where = f"{role} pid {pid} on {host}"
        super().__init__("LostProcess", f"{where} {how}", "", task, where)
        running = f" while running {task}" if task else ""
        self.args = (f"the run lost a process: {where} {how}{running}",)

    def __reduce__(self):
        return (LostProcessError, (self.role, self.pid, self.host, self.how,
                                   self.exit_code, self.signal, self.task))


MAX_BLOCK = 32          # frames in the longest repeated block that is collapsed


def shorten_traceback(text: str) -> str:
    """``text`` (a formatted traceback) with repeated blocks of frames collapsed.

    Python collapses one frame repeated in a row; a recursion through ``@spawn`` repeats
    a block (the user's frame, then dac's own frames of the call), so a deep one printed
    thousands of lines. A block of up to ``MAX_BLOCK`` frames found three times or more
    in a row is kept twice, its first and last occurrences, with a line between them:
    ``[Previous N frames repeated M more times]`` (M occurrences left out).
    """
    lines = text.splitlines()
    out: list = []
    frames: list = []               # the current run of frames, each a tuple of lines
    for line in lines:
        if line.startswith('  File "'):
            frames.append((line,))
        elif frames and line.startswith("    "):
            frames[-1] += (line,)
        else:
            out += _collapse(frames)
            frames = []
            out.append(line)
    out += _collapse(frames)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _collapse(frames: list) -> list:
    """The lines of a run of frames, repeated blocks collapsed (``shorten_traceback``)."""
    out: list = []
    i, n = 0, len(frames)
    while i < n:
        for size in range(1, min(MAX_BLOCK, (n - i) // 3) + 1):
            if frames[i + size] != frames[i]:
                continue
            block = frames[i:i + size]
            times = 1
            while frames[i + times * size:i + (times + 1) * size] == block:
                times += 1
            if times >= 3:
                out += [line for frame in block for line in frame]
                out.append(f"  [Previous {size} frame{'s' if size > 1 else ''} repeated "
                           f"{times - 2} more times]")
                out += [line for frame in block for line in frame]
                i += times * size
                break
        else:
            out += frames[i]
            i += 1
    return out
