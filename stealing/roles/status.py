"""A spawned process's status, shared with its monitor, and what it knows of its own
start: the two things about a process that are not messages."""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from stealing.tree.tasks import TaskId, is_split

# the child's status, shared with the monitor: current task id, finished flag, role,
# the root's pid when the root runs on this host (else 0)
_STATUS = struct.Struct("<qBBi")
ROLES = {0: "process", 1: "router", 2: "leaf"}


class SharedStatus:
    """What the monitor must know if the child dies: written by the child, cheaply.
    After the header, the names of the child's MPI shared-memory segments, which a
    process killed in the middle of a run leaves in ``/dev/shm``."""

    SIZE = 4096

    def __init__(self) -> None:
        self.buf = mmap.mmap(-1, self.SIZE)         # shared (MAP_SHARED) across fork
        _STATUS.pack_into(self.buf, 0, -1, 0, 0, 0)

    def shm(self, names: Iterable[str]) -> None:
        data = "\0".join(names).encode()[: self.SIZE - _STATUS.size - 1]
        self.buf[_STATUS.size:_STATUS.size + len(data) + 1] = data + b"\0"

    def shm_names(self) -> list[str]:
        raw = bytes(self.buf[_STATUS.size:]).split(b"\0\0")[0]
        return [n.decode() for n in raw.split(b"\0") if n]

    def task(self, tid: TaskId) -> None:
        """The task the child runs now: its number for a task of the root (a lost
        process's record names it), -1 for one split off a leaf (its owner has it)."""
        struct.pack_into("<q", self.buf, 0, -1 if is_split(tid) else tid)

    @property
    def current(self) -> int:
        """The task id last written (-1: none)."""
        return struct.unpack_from("<q", self.buf, 0)[0]

    def role(self, role: str) -> None:
        self.buf[9] = 1 if role == "router" else 2

    def root(self, pid: int) -> None:
        """The root runs on this host as ``pid``: the monitor ends the child if it dies."""
        struct.pack_into("<i", self.buf, 10, pid)

    def finished(self) -> None:
        self.buf[8] = 1

    def read(self) -> tuple[int, int, int]:
        """``(task id, finished flag, role number)``: what the monitor records."""
        tid, finished, role = _STATUS.unpack_from(self.buf, 0)[:3]
        return tid, finished, role

    @property
    def root_pid(self) -> int:
        return struct.unpack_from("<i", self.buf, 10)[0]



@dataclass
class Start:
    """What a spawned process knows of its own start, beside its ``Init``: the times
    of its steps (``main``, ``mpi``, ``init``: ``stealing.observe.stats``), the MPI
    shared-memory files it maps, its status shared with its monitor, and the
    monitor's pid (0: none, a launcher's rank)."""
    marks: dict[str, float]
    shm: list[str]
    status: SharedStatus
    monitor: int = 0
