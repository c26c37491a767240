"""The root's side of the tree: spawn it, feed it tasks, collect results, stop.

The root is a node without a parent (Algorithm 5.3.1 with the task generator on top):
its pool is filled by the expansion of the user's call; it answers steals that reach it,
and "no more" when its pool is empty.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import TYPE_CHECKING

from stealing.exceptions import MAX_FRAMES, DacError, LostProcessError, last_frames
from stealing.host.losses import (
    describe_loss,
    make_run_dir,
    note_shm,
    read_lost_records,
)
from stealing.host.procs import alive, processes_of_run, signal_all, wait_gone
from stealing.host.shm import own_shm
from stealing.host.watch import Watch
from stealing.observe.output import Printer, prefix_default
from stealing.observe.stats import Meter
from stealing.observe.trace import open_trace
from stealing.roles.executor import TaskExecutor
from stealing.roles.node import Node
from stealing.transport import protocol as P
from stealing.transport.bell import Bell, bell_name
from stealing.transport.mailbox import Mailbox, crowded
from stealing.transport.segments import Segments, sweep
from stealing.transport.world import ASSIGN
from stealing.transport.world import current as launcher_ranks
from stealing.transport.mpi import (  # noqa: F401  (init_mpi: for callers)
    check_reach,
    init_mpi,
    mark_broken,
    sweep_shm_after,
)
from stealing.tree.plan import StealParams, TreeNode
from stealing.tree.ranks import assign_ranks
from stealing.tree.tasks import Blob, Result, Task, TaskId, is_split
from stealing.tree.topology import is_this_machine

if TYPE_CHECKING:
    from stealing.roles.membership import Child

LOST_CHECK_S = 0.2      # how often a waiting root looks for lost processes


class Root(Node):
    """The root node: results land here, statistics end here. ``owner`` is the
    ``RootScheduler`` that drives it: the watch over its host, where output goes, the
    names of lost tasks' calls, the check for lost processes before a spawn."""

    def __init__(self, MPI: ModuleType, mailbox: Mailbox, meter: Meter, init: P.Init,
                 owner: RootScheduler, leaf_slots: int) -> None:
        super().__init__(MPI, mailbox, meter, init, parent=None)
        self.owner = owner
        self.watch = owner.watch
        # results that came since the caller last took
        self.collected: dict[TaskId, Blob] = {}
        self.ready = 0                  # leaves that said READY
        self.startup_end: float | None = None   # when the last of them did
        self.last_ready = 0.0
        self.leaf_pids: list[int] = []  # leaves on this host
        self.processes: list[dict[str, str | int]] = []     # {role, pid, host} of every READY
        self.shm: set[str] = set()      # MPICH segments of the tree on this host
        self.leaf_slots = leaf_slots
        self.stats_done = False

    def before_spawn(self) -> None:
        self.owner.check_lost_now()

    def take_results(self, results: Iterable[Result]) -> None:
        self.collected.update(results)

    def on_ready(self, msg: P.Ready) -> None:
        here = socket.gethostname()
        for p in msg.processes:
            self.processes.append({"role": p.role, "pid": p.pid, "host": p.host})
            self.watch.ready(p.role, p.pid, p.host, p.monitor)
            if p.host == here:
                self.shm.update(p.shm)
            if p.role != "leaf":
                continue
            if p.host == here:
                self.leaf_pids.append(p.pid)
            self.ready += 1
            self.last_ready = max(self.last_ready, p.time)
        if self.ready >= self.leaf_slots and self.startup_end is None:
            self.startup_end = self.last_ready

    def on_error(self, msg: P.Failure) -> None:
        err = msg.error
        if msg.payload is not None:
            # only a task that lost its process too often comes with its payload
            assert isinstance(err, LostProcessError)
            err = self.owner.name_call(msg.payload, err)
        self.errors.append(err)

    def on_stats_done(self) -> None:
        self.stats_done = True

    def on_output(self, msg: P.Output) -> None:
        self.owner.output(msg)


class RootScheduler:
    """Owns the process tree of one ``Runtime`` (a ``Scheduler``)."""

    attached = False
    _announced: int                        # the job whose JOB went down (set by feed)

    def __init__(self, plan: TreeNode, params: StealParams, settings: P.RunSettings,
                 executor: TaskExecutor) -> None:
        self.plan = plan                   # stealing.tree.plan.TreeNode rooted at the root
        self.params = params
        self.settings = settings           # the run's, for every process of the tree
        self.executor = executor           # runs tasks here while the leaves start
        self.node: Root | None = None
        self.job_id = 0
        self.sent_keys: set = set()
        self.started_at: float | None = None
        self.run_dir: str | None = None    # where monitors record lost processes
        self.lost: dict | None = None      # the record of the first lost process
        # P.Job.env: an attached script's (warm tree)
        self.job_env: P.ScriptEnv | None = None
        self.job_timeline = False          # P.Job.timeline: record what processes do
        self._next_check = 0.0
        # grow/shrink asked from another thread: (kind, count, host, cluster)
        self._changes: deque[tuple[str, int, str | None, str | None]] = deque()
        # (leaves at work, leaves, steals answered here), for dac.progress's thread
        self.view: tuple[int, int, int] | None = None
        self._view_due = 0.0
        # where the lines tasks print go (stealing.observe.output): written here, or passed
        # on by a warm tree's server to the script that holds the tree
        self.printer = Printer(prefix_default(), socket.gethostname())
        self.watch = Watch()               # the tree's monitors, MPI's process manager
        self.output: Callable[[P.Output], None] = self.printer.write

    # life cycle ----------------------------------------------------------------
    def start(self) -> None:
        away = {n.host for n in self.plan.walk() if not is_this_machine(n.host)}
        MPI = init_mpi(this_host_only=not away)
        check_reach(away)
        self.started_at = time.time()
        self.run_dir = make_run_dir()
        leaves = len(self.plan.leaves())
        tree = P.TreeInfo(os.getpid(), socket.gethostname(), self.run_dir, leaves,
                          self.params)
        script = P.ScriptEnv(tuple(p for p in sys.path if p), tuple(sys.argv),
                             recursion_limit=sys.getrecursionlimit())
        init = P.Init(self.settings, tree, script, role="root",
                      cluster=self.plan.cluster)
        mailbox = Mailbox(MPI)
        mailbox.crowded = crowded(leaves)
        mailbox.ring_waits = True
        mailbox.trace = open_trace("root")
        mailbox.bell = Bell.open(bell_name(os.getpid(), ()))
        mailbox.segments = Segments(os.getpid())
        sweep()                             # segments of trees killed before their end
        mailbox.alarms = self.watch.alarms
        self.node = node = Root(MPI, mailbox, Meter("root", self.plan.cluster), init, self,
                                leaves)
        self._assign_ranks()
        node.spawn_children(self.plan.to_dict())
        self.watch.note_managers()
        note_shm(self.run_dir, own_shm())       # MPI made the root's own segment now

    def _assign_ranks(self) -> None:
        """Under a launcher: tell each rank its place in the plan (it links to its
        parent next); the root links to its own groups as it would spawn them."""
        ranks = launcher_ranks()
        if ranks is None:
            return
        if ranks.busy:
            raise DacError("under a launcher the ranks serve one tree at a time, and "
                           "another Runtime of this script holds them: close it first")
        down, assignments = assign_ranks(self.plan, ranks.hosts)
        ranks.down = deque(down)
        ranks.send_all(assignments, ASSIGN)
        ranks.busy = True

    @property
    def startup_s(self) -> float | None:
        n = self.node
        if n is None or n.startup_end is None:
            return None
        assert self.started_at is not None      # set by start, before the node
        return n.startup_end - self.started_at

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Announce an empty job, so that every persistent leaf reports READY, and
        wait until all have (a warm tree lends itself only once they have); False
        if ``timeout`` passed first. Spawn-per-batch leaves start with each batch:
        there is nothing to wait for."""
        if self.settings.leaf_mode != "persistent":
            return True
        node = self._live()
        self.begin_job()
        self.feed([], {})
        end = None if timeout is None else time.monotonic() + timeout
        while node.startup_end is None:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return False
            self._step(timeout=left)
        self.end_job()
        return True

    def processes(self) -> list[dict[str, str | int]]:
        """``{role, pid, host}`` of every process of the tree that said READY."""
        node = self.node
        root: dict[str, str | int] = {"role": "root", "pid": os.getpid(),
                                      "host": socket.gethostname()}
        return [root] + ([p for p in node.processes if p["pid"] not in node.departed]
                         if node is not None else [])

    def begin_job(self) -> None:
        self.job_id += 1
        self._live().errors = []
        self.printer.new_run()

    def open_stream(self) -> None:
        """The first tasks of a job come in several ``feed`` calls while the root is
        still finding them: no leaf is told "no more" before ``close_stream`` (an idle
        leaf's request waits for the next tasks). Tasks fed after ``close_stream``
        (found by a later pass over the top) reach leaves told "no more" as well: a
        leaf that holds nothing is given tasks as they come, before a busy one."""
        node = self._live()
        node.collected = {}
        node.policy.feeding = True

    def feed(self, payloads: list[Task], table: dict) -> None:
        """More tasks, possibly while the root is still finding others: the functions
        they need go first, then the tasks; waiting messages are answered."""
        node = self._live()
        new = {k: v for k, v in table.items() if k not in self.sent_keys}
        if new or self.job_id != getattr(self, "_announced", None):
            node.start_job(P.Job(self.job_id, new, self.job_env, self.job_timeline))
            self.sent_keys.update(new)
            self._announced = self.job_id
        node.add_tasks(payloads)
        while self._step(timeout=0.0):
            pass

    def wait_results(self, wanted: Iterable[TaskId] | None = None,
                     local_table: dict | None = None,
                     timeout: float | None = None) -> dict[TaskId, Blob]:
        """Wait until the result of a task in ``wanted`` (task ids; None: any task) is
        in, or ``timeout`` seconds have passed, read every message already waiting, and
        hand over the results that came since the last call: ``{task id: pickled
        result}`` (empty after a timeout with none).

        Until every leaf is ready (spawned interpreters start cold), the root itself
        solves tasks from the tail of its pool with ``local_table``'s functions, checking
        for messages between two tasks; afterwards it only schedules.
        """
        node = self._live()
        end = None if timeout is None else time.monotonic() + timeout
        while not (node.collected and (wanted is None or
                                       any(t in node.collected for t in wanted))):
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                break
            if local_table and node.startup_end is None and node.policy.pool \
                    and not is_split(node.policy.pool[-1][0]):
                if not self._step(timeout=0.0):     # no message: a task here
                    self._run_here(node.policy.pool.pop(), local_table)
                continue
            self._step(timeout=left)
        while self._step(timeout=0.0):
            pass
        got, node.collected = node.collected, {}
        return got

    def close_stream(self) -> None:
        """The root found what it can for now: idle leaves may be told "no more"."""
        node = self._live()
        if node.policy.feeding:
            node.apply(node.policy.stop_feeding())

    def _run_here(self, task: Task, local_table: dict) -> None:
        """Solve ``task`` here (the root helps while the leaves start)."""
        node = self._live()
        rec = node.meter.record
        t0 = time.perf_counter()
        _tid, payload = task
        try:
            tid, blob = self.executor.run_task(payload, local_table)
        except Exception as exc:                            # noqa: BLE001
            raise self.executor.task_failure(
                payload, exc, traceback.format_exc(),
                where="the root, helping while the leaves start") from exc
        spent = time.perf_counter() - t0
        rec["busy_s"] += spent
        rec["tasks"] += 1
        if node.timeline is not None:
            node.timeline.span("busy", t0, spent)
        node.collected[tid] = blob

    # a tree that grows and shrinks ---------------------------------------------
    def grow(self, count: int, host: str | None = None, wait_s: float = 0.0,
             cluster: str | None = None) -> None:
        """Add ``count`` leaves now, on ``host`` (None: this machine), under their
        cluster's router: ``cluster`` names it, else the first cluster of the plan with
        a leaf on that host; under the root where the root is that cluster's node (one
        cluster) or no cluster has the host. Their statistics say ``joined: "grow"``
        and when they started. Call it from the thread that drives the tree (between
        runs), else ``ask_change``. ``wait_s``: wait up to that long for them to say
        READY (``dac grow`` answers once they have)."""
        node = self._live()
        ready = node.ready
        router = self._cluster_router(host, cluster)
        if router is None:
            node.grow(count, host, self.plan.cluster)
        else:           # it spawns them; its share of the root's pool grows with them
            node.send(router.comm, router.rank, P.GROW, P.Grow(count, host))
            node.policy.children[router.index].procs += count
        self.watch.note_managers()
        node.leaf_slots += count
        end = time.monotonic() + wait_s
        while node.ready < ready + count and time.monotonic() < end:
            self._step(timeout=0.1)

    def _cluster_router(self, host: str | None, cluster: str | None) -> Child | None:
        """The root's child routing the cluster that new leaves on ``host`` join
        (``grow``), or None: the root itself is that cluster's node."""
        if cluster is None:
            here = [leaf.cluster for leaf in self.plan.leaves()
                    if (is_this_machine(leaf.host) if host is None else leaf.host == host)]
            cluster = here[0] if here else self.plan.cluster
        self.check_cluster(cluster)
        if cluster == self.plan.cluster:
            return None
        node = self._live()
        for child in node.children:
            if child.role == "router" and child.spec.get("cluster") == cluster \
                    and child.comm is not None and not node.policy.children[child.index].lost:
                return child
        return None

    def check_cluster(self, cluster: str | None) -> None:
        """Refuse, with the tree's cluster names, a ``grow`` for a cluster it lacks."""
        names = list(dict.fromkeys(leaf.cluster for leaf in self.plan.leaves()))
        if cluster is not None and cluster not in names:
            raise DacError(f"grow: the tree has no cluster {cluster!r} (its clusters: "
                           f"{', '.join(names)}); nothing changed")

    def shrink(self, count: int) -> int:
        """Let ``count`` leaves with links of their own go (the newest first, added
        ones before the tree's own under fault tolerance); returns how many go. More
        than that is refused whole (``check_shrink``)."""
        self.check_shrink(count)
        node = self._live()
        going = node.shrink(count)
        self.watch.forget(p for c in going for p in c.pids)
        node.leaf_slots -= len(going)
        return len(going)

    def check_shrink(self, count: int) -> None:
        """Refuse, with what is possible, a shrink of more leaves than can go."""
        node = self._live()
        can = len(node.shrinkable())
        if count > can:
            leaves = sum(1 for c in node.children if c.role in ("leaf", "slot")
                         and not c.leaving and c.comm is not None)
            raise DacError(f"shrink {count}: only {can} of the tree's {leaves} leaves "
                           f"can be let go (those added by grow; every leaf under "
                           f"fault tolerance, which gives each its own link); nothing "
                           f"changed")

    def ask_change(self, kind: str, count: int, host: str | None = None,
                   cluster: str | None = None) -> None:
        """``grow`` or ``shrink`` from another thread while a run drives the tree:
        done at the root's next step (MPI is used by one thread at a time). A cluster
        the tree lacks is refused here, in the caller's thread, not in the run."""
        if kind == "grow":
            self.check_cluster(cluster)
        self._changes.append((kind, count, host, cluster))

    def _publish_view(self) -> None:
        """What ``dac.progress`` shows of the tree, replaced whole (another thread
        reads it): leaves in subtrees holding work, leaves, steals answered here."""
        policy = self._live().policy
        live = [c for c in policy.children if not c.lost]
        busy = sum(c.procs for c in live if c.outstanding > 0)
        steals = sum(policy.counters[k] for k in ("steals_local", "steals_after_remote",
                                                  "steals_split"))
        self.view = (busy, sum(c.procs for c in live), steals)
        self._view_due = time.monotonic() + 0.2

    def _on_idle(self) -> None:
        self.check_lost()
        if self._changes:
            self._apply_changes()

    def _apply_changes(self) -> None:
        while self._changes:
            kind, count, host, cluster = self._changes.popleft()
            if kind == "grow":
                self.grow(count, host, cluster=cluster)
            else:
                self.shrink(count)

    def _step(self, timeout: float | None = None) -> bool:
        """Carry out one message (False: none came within ``timeout``; None: wait
        for one); asked changes and lost processes are looked after first."""
        node = self._live()
        self.check_lost()
        if self._changes:
            self._apply_changes()
        retry = node.policy.retry_in()
        if timeout == 0.0:
            got = node.mailbox.poll(node.comms)
            if got is None:
                node.flush_returns()
        else:
            wait = retry if timeout is None else timeout if retry is None \
                else min(timeout, retry)
            got = node.mailbox.wait(node.comms, timeout=wait,   # a run is under way
                                    on_idle=self._on_idle, idle_every=LOST_CHECK_S)
        if got is None:
            node.retry_if_due()
            return False
        index, source, tag, msg = got
        node.handle_child(node.comms[index], source, tag, msg)
        if time.monotonic() >= self._view_due:
            self._publish_view()
        if node.errors:
            raise node.errors[0]
        return True

    def name_call(self, payload: Blob, err: LostProcessError) -> LostProcessError:
        """``err`` (a ``LostProcessError`` a node reported) naming the task's call,
        which only the root can read from its payload."""
        call = self.executor.task_failure(payload, err, "", err.where).task
        return LostProcessError(err.role, err.pid, err.host, err.how, err.exit_code,
                                err.signal, task=call, traceback=err.remote_traceback)

    def check_lost(self) -> None:
        """Raise ``LostProcessError`` if a monitor recorded a lost process (at most every
        ``LOST_CHECK_S``): the earliest record is the process that died first; the
        others are MPI's clean-up of the job after it. Under fault tolerance a lost
        process is its parent's business (``Node.lose_child``): nothing is raised."""
        now = time.monotonic()
        if self.run_dir is None or self.settings.fault_tolerant:
            return
        seen = self.watch.look()            # what no monitor could record (cheap)
        if seen is None and now < self._next_check:
            return
        self._next_check = now + LOST_CHECK_S
        records = read_lost_records(self.run_dir)
        if not records:
            if seen is None:
                return
            records = [seen]
        first = records[0]
        self.lost = first
        code = first["code"]
        raise LostProcessError(first["role"], first["pid"], first["host"],
                               describe_loss(first),
                               exit_code=code if code >= 0 else None,
                               signal=-code if code < 0 else None,
                               traceback=last_frames(str(first.get("traceback", "")),
                                                     MAX_FRAMES))

    def end_job(self) -> list[dict]:
        """Per-process statistics of the job (root first)."""
        node = self._live()
        node.stats_done = False
        node.request_stats()
        while not node.stats_done:
            self._step()
        sweep(os.getpid())      # segments of messages never unpickled (a task failed)
        return node.collected_stats()

    def stop(self, grace: float = 1.0, timeout: float = 10.0) -> None:
        """Stop every process of the tree.

        STOP goes down the tree; a leaf answers between two tasks. Leaves of this host
        still busy after ``grace`` seconds get SIGTERM, which ends their task (a Python
        task at once, a compiled one when it returns); what is left after ``timeout``
        is killed.
        """
        node = self.node
        if node is None:
            return
        self.node = None
        try:
            if self.lost is None:
                self.check_lost_now()
        except LostProcessError:
            pass
        if self.lost is not None:
            self._abandon(node)
        elif not self._stop_tree(node, grace, timeout) or node.startup_end is None \
                or node.spawn_cut:
            self._end_strays()
        self.watch.close()
        if node.mailbox.bell is not None:   # its name is the next tree's in this process
            node.mailbox.bell.close()
            node.mailbox.bell = None
        sweep(os.getpid())
        _remove_dir(self.run_dir)

    def check_lost_now(self) -> None:
        self._next_check = 0.0
        self.check_lost()

    def _live(self) -> Root:
        """The tree's root node: every call between ``start`` and ``stop`` needs it."""
        assert self.node is not None, "the tree is not started (or was stopped)"
        return self.node

    def _end_strays(self) -> None:
        """The tree did not end cleanly, or was still starting (a Ctrl-C in the middle
        of a spawn): processes of this run the tree never heard of yet are ended, and
        the MPI shared memory that killed or starting processes could not unlink goes
        once nobody maps it."""
        strays = processes_of_run(self.run_dir) if self.run_dir is not None else []
        # (after a clean stop only a cut spawn's processes are left; a monitor may
        # still be ending its worker's BYE: give them a moment)
        wait_gone(strays, 2.0)
        strays = [p for p in strays if alive(p)]
        if not strays:
            sweep_shm_after(self.started_at)
            return
        signal_all(strays, signal.SIGKILL)
        wait_gone(strays, 5.0)
        # MPICH counts them lost: no MPI_Finalize (it would crash), no spawn again
        mark_broken(f"{len(strays)} processes of a tree stopped while it was starting",
                    since=self.started_at)

    def _abandon(self, node: Root) -> None:
        """After a loss MPICH ends the job: no message can go down the tree any more.
        End what is left of the processes dac started on this host, remove their
        shared memory, and never finalize or spawn again in this process."""
        pids = [p for c in node.children for p in c.pids] + list(node.leaf_pids) + \
            self.watch.pids()
        if self.run_dir is not None:        # and those a spawn under way was starting
            pids += processes_of_run(self.run_dir)
        signal_all(pids, signal.SIGKILL)
        wait_gone(pids, 5.0)
        lost = self.lost
        assert lost is not None                 # (only after a loss)
        mark_broken(f"{lost['role']} pid {lost['pid']} on {lost['host']} "
                    f"({describe_loss(lost)})", node.shm, since=self.started_at)

    def _stop_tree(self, node: Root, grace: float, timeout: float) -> bool:
        """STOP down the tree and wait for every BYE; SIGTERM to this host's leaves
        after ``grace``, SIGKILL to what is left after ``timeout`` or a failure.
        True when every process said BYE and none needed a signal."""
        node.errors = []
        pids = [p for c in node.children for p in c.pids]
        leaves = list(node.leaf_pids)
        termed = False
        try:
            node.begin_stop()
            assert node.stopping is not None        # begin_stop counts the BYEs due
            start = time.monotonic()
            deadline = start + timeout
            while node.stopping > 0 and time.monotonic() < deadline:
                if not termed and time.monotonic() > start + grace:
                    termed = True
                    signal_all(leaves, signal.SIGTERM)
                got = node.mailbox.wait(node.comms, timeout=0.2)
                if got is not None:
                    index, source, tag, msg = got
                    if tag == P.BYE:
                        node.stopping -= 1
                        pids.extend(msg.pids)
                    elif tag == P.READY:
                        pids.extend(p.pid for p in msg.processes)
                    elif tag == P.OUTPUT:
                        node.on_output(msg)
                    elif tag == P.LOST:
                        node.lose_child(node.child_of(node.comms[index], source))
            clean = node.stopping == 0
            if clean:
                node.finish_stop()
        except Exception:                                   # noqa: BLE001
            clean = False
        if not clean:
            signal_all(pids, signal.SIGKILL)
        ranks = launcher_ranks()
        if ranks is None:
            wait_gone(pids, 5.0)
        else:                   # a launcher's ranks live on, for the next tree
            ranks.busy = False
        return clean and not termed


def _remove_dir(path: str | None) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)
