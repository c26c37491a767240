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

The tree's root is a background process of its own (``python -m dac.warm``), serving
one script at a time (``stealing.tree_server``); where it is written down, and who may
use it, is ``stealing.warm``'s business.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from stealing import warm as W
from stealing.procs import alive
from stealing.warm import TreeGone

from .attaching import find, read_tree
from .errors import DacError

PRELOAD = ("dac.execution", "numpy", "numba")    # what dac up's leaves import at once
UP_WAIT_S = 300.0       # how long ``dac up`` waits for every leaf to be ready


# dac up / status / down ----------------------------------------------------------
def up(topology=None, wait_s: float = UP_WAIT_S, **options) -> dict:
    """Start a warm tree in the background and return its status once every leaf is
    ready. ``topology`` and ``options`` are ``Runtime``'s; ``preload`` defaults to
    ``PRELOAD`` (a warm leaf should not import numba at the first task)."""
    from .runtime import Runtime
    options.setdefault("preload", list(PRELOAD))
    running = find()
    if running is not None:
        raise DacError(f"a warm tree is already up (pid {running['pid']}, "
                       f"{running['leaves']} leaves): `dac down` stops it")
    Runtime(topology, **options)                    # bad options fail here, not later
    folder = read_tree(W.make_tree_dir)
    log = os.path.join(folder, W.LOG_FILE)
    spec = json.dumps({"topology": _topology_arg(topology), "options": options})
    with open(log, "w") as out:
        os.chmod(log, 0o600)
        proc = subprocess.Popen([sys.executable, "-m", "dac.warm", spec],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True, cwd=os.getcwd(),
                                env=dict(os.environ, PYTHONPATH=_python_path()))
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        code = proc.poll()
        if code is not None:
            raise DacError(f"the warm tree did not start (exit code {code}); its "
                           f"log {log} ends with:\n{_tail(log)}")
        info = read_tree(W.read_tree_file)
        if info is not None and info["pid"] == proc.pid:
            return status() or info
        time.sleep(0.05)
    proc.terminate()
    raise DacError(f"the warm tree was not ready after {wait_s:.0f} s: stopped it; "
                   f"see {log}")


def status() -> dict | None:
    """The warm tree's state (processes, uptime, runs served, ...), or None."""
    info = find()
    if info is None:
        return None
    try:
        return _ask(info, W.StatusRequest())
    except (OSError, EOFError, TreeGone):
        return dict(info, answering=False)


def resize(kind: str, count: int, host: str | None = None) -> dict | None:
    """``dac grow`` / ``dac shrink``: add ``count`` leaves to the warm tree (on
    ``host``), or let ``count`` go; returns its status after, or None when no tree is
    up. A job under way takes the new leaves at once."""
    info = find()
    if info is None:
        return None
    sock, reply = W.call(info["socket"], W.Resize(kind, count, host), 120.0)
    sock.close()
    if isinstance(reply, W.Failed):
        raise DacError(f"{kind}: {reply.error}")
    if not isinstance(reply, W.Status):
        raise TreeGone(f"the warm tree answered {type(reply).__name__}")
    return reply.info


def down(timeout: float = 30.0) -> dict | None:
    """Stop the warm tree and everything it spawned; returns its last status, or None
    when no tree was up. A server that does not answer gets SIGTERM, then SIGKILL."""
    import signal
    info = find()
    if info is None:
        return None
    pid = int(info["pid"])
    last = None
    try:
        last = _ask(info, W.Down(), timeout=timeout)
    except (OSError, EOFError, TreeGone):
        pass
    end = time.monotonic() + timeout
    for sig in (signal.SIGTERM, signal.SIGKILL):
        while alive(pid) and time.monotonic() < end:
            time.sleep(0.05)
        if not alive(pid) or not _is_server(pid):
            break                   # never a signal to a process dac did not start
        os.kill(pid, sig)
        end = time.monotonic() + 10.0
    W.remove_tree_file(info["folder"], pid)
    return last or info


def _is_server(pid: int) -> bool:
    """``pid`` runs a warm tree's server (``python -m dac.warm``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return False
    return b"dac.warm" in args


def _ask(info: dict, request, timeout: float = 5.0) -> dict:
    sock, reply = W.call(info["socket"], request, timeout)
    sock.close()
    if not isinstance(reply, W.Status):
        raise TreeGone(f"the warm tree answered {type(reply).__name__}")
    return reply.info


# the background process -----------------------------------------------------------
def _topology_arg(topology):
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


def _serve(spec: dict) -> None:
    """The server process: spawn the tree, serve scripts until ``dac down``."""
    from stealing.tree_server import TreeServer

    from .runtime import Runtime
    rt = Runtime(spec["topology"], attach=False, **spec["options"])
    shape = rt.tree_shape()
    info = {"leaves": shape["leaves"], "routers": shape["routers"],
            "leaf_mode": shape["leaf_mode"], "shape": shape,
            "topology": spec["topology"], "options": spec["options"],
            "python": sys.executable}
    server = TreeServer(rt.make_scheduler, info, W.make_tree_dir())
    try:
        server.start()
    except BaseException:
        server.close()
        raise
    print(f"dac warm tree: pid {os.getpid()}, {shape['leaves']} leaves, ready in "
          f"{server.info['ready_s']:.2f} s", flush=True)
    server.serve()


if __name__ == "__main__":
    _serve(json.loads(sys.argv[1]))
