"""The root's side of the tree: spawn it, feed it rounds of tasks, collect, stop.

The root is a node without a parent (Algorithm 5.3.1 with the task generator on top):
its pool is filled by the expansion of the user's call; it answers steals that reach it,
and "no more" when its pool is empty.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

from . import protocol as P
from .node import Node
from .stats import Meter


def init_mpi():
    """Import mpi4py, which initializes MPI (an MPI singleton when started by python).

    UCX (MPICH's network layer) warns at disconnect about messages nobody received,
    e.g. a STOP that crossed a spawn-per-batch leaf's last results; that is expected
    when a run ends early, so only UCX errors are shown (the setting reaches every
    spawned process through the environment).
    """
    os.environ.setdefault("UCX_LOG_LEVEL", "error")
    import mpi4py
    mpi4py.rc.threads = False
    from mpi4py import MPI
    return MPI


class RootStop(Exception):
    """A child reported a task failure; ``info`` holds its description."""

    def __init__(self, info: dict):
        super().__init__(info.get("message", ""))
        self.info = info


class Root(Node):
    """The root node: results land here, statistics end here."""

    def take_results(self, results) -> None:
        self.collected.update(results)

    def on_ready(self, payload) -> None:
        here = socket.gethostname()
        for pid, host, role, when in payload:
            if role != "leaf":
                continue
            if host == here:
                self.leaf_pids.append(pid)
            self.ready += 1
            self.last_ready = max(self.last_ready, when)
        if self.ready >= self.leaf_slots and self.startup_end is None:
            self.startup_end = self.last_ready

    def on_error(self, payload) -> None:
        self.errors.append(payload)

    def on_stats_done(self) -> None:
        self.stats_done = True


class RootScheduler:
    """Owns the process tree of one ``Runtime``."""

    def __init__(self, plan, params, settings: dict):
        self.plan = plan                   # stealing.plan.TreeNode rooted at the root
        self.params = params
        self.settings = settings           # leaf_mode, prefetch, remote, batch, batch_s
        self.node = None
        self.job_id = 0
        self.sent_keys: set = set()
        self.started_at = None

    # life cycle ----------------------------------------------------------------
    def start(self) -> None:
        MPI = init_mpi()
        from .waiting import Mailbox
        self.started_at = time.time()
        params = self.params
        config = {
            "params": {"branches": params.branches, "min_procs": params.min_procs,
                       "tasks_per_leaf": params.tasks_per_leaf,
                       "steal_factor": params.steal_factor},
            **self.settings,
            "sys_path": [p for p in sys.path if p],
            "root_pid": os.getpid(), "root_host": socket.gethostname(),
        }
        meter = Meter("root", self.plan.cluster)
        node = Root(MPI, Mailbox(MPI), meter, params, config, parent=None)
        node.collected, node.ready, node.startup_end, node.last_ready = {}, 0, None, 0.0
        node.leaf_pids = []
        node.leaf_slots = len(self.plan.leaves())
        node.stats_done = False
        self.node = node
        node.spawn_children(self.plan.to_dict())

    @property
    def startup_s(self) -> float | None:
        n = self.node
        if n is None or n.startup_end is None:
            return None
        return n.startup_end - self.started_at

    def begin_job(self) -> None:
        self.job_id += 1
        self.node.errors = []

    def solve(self, payloads: list, table: dict, local_table: dict | None = None) -> dict:
        """Solve one round of tasks: ``{task id: pickled result}``."""
        self.open_round()
        self.feed(payloads, table)
        return self.close_round(len(payloads), local_table)

    def open_round(self, streaming: bool = False) -> None:
        """A new round; with ``streaming`` its tasks come in several ``feed`` calls and
        no leaf is told "no more" before ``close_round``."""
        self.node.collected = {}
        self.node.feeding = streaming

    def feed(self, payloads: list, table: dict) -> None:
        """Tasks of the open round, possibly while the root is still finding more: the
        functions they need go first, then the tasks; waiting messages are answered."""
        node = self.node
        new = {k: v for k, v in table.items() if k not in self.sent_keys}
        if new or self.job_id != getattr(self, "_announced", None):
            node.start_job((self.job_id, new))
            self.sent_keys.update(new)
            self._announced = self.job_id
        node.add_tasks(payloads)
        while self._step(timeout=0.0):
            pass

    def close_round(self, total: int, local_table: dict | None = None) -> dict:
        """Wait until the round's ``total`` results are in.

        Until every leaf is ready (spawned interpreters start cold), the root itself
        solves tasks from the tail of its pool with ``local_table``'s functions, checking
        for messages between two tasks; afterwards it only schedules.
        """
        node = self.node
        if node.feeding:
            node.feeding = False
            node.distribute()
        while len(node.collected) < total:
            if local_table and node.startup_end is None and node.pool:
                got = node.mailbox.poll(node.comms)
                if got is None:
                    self._run_here(node.pool.pop(), local_table)
                    continue
                index, source, tag, payload = got
                node.handle_child(node.comms[index], source, tag, payload)
                if node.errors:
                    raise RootStop(node.errors[0])
                continue
            self._step()
        return node.collected

    def _run_here(self, payload, local_table) -> None:
        from dac.execution import describe_failure, run_task_payload
        rec = self.node.meter.record
        t0 = time.perf_counter()
        try:
            tid, blob = run_task_payload(payload, local_table)
        except Exception as exc:                            # noqa: BLE001
            import traceback
            info = describe_failure(payload, exc, traceback.format_exc())
            info["where"] = "the root, helping while the leaves start"
            raise RootStop(info) from exc
        rec["busy_s"] += time.perf_counter() - t0
        rec["tasks"] += 1
        self.node.collected[tid] = blob

    def _step(self, timeout=None) -> bool:
        node = self.node
        if timeout == 0.0:
            got = node.mailbox.poll(node.comms)
        else:
            got = node.mailbox.wait(node.comms, timeout=timeout)   # a run is under way
        if got is None:
            return False
        index, source, tag, payload = got
        node.handle_child(node.comms[index], source, tag, payload)
        if node.errors:
            raise RootStop(node.errors[0])
        return True

    def end_job(self) -> list:
        """Per-process statistics of the job (root first)."""
        node = self.node
        node.stats_done = False
        node.request_stats()
        while not node.stats_done:
            self._step()
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
        node.errors = []
        pids = [p for c in node.children for p in c.pids]
        leaves = list(node.leaf_pids)
        try:
            node.begin_stop()
            start = time.monotonic()
            deadline = start + timeout
            termed = False
            while node.stopping > 0 and time.monotonic() < deadline:
                if not termed and time.monotonic() > start + grace:
                    termed = True
                    _signal(leaves, signal.SIGTERM)
                got = node.mailbox.wait(node.comms, timeout=0.2)
                if got is not None:
                    index, source, tag, payload = got
                    if tag == P.BYE:
                        node.stopping -= 1
                        pids.extend(payload)
                    elif tag == P.READY:
                        pids.extend(entry[0] for entry in payload)
            clean = node.stopping == 0
            if clean:
                node.finish_stop()
        except Exception:                                   # noqa: BLE001
            clean = False
        if not clean:
            _kill(pids)
        _wait_gone(pids, 5.0)


def _alive(pid: int) -> bool:
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _kill(pids) -> None:
    _signal(pids, signal.SIGKILL)


def _signal(pids, sig) -> None:
    for pid in set(pids):
        if _alive(pid):
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def _wait_gone(pids, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in set(pids)) and time.monotonic() < deadline:
        time.sleep(0.01)
