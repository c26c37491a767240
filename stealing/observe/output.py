"""What tasks print, carried to the root as whole lines.

A spawned process's stdout and stderr reach the user through the MPI launcher, which
forwards whatever chunks it reads: two leaves printing at once came out cut mid-line
(``VISITVISIT  r01000000``; 44 of 511 lines garbled in one run), and in a notebook the
lines went to the kernel's terminal instead of the cell. In a leaf, ``sys.stdout`` and
``sys.stderr`` are ``LineStream``s: they keep what a task writes until a line is
complete, and the leaf sends complete lines to its parent in OUTPUT messages, which
routers pass up. The root writes each line whole and once to its own stdout or stderr
(``Printer``), behind a prefix naming the process (``(leaf 1234)``) unless the run
turned it off; a warm tree's root passes them to the script that holds the tree.

``note`` is dac's own remark from a process (a kernel compiled without a cache): the
root prints each text once per run, however many leaves said it.

What is written below Python (C code, a numba kernel's ``print``) still goes through
the launcher.
"""

from __future__ import annotations

import io
import os
import sys
import threading
from typing import TYPE_CHECKING, TextIO

from stealing.transport.protocol import Output

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

MAX_LINE = 1 << 20      # a line longer than this goes in pieces (nobody prints one)


class Capture:
    """The lines a process's streams hold for its parent. Any thread may add (a task
    may print from a thread of its own); the process's MPI thread takes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.chunks: list[tuple[str, str]] = []    # (stream, text)
        self.ready = False          # read without the lock: something to take

    def add(self, stream: str, text: str) -> None:
        """Keep ``text`` (whole lines, or a note) of ``stream`` for the parent."""
        with self.lock:
            self.chunks.append((stream, text))
            self.ready = True

    def take(self) -> list[tuple[str, str]]:
        """Everything kept so far, ``[(stream, text)]``; the capture is empty after."""
        with self.lock:
            chunks, self.chunks = self.chunks, []
            self.ready = False
        return chunks


class _Bytes(io.RawIOBase):
    """``sys.stdout.buffer`` of a ``LineStream``: bytes written there are text too."""

    def __init__(self, text: "LineStream") -> None:
        super().__init__()
        self.text = text

    def writable(self) -> bool:
        return True

    def write(self, b: ReadableBuffer) -> int:
        """Bytes written as text (decoded, bad bytes replaced)."""
        self.text.write(bytes(b).decode(self.text.encoding, "replace"))
        return len(memoryview(b))       # len(b): a buffer need not say it has one


class LineStream(io.TextIOBase):
    """A text stream that hands complete lines to a ``Capture``."""

    def __init__(self, capture: Capture, stream: str, real: TextIO | None) -> None:
        super().__init__()
        self.capture, self.stream = capture, stream
        self._parts: list[str] = []
        self._size = 0
        self._lock = threading.Lock()
        self._fd = real.fileno() if real is not None else -1
        self.buffer = _Bytes(self)

    @property
    def encoding(self) -> str:                          # type: ignore[override]
        return "utf-8"

    @property
    def errors(self) -> str:                            # type: ignore[override]
        return "replace"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        """The process's real descriptor, for code that writes below Python."""
        if self._fd < 0:
            raise io.UnsupportedOperation("fileno")
        return self._fd

    def write(self, s: str) -> int:
        """Keep ``s``; complete lines go to the capture."""
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        if not s:
            return 0
        with self._lock:
            self._parts.append(s)
            self._size += len(s)
            if "\n" in s or self._size > MAX_LINE:
                text = "".join(self._parts)
                cut = text.rfind("\n") + 1 if self._size <= MAX_LINE else len(text)
                if cut:
                    self.capture.add(self.stream, text[:cut])
                rest = text[cut:]
                self._parts = [rest] if rest else []
                self._size = len(rest)
        return len(s)

    def flush(self) -> None:
        """Lines go with the process's next message (a partial line waits for its
        end: sent now, it could be cut by another process's line)."""

    def finish(self) -> None:
        """Hand over a last line that has no newline (the process ends)."""
        with self._lock:
            text = "".join(self._parts)
            self._parts, self._size = [], 0
        if text:
            self.capture.add(self.stream, text + "\n")


_capture: list[Capture] = []  # [the Capture] once ``capture_output`` ran here
_noted: set[str] = set()    # notes printed by this process itself


def capture_output() -> Capture:
    """Make this process's ``sys.stdout`` and ``sys.stderr`` ``LineStream``s; returns
    the ``Capture`` the process sends from."""
    capture = Capture()
    sys.stdout.flush()
    sys.stderr.flush()
    sys.stdout = LineStream(capture, "out", sys.__stdout__)
    sys.stderr = LineStream(capture, "err", sys.__stderr__)
    _capture[:] = [capture]
    return capture


def release_output() -> None:
    """Give the process its real streams back, with what was captured last written
    to them (the process is ending and sends no more)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, LineStream):
            stream.finish()
            setattr(sys, name, getattr(sys, f"__{name}__"))
    if _capture:
        for stream, text in _capture.pop().take():
            real = sys.stdout if stream == "out" else sys.stderr
            real.write(text if stream != "note" else f"dac: {text}\n")
        sys.stdout.flush()
        sys.stderr.flush()


def finish_lines() -> None:
    """Hand over partial last lines of both streams (a task ended)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, LineStream):
            stream.finish()


def note(text: str) -> None:
    """dac's remark ``text`` for the user: sent to the root where output is captured
    (the root prints it once per run), else printed here once per process."""
    if _capture:
        _capture[0].add("note", text)
    elif text not in _noted:
        _noted.add(text)
        print(f"dac: {text}", file=sys.stderr, flush=True)


class Printer:
    """Writes OUTPUT messages on the root: each line whole, behind the process's
    prefix (``prefix=False``: none), notes once per run (``new_run``)."""

    def __init__(self, prefix: bool = True, host: str | None = None) -> None:
        self.prefix = prefix
        self.host = host
        self.notes: set[str] = set()

    def new_run(self) -> None:
        """A new run: its notes are printed again."""
        self.notes = set()

    def tag(self, msg: Output) -> str:
        """The prefix of the process's lines: ``(leaf 1234 on host) ``."""
        where = "" if msg.host == self.host else f" on {msg.host}"
        return f"(leaf {msg.pid}{where}) "

    def write(self, msg: Output) -> None:
        """Write an OUTPUT message's lines (and its notes, once per run)."""
        tag = self.tag(msg) if self.prefix else ""
        for stream, text in msg.chunks:
            if stream == "note":
                if text not in self.notes:
                    self.notes.add(text)
                    _write(sys.stderr, f"dac: {text}\n")
                continue
            if tag:
                text = "".join(tag + line for line in text.splitlines(keepends=True))
            _write(sys.stdout if stream == "out" else sys.stderr, text)


def _write(stream: TextIO, text: str) -> None:
    """Write and flush, ignoring a stream nobody reads any more."""
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):       # a closed or broken stream: nobody reads
        pass


def prefix_default() -> bool:
    """Whether lines carry their process's prefix unless a run says: ``DAC_PREFIX=0``
    turns it off."""
    return os.environ.get("DAC_PREFIX", "1").lower() not in ("0", "no", "false", "off")
