"""The messages between a warm tree's server and the scripts that attach to it, and
their framing on the tree socket: every message is a length-prefixed pickle of one of
the types below. Only the tree's owner may speak on the socket (``peer_uid``): what
comes through it is unpickled.
"""

from __future__ import annotations

import pickle
import socket
import struct
from typing import Any, NamedTuple

from stealing.transport.frames import dumps_parts
from stealing.tree.tasks import Blob, Task, TaskId

_LENGTH = struct.Struct("<Q")


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (Linux)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def call(path: str, msg: object, timeout: float | None) -> tuple[socket.socket, Any]:
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
def send_msg(sock: socket.socket, msg: object) -> None:
    """Send ``msg`` (one of the types below, or an ``Output``), pickled and framed
    (the buffers of results that came from leaves in the stream)."""
    data = dumps_parts(msg)
    sock.sendall(_LENGTH.pack(len(data)) + data)


def recv_msg(sock: socket.socket) -> Any:
    """The next message (whatever the peer pickled); ``EOFError`` when the peer closed
    the socket."""
    (n,) = _LENGTH.unpack(_recv_exactly(sock, _LENGTH.size))
    return pickle.loads(_recv_exactly(sock, n))


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from ``sock`` (as many reads as it takes)."""
    parts: list[bytes] = []
    left = n
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
    argv: list[str]
    sys_path: list[str]
    cwd: str
    recursion_limit: int


class Begin(NamedTuple):
    """A job starts (``RootScheduler.begin_job``)."""


class OpenStream(NamedTuple):
    """``RootScheduler.open_stream``."""


class Feed(NamedTuple):
    """``RootScheduler.feed``: tasks ``[(tid, payload)]`` and the functions they need."""
    payloads: list[Task]
    table: dict[str, bytes]


class CloseStream(NamedTuple):
    """``RootScheduler.close_stream``."""


class Wait(NamedTuple):
    """``RootScheduler.wait_results(wanted, timeout=timeout)``: answered by Collected."""
    wanted: set[TaskId] | None
    timeout: float | None


class EndJob(NamedTuple):
    """``RootScheduler.end_job``: answered by JobStats."""


class Detach(NamedTuple):
    """The script is done with the tree (it stays up for the next one)."""


class StatusRequest(NamedTuple):
    """``dac status``: answered by TreeStatus (served while a job runs, too)."""


class Down(NamedTuple):
    """``dac down``: stop the tree and the server; answered by TreeStatus, then the
    connection closes when everything is gone."""


class Resize(NamedTuple):
    """``dac grow`` (``kind`` "grow": ``count`` leaves on ``host``, None for this
    machine, under the router of ``cluster``, None for the host's) or ``dac shrink``
    ("shrink"); answered by TreeStatus (or Failed), during a job too: the new leaves
    join it."""
    kind: str
    count: int  # type: ignore[assignment]  # the field hides tuple.count; the wire's name
    host: str | None = None
    cluster: str | None = None


# messages: server -> script --------------------------------------------------------
class Welcome(NamedTuple):
    """The tree is this script's now (``info``: what ``tree.json`` says, and more)."""
    info: dict[str, Any]


class Queued(NamedTuple):
    """Another script holds the tree; Welcome follows when it is done."""
    holder_pid: int
    position: int


class Collected(NamedTuple):
    """``{task id: result bytes}`` that came since the last Results."""
    results: dict[TaskId, Blob]


class JobStats(NamedTuple):
    """The job's per-process statistics (root first)."""
    records: list[dict[str, Any]]


class Failed(NamedTuple):
    """What the scheduler raised (a ``TaskError``, a ``LostProcessError``, ...) or the
    reason the server cannot go on; the script raises it."""
    error: BaseException


class TreeStatus(NamedTuple):
    """The server's state for ``dac status``."""
    info: dict[str, Any]
