"""A discrete-event simulation of dac's stealing protocol on the sleep tree.

Every router and the root run the project's own steal rules: one
``stealing.tree.policy.StealPolicy`` per node (imported, not copied), fed the events a
``stealing.roles.node.Node`` sees and its actions (Give, Refuse, AskParent,
SendResults, AskSplit, Yield, Route) carried out as messages on a simulated clock
(simpy). The tree of processes is the project's own plan
(``stealing.tree.placement.plan_topology``). Leaves follow ``stealing/roles/leaf.py``:
returning results is the steal request, a leaf asks ahead when half its batch is left
(a batch is ``batch_s`` seconds of work at its measured rate), asks with ``idle`` when
it has nothing to run, and answers a SPLIT with its newest queued tasks, then the
oldest half of its running task's deque (``dac/stealable.py``: ``split``, ``_take``);
a split it cannot pay is owed until its next spawn.

The workload is ``benchmarks/sleep_scale.py``'s tree (its ``has_children``, imported):
node ``(d, i)`` sleeps ``ms``, then spawns ``(d+1, 2i)`` and ``(d+1, 2i+1)`` with
probability ``p`` while ``d < limit``, and syncs on both. The whole call is one task
given to one leaf. A running task is the depth-first walk of its subtree on its leaf:
both spawns go on the leaf's deque, ``sync`` runs the newest first, so the deque holds
the unstarted left siblings along the running path; thieves take the oldest half. A
frame waiting for a stolen spawn runs queued tasks meanwhile, or asks its parent (idle,
at sync) and waits; the stolen spawn's result goes back to the owner leaf (RETURN).

Timing: a node takes ``ms`` plus ``node_s``; a task ``task_s`` more to start; a leaf
reads its messages at node boundaries (after a node's sleep, once its spawns are on the
deque), at most every ``poll_s``, and at once while it waits; every message takes
``latency_s`` one way (plus a cluster's ``latency_ms`` on the link to its router);
the root and each router handle one message at a time, ``node_msg_s`` each; a leaf
pays ``split_task_s`` per task it hands over. Start-up is estimated from the plan: a
node's ``MPI_Comm_spawn`` of ``n`` children takes ``spawn_proc_s * n``, and routers
spawn their subtrees in parallel (each host its own cores); ``startup_one_machine_s``
starts every process one after another (the 2-core machine).

Left out: CPU contention (every process has a core of its own; on 2 cores 133
processes do not), a node's cost growing with its children (the policy walks them:
``root_handle_us`` shows it), doorbells and backoff sleeps (a waiting process wakes
when a message lands), message sizes and bandwidth, lost processes, the
JOB/READY/STATS messages, and the root's expansion of the top (the sleep tree's top is
one task).

Cost parameters (seconds), measured on this machine (2 cores, MPICH 5.0.2, Python
3.11, a load average of about 2 from other work) with

    nice -n 19 python benchmarks/simulate.py --measure

which prints them as JSON (three runs gave the same figures within the ranges below):

    latency_s     150e-6: one way, the median half round trip of 1000 small pickled
                  messages between the root and a process it spawned
                  (``MPI.COMM_SELF.Spawn``), both using dac's ``Mailbox`` with
                  doorbells (how processes on one host talk). Without doorbells
                  (hosts apart: backoff sleeps) 1.4e-3 (``latency_backoff_s``);
                  MPI's blocking send and receive, which spin, 1.7e-6
                  (``latency_mpi_s``). The spawn of that one process: 0.2-0.4 s.
    node_msg_s    18e-6: a node's handling of one RESULTS message from one of 32
                  leaves in this process: unpickle, ``results_from``, ``note_rate``,
                  ``child_wants``, pickle the TASKS answer (MPI's own calls not
                  counted). ``root_handle_us`` reports what the policy really took
                  per message at the root during a simulation.
    task_s        6e-6 (5-10e-6): a task read, run in a ``StealableContext`` and its
                  result pickled, less the bare call.
    split_task_s  1.1e-6: a spawn written as a thief's task (``task_call.write``).
    node_s        300e-6 (250-450e-6): a 20 ms node's time beyond its 20 ms in a
                  leaf's task of 91 nodes: the sleep's overshoot on a loaded machine
                  (spawns and syncs cost about a microsecond).
    poll_s        2e-3: ``dac.stealable.POLL_S`` (with 20 ms nodes a leaf reads its
                  messages at every node boundary).
    spawn_proc_s  0.085: one MPI_Comm_spawn of 128 processes took 10.9 s on 2 cores
                  (of 32: 1.15 s, 0.036 s a process: the figure is pessimistic for
                  the groups of 31-94 leaves of the default tree).

Projections (``--project``) use a bigger tree, so that 10,000 leaves have work: p 0.76,
limit 32 (3,443,995 nodes of 20 ms: 68,880 s of work, 6.9 s a leaf on 10,000 leaves).
A 10,000-leaf run simulates in about 4 minutes on this machine (220-250 s, under nice
with other work beside; the policy's own methods take most of it), a 1,000-leaf run in
1-5 minutes (two clusters make more messages); docs/scale.md has the figures.

Run:  python benchmarks/simulate.py --leaves 32 --shape default
      python benchmarks/simulate.py --leaves 8 32 128 --shape default --plot eff.png
      python benchmarks/simulate.py --project [--leaves 1000 3000 10000] [--plot F.png]
      python benchmarks/simulate.py --measure
The last line printed is one JSON object: a run's figures (``KEYS``), or with several
runs ``{"runs": [...]}`` (``--project``: also ``"tree"`` and ``"costs"``).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]

import simpy
from simpy.events import Timeout
from sleep_scale import count, has_children

from dac.stealable import POLL_S
from stealing.transport.protocol import RunSettings
from stealing.tree.placement import plan_topology
from stealing.tree.plan import StealParams, TreeNode
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
from stealing.tree.tasks import Path, Result, Task, owner
from stealing.tree.topology import Cluster, Host, Topology

# the figures of one run, in the order they are printed
KEYS = ("shape", "leaves", "routers", "nodes", "work_s", "elapsed_s", "efficiency",
        "startup_s", "startup_one_machine_s", "steals_local", "steals_remote",
        "steals_split", "steals_after_remote", "steals_failed", "split_tasks",
        "inside_share", "messages", "root_msgs", "root_msgs_per_s", "root_cpu_share",
        "busiest_router_msgs_per_s", "ramp_s", "root_handle_us", "sim_wall_s")
# the figures that depend on this machine's speed, not on the simulation
WALL_KEYS = ("root_handle_us", "sim_wall_s")
SHAPES = ("default", "thesis", "flat", "two-clusters")

# message kinds: a child's RESULTS and STOLEN, a parent's TASKS, NOMORE, SPLIT, RETURN
RESULTS, STOLEN, TASKS, NOMORE, SPLIT, RETURN = range(6)
# a leaf's request (stealing.roles.leaf.Ask)
NONE, REFILL, IDLE, IDLE_AT_SYNC, REFUSED = range(5)
PENDING = (REFILL, IDLE, IDLE_AT_SYNC)
# a spawn of a running task: on the deque, running here, split off, done
QUEUED, RUNNING, TAKEN, DONE = range(4)


@dataclass(frozen=True)
class Costs:
    """What things cost, in seconds (the module docstring says where each comes from)."""
    latency_s: float = 150e-6
    node_msg_s: float = 18e-6
    task_s: float = 6e-6
    split_task_s: float = 1.1e-6
    node_s: float = 300e-6
    poll_s: float = POLL_S
    spawn_proc_s: float = 0.085


@dataclass(frozen=True)
class Workload:
    """The sleep tree of ``benchmarks/sleep_scale.py``."""
    seed: int = 7
    p: float = 0.70
    limit: int = 20
    ms: float = 20.0


@dataclass
class Totals:
    """Counts over the whole run."""
    nodes: int = 0
    tasks: int = 0
    split_tasks: int = 0
    messages: int = 0
    split_given: int = 0        # split tasks given to leaves ...
    split_inside: int = 0       # ... by a router of the owner's cluster
    end: float = -1.0
    policy_calls: dict[str, int] = field(default_factory=dict)


class Sim:
    """The clock, the costs, the tree of simulated processes and the totals."""

    def __init__(self, plan: TreeNode, work: Workload, costs: Costs,
                 params: StealParams, settings: RunSettings) -> None:
        self.env = simpy.Environment()
        self.work, self.costs, self.params, self.settings = work, costs, params, settings
        self.node_time = work.ms / 1000.0 + costs.node_s
        self.totals = Totals()
        self.done = self.env.event()
        self.leaves: list[SimLeaf] = []
        self.nodes: list[SimNode] = []
        self.cluster_of: dict[Path, str] = {}
        root = self.build(plan, (), None, 0)
        assert isinstance(root, SimNode)
        self.root = root

    def now(self) -> float:
        return self.env.now

    def build(self, plan: TreeNode, path: Path, parent: SimNode | None,
              index: int) -> Proc:
        """The simulated process of ``plan`` and, below it, its subtree."""
        delay = self.costs.latency_s + plan.latency_ms / 1000.0
        if plan.role == "leaf":
            assert parent is not None
            leaf = SimLeaf(self, path, parent, index, delay, plan.cluster)
            self.leaves.append(leaf)
            self.cluster_of[path] = plan.cluster
            return leaf
        node = SimNode(self, plan, path, parent, index, delay)
        self.nodes.append(node)
        for k, kid in enumerate(plan.children):
            node.add(self.build(kid, path + (k,), node, k), kid)
        return node

    def post(self, dst: Proc, delay: float, msg: tuple) -> None:
        """``msg`` reaches ``dst`` after ``delay`` seconds."""
        ev = Timeout(self.env, delay, msg)
        ev.callbacks.append(dst.receive)
        self.totals.messages += 1

    def run(self) -> None:
        """The root's one task (``Runtime``: open_stream, feed, close_stream), then
        until its result is back at the root."""
        policy = self.root.policy
        policy.feeding = True
        self.root.apply(policy.on_tasks([(0, (0, 0))]))
        self.root.apply(policy.stop_feeding())
        self.env.run(until=self.done)

    def finish(self) -> None:
        self.totals.end = self.env.now
        self.done.succeed()


class SimNode:
    """The root or a router: ``stealing.roles.node.Node`` with simulated links."""

    role = "router"

    def __init__(self, sim: Sim, plan: TreeNode, path: Path, parent: SimNode | None,
                 index: int, delay: float) -> None:
        self.sim, self.path, self.parent, self.index = sim, path, parent, index
        self.delay, self.cluster = delay, plan.cluster
        self.policy = Counted(sim.params.steal_factor, has_parent=parent is not None,
                              remote=sim.settings.remote, batch_s=sim.settings.batch_s,
                              now=sim.now)
        self.policy.calls = sim.totals.policy_calls
        self.policy.path = path
        if parent is not None:
            self.policy.own_quota = max(1, plan.tasks)   # stealing.roles.router.serve
        self.children: list[Proc] = []
        self.seqs: list[int] = []           # each child's latest request (Child.seq)
        self.queue: deque[Any] = deque()    # messages waiting to be handled
        self.busy = False
        self.handled = 0
        self.handle_s = 0.0                 # wall time its handling took here (the root)
        self.token = 0                      # the latest retry timer's

    def add(self, child: Proc, kid: TreeNode) -> None:
        self.policy.add_child(kid.role, kid.procs, kid.tasks)
        self.children.append(child)
        self.seqs.append(0)

    # one message at a time, ``node_msg_s`` each ---------------------------------
    def receive(self, ev: simpy.Event) -> None:
        self.queue.append(ev.value)
        if not self.busy:
            self._next()

    def _next(self) -> None:
        self.busy = True
        ev = Timeout(self.sim.env, self.sim.costs.node_msg_s, self.queue.popleft())
        ev.callbacks.append(self._handled)

    def _handled(self, ev: simpy.Event) -> None:
        self.handled += 1
        if self.parent is None:         # the root: how long the real policy takes
            t0 = time.perf_counter()
            self.handle(ev.value)
            self.handle_s += time.perf_counter() - t0
        else:
            self.handle(ev.value)
        if self.queue:
            self._next()
        else:
            self.busy = False
            self._arm()

    def _arm(self) -> None:
        """The wait's timeout (``policy.retry_in``): parked requests try again."""
        due = self.policy.retry_in()
        if due is None:
            return
        self.token += 1
        ev = Timeout(self.sim.env, due + 1e-9, self.token)
        ev.callbacks.append(self._retry)

    def _retry(self, ev: simpy.Event) -> None:
        if ev.value != self.token or self.busy:
            return          # a message came first: its handling armed a new timer
        if self.policy.retry_in() == 0.0:       # Node.retry_if_due
            self.apply(self.policy.retry())
        self._arm()

    def handle(self, msg: Any) -> None:
        """``Node.handle_child`` and ``router._from_parent``."""
        kind, policy = msg[0], self.policy
        if kind == RESULTS:
            _, k, results, want, idle, seq, rate = msg
            if want:
                self.seqs[k] = seq
            mine, routes = policy.results_from(k, results)
            self.take_results(mine)
            self.apply(routes)
            policy.note_rate(k, rate)
            self.apply(policy.child_wants(k, want, idle))
        elif kind == STOLEN:
            self.apply(policy.on_split_answer(msg[1], msg[2]))
        elif kind == TASKS:
            self.apply(policy.on_tasks(msg[1]))
        elif kind == NOMORE:
            self.apply(policy.on_nomore())
        elif kind == SPLIT:
            self.apply(policy.on_split_request(msg[1]))
        elif kind == RETURN:
            self.apply(policy.route(msg[1])[1])
            self.apply(policy.distribute())
        else:
            raise RuntimeError(f"unexpected message {msg!r}")

    def take_results(self, results: list[Result]) -> None:
        if self.parent is not None:
            self.policy.keep_results(results)
        elif any(r[0] == 0 for r in results):   # the root: the job's one task is done
            self.sim.finish()

    def apply(self, actions: list[Action]) -> None:
        """``Node.apply``: each action as its message."""
        for a in actions:
            t = type(a)
            if t is Give:
                self._give(a)       # type: ignore[arg-type]
            elif t is Refuse:
                self.to_child(a.child, (NOMORE, self.seqs[a.child]))  # type: ignore[union-attr]
            elif t is AskParent or t is SendResults:
                amount = a.amount if t is AskParent else 0  # type: ignore[union-attr]
                idle = a.idle if t is AskParent else False  # type: ignore[union-attr]
                self.to_parent((RESULTS, self.index, a.results, amount,  # type: ignore[union-attr]
                                idle, 0, self.policy.subtree_rate()))
            elif t is Route:
                self.to_child(a.child, (RETURN, a.results))  # type: ignore[union-attr]
            elif t is AskSplit:
                self.to_child(a.child, (SPLIT, a.amount))  # type: ignore[union-attr]
            elif t is Yield:
                self.to_parent((STOLEN, self.index, a.tasks))  # type: ignore[union-attr]
            else:
                raise TypeError(f"unknown policy action {a!r}")

    def _give(self, a: Give) -> None:
        child = self.children[a.child]
        if child.role == "leaf":
            totals, where = self.sim.totals, self.sim.cluster_of
            for t in a.tasks:
                path = owner(t[0])
                if path is not None:
                    totals.split_given += 1
                    totals.split_inside += where[path] == child.cluster
        self.to_child(a.child, (TASKS, a.tasks, self.seqs[a.child]))

    def to_child(self, k: int, msg: tuple) -> None:
        child = self.children[k]
        self.sim.post(child, child.delay, msg)

    def to_parent(self, msg: tuple) -> None:
        assert self.parent is not None
        self.sim.post(self.parent, self.delay, msg)


class Counted(StealPolicy):
    """The project's ``StealPolicy``, counting calls of its event methods (so a test
    sees the real rules at work); ``calls`` is shared by every node of a run."""

    calls: dict[str, int]

    def on_tasks(self, tasks: Any) -> list[Action]:
        self.calls["on_tasks"] = self.calls.get("on_tasks", 0) + 1
        return super().on_tasks(tasks)

    def child_wants(self, k: int, want: int, idle: bool = False) -> list[Action]:
        self.calls["child_wants"] = self.calls.get("child_wants", 0) + 1
        return super().child_wants(k, want, idle)

    def on_split_answer(self, k: int, tasks: list[Task]) -> list[Action]:
        self.calls["on_split_answer"] = self.calls.get("on_split_answer", 0) + 1
        return super().on_split_answer(k, tasks)


class Entry:
    """A spawn of a running task: node ``(d, i)`` of the tree, and where it stands."""

    __slots__ = ("d", "i", "state")

    def __init__(self, d: int, i: int) -> None:
        self.d, self.i, self.state = d, i, QUEUED


class TaskRun:
    """A task under way on a leaf: its id, when it began, the leaf's idle time then."""

    __slots__ = ("idle0", "t0", "tid")

    def __init__(self, tid: Any, t0: float, idle0: float) -> None:
        self.tid, self.t0, self.idle0 = tid, t0, idle0


class Frame:
    """A node whose sleep is over, syncing on its spawns ``a`` and ``b`` (None: a leaf
    of the tree); ``task``: it is a task's top; ``waiting``: the stolen spawn it waits
    for (``Leaf.wait``), ``asked``: that wait sent an idle request."""

    __slots__ = ("a", "asked", "b", "entry", "task", "waiting")

    def __init__(self, entry: Entry, a: Entry | None, b: Entry | None,
                 task: TaskRun | None) -> None:
        self.entry, self.a, self.b, self.task = entry, a, b, task
        self.waiting: Entry | None = None
        self.asked = False


class SimLeaf:
    """A persistent CPU leaf (``stealing.roles.leaf.Leaf``) and its task's deque
    (``dac.stealable.StealableContext``)."""

    role = "leaf"

    def __init__(self, sim: Sim, path: Path, parent: SimNode, index: int, delay: float,
                 cluster: str) -> None:
        self.sim, self.path, self.parent, self.index = sim, path, parent, index
        self.delay, self.cluster = delay, cluster
        self.tasks: deque[Task] = deque()
        self.results: list[Result] = []
        self.inbox: deque[Any] = deque()
        self.working = False                # Phase.WORKING
        self.asking = NONE
        self.exhausted = False
        self.owed = 0                       # Leaf.owed: a split before the task began
        self.split_owed = False
        self.held = False                   # Leaf.held: a split result for the next ask
        self.seq = 0
        self.running = 0                    # tasks under way (nested while waiting)
        self.tasks_per_leaf = sim.params.tasks_per_leaf
        self.batch_len = self.tasks_per_leaf
        self.rate: float | None = None
        self.win_tasks, self.win_busy = 0, 0.0
        self.idle_in_task = 0.0
        # the executor's side: frames syncing, the deque, spawns split off
        self.stack: list[Frame] = []
        self.deque: deque[Entry] = deque()
        self.stolen: dict[int, Entry] = {}
        self.next_number = 0
        self.exec_owed = 0                  # StealableContext.owed
        self.blocked, self.blocked_at = True, 0.0     # it waits for its first batch
        self.current: tuple[Entry, TaskRun | None] = (Entry(0, 0), None)
        self.debt = 0.0                     # time owed to splits, paid by the next node
        self.last_poll = -1.0
        self.first_task_at: float | None = None

    # messages --------------------------------------------------------------------
    def receive(self, ev: simpy.Event) -> None:
        self.inbox.append(ev.value)
        if self.blocked:
            self.blocked = False
            if self.running:
                self.idle_in_task += self.sim.env.now - self.blocked_at
            self.loop()

    def send(self, msg: tuple) -> None:
        self.sim.post(self.parent, self.delay, msg)

    def handle(self, msg: Any) -> None:
        """``Leaf.handle``."""
        kind = msg[0]
        if kind == TASKS:
            self._take_tasks(msg[1], msg[2])
        elif kind == NOMORE:
            self.exhausted = True
            if self.asking in PENDING and msg[1] == self.seq:
                self.asking = NONE if self.asking == REFILL else REFUSED
        elif kind == SPLIT:
            self.split(msg[1])
        elif kind == RETURN:
            for tid, _ in msg[1]:               # StealableContext.deliver
                e = self.stolen.pop(tid[1], None)
                if e is not None:
                    e.state = DONE
        else:
            raise RuntimeError(f"leaf: unexpected message {msg!r}")

    def _take_tasks(self, tasks: list[Task], seq: int) -> None:
        self.tasks.extend(tasks)
        self.batch_len = len(tasks)
        if self.asking == REFUSED:
            self.asking = NONE
        if any(type(t[0]) is not tuple for t in tasks):
            self.exhausted = False
        if seq == self.seq:
            self.withdraw()
        self.working = True

    def withdraw(self) -> None:
        if self.asking in PENDING:
            self.asking = NONE

    def want(self) -> int:
        """``Leaf.want``: ``batch_s`` of work at the smoothed rate of its tasks."""
        if self.win_tasks and self.win_busy > 0:
            rate = self.win_tasks / self.win_busy
            self.rate = rate if self.rate is None else 0.5 * (self.rate + rate)
            self.win_tasks, self.win_busy = 0, 0.0
        if self.rate is None or self.sim.settings.batch != "rate":
            return max(1, self.tasks_per_leaf)
        return max(1, min(1 << 20, round(self.rate * self.sim.settings.batch_s)))

    def ask(self, idle: bool = False, at_sync: bool = False) -> None:
        """``Leaf.ask``: the results so far, and a request for more."""
        results, self.results = self.results, []
        self.held = False
        self.asking = IDLE_AT_SYNC if at_sync else IDLE if idle else REFILL
        self.seq += 1
        if idle:
            self.owed, self.split_owed = 0, False
            if self.running:
                self.exec_split(0)
        self.send((RESULTS, self.index, results, self.want(), idle, self.seq,
                   self.rate or 0.0))

    def send_results(self, results: list[Result]) -> None:
        self.withdraw()
        self.held = False
        self.send((RESULTS, self.index, results, 0, False, 0, 0.0))

    # splits ------------------------------------------------------------------------
    def split(self, want: int) -> None:
        """``Leaf.split``: the newest queued tasks, then the oldest spawns."""
        if not self.working or (not self.tasks and not self.running):
            return
        n = min(want, (len(self.tasks) + 1) // 2) if len(self.tasks) > 1 else 0
        given = [self.tasks.pop() for _ in range(n)][::-1]
        if len(given) < want:
            if self.running:
                got = self.exec_split(want - len(given))
                self.split_owed = not got
                given += got
            else:
                self.owed = want - len(given)
        if given:
            self.offer(given)

    def exec_split(self, want: int) -> list[Task]:
        """``StealableContext.split``."""
        if want <= 0:
            self.exec_owed = 0
            return []
        out = self._take()
        self.exec_owed = 0 if out else want
        return out

    def _take(self) -> list[Task]:
        """The oldest half of the deque (at least one) as tasks ``((path, n), node)``."""
        dq, out = self.deque, []
        for _ in range((len(dq) + 1) // 2):
            e = dq.popleft()
            e.state = TAKEN
            number = self.next_number
            self.next_number += 1
            self.stolen[number] = e
            out.append(((self.path, number), (e.d, e.i)))
        return out  # type: ignore[return-value]

    def offer(self, tasks: list[Task]) -> None:
        self.split_owed = False
        self.debt += self.sim.costs.split_task_s * len(tasks)
        self.send((STOLEN, self.index, tasks))

    # running -----------------------------------------------------------------------
    def start(self, entry: Entry, task: TaskRun | None) -> None:
        """Run node ``entry`` (its sleep); ``task``: it is a task's top."""
        dur = self.sim.node_time + self.debt
        if task is not None:
            dur += self.sim.costs.task_s
        self.debt = 0.0
        self.current = (entry, task)
        ev = Timeout(self.sim.env, dur)
        ev.callbacks.append(self._boundary)

    def _boundary(self, _ev: simpy.Event) -> None:
        """A node's sleep is over: its spawns go on the deque (an owed split is paid
        from them), the leaf reads its messages, and goes on."""
        e, task = self.current
        sim = self.sim
        work = sim.work
        sim.totals.nodes += 1
        d = e.d
        if d < work.limit and has_children(work.seed, d, e.i, work.p):
            a, b = Entry(d + 1, 2 * e.i), Entry(d + 1, 2 * e.i + 1)
            self.deque.append(a)
            self.deque.append(b)
            self.stack.append(Frame(e, a, b, task))
            if self.exec_owed:
                self._pay()
        elif task is not None:
            self.stack.append(Frame(e, None, None, task))
        else:
            e.state = DONE
        now = sim.env.now
        if now - self.last_poll >= sim.costs.poll_s:
            self.last_poll = now
            while self.inbox:
                self.handle(self.inbox.popleft())
        self.loop()

    def _pay(self) -> None:
        self.exec_owed = 0
        given = self._take()
        if given:
            self.offer(given)

    def run_one(self) -> None:
        """``Leaf.run_one``: the oldest queued task starts (maybe nested)."""
        if self.held:                       # the owner must not wait for this task
            results, self.results = self.results, []
            self.send_results(results)
        tid, node = self.tasks.popleft()
        self.running += 1
        if self.first_task_at is None:
            self.first_task_at = self.sim.env.now
        if self.owed:                       # StealableContext.run_task
            self.exec_owed, self.owed = self.owed, 0
        d, i = node
        entry = Entry(d, i)
        entry.state = RUNNING
        self.start(entry, TaskRun(tid, self.sim.env.now, self.idle_in_task))

    def loop(self) -> None:
        """Go on until the leaf computes or waits for a message."""
        while not (self._frame_step() if self.stack else self._serve_step()):
            pass

    def _frame_step(self) -> bool:
        """``sync`` of the top frame (True: the leaf computes or waits now)."""
        f = self.stack[-1]
        w = f.waiting
        a, b = f.a, f.b
        if w is not None and w.state == DONE and (a is None or a.state == DONE) \
                and (b is None or b.state == DONE):
            # the end of Leaf.wait, once every child split off is back
            # (StealableContext._wait_stolen)
            f.waiting = None
            asked, f.asked = f.asked, False
            if (asked and self.asking == IDLE_AT_SYNC) or self.held:
                results, self.results = self.results, []
                self.send_results(results)
        pend = a if a is not None and a.state != DONE else \
            b if b is not None and b.state != DONE else None
        if pend is None:
            self.stack.pop()
            if f.task is None:
                f.entry.state = DONE
            else:
                self._task_done(f.task)
            return False
        if self.deque:
            e = self.deque.pop()
            e.state = RUNNING
            self.start(e, None)
            return True
        f.waiting = pend                    # split off: Leaf.wait until it is back
        if self.tasks:
            self.run_one()
            return True
        if self.inbox:
            self.handle(self.inbox.popleft())
            return False
        if self.asking in (NONE, REFILL) or (self.split_owed and self.asking != REFUSED):
            self.ask(idle=True, at_sync=True)
            f.asked = True
        self.block()
        return True

    def _serve_step(self) -> bool:
        """One turn of ``Leaf._serve`` (True: the leaf computes or waits now)."""
        if self.tasks:
            if self.inbox:
                self.handle(self.inbox.popleft())
                return False
            if (self.sim.settings.prefetch and self.asking not in PENDING
                    and not self.exhausted
                    and len(self.tasks) <= max(1, self.batch_len // 2)):
                self.ask()
            self.run_one()
            return True
        if self.working:
            if self.asking != REFUSED and (self.asking != IDLE or self.results):
                self.ask(idle=True)
            elif self.exhausted and self.results:
                results, self.results = self.results, []
                self.send_results(results)
        if self.inbox:
            self.handle(self.inbox.popleft())
            return False
        self.block()
        return True

    def block(self) -> None:
        self.blocked, self.blocked_at = True, self.sim.env.now

    def _task_done(self, t: TaskRun) -> None:
        """``Leaf.run_one`` after the task: split work's result goes to its owner at
        once, or with the idle request that comes next; the rate is measured over
        tasks that were not nested."""
        self.running -= 1
        totals = self.sim.totals
        totals.tasks += 1
        if type(t.tid) is tuple:
            totals.split_tasks += 1
            if not self.tasks and self.working and self.asking in (NONE, REFILL):
                self.results.append((t.tid, b""))   # Leaf.split_result
                self.held = True
            else:
                self.send_results([(t.tid, b"")])
        else:
            self.results.append((t.tid, b""))
        if not self.running:
            self.win_tasks += 1
            self.win_busy += self.sim.env.now - t.t0 - (self.idle_in_task - t.idle0)


Proc = SimNode | SimLeaf
Action = Give | Refuse | AskParent | SendResults | AskSplit | Yield | Route


# shapes and start-up -----------------------------------------------------------------
def plan_shape(shape: str, leaves: int, wide_ms: float = 20.0) -> tuple[TreeNode,
                                                                        StealParams]:
    """The project's plan for ``leaves`` leaves: ``default`` (branches 4, min_procs
    24), ``thesis`` (2, 2), ``flat`` (no router), ``two-clusters`` (default parameters,
    two clusters of half the leaves each, the second ``wide_ms`` away)."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {SHAPES}, got {shape!r}")
    params = StealParams(**{"thesis": {"branches": 2, "min_procs": 2},
                            "flat": {"min_procs": 4 * leaves}}.get(shape, {}))
    if shape == "two-clusters":
        near = (leaves + 1) // 2
        clusters = [Cluster("near", [Host("near", near)]),
                    Cluster("far", [Host("far", leaves - near)], latency_ms=wide_ms)]
    else:
        clusters = [Cluster("local", [Host("localhost", leaves)])]
    return plan_topology(Topology(clusters), params, "localhost"), params


def startup_s(plan: TreeNode, costs: Costs) -> float:
    """Start-up with every host's cores its own: a node's one spawn of its children,
    then the slowest of its routers' subtrees (they start in parallel)."""
    if not plan.children:
        return 0.0
    own = costs.spawn_proc_s * len(plan.children)
    return own + max(costs.latency_s + plan.latency_ms / 1000.0 + startup_s(k, costs)
                     for k in plan.children)


# one run ---------------------------------------------------------------------------
def simulate(leaves: int, shape: str = "default", work: Workload | None = None,
             costs: Costs | None = None, wide_ms: float = 20.0,
             settings: RunSettings | None = None,
             busy_every: float = 0.0) -> dict[str, Any]:
    """Simulate the sleep tree on ``leaves`` leaves; returns the run's figures (with
    ``busy_every`` > 0 also ``busy``: ``[time, share of leaves computing]`` pairs)."""
    work = work or Workload()
    costs = costs or Costs()
    plan, params = plan_shape(shape, leaves, wide_ms)
    began = time.perf_counter()
    sim = Sim(plan, work, costs, params, settings or RunSettings())
    busy: list[list[float]] = []
    if busy_every > 0:
        sim.env.process(sample_busy(sim, busy_every, busy))
    sim.run()
    wall = time.perf_counter() - began
    out = figures(sim, shape, plan, wall)
    if busy_every > 0:
        out["busy"] = busy
    return out


def sample_busy(sim: Sim, every: float, into: list[list[float]]) -> Any:
    """A simpy process: the share of leaves computing (not waiting), every ``every``
    simulated seconds."""
    while True:
        share = sum(not leaf.blocked for leaf in sim.leaves) / len(sim.leaves)
        into.append([round(sim.env.now, 4), round(share, 4)])
        yield sim.env.timeout(every)


def figures(sim: Sim, shape: str, plan: TreeNode, wall: float) -> dict[str, Any]:
    """The run's figures (``KEYS``), and ``policy_calls``."""
    t, costs = sim.totals, sim.costs
    steals: dict[str, int] = {}
    for node in sim.nodes:
        for key in ("steals_local", "steals_remote", "steals_split",
                    "steals_after_remote", "steals_failed"):
            steals[key] = steals.get(key, 0) + node.policy.counters[key]
    elapsed = t.end
    work_s = t.nodes * sim.work.ms / 1000.0
    routers = [n for n in sim.nodes if n.parent is not None]
    busiest = max((n.handled for n in routers), default=0)
    out = {"shape": shape, "leaves": len(sim.leaves), "routers": len(routers),
           "nodes": t.nodes, "work_s": round(work_s, 3), "elapsed_s": round(elapsed, 4),
           "efficiency": round(work_s / len(sim.leaves) / elapsed, 4),
           "startup_s": round(startup_s(plan, costs), 3),
           "startup_one_machine_s": round(costs.spawn_proc_s * (len(sim.nodes) - 1
                                                                + len(sim.leaves)), 3),
           **steals, "split_tasks": t.split_tasks,
           "inside_share": round(t.split_inside / t.split_given, 4) if t.split_given
           else 1.0,
           "messages": t.messages, "root_msgs": sim.root.handled,
           "root_msgs_per_s": round(sim.root.handled / elapsed, 1),
           "root_cpu_share": round(sim.root.handled * costs.node_msg_s / elapsed, 4),
           "busiest_router_msgs_per_s": round(busiest / elapsed, 1),
           "ramp_s": round(max(-1.0 if x.first_task_at is None else x.first_task_at
                               for x in sim.leaves), 4),
           "root_handle_us": round(1e6 * sim.root.handle_s / max(1, sim.root.handled), 1),
           "sim_wall_s": round(wall, 2)}
    assert tuple(out) == KEYS, tuple(out)
    out["policy_calls"] = dict(t.policy_calls)
    return out


# measuring the costs (--measure) ---------------------------------------------------
def echo_child() -> None:
    """The spawned side of the ping-pongs: send back whatever comes, with blocking
    calls until "mailbox", then with dac's ``Mailbox`` (with a doorbell from the
    ``("bells", parent's, own)`` message on), until None."""
    from mpi4py import MPI  # lazy: only the measurement starts MPI

    from stealing.transport.bell import Bell  # lazy: only the measurement
    from stealing.transport.mailbox import Mailbox  # lazy: only the measurement
    parent = MPI.Comm.Get_parent()
    obj = parent.recv(source=0, tag=1)
    while obj != "mailbox":
        parent.send(obj, dest=0, tag=1)
        obj = parent.recv(source=0, tag=1)
    mb = Mailbox(MPI)
    while True:
        got = mb.wait([parent])
        assert got is not None
        obj = got[3]
        if obj is None:
            break
        if obj[0] == "bells":
            mb.bell = Bell.open(obj[2])
            mb.rung_by(parent)
            mb.ring_link(parent, 0, obj[1])
        mb.send(parent, obj, 0, 1)
    mb.flush()
    parent.Disconnect()


def _ping(send: Any, wait: Any, rounds: int) -> float:
    """Median half round trip of ``rounds`` exchanges (after 50 to warm up)."""
    msg = (RESULTS, 3, [(((0, 1), 7), b"x" * 16)], 5, True, 12, 40.0)
    halves = []
    for k in range(rounds + 50):
        t0 = time.perf_counter()
        send(msg)
        wait()
        if k >= 50:
            halves.append((time.perf_counter() - t0) / 2)
    return statistics.median(halves)


def measure_latency(rounds: int = 1000) -> dict[str, float]:
    """Median half round trip of a small pickled message to a spawned child that
    echoes it: MPI's blocking send and receive (``latency_mpi_s``), dac's
    ``Mailbox`` on both sides without doorbells (``latency_backoff_s``: isend,
    Iprobe, backoff sleeps, as between hosts) and with them (``latency_s``: one
    host); and what the spawn of that one process took."""
    from stealing.transport.bell import Bell, bell_name  # lazy: only --measure
    from stealing.transport.mailbox import Mailbox  # lazy: only --measure
    from stealing.transport.mpi import after_spawn, init_mpi  # lazy: only --measure
    MPI = init_mpi(this_host_only=True)     # as dac's root starts it
    t0 = time.perf_counter()
    comm = MPI.COMM_SELF.Spawn(sys.executable, [os.path.abspath(__file__), "--echo"],
                               maxprocs=1)
    out = {"spawn_one_s": time.perf_counter() - t0}
    after_spawn()
    out["latency_mpi_s"] = _ping(lambda m: comm.send(m, dest=0, tag=1),
                                 lambda: comm.recv(source=0, tag=1), rounds)
    comm.send("mailbox", dest=0, tag=1)
    mb = Mailbox(MPI)
    out["latency_backoff_s"] = _ping(lambda m: mb.send(comm, m, 0, 1),
                                     lambda: mb.wait([comm]), rounds)
    names = (bell_name(os.getpid(), ()), bell_name(os.getpid(), (0,)))
    mb.bell = Bell.open(names[0])
    mb.rung_by(comm)
    mb.ring_link(comm, 0, names[1])
    mb.send(comm, ("bells",) + names, 0, 1)
    mb.wait([comm])
    out["latency_s"] = _ping(lambda m: mb.send(comm, m, 0, 1), lambda: mb.wait([comm]),
                             rounds)
    mb.send(comm, None, 0, 1)
    mb.flush()
    comm.Disconnect()
    return out


def measure_node_message(rounds: int = 3000) -> float:
    """A node's handling of one RESULTS message from one of 32 leaves (unpickle it,
    the policy's ``results_from``, ``note_rate``, ``child_wants``, pickle the TASKS
    answer): the median over ``rounds``."""
    from stealing.transport import protocol as P  # lazy: only the measurement
    policy = StealPolicy(2.0, has_parent=False)
    for _ in range(32):
        policy.add_child("leaf", 1, 5)
    held: list[list[Task]] = [[] for _ in range(32)]
    for a in policy.on_tasks([(n, b"p" * 40) for n in range(32 * 5)]):
        if isinstance(a, Give):
            held[a.child] += a.tasks
    times = []
    for n in range(rounds):
        k = n % 32
        policy.pool.extend([(1000 + 5 * n + j, b"p" * 40) for j in range(5)])
        wire = pickle.dumps(P.Results([(held[k].pop(0)[0], b"r" * 8)], 5, idle=True,
                                      seq=n, rate=40.0))
        t0 = time.perf_counter()
        msg = pickle.loads(wire)
        policy.results_from(k, msg.results)
        policy.note_rate(k, msg.rate)
        for a in policy.child_wants(k, msg.want, msg.idle):
            if isinstance(a, Give):
                pickle.dumps(P.Tasks(a.tasks, msg.seq))
                held[a.child] += a.tasks
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class StandIn:
    """The leaf as its executor sees it (``stealing.roles.executor.Worker``), with
    nothing to read and nobody stealing (as in ``benchmarks/spawn_cost.py``)."""

    path, owed = (0,), 0

    def poll(self) -> None:
        pass

    def wait(self, done: Any) -> None:
        raise AssertionError("nothing was stolen")

    def offer(self, tasks: list[Task]) -> None:
        raise AssertionError("nobody asked")


def measure_leaf(rounds: int = 2000) -> dict[str, float]:
    """In this process, the leaf's side: a spawn written as a thief's task
    (``split_task_s``), a task of the sleep tree read, run in a
    ``StealableContext`` and its result pickled, less the bare call (``task_s``), and
    a 20 ms node's time beyond its 20 ms in a task of 91 nodes (``node_s``)."""
    from sleep_scale import nap_tree as nap_function  # lazy: only the measurement

    from dac import task_call  # lazy: only the measurement
    from dac.execution import run_task_payload  # lazy: only the measurement
    from dac.spawn import spawn_function  # lazy: only the measurement
    from dac.stealable import StealableContext  # lazy: only the measurement
    from dac.task_call import TaskCall  # lazy: only the measurement
    nap_tree = spawn_function(nap_function)
    ctx = StealableContext(StandIn())  # type: ignore[arg-type]
    ctx.table = {"nap": nap_tree}
    args = (7, 20, 0, 20, 0.7, 0.0)     # a leaf of the tree: sleep(0), return 1
    t0 = time.perf_counter()
    payloads = [task_call.write(TaskCall(((0,), n), "nap", 0, args, {}), "a spawn")
                for n in range(rounds)]
    split_task = (time.perf_counter() - t0) / rounds
    t0 = time.perf_counter()
    for payload in payloads:
        run_task_payload(payload, ctx.table, ctx)
    run = (time.perf_counter() - t0) / rounds
    t0 = time.perf_counter()
    for _ in range(rounds):
        nap_tree.fn(*args)
    bare = (time.perf_counter() - t0) / rounds
    nodes = count(7, 0, 0, 8, 0.7)
    t0 = time.perf_counter()
    ctx.run_task(nap_tree, (7, 0, 0, 8, 0.7, 20.0), {}, 0, False)
    node = (time.perf_counter() - t0) / nodes - 0.020
    return {"task_s": run - bare, "split_task_s": split_task, "node_s": node}


def measure() -> dict[str, float]:
    """Every measured cost (``--measure``): keep the machine quiet, run under nice."""
    out = measure_latency()
    out["node_msg_s"] = measure_node_message()
    out.update(measure_leaf())
    return out


# the command line --------------------------------------------------------------------
def runs_of(args: argparse.Namespace, work: Workload, costs: Costs,
            say: Any) -> list[dict[str, Any]]:
    """Every run the command line asks for, each reported in words as it ends."""
    shapes = ("default", "two-clusters") if args.project else (args.shape,)
    counts = args.leaves or ([1000, 10_000] if args.project else [32])
    runs = []
    for shape in shapes:
        for leaves in counts:
            runs.append(simulate(leaves, shape, work, costs, args.wide_ms,
                                 busy_every=args.busy_every))
            say(line(runs[-1]))
    return runs


def line(r: dict[str, Any]) -> str:
    """One run in words."""
    return (f"{r['shape']:12s} {r['leaves']:6d} leaves ({r['routers']} routers): "
            f"efficiency {r['efficiency']:.3f}, elapsed {r['elapsed_s']:.2f} s, "
            f"start-up {r['startup_s']:.1f} s; steals local {r['steals_local']} "
            f"remote {r['steals_remote']} split {r['steals_split']}, inside "
            f"{r['inside_share']:.3f}; root {r['root_msgs_per_s']:.0f} msg/s "
            f"({100 * r['root_cpu_share']:.1f}% CPU); simulated in {r['sim_wall_s']:.1f} s")


def plot(runs: list[dict[str, Any]], path: str, title: str) -> None:
    """Efficiency against leaves, one line per shape."""
    import matplotlib  # lazy: only --plot needs it
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: only --plot needs it
    fig, ax = plt.subplots(figsize=(6, 4))
    for shape in dict.fromkeys(r["shape"] for r in runs):
        rs = sorted((r for r in runs if r["shape"] == shape), key=lambda r: r["leaves"])
        ax.plot([r["leaves"] for r in rs], [r["efficiency"] for r in rs], "o-",
                label=shape)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("leaves")
    ax.set_ylabel("efficiency (simulated)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def arguments(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--leaves", type=int, nargs="+",
                    help="leaves of each run (32; --project: 1000 10000)")
    ap.add_argument("--shape", choices=SHAPES, default="default")
    ap.add_argument("--ms", type=float, default=20.0, help="sleep per node (ms)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--p", type=float, default=None,
                    help="chance a node has children (0.70; --project: 0.76)")
    ap.add_argument("--limit", type=int, default=None,
                    help="deepest level (20; --project: 32)")
    ap.add_argument("--wide-ms", type=float, default=20.0,
                    help="latency of the far cluster's link (two-clusters)")
    ap.add_argument("--project", action="store_true",
                    help="1,000 and 10,000 leaves, one cluster and two")
    ap.add_argument("--plot", metavar="FILE.png", help="efficiency against leaves")
    ap.add_argument("--busy-every", type=float, default=0.0, metavar="S",
                    help="add the share of busy leaves every S simulated seconds")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    ap.add_argument("--measure", action="store_true", help="measure the costs")
    ap.add_argument("--echo", action="store_true", help=argparse.SUPPRESS)
    for name, value in asdict(Costs()).items():
        ap.add_argument("--" + name.replace("_", "-"), type=float, default=value)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.echo:
        echo_child()
        return 0
    if args.measure:
        print(json.dumps({k: float(f"{v:.3g}") for k, v in measure().items()}))
        return 0
    costs = Costs(**{k: getattr(args, k) for k in asdict(Costs())})
    big = args.project
    work = Workload(args.seed, args.p if args.p is not None else 0.76 if big else 0.70,
                    args.limit if args.limit is not None else 32 if big else 20, args.ms)
    say = (lambda _s: None) if args.json else (lambda s: print(s, flush=True))
    say(f"tree: seed {work.seed}, p {work.p}, limit {work.limit}, {work.ms:g} ms a "
        f"node: {count(work.seed, 0, 0, work.limit, work.p)} nodes")
    runs = runs_of(args, work, costs, say)
    if args.plot:
        plot(runs, args.plot, f"sleep tree: seed {work.seed}, p {work.p}, limit "
             f"{work.limit}, {work.ms:g} ms a node")
        say(f"plot: {args.plot}")
    for r in runs:
        r.pop("policy_calls")
    if big:
        print(json.dumps({"tree": asdict(work), "costs": asdict(costs), "runs": runs}))
    else:
        print(json.dumps(runs[0] if len(runs) == 1 else {"runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
