"""The root of a warm tree: it keeps the process tree and lends it to scripts.

``dac up`` starts this server in the background. It spawns the tree as any root does,
waits until every leaf is ready, writes the tree file and listens on the tree socket
(``stealing.warm.folder``). A script that attaches speaks the ``RootScheduler`` calls over
the socket (``stealing.warm.attached``) and the server makes them on its own scheduler, so
the script's tasks run on leaves that started long ago.

One script holds the tree at a time; others wait in line (``Queued``) and get it in
turn, so tasks and results of two scripts never mix. ``dac status`` and ``dac down``
are answered at any time, during a job too. A script that dies holding the tree
(its socket closes) costs only its own job: the results still coming are read and
dropped, and the tree serves the next script; if they do not all come within
``DRAIN_S``, or a task failed (its leaf waits to be stopped), the tree is stopped and
spawned afresh. A lost process ends the server: MPI cannot go on after one. The server
never spins: between jobs it sleeps in ``select``.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import socket
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from stealing.exceptions import LostProcessError
from stealing.transport.deadline import end_run_on
from stealing.transport.protocol import Output, ScriptEnv
from stealing.tree.tasks import Blob, TaskId
from stealing.warm import folder as W
from stealing.warm import wire

if TYPE_CHECKING:
    from stealing.roles.root import RootScheduler

DRAIN_S = 5.0           # how long the results of a dead script's job may take to come
SLICE_S = 0.05          # a waiting job looks at the sockets this often

_T = TypeVar("_T")


class _Client:
    """A connection to the server: a script once it said Hello (its pid and where
    its tasks run), else ``dac status``, ``dac down`` and the like."""

    __slots__ = ("sock", "pid", "hello")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pid: int | None = None
        self.hello: wire.Hello | None = None


class TreeServer:
    """Serves one warm tree; ``make_scheduler()`` builds a ``RootScheduler`` (not
    started) for each tree it spawns."""

    def __init__(self, make_scheduler: Callable[[], RootScheduler], info: dict[str, Any],
                 folder: str) -> None:
        self.make_scheduler = make_scheduler
        self.info = dict(info)
        self.folder = folder
        self.sched: RootScheduler | None = None
        self.listener: socket.socket | None = None
        self.socket_ino = 0                     # the listening socket's file (inode)
        self.active: _Client | None = None      # the script that holds the tree
        self.queue: list[_Client] = []          # scripts waiting for it, in order
        self.others: list[_Client] = []         # connections that said no Hello yet
        # what the scheduler raised (or a bad request), for the next answer
        self.failure: Exception | None = None
        self.restart = False        # the tree must be spawned afresh after this job
        self.in_job = False
        self.fed: set[TaskId] = set()   # task ids of the job not answered yet
        self.runs = self.scripts = self.restarts = 0
        self.down_by: _Client | None = None
        self.started = time.time()
        self.output: list[Output] = []  # OUTPUT messages for the holder, sent with answers

    @property
    def _tree(self) -> RootScheduler:
        """The scheduler of the tree: there is one from ``start`` to ``close``, save
        for the moment ``_respawn`` replaces it."""
        assert self.sched is not None
        return self.sched

    # life cycle ----------------------------------------------------------------
    def start(self) -> None:
        """Spawn the tree, wait for every leaf, then listen and write the tree file.
        SIGTERM (``dac up`` interrupted) ends a start too, taking down what it
        spawned so far (the default action would leave the tree behind), also in
        the middle of a spawn, 2 s on if the spawn has not returned (``end_run_on``:
        MPI holds the server there, and ``dac up`` killed it 10 s later, leaving
        MPI's shared memory)."""
        signal.signal(signal.SIGTERM, _raise_exit)
        end_run_on(_raise_exit)
        self.sched = self._fresh_tree()
        path = os.path.join(self.folder, W.SOCKET_FILE)
        if os.path.lexists(path):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(path)
        finally:
            os.umask(old)
        listener.listen(16)
        self.listener = listener
        self.socket_ino = os.stat(path).st_ino
        self.info.update(pid=os.getpid(), uid=os.getuid(), socket=path, folder=self.folder,
                         started=self.started, host=socket.gethostname(),
                         log=os.path.join(self.folder, W.LOG_FILE),
                         ready_s=round(time.time() - self.started, 3))
        W.write_tree_file(self.folder, self.info)

    def _fresh_tree(self) -> RootScheduler:
        """A new tree, spawned and ready; what its tasks print goes to the holder."""
        sched = self.make_scheduler()
        sched.output = self.output.append       # what tasks print goes to the holder
        try:
            sched.start()
            sched.wait_ready()
        except BaseException:
            sched.stop()
            raise
        return sched

    def close(self) -> None:
        """Stop the tree, remove the tree file and socket, close every connection."""
        W.remove_tree_file(self.folder, os.getpid())
        for c in [self.active, *self.queue, *self.others]:
            if c is not None:
                c.sock.close()
        if self.listener is not None:
            self.listener.close()
        if self.sched is not None:
            sched, self.sched = self.sched, None
            sched.stop()

    def serve(self) -> None:
        """Answer scripts until ``dac down``, SIGTERM or a lost process."""
        signal.signal(signal.SIGTERM, _raise_exit)
        try:
            while self.down_by is None:
                self._look(timeout=None if self.active is None else 1.0)
                self._check_lost()
                self._check_findable()
        finally:
            self.close()
            if self.down_by is not None:
                try:
                    wire.send_msg(self.down_by.sock, wire.TreeStatus(self.status()))
                except OSError:
                    pass
                self.down_by.sock.close()

    # the sockets -------------------------------------------------------------------
    def _look(self, timeout: float | None, holder: bool = True) -> None:
        """Read what the sockets have (waiting at most ``timeout``; None: until one
        speaks, or a second passes when idle, to look for lost processes);
        ``holder=False``: leave the holder's socket alone (it is waiting for an
        answer, see ``_wait``)."""
        listener = self.listener
        assert listener is not None             # it listens from ``start`` on
        clients = self._clients() if holder else self.queue + self.others
        socks = [listener] + [c.sock for c in clients]
        ready, _, _ = select.select(socks, [], [], 1.0 if timeout is None else timeout)
        for s in ready:
            if s is listener:
                conn, _ = listener.accept()
                if wire.peer_uid(conn) != os.getuid():
                    conn.close()                # another user: not a word
                    continue
                self.others.append(_Client(conn))
                continue
            client = self._client_of(s)
            if client is None:
                continue
            try:
                msg = wire.recv_msg(s)
            except (EOFError, OSError):
                self._gone(client)
                continue
            self._handle(client, msg)
            if self.down_by is not None:
                return

    def _holder_spoke(self, client: _Client) -> bool:
        """The holder, waiting for results, sent something or closed: it let go
        (``Detach`` after Ctrl-C) or died. The main loop reads what it was."""
        ready, _, _ = select.select([client.sock], [], [], 0.0)
        return bool(ready)

    def _clients(self) -> list[_Client]:
        """Every connection: the holder's first, then the line, then the others."""
        return ([self.active] if self.active else []) + self.queue + self.others

    def _client_of(self, sock: socket.socket) -> _Client | None:
        """The connection of ``sock`` (None: it was dropped meanwhile)."""
        for c in self._clients():
            if c.sock is sock:
                return c
        return None

    def _gone(self, client: _Client) -> None:
        """A connection closed: a waiting script left the line; the holder died (or
        closed without Detach): its job is dropped and the next script gets the tree."""
        client.sock.close()
        if client in self.queue:
            self.queue.remove(client)
        elif client in self.others:
            self.others.remove(client)
        elif client is self.active:
            self._drop_job()
            self._next_script()

    def _reply(self, client: _Client, msg: object) -> None:
        """Answer ``client`` (the holder gets what its tasks printed first); a
        connection that fails is gone."""
        try:
            if client is self.active:
                self._send_output(client)
            wire.send_msg(client.sock, msg)
        except OSError:
            self._gone(client)

    def _send_output(self, client: _Client) -> None:
        """What the holder's tasks printed: sent only while it waits for an answer
        (it reads everything before the answer), so neither side blocks the other."""
        while self.output:
            wire.send_msg(client.sock, self.output.pop(0))

    # requests ------------------------------------------------------------------------
    def _handle(self, client: _Client, msg: object) -> None:
        """One request of ``client``: status, resize, down and Hello from anyone, the
        job's calls from the holder alone."""
        if isinstance(msg, wire.StatusRequest):
            self._reply(client, wire.TreeStatus(self.status()))
        elif isinstance(msg, wire.Resize):
            try:
                if msg.kind == "grow":
                    self._tree.grow(msg.count, msg.host, wait_s=60.0,
                                    cluster=msg.cluster)
                else:
                    self._tree.shrink(msg.count)
            except Exception as exc:                        # noqa: BLE001
                self._reply(client, wire.Failed(exc))
                return
            self._reply(client, wire.TreeStatus(self.status()))
        elif isinstance(msg, wire.Down):
            self.down_by = client
            if client in self.others:
                self.others.remove(client)
        elif isinstance(msg, wire.Hello):
            client.pid, client.hello = msg.pid, msg
            if client in self.others:
                self.others.remove(client)
            if self.active is None:
                self._lend(client)
            else:
                self.queue.append(client)
                assert self.active.pid is not None      # it said Hello, too
                self._reply(client, wire.Queued(self.active.pid, len(self.queue)))
        elif client is not self.active:
            self._reply(client, wire.Failed(RuntimeError(
                f"warm tree: {type(msg).__name__} from a script that does not hold "
                f"the tree")))
        else:
            self._job_request(client, msg)

    def _job_request(self, client: _Client, msg: object) -> None:
        """A call of the holder's job, made on the scheduler (see ``_attempt``)."""
        sched = self._tree
        if isinstance(msg, wire.Wait):
            answer = self._wait(client, msg)
            if answer is not None:
                self._reply(client, answer)
            return
        if isinstance(msg, wire.EndJob):
            if self.failure is not None:
                self._reply(client, self._failed())
                return
            stats = self._attempt(lambda: wire.JobStats(sched.end_job()))
            self._reply(client, stats if stats is not None else self._failed())
            self.in_job = False
            self.runs += 1
            return
        if isinstance(msg, wire.Detach):
            self._drop_job()
            self._next_script()
            return
        if self.failure is not None:
            return                          # said with the next answer
        if isinstance(msg, wire.Begin):
            self.fed = set()
            self.in_job = True
            self._attempt(sched.begin_job)
        elif isinstance(msg, wire.OpenStream):
            self._attempt(sched.open_stream)
        elif isinstance(msg, wire.Feed):
            self.fed.update(t[0] for t in msg.payloads)
            self._attempt(lambda: sched.feed(msg.payloads, msg.table))
        elif isinstance(msg, wire.CloseStream):
            self._attempt(sched.close_stream)
        else:
            self.failure = RuntimeError(f"warm tree: unknown request {msg!r}")

    def _attempt(self, call: Callable[[], _T]) -> _T | None:
        """Make a scheduler call; what it raises is kept for the script's next answer
        (a task's failure leaves its leaf waiting to be stopped: the tree is spawned
        afresh once the script lets go of it)."""
        try:
            return call()
        except Exception as exc:                            # noqa: BLE001
            self.failure = exc
            self.restart = True
            return None

    def _failed(self) -> wire.Failed:
        """The answer that says what failed (the failure is said once)."""
        failure, self.failure = self.failure, None
        assert failure is not None          # asked for only once one is kept
        self.in_job = False
        return wire.Failed(failure)

    def _wait(self, client: _Client, msg: wire.Wait) -> wire.Collected | wire.Failed | None:
        """Results for ``Wait``, in slices of ``SLICE_S`` with a look at the sockets
        between them (the holder may die; others ask for the status or queue up)."""
        if self.failure is not None:
            return self._failed()
        wanted = msg.wanted
        end = None if msg.timeout is None else time.monotonic() + msg.timeout
        got: dict[TaskId, Blob] = {}
        while True:
            left = SLICE_S if end is None else min(SLICE_S, end - time.monotonic())
            more = self._attempt(lambda: self._tree.wait_results(
                wanted, None, timeout=max(0.0, left)))
            if self.failure is not None:
                return self._failed()
            assert more is not None             # (else it failed)
            got.update(more)
            self.fed.difference_update(more)
            if self.output:
                try:
                    self._send_output(client)
                except OSError:
                    return None             # it died: the main loop sees it
            if got and (wanted is None or any(t in got for t in wanted)):
                return wire.Collected(got)
            if end is not None and time.monotonic() >= end:
                return wire.Collected(got)
            self._look(timeout=0.0, holder=False)
            if self.down_by is not None:
                return wire.Failed(W.TreeGone("was stopped (`dac down`) during the run"))
            if self._holder_spoke(client):
                return None     # it let go (Detach) or died: nobody reads an answer

    def _drop_job(self) -> None:
        """The holder let go (or died) in the middle of a job: read and drop what is
        still coming, then end the job; spawn the tree afresh if that fails, takes
        longer than ``DRAIN_S``, or a task failed."""
        if self.in_job and not self.restart:
            sched = self._tree
            end = time.monotonic() + DRAIN_S
            try:
                while self.fed and time.monotonic() < end:
                    self.fed.difference_update(sched.wait_results(None, None,
                                                                  timeout=SLICE_S))
                if self.fed:
                    self.restart = True
                else:
                    sched.end_job()
            except Exception:                               # noqa: BLE001
                self.restart = True
        self.in_job, self.fed, self.failure = False, set(), None
        if self.restart:
            self._respawn()

    def _respawn(self) -> None:
        """Stop the tree and spawn it afresh; after a lost process, end the server."""
        self.restart = False
        lost = self._tree.lost is not None
        self._tree.stop()
        self.sched = None
        if lost:
            raise SystemExit(f"warm tree: a process was lost ({LostProcessError.__name__}"
                             f"): MPI cannot go on; start a new tree with `dac up`")
        self.restarts += 1
        self.sched = self._fresh_tree()

    def _next_script(self) -> None:
        """The holder is done: the next script in line gets the tree."""
        if self.active is not None and self.active.sock.fileno() >= 0:
            self.active.sock.close()
        self.active = None
        self.output.clear()             # printed by a script that let go
        while self.queue and self.active is None:
            self._lend(self.queue.pop(0))

    def _lend(self, client: _Client) -> None:
        """``client`` holds the tree now: its leaves will see its import path, argv,
        folder and recursion limit, and its functions are sent again."""
        hello = client.hello
        assert hello is not None            # only a script that said Hello is lent it
        self.active = client
        self.scripts += 1
        self._tree.sent_keys = set()
        self._tree.job_env = ScriptEnv(tuple(hello.sys_path), tuple(hello.argv),
                                       hello.cwd, hello.recursion_limit, self.scripts)
        self._reply(client, wire.Welcome(self.status()))

    def _check_lost(self) -> None:
        """Between jobs, a lost process ends the server (in a job, the scheduler
        itself raises it to the script)."""
        if self.in_job or self.sched is None:
            return
        try:
            self.sched.check_lost()
        except Exception as exc:                            # noqa: BLE001
            raise SystemExit(f"warm tree: {exc}") from exc

    def _check_findable(self) -> None:
        """Between jobs, a tree nobody can find any more ends: its tree file or its
        socket is gone from the folder (the folder removed, say), so no ``dac down``
        could stop it and no script attach to it; it would idle for good."""
        if self.in_job or self.listener is None:
            return
        try:
            found = os.stat(self.info["socket"]).st_ino == self.socket_ino and \
                os.path.exists(os.path.join(self.folder, W.TREE_FILE))
        except OSError:
            found = False
        if not found:
            raise SystemExit(f"warm tree: its files in {self.folder} are gone (the folder "
                             f"was removed?): nobody could find it any more, so it ends")

    # what dac status shows ---------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The tree file's information, and the server's state now."""
        usage = resource.getrusage(resource.RUSAGE_SELF)
        info = dict(self.info)
        info.update(uptime_s=round(time.time() - self.started, 3), runs=self.runs,
                    scripts=self.scripts, restarts=self.restarts,
                    holder=self.active.pid if self.active else None,
                    waiting=[c.pid for c in self.queue],
                    cpu_s=round(usage.ru_utime + usage.ru_stime, 3),
                    processes=self.sched.processes() if self.sched else [])
        if self.sched is not None:      # the shape now: grow and shrink change it
            roles = [p["role"] for p in info["processes"]]
            info.update(leaves=roles.count("leaf"), routers=roles.count("router"))
        return info


def _raise_exit(signum: int, frame: FrameType | None) -> NoReturn:
    """SIGTERM ends the server as ``dac down`` would (``serve`` cleans up). Once:
    a second SIGTERM (``dac up`` and its pipe both ask, see ``dac.warm_tree``) would
    cut that cleanup short and leave leaves behind; SIGKILL still ends it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(f"warm tree: signal {signum}")
