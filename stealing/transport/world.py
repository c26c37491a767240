"""The links of a tree on a launcher's ranks: MPI plumbing for the no-spawn mode.

Under ``mpiexec -n P`` or ``srun -n P`` every process of the run exists from the
start (``stealing.tree.ranks``). A node links to each group of its children with
``MPI_Intercomm_create`` (its side: itself alone; theirs: the group, made with
``MPI_Comm_create_group``), which gives the same intercommunicator a spawn of that
group would: the parent's remote group is the children, in order, and each child's
remote group is the parent. A node takes its groups' links in the order it would
spawn them (``open_down``), each child its parent's (``open_up``), so the links are
made top-down and no rank waits on one that waits on it.

Rank 0's messages to the others (an ``Assignment`` per run, ``END`` at its exit) go
over a duplicate of ``MPI_COMM_WORLD``, so that nothing else ever reads them.
"""

from __future__ import annotations

import os
import socket
from collections import deque
from types import ModuleType
from typing import TYPE_CHECKING, Any

from stealing.exceptions import DacError
from stealing.host.shm import OPEN_MPI_NAME, forget_node_segment, own_shm, unlink_shm
from stealing.transport import frames

if TYPE_CHECKING:
    from mpi4py.MPI import Intercomm, Intracomm

    from stealing.tree.ranks import Assignment

ASSIGN = 1          # rank 0 to a rank: its Assignment for the next tree
END = 2             # rank 0 to every rank: the script ended, finalize and exit

# the launchers' rank variables: MPICH's hydra and PMI, Open MPI, PMIx (srun --mpi=pmix)
RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


# set by ``stealing.roles.process.main``: this process is one dac spawned
spawned = [False]


def launched() -> bool:
    """This process was started by an MPI launcher (one rank of several, or alone),
    not spawned by dac, and the user did not ask for spawning (``DAC_LAUNCH=spawn``)."""
    return any(v in os.environ for v in RANK_VARS) and not spawned[0] and \
        os.environ.get("DAC_LAUNCH", "") != "spawn"


class World:
    """This process's view of the launcher's ranks: its rank, every rank's host, and
    the links it is still to make for the current tree."""

    def __init__(self, MPI: ModuleType) -> None:
        self.MPI = MPI
        world = MPI.COMM_WORLD
        self.rank, self.size = world.Get_rank(), world.Get_size()
        self.hosts: list[str] = world.allgather(socket.gethostname())
        self.comm: Intracomm = world.Dup()      # rank 0's assignments and END
        self.down: deque[tuple[int, ...]] = deque()
        self.up_group: Intracomm | None = None
        self.busy = False                        # rank 0: a tree holds the ranks

    def open_down(self, count: int) -> Intercomm:
        """The link to this node's next group of ``count`` children."""
        if not self.down or len(self.down[0]) != count:
            raise RuntimeError(f"no group of {count} ranks is left to link (left: "
                               f"{list(self.down)})")
        group = self.down.popleft()
        return self.MPI.COMM_SELF.Create_intercomm(0, self.MPI.COMM_WORLD, group[0],
                                                   group[0])

    def open_up(self, assignment: Assignment) -> Intercomm:
        """The link to this process's parent, made with the rest of its group."""
        world = self.MPI.COMM_WORLD
        group = assignment.group
        members = world.Get_group().Incl(list(group))
        try:
            self.up_group = world.Create_group(members, group[0])
        finally:
            members.Free()
        self.down = deque(assignment.down)
        return self.up_group.Create_intercomm(0, world, assignment.parent, group[0])

    def close_up(self) -> None:
        """The tree stopped (its link up is disconnected): free the group's comm."""
        if self.up_group is not None:
            self.up_group.Free()
            self.up_group = None

    def send_all(self, messages: dict[int, Any], tag: int) -> None:
        """Rank 0: ``messages[rank]`` to each rank, every send completed."""
        for out in [frames.isend(self.MPI, self.comm, msg, rank, tag)
                    for rank, msg in messages.items()]:
            out.Wait()

    def end(self) -> None:
        """Rank 0, at exit: every other rank finalizes MPI and exits."""
        self.send_all({r: None for r in range(1, self.size)}, END)


_world: list[World] = []


def current() -> World | None:
    """The launcher's ranks, in a process started by one (``enter``), else None."""
    return _world[0] if _world else None


def enter(MPI: ModuleType) -> World | None:
    """Meet the other ranks (collective: every rank calls it at once, at ``import
    dac``); None when this is the only one."""
    if _world:
        return _world[0]
    if MPI.COMM_WORLD.Get_size() < 2:
        check_alone(MPI)
        return None
    _world.append(World(MPI))
    forget_node_segment()       # every rank is past MPI_Init: World's allgather waited
    return _world[0]


# what launchers say the job's size is (MPICH's hydra and PMI, Open MPI, srun)
SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS")


def check_alone(MPI: ModuleType) -> None:
    """MPI sees this process alone: refuse if its launcher started several (the
    launcher of another MPI than mpi4py's, whose ranks would each start a tree)."""
    sizes = [int(os.environ[v]) for v in SIZE_VARS if os.environ.get(v, "").isdigit()]
    if sizes and max(sizes) > 1:
        library = MPI.Get_library_version().strip().splitlines()[0]
        segments = own_shm(OPEN_MPI_NAME)       # (Open MPI leaves them here)
        MPI.Finalize()
        unlink_shm(segments, OPEN_MPI_NAME)
        raise DacError(
            f"a launcher started {max(sizes)} processes, and MPI sees this one alone: "
            f"the launcher belongs to another MPI than the one mpi4py loaded "
            f"({library}). Start the script with that MPI's launcher (MPICH's wheel: "
            f"mpiexec.hydra; Open MPI's: its mpiexec, with MPI4PY_LIBMPI naming its "
            f"libmpi), or run it without a launcher to spawn a tree")
