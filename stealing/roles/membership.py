"""A node's children come and go while the tree runs: lost, replaced, added, let go.

Under Open MPI's ULFM a child's death reaches its parent as a failed link (the mailbox's
``LOST``): the parent drops the link, gives every task the child held to the others
(``StealPolicy.lose_child``), counts the loss against the task that was running, and
spawns a process in its place. ``grow`` adds leaves to a running tree and ``shrink``
lets leaves go (with either MPI). This is a mix-in of ``stealing.roles.node.Node``, whose
links, policy and messages it uses; the statistics of the processes that went are
kept here until the job's are asked for.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from stealing.exceptions import LostProcessError
from stealing.host.losses import describe_loss, read_lost_records
from stealing.observe.stats import new_record
from stealing.transport import protocol as P
from stealing.transport.protocol import RunSettings
from stealing.tree.tasks import Task, TaskId
from stealing.tree.topology import is_this_machine

if TYPE_CHECKING:
    from mpi4py.MPI import Intercomm

    from stealing.observe.stats import Meter
    from stealing.transport.mailbox import Mailbox
    from stealing.tree.plan import StealParams
    from stealing.tree.policy import Action, StealPolicy


class Child:
    """A node's link to one child; its accounting is ``policy.children[index]``."""

    __slots__ = ("comm", "rank", "role", "index", "pids", "spec", "seq", "stats_due",
                 "host", "leaving", "wide")

    def __init__(self, comm: Intercomm | None, rank: int, role: str, index: int,
                 spec: dict[str, Any] | None = None) -> None:
        # its link (None: a spawn-per-batch slot with no leaf now, or a child gone)
        self.comm: Intercomm | None = comm
        self.rank, self.role = rank, role
        self.index = index      # its number in the policy (actions name it)
        # its node of the plan (host, cluster, slowdown, ...)
        self.spec: dict[str, Any] = spec or {}
        self.pids: list[int] = []       # processes of its subtree (for cleanup)
        self.seq = 0            # number of its latest request (answers carry it)
        self.stats_due = False  # it owes this job's STATS
        self.host: str | None = None    # its host, once it said READY
        self.leaving = False    # told to stop by shrink: only its BYE is read
        self.wide = False       # its link crosses clusters (it is in another one)


class Membership:
    """Lost, replaced, added and departing children of a ``Node``."""

    # what this mix-in uses of ``Node``: set and defined there
    mailbox: Mailbox
    meter: Meter
    init: P.Init
    params: StealParams
    policy: StealPolicy
    children: list[Child]
    comms: list[Intercomm]
    job: P.Job | None
    stats_wait: list[Any] | None
    stopping: int | None

    if TYPE_CHECKING:
        def before_spawn(self) -> None: ...

        def on_stats_done(self) -> None: ...

        def on_error(self, msg: P.Failure) -> None: ...

        def apply(self, actions: list[Action]) -> None: ...

        def send(self, comm: Intercomm | None, rank: int, tag: int, obj: object) -> None: ...

        def _spawn(self, count: int, host: str | None) -> Intercomm: ...

        def new_child(self, comm: Intercomm | None, rank: int, role: str, index: int,
                      kid: dict[str, Any]) -> Child: ...

        def _introduce(self, comm: Intercomm, rank: int, kid: dict[str, Any],
                       spawned_at: float, index: int | None = None,
                       one_shot: bool = False, joined: str = "") -> None: ...

    def init_membership(self, settings: RunSettings) -> None:
        """The mix-in's own state (``Node.__init__`` calls it)."""
        self.fault_tolerant = settings.fault_tolerant
        self.max_attempts = settings.max_attempts
        # task id -> processes lost while it ran there
        self.attempts: dict[TaskId, int] = {}
        # records of children lost (or left) this job
        self.gone: list[dict[str, Any]] = []
        # counters when the job's statistics were asked: (losses, leaves added, gone)
        self._at_stats: tuple[dict[str, int], int, int] | None = None
        self.departed: set[int] = set()     # pids of processes lost or let go

    # a lost child -------------------------------------------------------------
    def lose_child(self, child: Child) -> None:
        """``child``'s process died (its link failed: Open MPI's ULFM). Its link is
        dropped, every task it held goes back to the pool (``policy.lose_child``), a
        task that was running each time its process died ``max_attempts`` times fails
        the run, and a new process takes the child's place on the same host."""
        comm = child.comm
        assert comm is not None             # its link is the one that failed
        self.mailbox.forget(comm)
        if comm in self.comms:
            self.comms.remove(comm)
        try:
            comm.Free()
        except Exception:                                   # noqa: BLE001
            pass
        child.comm = None
        self.departed.update(child.pids)
        record = self.loss_record(child)
        tasks, actions = self.policy.lose_child(child.index)
        self.gone.append(_gone_record(child, record))
        if child.stats_due and self.stats_wait is not None:
            child.stats_due = False
            self.stats_wait[0] -= 1
            if self.stats_wait[0] == 0:
                self.on_stats_done()
        if self.stopping is not None:
            self.stopping -= 1
            return
        if self.count_attempt(child, record, tasks):
            return
        self.apply(actions)
        if child.role != "slot":
            self.replace(child)

    def loss_record(self, child: Child) -> dict[str, Any] | None:
        """What the child's monitor wrote when it died (exit code or signal, the task
        it ran), when the child ran on this host; None if there is none."""
        run_dir = self.init.tree.run_dir
        if not run_dir or not child.pids or not is_this_machine(child.host):
            return None
        deadline = time.monotonic() + 0.5      # the monitor writes it as the child ends
        while True:
            for r in read_lost_records(run_dir):
                if r["pid"] in child.pids:
                    return r
            if time.monotonic() > deadline:
                return None
            time.sleep(0.01)

    def count_attempt(self, child: Child, record: dict[str, Any] | None,
                      tasks: list[Task]) -> bool:
        """Count a lost process against the tasks it was running (the one its monitor
        names, else every task it held); True when one has now lost ``max_attempts``
        processes: the run fails with a ``LostProcessError`` naming it."""
        ids = {t[0]: t for t in tasks}
        tid = record["tid"] if record else -1
        suspects = [tid] if tid in ids else list(ids)
        worst: TaskId | None = None
        for t in suspects:
            self.attempts[t] = self.attempts.get(t, 0) + 1
            if self.attempts[t] >= self.max_attempts and worst is None:
                worst = t
        if worst is None:
            return False
        how = describe_loss(record) if record else "lost (its link failed)"
        code = record["code"] if record else None
        err = LostProcessError(
            child.role if child.role != "slot" else "leaf",
            record["pid"] if record else (child.pids[0] if child.pids else 0),
            record["host"] if record else (child.host or "?"),
            f"{how}; the task lost its process {self.attempts[worst]} times "
            f"(max_attempts={self.max_attempts})",
            exit_code=code if code is not None and code >= 0 else None,
            signal=-code if code is not None and code < 0 else None)
        self.fail(P.Failure(err, ids[worst][1]))
        return True

    def fail(self, failure: P.Failure) -> None:
        """The run cannot go on: report ``failure`` as a task's error."""
        self.on_error(failure)

    def replace(self, old: Child) -> None:
        """Spawn a new process in a lost child's place (a new child number: results
        still on their way to the old one's address are dropped); if its host cannot
        take one any more, the others share the work."""
        try:
            self.join(dict(old.spec, joined="replace"))
        except Exception as exc:                            # noqa: BLE001
            print(f"dac: no new {old.role} on {old.spec.get('host') or 'this machine'} "
                  f"in place of a lost one ({exc}); the others take its work",
                  file=sys.stderr)

    def join(self, kid: dict[str, Any]) -> Child:
        """Spawn a process for plan node ``kid`` while the tree runs: it gets INIT,
        the job's functions, and its share of the work at once (or a split of a busy
        child's, when the pool is empty)."""
        self.before_spawn()
        began = time.time()
        comm = self._spawn(1, kid.get("host"))
        self.meter.record["spawns"] += 1
        self.comms.append(comm)
        index = self.policy.join_child(kid["role"], kid["procs"], kid["tasks"])
        child = self.new_child(comm, 0, kid["role"], index, kid)
        self.mailbox.name_link(comm, index)
        self._introduce(comm, 0, kid, spawned_at=began, index=index,
                        joined=kid.get("joined", ""))
        if self.job is not None:
            self.send(comm, 0, P.JOB, self.job)
        self.apply(self.policy.distribute())
        return child

    def grow(self, count: int, host: str | None = None,
             cluster: str = "local") -> list[Child]:
        """Add ``count`` leaves under this node while the tree runs (``Runtime.grow``):
        each is spawned on ``host`` (None: this machine) with a link of its own."""
        added = []
        for _ in range(count):
            kid = {"role": "leaf", "procs": 1, "tasks": self.params.tasks_per_leaf,
                   "host": host, "cluster": cluster, "joined": "grow"}
            added.append(self.join(kid))
            self.meter.record["leaves_added"] = \
                self.meter.record.get("leaves_added", 0) + 1
        return added

    def shrinkable(self) -> list[Child]:
        """The leaves ``shrink`` may let go, newest first: those with a link of their
        own (added by ``grow``, or any leaf under fault tolerance), not leaving."""
        return [child for child in reversed(self.children)
                if child.role == "leaf" and child.comm is not None and not child.leaving
                and sum(c.comm is child.comm for c in self.children) == 1]

    def shrink(self, count: int) -> list[Child]:
        """Let ``count`` leaves go (``Runtime.shrink``), the newest first, among
        ``shrinkable``: each is told to stop, and every task it held is given to the
        others at once (a task it was running starts again elsewhere)."""
        going = self.shrinkable()[:count]
        for child in going:
            _tasks, actions = self.policy.lose_child(child.index, left=True)
            child.leaving = True
            self.departed.update(child.pids)
            self.gone.append(_gone_record(child, None, left=True))
            self.send(child.comm, 0, P.STOP, None)
            self.apply(actions)
        return going

    def _part(self, child: Child) -> None:
        """A leaf that was let go said BYE: its link is closed (it has one of its own)."""
        comm, child.comm = child.comm, None
        assert comm is not None             # its BYE came on it
        self.mailbox.flush(timeout=10)
        self.mailbox.forget(comm)
        self.comms.remove(comm)
        comm.Disconnect()

    def _new_job_counters(self) -> None:
        """Counters restart for a new job; leaves lost, added or let go since the
        last job's statistics count in this one."""
        losses, added, gone = self._at_stats or ({}, 0, len(self.gone))
        since = {k: v - losses.get(k, 0) for k, v in self.policy.losses.items()}
        since_added = self.meter.record.get("leaves_added", 0) - added
        self.meter.reset()
        self.policy.reset_counters()
        self.policy.losses.update(since)
        if since_added:
            self.meter.record["leaves_added"] = since_added
        self.gone = self.gone[gone:]
        self._at_stats = None

    def _part_at_stop(self, child: Child) -> None:
        """A leaf let go whose BYE has not come yet: wait for it (it answers STOP
        between two of its tasks), so its link closes before the tree's."""
        end = time.monotonic() + 10
        while child.comm is not None and time.monotonic() < end:
            got = self.mailbox.wait([child.comm], timeout=0.2)
            if got is not None and got[2] in (P.BYE, P.LOST):
                if got[2] == P.BYE:
                    self._part(child)
                else:
                    self.mailbox.forget(child.comm)
                    self.comms.remove(child.comm)
                    child.comm = None



def _gone_record(child: Child, record: dict[str, Any] | None,
                 left: bool = False) -> dict[str, Any]:
    """The statistics record of a lost child (or one that ``left``): what is known
    of it."""
    rec = new_record(child.role if child.role != "slot" else "leaf",
                     child.spec.get("cluster", "local"))
    rec.update(pid=record["pid"] if record else (child.pids[0] if child.pids else 0),
               host=record["host"] if record else (child.host or "?"),
               ended_at=round(record["time"] if record else time.time(), 3))
    rec["left" if left else "lost"] = True
    if child.spec.get("joined"):
        rec["joined"] = child.spec["joined"]
    if record:
        rec["exit"] = record["code"]
    return rec
