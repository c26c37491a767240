"""A router process: a node between the root and the leaves (Algorithm 5.3.1)."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from stealing.observe.stats import Meter, startup_steps
from stealing.roles.node import Node
from stealing.roles.status import Start
from stealing.transport import protocol as P
from stealing.transport.mailbox import IDLE_SLEEP, MAX_SLEEP, Mailbox

if TYPE_CHECKING:
    from mpi4py.MPI import Intercomm


class Router(Node):
    """Serves its children's steals from its pool before asking its parent."""

    def on_stats_done(self) -> None:
        self.send_up(P.STATS, P.Stats(self.collected_stats()))
        self.stats_wait = None


def serve(MPI: ModuleType, parent: Intercomm, init: P.Init, start: Start, mailbox: Mailbox,
          watchdog: Callable[[], None]) -> None:
    """Spawn the subtree of ``init.plan`` and route tasks until told to stop."""
    plan = init.plan or {}
    meter = Meter("router", init.cluster)
    node = Router(MPI, mailbox, meter, init, parent=parent)
    node.policy.own_quota = max(1, plan["tasks"])   # what it asks for at least
    if init.latency_ms:
        mailbox.set_delay(parent, init.latency_ms / 1000.0)
    node.spawn_children(plan)
    meter.keep(startup=startup_steps(start.marks, init.spawned_at, time.time()),
               started_at=round(time.time(), 3))
    if init.joined:
        meter.keep(joined=init.joined)
    meter.keep(path=list(init.path))
    rec = meter.record
    node.send_up(P.READY, P.Ready([P.Process(rec["pid"], rec["host"], "router",
                                             time.time(), start.shm, start.monitor)]))
    while node.stopping != 0:
        got = mailbox.wait([parent] + node.comms, timeout=node.policy.retry_in(),
                           on_idle=watchdog,
                           max_sleep=MAX_SLEEP if node.busy() else IDLE_SLEEP)
        if got is None:
            node.retry_if_due()
            continue
        index, source, tag, msg = got
        if index > 0:
            node.handle_child(node.comms[index - 1], source, tag, msg)
        else:
            _from_parent(node, tag, msg)
    pids = node.subtree_pids()
    node.finish_stop()
    node.send_up(P.BYE, P.Bye(pids))


def _from_parent(node: Router, tag: int, msg: Any) -> None:
    """React to one message from the parent (``msg``: the payload ``tag`` carries,
    ``protocol.PAYLOADS``)."""
    if tag == P.TASKS:
        if node.timeline is not None and node.timeline.asked is not None:
            node.timeline.answer("remote", len(msg.tasks))
        node.add_tasks(msg.tasks)
    elif tag == P.NOMORE:
        if node.timeline is not None and node.timeline.asked is not None:
            node.timeline.answer("remote-failed", 0)
        node.on_nomore()
    elif tag == P.SPLIT:
        node.on_split_request(msg)
    elif tag == P.RETURN:
        node.on_returned(msg)
    elif tag == P.JOB:
        node.start_job(msg)
    elif tag == P.GROW:
        node.grow(msg.count, msg.host, node.meter.cluster)
    elif tag == P.STATS_REQ:
        node.request_stats()
    elif tag == P.STOP:
        node.begin_stop()
    else:
        raise RuntimeError(f"router: unexpected {P.name(tag)} from parent")
