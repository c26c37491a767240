"""MPICH's shared-memory segments (``/dev/shm/mpich_shm_*``): which ones a process
maps, and removing those a dead job left behind.

MPICH removes a job's segments when its processes end normally; processes killed in
the middle of a run (a crash and MPI's clean-up after it, a root killed by SIGKILL)
leave them, a few MB each, until the machine reboots.
"""

from __future__ import annotations

import os


def sweep_unused_shm(since: float) -> int:
    """Remove this user's MPICH segments made after ``since`` that no live process
    maps; returns how many such files are still mapped (their processes are ending)."""
    folder, uid = "/dev/shm", os.getuid()
    try:
        names = [n for n in os.listdir(folder) if n.startswith("mpich_shm_")]
    except OSError:
        return 0
    fresh = []
    for n in names:
        try:
            st = os.stat(os.path.join(folder, n))
        except OSError:
            continue
        if st.st_uid == uid and st.st_mtime >= since - 1:
            fresh.append(os.path.join(folder, n))
    if not fresh:
        return 0
    used = mapped_shm()
    unlink_shm(p for p in fresh if p not in used)
    return sum(1 for p in fresh if p in used)


def mapped_shm() -> set:
    """``/dev/shm/mpich_shm_*`` files some live process of this machine maps."""
    names = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/maps") as f:
                for line in f:
                    if "/dev/shm/mpich_shm_" in line:
                        names.add(line.split()[-1])
        except OSError:
            continue
    return names


def own_shm() -> list:
    """Names of the MPICH shared-memory segments this process has mapped."""
    names = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "/dev/shm/mpich_shm_" in line:
                    names.add(line.split()[-1])
    except OSError:
        pass
    return sorted(n for n in names if n.startswith("/dev/shm/"))


def unlink_shm(names) -> None:
    for name in set(names):
        if name.startswith("/dev/shm/mpich_shm_"):
            try:
                os.unlink(name)
            except OSError:
                pass
