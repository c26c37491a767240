"""The framework's errors that cross processes, at the bottom of the import graph.

Users know them as ``dac.DacError``, ``dac.TaskError`` and ``dac.LostProcessError``:
``dac.errors`` re-exports them, and their ``__module__`` says so. They are defined here,
below ``dac`` and ``launcher``, so that an error of a lower layer
(``stealing.tree.topology.TopologyError``) is a ``DacError`` too, and so that a leaf reports a
failed task as the exception object the root raises (as ``concurrent.futures`` and
``mpi4py.futures`` do), while imports still only go down (DESIGN §8).
"""

from __future__ import annotations

import os
import pickle
import socket
import traceback
from typing import Any, Callable


class DacError(Exception):
    """Base of dac's own errors."""

    __module__ = "dac.errors"       # its public home: tracebacks and pickles name it there


class RemoteError(DacError):
    """An exception raised in another process of the run, as the root raises it.

    ``type_name``, ``message`` and ``remote_traceback`` describe the exception where
    it happened; ``where`` names the process (``leaf pid 1234 on host``).
    ``exception`` is the exception object itself when it could travel (it pickles, and
    its class exists here), else None; it is the error's ``__cause__`` when raised.
    """

    __module__ = "dac.errors"

    def __init__(self, head: str, type_name: str, message: str, remote_traceback: str,
                 where: str = "", exception: BaseException | None = None) -> None:
        self.type_name = type_name
        self.message = message
        self.remote_traceback = remote_traceback
        self.where = where
        self._exception_blob = _pickled(exception)
        self._exception = exception
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


class TaskError(RemoteError):
    """A task raised an exception; the run was ended and every process of it exited.

    ``type_name``, ``message`` and ``remote_traceback`` describe the exception where it
    happened (a leaf, or the root while expanding and combining); ``task`` names the
    call, e.g. ``fib(3)``; ``where`` names the process (``leaf pid 1234 on host``).
    ``exception`` is the exception object itself when it could travel (it pickles, and
    its class exists here), else None; it is the error's ``__cause__`` when raised.
    """

    __module__ = "dac.errors"

    def __init__(self, type_name: str, message: str, remote_traceback: str,
                 task: str = "", where: str = "",
                 exception: BaseException | None = None) -> None:
        self.task = task
        head = f"task {task} raised {type_name}: {message}" if task else \
            f"{type_name}: {message}"
        if where:
            head += f" (in {where})"
        super().__init__(head, type_name, message, remote_traceback, where, exception)

    def __reduce__(self) -> tuple[Callable[..., TaskError], tuple[Any, ...]]:
        return (_task_error, (self.type_name, self.message, self.remote_traceback,
                              self.task, self.where, self._exception_blob))


class ProcessError(RemoteError):
    """A process of the run failed outside a task: while loading the job's functions,
    unpickling a task's arguments, importing what its tasks need, starting CUDA.

    The process reported it and waited to be stopped, so the run ended cleanly and
    MPI stays usable: the next run in the same interpreter works, and a warm tree
    serves the next script. ``role``, ``pid``, ``host`` name the process, ``doing``
    what it was doing (``"loading the job's functions"``); ``type_name``,
    ``message``, ``remote_traceback`` and ``exception`` are the exception's, as for a
    ``TaskError``.
    """

    __module__ = "dac.errors"

    def __init__(self, role: str, pid: int, host: str, doing: str, type_name: str,
                 message: str, remote_traceback: str,
                 exception: BaseException | None = None) -> None:
        self.role, self.pid, self.host, self.doing = role, pid, host, doing
        where = f"{role} pid {pid} on {host}"
        super().__init__(f"{where} failed {doing}: {type_name}: {message}", type_name,
                         message, remote_traceback, where, exception)

    def __reduce__(self) -> tuple[Callable[..., ProcessError], tuple[Any, ...]]:
        return (_process_error, (self.role, self.pid, self.host, self.doing,
                                 self.type_name, self.message, self.remote_traceback,
                                 self._exception_blob))


def _process_error(role: str, pid: int, host: str, doing: str, type_name: str,
                   message: str, remote_traceback: str,
                   blob: bytes | None) -> ProcessError:
    """A ``ProcessError`` from its pickle (the exception object stays pickled)."""
    err = ProcessError(role, pid, host, doing, type_name, message, remote_traceback)
    err._exception_blob = blob
    return err


class SetupFailure(Exception):
    """Raised by a task executor for a failure outside the user's task code (the
    task's arguments did not unpickle): the leaf reports its ``__cause__`` as a
    ``ProcessError`` saying what it was ``doing``."""

    def __init__(self, doing: str) -> None:
        super().__init__(doing)
        self.doing = doing


MAX_FRAMES = 8          # frames of a ProcessError's traceback kept (the last ones)


def process_error(role: str, doing: str, exc: BaseException) -> ProcessError:
    """The ``ProcessError`` this process reports for ``exc``, raised while ``doing``;
    the traceback keeps its last ``MAX_FRAMES`` frames (the top ones are pickle's
    and dac's own, the cause is at the bottom)."""
    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:                                       # noqa: BLE001
        text = ""
    try:
        message = str(exc)
    except Exception:                                       # noqa: BLE001
        message = "<str() of the exception failed>"
    return ProcessError(role, os.getpid(), socket.gethostname(), doing,
                        type(exc).__name__, message, last_frames(text, MAX_FRAMES),
                        exception=exc)


def last_frames(text: str, keep: int) -> str:
    """A formatted traceback with only its last ``keep`` frames (a line says how
    many went)."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    if len(starts) <= keep:
        return text
    cut = starts[-keep]
    head = [line for line in lines[:starts[0]]]
    return "".join(head + [f"  [{len(starts) - keep} frames above left out]\n"] +
                   lines[cut:])


def _task_error(type_name: str, message: str, remote_traceback: str, task: str,
                where: str, blob: bytes | None) -> TaskError:
    """A ``TaskError`` from its pickle: the original exception stays pickled until
    asked for (its class may not exist in the process that reads the error)."""
    err = TaskError(type_name, message, remote_traceback, task, where)
    err._exception_blob = blob
    return err


def _pickled(exc: BaseException | None) -> bytes | None:
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

    def __init__(self, role: str, pid: int, host: str, how: str,
                 exit_code: int | None = None, signal: int | None = None, task: str = "",
                 traceback: str = "") -> None:
        self.role, self.pid, self.host = role, pid, host
        self.how, self.exit_code, self.signal = how, exit_code, signal
        where = f"{role} pid {pid} on {host}"
        super().__init__("LostProcess", f"{where} {how}", traceback, task, where)
        running = f" while running {task}" if task else ""
        self.args = (f"the run lost a process: {where} {how}{running}",)

    def __reduce__(self) -> tuple[Callable[..., LostProcessError], tuple[Any, ...]]:
        return (LostProcessError, (self.role, self.pid, self.host, self.how,
                                   self.exit_code, self.signal, self.task,
                                   self.remote_traceback))


_PACKAGES = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), name) + os.sep for name in ("dac", "stealing", "launcher"))


def from_user_frames(text: str) -> str:
    """A formatted traceback without the frames of dac's own leaf and executor above
    the first frame of the user's code (a task's traceback then starts where the
    user's function was called); unchanged when no frame is the user's."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    for i in starts:
        name = lines[i][len('  File "'):].split('"', 1)[0]
        if not name.startswith(_PACKAGES):
            if i == starts[0]:
                return text
            return "".join(lines[:starts[0]] + lines[i:])
    return text


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
