"""A warm tree: ``dac up`` starts one in the background; scripts attach to it.

Every leaf is a fresh Python interpreter, and importing numba and loading its cache
costs each one most of a second. A tree left running (as ``ray start`` or a Dask
scheduler are) makes ``python my_search.py`` pay that once: while one is up,
``dac.run``, ``Runtime`` and ``dac run`` send their tasks to it instead of spawning
their own, and say so once on stderr. They spawn their own tree, as always, when none
is up, when it does not answer, when it is gone, or when the run asks for a tree of
another shape (other leaves, topology or stealing settings); ``attach=False`` or
``DAC_ATTACH=0`` never attach.

    dac up [--procs N | --topology FILE [--local]] [--leaf-mode ...] [--preload m1,m2]
    dac status [--json]
    dac down

The tree's root is a background process of its own (``python -m dac.warm_tree``), serving
one script at a time (``stealing.warm.server``); where it is written down, and who may
use it, is ``stealing.warm.folder``'s business.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from stealing.host.procs import alive, start_time
from stealing.warm import folder as W
from stealing.warm import wire
from stealing.warm.folder import TreeGone

from .attaching import find, read_tree
from .errors import DacError
from .runtime import Runtime

PRELOAD = ("dac.execution", "numpy", "numba")    # what dac up's leaves import at once
UP_WAIT_S = 300.0       # how long ``dac up`` waits for every leaf to be ready
READY_ACK = b"k"        # what ``dac up`` writes its server once it reports the tree up


# dac up / status / down ----------------------------------------------------------
def up(topology: str | os.PathLike[str] | None = None, wait_s: float = UP_WAIT_S,
       **options: Any) -> dict[str, Any]:
    """Start a warm tree in the background and return its status once every leaf is
    ready. ``topology`` and ``options`` are ``Runtime``'s; ``preload`` defaults to
    ``PRELOAD`` (a warm leaf should not import numba at the first task). One at a
    time: the tree folder's lock is taken first, and the server keeps it."""
    options.setdefault("preload", list(PRELOAD))
    Runtime(topology, **options)                    # bad options fail here, not later
    folder = read_tree(W.make_tree_dir)
    try:
        lock = W.take_up_lock(folder)
    except W.TreeBusy as exc:
        running = find()
        if running is not None:
            raise DacError(f"a warm tree is already up (pid {running['pid']}, "
                           f"{running['leaves']} leaves): `dac down` stops it") from None
        raise DacError(f"{exc}: wait for it, or `dac down`") from None
    try:
        running = find()
        if running is not None:
            raise DacError(f"a warm tree is already up (pid {running['pid']}, "
                           f"{running['leaves']} leaves): `dac down` stops it")
        W.remove_tree_file(folder)          # a damaged one: this tree replaces it
        return _start_server(folder, lock, topology, options, wait_s)
    finally:
        os.close(lock)                      # the server holds its own copy


def _start_server(folder: str, lock: int, topology: str | os.PathLike[str] | None,
                  options: dict[str, Any], wait_s: float) -> dict[str, Any]:
    """Start ``python -m dac.warm_tree`` in the background (its output to the tree
    folder's log) and wait until it has written the tree file.

    The server holds the read end of a pipe whose write end only this ``dac up``
    holds: it stays up once it reads ``READY_ACK`` there, and ends (with what it
    spawned) when the pipe closes first. So a ``dac up`` that ends before it
    reports the tree up, however it ends (Ctrl-C, SIGKILL from a ``timeout`` or a
    ``subprocess.run`` interrupted), leaves no tree behind."""
    log = os.path.join(folder, W.LOG_FILE)
    starter, ack = os.pipe()
    spec = json.dumps({"topology": _topology_arg(topology), "options": options,
                       "lock_fd": lock, "starter_fd": starter})
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            proc = subprocess.Popen([sys.executable, "-m", "dac.warm_tree", spec],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    start_new_session=True, cwd=os.getcwd(),
                                    pass_fds=(lock, starter),
                                    env=dict(os.environ, PYTHONPATH=_python_path()))
    finally:
        os.close(starter)
    try:
        info = _wait_ready(proc, log, wait_s)
        ready = status() or info
        os.write(ack, READY_ACK)
        return ready
    except BaseException:
        # a Ctrl-C (or the wait's end) stops the server this started: in a session
        # of its own it saw no signal, and it would come up with nobody to know it
        _stop_server(proc.pid, None, 0.0)
        proc.wait()
        raise
    finally:
        os.close(ack)


def _wait_ready(proc: subprocess.Popen, log: str, wait_s: float) -> dict[str, Any]:
    """The tree file the server ``proc`` writes once every leaf is ready."""
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        code = proc.poll()
        if code is not None:
            raise DacError(f"the warm tree did not start (exit code {code}); its "
                           f"log {log} ends with:\n{_tail(log)}")
        info = read_tree(W.read_tree_file)
        if info is not None and info["pid"] == proc.pid:
            return info
        time.sleep(0.05)
    raise DacError(f"the warm tree was not ready after {wait_s:.0f} s: stopped it; "
                   f"see {log}")


def status() -> dict[str, Any] | None:
    """The warm tree's state (processes, uptime, runs served, ...), or None."""
    info = find()
    if info is None:
        return None
    try:
        return _ask(info, wire.StatusRequest())
    except (OSError, EOFError, TreeGone):
        return dict(info, answering=False)


def resize(kind: str, count: int, host: str | None = None,
           cluster: str | None = None) -> dict[str, Any] | None:
    """``dac grow`` / ``dac shrink``: add ``count`` leaves to the warm tree (on
    ``host``, under ``cluster``'s router: see ``Runtime.grow``), or let ``count`` go; returns its status after, or None when no tree is
    up. A job under way takes the new leaves at once. A shrink the tree cannot do is
    refused whole (``DacError`` saying why), nothing changed."""
    info = find()
    if info is None:
        return None
    sock, reply = wire.call(info["socket"], wire.Resize(kind, count, host, cluster), 120.0)
    sock.close()
    if isinstance(reply, wire.Failed):
        raise DacError(f"{kind}: {reply.error}")
    if not isinstance(reply, wire.TreeStatus):
        raise TreeGone(f"the warm tree answered {type(reply).__name__}")
    return reply.info


def down(timeout: float = 30.0) -> dict[str, Any] | None:
    """Stop the warm tree and everything it spawned; returns its last status (with
    ``"stale"`` or ``"damaged"`` when only a file was left to clear), or None when no
    tree was up. A server that does not answer gets SIGTERM, then SIGKILL; a signal
    goes only to a process that is the tree's server (pid, start time and command
    line), never to another."""
    folder = W.tree_dir()
    try:
        info = read_tree(lambda: W.read_tree_file(folder))
    except DacError as exc:             # damaged: the lock's holder is its server
        pid = _lock_holder(folder)
        if pid is not None:
            _stop_server(pid, None, timeout)
        W.remove_tree_file(folder)
        return {"damaged": str(exc), "pid": pid, "folder": folder}
    if info is None:
        return None
    pid = info["pid"]
    if not W.server_alive(info) or not _is_server(pid):
        W.remove_tree_file(folder, pid)
        return dict(info, stale=True)
    last = None
    try:
        last = _ask(info, wire.Down(), timeout=timeout)
    except (OSError, EOFError, TreeGone):
        pass
    _stop_server(pid, info["started_ticks"], timeout)
    W.remove_tree_file(folder, pid)
    return last or info


def _stop_server(pid: int, started: int | None, timeout: float) -> None:
    """Wait for the server ``pid`` to end; then SIGTERM, then SIGKILL it (only while
    it is still that server)."""
    end = time.monotonic() + timeout
    for sig in (signal.SIGTERM, signal.SIGKILL):
        while alive(pid) and time.monotonic() < end:
            time.sleep(0.05)
        if not alive(pid) or not _is_server(pid) or \
                (started is not None and start_time(pid) != started):
            return              # never a signal to a process dac did not start
        os.kill(pid, sig)
        end = time.monotonic() + 10.0


def _lock_holder(folder: str) -> int | None:
    """The pid holding the tree folder's ``up.lock`` (``/proc/locks``), if any."""
    try:
        st = os.stat(os.path.join(folder, W.LOCK_FILE))
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    inode = f":{st.st_ino}"
    for line in lines:
        fields = line.split()
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[5].endswith(inode) \
                and fields[4].isdigit():
            return int(fields[4])
    return None


def _is_server(pid: int) -> bool:
    """``pid`` runs a warm tree's server (``python -m dac.warm_tree``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return False
    return b"dac.warm_tree" in args


def _ask(info: dict[str, Any], request: wire.StatusRequest | wire.Down,
         timeout: float = 5.0) -> dict[str, Any]:
    """Send ``request`` to the tree's server; its ``TreeStatus`` answer."""
    sock, reply = wire.call(info["socket"], request, timeout)
    sock.close()
    if not isinstance(reply, wire.TreeStatus):
        raise TreeGone(f"the warm tree answered {type(reply).__name__}")
    return reply.info


# the background process -----------------------------------------------------------
def _topology_arg(topology: object) -> str | None:
    """A topology file's absolute path for the server, or None (this machine)."""
    if topology is None or isinstance(topology, (str, os.PathLike)):
        return None if topology is None else os.path.abspath(os.fspath(topology))
    raise DacError("dac up takes a topology file's path (or none), not a Topology object")


def _python_path() -> str:
    """The server imports this dac, whatever the current folder."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rest = os.environ.get("PYTHONPATH")
    return here + (os.pathsep + rest if rest else "")


def _tail(path: str, lines: int = 15) -> str:
    try:
        with open(path) as f:
            return "".join(f.readlines()[-lines:]).rstrip() or "(empty)"
    except OSError:
        return "(no log)"


def _serve(spec: dict[str, Any]) -> None:
    """The server process: spawn the tree, serve scripts until ``dac down``. It
    holds the tree folder's lock (inherited from ``dac up``) until it ends, and no
    process it starts inherits it."""
    from stealing.warm.server import TreeServer  # lazy: only the server process needs it
    os.set_inheritable(spec["lock_fd"], False)
    _end_if_abandoned(spec["starter_fd"])

    rt = Runtime(spec["topology"], attach=False, **spec["options"])
    shape = rt.tree_shape()
    info = {"leaves": shape["leaves"], "routers": shape["routers"],
            "leaf_mode": shape["leaf_mode"], "shape": shape,
            "topology": spec["topology"], "options": spec["options"],
            "python": sys.executable}
    server = TreeServer(rt.make_scheduler, info, W.make_tree_dir())
    try:
        server.start()
        print(f"dac warm tree: pid {os.getpid()}, {shape['leaves']} leaves, ready in "
              f"{server.info['ready_s']:.2f} s", flush=True)
    except BaseException:       # SIGTERM too, up to serve's own cleanup
        server.close()
        raise
    server.serve()


def _end_if_abandoned(fd: int) -> None:
    """Watch the pipe from ``dac up`` (see ``_start_server``) in a thread: if it
    closes before ``READY_ACK`` came, ``dac up`` ended without reporting the tree,
    and the server sends itself SIGTERM, which ends a start or ``serve`` with
    everything spawned. The thread only reads; it makes no MPI call."""
    os.set_inheritable(fd, False)

    def watch() -> None:
        try:
            got = os.read(fd, 1)
        finally:
            os.close(fd)
        if got != READY_ACK:
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="dac-up-watch", daemon=True).start()


if __name__ == "__main__":
    _serve(json.loads(sys.argv[1]))
