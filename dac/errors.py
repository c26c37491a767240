"""Errors a dac user can catch. Each says what went wrong and where."""

from __future__ import annotations

from stealing.errors import DacError    # the base is below dac: see stealing.errors


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
                shorten_traceback(self.remote_traceback).rstrip()
        return text

    def __reduce__(self):
        return (TaskError, (self.type_name, self.message, self.remote_traceback,
                            self.task, self.where))


class LostProcessError(TaskError):
    """A process of the run ended without a Python exception: a task called
    ``os._exit``, native code crashed, the process was killed, or its host went away.

    The run ended and every other process of it exited. ``role``, ``pid``, ``host``
    name the process; ``exit_code`` (or ``signal``, the number of the signal that
    killed it) says how it ended; ``task`` names the call it was running, if known.
    """

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


class Lazy:
    """A message naming a call, formatted only if an error needs it: describing a
    call costs a ``repr`` of every argument (a large array's is slow)."""

    __slots__ = ("what", "call")

    def __init__(self, what, call):
        self.what, self.call = what, call

    def __str__(self):
        sf, args, kwargs = self.call
        return f"{self.what} {sf.describe(args, kwargs)}"
