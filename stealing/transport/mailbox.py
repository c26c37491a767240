"""Waiting for messages without burning a core.

MPICH's blocking receives spin at 100% CPU (``../notes/mpi-facts.md``): on a 2-core
machine one idle router spinning halves the leaves' speed. Every wait in dac is an
``Iprobe`` loop with a capped exponential backoff sleep: right after a message the
next probe comes within tens of microseconds; an idle process settles at one probe
per ``max_sleep`` (about 0.5% of a core), so a steal is answered within a few ms.
Sends are non-blocking (``isend``) and completed by the same loop, so two processes
sending large messages to each other never deadlock. A message's large buffers (NumPy
arrays) travel beside its pickle stream, uncopied (``stealing.transport.frames``).

A link whose peer died (Open MPI with ULFM, ``MPI.ERRORS_RETURN`` on the link) fails
every operation with ``MPI_ERR_PROC_FAILED``: the mailbox stops using it and hands the
caller a ``LOST`` pseudo-message for it (``protocol.LOST``, never sent); a lost link to
the parent calls ``on_parent_lost`` instead, which ends the process.

A process with a doorbell (``stealing.transport.bell``) spends its sleeps in ``select`` on it:
a message whose sender rang wakes it within microseconds instead of at the next probe.
"""

from __future__ import annotations

import os
import select
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from stealing.transport import frames
from stealing.transport.bell import Bell, ring
from stealing.transport.protocol import LOST
from stealing.transport.segments import Segments

if TYPE_CHECKING:
    from mpi4py.MPI import Comm, Request, Status

MIN_SLEEP = 20e-6
MAX_SLEEP = 1e-3        # while work is under way: a steal waits at most ~1 ms
IDLE_SLEEP = 10e-3      # while nothing is under way (~1% of a core) ...
DEEP_IDLE_SLEEP = 50e-3  # ... and after a second of that (~0.2%): a kept Runtime between
DEEP_IDLE_AFTER = 1.0    # runs; the next job then reaches a level within 50 ms
# The longest sleep of a process whose every link rings its bell (see ``wait``): a
# message is found within microseconds of its ring, and this is only the net under a
# ring that was lost. At 1 ms, 120 leaves of a 128-leaf tree waiting for work probed
# 1000 times a second each: 0.2 CPU-s a leaf over a 14 s run, both cores full.
RUNG_SLEEP = 50e-3
# On a crowded host the net of a wait whose links all ring is this, from its first
# sleep: a leaf waiting for work wakes once a second, where it woke 20 times a second
# (8 idle leaves of a kept Runtime on 2 cores: 1.3 wakes a second each, not 21; 256
# sleeping leaves: 0.58-0.65 wakes a node, not 0.80-0.87, and a start-up of 41-48 s,
# not 50-56). A net that doubled from RUNG_SLEEP still ran out 5,517 times in a job of
# 256 such leaves (of their 12,613 wakes; each the wake of a process that found
# nothing to do): from a second, 0.22-0.24 wakes a node against 0.31-0.39, and
# efficiency 0.46-0.56 (median 0.52, six runs) against 0.47-0.52 (median 0.49, four).
RUNG_IDLE_SLEEP = 1.0
# On a crowded host (more leaves than cores) every wake-up takes CPU from a task:
# there a wait whose links all ring sleeps until a ring (or RUNG_IDLE_SLEEP) from its
# start, and after a ring whose look found nothing (a send completing late) it probes
# from AFTER_RING_SLEEP. Elsewhere a wait probes from ``min_sleep`` up: the comb on 2
# leaves ran at 1.25-1.48x its elision with long waits (6 runs) against 1.31-1.60x
# (7 runs). 256 sleeping leaves on 2 cores woke 0.74-0.89 times a node with long waits
# (efficiency 0.38-0.45), 2.44 without (0.32). The root and the routers wait so on any
# host (``ring_waits``): they run no task, and each probe after a message is a wake
# taken from the leaves' cores. The 2-leaf comb's root woke about 5 times a message and
# spent 26-34 ms of CPU a job of 0.28 s; waiting for rings 14-22 ms, the job's median
# 0.272-0.300 s against 0.291-0.310 s (three rounds of eight jobs each).
AFTER_RING_SLEEP = 1e-3

# MPICH's ``Improbe`` matches a message only against what an earlier call's progress
# took in: a message that came while this process slept is found by the second probe,
# never by the first (measured here: after a ring, or 50 ms after the message came,
# always the second, 0.27 us an empty probe). So a look at a link probes again once
# when the first finds nothing, instead of leaving the message to the next look, a
# sleep later (2 ms later for a running task polled on a ring): the second look.

# what a wait hands its caller: (index of the link in ``comms``, source rank, tag,
# payload); the payload is whatever the peer sent (``protocol.PAYLOADS``)
Received = tuple[int, int, int, Any]


def crowded(leaves: int) -> bool:
    """A tree of ``leaves`` leaves crowds this host: more leaves than its cores (the
    whole tree's count, so a tree over many hosts counts as crowded too, and waits
    with fewer wake-ups; see AFTER_RING_SLEEP)."""
    return leaves > (os.cpu_count() or 1)


class Tracer(Protocol):
    """What the mailbox writes a message trace to (``stealing.observe.trace.Trace``,
    a layer above: it is not imported here)."""

    def message(self, way: str, link: str, tag: int, obj: object) -> None: ...


class Mailbox:
    """Receives from a set of intercommunicators and completes pending sends."""

    def __init__(self, MPI: ModuleType, min_sleep: float = MIN_SLEEP,
                 max_sleep: float = MAX_SLEEP) -> None:
        self.MPI = MPI
        self.min_sleep = min_sleep
        self.crowded = False        # more leaves than cores here: see AFTER_RING_SLEEP
        self.ring_waits = False     # a root or router: sleeps until rung on any host (ditto)
        self.max_sleep = max_sleep
        # [(message's sends, bell name to ring when they complete, comm)]: under way
        self._pending: list[tuple[frames.Outgoing | Request, bytes | None, Comm]] = []
        self._status: Status = MPI.Status()
        # [(comm, seconds)]: links with emulated latency
        self._delays: list[tuple[Comm, float]] = []
        # [(due time, comm, source, tag, payload)], arrival order
        self._held: list[tuple[float, Comm, int, int, Any]] = []
        # a stealing.observe.trace.Trace (DAC_TRACE_DIR), or None
        self.trace: Tracer | None = None
        # id(comm) -> "up" or the number of its rank 0 child
        self._links: dict[int, int | str] = {}
        self.bell: Bell | None = None   # this process's bell, or None
        # (id(comm), rank) -> bell name of a process to ring: those of this host
        self._ring_to: dict[tuple[int, int], bytes] = {}
        # the shared-memory segments this process sends large buffers in, to the
        # processes of this host (``stealing.transport.segments``); None: all by MPI
        self.segments: Segments | None = None
        self.sleeps = 0     # sleeps between probes so far (each ends in a probe)
        # id(comm) of links whose peers ring this process's bell after each send
        self._rung: set[int] = set()
        # id(comm) -> (comm, MPI.Exception): links found dead
        self._failed: dict[int, tuple[Comm, BaseException]] = {}
        # called when the link named "up" fails
        self.on_parent_lost: Callable[[BaseException], object] | None = None
        # () -> file descriptors a wait wakes on (the root's watch:
        # stealing.host.watch), or None
        self.alarms: Callable[[], Sequence[int]] | None = None
        # called each time a wait has found nothing, before it sleeps: sends what the
        # process held back, and says in how many seconds it must be called again
        # (None: no need) (``stealing.roles.node.Node.flush_returns``)
        self.before_sleep: Callable[[], float | None] | None = None

    def name_link(self, comm: Comm, first: int | str) -> None:
        """Name ``comm`` in the trace: ``"up"``, or its rank 0 child's number."""
        self._links[id(comm)] = first

    def _link(self, comm: Comm | None, rank: int) -> str:
        """The trace's name of ``rank`` of ``comm``: ``up``, or a child's number."""
        first = self._links.get(id(comm), "?")
        return str(first + rank) if type(first) is int else str(first)

    def set_delay(self, comm: Comm, seconds: float) -> None:
        """Deliver what arrives on ``comm`` ``seconds`` late (an emulated wide-area link;
        the order of messages is kept)."""
        self._delays = [(c, d) for c, d in self._delays if c is not comm]
        if seconds > 0:
            self._delays.append((comm, seconds))

    def _delay_of(self, comm: Comm) -> float:
        """The emulated latency of ``comm`` (0: none)."""
        for c, d in self._delays:
            if c is comm:
                return d
        return 0.0

    def ring_link(self, comm: Comm, rank: int, name: bytes) -> None:
        """Ring bell ``name`` after each message to ``rank`` of ``comm``, a process
        of this host (large buffers go to it by shared memory)."""
        self._ring_to[(id(comm), rank)] = name

    def rung_by(self, comm: Comm) -> None:
        """The peers of ``comm`` ring this process's bell after every send to it."""
        self._rung.add(id(comm))

    def rung_fd(self, comm: Comm) -> int | None:
        """The bell's socket where the peers of ``comm`` ring it, else None."""
        if self.bell is None or id(comm) not in self._rung:
            return None
        return self.bell.sock.fileno()

    def _all_rung(self, comms: Sequence[Comm | None]) -> bool:
        """Every link of ``comms`` rings this process's bell (it has one)."""
        return self.bell is not None and bool(self._rung) and \
            all(c is None or id(c) in self._rung for c in comms)

    # sending -----------------------------------------------------------------
    def send(self, comm: Comm, obj: object, dest: int, tag: int) -> None:
        """Start sending ``obj`` (completed by later waits), then ring the receiver."""
        if self.trace is not None:
            self.trace.message("send", self._link(comm, dest), tag, obj)
        if self._failed and id(comm) in self._failed:
            return                  # a dead peer: what it would get is given again
        try:
            name = self._ring_to.get((id(comm), dest)) if self._ring_to else None
            req = frames.isend(self.MPI, comm, obj, dest, tag,
                               self.segments if name is not None else None)
            if not req.Test():
                self._pending.append((req, name, comm))
        except self.MPI.Exception as exc:
            self._fail(comm, exc)
            return
        if name is not None:
            ring(name)

    def progress(self) -> None:
        """Complete the sends that can be (ringing their receivers)."""
        if self._pending:
            left = []
            for req, name, comm in self._pending:
                try:
                    if not req.Test():
                        left.append((req, name, comm))
                        continue
                except self.MPI.Exception as exc:
                    self._fail(comm, exc)
                    continue
                if name is not None:
                    ring(name)      # it may have reached the receiver only now
            self._pending = left

    def _fail(self, comm: Comm, exc: BaseException) -> None:
        """``comm``'s peer is dead: nothing more is sent on it or read from it."""
        if id(comm) in self._failed:
            return
        self._failed[id(comm)] = (comm, exc)
        self._pending = [p for p in self._pending if p[2] is not comm]
        if self._links.get(id(comm)) == "up" and self.on_parent_lost is not None:
            self.on_parent_lost(exc)

    def forget(self, comm: Comm) -> None:
        """The caller dropped ``comm`` (its peer was lost): forget what was kept of it."""
        self._failed.pop(id(comm), None)
        self._pending = [p for p in self._pending if p[2] is not comm]
        self._held = [h for h in self._held if h[1] is not comm]
        self._delays = [(c, d) for c, d in self._delays if c is not comm]
        self._ring_to = {k: v for k, v in self._ring_to.items() if k[0] != id(comm)}
        self._rung.discard(id(comm))

    def flush(self, timeout: float | None = None) -> bool:
        """Complete every pending send; False if ``timeout`` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = self.min_sleep
        while True:
            self.progress()
            if not self._pending:
                return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, self.max_sleep)

    # receiving ---------------------------------------------------------------
    def poll(self, comms: Sequence[Comm | None]) -> Received | None:
        """One non-blocking look: ``(index, source, tag, payload)`` or None."""
        got = self._poll(comms)
        if got is not None and self.trace is not None:
            self.trace.message("take", self._link(comms[got[0]], got[1]), got[2], got[3])
        return got

    def _poll(self, comms: Sequence[Comm | None]) -> Received | None:
        """``poll`` without the trace."""
        self.progress()
        status = self._status
        for i, comm in enumerate(comms):
            if comm is None:
                continue
            if self._failed and id(comm) in self._failed:
                return i, 0, LOST, self._failed[id(comm)][1]
            again = True            # the second look (see above ``Received``)
            while True:
                try:
                    msg = comm.improbe(self.MPI.ANY_SOURCE, self.MPI.ANY_TAG, status)
                    if msg is None:
                        if again:
                            again = False
                            continue
                        break
                    got = (status.Get_source(),) + frames.receive(self.MPI, comm, msg,
                                                                   status)
                except self.MPI.Exception as exc:
                    self._fail(comm, exc)
                    return i, 0, LOST, exc
                delay = self._delay_of(comm) if self._delays else 0.0
                if not delay:
                    return (i,) + got
                self._held.append((time.monotonic() + delay, comm) + got)
        if self._held:             # the earliest due (per link, arrival order is kept)
            k = min(range(len(self._held)), key=lambda j: self._held[j][0])
            due, comm, source, tag, payload = self._held[k]
            if due <= time.monotonic():
                for i, c in enumerate(comms):
                    if c is comm:
                        del self._held[k]
                        return i, source, tag, payload
        return None

    def _until_due(self) -> float:
        """Seconds until a held (delayed) message is due."""
        if not self._held:
            return float("inf")
        return min(h[0] for h in self._held) - time.monotonic()

    def _sleep(self, pause: float) -> bool | None:
        """Sleep up to ``pause`` seconds, on the bell if there is one: True if
        rung, None if one of the alarms (the root's watch) is ready, else False."""
        alarms = self.alarms() if self.alarms is not None else ()
        self.sleeps += 1
        if self.bell is not None:
            return self.bell.sleep(pause, alarms)
        if alarms:
            return None if select.select(alarms, [], [], pause)[0] else False
        time.sleep(pause)
        return False

    def _sleeps(self, comms: Sequence[Comm | None],
                max_sleep: float | None) -> tuple[float, float, bool]:
        """A wait's first sleep, its longest, and whether it sleeps until a ring
        from its start (``long_waits``: a message comes with a ring, no probing)."""
        delay = self.min_sleep
        cap = self.max_sleep if max_sleep is None else max_sleep
        rung = self._all_rung(comms)
        if rung:
            cap = max(cap, RUNG_SLEEP)
        long_waits = rung and (self.crowded or self.ring_waits)
        if long_waits:
            if self.crowded:
                cap = max(cap, RUNG_IDLE_SLEEP)
            delay = cap
        return delay, cap, long_waits

    def wait(self, comms: Sequence[Comm | None], timeout: float | None = None,
             on_idle: Callable[[], object] | None = None, max_sleep: float | None = None,
             idle_every: float = 1.0) -> Received | None:
        """Block (sleeping) until a message arrives on one of ``comms``.

        Returns ``(index, source, tag, payload)``, or None after ``timeout`` seconds.
        ``on_idle`` is called every ``idle_every`` seconds of waiting (a watchdog hook).
        Where every link rings this process's bell, a sleep lasts up to ``RUNG_SLEEP``
        (``RUNG_IDLE_SLEEP`` on a crowded host) whatever ``max_sleep`` says (a ring
        wakes it; its own sends under way still keep it to ``max_sleep``: they
        complete only while it probes).
        """
        delay, cap, long_waits = self._sleeps(comms, max_sleep)
        start = time.monotonic()
        next_idle = start + idle_every
        while True:
            got = self.poll(comms)
            if got is not None:
                return got
            again = self.before_sleep() if self.before_sleep is not None else None
            now = time.monotonic()
            if timeout is not None and now - start > timeout:
                return None
            if on_idle is not None and now > next_idle:
                on_idle()
                next_idle = now + idle_every
            if cap >= IDLE_SLEEP and now - start > DEEP_IDLE_AFTER:
                cap = max(cap, DEEP_IDLE_SLEEP)
            pause = max(0.0, min(delay, self._until_due()))
            if again is not None:
                pause = min(pause, again)
            if self._pending:
                pause = min(pause, self.max_sleep)
            if timeout is not None:
                pause = min(pause, max(0.0, start + timeout - now))
            woke = self._sleep(pause)
            if woke is None and on_idle is not None:    # a watched process ended
                on_idle()
                next_idle = time.monotonic() + idle_every
            elif woke:      # a message is on its way (found by the look that follows,
                # else a ring ahead of a send completing: probed for a while)
                delay = AFTER_RING_SLEEP if long_waits else self.min_sleep
                continue
            delay = min(delay * 2, cap)
