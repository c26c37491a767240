"""A message trace for studying the scheduler: ``DAC_TRACE_DIR=dir`` makes every process
of a run append one line per message it sends or takes to ``dir/<pid>.trace``.

A line is ``time  who  send|take  link  TAG  fields``: ``time`` from ``time.time()``
(the processes share a clock on one host), ``who`` the process (``root``, or
``router``/``leaf`` and its path from the root: ``leaf/1/0``), ``link`` the other end (``up``, or
the child's number). Lists in messages show as their length. Off (the default), the
mailbox pays one attribute test per message.
"""

from __future__ import annotations

import os
import time
from typing import TextIO

from stealing.transport import protocol as P

DIR = os.environ.get("DAC_TRACE_DIR") or None


class Trace:
    """One process's trace file."""

    def __init__(self, who: str) -> None:
        assert DIR is not None, "a Trace is made only when DAC_TRACE_DIR is set"
        os.makedirs(DIR, exist_ok=True)
        self.who = who
        self.file: TextIO = open(os.path.join(DIR, f"{os.getpid()}.trace"), "a",
                                 buffering=1)

    def message(self, way: str, link: str, tag: int, obj: object) -> None:
        """One line: a message sent or taken (``way``) on ``link``."""
        self.file.write(f"{time.time():.6f} {self.who} {way} {link} {P.name(tag)} "
                        f"{summary(obj)}\n")


def open_trace(who: str) -> Trace | None:
    """A trace for this process if ``DAC_TRACE_DIR`` is set, else None."""
    return Trace(who) if DIR else None


def summary(obj: object) -> str:
    """A message's fields, lists as their length and, for lists of tasks or results,
    the ids of split work (``path:number``): ``Results(results=2[0.1:7,12], want=5)``."""
    if hasattr(obj, "_fields"):
        parts = []
        for f in obj._fields:
            v = getattr(obj, f)
            if isinstance(v, list) and v and isinstance(v[0], tuple) and len(v[0]) == 2:
                parts.append(f"{f}={len(v)}[{','.join(_id(t[0]) for t in v[:10])}]")
            elif isinstance(v, (list, tuple, dict)):
                parts.append(f"{f}={len(v)}")
            elif v is not None:
                parts.append(f"{f}={v!r}"[:40])
        return f"{type(obj).__name__}({', '.join(parts)})"
    if isinstance(obj, dict):
        return f"dict({len(obj)})"
    return type(obj).__name__


def _id(tid: object) -> str:
    """A task id for the trace: the root's number, or ``path:number`` of split work."""
    if isinstance(tid, tuple) and len(tid) == 2 and isinstance(tid[0], tuple):
        return f"{'.'.join(map(str, tid[0]))}:{tid[1]}"
    return str(tid)


def _path(who: str) -> tuple[int, ...]:
    """The tree path of a trace's ``who``: () for the root, (1, 0) for ``leaf/1/0``."""
    return tuple(int(p) for p in who.split("/")[1:])


def delivery_delays(lines: list[str], tag: str) -> list[tuple[float, float, str]]:
    """How long the messages ``tag`` (``"SPLIT"``) sent down the tree took from the
    sender's send to the receiver's take, from the trace lines of a run's processes
    (any order): ``[(delay s, sent at, receiver)]`` in the order sent. A send is
    paired with its receiver's takes in order (MPI keeps a link's messages in order);
    one not taken (the run ended first) is left out. How a thief's split that waited
    for the victim's clock tick (50 ms) instead of its doorbell was found."""
    sent: dict[tuple[int, ...], list[float]] = {}
    taken: dict[tuple[int, ...], list[tuple[float, str]]] = {}
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 5 or parts[4] != tag:
            continue
        at, who, way, link = float(parts[0]), parts[1], parts[2], parts[3]
        if way == "send" and link != "up":
            sent.setdefault(_path(who) + (int(link),), []).append(at)
        elif way == "take" and link == "up":
            taken.setdefault(_path(who), []).append((at, who))
    out = []
    for path, times in sent.items():
        for t0, (t1, who) in zip(sorted(times), sorted(taken.get(path, []))):
            out.append((t1 - t0, t0, who))
    return sorted(out, key=lambda d: d[1])
