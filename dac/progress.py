"""One live line on a terminal while a run is long: tasks done of those known, leaves at
work, steals, seconds.

A thread of the root redraws the line on stderr every ``EVERY_S`` once a run has
lasted ``AFTER_S`` seconds, and wipes it when the run ends, so the statistics table
printed afterwards stands alone. It touches neither MPI nor the warm tree's socket:
the loop that drives the run counts tasks here (``sent``, ``took``), and the
scheduler publishes what it sees of the tree as a tuple it replaces (``view``:
leaves at work, leaves, steals answered at the root), which is read whole.

Shown when stderr is a terminal, unless ``progress=False`` (``dac run --quiet``) or
``DAC_PROGRESS=0``; ``DAC_PROGRESS=1`` shows it on any stderr.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from stealing.roles.scheduler import Scheduler

AFTER_S = 2.0       # a run shorter than this shows no line
EVERY_S = 0.25      # redraw interval


def wanted(option: bool | None) -> bool:
    """Whether a run shows the line: ``option`` (True, False or None: automatic)."""
    if option is not None:
        return bool(option)
    env = os.environ.get("DAC_PROGRESS")
    if env in ("0", "1"):
        return env == "1"
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """The counts of one run and the thread that shows them."""

    def __init__(self, sched: Scheduler, stream: TextIO | None = None) -> None:
        self.sched = sched
        self.stream = stream or sys.stderr
        self.known = 0          # tasks sent to the tree
        self.done = 0           # their results taken
        self.started = time.monotonic()
        self.shown = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name="dac-progress")

    def __enter__(self) -> "Progress":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.shown:
            self._write("\r\033[K")

    def sent(self, n: int) -> None:
        self.known += n

    def took(self, n: int) -> None:
        self.done += n

    def line(self) -> str:
        parts = [f"{self.done}/{self.known} tasks"]
        view = getattr(self.sched, "view", None)
        if view is not None:
            busy, leaves, steals = view
            parts += [f"{busy}/{leaves} leaves at work", f"{steals} steals at the root"]
        parts.append(f"{time.monotonic() - self.started:.1f} s")
        return "dac: " + ", ".join(parts)

    def _loop(self) -> None:
        if self._stop.wait(AFTER_S):
            return
        while not self._stop.is_set():
            self._write("\r\033[K" + self.line())
            self.shown = True
            self._stop.wait(EVERY_S)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass
