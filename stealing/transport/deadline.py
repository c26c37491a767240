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
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Callable

from stealing.host.procs import children_named, descendants, signal_all
from stealing.host.shm import own_shm, sweep_unused_shm_waiting, unlink_shm


# how long a link's MPI_Comm_disconnect, or MPI_Finalize, may take: both return at
# once when every peer did its part (under a second, measured), never when one cannot
CLOSE_S = 30.0

# how long an expired deadline waits for the processes it killed to unmap their files
UNMAP_S = 5.0


class Deadline:
    """Ends this process if the call it guards has not returned after ``seconds``
    (``timeout_text`` says so), or as soon as ``check`` returns a reason (it is asked
    every ``POLL_S``). Use as ``with Deadline(...): call()``."""

    POLL_S = 0.2

    def __init__(self, seconds: float, timeout_text: str,
                 check: Callable[[], str | None] | None = None) -> None:
        self.seconds, self.timeout_text, self.check = seconds, timeout_text, check
        self.done = threading.Event()
        self.began = time.time()
        self.thread = threading.Thread(target=self._watch, daemon=True,
                                       name="dac-mpi-deadline")

    def __enter__(self) -> "Deadline":
        self.began = time.time()    # files made from now on may be the call's
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()         # the call returned (or raised): the watcher goes quietly

    def _watch(self) -> None:
        end = time.monotonic() + self.seconds
        while not self.done.wait(self.POLL_S):
            why = self.check() if self.check is not None else None
            if why is None and time.monotonic() > end:
                why = self.timeout_text
            if why is not None:
                self._expire(why)

    def _expire(self, why: str) -> None:
        """Say ``why``, end the process manager, its processes, this process's
        shared memory and the files they made during the call, and exit."""
        if self.done.is_set():
            return
        sys.stderr.write(f"dac: {why}. Ending the run (pid {os.getpid()}).\n")
        sys.stderr.flush()
        signal_all(descendants(children_named("mpiexec")), signal.SIGKILL)
        unlink_shm(own_shm())
        sweep_unused_shm_waiting(self.began, UNMAP_S)
        os._exit(1)         # (its folders go with the next root: see make_run_dir)
