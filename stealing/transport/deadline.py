"""A bound on the MPI calls that cannot be interrupted.

``MPI_Comm_spawn``, ``MPI_Comm_disconnect`` and ``MPI_Finalize`` wait inside MPICH,
spinning, until every peer has done its part: when a peer can no longer do it (a
process that died, a process manager that stopped starting processes), they never
return, and a Ctrl-C cannot reach Python code until they do. A ``Deadline`` watches
such a call from a thread: when the call has not returned in time, or a check says it
cannot, it says which call and why, ends the process manager dac started and the
processes below it, removes this process's MPI shared memory and the files those
processes made since the call began (MPICH's node segment of a spawn's children, made
by the first of them to reach ``MPI_Init``: 2-270 MB, left in ``/dev/shm`` until the
machine reboots), and exits with status 1: a clear end instead of a process that
spins for ever.

A Ctrl-C (or the root's SIGTERM) in such a call ends the run the same way, with the
status of the signal (130, 143), if the call has not returned ``GRACE_S`` later:
Python runs its handler only when the call returns (a ``KeyboardInterrupt`` the
program may catch, and the run's own clean stop), and a spawn of 256 processes on 2
cores had not after 500 s. The watcher hears
of the signal through Python's wakeup file descriptor (``signal.set_wakeup_fd``,
which Python's own C handler writes the signal's number to), set for the call where
the call runs in the main thread; a signal whose handler is the program's own is left
to it (its byte goes on to a wakeup fd set before, as asyncio's).
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import threading
import time
from typing import Any, Callable

from stealing.host.procs import children_named, descendants, signal_all
from stealing.host.shm import mapped_shm, own_shm, sweep_unused_shm_waiting, unlink_shm


# how long a link's MPI_Comm_disconnect, or MPI_Finalize, may take: both return at
# once when every peer did its part (under a second, measured), never when one cannot
CLOSE_S = 30.0

# how long an expired deadline waits for the processes it killed to unmap their files
UNMAP_S = 5.0

# how long a call may still take, after a signal that ends the run, to return by itself
# (then Python's handler runs as usual: a spawn of 16 leaves here returns within 2 s)
GRACE_S = 2.0


# handlers that end the run, besides Python's own for SIGINT (``end_run_on``)
_ENDING: list[Any] = [signal.default_int_handler]


def end_run_on(handler: Any) -> None:
    """``handler`` (a signal handler dac sets) ends the run: a ``Deadline`` acts on
    its signal itself."""
    if handler not in _ENDING:
        _ENDING.append(handler)


class _SignalWatch:
    """The signals Python takes during a call its handlers cannot interrupt, as read
    from the wakeup fd set for the call (made in the main thread only)."""

    def __init__(self) -> None:
        self.read, self.write = socket.socketpair()
        self.read.setblocking(False)
        self.write.setblocking(False)
        self.before = signal.set_wakeup_fd(self.write.fileno(), warn_on_full_buffer=False)

    @staticmethod
    def start() -> _SignalWatch | None:
        """A watch, or None off the main thread (Python handles signals in it only)."""
        if threading.current_thread() is not threading.main_thread():
            return None
        try:
            return _SignalWatch()
        except (OSError, ValueError):
            return None

    def wait(self, seconds: float) -> int | None:
        """A signal taken within ``seconds`` whose handler ends the run, or None."""
        try:    # (closed by ``stop`` once the call returned: OSError, ValueError)
            if not select.select([self.read], [], [], seconds)[0]:
                return None
            taken = self.read.recv(64)
        except (OSError, ValueError):
            return None
        ending = None
        for signum in taken:
            if signum and signal.getsignal(signum) in _ENDING:
                ending = signum
            elif signum and self.before >= 0:
                try:
                    os.write(self.before, bytes([signum]))
                except OSError:
                    pass
        return ending

    def stop(self) -> None:
        """The wakeup fd as it was (main thread), a byte that wakes the watcher, then
        this one closed: the watcher finds it so (a closed socket has no fd a new
        file could have taken) and goes."""
        signal.set_wakeup_fd(self.before)
        try:
            self.write.send(b"\0")
        except OSError:
            pass
        self.read.close()
        self.write.close()


class Deadline:
    """Ends this process if the call it guards has not returned after ``seconds``
    (``timeout_text`` says so), as soon as ``check`` returns a reason (it is asked
    every ``POLL_S``), or when a Ctrl-C comes during it (``doing`` says what the call
    was doing). Use as ``with Deadline(...): call()``."""

    POLL_S = 0.2

    def __init__(self, seconds: float, timeout_text: str,
                 check: Callable[[], str | None] | None = None,
                 doing: str = "an MPI call") -> None:
        self.seconds, self.timeout_text, self.check = seconds, timeout_text, check
        self.doing = doing
        self.done = threading.Event()
        self.began = time.time()
        self.signals: _SignalWatch | None = None
        self.interrupted: tuple[int, float] | None = None   # (signal, monotonic time)
        self.thread = threading.Thread(target=self._watch, daemon=True,
                                       name="dac-mpi-deadline")

    def __enter__(self) -> "Deadline":
        self.began = time.time()    # files made from now on may be the call's
        self.signals = _SignalWatch.start()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()         # the call returned (or raised): the watcher goes quietly
        if self.signals is not None:
            self.signals.stop()

    def _watch(self) -> None:
        end = time.monotonic() + self.seconds
        while not self._pause():
            why = self.check() if self.check is not None else None
            if why is None and time.monotonic() > end:
                why = self.timeout_text
            if why is not None:
                self._expire(why)

    def _pause(self) -> bool:
        """Wait ``POLL_S``; True once the call returned. A signal that ends the run,
        taken meanwhile, ends it if the call has not returned ``GRACE_S`` later."""
        if self.signals is None:
            return self.done.wait(self.POLL_S)
        signum = self.signals.wait(self.POLL_S)
        if signum is not None and self.interrupted is None:
            self.interrupted = (signum, time.monotonic())
        if self.interrupted is not None and not self.done.is_set() and \
                time.monotonic() - self.interrupted[1] >= GRACE_S:
            signum = self.interrupted[0]
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            self._expire(f"interrupted ({name}) while {self.doing}, a call MPI does "
                         f"not let Python interrupt", 128 + signum)
        return self.done.is_set()

    def _expire(self, why: str, status: int = 1) -> None:
        """Say ``why``, end the process manager, its processes, this process's
        shared memory and the files they made during the call, and exit."""
        if self.done.is_set():
            return
        sys.stderr.write(f"dac: {why}. Ending the run (pid {os.getpid()}).\n")
        sys.stderr.flush()
        victims = descendants(children_named("mpiexec"))
        theirs = mapped_shm(victims)        # (made before the call too: a disconnect's)
        signal_all(victims, signal.SIGKILL)
        unlink_shm(own_shm())
        sweep_unused_shm_waiting(self.began, UNMAP_S, theirs)
        os._exit(status)    # (its folders go with the next root: see make_run_dir)
