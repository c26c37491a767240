"""The root's watch over the processes of its tree on its own host.

A monitor (``stealing.roles.process``) records how its child ended, and the root reads those
records. But a monitor can be killed too, and so can the processes MPI started for the
run (``mpiexec``, its proxies), and nothing records that: the root then waited for
ever, or the caller crashed at exit in ``MPI_Finalize``. So the root also watches, on
its own host, the monitor of every process of the tree (a monitor's child dies with it:
``PR_SET_PDEATHSIG``) and the process manager MPI started for it. One that is gone is
a loss like a recorded one: the run ends at once with a ``LostProcessError`` naming it,
and MPI is not finalized.

Each watched process is a *pidfd* (``os.pidfd_open``): it becomes readable when the
process ends, so the root's waits (``stealing.transport.mailbox``) wake at once. The
first to end is the one named, and MPI's process manager ends the others within
milliseconds, often before the root has looked: so the pidfds are also registered in
an *epoll* set, which lists ready descriptors in the order they became ready, and
that order (not a ranking of kinds: ``mpiexec`` ends the job, and itself, with a
SIGKILL whether it or a monitor went first) says which ended first. Where there are
no pidfds, the root looks every ``WATCH_S``. No MPI here.
"""

from __future__ import annotations

import os
import select
import socket
import time
from typing import Any, Iterable

from stealing.host.procs import alive, children_named, descendants, ending, table

WATCH_S = 0.5           # how often the root looks where there are no pidfds


class Watch:
    """Monitors and process managers of one tree, on the root's host."""

    def __init__(self) -> None:
        self.host = socket.gethostname()
        # pid -> (rank, role, how it is named, child)
        self.watched: dict[int, tuple[int, str, str, int]] = {}
        self.fds: dict[int, int] = {}       # pidfd -> pid
        self.ends: select.epoll | None = None   # the pidfds, ready in order of ending
        self.proxy: dict[int, int] = {}     # monitor pid -> its parent (MPI's proxy)
        self.next_look = 0.0

    def _add(self, pid: int, rank: int, role: str, how: str, child: int = 0) -> None:
        """Watch ``pid`` (``rank``: which of several gone at once is named)."""
        if pid in self.watched or not alive(pid):
            return
        self.watched[pid] = (rank, role, how, child)
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            return
        self.fds[fd] = pid
        if self.ends is None:
            self.ends = select.epoll()
        self.ends.register(fd, select.EPOLLIN)

    def ready(self, role: str, pid: int, host: str, monitor: int) -> None:
        """A process of the tree said READY (``monitor`` 0: a spawn-per-batch leaf,
        which ends after its batch, is not watched)."""
        if monitor and host == self.host:
            self._add(monitor, 2 if role == "leaf" else 3, f"{role}'s monitor",
                      f"ended, and its {role} pid {pid} with it", pid)
            self.proxy[monitor] = table().get(monitor, ("?", 0))[1]

    def forget(self, pids: Iterable[int]) -> None:
        """Processes that left the tree on purpose (let go): their monitors, and
        the proxy MPI started for them if it served no other."""
        leaving = set(pids)
        going = [m for m, w in self.watched.items() if w[3] in leaving]
        for monitor in going:
            self._drop(monitor)
            proxy = self.proxy.pop(monitor, None)
            if proxy and proxy not in self.proxy.values():
                self._drop(proxy)

    def _drop(self, pid: int) -> None:
        """Stop watching ``pid`` (its pidfd closed)."""
        self.watched.pop(pid, None)
        for fd, watched in list(self.fds.items()):
            if watched == pid:
                if self.ends is not None:
                    self.ends.unregister(fd)
                os.close(fd)
                del self.fds[fd]

    def note_managers(self) -> None:
        """The process manager MPI runs for this process now (after a spawn):
        ``mpiexec`` and the proxies below it."""
        found = children_named("mpiexec")
        if not found:
            return
        names = table()
        for pid in descendants(found):
            name = names.get(pid, ("?", 0))[0]
            if name.startswith(("mpiexec", "hydra_pmi_proxy")):
                self._add(pid, 0 if name.startswith("mpiexec") else 1, "process manager",
                          f"({name}) ended: MPI cannot go on without it")

    def pids(self) -> list[int]:
        """Every process watched, and the children of the monitors (the root's
        clean-up after a loss)."""
        return list(self.watched) + [w[3] for w in self.watched.values() if w[3]]

    def alarms(self) -> list[int]:
        """The pidfds a wait should wake on."""
        return list(self.fds)

    def look(self) -> dict[str, Any] | None:
        """A record (as a monitor writes one, with ``how`` in words) of a watched
        process that ended, or None: the first that ended. Without pidfds, of
        several seen gone together, the one upstream: ``mpiexec`` before its
        proxies, a proxy before the monitors, a leaf's monitor before a router's.
        Cheap with pidfds (one ``epoll`` poll); otherwise at most every ``WATCH_S``."""
        if self.ends is not None:
            ended = self.ends.poll(0)
            if not ended:
                return None
            return self._record(self.fds[ended[0][0]])
        now = time.monotonic()
        if now < self.next_look:
            return None
        self.next_look = now + WATCH_S
        gone = [pid for pid in self.watched if not alive(pid)]
        if not gone:
            return None
        return self._record(min(gone, key=lambda p: self.watched[p][0]))

    def _record(self, pid: int) -> dict[str, Any]:
        """The record of watched ``pid``, which ended; with the process managers
        that ended too, or are ending, when ``pid`` is not one of them."""
        _rank, role, how, _child = self.watched[pid]
        if role != "process manager":
            how += self._managers_gone()
        return {"pid": pid, "host": self.host, "role": role, "code": -9, "tid": -1,
                "time": time.time(), "how": how}

    def _managers_gone(self) -> str:
        """Words for the process managers that ended or are ending. Which went
        first cannot always be told: a killed ``mpiexec`` closes its links before
        its own end shows, its proxy ends the monitors below it on that, and one
        of those can be seen to end first; a killed monitor makes ``mpiexec`` end
        the job, and itself, a moment later. So both are named."""
        gone = [(w[0], pid, w[2]) for pid, w in self.watched.items()
                if w[1] == "process manager" and ending(pid)]
        if not gone:
            return ""
        _rank, pid, how = min(gone)
        name = how.split(")", 1)[0] + ")"
        return (f"; MPI's process manager pid {pid} {name} ended at the same time "
                "(which of the two went first is not known)")

    def close(self) -> None:
        """Close every pidfd (the watch is over)."""
        for fd in self.fds:
            os.close(fd)
        self.fds = {}
        if self.ends is not None:
            self.ends.close()
            self.ends = None
