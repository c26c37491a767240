"""A warm tree's address and the messages between it and the scripts that attach to it.

``dac up`` leaves a process tree running in the background; its root (the *tree
server*, ``stealing.tree_server``) listens on a Unix socket, and a script's ``dac.run``
attaches to it (``stealing.attached``) instead of spawning a tree of its own. Both find
each other through the *tree folder*:

    $DAC_TREE_DIR, else $XDG_RUNTIME_DIR/dac, else <tmp>/dac-tree-<uid>
        tree.json   who serves (pid, uid, leaves, options, when it started)
        tree.sock   the server's socket
        tree.log    the server's output (and what tasks print on the leaves)

The folder is the user's alone (mode 0700), and so is the file: a tree belongs to the
user who started it. A folder or file that another user owns, or that others may
write, is refused with ``TreeFileError`` (what is wrong, and where), never read: what
comes through the socket is unpickled, so only the owner may speak on it. The server
checks its peers' uid as well (``SO_PEERCRED``).

On the socket, every message is a length-prefixed pickle of one of the types below.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import stat
import struct
import tempfile
from typing import NamedTuple

TREE_FILE = "tree.json"
SOCKET_FILE = "tree.sock"
LOG_FILE = "tree.log"
_LENGTH = struct.Struct("<Q")


class TreeFileError(RuntimeError):
    """A tree folder or file that must not be trusted, or cannot be read."""


class TreeGone(RuntimeError):
    """The warm tree stopped answering, or ended (``dac down``, a lost process)."""


def tree_dir() -> str:
    """The folder of this user's warm tree (it may not exist)."""
    given = os.environ.get("DAC_TREE_DIR")
    if given:
        return given
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "dac")
    return os.path.join(tempfile.gettempdir(), f"dac-tree-{os.getuid()}")


def make_tree_dir(path: str | None = None) -> str:
    """Create the tree folder (mode 0700) if needed and check it is the user's."""
    path = path or tree_dir()
    os.makedirs(path, mode=0o700, exist_ok=True)
    check_private(path, "folder")
    return path


def check_private(path: str, what: str) -> None:
    """Refuse ``path`` unless this user owns it and nobody else may write it."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise TreeFileError(f"warm tree {what} {path} is a symbolic link: refusing to "
                            f"use it (remove it, or set DAC_TREE_DIR)")
    if st.st_uid != os.getuid():
        raise TreeFileError(f"warm tree {what} {path} belongs to uid {st.st_uid}, not "
                            f"to you (uid {os.getuid()}): refusing to attach to "
                            f"another user's tree (set DAC_TREE_DIR to a folder of "
                            f"your own)")
    if st.st_mode & 0o022:
        raise TreeFileError(f"warm tree {what} {path} may be written by other users "
                            f"(mode {stat.S_IMODE(st.st_mode):04o}): refusing to use "
                            f"it (chmod go-w it, or remove it)")


def read_tree_file(folder: str | None = None) -> dict | None:
    """What ``tree.json`` says (plus ``"folder"``), or None when there is none. Raises
    ``TreeFileError`` for a file that is not the user's alone or is not a tree file."""
    folder = folder or tree_dir()
    path = os.path.join(folder, TREE_FILE)
    if not os.path.lexists(path):
        return None
    check_private(folder, "folder")
    check_private(path, "file")
    try:
        with open(path) as f:
            info = json.load(f)
    except (OSError, ValueError) as exc:
        raise TreeFileError(f"warm tree file {path} cannot be read: {exc} (remove it, "
                            f"or run `dac down`)") from None
    missing = [k for k in ("pid", "socket", "uid", "leaves") if k not in info] \
        if isinstance(info, dict) else ["an object"]
    if missing:
        raise TreeFileError(f"warm tree file {path} is not a dac tree file: it lacks "
                            f"{', '.join(missing)} (remove it, or run `dac down`)")
    info["folder"] = folder
    return info


def write_tree_file(folder: str, info: dict) -> str:
    """Write ``tree.json`` atomically, readable by the user alone."""
    path = os.path.join(folder, TREE_FILE)
    tmp = path + f".{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f, indent=1)
    os.replace(tmp, path)
    return path


def remove_tree_file(folder: str, pid: int) -> None:
    """Remove the tree file and socket if they are still ``pid``'s."""
    path = os.path.join(folder, TREE_FILE)
    try:
        with open(path) as f:
            if json.load(f).get("pid") != pid:
                return
    except (OSError, ValueError):
        return
    for name in (TREE_FILE, SOCKET_FILE):
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (Linux)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def call(path: str, msg, timeout: float | None):
    """Connect to the tree socket ``path``, send ``msg`` and read the answer:
    ``(socket, answer)``, the socket still open (closed if anything failed)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        send_msg(sock, msg)
        return sock, recv_msg(sock)
    except BaseException:
        sock.close()
        raise


# framing -----------------------------------------------------------------------
def send_msg(sock: socket.socket, msg) -> None:
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_LENGTH.pack(len(data)) + data)


def recv_msg(sock: socket.socket):
    """The next message; ``EOFError`` when the peer closed the socket."""
    (n,) = _LENGTH.unpack(_recv_exactly(sock, _LENGTH.size))
    return pickle.loads(_recv_exactly(sock, n))


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    parts, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other end closed the connection")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


# messages: script -> server ----------------------------------------------------------
class Hello(NamedTuple):
    """A script attaches: where its tasks must run as they would in it."""
    pid: int
    argv: list
    sys_path: list
    cwd: str
    recursion_limit: int


class Begin(NamedTuple):
    """A job starts (``RootScheduler.begin_job``)."""


class OpenStream(NamedTuple):
    """``RootScheduler.open_stream``."""


class Feed(NamedTuple):
    """``RootScheduler.feed``: tasks ``[(tid, payload)]`` and the functions they need."""
    payloads: list
    table: dict


class CloseStream(NamedTuple):
    """``RootScheduler.close_stream``."""


class Wait(NamedTuple):
    """``RootScheduler.wait_results(wanted, timeout=timeout)``: answered by Results."""
    wanted: object
    timeout: object


class EndJob(NamedTuple):
    """``RootScheduler.end_job``: answered by Stats."""


class Detach(NamedTuple):
    """The script is done with the tree (it stays up for the next one)."""


class StatusRequest(NamedTuple):
    """``dac status``: answered by Status (served while a job runs, too)."""


class Down(NamedTuple):
    """``dac down``: stop the tree and the server; answered by Status, then the
    connection closes when everything is gone."""


class Resize(NamedTuple):
    """``dac grow`` (``kind`` "grow": ``count`` leaves on ``host``, None for this
    machine) or ``dac shrink`` ("shrink"); answered by Status (or Failed), during a
    job too: the new leaves join it."""
    kind: str
    count: int
    host: str | None = None


# messages: server -> script --------------------------------------------------------
class Welcome(NamedTuple):
    """The tree is this script's now (``info``: what ``tree.json`` says, and more)."""
    info: dict


class Queued(NamedTuple):
    """Another script holds the tree; Welcome follows when it is done."""
    holder_pid: int
    position: int


class Results(NamedTuple):
    """``{task id: result bytes}`` that came since the last Results."""
    results: dict


class Stats(NamedTuple):
    """The job's per-process statistics (root first)."""
    records: list


class Failed(NamedTuple):
    """What the scheduler raised (a ``TaskError``, a ``LostProcessError``, ...) or the
    reason the server cannot go on; the script raises it."""
    error: BaseException


class Status(NamedTuple):
    """The server's state for ``dac status``."""
    info: dict
