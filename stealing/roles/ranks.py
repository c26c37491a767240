"""A launcher's rank below rank 0: it plays one process of each tree rank 0 starts.

Under ``mpiexec -n P python script.py`` (or ``srun``) every rank runs the script, and
``import dac`` meets the other ranks (``enter_if_launched``). Rank 0 goes on with the
script: it is the root. Every other rank never returns from that import: it waits,
asleep, for rank 0's ``Assignment`` (its place in the next tree), links to its parent,
plays its role until the tree stops (``stealing.roles.process.play``, as a spawned
process would), and waits for the next tree; at rank 0's exit (``END``) it finalizes
MPI and exits. The script's own code below ``import dac`` never runs there, so what
it prints, it prints once.

A rank has no monitor beside it: a process that dies ends the whole job (MPI's
launcher does that), so there is nothing to survive and no loss to record.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import sys
import time
import traceback

from stealing.host.shm import own_shm
from stealing.roles.process import play, take_init
from stealing.roles.status import SharedStatus, Start
from stealing.transport.mailbox import Mailbox
from stealing.transport.world import END, World, enter
from stealing.tree.ranks import Assignment


def enter_if_launched() -> None:
    """At ``import dac`` in a process an MPI launcher started (``launched``), as one
    rank of several: rank 0 returns (and tells the others to end when it exits); the
    others serve rank 0's trees and exit without returning."""
    from stealing.transport.mpi import init_mpi  # lazy: MPI starts here, not at import
    world = enter(init_mpi())
    if world is None:
        return
    if world.rank == 0:
        atexit.register(_end, world)        # before MPI_Finalize (registered earlier)
        return
    _serve(world)


def _end(world: World) -> None:
    """Rank 0 exits: the other ranks end (once MPI still runs here)."""
    if not world.MPI.Is_finalized():
        world.end()


def _serve(world: World) -> None:
    """Serve rank 0's trees until it ends; then finalize MPI and exit."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C is rank 0's to handle
    waiting = Mailbox(world.MPI)
    while True:
        got = waiting.wait([world.comm])
        assert got is not None                      # (no timeout: it waits for one)
        _, _, tag, msg = got
        if tag == END:
            break
        try:
            _play_one(world, msg)
        except BaseException:                       # noqa: BLE001 - then the end
            sys.stderr.write(f"dac: rank {world.rank} failed:\n{traceback.format_exc()}")
            sys.stderr.flush()
            os._exit(1)                             # MPI's launcher ends the job
    sys.stdout.flush()
    sys.stderr.flush()
    world.MPI.Finalize()
    # C's exit: MPICH tells its launcher it finalized in a C exit handler (without
    # it the launcher counts the rank lost and kills the job); the script's own
    # Python exit handlers are rank 0's business
    ctypes.CDLL(None).exit(0)


def _play_one(world: World, assignment: Assignment) -> None:
    """One tree: link to the parent, play the role its INIT names, let the link go."""
    started = time.time()
    parent = world.open_up(assignment)
    linked = time.time()
    mailbox, init = take_init(world.MPI, parent)
    marks = {"main": started, "mpi": linked, "init": time.time()}
    try:
        if init is not None:            # (None: the tree stopped before it began)
            play(world.MPI, parent, mailbox, init,
                 Start(marks, own_shm(), SharedStatus()), None)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    mailbox.flush(timeout=10)
    parent.Disconnect()
    world.close_up()
