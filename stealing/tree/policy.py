"""The thesis' steal rules (Algorithm 5.3.1) as plain data: events in, decisions out.

A ``StealPolicy`` holds what a parent process knows of the work below it: the pool of
undistributed tasks, how much each child holds and wants, whether a request to its own
parent is outstanding, and the steal counters. Its methods take the events a node sees
(tasks from the parent, a child's results with its request, "no more" from the parent,
a new round) and return the messages to send as a list of actions (``Give``, ``Refuse``,
``AskParent``, ``SendResults``) in the order they must go. Nothing here sends, spawns or
imports MPI, and the only clock is the injectable ``now``, so the rules are tested alone
(``tests/test_policy.py``); ``stealing.roles.node.Node`` applies the actions over MPI.

The rules:

* at the start of a round every idle child wants its initial share (its ``quota``:
  ``tasks_per_leaf`` for a leaf, ``tasks_per_branch(procs)`` for a router, Figure 5.3),
  or, once the children's rates are measured, the round's quotas shared by speed;
* a child's returned results are its steal request; it is served from the pool (a
  *local* steal) or, when the pool is empty, waits for a request to the parent (a
  *remote* steal, one outstanding at a time); when the parent has nothing left either
  the answer is "no more" (a *failed* steal), unless the root is still feeding tasks;
* with ``remote="prefetch"`` a node asks its parent before its pool runs dry, at a
  low-water mark sized by the measured round trip; with ``"blocking"`` only when empty;
* results go up with the node's own requests, or in one message when the subtree is idle;
* a request from an *idle* child (nothing left to run) that neither the pool nor the
  parent can serve is served by *splitting* a busy child (``AskSplit``): a leaf hands over
  its oldest unstarted work (queued tasks, then stealable spawns of the task it runs),
  which the node gives to the waiting child (a ``steals_split``). A router asked by its
  parent to split answers from its pool or passes the request to a busy child of its
  own (``Yield`` sends the answer up). A router's own idle request lets its parent
  split the router's siblings; a non-idle request (a pool refill) only takes the
  parent's pool, so a cluster splits its own leaves before it reaches across;
* results of split work carry their owner's path (``stealing.tree.tasks.owner``): they go down
  to the child whose subtree holds the owner (``Route``), or up at once
  (``SendResults``) when the owner is elsewhere. Tasks given to a child are counted as
  outstanding only when their owner is outside that child, since only those results
  come back through this node.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Collection, Iterable, Union

from stealing.tree.tasks import Result, Task, TaskId, owner

DRY_S = 0.01    # a child that had nothing to split off is asked again after this long

STEAL_COUNTERS = ("steals_local", "steals_remote", "steals_after_remote", "steals_split",
                  "steals_failed")
LOSS_COUNTERS = ("leaves_lost", "routers_lost", "leaves_removed", "tasks_redone",
                 "results_dropped")


@dataclass(frozen=True)
class Give:
    """Send child number ``child`` these tasks (a TASKS message)."""
    child: int
    tasks: list[Task]


@dataclass(frozen=True)
class Refuse:
    """Tell child number ``child`` "no more" (its steal request failed)."""
    child: int


@dataclass(frozen=True)
class AskParent:
    """A remote steal: send the parent the ``results`` gathered so far and ask for
    ``amount`` tasks; ``idle``: no child of this node can be split any more."""
    results: list[Result]
    amount: int
    idle: bool = False


@dataclass(frozen=True)
class SendResults:
    """Send the parent ``results``, asking for nothing: the subtree ran dry, or the
    results belong to a leaf outside this subtree (sent at once: it waits for them)."""
    results: list[Result]


@dataclass(frozen=True)
class AskSplit:
    """Ask child number ``child`` to hand over up to ``amount`` tasks of its work."""
    child: int
    amount: int


@dataclass(frozen=True)
class Yield:
    """Answer the parent's split request with these ``tasks`` (possibly none)."""
    tasks: list[Task]


@dataclass(frozen=True)
class Route:
    """Send child number ``child`` results of work split off its subtree; ``at_once``:
    it waits with nothing to run and none went to it since (its sync may wait for
    these), so they go now, not held to batch with the next (``Node.hold_return``)."""
    child: int
    results: list[Result]
    at_once: bool = False


# what the policy's methods return: the messages to send, in order
Action = Union[Give, Refuse, AskParent, SendResults, AskSplit, Yield, Route]


class ChildShare:
    """What the policy knows of one child: its size and the work it holds or wants."""

    __slots__ = ("role", "procs", "quota", "outstanding", "held", "want", "asked", "waited",
                 "last_want", "idle", "split_wait", "split_pending", "dry_until", "woken",
                 "lost", "rate")

    def __init__(self, role: str, procs: int, quota: int) -> None:
        self.role = role        # "router", "leaf", or "slot" (a spawn-per-batch leaf)
        self.procs = procs
        self.quota = quota      # its initial share of a round
        self.outstanding = 0    # tasks given and not yet returned
        # those of them that are (task id, payload) pairs, by id: what is given again
        # if the child is lost
        self.held: dict[TaskId, Task] = {}
        self.want = 0           # tasks it is waiting for
        self.asked = False      # the want comes from a steal request
        self.waited = False     # that request had to wait for the node's parent
        self.last_want = quota  # size of its latest request
        self.idle = False       # its request says it has nothing left to run
        self.split_wait = False  # it waits for a split of another child's work
        self.split_pending = False  # a AskSplit sent to it is not answered yet
        self.dry_until = 0.0    # it answered a AskSplit with nothing: not split again before
        #                         this time (or until it reports results)
        self.woken = False      # results went down to it since its idle request: it
        #                         may be computing again (and can be split)
        self.lost = False       # its process died (or left): it gets nothing more
        self.rate = 0.0         # tasks/s its subtree runs, as it last said (0: unknown)

    def clear_want(self) -> None:
        """It wants nothing now (served, refused, or its request withdrawn)."""
        self.want, self.asked, self.waited = 0, False, False
        self.idle = self.split_wait = self.woken = False

    def splittable(self, now: float) -> bool:
        """It holds work it may hand over: tasks out, and not itself out of work. A
        router's "idle" only says none of its children could be split when it asked:
        its busy leaves make new spawns, so it is asked again once ``DRY_S`` has passed
        since it last had nothing to give."""
        if self.outstanding <= 0 or self.role == "slot" or now < self.dry_until:
            return False
        return self.role == "router" or not self.idle or self.woken


class StealPolicy:
    """Pool, per-child accounting, the request to the parent and the steal counters."""

    def __init__(self, steal_factor: float, has_parent: bool, remote: str = "prefetch",
                 batch_s: float = 0.05, own_quota: int = 1,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.steal_factor = steal_factor
        self.has_parent = has_parent
        self.prefetch_remote = remote == "prefetch"
        self.batch_s = float(batch_s)
        self.own_quota = own_quota      # the share this node's parent gives it
        self.now = now
        self.children: list[ChildShare] = []
        self.pool: deque[Task] = deque()
        self.results: list[Result] = []  # results waiting to go up (routers)
        self.exhausted = not has_parent  # the parent said "no more" (the root: always)
        self.requested = False          # a request to the parent is outstanding
        self.feeding = False            # the root is still adding tasks to this round
        self.stopped = False            # the tree is stopping: give nothing more
        self.rtt = 0.0                  # measured round trip of a remote steal (s)
        self.asked_at: float | None = None
        self.path: tuple[int, ...] = ()  # this node's address (child indices from the root)
        self.ask_idle = False           # the outstanding request to the parent is idle
        self.split_refused = False      # the parent refused an idle request (no work
        #                                 anywhere outside): do not ask it again
        self.split_up = 0               # tasks the parent asked this node to split off
        self.up_waiting: set[int] = set()  # children whose split answers the parent's
        self.up_got: list[Task] = []    # what they gave so far
        self.tracking = False           # tasks given are (task id, payload) pairs, held
        #                                 per child by id (see ``results_from``)
        self.split_next = 0             # the child a split is asked of first (in turn)
        self.counters: dict[str, int] = {}
        self.losses: dict[str, int] = {}  # LOSS_COUNTERS of the job
        self.reset_counters()

    def add_child(self, role: str, procs: int, quota: int) -> int:
        """A new child; returns its number, which actions name."""
        self.children.append(ChildShare(role, procs, quota))
        return len(self.children) - 1

    def join_child(self, role: str, procs: int, quota: int) -> int:
        """A child that joins while work is under way (a replacement, or a leaf
        added by ``grow``): it wants its share at once; returns its number."""
        k = self.add_child(role, procs, quota)
        c = self.children[k]
        c.want, c.idle = quota, True
        return k

    def reset_counters(self) -> None:
        """A new job: the steal counters start again from zero."""
        self.counters = dict.fromkeys(STEAL_COUNTERS, 0)
        self.losses = dict.fromkeys(LOSS_COUNTERS, 0)

    # events --------------------------------------------------------------------
    def begin_round(self) -> None:
        """Every idle child wants its initial share (Figure 5.3 quotas, or by speed:
        ``_initial_want``)."""
        total = self.subtree_rate()
        pot = sum(x.quota for x in self.children if not x.lost)
        for c in self.children:
            if c.outstanding == 0 and c.want == 0 and not c.lost:
                c.want, c.asked, c.waited = self._initial_want(c, total, pot), False, False
                c.idle = True       # it holds nothing: a split may serve it
                c.split_pending = False     # whatever it said in a past round
                c.dry_until = 0.0

    def on_tasks(self, tasks: Iterable[Task]) -> list[Action]:
        """Tasks from the parent (or the root's expansion); idle children get a share."""
        self.note_answer()
        self.pool.extend(tasks)
        self.begin_round()
        self.requested = False
        if self.has_parent:
            self.exhausted = False
            self.split_refused = False
        return self.distribute()

    def on_nomore(self) -> list[Action]:
        """The parent has nothing left: waiting children are refused."""
        self.note_answer()
        self.requested = False
        self.exhausted = True
        if self.ask_idle:
            self.split_refused = True
        return self.distribute()

    def child_returned(self, k: int, count: int) -> None:
        """Child ``k`` returned ``count`` results."""
        c = self.children[k]
        c.outstanding -= count
        if count:
            c.dry_until = 0.0

    def child_wants(self, k: int, want: int, idle: bool = False) -> list[Action]:
        """Child ``k``'s steal request for ``want`` tasks (0: none) after its results;
        ``idle``: it has nothing left to run (a split it owes is void). A leaf's
        results asking for nothing withdraw its request: it has work again (a
        router's results go up on their own and leave its request standing)."""
        if not want:
            c = self.children[k]
            if c.want and c.asked and c.role != "router":
                c.clear_want()
        if want:
            c = self.children[k]
            c.want, c.asked, c.waited = want, True, False
            c.idle, c.split_wait, c.woken = idle, False, False
            c.last_want = want
            if idle:
                voided = c.split_pending
                c.split_pending = False
                # a router with nothing to split now is asked again after DRY_S (its
                # leaves are busy: they spawn more); a leaf is busy again when it
                # says so, or woken by results
                c.dry_until = self.now() + DRY_S if c.role == "router" else 0.0
                if voided:                      # the split it owed is void
                    return self.distribute() + self._answered_up(k)
        return self.distribute()

    def on_child_results(self, k: int, count: int, want: int,
                         idle: bool = False) -> list[Action]:
        """Child ``k`` returned ``count`` results and asks for ``want`` more."""
        self.child_returned(k, count)
        return self.child_wants(k, want, idle)

    def on_split_request(self, amount: int) -> list[Action]:
        """The parent asks this node to hand over up to ``amount`` tasks: from the
        pool, else from every child that can be split. The parent asks only when the
        rest of its tree has nothing left to split, so a whole subtree waits on the
        answer: every busy child is asked at once (a leaf gives half its deque), and
        the first that gives anything answers the parent (see ``_answered_up``)."""
        if self.pool:
            n = min(amount, (len(self.pool) + 1) // 2)
            return [Yield([self.pool.pop() for _ in range(n)][::-1])]
        self.split_up = max(1, amount)
        out: list[Action] = []
        now = self.now()
        for k, c in enumerate(self.children):
            if c.split_pending:
                self.up_waiting.add(k)      # its answer is counted in as well
            elif c.splittable(now):
                c.split_pending = True
                self.up_waiting.add(k)
                out.append(AskSplit(k, self.split_up))
        if not self.up_waiting:
            self.split_up = 0
            out.append(Yield([]))
        return out

    def on_split_answer(self, k: int, tasks: list[Task]) -> list[Action]:
        """Child ``k`` answered a split with ``tasks`` (its outstanding work shrinks by
        those it had from this node); they go up if the parent asked, else to the
        children waiting for them."""
        c = self.children[k]
        c.split_pending = False
        c.outstanding -= self._counted(k, tasks, c.held)
        if not tasks:
            c.dry_until = self.now() + DRY_S
        self.pool.extend(tasks)
        # this node's own waiting children are served first (a local steal before a
        # remote one), the others before k (k split them off); the rest goes up if
        # the parent asked
        return self.distribute(last=k) + self._answered_up(k)

    def _answered_up(self, k: int) -> list[Action]:
        """Child ``k``'s part of the parent's split is in (or void: it went idle):
        what the pool holds goes up at once if it is anything, else once every
        child asked has answered (an empty answer tells the parent "nothing here
        now"). The children that answer later fill this node's pool, for its own
        leaves or the parent's next request. (Waiting for every child made each
        level of routers wait for its slowest leaf: on 32 sleeping leaves under 30
        routers, 0.59-0.69 efficiency against 0.70-0.76 answering at once.)"""
        if not self.split_up or k not in self.up_waiting:
            return []
        self.up_waiting.discard(k)
        self.up_got.extend(self.pool)
        self.pool.clear()
        if self.up_waiting and not self.up_got:
            return []
        self.up_waiting.clear()
        got, self.up_got, self.split_up = self.up_got, [], 0
        return [Yield(got)]

    def results_from(self, k: int,
                     results: list[Result]) -> tuple[list[Result], list[Action]]:
        """Child ``k`` sent ``results``: its outstanding work shrinks by those this
        node counted (a split spawn its own subtree ran and owns was never counted
        here); returns ``route(results)``. A counted result of a task the child does
        not hold is a second copy (the task was given again after a loss): it is
        dropped, so no result is ever counted twice."""
        c = self.children[k]
        if self.tracking:               # (every held task set it)
            kept = []
            for r in results:
                if self._comes_back(k, r) and c.held.pop(r[0], None) is None:
                    self.losses["results_dropped"] += 1
                    continue
                kept.append(r)
            if len(kept) < len(results):
                results = kept
        self.child_returned(k, self._counted(k, results))
        return self.route(results)

    def lose_child(self, k: int, left: bool = False) -> tuple[list[Task], list[Action]]:
        """Child ``k`` died (or ``left``: told to stop by ``shrink``): every task it
        held is put back at the head of
        the pool and given out again (``tasks_redone``); it gets nothing more. Its
        results still on their way are lost with it, and results routed to it later
        (of work split off it) are dropped (``route``). Returns the tasks redone
        followed by the actions: ``(tasks, actions)``."""
        c = self.children[k]
        tasks = list(c.held.values())
        c.held = {}
        c.outstanding = 0
        c.clear_want()
        c.split_pending = False
        c.lost = True
        self.losses["leaves_removed" if left else
                    "routers_lost" if c.role == "router" else "leaves_lost"] += 1
        self.losses["tasks_redone"] += len(tasks)
        self.pool.extendleft(reversed(tasks))
        out = self._answered_up(k) if self.split_up else []
        if tasks and not self.has_parent:
            self.begin_round()      # the root: idle children take the redone tasks
        return tasks, self.distribute() + out

    def route(self, results: Iterable[Result]) -> tuple[list[Result], list[Action]]:
        """Where results from a child go: ``(mine, actions)``. ``mine`` are the root's
        tasks' results (kept, or sent up with the next request); a split task's result
        goes down towards its owner (``Route``) or up at once (``SendResults``)."""
        mine: list[Result] = []
        up: list[Result] = []
        down: dict[int, list[Result]] = {}
        depth = len(self.path)
        for r in results:
            path = owner(r[0])
            if path is None:
                mine.append(r)
            elif len(path) > depth and path[:depth] == self.path:
                down.setdefault(path[depth], []).append(r)
            else:
                up.append(r)
        for k in [k for k in down if self.children[k].lost]:
            self.losses["results_dropped"] += len(down.pop(k))   # their owner died
        actions: list[Action] = []
        for k, rs in down.items():
            actions.append(Route(k, rs, at_once=self.waiting(k)))
            self.results_went(k)
        if up:
            actions.append(SendResults(up))
        return mine, actions

    def waiting(self, k: int) -> bool:
        """Child ``k`` said it has nothing left to run, and no results went to it
        since: results held for it should go now."""
        c = self.children[k]
        return c.idle and not c.woken

    def results_went(self, k: int) -> None:
        """Results of its split work went down to child ``k``."""
        c = self.children[k]
        if c.idle and c.outstanding:
            c.woken = True      # a leaf waiting at sync may resume with these

    def _comes_back(self, k: int, t: Task | Result) -> bool:
        """Task (or result) ``t`` of child ``k`` comes back through this node: its
        owner is not in ``k``'s subtree."""
        path = owner(t[0]) if type(t) is tuple else None    # (a pair: ids alone in tests)
        depth = len(self.path)
        return not (path is not None and len(path) > depth and path[depth] == k
                    and path[:depth] == self.path)

    def _counted(self, k: int, tasks: Iterable[Task | Result],
                 held: dict[TaskId, Task] | None = None) -> int:
        """How many of ``tasks`` come back through this node when child ``k`` runs
        them; those that are (task id, payload) pairs leave ``held`` (its record of
        what ``k`` holds)."""
        n = 0
        for t in tasks:
            if self._comes_back(k, t):
                n += 1
                if held is not None and type(t) is tuple:
                    held.pop(t[0], None)
        return n

    def keep_results(self, results: Iterable[Result]) -> None:
        """Results from below that go up with the next message to the parent."""
        self.results.extend(results)

    def stop_feeding(self) -> list[Action]:
        """The root found every task of the round: "no more" may now be said."""
        self.feeding = False
        return self.distribute()

    def end_job(self) -> list[Action]:
        """The job is over and its statistics are asked for: every request still
        standing is refused now, before the request for statistics goes down the same
        link, so each refusal is counted in the figures it belongs to."""
        out: list[Action] = []
        self.feeding = False
        self.exhausted = True
        for k, c in enumerate(self.children):
            if c.want > 0:
                self._refuse(k, out)
        return out

    def stop(self) -> None:
        """The tree is stopping: nothing more is given out."""
        self.stopped = True

    # decisions -----------------------------------------------------------------
    def distribute(self, last: int = -1) -> list[Action]:
        """Give waiting children tasks, ask upwards, or say "no more" (child ``last``
        is served after the others)."""
        out: list[Action] = []
        if self.stopped:
            return out
        wanting = [k for k, c in enumerate(self.children) if c.want > 0 and k != last]
        if 0 <= last < len(self.children) and self.children[last].want > 0:
            wanting.append(last)
        # an idle child is served before one asking ahead while it computes
        wanting.sort(key=lambda k: not self.children[k].idle)
        if wanting and self.pool:
            wanting = self._give_from_pool(wanting, out)
        if wanting:
            if not self.exhausted:
                for k in wanting:
                    c = self.children[k]
                    c.waited = c.asked
                self._ask_parent(out)
            else:
                self._split_or_refuse(wanting, out)
        if not self.exhausted and len(self.pool) < self.low_water():
            self._ask_parent(out)
        self._maybe_go_idle(out)
        return out

    def _give_from_pool(self, wanting: list[int], out: list[Action]) -> list[int]:
        """Local steals: the ``wanting`` children, in order, get what the pool holds
        (each its want when there is enough for all, else its share of the pool);
        returns those still wanting."""
        total_want = sum(self.children[k].want for k in wanting)
        avail = len(self.pool)
        for k in wanting:
            if not self.pool:
                break
            c = self.children[k]
            n = c.want if avail >= total_want else max(1, avail * c.want // total_want)
            # near the end, no child takes more than its share; work split off for
            # the children waiting on a split is all theirs
            if c.asked and not c.split_wait:
                n = min(n, self._share_of_pool(k))
            out.append(self._give(k, min(n, len(self.pool))))
        return [k for k in wanting if self.children[k].want > 0]

    def _split_or_refuse(self, wanting: list[int], out: list[Action]) -> None:
        """The pool is empty and the parent has nothing left: idle children wait for
        a busy child's split (or an idle request to the parent); a request that no
        split can ever serve is refused, once the root stopped feeding tasks."""
        hungry = [k for k in wanting if self.children[k].idle]
        # a woken child (results went down to it while it waited at sync)
        # may be computing again: it keeps its request and may be split
        # (it may as well still be waiting: its request must stand)
        busy = [k for k in hungry if not self.children[k].woken]
        wanted = len(busy) or 1
        if hungry and not self._split_a_child(
                sum(self.children[k].want for k in busy or hungry), busy, out,
                wanted=wanted):
            self._ask_parent_idle(out)
        elif hungry and self._splitting() < wanted:
            # fewer of its children can be split than wait for work: the subtree is
            # running dry, so it asks across as well (one request outstanding, as
            # Satin's cluster-aware stealing does): waiting until every child is idle
            # left 32-leaf subtrees idle together for 0.3-1 s at 128 leaves
            self._ask_parent_idle(out)
        for k in hungry:
            self.children[k].split_wait = True
        if not self.feeding:        # more tasks may still come: let them wait
            for k in wanting:
                if not self.children[k].idle or self._quiet(k):
                    self._refuse(k, out)

    def _give(self, k: int, n: int) -> Give:
        c = self.children[k]
        if c.asked and c.role != "router":
            # a leaf's steal request is answered: one steal per batch given
            self.counters["steals_split" if c.split_wait else
                          "steals_after_remote" if c.waited else "steals_local"] += 1
        tasks = [self.pool.popleft() for _ in range(n)]
        c.clear_want()
        for t in tasks:
            if self._comes_back(k, t):
                c.outstanding += 1
                if type(t) is tuple:
                    c.held[t[0]] = t
                    self.tracking = True
        return Give(k, tasks)

    def _split_a_child(self, amount: int, besides: Collection[int], out: list[Action],
                       wanted: int = 1) -> bool:
        """Make sure ``wanted`` busy children (not of ``besides``) are splitting their
        work: True if any is (the requests wait for the answers), False if no child
        can be split. A child whose split is pending is not asked again, and does
        not hold the others back: it may be waiting itself.

        The busy children are asked in turn, from the one after the last asked
        (``split_next``), not the one holding the most tasks: ``outstanding`` counts
        the tasks handed to a child, not the work left in them (a leaf handed two
        one-node splits counts two, one running a subtree of thousands counts one),
        and ties went to the lowest number, so the same few leaves were split again and
        again, each time for smaller pieces. In turn, each split takes the
        shallowest spawns of another running subtree. Simulated sleep trees
        (``benchmarks/simulate.py``, default shape): 32 leaves 0.850 to 0.910, 128
        leaves 0.890 to 0.908, 256 0.789 to 0.835, two clusters of 64 0.745 to 0.889,
        with a third fewer messages."""
        pending = 0
        best: int | None = None
        now = self.now()
        n = len(self.children)
        start = self.split_next
        for j in range(n):
            k = (start + j) % n
            c = self.children[k]
            if k in besides or not c.splittable(now):
                continue
            if c.split_pending:
                pending += 1
            elif best is None:
                best = k
        if pending >= wanted or best is None:
            return pending > 0
        self.split_next = best + 1
        self.children[best].split_pending = True
        out.append(AskSplit(best, max(1, amount)))
        return True

    def _splitting(self) -> int:
        """Children asked to split whose answer is still to come."""
        return sum(1 for c in self.children if c.split_pending)

    def _ask_parent_idle(self, out: list[Action]) -> None:
        """No child can be split: ask the parent, which may split this node's
        siblings (unless it already said there is no work outside)."""
        if self.has_parent and not self.split_refused and not self.requested:
            self._ask_parent(out, idle=True)

    def _quiet(self, k: int) -> bool:
        """Child ``k``'s idle request can be refused: no work is left that could ever
        be split for it. Nothing is out in any other child, nor in ``k`` if it is a
        leaf (waiting at ``sync`` for stolen work: refused, it would ask no more this
        round, and it resumes when the result comes), and the parent has said there
        is nothing outside (the root: there is no outside). Until then it waits
        (parked), sending nothing: the next split or result serves it."""
        if self.has_parent and not self.split_refused:
            return False
        for j, c in enumerate(self.children):
            if c.outstanding > 0 and (j != k or c.role != "router"):
                return False
        return True

    def _refuse(self, k: int, out: list[Action]) -> None:
        """"No more" for child ``k``'s request. Only an idle request refused is a
        failed steal: a refused refill (prefetch) only means "not from here, yet"."""
        c = self.children[k]
        if c.asked:
            if c.idle:
                self.counters["steals_failed"] += 1
            out.append(Refuse(k))
        c.clear_want()

    def _ask_parent(self, out: list[Action], idle: bool = False) -> None:
        """A remote steal (one outstanding at a time; the root has no parent)."""
        if self.requested or not self.has_parent:
            return
        self.requested = True
        self.ask_idle = idle
        self.asked_at = self.now()
        counters = self.counters
        counters["steals_remote"] += 1
        # how full the pool still was: at most the low-water mark (prefetch), 0 (blocking)
        counters["remote_pool_max"] = max(counters.get("remote_pool_max", 0),
                                          len(self.pool))
        counters["low_water"] = self.low_water()
        results, self.results = self.results, []
        out.append(AskParent(results, self.ask_amount(), idle))

    def _maybe_go_idle(self, out: list[Action]) -> None:
        """A router whose subtree holds no work sends its results up in one message,
        even with a request of its own outstanding: the root's accounting (and the
        end of the round) waits for them, and an idle subtree makes no new request
        that could carry them."""
        if not self.has_parent or self.pool or not self.results:
            return
        if any(c.outstanding for c in self.children):
            return
        results, self.results = self.results, []
        out.append(SendResults(results))

    def retry_in(self) -> float | None:
        """Seconds until parked idle requests should try a split again (a child that
        had nothing to give has spawned more since, as long as it holds work), or
        None: nothing is parked, a split is under way, or no child holds work."""
        if self.stopped or not any(c.want > 0 and c.split_wait for c in self.children):
            return None
        due: float | None = None
        for c in self.children:
            if c.split_pending:
                return None
            if c.outstanding > 0 and c.dry_until > 0.0 and (due is None or
                                                            c.dry_until < due):
                due = c.dry_until
        return None if due is None else max(0.0, due - self.now())

    def retry(self) -> list[Action]:
        """Parked requests try the split again (``retry_in`` said it is time); the
        children whose wait is over count as splittable from now on (so a child that
        is not picked does not make the node wake again and again)."""
        now = self.now()
        for c in self.children:
            if 0.0 < c.dry_until <= now:
                c.dry_until = 0.0
        return self.distribute()

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

    def note_rate(self, k: int, rate: float) -> None:
        """Child ``k`` measured ``rate`` tasks/s (its RESULTS say so; 0: not yet)."""
        if rate > 0:
            self.children[k].rate = rate

    def subtree_rate(self) -> float:
        """Tasks/s of this node's subtree: the children's measured rates, a child not
        measured yet counted at the measured ones' rate per processor; 0 when none is
        measured. A router reports it to its parent with its requests."""
        live = [c for c in self.children if not c.lost]
        known = [c for c in live if c.rate > 0]
        if not known:
            return 0.0
        per_proc = sum(c.rate for c in known) / sum(c.procs for c in known)
        return sum(c.rate if c.rate > 0 else per_proc * c.procs for c in live)

    @staticmethod
    def _initial_want(c: ChildShare, total: float, pot: int) -> int:
        """A child's share at the start of a round: its quota (Figure 5.3, sized by
        processors) until its rate is measured; then the round's quotas shared by
        speed (seeds 000 and 003: rate / sum of rates), so on a tree that keeps its
        processes, a fast leaf (a GPU's) gets its share at once in the next job
        instead of its processors'. At least one task. ``total``: the subtree's rate,
        ``pot``: the live children's quotas (both once per round, not per child)."""
        if total <= 0 or c.rate <= 0:
            return c.quota
        return max(1, round(pot * c.rate / total))

    def _share_of_pool(self, k: int) -> int:
        """The most child ``k`` takes of the pool at once: its share of the subtree's
        speed (seeds 000 and 003: rate / sum of rates), or of its processors when
        that is more (or nothing is measured yet), so a fast child (a GPU leaf) is not
        held to a CPU core's share, and a child whose rate was measured on small
        batches keeps at least its processors' share. At least one task."""
        c = self.children[k]
        by_procs = -(-len(self.pool) * c.procs // self.total_procs)
        total = self.subtree_rate()
        if total <= 0 or c.rate <= 0:
            return max(1, by_procs)
        return max(1, by_procs, math.ceil(len(self.pool) * c.rate / total))

    @property
    def total_procs(self) -> int:
        """Processors of the children still alive (at least 1: a divisor)."""
        return sum(c.procs for c in self.children if not c.lost) or 1

    def busy(self) -> bool:
        """Work is under way below this node (so poll eagerly)."""
        return self.requested or bool(self.split_up) or \
            any(c.outstanding or c.want or c.split_pending for c in self.children)
