"""Wake-ups for a leaf's running task: when its parent rings, and by the clock.

Below its horizon a leaf's task runs in a serial context, as the elision does
(``dac.stealable``): a spawn there neither counts itself towards the next poll nor
keeps the recursion's level, so nothing on its path says when to read messages. A
signal does: its handler (run by Python between two bytecodes of the main thread)
turns the task back into the leaf's own context, so the next spawn polls.

Two signals, while a task runs:

- ``SIGIO`` when the parent rings the leaf's doorbell (``stealing.transport.bell``),
  which it does after every message it sends: the socket is put in ``O_ASYNC`` mode,
  owned by the main thread (Linux; else by the process: ``_signal_this_thread``).
  A thief's request is then read at once where the signal
  finds the program's own code running (``dac.stealable.StealableContext._tick``),
  else at the task's next spawn; a leaf nobody writes to gets no signal at all.
- ``SIGALRM`` by the clock (``ITIMER_REAL``: a task that sleeps must still answer):
  every ``period`` seconds where nobody rings (a parent on another host), else first
  after ``period`` (to learn early whether the task's spawns are slow) and then every
  ``slow_period`` (captured output goes up at polls). ``soon`` brings the next one
  forward: a ring may come ahead of a send that completes late.

``pause`` stops both while the task polls by itself (every spawn counted), and
``rings_only`` stops the clock alone (where spawns are slow: a ring is answered at
once, where before it waited for the next spawn, a nap or a long loop away: the
median split on a spine of 3 ms levels took 0.6-2.3 ms to reach its victim, now
0.08-0.22 ms); ``resume`` starts them again.

A tick every 2 ms on every leaf, without the rings, cost the 128-leaf sleep tree on 2
cores most of its efficiency (0.70-0.72 without ticks, 0.43-0.48 with them): 64,000
signals a second, each waking a sleeping process, also while it waited at ``sync``.

The signals run only while a task does (an idle leaf gets none), only in the main
thread (where Python runs handlers), and never where the program set its own handler
for them. Interrupted system calls are restarted (``siginterrupt``), and Python
retries its own (PEP 475): ``time.sleep`` in a task sleeps as long as asked.
"""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import sys
import threading
from typing import Any, Callable

# the handler as set, not made an enum: ``signal.getsignal`` cost 4 us a call (the C
# module ``signal`` wraps, where there is one)
_handler_of: Callable[[int], Any] = getattr(sys.modules.get("_signal"), "getsignal",
                                            signal.getsignal)

# what a signal calls now, with True for a ring and the frame it interrupted (None:
# stopped; a signal raised just before that still finds the handler, which then
# does nothing)
_target: list[Callable[[bool, Any], None] | None] = [None]
_ring_fd: list[int | None] = [None]     # the doorbell put in O_ASYNC mode, if any
_every: list[float] = [0.0]             # the clock's period after its first tick
_paused: list[bool] = [False]           # no clock for now (``pause``, ``rings_only``)
_rings: list[bool] = [False]            # ... and a ring still signals (``rings_only``)


def take_rings() -> None:
    """Empty the doorbell's queue, where the ticker has one: a task's poll does it
    before it reads its messages. ``SIGIO`` comes when a datagram arrives, and a
    bell holds 10 (``net.unix.max_dgram_qlen``); rings past those are dropped, so a
    task that never slept on its bell got no signal after its tenth ring, and its
    thieves waited for the clock's slow tick (steals of 50 ms on UTS T3). Not done
    by the signal's handler: a task that waits at ``sync`` sleeps on the bell
    (``stealing.transport.mailbox``), and must find the ring there."""
    fd = _ring_fd[0]
    if fd is not None:
        try:
            while os.read(fd, 64):
                pass
        except OSError:                 # empty (the socket does not block), or closed
            pass


def rings_signal() -> bool:
    """A ring of the parent raises ``SIGIO`` now (the doorbell is armed)."""
    return _ring_fd[0] is not None and (not _paused[0] or _rings[0])


def _on_tick(signum: int, frame: Any) -> None:
    target = _target[0]
    if target is not None:
        target(signum == signal.SIGIO, frame)


def _own(signum: int) -> bool:
    """Install ``_on_tick`` for ``signum``; False where the program has a handler."""
    current = _handler_of(signum)
    if current is _on_tick:
        return True
    if current != signal.SIG_DFL:      # (None: a handler not set from Python)
        return False
    signal.signal(signum, _on_tick)
    signal.siginterrupt(signum, False)
    return True


def start(target: Callable[[bool, Any], None], period: float, ring_fd: int | None = None,
          slow_period: float | None = None, paused: bool = False) -> bool:
    """Call ``target(rung, frame)`` when ``ring_fd`` (a doorbell socket) receives, and by
    the clock: every ``period`` seconds without a doorbell, else after ``period``
    and then every ``slow_period``. False where no signal can be used (another
    thread, no ``setitimer``, a ``SIGALRM`` handler of the program's). ``paused``:
    no signal until ``resume`` (a leaf's task that polls by itself from its start:
    signals armed and disarmed at once cost a task that spawns nothing 17 us, five
    system calls on each side)."""
    if _target[0] is not None:
        return _target[0] == target
    if not hasattr(signal, "setitimer") or \
            threading.current_thread() is not threading.main_thread():
        return False
    if not _own(signal.SIGALRM):
        return False
    every = period
    if ring_fd is not None and hasattr(signal, "SIGIO") and _own(signal.SIGIO):
        _signal_this_thread(ring_fd)
        _ring_fd[0] = ring_fd
        every = slow_period if slow_period is not None else period
    _target[0] = target
    _every[0] = every
    _paused[0] = True
    if not paused:
        resume(period)
    return True


# fcntl's F_SETOWN_EX and F_OWNER_TID on Linux (the module names neither)
_F_SETOWN_EX, _F_OWNER_TID = 15, 0


def _signal_this_thread(fd: int) -> None:
    """``SIGIO`` of ``fd`` for the calling (main) thread alone, where the system can
    say so (Linux), else for the process. Sent to the process, it goes to any
    thread that does not block it, such as UCX's ``async`` thread in a leaf, when
    the main thread already has a signal pending (descheduled, on cores the leaves
    share); Python's handler there only notes it (the main thread looks at its
    signals when it next takes Python's lock or gets a signal itself), and a task
    running pure Python took the ring at the clock's next tick, 50 ms later (UTS
    T3 on 2 leaves: 1-2 splits a job reached their victim 42-51 ms late). One
    system call, as before: every task of a leaf starts the ticker."""
    if sys.platform.startswith("linux"):
        owner = struct.pack("ii", _F_OWNER_TID, threading.get_native_id())
        try:
            fcntl.fcntl(fd, _F_SETOWN_EX, owner)
            return
        except OSError:                 # (a kernel without it: the process)
            pass
    fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())


def _set_async(on: bool) -> None:
    """The doorbell's ``O_ASYNC`` mode on or off (a ring raises ``SIGIO`` when on)."""
    fd = _ring_fd[0]
    if fd is not None:
        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_ASYNC if on else flags & ~os.O_ASYNC)
        except OSError:                 # closed meanwhile (the leaf is ending)
            pass


def pause() -> None:
    """No signal until ``resume`` (the task polls by itself meanwhile)."""
    if _target[0] is not None and (not _paused[0] or _rings[0]):
        if not _paused[0]:
            signal.setitimer(signal.ITIMER_REAL, 0)
        _paused[0] = True
        _rings[0] = False
        _set_async(False)


def rings_only() -> None:
    """No clock until ``resume``, but a ring still signals: a task whose spawns
    each poll (they come slowly) answers a ring at once where it can, not at its
    next spawn (``dac.stealable.StealableContext._tick``)."""
    if _target[0] is not None and not (_paused[0] and _rings[0]):
        if not _paused[0]:
            signal.setitimer(signal.ITIMER_REAL, 0)
        else:                           # (the doorbell's O_ASYNC was off)
            _set_async(True)
        _paused[0] = True
        _rings[0] = True


def resume(first: float) -> None:
    """Signals again after ``pause``, the clock's next tick in ``first`` seconds."""
    if _target[0] is not None and _paused[0]:
        _paused[0] = False
        if not _rings[0]:
            _set_async(True)
        _rings[0] = False
        signal.setitimer(signal.ITIMER_REAL, first, _every[0])


def soon(seconds: float) -> None:
    """The clock's next tick in ``seconds`` (its period unchanged)."""
    if _target[0] is not None and not _paused[0]:
        signal.setitimer(signal.ITIMER_REAL, seconds, _every[0])


def stop() -> None:
    """No more signals."""
    if _target[0] is not None:
        if not _paused[0]:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if not _paused[0] or _rings[0]:
            _set_async(False)
        _ring_fd[0] = None
        _target[0] = None
        _paused[0] = False
        _rings[0] = False
