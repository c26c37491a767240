"""Creating child processes with ``MPI_Comm_spawn``.

Every non-root process of a run is spawned by its parent. The child runs
``stealing.process.main`` in the same Python interpreter as the root, with the root's
package directory on ``sys.path``, so an uninstalled checkout works too. Nothing passed
to Spawn is ever an empty string (MPICH kills the whole job on one).
"""

from __future__ import annotations

import os
import sys

_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BOOT = ("import sys; sys.path.insert(0, {path!r}); "
         "from stealing.process import main; main()")


def child_command(run_dir: str | None = None) -> tuple[str, list[str]]:
    """The executable and arguments of a spawned dac process; ``run_dir`` is where
    its monitor records a loss (see ``stealing.process``)."""
    args = ["-c", _BOOT.format(path=_PKG_PARENT)]
    if run_dir:
        args.append(run_dir)
    return sys.executable, args


def spawn(MPI, count: int, host: str | None = None, run_dir: str | None = None):
    """Spawn ``count`` dac processes; returns the intercommunicator to them.

    ``host`` (a name the caller validated beforehand) goes into the ``host`` info key.
    """
    from .mpi import after_spawn, check_usable
    if count < 1:
        raise ValueError(f"spawn count must be >= 1, got {count}")
    check_usable()
    exe, args = child_command(run_dir)
    info = MPI.INFO_NULL
    if host:
        info = MPI.Info.Create()
        info.Set("host", host)
        info.Set("wdir", os.getcwd())
    else:
        info = MPI.Info.Create()
        info.Set("wdir", os.getcwd())
    errcodes = []
    try:
        comm = MPI.COMM_SELF.Spawn(exe, args=args, maxprocs=count, info=info,
                                   root=0, errcodes=errcodes)
    finally:
        info.Free()
        after_spawn()
    bad = [e for e in errcodes if e != MPI.SUCCESS]
    if bad:
        raise RuntimeError(f"MPI_Comm_spawn of {count} dac process(es) failed: "
                           f"error codes {bad}")
    return comm
