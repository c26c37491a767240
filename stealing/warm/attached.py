"""A script's side of a warm tree: the ``RootScheduler`` calls, made over its socket.

``AttachedScheduler`` has the methods of ``stealing.roles.root.RootScheduler`` that a run
uses (``begin_job``, ``open_stream``, ``feed``, ``wait_results``, ``close_stream``,
``end_job``, ``stop``), so the driver of a run cannot tell a warm tree from its own.
Calls that answer nothing (``feed`` and the like) cost one write on the socket; what
they raise on the server comes back with the next answer. ``stop`` only lets go of
the tree: the tree stays up for the next script.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, TypeVar

from stealing.exceptions import DacError
from stealing.observe.output import Printer, prefix_default
from stealing.transport.protocol import Output, ScriptEnv
from stealing.tree.tasks import Blob, Task, TaskId
from stealing.warm import wire
from stealing.warm.folder import TreeGone

ANSWER_S = 5.0      # a server that accepted the connection answers Hello within this

_Answer = TypeVar("_Answer")


def attach(info: dict[str, Any], hello: wire.Hello,
           on_queued: Callable[[wire.Queued], object] | None = None) -> AttachedScheduler:
    """Connect to the tree ``info`` (a tree file's contents) and wait for it: if
    another script holds it, ``on_queued(Queued)`` is called and the wait goes on
    until that script is done. Raises ``TreeGone`` if nobody answers."""
    try:
        sock, reply = wire.call(info["socket"], hello, ANSWER_S)
    except (OSError, EOFError) as exc:
        raise TreeGone(f"does not answer ({type(exc).__name__}: {exc})") from None
    try:
        if isinstance(reply, wire.Queued):
            if on_queued is not None:
                on_queued(reply)
            sock.settimeout(None)
            reply = wire.recv_msg(sock)
    except (OSError, EOFError) as exc:
        sock.close()
        raise TreeGone(f"does not answer ({type(exc).__name__}: {exc})") from None
    except BaseException:
        sock.close()
        raise
    if not isinstance(reply, wire.Welcome):
        sock.close()
        if isinstance(reply, wire.Failed):
            raise TreeGone(str(reply.error))
        raise TreeGone(f"answered {type(reply).__name__}")
    sock.settimeout(None)
    return AttachedScheduler(sock, reply.info)


class AttachedScheduler:
    """The warm tree's scheduler, seen from a script."""

    attached = True
    startup_s: float | None = None      # the tree started long ago
    lost: dict | None = None            # (the server watches the tree)
    job_timeline = False    # (the tree's processes record no timeline for a script)
    job_env: ScriptEnv | None = None
    view: tuple | None = None

    def __init__(self, sock: socket.socket, info: dict[str, Any]) -> None:
        self.sock: socket.socket | None = sock     # None once it let go of the tree
        self.info = info
        self.job_id = 0
        self.sent_keys: set[str] = set()    # functions the leaves have from this script
        # what the script's tasks print comes with the server's answers
        self.printer = Printer(prefix_default(), socket.gethostname())

    def start(self) -> None:
        """Already attached."""

    def begin_job(self) -> None:
        """A job begins (its output too)."""
        self.job_id += 1
        self.printer.new_run()
        self._send(wire.Begin())

    def open_stream(self) -> None:
        """Tasks come in several ``feed`` calls."""
        self._send(wire.OpenStream())

    def feed(self, payloads: list[Task], table: dict[str, bytes]) -> None:
        """Tasks for the tree, and the functions they need that were not sent."""
        self._send(wire.Feed(payloads, table))
        self.sent_keys.update(table)

    def close_stream(self) -> None:
        """No more tasks for now."""
        self._send(wire.CloseStream())

    def wait_results(self, wanted: Iterable[TaskId] | None = None,
                     local_table: dict | None = None,
                     timeout: float | None = None) -> dict[TaskId, Blob]:
        """As ``RootScheduler.wait_results``; the root never helps here (the leaves
        are ready), so ``local_table`` is ignored."""
        wanted_set = None if wanted is None else set(wanted)
        return self._ask(wire.Wait(wanted_set, timeout), wire.Collected).results

    def end_job(self) -> list[dict[str, Any]]:
        """The job's statistics, one record per process, root first."""
        return self._ask(wire.EndJob(), wire.JobStats).records

    def check_lost(self) -> None:
        """The server watches the tree."""

    def grow(self, count: int, host: str | None = None, wait_s: float = 0.0,
             cluster: str | None = None) -> NoReturn:
        raise DacError("grow: a warm tree grows with `dac grow`")

    def shrink(self, count: int) -> NoReturn:
        raise DacError("shrink: a warm tree shrinks with `dac shrink`")

    check_shrink = shrink

    def ask_change(self, kind: str, count: int, host: str | None = None,
                   cluster: str | None = None) -> NoReturn:
        raise DacError(f"{kind}: a warm tree changes with `dac {kind}`")

    def stop(self, *args: object, **kwargs: object) -> None:
        """Let go of the tree (it stays up for the next script)."""
        sock, self.sock = self.sock, None
        if sock is None:
            return
        try:
            wire.send_msg(sock, wire.Detach())
        except OSError:
            pass
        sock.close()

    # the socket -------------------------------------------------------------------
    def _send(self, msg: object) -> None:
        """Send a request; a closed connection is ``TreeGone``."""
        if self.sock is None:
            raise TreeGone("the connection to the warm tree is closed")
        try:
            wire.send_msg(self.sock, msg)
        except OSError as exc:
            raise TreeGone(f"the warm tree (pid {self.info.get('pid')}) closed the "
                           f"connection ({exc}); see its log {self.info.get('log')}") \
                from None

    def _ask(self, msg: object, answer_type: type[_Answer]) -> _Answer:
        """Send a request and read its answer, of ``answer_type`` (what the tasks
        printed comes first; a ``Failed`` is raised)."""
        self._send(msg)
        assert self.sock is not None        # _send raised otherwise
        try:
            reply = wire.recv_msg(self.sock)
            while isinstance(reply, Output):    # lines the tasks printed, first
                self.printer.write(reply)
                reply = wire.recv_msg(self.sock)
        except (OSError, EOFError):
            raise TreeGone(f"the warm tree (pid {self.info.get('pid')}) ended during "
                           f"the run; see its log {self.info.get('log')}") from None
        if isinstance(reply, wire.Failed):
            raise reply.error
        if not isinstance(reply, answer_type):
            raise TreeGone(f"the warm tree answered {type(reply).__name__} to "
                           f"{type(msg).__name__}")
        return reply

