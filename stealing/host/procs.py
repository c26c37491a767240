"""This machine's processes, read from ``/proc``: is one alive, which are below a
given one, signalling the ones dac started. No MPI here."""

from __future__ import annotations

import os
import time
from typing import Iterable


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command's name (the state first),
    or None when there is no such process."""
    if pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie has ended)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


PF_EXITING = 0x4       # a task's flag (``/proc/PID/stat``, field 9) from the start of its exit


def ending(pid: int) -> bool:
    """True once ``pid`` has begun to exit, or has ended. A killed process closes its
    files before it is seen to end (its pidfd readable, a zombie), and what those
    closes set off (MPI's proxy ending the processes below it) can end before it:
    but its exit flag is set before any of its files closes."""
    fields = _stat(pid)
    return fields is None or fields[0] in ("Z", "X") or bool(int(fields[6]) & PF_EXITING)


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/PID/stat``), or None
    when it is not running: with the pid, it names one process for good (a pid is
    reused, a pid and its start time are not)."""
    fields = _stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def started_at(ticks: int) -> float | None:
    """The wall-clock time (``time.time()``) of a ``start_time`` reading."""
    try:
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, StopIteration, ValueError):
        return None


def same_process(pid: int, started: object) -> bool:
    """``pid`` runs and is the process that started at ``started`` (a
    ``start_time``); False for a pid reused since."""
    return isinstance(started, int) and start_time(pid) == started


def signal_all(pids: Iterable[int], sig: int) -> None:
    """Send ``sig`` to those of ``pids`` still alive (never to this process)."""
    me = os.getpid()
    for pid in set(pids):
        if pid != me and alive(pid):
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def wait_gone(pids: Iterable[int], timeout: float) -> None:
    """Wait up to ``timeout`` seconds for ``pids`` to end."""
    me = os.getpid()
    rest = {p for p in pids if p != me}
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in rest) and time.monotonic() < deadline:
        time.sleep(0.01)


def table() -> dict[int, tuple[str, int]]:
    """``{pid: (name, parent pid)}`` of this machine's processes."""
    out: dict[int, tuple[str, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out[int(entry)] = (stat[stat.find("(") + 1:stat.rfind(")")], int(fields[1]))
    return out


def children_named(prefix: str) -> list[int]:
    """Children of this process whose name starts with ``prefix``."""
    me = os.getpid()
    return [pid for pid, (name, parent) in table().items()
            if parent == me and name.startswith(prefix)]


def descendants(roots: Iterable[int]) -> list[int]:
    """``roots`` and every process below them."""
    procs = table()
    found: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(p for p, (_, parent) in procs.items() if parent == pid)
    return found


def processes_of_run(run_dir: str) -> list[int]:
    """This process's descendants started for the run whose folder is ``run_dir``:
    dac's spawned processes (monitors and workers) carry it as their last argument,
    so a process this run did not start is never among them."""
    me = os.getpid()
    mark = run_dir.encode()
    found = []
    for pid in descendants([me]):
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if mark in argv:
            found.append(pid)
    return found
