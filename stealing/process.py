"""Entry point of every spawned dac process (routers and leaves).

The parent's first message (INIT) says which role to play. SIGINT is ignored here:
Ctrl-C reaches the whole process group, and the root alone decides how the run ends
(it tells its children to stop, they tell theirs). A watchdog ends the process if the
root disappears without saying goodbye, so nothing is left running.
"""

from __future__ import annotations

import os
import signal
import sys


def _root_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.setdefault("UCX_LOG_LEVEL", "error")     # see stealing.root.init_mpi
    import mpi4py
    mpi4py.rc.threads = False
    from mpi4py import MPI

    from . import protocol as P
    from .waiting import Mailbox

    parent = MPI.Comm.Get_parent()
    if parent == MPI.COMM_NULL:
        sys.exit("stealing.process is started by dac with MPI_Comm_spawn, not by hand")
    mailbox = Mailbox(MPI)
    _, _, tag, init = mailbox.wait([parent])
    if tag != P.INIT:
        raise RuntimeError(f"dac process: expected INIT, got {P.NAMES.get(tag, tag)}")
    for path in reversed(init.get("sys_path", [])):
        if path not in sys.path:
            sys.path.insert(0, path)
    root_pid, root_host = init.get("root_pid"), init.get("root_host")

    def watchdog():
        import socket
        if root_pid and root_host == socket.gethostname() and not _root_alive(root_pid):
            os._exit(3)

    if init["role"] == "router":
        from .router import serve
    else:
        from .leaf import serve
    serve(MPI, parent, init, mailbox, watchdog)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    mailbox.flush(timeout=10)
    parent.Disconnect()
