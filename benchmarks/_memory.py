"""Shared by the benchmarks: how much memory a run's processes hold.

A process's *PSS* (proportional set size, ``/proc/PID/smaps_rollup``) counts each of
its private pages once and each page it shares with N processes as 1/N: the sum over
a set of processes is the memory they hold together, without counting Python's and
MPI's shared libraries, or a monitor's pages shared with its forked worker, once per
process (their RSS would). Linux only.
"""

import os


def pss_kb(pid: int) -> int | None:
    """``pid``'s PSS in kB; None if it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def held_mb(pids) -> tuple[float, int]:
    """``(MB held together, how many were read)`` for the processes ``pids``."""
    sizes = [kb for kb in map(pss_kb, pids) if kb is not None]
    return sum(sizes) / 1024.0, len(sizes)


def run_memory(leaves: int) -> str:
    """The memory this process and everything it started hold now (the root, MPI's
    process manager, routers, leaves and their monitors): one line for a report."""
    from stealing.host.procs import descendants  # (the benchmark put dac on the path)
    mb, count = held_mb(descendants([os.getpid()]))
    return f"{mb:.0f} MB in {count} processes, {mb / leaves:.1f} MB a leaf"
