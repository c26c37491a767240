"""Creating child processes with ``MPI_Comm_spawn``.

Every non-root process of a run is spawned by its parent. The child runs
``stealing.roles.process.main`` in the same Python interpreter as the root, with the root's
package directory on ``sys.path``, so an uninstalled checkout works too. Nothing passed
to Spawn is ever an empty string (MPICH kills the whole job on one).
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Callable

import stealing
from stealing.host.losses import describe_loss, read_lost_records
from stealing.transport.deadline import Deadline
from stealing.transport.mpi import after_spawn, check_usable
from stealing.transport.world import launched

if TYPE_CHECKING:
    from mpi4py.MPI import Intercomm

# the folder that holds the ``stealing`` package (a checkout that is not installed):
# the package's own folder on the path would make its subpackages (``transport``,
# ``tree``, ``host``...) top-level modules in every spawned process
_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(stealing.__file__)))
_BOOT = ("import sys; sys.path.insert(0, {path!r}); "
         "from stealing.roles.process import main; main()")


def child_command(run_dir: str | None = None) -> tuple[str, list[str]]:
    """The executable and arguments of a spawned dac process; ``run_dir`` is where
    its monitor records a loss (see ``stealing.roles.process``)."""
    args = ["-c", _BOOT.format(path=_PKG_PARENT)]
    if run_dir:
        args.append(run_dir)
    return sys.executable, args


def spawn(MPI: ModuleType, count: int, host: str | None = None,
          run_dir: str | None = None, watch_losses: bool = True) -> Intercomm:
    """Spawn ``count`` dac processes; returns the intercommunicator to them.

    ``host`` (a name the caller validated beforehand) goes into the ``host`` info key.
    ``watch_losses``: a process lost meanwhile means this spawn cannot return (MPICH);
    under fault tolerance it does not.
    """
    if count < 1:
        raise ValueError(f"spawn count must be >= 1, got {count}")
    check_usable()
    if alone_under_srun():
        raise SpawnRefused(count, host, "not tried: under srun a spawn asks Slurm for "
                           "a new job step, granted only from free CPUs of the "
                           "allocation, and MPICH asserts on it under srun's PMI2 "
                           "(mpich issue 5835); DAC_LAUNCH=spawn spawns anyway")
    exe, args = child_command(run_dir)
    info = MPI.Info.Create()
    if host:
        info.Set("host", host)
    info.Set("wdir", os.getcwd())
    errcodes: list[int] = []
    where = host or "this machine"
    seconds = spawn_timeout()
    deadline = Deadline(
        seconds, _timeout_text(count, where, seconds, local=not host),
        _loss_check(run_dir, count, where) if watch_losses and run_dir else None,
        doing=f"starting {count} process(es) on {where}")
    try:
        with deadline:
            comm = MPI.COMM_SELF.Spawn(exe, args=args, maxprocs=count, info=info,
                                       root=0, errcodes=errcodes)
    except MPI.Exception as exc:
        raise SpawnRefused(count, host, f"MPI_Comm_spawn failed: "
                           f"{exc.Get_error_string()}") from exc
    finally:
        info.Free()
        after_spawn()
    bad = [e for e in errcodes if e != MPI.SUCCESS]
    if bad:
        raise SpawnRefused(count, host, f"MPI_Comm_spawn failed: error codes {bad}")
    return comm


def _timeout_text(count: int, where: str, seconds: float, local: bool) -> str:
    """Why a spawn did not return in time, and what to try: on another host, the host
    or its launcher; here, the machine's cores (one call of 256 processes on 2 cores
    had not returned after 500 s, where 4 routers' calls of 64 took 37 s)."""
    said = f"starting {count} process(es) on {where} did not finish within " \
           f"{seconds:.0f} s (DAC_SPAWN_TIMEOUT): "
    if not local:
        return said + "MPI could not start them there (is the host up, and reachable " \
                      "by the MPI launcher?)"
    cores = os.cpu_count() or 1
    return said + f"a process did not reach MPI_Init, or {count} processes in one " \
                  f"call are too many for this machine's {cores} core(s) (give more " \
                  f"time, or a smaller min_procs: routers then start them in " \
                  f"calls of their own, side by side)"


def alone_under_srun() -> bool:
    """``srun`` started this process, with MPI's process management (``--mpi=pmi2``
    or ``pmix``), as its step's only task: a spawn would be a new job step."""
    return launched() and "SLURM_STEP_ID" in os.environ and \
        os.environ.get("SLURM_STEP_NUM_TASKS") == "1"


class SpawnRefused(RuntimeError):
    """MPI did not start the processes asked for: an MPI that does not spawn (Cray
    MPI, MPICH under ``srun`` with PMI2), a launcher without free slots. The message
    names the way that needs no spawn: start every process with the launcher."""

    def __init__(self, count: int, host: str | None, why: str) -> None:
        super().__init__(
            f"{count} dac process(es) could not be started on "
            f"{host or 'this machine'} ({why}). Where MPI does not allow spawning, or its "
            f"launcher has no free slots, start every process with the launcher "
            f"instead: mpiexec -n P python script.py (or srun -n P python script.py); "
            f"rank 0 is then the root, the other ranks its leaves, and nothing is "
            f"spawned")


def spawn_timeout() -> float:
    """Seconds a spawn may take (``DAC_SPAWN_TIMEOUT``, default 120)."""
    try:
        return max(1.0, float(os.environ.get("DAC_SPAWN_TIMEOUT", "120")))
    except ValueError:
        return 120.0


def _loss_check(run_dir: str, count: int, host: str) -> Callable[[], str | None]:
    """A ``Deadline`` check: a process of the run lost meanwhile means the spawn
    cannot return (MPICH is ending the job)."""
    def lost() -> str | None:
        records = read_lost_records(run_dir)
        if not records:
            return None
        r = records[0]
        return (f"the run lost a process while starting {count} more on {host}: "
                f"{r['role']} pid {r['pid']} on {r['host']} {describe_loss(r)}, and MPI "
                f"cannot start processes for this job any more")
    return lost
