"""Starting MPI in the root, and ending it, without harming the user's processes.

The root is the user's own Python process (``python script.py``): an MPI singleton.
MPICH starts the singleton's process manager lazily, at the first spawn, by running
``mpiexec`` from ``PATH`` in the root's process group; when any spawned process dies,
that process manager kills the whole group, the user's shell included. Two things
follow (see ``../shared/notes/mpi-facts.md``):

* ``mpiexec`` is found through a tiny launcher of dac's own, first on ``PATH`` during
  the first spawn, that moves the process manager into a session of its own
  (``setsid``) and runs the ``mpiexec`` beside this Python (a venv's python run by its
  full path, without the venv on ``PATH``, works too). Its clean-up then reaches only
  the processes dac spawned, never the root or its shell.
* After a spawned process was lost, MPICH's ``MPI_Finalize`` in the root crashes (its
  process manager is gone): the root then skips it, removes the shared-memory segments
  the lost processes left in ``/dev/shm``, and refuses to spawn again.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
import sysconfig
import threading
from types import FrameType, ModuleType
from typing import Collection, Iterable, NoReturn, TypedDict

from stealing.host.losses import make_run_dir
from stealing.host.shm import (
    own_shm,
    sweep_hydra_files,
    sweep_unused_shm,
    sweep_unused_shm_waiting,
    unlink_shm,
)
from stealing.transport.deadline import CLOSE_S, Deadline, end_run_on
from stealing.transport.mpi_env import set_defaults as set_mpi_defaults


class _State(TypedDict):
    """This process's MPI: the ``mpi4py.MPI`` module once started, what was lost
    (``broken``), dac's ``mpiexec`` launcher folder and the ``PATH`` it replaced, the
    pid that started MPI, whether this is a forked child and MPI listens on loopback,
    and what ``sweep_shm_after`` left for the exit."""
    MPI: ModuleType | None
    broken: str | None
    shim_dir: str | None
    path: str | None
    owner: int | None
    forked: bool
    loopback: bool
    sweep_at_exit: float | None     # the earliest tree start whose files are swept at exit


_state: _State = {"MPI": None, "broken": None, "shim_dir": None, "path": None,
                  "owner": None, "forked": False, "loopback": False,
                  "sweep_at_exit": None}
lock = threading.RLock()     # MPI runs serialized: one thread at a time drives the tree


class MPIBroken(RuntimeError):
    """This process cannot spawn again: an earlier run lost a process."""


def ulfm_active() -> bool:
    """This process runs under Open MPI's launcher with ULFM on (``mpiexec --with-ft
    ulfm``, as ``dac run --fault-tolerant`` starts it): a lost process can be survived."""
    return os.environ.get("OMPI_MCA_mpi_ft_enable") == "1" and \
        "libmpi.so.40" in os.environ.get("MPI4PY_LIBMPI", "libmpi.so.40")


def find_mpiexec() -> str | None:
    """The ``mpiexec`` of the MPI that mpi4py uses (MPICH's wheel puts it beside
    python, also as ``mpiexec.hydra``, which stays MPICH's when Open MPI's wheel is
    installed in the same environment and takes ``mpiexec``), else the one on
    ``PATH``."""
    for name in ("mpiexec.hydra", "mpiexec"):
        for folder in (os.path.dirname(sys.executable), sysconfig.get_path("scripts")):
            path = os.path.join(folder, name)
            if os.access(path, os.X_OK):
                return path
    return shutil.which("mpiexec")


_SHIM = """#!{python} -S
# dac: the MPI singleton's process manager, in a session of its own (see stealing/mpi.py),
# without the descriptors of the user's process (MPI's sockets would live on in it)
import os, sys
os.setsid()
os.closerange(3, os.sysconf("SC_OPEN_MAX"))
os.execv({mpiexec!r}, [{mpiexec!r}] + sys.argv[1:])
"""


def _install_shim() -> None:
    """Put dac's ``mpiexec`` launcher first on ``PATH`` until the first spawn (an
    MPICH singleton only: under a launcher the process manager runs already)."""
    real = find_mpiexec()
    if real is None or _state["shim_dir"] is not None or ulfm_active() or \
            "PMIX_RANK" in os.environ:
        return
    folder = make_run_dir("mpiexec")
    path = os.path.join(folder, "mpiexec")
    with open(path, "w") as f:
        f.write(_SHIM.format(python=sys.executable, mpiexec=real))
    os.chmod(path, 0o700)
    _state["shim_dir"] = folder
    _state["path"] = os.environ.get("PATH")
    os.environ["PATH"] = folder + os.pathsep + os.environ.get("PATH", "")
    atexit.register(_remove_shim)


def _remove_shim() -> None:
    """Take dac's ``mpiexec`` launcher off ``PATH`` and remove its folder."""
    folder, _state["shim_dir"] = _state["shim_dir"], None
    if folder is None or _state["forked"]:      # (the parent's folder, not a child's)
        return
    if os.environ.get("PATH", "").startswith(folder + os.pathsep):
        old = _state["path"]
        if old is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = old
    shutil.rmtree(folder, ignore_errors=True)


def after_spawn() -> None:
    """The process manager runs now: the launcher and the ``PATH`` entry can go, and
    the loopback setting too (the manager passes it on to every process it starts;
    programs this process starts later must not inherit it)."""
    if _state["shim_dir"] is not None:
        _remove_shim()
    if _state["loopback"] and os.environ.get("UCX_NET_DEVICES") == "lo":
        del os.environ["UCX_NET_DEVICES"]


def init_mpi(this_host_only: bool = False) -> ModuleType:
    """Import mpi4py in the root, which initializes MPI (a singleton under python).
    ``this_host_only``: the first tree has every process on this machine, so MPI's
    network layer listens on loopback only (``UCX_NET_DEVICES=lo``, unless set; see
    ``loopback``).

    The environment MPI starts in is ``stealing.transport.mpi_env``'s (it reaches every
    spawned process too). Threads: MPI is used by one thread at a time (``lock``), so
    the serialized level is asked for. Finalization is dac's, at exit, and skipped once
    a process was lost.
    """
    if _state["MPI"] is not None:
        return _state["MPI"]
    set_mpi_defaults()
    if this_host_only and os.environ.get("DAC_LOOPBACK", "1") != "0" and \
            "UCX_NET_DEVICES" not in os.environ and not ulfm_active():
        os.environ["UCX_NET_DEVICES"] = "lo"
        _state["loopback"] = True
    import mpi4py  # lazy: its options are set here, before MPI starts
    if "mpi4py.MPI" not in sys.modules:
        mpi4py.rc.threads = True
        mpi4py.rc.thread_level = "serialized"
        mpi4py.rc.finalize = False
    _install_shim()
    from mpi4py import MPI  # lazy: initializes MPI (never at import)
    _state["MPI"] = MPI
    _state["owner"] = os.getpid()
    os.register_at_fork(after_in_child=_forked)
    atexit.register(_finalize)
    _exit_cleanly_on_sigterm()
    return MPI


def _exit_cleanly_on_sigterm() -> None:
    """SIGTERM ends the root like ``sys.exit(143)``, so that its trees stop and MPI
    finalizes (the default action would leave the tree to its watchdogs and the
    shared memory in ``/dev/shm``). Only where nobody chose a handler already."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
        end_run_on(_on_sigterm)     # (also in a call MPI holds: a Deadline's)


def _on_sigterm(signum: int, frame: FrameType | None) -> NoReturn:
    """The SIGTERM handler: ``SystemExit`` runs the clean-up at exit."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)      # a second one ends it at once
    print(f"dac: stopped by SIGTERM (pid {os.getpid()}); ending every process of its "
          f"runs", file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


def _forked() -> None:
    """A child forked from this process after MPI started: the MPI state it
    inherited is its parent's, which it must never use or finalize."""
    _state["forked"] = True


def forked_child() -> bool:
    """This process was forked from the one that started MPI (``check_usable``)."""
    return _state["forked"]


def check_reach(hosts: Collection[str]) -> None:
    """Refuse a tree on other hosts in a process whose MPI listens on loopback only
    (its first tree was on this machine: ``init_mpi``)."""
    if _state["loopback"] and hosts:
        raise MPIBroken(
            f"MPI in this process listens on loopback only (its first tree ran on this "
            f"machine alone), so it cannot reach {', '.join(sorted(hosts)[:3])}: run "
            f"trees on other hosts from a new process, or set DAC_LOOPBACK=0")


def check_usable() -> None:
    """Raise ``MPIBroken`` when this process must not spawn again."""
    if _state["forked"]:
        raise MPIBroken(
            f"this process (pid {os.getpid()}) was forked from pid {_state['owner']} "
            f"after MPI started there, and MPI cannot be used in a forked child: run "
            f"dac in the parent, or start the child with multiprocessing's 'spawn' or "
            f"'forkserver' method (or a new Python process)")
    if _state["broken"] is not None:
        raise MPIBroken(
            f"MPI in this process can no longer start processes: an earlier run lost "
            f"{_state['broken']}, and MPICH ended the processes and the process manager "
            f"of that job. Start a new Python process to run again.")


SWEEP_S = 5.0       # how long a loss waits for the killed processes to unmap their files


def mark_broken(what: str, shm_names: Iterable[str] = (),
                since: float | None = None) -> None:
    """A spawned process was lost: remove its job's shared-memory segments, skip
    ``MPI_Finalize`` at exit, refuse later spawns.

    Besides the segments the processes reported, those made since ``since`` (the
    tree's start) that no live process maps any more are the job's too: processes
    killed while MPI was still starting could not report theirs."""
    if _state["broken"] is None:
        _state["broken"] = what
    unlink_shm(list(shm_names) + own_shm())
    if since is not None:
        sweep_shm_after(since)
    sweep_hydra_files()


def sweep_shm_after(since: float | None) -> None:
    """Remove the MPI shared-memory files made since ``since`` (a tree's start) that
    no live process maps, waiting up to ``SWEEP_S`` for processes that are ending to
    unmap theirs; what is still mapped then is looked at again when this process
    exits (a loaded machine ends killed processes late)."""
    if since is None:
        return
    sweep_unused_shm_waiting(since, SWEEP_S)
    first = _state["sweep_at_exit"]
    if first is None:
        atexit.register(_sweep_at_exit, os.getpid())
    _state["sweep_at_exit"] = since if first is None else min(first, since)


def _sweep_at_exit(owner: int) -> None:
    """At exit: ``sweep_shm_after``'s last look (not in a forked child)."""
    since = _state["sweep_at_exit"]
    if since is not None and os.getpid() == owner:
        sweep_unused_shm(since)


def _finalize() -> None:
    """At exit: ``MPI_Finalize``, unless MPI is its parent's or a process was lost."""
    MPI = _state["MPI"]
    if MPI is None or _state["broken"] is not None or _state["forked"]:
        return
    try:
        if MPI.Is_initialized() and not MPI.Is_finalized():
            import mpi4py  # lazy: imported by init_mpi already; never at import
            if mpi4py.rc.finalize is False:
                with Deadline(CLOSE_S, f"MPI_Finalize did not return within "
                              f"{CLOSE_S:.0f} s (a process of a run ended without "
                              f"closing its link?): exiting without it",
                              doing="MPI_Finalize"):
                    MPI.Finalize()
    except Exception:                                       # noqa: BLE001
        pass
