"""The files MPI libraries leave when a job is killed: shared memory (``/dev/shm``) and
MPICH's ``/tmp/hydra_hwloc_xmlfile_*``; which ones a process maps, and removing those
a dead job left behind.

MPICH (``mpich_shm_*``, ``mpich_shar_tmp*``) and UCX, its network layer and Open MPI's
(``ucx_shm_posix_*``), remove a job's files when its processes end normally; processes
killed in the middle of a run (a crash and MPI's clean-up after it, a root killed by
SIGKILL) leave them, a few MB each, until the machine reboots. A name dac removes is
checked against these exact patterns first (a name read back from a run's records
could otherwise point anywhere: ``/dev/shm/mpich_shm_x/../../home/...``).
"""

from __future__ import annotations

import os
import re
import time
from typing import Collection, Iterable

from stealing.host.procs import descendants

FOLDER = "/dev/shm"
PREFIXES = ("mpich_shm_", "mpich_shar_tmp", "ucx_shm_posix_")
NAME = re.compile(r"/dev/shm/(?:mpich_shm_|mpich_shar_tmp|ucx_shm_posix_)[A-Za-z0-9_]+")


# Open MPI's shared-memory segments: its singleton under another MPI's launcher (which
# ``stealing.transport.world.check_alone`` refuses) leaves its own at exit
OPEN_MPI_NAME = re.compile(r"/dev/shm/sm_segment\.[A-Za-z0-9_.\-]+")


# MPICH's node segment: made at MPI_Init by one process of each host and mapped by the
# others of its world before MPI_Init returns; removed only at MPI_Finalize
NODE_SEGMENT = re.compile(r"/dev/shm/mpich_shm_[A-Za-z0-9_]+")


def forget_node_segment() -> None:
    """Remove the name of MPICH's node segment this process maps, once every process of
    its world has mapped it (the caller knows: after a collective call). The memory
    stays theirs until they end; only the name goes, so a job whose launcher kills its
    ranks before MPI_Finalize (``mpiexec ... | head -1``: the launcher dies of
    SIGPIPE, its proxies kill the ranks) leaves no file behind. MPICH's own removal at
    MPI_Finalize then finds none, which it ignores. UCX's segments are not touched:
    its peers attach to them by name later, as they connect."""
    unlink_shm(own_shm(NODE_SEGMENT), NODE_SEGMENT)


def is_mpi_shm(name: str, pattern: re.Pattern[str] = NAME) -> bool:
    """``name`` is a path of an MPI library's shared-memory file, exactly (MPICH's
    and UCX's; ``OPEN_MPI_NAME``: Open MPI's)."""
    return pattern.fullmatch(name) is not None


def sweep_unused_shm(since: float, named: Collection[str] = ()) -> int:
    """Remove this user's MPI shared-memory files made after ``since`` (or among
    ``named``, whenever made) that no live process maps; returns how many such files
    processes started by this one still map (they are ending). Those only other
    processes map (another job of this user, running) are not counted: a loss does
    not wait for another job to end."""
    uid = os.getuid()
    try:
        names = [n for n in os.listdir(FOLDER) if n.startswith(PREFIXES)]
    except OSError:
        return 0
    fresh: list[str] = []
    for n in names:
        path = os.path.join(FOLDER, n)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if st.st_uid == uid and (st.st_mtime >= since - 1 or path in named) \
                and is_mpi_shm(path):
            fresh.append(path)
    if not fresh:
        return 0
    used = mapped_shm()
    unlink_shm(p for p in fresh if p not in used)
    ours = mapped_shm(_descendants())
    return sum(1 for p in fresh if p in ours)


def sweep_unused_shm_waiting(since: float, seconds: float,
                             named: Collection[str] = ()) -> None:
    """``sweep_unused_shm(since, named)`` again every 0.1 s, for up to ``seconds``,
    while processes started by this one still map such files: processes just killed
    unmap theirs when they end, which a loaded machine does late."""
    deadline = time.monotonic() + seconds
    while sweep_unused_shm(since, named) and time.monotonic() < deadline:
        time.sleep(0.1)


def _shm_in_maps(path: str, pattern: re.Pattern[str] = NAME) -> set[str]:
    """The MPI shared-memory files named in the ``/proc/<pid>/maps`` file ``path``."""
    names: set[str] = set()
    try:
        with open(path) as f:
            for line in f:
                if "/dev/shm/" in line:
                    name = line.split()[-1]
                    if is_mpi_shm(name, pattern):
                        names.add(name)
    except OSError:
        pass
    return names


def mapped_shm(pids: Iterable[int] | None = None) -> set[str]:
    """MPI shared-memory files some live process of this machine maps (of ``pids``
    only, if given)."""
    names: set[str] = set()
    found = pids if pids is not None else \
        (int(entry) for entry in os.listdir("/proc") if entry.isdigit())
    for pid in found:
        names |= _shm_in_maps(f"/proc/{pid}/maps")
    return names


def _descendants() -> list[int]:
    """The processes below this one (not itself)."""
    me = os.getpid()
    return [p for p in descendants([me]) if p != me]


def own_shm(pattern: re.Pattern[str] = NAME) -> list[str]:
    """The MPI shared-memory files this process maps."""
    return sorted(_shm_in_maps("/proc/self/maps", pattern))


def unlink_shm(names: Iterable[object], pattern: re.Pattern[str] = NAME) -> None:
    """Remove those of ``names`` that are MPI shared-memory files of this user (a name
    read back from a run's records or a message may be anything: it is checked)."""
    uid = os.getuid()
    for name in set(names):
        if not isinstance(name, str) or not is_mpi_shm(name, pattern):
            continue
        try:
            if os.lstat(name).st_uid == uid:
                os.unlink(name)
        except OSError:
            pass


HYDRA_XML = re.compile(r"hydra_hwloc_xmlfile_[A-Za-z0-9]+")


def sweep_hydra_files() -> None:
    """Remove MPICH's topology files (``/tmp/hydra_hwloc_xmlfile_*``, written by its
    process manager for its proxies) of this user that no live process holds open:
    a killed ``mpiexec`` leaves its own, and another run's stay."""
    uid = os.getuid()
    try:
        names = [n for n in os.listdir("/tmp") if HYDRA_XML.fullmatch(n)]
    except OSError:
        return
    mine: list[str] = []
    for n in names:
        path = os.path.join("/tmp", n)
        try:
            if os.lstat(path).st_uid == uid:
                mine.append(path)
        except OSError:
            continue
    if not mine:
        return
    used = hydra_files_in_use(mine)
    for path in mine:
        if path not in used:
            try:
                os.unlink(path)
            except OSError:
                pass


def hydra_files_in_use(paths: Iterable[str]) -> set[str]:
    """Those of ``paths`` (MPICH topology files) that a live process holds open: the
    files of runs going on (each of hydra's proxies keeps its run's file open while it
    lives; the file's name reaches processes through PMI, in no environment)."""
    wanted = set(paths)
    used: set[str] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{entry}/fd/{fd}")
            except OSError:
                continue
            if target in wanted:
                used.add(target)
    return used
