"""The parent side of the stealing tree, shared by the root and the routers: the MPI half.

A node keeps a list of children (leaves or routers) and their links. Its steal rules
(Algorithm 5.3.1 of the thesis: pool, shares, local, remote and failed steals) live in
``stealing.tree.policy.StealPolicy``, which holds no link and sends nothing: the node hands it
each event and carries out the actions it returns (TASKS, NOMORE, RESULTS up), spawning
a spawn-per-batch leaf where a task goes to an empty slot. Jobs, statistics and stop
are handled here.

The root is a node without a parent; a router is a node whose parent is another node.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from types import ModuleType
from typing import TYPE_CHECKING, Any, Union

from stealing.exceptions import RemoteError
from stealing.observe.recorder import Recorder
from stealing.observe.stats import Meter
from stealing.roles.membership import Child, Membership
from stealing.transport import protocol as P
from stealing.transport.bell import bell_name
from stealing.transport.deadline import CLOSE_S, Deadline
from stealing.transport.mailbox import Mailbox
from stealing.transport.spawning import spawn
from stealing.transport.world import current as launcher_ranks
from stealing.tree.plan import host_groups
from stealing.tree.policy import (
    AskParent,
    AskSplit,
    Give,
    Refuse,
    Route,
    SendResults,
    StealPolicy,
    Yield,
)
from stealing.tree.tasks import Result, Task, blob_size
from stealing.tree.topology import is_this_machine

if TYPE_CHECKING:
    from mpi4py.MPI import Intercomm

# what ``StealPolicy`` decides: the node carries each out (``Node.apply``)
PolicyAction = Union[Give, Refuse, AskParent, SendResults, AskSplit, Yield, Route]


# the least time between two RETURNs to one child (more results wait and go as one)
RETURN_EVERY_S = 0.005


class Node(Membership):
    """Children, links and messages of one non-leaf process; ``policy`` decides; the
    children it loses, adds and lets go are ``Membership``'s business."""

    def __init__(self, MPI: ModuleType, mailbox: Mailbox, meter: Meter, init: P.Init,
                 parent: Intercomm | None = None) -> None:
        self.MPI = MPI
        self.mailbox = mailbox
        self.meter = meter
        self.init = init                # its own INIT: its children's start from it
        self.params = init.tree.params
        self.parent = parent            # intercomm to the parent, None at the root
        self.children: list[Child] = []
        self.comms: list[Intercomm] = []    # distinct child intercomms, for polling
        self.spawn_cut = False          # a spawn was interrupted: processes it started
        #                                 are unknown to the tree (see Root's stop)
        settings = init.settings
        self.policy = StealPolicy(self.params.steal_factor, has_parent=parent is not None,
                                  remote=settings.remote, batch_s=settings.batch_s)
        self.policy.path = init.path    # this node's address: child indices from the root
        self.job: P.Job | None = None   # every function so far: for late spawns
        # records of finished spawn-per-batch leaves
        self.one_shot_stats: list[dict[str, Any]] = []
        # [children left to answer (int), their records (list of dicts)], or None
        self.stats_wait: list[Any] | None = None
        self.stopping: int | None = None    # children left to say BYE, or None
        self.errors: list[RemoteError] = []
        self.init_membership(settings)
        # a Recorder when the job asked for a timeline
        self.timeline: Recorder | None = None
        # (id(comm), rank) -> [child, results held, when they go]: see hold_return
        self.returns: dict[tuple[int, int], list[Any]] = {}
        self.returned_at: dict[tuple[int, int], float] = {}    # the last RETURN's time
        mailbox.before_sleep = self.flush_returns

    # building the subtree ------------------------------------------------------
    def spawn_children(self, plan: dict[str, Any]) -> None:
        """Spawn this node's children as the plan says (Algorithm 5.3.2), one Spawn call
        per host, each naming its host (none for this machine). In spawn-per-batch
        mode a leaf is a slot, spawned with each batch it is given."""
        kids = plan["children"]
        if self.init.settings.leaf_mode != "persistent":
            for kid in kids:
                if kid["role"] == "leaf":
                    self._add_child(None, 0, "slot", 1, kid)
            kids = [kid for kid in kids if kid["role"] != "leaf"]
        for host, group in host_groups(kids, self.fault_tolerant):
            began = time.time()
            comm = self._spawn(len(group), host)
            self.comms.append(comm)
            self.mailbox.name_link(comm, len(self.children))
            if launcher_ranks() is None:        # (a launcher's ranks are not spawned)
                self.meter.record["spawns"] += len(group)
            # every new process is a child before any is sent INIT: an interrupt
            # between two INITs leaves none unknown (each takes the STOP instead)
            first = len(self.children)
            for i, kid in enumerate(group):
                self._add_child(comm, i, kid["role"], kid["procs"], kid)
            for i, kid in enumerate(group):
                self._introduce(comm, i, kid, spawned_at=began, index=first + i)

    def _spawn(self, count: int, host: str | None) -> Intercomm:
        """Spawn ``count`` dac processes on ``host``; under fault tolerance their link
        returns errors instead of ending the job when they die. Under a launcher
        (``stealing.tree.ranks``) the link to the next group of ranks instead."""
        ranks = launcher_ranks()
        if ranks is not None:       # no spawn: the launcher started them already
            return ranks.open_down(count)
        self.spawn_cut = True       # until the spawn returns (a Ctrl-C may cut it)
        comm = spawn(self.MPI, count, _spawn_host(host), self.init.tree.run_dir,
                     watch_losses=not self.fault_tolerant)
        self.spawn_cut = False
        if self.fault_tolerant:
            comm.Set_errhandler(self.MPI.ERRORS_RETURN)
        return comm

    def _add_child(self, comm: Intercomm | None, rank: int, role: str, procs: int,
                   kid: dict[str, Any]) -> None:
        index = self.policy.add_child(role, procs, kid["tasks"])
        self.new_child(comm, rank, role, index, kid)

    def new_child(self, comm: Intercomm | None, rank: int, role: str, index: int,
                  kid: dict[str, Any]) -> Child:
        child = Child(comm, rank, role, index, kid)
        child.wide = kid.get("cluster", "local") != self.meter.cluster
        self.children.append(child)
        return child

    def count_wide(self, key: str, items: Sequence[Task | Result]) -> None:
        """``items`` (tasks or results) crossed a cluster link: count them and their
        payload bytes (``stealing.observe.stats``)."""
        rec = self.meter.record
        rec[key] += len(items)
        rec["bytes_wide"] += sum(blob_size(x[1]) for x in items if type(x) is tuple)

    def _introduce(self, comm: Intercomm, rank: int, kid: dict[str, Any],
                   spawned_at: float,
                   index: int | None = None, one_shot: bool = False,
                   joined: str = "") -> None:
        """Send a new child its INIT; a link with emulated latency is delayed here too."""
        index = len(self.children) - 1 if index is None else index
        path = self.policy.path + (index,)
        init = replace(self.init, role=kid["role"], cluster=kid.get("cluster", "local"),
                       plan=kid if kid["role"] == "router" else None,
                       slowdown=kid.get("slowdown", 1.0), device=kid.get("device", -1),
                       latency_ms=kid.get("latency_ms", 0.0), path=path,
                       parent_host=socket.gethostname(), spawned_at=spawned_at,
                       one_shot=one_shot, joined=joined,
                       parent_rings=is_this_machine(kid.get("host")))
        if init.parent_rings:       # a child of this host: each rings the other's bell
            self.mailbox.ring_link(comm, rank, bell_name(self.init.tree.root_pid, path))
            self.mailbox.rung_by(comm)
        if kid.get("latency_ms"):
            self.mailbox.set_delay(comm, kid["latency_ms"] / 1000.0)
        self.send(comm, rank, P.INIT, init)

    def before_spawn(self) -> None:
        """Called before each spawn of a run under way (the root looks for a lost
        process first: MPI cannot start processes for a job that lost one)."""

    def _spawn_one_shot(self, child: Child) -> None:
        self.before_spawn()
        began = time.time()
        comm = self._spawn(1, child.spec.get("host"))
        self.meter.record["spawns"] += 1
        child.comm, child.rank = comm, 0
        self.comms.append(comm)
        self.mailbox.name_link(comm, child.index)
        self._introduce(comm, 0, child.spec, one_shot=True, index=child.index,
                        spawned_at=began)
        if self.job is not None:
            self.send(comm, 0, P.JOB, self.job)

    def _retire_one_shot(self, child: Child) -> None:
        """A spawn-per-batch leaf returned its results and exits: disconnect it."""
        comm = child.comm
        assert comm is not None             # it sent its last word on this link
        self.mailbox.flush()
        comm.Disconnect()
        self.comms.remove(comm)
        child.comm = None

    # messages ------------------------------------------------------------------
    def send(self, comm: Intercomm | None, rank: int, tag: int, obj: object) -> None:
        """Send ``obj`` (a ``protocol`` payload, or None) to child ``rank`` of ``comm``
        (after the results held for it: a link keeps its order)."""
        assert comm is not None             # a child without a link gets nothing
        if self.returns:
            held = self.returns.pop((id(comm), rank), None)
            if held is not None:
                self._send_return(held[0], held[1])
        self.mailbox.send(comm, obj, rank, tag)

    def hold_return(self, child: Child, results: list[Result],
                    at_once: bool = False) -> None:
        """Results of spawns ``child``'s subtree split off, to go down to it: at once
        when ``at_once`` (it waits with nothing to run: ``StealPolicy.waiting``) or
        no RETURN went to it in the last ``RETURN_EVERY_S``; else they wait for
        that much to pass and go as one (``flush_returns``), or until the child
        says it waits (``release_returns``).

        One RETURN per result outran what their owner could read: a leaf running the
        top call that spawned 1360 naps (20 leaves) read 16 messages between two of
        its naps (what MPI keeps in flight on a link) while the root sent about 20,
        and a SPLIT behind that backlog waited 0.1-0.5 s."""
        key = (id(child.comm), child.rank)
        held = self.returns.get(key)
        if held is not None:
            held[1].extend(results)
            if at_once:
                del self.returns[key]
                self._send_return(child, held[1])
            return
        now = time.monotonic()
        last = self.returned_at.get(key)
        if at_once or last is None or now - last >= RETURN_EVERY_S:
            self._send_return(child, results)
        else:
            self.returns[key] = [child, list(results), last + RETURN_EVERY_S]

    def release_returns(self, child: Child) -> None:
        """``child`` says it has nothing left to run: results held for it go now
        (its sync may wait for them). Held until their time instead, fib 32's last
        results on 2 leaves waited up to 5 ms at each of the last steals' owners."""
        held = self.returns.pop((id(child.comm), child.rank), None)
        if held is not None:
            self.policy.results_went(child.index)
            self._send_return(child, held[1])

    def flush_returns(self) -> float | None:
        """Send the held RETURNs that are due; seconds until the next is (None:
        nothing held). Called when the node finds no message waiting."""
        if not self.returns:
            return None
        now = time.monotonic()
        nearest = None
        for key, (child, results, due) in list(self.returns.items()):
            if due <= now or child.comm is None:
                del self.returns[key]
                self._send_return(child, results)
            elif nearest is None or due - now < nearest:
                nearest = due - now
        return nearest

    def _send_return(self, child: Child, results: list[Result]) -> None:
        if child.comm is None:              # lost meanwhile: its results are void
            return
        if child.wide:
            self.count_wide("results_wide", results)
        self.returned_at[(id(child.comm), child.rank)] = time.monotonic()
        self.mailbox.send(child.comm, P.Returned(results), child.rank, P.RETURN)

    def send_up(self, tag: int, obj: object) -> None:
        """Send ``obj`` to the parent (a router's: the root has none)."""
        assert self.parent is not None      # only a router sends up
        self.mailbox.send(self.parent, obj, 0, tag)

    def child_of(self, comm: Intercomm, rank: int) -> Child:
        for c in self.children:
            if c.comm is comm and c.rank == rank:
                return c
        raise RuntimeError(f"message from an unknown child (rank {rank})")

    def handle_child(self, comm: Intercomm, rank: int, tag: int, msg: Any) -> None:
        """React to one message from a child (``msg``: the payload ``tag`` carries,
        ``protocol.PAYLOADS``; for ``LOST``, the MPI error)."""
        child = self.child_of(comm, rank)
        if tag == P.LOST:
            self.lose_child(child)
            return
        if tag == P.OUTPUT:
            self.on_output(msg)
            return
        if child.leaving:                   # its work was given to the others
            if tag == P.BYE:
                self._part(child)
            return
        if child.wide and tag == P.RESULTS:
            self.count_wide("results_wide", msg.results)
            self.meter.record["steals_wide"] += bool(msg.want)
        elif child.wide and tag == P.STOLEN:
            self.count_wide("tasks_wide", msg.tasks)
        if tag == P.RESULTS:
            self._child_results(child, msg)
        elif tag == P.STOLEN:
            self.apply(self.policy.on_split_answer(child.index, msg.tasks))
        elif tag == P.READY:
            child.pids.extend(p.pid for p in msg.processes)
            if child.host is None and msg.processes:
                child.host = msg.processes[-1].host     # (a router's own comes last)
            self.on_ready(msg)
        elif tag == P.ERROR:
            self.on_error(msg)
        elif tag == P.STATS:
            self._child_stats(child, msg)
        elif tag == P.BYE:
            assert self.stopping is not None    # BYE answers STOP
            self.stopping -= 1
            if child.role == "slot":            # a spawn-per-batch leaf stopped early
                self._retire_one_shot(child)
        else:
            raise RuntimeError(f"unexpected {P.name(tag)} from a child")

    def _child_results(self, child: Child, msg: P.Results) -> None:
        """RESULTS: the policy keeps or routes them, then serves the request they
        carry; a spawn-per-batch leaf's last message retires it."""
        if msg.want:
            child.seq = msg.seq
        mine, routes = self.policy.results_from(child.index, msg.results)
        self.take_results(mine)
        self.apply(routes)
        if msg.leaf_stats is not None:      # a spawn-per-batch leaf's last word
            self.one_shot_stats.append(msg.leaf_stats)
            child.pids = []
            self._retire_one_shot(child)
            if self.stopping is not None:   # it ended before reading STOP
                self.stopping -= 1
                return
        self.policy.note_rate(child.index, msg.rate)
        self.apply(self.policy.child_wants(child.index, msg.want, msg.idle))
        if self.returns and self.policy.waiting(child.index):
            self.release_returns(child)

    def _child_stats(self, child: Child, msg: P.Stats) -> None:
        """STATS: one more child answered the statistics request; the last one
        completes it (``on_stats_done``)."""
        assert self.stats_wait is not None  # STATS answers this node's STATS_REQ
        child.stats_due = False
        self.stats_wait[0] -= 1
        self.stats_wait[1].extend(msg.records)
        if self.stats_wait[0] == 0:
            self.on_stats_done()

    # hooks the root and the router fill in
    def take_results(self, results: list[Result]) -> None:
        """Results this node keeps (a router: they go up with its next request)."""
        self.policy.keep_results(results)

    def on_ready(self, msg: P.Ready) -> None:
        """Processes of the subtree are ready: up to the root."""
        self.send_up(P.READY, msg)

    def on_error(self, msg: P.Failure) -> None:
        """A task or a process failed: up to the root, which raises it."""
        self.send_up(P.ERROR, msg)

    def on_output(self, msg: P.Output) -> None:
        """Lines a leaf printed (``stealing.observe.output``): up to the root."""
        self.send_up(P.OUTPUT, msg)

    def on_stats_done(self) -> None:
        """Every child answered STATS_REQ (the root and the router differ)."""
        raise NotImplementedError

    # the policy's events and decisions -----------------------------------------
    def add_tasks(self, tasks: list[Task]) -> None:
        """Tasks from the parent (or the root's expansion)."""
        self.apply(self.policy.on_tasks(tasks))

    def on_nomore(self) -> None:
        """The parent has no more tasks for now (a failed remote steal)."""
        self.apply(self.policy.on_nomore())

    def on_split_request(self, msg: P.Split) -> None:
        """The parent asks this node for some of its subtree's work."""
        self.apply(self.policy.on_split_request(msg.want))

    def on_returned(self, msg: P.Returned) -> None:
        """Results of split work on their way down to their owner."""
        _mine, routes = self.policy.route(msg.results)
        self.apply(routes)
        self.apply(self.policy.distribute())    # a woken child may be split now

    def retry_if_due(self) -> None:
        """Parked idle requests try a split again once a child that had nothing to
        give has waited ``DRY_S`` (the node's wait times out for it:
        ``policy.retry_in``)."""
        if self.policy.retry_in() == 0.0:
            self.apply(self.policy.retry())

    def apply(self, actions: Iterable[PolicyAction]) -> None:
        """Carry out the policy's decisions, in order."""
        for action in actions:
            if isinstance(action, Give):
                self.give(self.children[action.child], action.tasks)
            elif isinstance(action, Refuse):
                child = self.children[action.child]
                if child.comm is not None:
                    self.send(child.comm, child.rank, P.NOMORE, P.NoMore(child.seq))
            elif isinstance(action, AskParent):
                if self.timeline is not None:
                    self.timeline.ask()
                self.send_up(P.RESULTS, P.Results(action.results, action.amount,
                                                  idle=action.idle,
                                                  rate=self.policy.subtree_rate()))
            elif isinstance(action, SendResults):
                self.send_up(P.RESULTS, P.Results(action.results, 0,
                                                  rate=self.policy.subtree_rate()))
            elif isinstance(action, Route):
                child = self.children[action.child]
                if child.comm is not None:
                    self.hold_return(child, action.results, action.at_once)
            elif isinstance(action, AskSplit):
                child = self.children[action.child]
                self.meter.record["steals_wide"] += child.wide
                self.send(child.comm, child.rank, P.SPLIT, P.Split(action.amount))
            elif isinstance(action, Yield):
                self.send_up(P.STOLEN, P.Tasks(action.tasks))
            else:
                raise TypeError(f"unknown policy action {action!r}")

    def give(self, c: Child, tasks: list) -> None:
        """Send a child its tasks; an empty spawn-per-batch slot gets a new leaf first."""
        if c.role == "slot" and c.comm is None:
            self._spawn_one_shot(c)
        if c.wide:
            self.count_wide("tasks_wide", tasks)
        self.send(c.comm, c.rank, P.TASKS, P.Tasks(tasks, c.seq))

    def busy(self) -> bool:
        """Work is under way below this node (so poll eagerly)."""
        return self.policy.busy()

    # jobs, statistics, stop ----------------------------------------------------
    def start_job(self, job: P.Job) -> None:
        """Forward the job's functions; counters restart, except on the first job, which
        also pays for building the tree (its spawns and CPU count there)."""
        if self.job is None or self.job.job_id != job.job_id:
            self.timeline = Recorder() if job.timeline else None
        if self.job is not None and self.job.job_id != job.job_id:
            self._new_job_counters()
        table = dict(self.job.functions) if self.job is not None else {}
        table.update(job.functions)   # a job message carries only the functions not
        self.job = P.Job(job.job_id, table, job.env,   # sent before; a new process needs all
                         job.timeline)
        self.one_shot_stats = []
        for c in self.children:
            if c.comm is not None:
                self.send(c.comm, c.rank, P.JOB, job)

    def request_stats(self) -> None:
        """The job ended: ask every live child for its statistics (``collected_stats``
        once all answered)."""
        self._at_stats = (dict(self.policy.losses),
                          self.meter.record.get("leaves_added", 0), len(self.gone))
        self.apply(self.policy.end_job())
        live = [c for c in self.children if c.comm is not None and not c.leaving]
        self.stats_wait = [len(live), []]
        for c in live:
            c.stats_due = True
            self.send(c.comm, c.rank, P.STATS_REQ, None)
        if not live:
            self.on_stats_done()

    def collected_stats(self) -> list[dict[str, Any]]:
        """Own record, the children's records and the finished one-shot leaves'."""
        own = self.meter.snapshot()
        own.update(self.policy.counters)
        own.update(self.policy.losses)
        if self.timeline is not None:
            own["timeline"] = self.timeline.export()
        assert self.stats_wait is not None  # asked for by request_stats
        records = [own] + self.stats_wait[1] + self.gone
        if self.one_shot_stats:
            records.append(_merge_one_shot(self.one_shot_stats))
        return records

    def begin_stop(self) -> None:
        """Tell every child to stop (a leaf let go is waited for first); each
        answers BYE."""
        for c in self.children:
            if c.leaving and c.comm is not None:
                self._part_at_stop(c)
        live = [c for c in self.children if c.comm is not None]
        self.policy.stop()
        self.stopping = len(live)
        for c in live:
            self.send(c.comm, c.rank, P.STOP, None)

    def finish_stop(self) -> None:
        """Every child said BYE: complete the sends and close the links."""
        self.mailbox.flush(timeout=10)
        with Deadline(CLOSE_S, f"closing the links to {len(self.comms)} group(s) of "
                      f"children after their BYE did not finish within {CLOSE_S:.0f} s",
                      doing=f"closing the links to {len(self.comms)} group(s) of children"):
            for comm in self.comms:
                comm.Disconnect()
        self.comms = []

    def subtree_pids(self) -> list[int]:
        """This process and those below it (for the root's clean-up)."""
        return [os.getpid()] + [p for c in self.children for p in c.pids]


def _merge_one_shot(records: list[dict[str, Any]]) -> dict[str, Any]:
    """All spawn-per-batch leaves of a node as one record (they are one slot each)."""
    merged = dict(records[0])
    for key in ("cpu_s", "tasks", "busy_s", "idle_s", "batches"):
        merged[key] = sum(r[key] for r in records)
    merged["pid"] = 0
    merged["processes"] = len(records)
    return merged


def _spawn_host(host: str | None) -> str | None:
    """The ``host`` info value for a spawn: None for this machine."""
    return None if is_this_machine(host) else host
