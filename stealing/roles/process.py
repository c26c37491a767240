"""Entry point of every spawned dac process (routers and leaves).

The process first forks: the parent stays a small *monitor* (no MPI, no user code) that
waits for its child and, if the child ends without saying it finished (a task calling
``os._exit``, a segfault in native code, ``kill -9``), writes a record of the loss
(pid, host, role, exit code or signal, the task it was running) into the run's folder
on this host, where the root looks for it. Only a parent sees how a process ended, and
the process manager that is the real parent belongs to MPI.

The child does the work. The parent's first message (INIT) says which role to play.
SIGINT is ignored here: Ctrl-C reaches the whole process group, and the root alone
decides how the run ends (it tells its children to stop, they tell theirs). A watchdog
ends the process if the root disappears without saying goodbye, so nothing is left
running. stdin is empty (``input()`` in a task gets EOFError, as serial code with no
input does), and the process exits as soon as the tree stops, without waiting for
threads a task may have left running.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import select
import signal
import socket
import sys
import time
import traceback
from types import ModuleType
from typing import TYPE_CHECKING

from stealing.host.losses import lost_record_path, note_shm
from stealing.host.procs import alive, descendants, signal_all, table
from stealing.host.shm import own_shm, unlink_shm
from stealing.observe.output import release_output
from stealing.observe.trace import open_trace
from stealing.roles.script_env import adopt
from stealing.roles.status import ROLES, SharedStatus, Start
from stealing.transport import protocol as P
from stealing.transport.bell import Bell, bell_name
from stealing.transport.mailbox import Mailbox, crowded
from stealing.transport.mpi_env import set_defaults as set_mpi_defaults
from stealing.transport.segments import Segments
from stealing.transport.world import spawned

if TYPE_CHECKING:
    from mpi4py.MPI import Intercomm

ROOT_CHECK_S = 0.5      # how often a monitor looks at the root, where no pidfd tells it


def _monitor(child: int, status: SharedStatus, run_dir: str | None) -> None:
    """Wait for the child; record a loss; exit as the child did.

    If the root (on this host) dies first, the child is ended: a child in the middle
    of a long task polls no link and would run it to the end (under Open MPI's ULFM
    nothing else ends it), and nothing of a run may outlive its root by more than a
    moment. That is no loss to record: the run is over."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    wake = _wake_on_sigchld()
    root_fd: int | None = None
    ended_it = False
    while True:
        raw = _reap(child)
        if raw is not None:
            break
        root = status.root_pid
        if root and not ended_it:
            if root_fd is None:
                root_fd = _pidfd(root)
            if not alive(root):
                status.finished()
                ended_it = True
                os.kill(child, signal.SIGKILL)
        watched = [wake] if ended_it or root_fd is None else [wake, root_fd]
        select.select(watched, [], [], _monitor_timeout(status, root, root_fd, ended_it))
        _drain(wake)
    _end_orphans()
    code = os.waitstatus_to_exitcode(raw)
    tid, finished, role = status.read()
    if not finished:
        unlink_shm(status.shm_names())
    if not finished and run_dir:
        record = {"pid": child, "host": socket.gethostname(), "role": ROLES[role],
                  "code": code, "tid": tid, "time": time.time()}
        try:
            with open(fatal_path(run_dir, child)) as f:
                record["traceback"] = f.read()[-8000:]
            os.unlink(fatal_path(run_dir, child))
        except (OSError, ValueError):
            pass
        import json  # lazy: a loss is rare, and every process starts with this module
        try:        # the root made the folder; once it removed it, nobody is looking
            tmp = lost_record_path(run_dir, child) + ".tmp"
            with open(tmp, "w") as f:
                json.dump(record, f)
            os.replace(tmp, lost_record_path(run_dir, child))
        except OSError:
            pass
    os._exit(code if code >= 0 else 128 - code)


def _wake_on_sigchld() -> int:
    """A descriptor that turns readable when a child of this process ends (SIGCHLD,
    through ``signal.set_wakeup_fd``): the monitor sleeps in ``select`` on it and on
    the root's pidfd, and wakes for nothing else."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    return r


def _drain(fd: int) -> None:
    """Empty the wake-up pipe (its bytes only say "a signal came")."""
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _pidfd(pid: int) -> int | None:
    """A descriptor that turns readable when ``pid`` ends (Linux 5.3 and later), or
    None where there is none: the monitor then looks every ``ROOT_CHECK_S``."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):    # no pidfd here, or the root ended already
        return None


def _monitor_timeout(status: SharedStatus, root: int, root_fd: int | None,
                     ended_it: bool) -> float | None:
    """How long the monitor may sleep: until a wake-up (None) once nothing needs a
    look. The child writes the root's pid before its role, so a role means the pid
    is final: the root on another host (0), or watched through its pidfd. Before
    that, or with no pidfd, it looks every ``ROOT_CHECK_S`` (a monitor that woke
    twice a second, 128 leaves' monitors took 0.27-0.45 CPU-seconds of a 6 s job on 2
    cores)."""
    if ended_it:
        return None
    settled = status.read()[2] != 0
    if settled and (not root or root_fd is not None):
        return None
    return ROOT_CHECK_S


def _reap(child: int) -> int | None:
    """Reap every child that ended (orphans a task left come here too: the monitor is
    their subreaper); the wait status of ``child`` once it ended, else None."""
    found = None
    while True:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG)
        except InterruptedError:
            continue
        except ChildProcessError:
            return found if found is not None else 0
        if not pid:
            return found
        if pid == child:
            found = raw


def _end_orphans(wait_s: float = 2.0) -> None:
    """Processes a task started (and left behind) end with their leaf: they were
    reparented to this monitor, so each is killed with everything below it."""
    me = os.getpid()
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        left = [pid for pid, (_name, parent) in table().items() if parent == me]
        if not left:
            return
        signal_all(descendants(left), signal.SIGKILL)
        _reap(-1)
        time.sleep(0.01)


def _prctl(option: int, value: int) -> None:
    """Linux's prctl(option, value), where there is one (a no-op elsewhere)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


PR_SET_PDEATHSIG = 1            # the signal a process gets when its parent ends
PR_SET_CHILD_SUBREAPER = 36     # orphans below a process are reparented to it


def main() -> None:
    started = time.time()
    spawned[0] = True               # (``import dac`` must not take it for a rank)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    run_dir = sys.argv[1] if len(sys.argv) > 1 else None
    status = SharedStatus()
    sys.stdout.flush()
    sys.stderr.flush()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    monitor = os.getpid()
    child = os.fork()
    if child:
        _monitor(child, status, run_dir)
    # the child dies with its monitor (killed with it, nothing would record its loss)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != monitor:
        os._exit(1)
    _prctl(PR_SET_CHILD_SUBREAPER, 0)
    _empty_stdin()
    try:
        _work(status, run_dir, started)
    except BaseException:           # noqa: BLE001 - told to the root, then the end
        _die_telling(run_dir)


def _die_telling(run_dir: str | None) -> None:
    """The process failed where it could not report over MPI (starting MPI, a link
    that broke): its traceback goes into the run's folder, where the monitor puts it
    in the record of the loss, and the root shows it once with the
    ``LostProcessError``; nothing is printed here (one traceback per process would
    bury the cause)."""
    text = traceback.format_exc()
    try:
        release_output()
    except Exception:                                       # noqa: BLE001
        pass
    written = False
    if run_dir:
        try:
            with open(fatal_path(run_dir, os.getpid()), "w") as f:
                f.write(text)
            written = True
        except OSError:
            pass
    if not written and sys.__stderr__ is not None:
        sys.__stderr__.write(text)
        sys.__stderr__.flush()
    os._exit(1)


def fatal_path(run_dir: str, pid: int) -> str:
    """Where a process that dies of an exception leaves its traceback."""
    return os.path.join(run_dir, f"fatal-{pid}.txt")


def _empty_stdin() -> None:
    """A spawned process's stdin is a pipe from MPI that never ends: make it empty."""
    try:
        fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(fd, 0)
        os.close(fd)
        sys.stdin = open(0, closefd=False)
    except OSError:
        pass


def _start_mpi() -> ModuleType:
    """Start MPI (``mpi4py.MPI``) with dac's settings: imported here, in the process
    that does the work, so that its monitor stays without MPI."""
    set_mpi_defaults()              # (as the root did: stealing.transport.mpi_env)
    import mpi4py  # lazy: the worker alone (not its monitor) loads MPI, rc set first
    mpi4py.rc.threads = False
    mpi4py.rc.finalize = False
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI (in the worker only)
    return MPI


def _meet_parent(MPI: ModuleType) -> tuple[Intercomm, Mailbox, P.Init | None]:
    """The link to the parent (a dead parent: an error, not an abort), this process's
    mailbox, and the parent's first message, INIT (None: the tree stopped first)."""
    parent = MPI.Comm.Get_parent()
    if parent == MPI.COMM_NULL:
        sys.exit("stealing.roles.process is started by dac with MPI_Comm_spawn, not by hand")
    return parent, *take_init(MPI, parent)


def take_init(MPI: ModuleType, parent: Intercomm) -> tuple[Mailbox, P.Init | None]:
    """This process's mailbox, and the parent's first message on its new link: INIT.
    None instead when the parent sends STOP first (a Ctrl-C in the root between its
    spawn and the INITs): this process then says BYE, as one that played its role,
    and its caller lets the link go, so that the tree stops at once and cleanly."""
    parent.Set_errhandler(MPI.ERRORS_RETURN)    # a dead parent: an error, not an abort
    mailbox = Mailbox(MPI)
    got = mailbox.wait([parent])
    assert got is not None                      # (no timeout: it waits for one)
    _, _, tag, init = got
    if tag == P.STOP:
        mailbox.send(parent, P.Bye([]), 0, P.BYE)
        return mailbox, None
    if tag != P.INIT:
        raise RuntimeError(f"dac process: expected INIT, got {P.name(tag)}")
    mailbox.crowded = crowded(init.tree.leaves)
    mailbox.ring_waits = init.role == "router"
    return mailbox, init


def _work(status: SharedStatus, run_dir: str | None, started: float) -> None:
    """The child's life: start MPI, take INIT, play the role it names until the tree
    stops, then end at once (``_finish``)."""
    MPI = _start_mpi()
    mpi_up = time.time()
    parent, mailbox, init = _meet_parent(MPI)
    if init is not None:
        marks = {"main": started, "mpi": mpi_up, "init": time.time()}
        play(MPI, parent, mailbox, init, Start(marks, own_shm(), status, os.getppid()),
             run_dir)
    _finish(MPI, parent, mailbox, status)


def play(MPI: ModuleType, parent: Intercomm, mailbox: Mailbox, init: P.Init,
         start: Start, run_dir: str | None) -> None:
    """Play the role ``init`` names (router or leaf) until the tree stops: the same
    for a spawned process and a launcher's rank (``stealing.roles.ranks``)."""
    status = start.status
    adopt(init.script)          # tasks run here as they would in the user's script
    status.shm(start.shm)
    note_shm(run_dir, start.shm)
    here = socket.gethostname()
    tree = init.tree
    if tree.root_host == here:
        status.root(tree.root_pid)
    status.role(init.role)          # after the root's pid: then the monitor knows both
    mailbox.trace = open_trace("/".join([init.role, *map(str, init.path)]))
    mailbox.name_link(parent, "up")
    _open_bells(mailbox, parent, init)

    def watchdog() -> None:
        """The root on this host is gone without a goodbye: end now."""
        if tree.root_host == here and not alive(tree.root_pid):
            unlink_shm(start.shm)
            status.finished()
            os._exit(3)

    def parent_lost(exc: BaseException) -> None:
        """The parent died (Open MPI's ULFM reports it): whatever this process holds
        is redone from the parent's parent, so it ends at once."""
        unlink_shm(start.shm)
        status.finished()
        os._exit(4)

    mailbox.on_parent_lost = parent_lost
    # a role's code is imported by the processes that play it: a leaf skips the
    # router's policy and membership, a router the task executor's
    if init.role == "router":
        from stealing.roles.router import serve  # lazy: by role
    else:
        from stealing.roles.leaf import serve  # lazy: by role
    serve(MPI, parent, init, start, mailbox, watchdog)


def _finish(MPI: ModuleType, parent: Intercomm, mailbox: Mailbox,
            status: SharedStatus) -> None:
    """The tree stopped: deliver what is still going up, close the link, finalize
    MPI, tell the monitor this was no loss, and end the process now."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    mailbox.flush(timeout=10)
    parent.Disconnect()
    sys.stdout.flush()
    sys.stderr.flush()
    MPI.Finalize()
    status.finished()
    _exit_now()


def _open_bells(mailbox: Mailbox, parent: Intercomm, init: P.Init) -> None:
    """This process's doorbell, and its parent's to ring when both run on this host
    (``stealing.transport.bell``); its shared-memory segments for that host's
    processes (``stealing.transport.segments``)."""
    root_pid, path = init.tree.root_pid, init.path
    if not path:
        return
    mailbox.segments = Segments(root_pid)      # (used on links that ring: this host's)
    mailbox.bell = Bell.open(bell_name(root_pid, path))
    if init.parent_rings:
        mailbox.rung_by(parent)
    if init.parent_host == socket.gethostname():
        mailbox.ring_link(parent, 0, bell_name(root_pid, path[:-1]))


def _exit_now() -> None:
    """End the process once MPI is finalized, without Python's own teardown: with
    numba and LLVM loaded that takes a leaf about 0.12 s (measured: 7 ms from STOP
    to the atexit handlers, 0.13 s until the process was gone), and the root waits
    for every process of the tree to end before ``close`` returns. Nothing is left
    to clean: the atexit handlers run first, and threads a task left running
    (which Python would wait for) end with the process."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    ctypes.CDLL(None).exit(0)
