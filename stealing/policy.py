"""The thesis' steal rules (Algorithm 5.3.1) as plain data: events in, decisions out.

A ``StealPolicy`` holds what a parent process knows of the work below it: the pool of
undistributed tasks, how much each child holds and wants, whether a request to its own
parent is outstanding, and the steal counters. Its methods take the events a node sees
(tasks from the parent, a child's results with its request, "no more" from the parent,
a new round) and return the messages to send as a list of actions (``Give``, ``Refuse``,
``AskParent``, ``SendResults``) in the order they must go. Nothing here sends, spawns or
imports MPI, and the only clock is the injectable ``now``, so the rules are tested alone
(``tests/test_policy.py``); ``stealing.node.Node`` applies the actions over MPI.

The rules:

* at the start of a round every idle child wants its initial share (its ``quota``:
  ``tasks_per_leaf`` for a leaf, ``tasks_per_branch(procs)`` for a router, Figure 5.3);
* a child's returned results are its steal request; it is served from the pool (a
  *local* steal) or, when the pool is empty, waits for a request to the parent (a
  *remote* steal, one outstanding at a time); when the parent has nothing left either
  the answer is "no more" (a *failed* steal), unless the root is still feeding tasks;
* with ``remote="prefetch"`` a node asks its parent before its pool runs dry, at a
  low-water mark sized by the measured round trip; with ``"blocking"`` only when empty;
* results go up with the node's own requests, or in one message when the subtree is idle.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

STEAL_COUNTERS = ("steals_local", "steals_remote", "steals_after_remote", "steals_failed")


@dataclass(frozen=True)
class Give:
    """Send child number ``child`` these tasks (a TASKS message)."""
    child: int
    tasks: list


@dataclass(frozen=True)
class Refuse:
    """Tell child number ``child`` "no more" (its steal request failed)."""
    child: int


@dataclass(frozen=True)
class AskParent:
    """A remote steal: send the parent the ``results`` gathered so far and ask for
    ``amount`` tasks."""
    results: list
    amount: int


@dataclass(frozen=True)
class SendResults:
    """The subtree ran dry: send the parent its ``results``, asking for nothing."""
    results: list


class ChildShare:
    """What the policy knows of one child: its size and the work it holds or wants."""

    __slots__ = ("role", "procs", "quota", "outstanding", "want", "asked", "waited",
                 "last_want")

    def __init__(self, role: str, procs: int, quota: int):
        self.role = role        # "router", "leaf", or "slot" (a spawn-per-batch leaf)
        self.procs = procs
        self.quota = quota      # its initial share of a round
        self.outstanding = 0    # tasks given and not yet returned
        self.want = 0           # tasks it is waiting for
        self.asked = False      # the want comes from a steal request
        self.waited = False     # that request had to wait for the node's parent
        self.last_want = quota  # size of its latest request

    def clear_want(self) -> None:
        self.want, self.asked, self.waited = 0, False, False


class StealPolicy:
    """Pool, per-child accounting, the request to the parent and the steal counters."""

    def __init__(self, steal_factor: float, has_parent: bool, remote: str = "prefetch",
                 batch_s: float = 0.05, own_quota: int = 1, now=time.monotonic):
        self.steal_factor = steal_factor
        self.has_parent = has_parent
        self.prefetch_remote = remote == "prefetch"
        self.batch_s = float(batch_s)
        self.own_quota = own_quota      # the share this node's parent gives it
        self.now = now
        self.children: list[ChildShare] = []
        self.pool: deque = deque()
        self.results: list = []         # results waiting to go up (routers)
        self.exhausted = not has_parent  # the parent said "no more" (the root: always)
        self.requested = False          # a request to the parent is outstanding
        self.feeding = False            # the root is still adding tasks to this round
        self.stopped = False            # the tree is stopping: give nothing more
        self.rtt = 0.0                  # measured round trip of a remote steal (s)
        self.asked_at = None
        self.counters: dict = {}
        self.reset_counters()

    def add_child(self, role: str, procs: int, quota: int) -> int:
        """A new child; returns its number, which actions name."""
        self.children.append(ChildShare(role, procs, quota))
        return len(self.children) - 1

    def reset_counters(self) -> None:
        """A new job: the steal counters start again from zero."""
        self.counters = dict.fromkeys(STEAL_COUNTERS, 0)

    # events --------------------------------------------------------------------
    def begin_round(self) -> None:
        """Every idle child wants its initial share (Figure 5.3 quotas)."""
        for c in self.children:
            if c.outstanding == 0 and c.want == 0:
                c.want, c.asked, c.waited = c.quota, False, False

    def on_tasks(self, tasks) -> list:
        """Tasks from the parent (or the root's expansion); idle children get a share."""
        self.note_answer()
        self.pool.extend(tasks)
        self.begin_round()
        self.requested = False
        if self.has_parent:
            self.exhausted = False
        return self.distribute()

    def on_nomore(self) -> list:
        """The parent has nothing left: waiting children are refused."""
        self.note_answer()
        self.requested = False
        self.exhausted = True
        return self.distribute()

    def child_returned(self, k: int, count: int) -> None:
        """Child ``k`` returned ``count`` results."""
        self.children[k].outstanding -= count

    def child_wants(self, k: int, want: int) -> list:
        """Child ``k``'s steal request for ``want`` tasks (0: none) after its results."""
        if want:
            c = self.children[k]
            c.want, c.asked, c.waited = want, True, False
            c.last_want = want
        return self.distribute()

    def on_child_results(self, k: int, count: int, want: int) -> list:
        """Child ``k`` returned ``count`` results and asks for ``want`` more."""
        self.child_returned(k, count)
        return self.child_wants(k, want)

    def keep_results(self, results) -> None:
        """Results from below that go up with the next message to the parent."""
        self.results.extend(results)

    def stop_feeding(self) -> list:
        """The root found every task of the round: "no more" may now be said."""
        self.feeding = False
        return self.distribute()

    def stop(self) -> None:
        self.stopped = True

    # decisions -----------------------------------------------------------------
    def distribute(self) -> list:
        """Give waiting children tasks, ask upwards, or say "no more"."""
        out: list = []
        if self.stopped:
            return out
        wanting = [k for k, c in enumerate(self.children) if c.want > 0]
        if wanting and self.pool:
            total_want = sum(self.children[k].want for k in wanting)
            avail = len(self.pool)
            for k in wanting:
                if not self.pool:
                    break
                c = self.children[k]
                n = c.want if avail >= total_want else max(1, avail * c.want // total_want)
                if c.asked:     # near the end, no child takes more than its share
                    n = min(n, max(1, -(-len(self.pool) * c.procs // self.total_procs)))
                out.append(self._give(k, min(n, len(self.pool))))
            wanting = [k for k in wanting if self.children[k].want > 0]
        if wanting:
            if not self.exhausted:
                for k in wanting:
                    c = self.children[k]
                    c.waited = c.asked
                self._ask_parent(out)
            elif not self.feeding:          # more tasks may still come: let them wait
                for k in wanting:
                    self._refuse(k, out)
        if not self.exhausted and len(self.pool) < self.low_water():
            self._ask_parent(out)
        self._maybe_go_idle(out)
        return out

    def _give(self, k: int, n: int) -> Give:
        c = self.children[k]
        if c.asked and c.role != "router":      # a leaf's steal request is answered
            self.counters["steals_after_remote" if c.waited else "steals_local"] += 1
        tasks = [self.pool.popleft() for _ in range(n)]
        c.clear_want()
        c.outstanding += n
        return Give(k, tasks)

    def _refuse(self, k: int, out: list) -> None:
        c = self.children[k]
        if c.asked:
            self.counters["steals_failed"] += 1
            out.append(Refuse(k))
        c.clear_want()

    def _ask_parent(self, out: list) -> None:
        if self.requested or not self.has_parent:
            return
        self.requested = True
        self.asked_at = self.now()
        counters = self.counters
        counters["steals_remote"] += 1
        # how full the pool still was: at most the low-water mark (prefetch), 0 (blocking)
        counters["remote_pool_max"] = max(counters.get("remote_pool_max", 0),
                                          len(self.pool))
        counters["low_water"] = self.low_water()
        results, self.results = self.results, []
        out.append(AskParent(results, self.ask_amount()))

    def _maybe_go_idle(self, out: list) -> None:
        """A router whose subtree ran dry sends its results up in one message."""
        if (not self.has_parent or not self.exhausted or self.requested or self.pool
                or not self.results):
            return
        if any(c.outstanding or c.want for c in self.children):
            return
        results, self.results = self.results, []
        out.append(SendResults(results))

    # sizes ---------------------------------------------------------------------
    def low_water(self) -> int:
        """Pool size under which a router asks its parent before running dry: what its
        children take during one round of batches and one measured round trip to the
        parent (``remote="prefetch"``, Satin-like, one request outstanding), or 0
        (``remote="blocking"``: ask only when empty, as in the thesis)."""
        if not self.prefetch_remote or not self.has_parent:
            return 0
        return int(self._cover())

    def ask_amount(self) -> int:
        """A router's steal asks for its initial share, or ``steal_factor`` times what
        its children consume while a request travels (see ``low_water``)."""
        return max(self.own_quota, int(self.steal_factor * self._cover()))

    def _cover(self) -> float:
        """Tasks the children take in one round of batches plus one round trip to the
        parent (the leaves ask for ``batch_s`` seconds of work at a time)."""
        recent = sum(c.last_want for c in self.children)
        return recent * (1.0 + self.rtt / self.batch_s)

    def note_answer(self) -> None:
        """The parent answered a remote steal: update the measured round trip."""
        if self.asked_at is not None:
            rtt = self.now() - self.asked_at
            self.rtt = rtt if self.rtt == 0.0 else 0.5 * (self.rtt + rtt)
            self.asked_at = None

    @property
    def total_procs(self) -> int:
        return sum(c.procs for c in self.children) or 1

    def busy(self) -> bool:
        """Work is under way below this node (so poll eagerly)."""
        return self.requested or any(c.outstanding or c.want for c in self.children)
