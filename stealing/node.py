"""The parent side of the stealing tree, shared by the root and the routers.

A node keeps a pool of tasks and a list of children (leaves or routers). Its rules are
Algorithm 5.3.1 of the thesis:

* at the start of a round every child wants its initial share (``tasks_per_leaf`` for a
  leaf, ``tasks_per_branch(procs)`` for a router);
* a child's returned results are its steal request; the node serves it from its own pool
  (a *local* steal) and, when the pool is empty, asks its own parent (a *remote* steal,
  one request outstanding at a time) or, when the parent has nothing left either,
  answers "no more" (a *failed* steal);
* results travel up with the node's own steal requests, or in one message when the
  subtree goes idle.

The root is a node without a parent; a router is a node whose parent is another node.
"""

from __future__ import annotations

import os
import socket
import time
from collections import deque

from . import protocol as P
from .spawning import spawn


class Child:
    """What a node knows of one child: its link and how much work it holds."""

    __slots__ = ("comm", "rank", "role", "procs", "quota", "outstanding", "want",
                 "asked", "waited", "pids", "last_want", "spec")

    def __init__(self, comm, rank, role, procs, quota, spec=None):
        self.comm, self.rank, self.role = comm, rank, role
        self.spec = spec or {}  # its node of the plan (host, cluster, slowdown, ...)
        self.procs, self.quota = procs, quota
        self.outstanding = 0    # tasks given and not yet returned
        self.want = 0           # tasks it is waiting for
        self.asked = False      # the want comes from a steal request
        self.waited = False     # that request had to wait for the node's parent
        self.pids = []          # processes of its subtree (for cleanup)
        self.last_want = quota  # size of its latest request


class Node:
    """Pool, children and steal rules of one non-leaf process."""

    def __init__(self, MPI, mailbox, meter, params, config, parent=None):
        self.MPI = MPI
        self.mailbox = mailbox
        self.meter = meter
        self.params = params
        self.config = config            # dict forwarded to children in INIT
        self.parent = parent            # intercomm to the parent, None at the root
        self.children: list[Child] = []
        self.comms: list = []           # distinct child intercomms, for polling
        self.pool: deque = deque()
        self.results: list = []
        self.exhausted = parent is None
        self.requested = False
        self.job = None                 # (job_id, every function so far): late spawns
        self.one_shot_stats: list = []  # records of finished spawn-per-batch leaves
        self.stats_wait = None          # [children left to answer, records]
        self.stopping = None            # children left to say BYE, or None
        self.errors: list = []
        self.feeding = False            # the root is still adding tasks to this round
        self.prefetch_remote = config.get("remote", "prefetch") == "prefetch"
        self.batch_s = float(config.get("batch_s", 0.05))
        self.rtt = 0.0                  # measured round trip of a remote steal (s)
        self.asked_at = None

    # building the subtree ------------------------------------------------------
    def spawn_children(self, plan: dict) -> None:
        """Spawn this node's children as the plan says (Algorithm 5.3.2), one Spawn call
        per host, each naming its host (none for this machine)."""
        kids = plan["children"]
        if not kids:
            return
        role = kids[0]["role"]
        if role == "leaf" and self.config["leaf_mode"] != "persistent":
            for kid in kids:                    # spawn per batch: a slot per processor
                self.children.append(Child(None, 0, "slot", 1, kid["tasks"], kid))
            return
        for host, group in _by_host(kids):
            comm = spawn(self.MPI, len(group), _spawn_host(host),
                         self.config.get("run_dir"))
            self.comms.append(comm)
            self.meter.record["spawns"] += len(group)
            for i, kid in enumerate(group):
                self.children.append(Child(comm, i, role, kid["procs"], kid["tasks"], kid))
                self._introduce(comm, i, kid)

    def _introduce(self, comm, rank: int, kid: dict, **extra) -> None:
        """Send a new child its INIT; a link with emulated latency is delayed here too."""
        init = dict(self.config, role=kid["role"], cluster=kid.get("cluster", "local"),
                    slowdown=kid.get("slowdown", 1.0), device=kid.get("device", -1),
                    latency_ms=kid.get("latency_ms", 0.0), **extra)
        if kid["role"] == "router":
            init["plan"] = kid
        if kid.get("latency_ms"):
            self.mailbox.set_delay(comm, kid["latency_ms"] / 1000.0)
        self.send(comm, rank, P.INIT, init)

    def before_spawn(self) -> None:
        """Called before each spawn of a run under way (the root looks for a lost
        process first: MPI cannot start processes for a job that lost one)."""

    def _spawn_one_shot(self, child: Child) -> None:
        self.before_spawn()
        comm = spawn(self.MPI, 1, _spawn_host(child.spec.get("host")),
                     self.config.get("run_dir"))
        self.meter.record["spawns"] += 1
        child.comm, child.rank = comm, 0
        self.comms.append(comm)
        self._introduce(comm, 0, child.spec, one_shot=True)
        if self.job is not None:
            self.send(comm, 0, P.JOB, self.job)

    def _retire_one_shot(self, child: Child) -> None:
        """A spawn-per-batch leaf returned its results and exits: disconnect it."""
        comm = child.comm
        self.mailbox.flush()
        comm.Disconnect()
        self.comms.remove(comm)
        child.comm = None

    # messages ------------------------------------------------------------------
    def send(self, comm, rank, tag, obj) -> None:
        self.mailbox.send(comm, obj, rank, tag)

    def send_up(self, tag, obj) -> None:
        self.mailbox.send(self.parent, obj, 0, tag)

    def child_of(self, comm, rank) -> Child:
        for c in self.children:
            if c.comm is comm and c.rank == rank:
                return c
        raise RuntimeError(f"message from an unknown child (rank {rank})")

    def handle_child(self, comm, rank, tag, payload) -> None:
        """React to one message from a child."""
        child = self.child_of(comm, rank)
        if tag == P.RESULTS:
            results, want, leaf_stats = payload
            child.outstanding -= len(results)
            self.take_results(results)
            if leaf_stats is not None:          # a spawn-per-batch leaf's last word
                self.one_shot_stats.append(leaf_stats)
                child.pids = []
                self._retire_one_shot(child)
                if self.stopping is not None:   # it ended before reading STOP
                    self.stopping -= 1
                    return
            if want:
                child.want, child.asked, child.waited = want, True, False
                child.last_want = want
            self.distribute()
        elif tag == P.READY:
            child.pids.extend(entry[0] for entry in payload)
            self.on_ready(payload)
        elif tag == P.ERROR:
            self.on_error(payload)
        elif tag == P.STATS:
            self.stats_wait[0] -= 1
            self.stats_wait[1].extend(payload)
            if self.stats_wait[0] == 0:
                self.on_stats_done()
        elif tag == P.BYE:
            self.stopping -= 1
            if child.role == "slot":            # a spawn-per-batch leaf stopped early
                self._retire_one_shot(child)
        else:
            raise RuntimeError(f"unexpected {P.NAMES.get(tag, tag)} from a child")

    # hooks the root and the router fill in
    def take_results(self, results) -> None:
        self.results.extend(results)

    def on_ready(self, payload) -> None:
        self.send_up(P.READY, payload)

    def on_error(self, payload) -> None:
        self.send_up(P.ERROR, payload)

    def on_stats_done(self) -> None:
        raise NotImplementedError

    # the steal rules -----------------------------------------------------------
    def begin_round(self) -> None:
        """Every idle child wants its initial share (Figure 5.3 quotas)."""
        for c in self.children:
            if c.outstanding == 0 and c.want == 0:
                c.want, c.asked, c.waited = c.quota, False, False

    def add_tasks(self, tasks) -> None:
        """Tasks from the parent (or the root's expansion); idle children get a share."""
        self.note_answer()
        self.pool.extend(tasks)
        self.begin_round()
        self.requested = False
        if self.parent is not None:
            self.exhausted = False
        self.distribute()

    def on_nomore(self) -> None:
        self.note_answer()
        self.requested = False
        self.exhausted = True
        self.distribute()

    def distribute(self) -> None:
        """Give waiting children tasks, ask upwards, or say "no more"."""
        if self.stopping is not None:
            return
        wanting = [c for c in self.children if c.want > 0]
        if wanting and self.pool:
            total_want = sum(c.want for c in wanting)
            avail = len(self.pool)
            for c in wanting:
                if not self.pool:
                    break
                n = c.want if avail >= total_want else max(1, avail * c.want // total_want)
                if c.asked:     # near the end, no child takes more than its share
                    n = min(n, max(1, -(-len(self.pool) * c.procs // self.total_procs)))
                self.give(c, min(n, len(self.pool)))
            wanting = [c for c in wanting if c.want > 0]
        if wanting:
            if not self.exhausted:
                for c in wanting:
                    c.waited = c.asked
                self.ask_parent()
            elif not self.feeding:          # more tasks may still come: let them wait
                for c in wanting:
                    self.refuse(c)
        if not self.exhausted and len(self.pool) < self.low_water():
            self.ask_parent()
        self.maybe_go_idle()

    def low_water(self) -> int:
        """Pool size under which a router asks its parent before running dry: what its
        children take during one round of batches and one measured round trip to the
        parent (``remote="prefetch"``, Satin-like, one request outstanding), or 0
        (``remote="blocking"``: ask only when empty, as in the thesis)."""
        if not self.prefetch_remote or self.parent is None:
            return 0
        return int(self._cover())

    def give(self, c: Child, n: int) -> None:
        rec = self.meter.record
        if c.asked and c.role != "router":      # a leaf's steal request is answered
            rec["steals_after_remote" if c.waited else "steals_local"] += 1
        tasks = [self.pool.popleft() for _ in range(n)]
        c.want, c.asked, c.waited = 0, False, False
        c.outstanding += n
        if c.role == "slot" and c.comm is None:
            self._spawn_one_shot(c)
        self.send(c.comm, c.rank, P.TASKS, tasks)

    def refuse(self, c: Child) -> None:
        if c.asked:
            self.meter.record["steals_failed"] += 1
            if c.comm is not None:
                self.send(c.comm, c.rank, P.NOMORE, None)
        c.want, c.asked, c.waited = 0, False, False

    def ask_parent(self) -> None:
        if self.requested or self.parent is None:
            return
        self.requested = True
        self.asked_at = time.monotonic()
        rec = self.meter.record
        rec["steals_remote"] += 1
        # how full the pool still was: at most the low-water mark (prefetch), 0 (blocking)
        rec["remote_pool_max"] = max(rec.get("remote_pool_max", 0), len(self.pool))
        rec["low_water"] = self.low_water()
        results, self.results = self.results, []
        self.send_up(P.RESULTS, (results, self.ask_amount(), None))

    quota_of_self = 1

    def ask_amount(self) -> int:
        """A router's steal asks for its initial share, or ``steal_factor`` times what
        its children consume while a request travels (see ``low_water``)."""
        return max(self.quota_of_self, int(self.params.steal_factor * self._cover()))

    def _cover(self) -> float:
        """Tasks the children take in one round of batches plus one round trip to the
        parent (the leaves ask for ``batch_s`` seconds of work at a time)."""
        recent = sum(c.last_want for c in self.children)
        return recent * (1.0 + self.rtt / self.batch_s)

    def note_answer(self) -> None:
        """The parent answered a remote steal: update the measured round trip."""
        if self.asked_at is not None:
            rtt = time.monotonic() - self.asked_at
            self.rtt = rtt if self.rtt == 0.0 else 0.5 * (self.rtt + rtt)
            self.asked_at = None

    @property
    def total_procs(self) -> int:
        return sum(c.procs for c in self.children) or 1

    def busy(self) -> bool:
        """Work is under way below this node (so poll eagerly)."""
        return self.requested or any(c.outstanding or c.want for c in self.children)

    def maybe_go_idle(self) -> None:
        """A router whose subtree ran dry sends its results up in one message."""
        if (self.parent is None or not self.exhausted or self.requested or self.pool
                or not self.results):
            return
        if any(c.outstanding or c.want for c in self.children):
            return
        results, self.results = self.results, []
        self.send_up(P.RESULTS, (results, 0, None))

    # jobs, statistics, stop ----------------------------------------------------
    def start_job(self, job) -> None:
        """Forward the job's functions; counters restart, except on the first job, which
        also pays for building the tree (its spawns and CPU count there)."""
        if self.job is not None and self.job[0] != job[0]:
            self.meter.reset()
        table = dict(self.job[1]) if self.job is not None else {}
        table.update(job[1])          # a job message carries only the functions not
        self.job = (job[0], table)    # sent before; a new process needs all of them
        self.one_shot_stats = []
        for c in self.children:
            if c.comm is not None:
                self.send(c.comm, c.rank, P.JOB, job)

    def request_stats(self) -> None:
        live = [c for c in self.children if c.comm is not None]
        self.stats_wait = [len(live), []]
        for c in live:
            self.send(c.comm, c.rank, P.STATS_REQ, None)
        if not live:
            self.on_stats_done()

    def collected_stats(self) -> list:
        """Own record, the children's records and the finished one-shot leaves'."""
        records = [self.meter.snapshot()] + self.stats_wait[1]
        if self.one_shot_stats:
            records.append(_merge_one_shot(self.one_shot_stats))
        return records

    def begin_stop(self) -> None:
        live = [c for c in self.children if c.comm is not None]
        self.stopping = len(live)
        for c in live:
            self.send(c.comm, c.rank, P.STOP, None)

    def finish_stop(self) -> None:
        self.mailbox.flush(timeout=10)
        for comm in self.comms:
            comm.Disconnect()
        self.comms = []

    def subtree_pids(self) -> list:
        return [os.getpid()] + [p for c in self.children for p in c.pids]


def _merge_one_shot(records: list) -> dict:
    """All spawn-per-batch leaves of a node as one record (they are one slot each)."""
    merged = dict(records[0])
    for key in ("cpu_s", "tasks", "busy_s", "idle_s", "batches"):
        merged[key] = sum(r[key] for r in records)
    merged["pid"] = 0
    merged["processes"] = len(records)
    return merged


def _by_host(kids: list) -> list:
    """Consecutive children on the same host, in order: ``[(host, [kid, ...]), ...]``."""
    groups = []
    for kid in kids:
        host = kid.get("host")
        if groups and groups[-1][0] == host:
            groups[-1][1].append(kid)
        else:
            groups.append((host, [kid]))
    return groups


def _spawn_host(host):
    """The ``host`` info value for a spawn: None for this machine."""
    if not host or host in ("localhost", "127.0.0.1", socket.gethostname()):
        return None
    return host
