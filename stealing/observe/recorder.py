"""What a process did over time, for ``dac run --timeline``: spans (busy, idle) and
marks (steals with their size and round trip).

A job that asks for a timeline (``Job.timeline``) makes every process keep a
``Recorder``: a leaf adds a busy span per task it runs (the same seconds it adds to
``busy_s``, so the file's busy time is the statistics'), an idle span per wait for work,
and a mark per batch that comes (``local``: tasks of the pool, ``split``: work split
off a busy leaf; the round trip from its request, 0 for the first batch of a round,
which nobody asked for) and per "no more" (``failed``); a router marks its requests to
its parent (``remote``, ``remote-failed``). Spans of one kind that follow each other within
``MERGE_S`` are one span whose length is their sum, so a run of many short tasks costs
a few list entries. Times are ``time.perf_counter()`` while recording and wall clock
(``time.time()``) when exported, so the root can put every process on one axis.
"""

from __future__ import annotations

import time
from typing import Any

MERGE_S = 1e-3          # spans of one kind closer than this are one
MAX_ENTRIES = 200_000   # per list: a run that would make more keeps the first ones


class Recorder:
    """Spans and marks of one process over one job."""

    __slots__ = ("offset", "spans", "marks", "asked")

    def __init__(self) -> None:
        self.offset = time.time() - time.perf_counter()
        self.spans: list[list[Any]] = []    # [start, end, kind]: the end grows
        self.marks: list[list[Any]] = []    # [time, kind, tasks, round trip]
        self.asked: float | None = None     # perf_counter time of the request awaiting
        #                                     its answer

    def span(self, kind: str, start: float, seconds: float) -> None:
        """``seconds`` of ``kind`` from ``start`` (merged into the last span of that
        kind when it ended within ``MERGE_S``)."""
        spans = self.spans
        if spans:
            last = spans[-1]
            if last[2] == kind and start - last[1] < MERGE_S:
                last[1] += seconds
                return
        if len(spans) < MAX_ENTRIES:
            spans.append([start, start + seconds, kind])

    def ask(self) -> None:
        """A steal request went out now."""
        self.asked = time.perf_counter()

    def answer(self, kind: str, tasks: int) -> None:
        """The answer to the request came now: a mark with its round trip. A refusal
        (``failed``) leaves the request standing: a leaf told "no more" waits, and
        tasks that come later (split off a busy leaf) answer it."""
        now = time.perf_counter()
        rtt = now - self.asked if self.asked is not None else 0.0
        if not kind.endswith("failed"):
            self.asked = None
        if len(self.marks) < MAX_ENTRIES:
            self.marks.append([now, kind, tasks, rtt])

    def export(self) -> dict[str, list[list[Any]]]:
        """Spans and marks on the wall clock, for the root's timeline file."""
        off = self.offset
        return {"spans": [[round(s + off, 6), round(e + off, 6), k]
                          for s, e, k in self.spans],
                "marks": [[round(t + off, 6), k, n, round(rtt, 6)]
                          for t, k, n, rtt in self.marks]}
