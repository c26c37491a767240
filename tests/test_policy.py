"""The steal rules alone (stealing/tree/policy.py): no MPI, no processes, a fake clock.

Each test drives a ``StealPolicy`` with the events a node sees and checks the actions
it returns, message for message, and its counters, with exact numbers.
"""

from collections import deque

import pytest

from stealing import plan_tree
from stealing.tree.policy import (
    DRY_S,
    STEAL_COUNTERS,
    AskParent,
    Give,
    Refuse,
    Route,
    SendResults,
    AskSplit,
    StealPolicy,
    Yield,
)


class Clock:
    """An injectable ``now``: time moves only when a test says so."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def router(leaves=2, quota=5, remote="blocking", own_quota=10, clock=None):
    """A router's policy over ``leaves`` leaves of ``quota`` tasks each."""
    policy = StealPolicy(2.0, has_parent=True, remote=remote, batch_s=0.05,
                         own_quota=own_quota, now=clock or Clock())
    for _ in range(leaves):
        policy.add_child("leaf", 1, quota)
    return policy


def root(children, clock=None):
    """The root's policy; ``children`` are ``(role, procs, quota)``."""
    policy = StealPolicy(2.0, has_parent=False, now=clock or Clock())
    for role, procs, quota in children:
        policy.add_child(role, procs, quota)
    return policy


def sizes(actions):
    return [(type(a).__name__, a.child, len(a.tasks)) for a in actions]


def test_initial_shares_are_figure_5_4():
    """Every non-leaf of the thesis' Figure 5.4 (np=14) gives each child its
    tasks_per_branch quota at the start of a round: 220, 80/30, 20, 5."""
    seen = {}
    for node in plan_tree(14, 2, 2, 5, 2).walk():
        if not node.children:
            continue
        policy = StealPolicy(2.0, has_parent=node.role != "root", remote="blocking")
        for kid in node.children:
            policy.add_child(kid.role, kid.procs, kid.tasks)
        tasks = list(range(sum(kid.tasks for kid in node.children)))
        actions = policy.on_tasks(tasks)
        assert [a.tasks for a in actions] == _slices(tasks,
                                                     [k.tasks for k in node.children])
        seen[node.procs] = [len(a.tasks) for a in actions]
        assert not policy.pool
    assert seen == {14: [220, 220], 7: [80, 30], 4: [20, 20], 3: [5, 5, 5], 2: [5, 5]}


def _slices(items, lengths):
    out, start = [], 0
    for n in lengths:
        out.append(items[start:start + n])
        start += n
    return out


def test_local_steal_is_served_from_the_pool():
    policy = router()
    assert policy.on_tasks(list(range(20))) == [Give(0, [0, 1, 2, 3, 4]),
                                                 Give(1, [5, 6, 7, 8, 9])]
    assert policy.on_child_results(0, 5, 5) == [Give(0, [10, 11, 12, 13, 14])]
    assert policy.counters == {"steals_local": 1, "steals_remote": 0,
                               "steals_after_remote": 0, "steals_split": 0,
                               "steals_failed": 0}
    assert list(policy.pool) == [15, 16, 17, 18, 19]


def test_remote_steal_when_the_pool_is_empty_one_request_outstanding():
    clock = Clock()
    policy = router(own_quota=10, clock=clock)
    policy.on_tasks(list(range(10)))
    policy.keep_results(["r0", "r1"])
    # the pool is empty: ask the parent, with the results so far, for 2 x (5 + 5)
    assert policy.on_child_results(0, 5, 5) == [AskParent(["r0", "r1"], 20)]
    policy.keep_results(["r2"])
    # one request at a time; the subtree holds nothing now, so r2 goes up at once
    assert policy.on_child_results(1, 5, 5) == [SendResults(["r2"])]
    assert policy.counters["steals_remote"] == 1 and policy.requested
    clock.t += 0.01
    assert policy.on_tasks(list(range(100, 120))) == [Give(0, [100, 101, 102, 103, 104]),
                                                      Give(1, [105, 106, 107, 108, 109])]
    assert policy.rtt == pytest.approx(0.01)
    assert policy.counters == {"steals_local": 0, "steals_remote": 1,
                               "steals_after_remote": 2, "steals_split": 0,
                               "steals_failed": 0,
                               "remote_pool_max": 0, "low_water": 0}
    assert policy.results == []


def test_prefetch_asks_at_the_low_water_mark_sized_by_the_round_trip():
    clock = Clock()
    policy = router(remote="prefetch", own_quota=10, clock=clock)
    assert sizes(policy.on_tasks(list(range(30)))) == [("Give", 0, 5), ("Give", 1, 5)]
    assert policy.low_water() == 10                      # (5 + 5) x (1 + 0 / 0.05)
    assert sizes(policy.on_child_results(0, 5, 5)) == [("Give", 0, 5)]     # 15 left
    assert sizes(policy.on_child_results(1, 5, 5)) == [("Give", 1, 5)]     # 10 left
    actions = policy.on_child_results(0, 5, 5)                             # 5 left
    assert actions == [Give(0, [20, 21, 22, 23, 24]), AskParent([], 20)]
    assert policy.counters == {"steals_local": 3, "steals_remote": 1,
                               "steals_after_remote": 0, "steals_split": 0,
                               "steals_failed": 0,
                               "remote_pool_max": 5, "low_water": 10}
    clock.t += 0.05                                      # a round trip of one batch_s
    assert policy.on_tasks(list(range(100, 120))) == []  # nobody waits: into the pool
    assert len(policy.pool) == 25
    assert policy.rtt == pytest.approx(0.05)
    assert policy.low_water() == 20                      # (5 + 5) x (1 + 0.05 / 0.05)
    assert policy.ask_amount() == 40                     # steal_factor x low water


def test_blocking_asks_only_when_a_child_finds_the_pool_empty():
    policy = router(remote="blocking", own_quota=10)
    policy.on_tasks(list(range(30)))
    assert sizes(policy.on_child_results(0, 5, 5)) == [("Give", 0, 5)]
    assert sizes(policy.on_child_results(1, 5, 5)) == [("Give", 1, 5)]
    assert sizes(policy.on_child_results(0, 5, 5)) == [("Give", 0, 5)]   # 5 left: no ask
    # the last tasks go in halves (each leaf is half of the processors), never asking
    assert sizes(policy.on_child_results(1, 5, 5)) == [("Give", 1, 3)]
    assert sizes(policy.on_child_results(0, 5, 5)) == [("Give", 0, 1)]
    assert sizes(policy.on_child_results(1, 3, 5)) == [("Give", 1, 1)]
    assert policy.counters["steals_remote"] == 0 and not policy.pool
    assert policy.on_child_results(0, 1, 5) == [AskParent([], 20)]
    assert policy.counters == {"steals_local": 6, "steals_remote": 1,
                               "steals_after_remote": 0, "steals_split": 0,
                               "steals_failed": 0,
                               "remote_pool_max": 0, "low_water": 0}


def test_failed_steal_when_the_parent_is_exhausted():
    """Leaves that ran dry (idle requests) find the pool empty: the router asks its
    parent for a refill, then to split elsewhere; "no more" to that fails both."""
    policy = router()
    policy.on_tasks(list(range(10)))
    policy.keep_results(["a"])
    assert policy.on_child_results(0, 5, 5, idle=True) == [AskParent(["a"], 20)]
    policy.keep_results(["b"])
    # one request at a time; nothing is out below: the results go up at once
    assert policy.on_child_results(1, 5, 5, idle=True) == [SendResults(["b"])]
    # no refill, and no leaf holds work to split: the parent may split elsewhere
    assert policy.on_nomore() == [AskParent([], 20, True)]
    assert [c.split_wait for c in policy.children] == [True, True]   # parked
    # nothing anywhere: both requests fail, one failed steal each
    assert policy.on_nomore() == [Refuse(0), Refuse(1)]
    assert policy.on_child_results(0, 0, 0) == []        # nothing asks any more
    assert policy.counters == {"steals_local": 0, "steals_remote": 2,
                               "steals_after_remote": 0, "steals_split": 0,
                               "steals_failed": 2,
                               "remote_pool_max": 0, "low_water": 0}
    assert not policy.busy()


def test_a_refused_refill_is_no_failed_steal():
    """A refill (a leaf's prefetch: it still has work) that meets an exhausted router
    is told "no more" at once, but only the leaf's idle request, when it runs dry,
    counts as a failed steal; the idle subtree's results go up with the last one."""
    policy = router()
    policy.on_tasks(list(range(10)))
    policy.keep_results(["a"])
    assert policy.on_child_results(0, 3, 5) == [AskParent(["a"], 20)]
    assert policy.on_nomore() == [Refuse(0)]
    assert policy.on_child_results(1, 4, 5) == [Refuse(1)]
    assert steals(policy) == counts(steals_remote=1)
    # the parent refused a refill, not an idle request: the router may still ask it
    assert not policy.split_refused
    assert policy.on_child_results(0, 2, 5, idle=True) == [AskSplit(1, 5)]
    assert policy.on_child_results(1, 1, 5, idle=True) == [AskParent([], 20, True)]
    policy.keep_results(["b"])
    assert policy.on_nomore() == [Refuse(0), Refuse(1), SendResults(["b"])]
    assert steals(policy) == counts(steals_remote=2, steals_failed=2)
    assert outstanding(policy) == [0, 0] and not policy.busy()


def test_no_more_is_held_back_while_the_root_is_still_feeding():
    policy = root([("leaf", 1, 5), ("leaf", 1, 5)])
    policy.feeding = True
    policy.on_tasks(list(range(10)))
    assert policy.on_child_results(0, 5, 5) == []        # waits: more tasks may come
    assert policy.children[0].want == 5
    assert policy.on_tasks([10, 11, 12, 13, 14]) == [Give(0, [10, 11, 12])]
    assert policy.on_child_results(1, 5, 5) == [Give(1, [13])]
    assert policy.on_child_results(0, 3, 5) == [Give(0, [14])]
    assert policy.on_child_results(1, 1, 5) == []        # held back again (a refill)
    assert policy.on_child_results(0, 1, 5, idle=True) == []    # and an idle request
    # the round has every task now: leaf 0's idle request fails (a failed steal),
    # leaf 1's refill is refused without counting
    assert policy.stop_feeding() == [Refuse(0), Refuse(1)]
    assert steals(policy) == counts(steals_local=3, steals_failed=1)
    # leaf 1 runs dry: its idle request is its round's one failed steal
    assert policy.on_child_results(1, 0, 5, idle=True) == [Refuse(1)]
    assert policy.counters == {"steals_local": 3, "steals_remote": 0,
                               "steals_after_remote": 0, "steals_split": 0,
                               "steals_failed": 2}


def test_new_tasks_go_to_an_idle_leaf_before_one_asking_ahead():
    """A task found by the root's next pass goes to the leaf with nothing to do, not
    to the busy one whose refill request came first."""
    policy = root([("leaf", 1, 1), ("leaf", 1, 1)])
    policy.feeding = True
    assert policy.on_tasks([0, 1]) == [Give(0, [0]), Give(1, [1])]
    assert policy.on_child_results(0, 0, 5) == []        # leaf 0 computes, asks ahead
    # leaf 1 is done: leaf 0 is asked to split
    assert policy.on_child_results(1, 1, 5, idle=True) == [AskSplit(0, 5)]
    assert policy.on_tasks([2]) == [Give(1, [2])]
    assert policy.children[0].want == 5


def test_near_the_end_no_child_takes_more_than_its_share_of_procs():
    policy = root([("router", 3, 30), ("router", 1, 10)])
    assert sizes(policy.on_tasks(list(range(48)))) == [("Give", 0, 30), ("Give", 1, 10)]
    # 8 left: the 1-processor router asks for 10 and gets ceil(8 x 1/4) = 2
    assert sizes(policy.on_child_results(1, 10, 10)) == [("Give", 1, 2)]
    # 6 left: the 3-processor router asks for 30 and gets ceil(6 x 3/4) = 5
    assert sizes(policy.on_child_results(0, 30, 30)) == [("Give", 0, 5)]
    assert list(policy.pool) == [47]
    # routers' requests are not leaf steals: no steal counter moves at the root
    assert policy.counters == dict.fromkeys(
        ("steals_local", "steals_remote", "steals_after_remote", "steals_split",
         "steals_failed"), 0)


def test_scarce_tasks_are_shared_in_proportion_to_the_wants():
    policy = root([("leaf", 1, 5), ("leaf", 1, 5)])
    policy.feeding = True
    policy.on_tasks(list(range(10)))
    policy.on_child_results(0, 5, 5)
    policy.on_child_results(1, 5, 5)
    # 4 tasks for wants of 5 + 5: 4 x 5 // 10 = 2 each, capped by half the pool left
    assert policy.on_tasks([10, 11, 12, 13]) == [Give(0, [10, 11]), Give(1, [12])]
    assert list(policy.pool) == [13]


def test_stopping_gives_nothing():
    policy = router()
    policy.stop()
    assert policy.on_tasks(list(range(10))) == []
    assert len(policy.pool) == 10


@pytest.mark.parametrize("remote, batches, local, after_remote, asked", [
    ("blocking", 36, 20, 12, 11),
    ("prefetch", 35, 24, 7, 11),        # asking early: fewer leaves wait for the parent
])
def test_counters_add_up_over_a_whole_round(remote, batches, local, after_remote, asked):
    """A root, two routers of two leaves, messages delivered in order: every task comes
    back once, and the leaves' batches = initial + local + after-remote steals."""
    tasks, leaf_batches, counts = simulate(100, remote)
    assert sorted(tasks) == list(range(100))
    assert (leaf_batches, counts["local"], counts["after_remote"], counts["remote"]) == \
        (batches, local, after_remote, asked)
    assert counts["split"] == 0                          # a leaf holds no batch to split
    assert leaf_batches == 4 + counts["local"] + counts["after_remote"]
    assert counts["root_failed"] == 2                    # one per router
    assert counts["router_failed"] == 4                  # one per leaf
    assert counts["idle_at_end"]


@pytest.mark.parametrize("remote, speeds, batches, split", [
    ("blocking", None, 36, 0),
    ("prefetch", None, 35, 0),
    ("blocking", (1, 1, 1, 1), 27, 0),
    ("prefetch", (1, 1, 100, 100), 25, 2),  # slow router 0 yields for router 1's leaves
])
def test_steal_counters_identity_over_a_round(remote, speeds, batches, split):
    """Over a whole round, each leaf's batches are its first share plus one steal each
    (local, after remote or split), and each leaf that got work ends the round with
    exactly one failed steal: its idle request refused once the tree is quiet."""
    quota = 5 if speeds is None else 20
    tasks, leaf_batches, counts = simulate(100, remote, quota, speeds)
    assert sorted(tasks) == list(range(100))
    assert (leaf_batches, counts["split"]) == (batches, split)
    assert counts["first"] == 4
    assert leaf_batches == counts["first"] + counts["local"] + counts["after_remote"] + \
        counts["split"]
    assert counts["router_failed"] == counts["first"]
    assert counts["failed_per_leaf"] == [1, 1, 1, 1]
    assert counts["root_failed"] == 2
    assert counts["idle_at_end"]


class SimLeaf:
    """A leaf of ``simulate``, as ``stealing.roles.leaf`` behaves towards its router: it
    solves ``speed`` tasks a turn (all it holds when None), prefetches (asks for 5
    more, a refill) once half its batch is done, and asks idle when it runs dry with
    no request out; a refused idle request ends its round. A SPLIT takes the newest
    half of its queue when it holds two tasks or more, else it stays unanswered (owed,
    then voided by the leaf's idle request)."""

    def __init__(self, r, k, speed):
        self.r, self.k, self.speed = r, k, speed
        self.tasks: deque = deque()
        self.results: list = []
        self.batch_len = 0
        self.requested = self.exhausted = self.asked_idle = self.refused_idle = False
        self.failed = 0         # its idle requests refused


def simulate(total: int, remote: str, quota: int = 5, speeds=None):
    """Run one round through three levels of policies, messages and leaf turns in one
    queue in order. Returns (results at the root, batches leaves got, counters)."""
    top = root([("router", 2, 20), ("router", 2, 20)])
    routers = [router(remote=remote, quota=quota, own_quota=20) for _ in range(2)]
    speeds = speeds or (None,) * 4
    leaves = {(r, k): SimLeaf(r, k, speeds[2 * r + k] or total)
              for r in range(2) for k in range(2)}
    queue: deque = deque()
    collected, batches, got_work = [], 0, set()

    def from_root(actions):
        queue.extend(("router", a.child, a) for a in actions)

    def from_router(r, actions):
        nonlocal batches
        for a in actions:
            if isinstance(a, Give):
                batches += 1
                got_work.add((r, a.child))
            if isinstance(a, (Give, Refuse, AskSplit)):
                queue.append(("leaf", leaves[r, a.child], a))
            else:
                queue.append(("root", r, a))

    def ask(leaf, idle):
        routers[leaf.r].keep_results(leaf.results)
        n, leaf.results = len(leaf.results), []
        leaf.requested, leaf.asked_idle = True, idle
        from_router(leaf.r, routers[leaf.r].on_child_results(leaf.k, n, 5, idle=idle))

    def turn(leaf):
        for _ in range(min(leaf.speed, len(leaf.tasks))):
            leaf.results.append(leaf.tasks.popleft())
        if leaf.tasks:
            queue.append(("leaf", leaf, None))              # its next turn
        if not (leaf.requested or leaf.exhausted) and \
                len(leaf.tasks) <= leaf.batch_len // 2:
            ask(leaf, idle=False)
        elif not (leaf.tasks or leaf.requested or leaf.refused_idle):
            ask(leaf, idle=True)

    def at_leaf(leaf, a):
        if a is None:
            turn(leaf)
        elif isinstance(a, Give):
            leaf.tasks.extend(a.tasks)
            leaf.batch_len = len(a.tasks)
            leaf.requested = leaf.exhausted = leaf.refused_idle = False
            turn(leaf)
        elif isinstance(a, Refuse):
            leaf.refused_idle = leaf.asked_idle
            leaf.failed += leaf.asked_idle
            leaf.requested, leaf.exhausted = False, True
            if not (leaf.tasks or leaf.refused_idle):
                ask(leaf, idle=True)
        elif len(leaf.tasks) > 1:                           # a AskSplit
            given = [leaf.tasks.pop()
                     for _ in range(min(a.amount, (len(leaf.tasks) + 1) // 2))][::-1]
            from_router(leaf.r, routers[leaf.r].on_split_answer(leaf.k, given))

    from_root(top.on_tasks(list(range(total))))
    while queue:
        where, who, a = queue.popleft()
        if where == "leaf":
            at_leaf(who, a)
        elif where == "router":
            policy = routers[who]
            from_router(who, policy.on_tasks(a.tasks) if isinstance(a, Give)
                        else policy.on_nomore() if isinstance(a, Refuse)
                        else policy.on_split_request(a.amount))
        elif isinstance(a, Yield):
            from_root(top.on_split_answer(who, a.tasks))
        else:                                           # AskParent or SendResults
            collected.extend(a.results)
            amount, idle = (a.amount, a.idle) if isinstance(a, AskParent) else (0, False)
            from_root(top.on_child_results(who, len(a.results), amount, idle=idle))
    counters = [p.counters for p in routers]
    return collected, batches, {
        "local": sum(c["steals_local"] for c in counters),
        "after_remote": sum(c["steals_after_remote"] for c in counters),
        "split": sum(c["steals_split"] for c in counters),
        "remote": sum(c["steals_remote"] for c in counters),
        "root_failed": top.counters["steals_failed"],
        "router_failed": sum(c["steals_failed"] for c in counters),
        "first": len(got_work),
        "failed_per_leaf": [leaf.failed for leaf in leaves.values()],
        "idle_at_end": not any(p.busy() for p in routers + [top]),
    }


# splits ------------------------------------------------------------------------------
# A root task is ``(int, payload)``; a split-off spawn is ``((owner path, number),
# payload)``, its owner the leaf at that path of child indices from the root.

def job(i):
    return (i, f"p{i}")


def spawn(path, n):
    return ((path, n), f"s{n}")


def steals(policy):
    """The steal counters alone (a router also records its pool and low-water mark)."""
    return {k: policy.counters[k] for k in STEAL_COUNTERS}


def counts(**nonzero):
    return dict(dict.fromkeys(STEAL_COUNTERS, 0), **nonzero)


def outstanding(policy):
    return [c.outstanding for c in policy.children]


def test_an_idle_leaf_is_served_by_splitting_a_busy_one():
    policy = root([("leaf", 1, 5), ("leaf", 1, 5)])
    tasks = [job(i) for i in range(10)]
    assert policy.on_tasks(tasks) == [Give(0, tasks[:5]), Give(1, tasks[5:])]
    # leaf 1 ran its batch and has nothing left; the pool is empty, leaf 0 holds 5
    assert policy.on_child_results(1, 5, 5, idle=True) == [AskSplit(0, 5)]
    assert policy.child_wants(1, 5, idle=True) == []     # one AskSplit at a time
    assert policy.busy()
    # leaf 0 hands over its 2 queued tasks and a spawn of the task it runs: the queued
    # ones leave its outstanding count, the spawn (its own) was never in it
    stolen = [job(3), job(4), spawn((0,), 1)]
    assert policy.on_split_answer(0, stolen) == [Give(1, stolen)]
    assert steals(policy) == counts(steals_split=1)
    assert outstanding(policy) == [3, 3]                 # leaf 1 returns all three
    assert not policy.pool


def test_an_idle_request_with_nothing_to_split_is_refused():
    policy = root([("leaf", 1, 5), ("leaf", 1, 5)])
    policy.on_tasks([job(i) for i in range(10)])
    assert policy.on_child_results(0, 5, 0) == []        # leaf 0 done, asks nothing
    assert policy.on_child_results(1, 5, 5, idle=True) == [Refuse(1)]
    assert steals(policy) == counts(steals_failed=1)
    assert not policy.busy()


def test_a_refill_request_never_splits():
    """A non-idle request (a prefetch: the leaf still has work) only takes the pool."""
    policy = root([("leaf", 1, 5), ("leaf", 1, 5)])
    policy.on_tasks([job(i) for i in range(10)])
    assert policy.on_child_results(1, 3, 5) == [Refuse(1)]   # leaf 0 busy: not split
    assert steals(policy) == counts()            # a refused refill is no failed steal
    assert outstanding(policy) == [5, 2]
    assert not any(c.split_pending for c in policy.children)
    # once leaf 1 has run dry, its idle request splits leaf 0
    assert policy.on_child_results(1, 2, 5, idle=True) == [AskSplit(0, 5)]


def test_a_child_that_splits_nothing_is_dry_until_it_returns_results():
    policy = root([("leaf", 1, 5), ("leaf", 1, 5)])
    policy.on_tasks([job(i) for i in range(10)])
    assert policy.on_child_results(1, 5, 5, idle=True) == [AskSplit(0, 5)]
    # nothing to hand over, and no other child to split: leaf 0 still holds work, so
    # the waiting leaf is parked (no answer), not refused
    assert policy.on_split_answer(0, []) == []
    assert policy.children[0].dry_until == DRY_S and outstanding(policy) == [5, 0]
    assert policy.children[1].split_wait and policy.children[1].want == 5
    assert policy.on_child_results(1, 0, 5, idle=True) == []     # still dry: parked
    # leaf 0 reports a result: no longer dry, it is split for the parked leaf at once
    assert policy.on_child_results(0, 1, 0) == [AskSplit(0, 5)]
    assert policy.children[0].dry_until == 0.0
    assert steals(policy) == counts()


def test_a_dry_router_is_split_again_when_its_wait_is_over():
    """A router that had nothing to give holds busy leaves: they spawn more. The
    parked request tries again after DRY_S, without any message to wake it (measured
    before: 32 sleeping leaves, 30 of them idle for 35 s beside two busy ones)."""
    clock = Clock()
    policy = root([("router", 2, 5), ("router", 2, 5)], clock)
    # one task: router 0 takes it, and router 1's initial share is split off router 0
    assert policy.on_tasks([job(0)]) == [Give(0, [job(0)]), AskSplit(0, 5)]
    assert policy.retry_in() is None                # a split is under way
    assert policy.on_child_results(1, 0, 20, idle=True) == []
    # router 0 had nothing to give, and says its own leaves are idle too: it is
    # refused (its work is its own), router 1 stays parked
    assert policy.on_split_answer(0, []) == []
    assert policy.on_child_results(0, 0, 20, idle=True) == [Refuse(0)]
    assert policy.children[1].split_wait and outstanding(policy) == [1, 0]
    assert policy.retry_in() == DRY_S               # parked, with work in router 0
    clock.t = DRY_S / 2
    assert policy.retry_in() == DRY_S / 2
    clock.t = DRY_S
    assert policy.retry_in() == 0.0
    # router 0 still holds work: it is split again (its idle flag is stale)
    assert policy.retry() == [AskSplit(0, 20)]
    assert policy.retry_in() is None
    stolen = [spawn((0, 1), 5), spawn((0, 1), 6)]     # spawns of a leaf of router 0
    assert policy.on_split_answer(0, stolen) == [Give(1, stolen)]
    assert outstanding(policy) == [1, 2]
    assert steals(policy) == counts(steals_failed=1)     # (routers count their leaves)


def test_retry_wakes_once_per_dry_spell():
    """A retry that picks nobody (the dry child is the one waiting) leaves nothing
    due: the node does not wake again and again."""
    clock = Clock()
    policy = root([("router", 2, 5), ("leaf", 1, 5)], clock)
    assert policy.on_tasks([job(0), job(1)]) == [Give(0, [job(0)]), Give(1, [job(1)])]
    # the leaf waits at sync (idle, holding its task); the router, idle as well,
    # gives nothing: nobody can be split
    assert policy.on_child_results(1, 0, 5, idle=True) == [AskSplit(0, 5)]
    assert policy.on_split_answer(0, []) == []
    assert policy.on_child_results(0, 0, 20, idle=True) == []
    clock.t = DRY_S
    assert policy.retry_in() == 0.0
    # both children wait themselves (the router for its own leaves' splits): nobody
    # to split here, and nothing is due any more
    assert policy.retry() == []
    assert policy.retry_in() is None
    clock.t = 2 * DRY_S
    assert policy.retry_in() is None


def test_splits_are_asked_of_the_busy_children_in_turn():
    """Rule: an idle child's split goes to the busy children in turn, from the one
    after the last asked, not again to the one that holds the most tasks (a count of
    tasks handed over says nothing of the work left in them: the same leaves were
    split again and again for smaller pieces; simulated 32-leaf sleep tree 0.85 to
    0.91). Leaf 0 gave a split and still holds the most: the next goes to leaf 1,
    then leaf 2 (leaf 3 asks), then leaf 0 again."""
    policy = root([("leaf", 1, 5), ("leaf", 1, 5), ("leaf", 1, 5), ("leaf", 1, 5)])
    policy.on_tasks([job(i) for i in range(20)])
    policy.on_child_results(1, 2, 0)
    policy.on_child_results(2, 3, 0)
    assert outstanding(policy) == [5, 3, 2, 5]
    assert policy.on_child_results(3, 5, 5, idle=True) == [AskSplit(0, 5)]
    s1, s2 = spawn((0,), 1), spawn((1,), 1)
    assert policy.on_split_answer(0, [s1]) == [Give(3, [s1])]
    assert policy.on_child_results(3, 1, 5, idle=True) == [AskSplit(1, 5)]
    assert policy.on_split_answer(1, [s2]) == [Give(3, [s2])]
    assert policy.on_child_results(3, 1, 5, idle=True) == [AskSplit(2, 5)]
    assert policy.on_split_answer(2, []) == [AskSplit(0, 5)]
    assert steals(policy) == counts(steals_split=2)


def test_a_dry_child_is_passed_over_for_another_busy_one():
    policy = root([("leaf", 1, 5), ("leaf", 1, 5), ("leaf", 1, 5)])
    policy.on_tasks([job(i) for i in range(15)])
    assert policy.on_child_results(1, 3, 0) == []
    assert policy.on_child_results(2, 5, 5, idle=True) == [AskSplit(0, 5)]  # 1st in turn
    assert policy.on_split_answer(0, []) == [AskSplit(1, 5)]
    stolen = [job(8), job(9)]
    assert policy.on_split_answer(1, stolen) == [Give(2, stolen)]
    assert outstanding(policy) == [5, 0, 2]
    assert steals(policy) == counts(steals_split=1)


def test_outstanding_counts_only_tasks_owned_outside_the_child():
    """Results of a child's own spawns stay in its subtree; only the others come back
    through this node (at the root, path (), and at a router, path (2,))."""
    policy = root([("leaf", 1, 1), ("leaf", 1, 1)])
    assert policy.on_tasks([spawn((0,), 1), spawn((1,), 2)]) == [
        Give(0, [spawn((0,), 1)]), Give(1, [spawn((1,), 2)])]
    assert outstanding(policy) == [0, 0]                 # each got its own spawn back
    assert policy.on_tasks([spawn((1,), 3), job(4)]) == [
        Give(0, [spawn((1,), 3)]), Give(1, [job(4)])]
    assert outstanding(policy) == [1, 1]

    policy = router(leaves=2, quota=2)
    policy.path = (2,)
    mine, foreign, cousin, other = (spawn((2, 0), 1), spawn((0, 0), 2),
                                    spawn((2, 1), 3), spawn((2, 0), 4))
    assert policy.on_tasks([mine, foreign, cousin, other]) == [
        Give(0, [mine, foreign]), Give(1, [cousin, other])]
    # (0, 0) is outside the router although its index at depth 1 is 0
    assert outstanding(policy) == [1, 1]


def test_route_keeps_root_results_and_sends_split_results_towards_their_owner():
    policy = root([("router", 2, 10), ("router", 2, 10)])
    results = [(7, "r7"), (((0, 3), 1), "a"), (((1,), 2), "b"), (8, "r8"),
               (((0, 3), 5), "c")]
    assert policy.route(results) == (
        [(7, "r7"), (8, "r8")],
        [Route(0, [(((0, 3), 1), "a"), (((0, 3), 5), "c")]), Route(1, [(((1,), 2), "b")])])

    policy = router(leaves=2)
    policy.path = (1,)
    results = [(((0, 2), 1), "up"), (((1, 1), 2), "b"), (5, "r5"), (((1, 0), 3), "c")]
    assert policy.route(results) == (
        [(5, "r5")],
        [Route(1, [(((1, 1), 2), "b")]), Route(0, [(((1, 0), 3), "c")]),
         SendResults([(((0, 2), 1), "up")])])
    assert policy.route([(9, "r9")]) == ([(9, "r9")], [])


def test_a_router_asked_to_split_yields_from_its_pool():
    policy = router(leaves=2, quota=5)
    policy.path = (2,)
    tasks = [job(i) for i in range(14)]
    assert sizes(policy.on_tasks(tasks)) == [("Give", 0, 5), ("Give", 1, 5)]
    # at most half the pool, the tasks its children would get last
    assert policy.on_split_request(3) == [Yield(tasks[12:])]
    assert list(policy.pool) == tasks[10:12]
    assert policy.on_split_request(3) == [Yield(tasks[11:12])]
    assert not any(c.split_pending for c in policy.children)
    assert outstanding(policy) == [5, 5] and steals(policy) == counts()


def test_a_router_with_an_empty_pool_splits_every_busy_child_for_its_parent():
    """The parent asks only when the rest of its tree has nothing to split: a whole
    subtree waits on the answer, so every busy child is asked at once, and the first
    to give anything answers the parent; later answers stay in the pool (32 sleeping
    leaves under routers: 0.48-0.54 efficiency with one child split per request,
    0.59-0.69 with all in one answer, 0.70-0.76 answering with the first)."""
    policy = router(leaves=2, quota=5)
    policy.path = (2,)
    policy.on_tasks([job(i) for i in range(10)])
    assert policy.on_split_request(4) == [AskSplit(0, 4), AskSplit(1, 4)]
    assert policy.busy()
    stolen = [job(3), job(4), spawn((2, 0), 1)]
    # the first answer goes up at once (no child of this router waits: no steal
    # here); the later one stays in the pool for the next request
    assert policy.on_split_answer(0, stolen) == [Yield(stolen)]
    assert policy.on_split_answer(1, [job(9)]) == []
    assert outstanding(policy) == [3, 4] and list(policy.pool) == [job(9)]
    assert steals(policy) == counts()
    assert policy.on_split_request(4) == [Yield([job(9)])]
    # a child that gives nothing is passed over for DRY_S; one answer all the same
    assert policy.on_split_request(4) == [AskSplit(0, 4), AskSplit(1, 4)]
    assert policy.on_split_answer(1, []) == []
    assert policy.on_split_answer(0, []) == [Yield([])]
    assert policy.on_split_request(4) == [Yield([])]     # both dry for now
    assert policy.split_up == 0 and steals(policy) == counts()


def test_a_router_serves_its_own_waiting_leaf_before_the_parent_split():
    """Work split off a child while both the parent and a child of this router wait
    goes to the child first (a local steal before a remote one); the rest goes up.
    (Measured before: 32 sleeping leaves under routers, 0.38 efficiency; after, 0.5.)"""
    policy = router(leaves=3, quota=5)
    policy.path = (2,)
    policy.on_tasks([job(i) for i in range(15)])
    assert outstanding(policy) == [5, 5, 5]
    # leaf 2 ran its share and waits; the parent has no more
    assert policy.on_child_results(2, 5, 2, idle=True) == [AskParent([], 24, False)]
    assert policy.on_nomore() == [AskSplit(0, 2)]
    # the parent asks too: the other busy child is split as well
    assert policy.on_split_request(4) == [AskSplit(1, 4)]
    stolen = [spawn((2, 0), 1), spawn((2, 0), 2), spawn((2, 0), 3)]
    assert policy.on_split_answer(0, stolen) == [Give(2, stolen[:2]), Yield([stolen[2]])]
    assert policy.on_split_answer(1, [spawn((2, 1), 1)]) == []
    assert policy.split_up == 0 and list(policy.pool) == [spawn((2, 1), 1)]
    assert outstanding(policy) == [5, 5, 2]
    assert steals(policy) == counts(steals_remote=1, steals_split=1)


def test_a_router_with_nothing_to_split_yields_nothing():
    policy = router(leaves=2, quota=5)
    assert policy.on_split_request(4) == [Yield([])]
    policy.on_tasks([job(i) for i in range(10)])
    policy.on_child_results(0, 5, 0)
    policy.on_child_results(1, 4, 0, idle=False)
    policy.child_wants(1, 5, idle=True)                  # waits at sync: not split
    assert policy.on_split_request(4) == [Yield([])]
    assert policy.split_up == 0


def test_a_router_asks_its_parent_idle_once_until_no_more():
    policy = router(leaves=2, quota=5, own_quota=10)
    tasks = [job(i) for i in range(10)]
    policy.on_tasks(tasks)
    policy.keep_results([(5, "r5")])
    # the parent may have more: a plain request first (a refill of the pool)
    assert policy.on_child_results(1, 5, 5, idle=True) == [AskParent([(5, "r5")], 20)]
    # it has not: split the busy leaf
    assert policy.on_nomore() == [AskSplit(0, 5)]
    policy.keep_results([(6, "r6")])
    # it has nothing: no child can be split, ask the parent to split elsewhere
    assert policy.on_split_answer(0, []) == [AskParent([(6, "r6")], 20, True)]
    policy.keep_results([(0, "r0")])
    # asked already; nothing is out below any more: the results go up at once
    assert policy.on_child_results(0, 5, 5, idle=True) == [SendResults([(0, "r0")])]
    assert steals(policy) == counts(steals_remote=2)
    # nothing anywhere: both refused
    assert policy.on_nomore() == [Refuse(0), Refuse(1)]
    assert policy.on_child_results(1, 0, 5, idle=True) == [Refuse(1)]  # no new ask
    assert steals(policy) == counts(steals_remote=2, steals_failed=3)
    # new tasks from the parent: it may be asked again
    assert policy.on_tasks([job(10), job(11)]) == [Give(0, [job(10)]), Give(1, [job(11)])]
    assert policy.on_child_results(0, 1, 5, idle=True) == [AskParent([], 20)]
    assert policy.on_nomore() == [AskSplit(1, 5)]
    assert policy.on_split_answer(1, []) == [AskParent([], 20, True)]
    assert steals(policy) == counts(steals_remote=4, steals_failed=3)


def test_a_routers_idle_request_splits_its_siblings_a_refill_does_not():
    policy = root([("router", 2, 10), ("router", 2, 10)])
    tasks = [job(i) for i in range(20)]
    policy.on_tasks(tasks)
    assert policy.on_child_results(1, 10, 20) == [Refuse(1)]
    assert policy.on_child_results(1, 0, 20, idle=True) == [AskSplit(0, 20)]
    stolen = [job(8), job(9), spawn((0, 1), 1)]
    assert policy.on_split_answer(0, stolen) == [Give(1, stolen)]
    assert outstanding(policy) == [8, 3]
    # the refused refill is no failed steal, and a router's batch is no leaf's steal:
    # router 1 counts it when its leaf gets it
    assert steals(policy) == counts()


def test_a_leaf_served_by_a_split_higher_up_counts_at_its_router():
    policy = router(leaves=2, quota=5)
    policy.path = (1,)
    policy.on_tasks([job(i) for i in range(10)])
    assert policy.on_child_results(1, 5, 5, idle=True) == [AskParent([], 20)]
    assert policy.on_nomore() == [AskSplit(0, 5)]
    assert policy.on_split_answer(0, []) == [AskParent([], 20, True)]
    stolen = [job(12), spawn((0, 1), 1)]                 # split off router (0,)'s leaf
    assert policy.on_tasks(stolen) == [Give(1, stolen)]
    assert steals(policy) == counts(steals_remote=2, steals_split=1)
    assert outstanding(policy) == [5, 2]


def test_two_idle_leaves_share_one_split_each_batch_a_split_steal():
    policy = root([("leaf", 1, 5), ("leaf", 1, 5), ("leaf", 1, 5)])
    policy.on_tasks([job(i) for i in range(15)])
    assert policy.on_child_results(1, 5, 5, idle=True) == [AskSplit(0, 5)]
    assert policy.on_child_results(2, 5, 5, idle=True) == []     # waits for the same
    stolen = [job(3), job(4), spawn((0,), 1), spawn((0,), 2)]
    assert policy.on_split_answer(0, stolen) == [Give(1, stolen[:2]), Give(2, stolen[2:])]
    assert steals(policy) == counts(steals_split=2)      # two batches, two steals
    assert outstanding(policy) == [3, 2, 2] and not policy.pool


def test_counters_add_up_over_a_round_with_splits():
    """A router (path (0,)) of three leaves through one round, every message in order:
    the leaves' batches = initial shares + local + after-remote + split steals, each
    leaf's last (idle) request is its one failed steal, and the round ends with
    nothing outstanding."""
    policy = router(leaves=3, quota=2, own_quota=6)
    policy.path = (0,)
    batches = []

    def step(actions):
        batches.extend(a for a in actions if isinstance(a, Give))
        return actions

    t = [job(i) for i in range(10)]
    s1, s2, s3 = (spawn((0, 1), n) for n in (1, 2, 3))      # spawns of leaf 1's task 7
    assert step(policy.on_tasks(t[:8])) == [Give(0, t[0:2]), Give(1, t[2:4]),
                                            Give(2, t[4:6])]
    assert step(policy.on_child_results(0, 2, 2)) == [Give(0, [t[6]])]      # local
    assert step(policy.on_child_results(1, 2, 2)) == [Give(1, [t[7]])]      # local
    assert step(policy.on_child_results(2, 2, 2)) == [AskParent([], 12)]
    assert step(policy.on_tasks(t[8:10])) == [Give(2, [t[8]])]    # after remote
    assert step(policy.on_child_results(2, 1, 2, idle=True)) == [Give(2, [t[9]])]
    assert step(policy.on_child_results(0, 1, 2, idle=True)) == [AskParent([], 12)]
    assert step(policy.on_nomore()) == [AskSplit(1, 2)]      # the first busy leaf
    # two leaves wait and only one can be split: the router asks across as well
    assert step(policy.on_child_results(2, 1, 2, idle=True)) == [AskParent([], 12, True)]
    # leaf 1 splits three spawns off task 7 for leaves 0 and 2 (one left in the pool)
    assert step(policy.on_split_answer(1, [s1, s2, s3])) == [Give(0, [s1]), Give(2, [s2])]
    assert outstanding(policy) == [1, 1, 1]
    # leaf 1 waits at sync: it takes its last spawn back from the pool
    assert step(policy.on_child_results(1, 0, 2, idle=True)) == [Give(1, [s3])]
    assert outstanding(policy) == [1, 1, 1]               # its own spawn: not counted
    # leaf 0 returns s1's result (routed to leaf 1); nothing left to split
    assert policy.route([(s1[0], "r1")]) == ([], [Route(1, [(s1[0], "r1")])])
    # in turn: leaf 1 was asked last, so leaf 2 first, then leaf 1
    assert step(policy.on_child_results(0, 1, 2, idle=True)) == [AskSplit(2, 2)]
    assert step(policy.on_split_answer(2, [])) == [AskSplit(1, 2)]
    assert step(policy.on_split_answer(1, [])) == []      # its idle request is out
    # nothing outside either, but leaves 1 and 2 still hold work: leaf 0 is parked
    assert step(policy.on_nomore()) == [] and policy.children[0].split_wait
    # leaf 2 is done too; leaf 1 still runs task 7
    assert step(policy.on_child_results(2, 1, 2, idle=True)) == []
    policy.keep_results([(7, "r7")])
    # the last result: the subtree is quiet, every leaf's idle request fails at once
    assert step(policy.on_child_results(1, 1, 2, idle=True)) == [
        Refuse(0), Refuse(1), Refuse(2), SendResults([(7, "r7")])]
    assert outstanding(policy) == [0, 0, 0] and not policy.busy() and not policy.pool
    c = steals(policy)
    assert c == counts(steals_local=4, steals_after_remote=1, steals_split=2,
                       steals_remote=3, steals_failed=3)
    assert len(batches) == 10 == 3 + c["steals_local"] + c["steals_after_remote"] + \
        c["steals_split"]


def test_a_leaf_running_its_own_split_spawn_leaves_its_count_alone():
    """Work a leaf split off can come back to it (nobody else took it); its result
    then comes up from the leaf itself. It was never counted as given, so it must not
    be counted as returned: a negative count made the leaf look busy forever, and it
    got no share of the next round (a hang found in a kept runtime)."""
    policy = root([("leaf", 1, 5), ("leaf", 1, 5)])
    # one task, to leaf 0; leaf 1, with nothing, waits for a split of leaf 0's work
    assert policy.on_tasks([(0, b"t0")]) == [Give(0, [(0, b"t0")]), AskSplit(0, 5)]
    own = (((0,), 3), b"spawn")
    assert policy.on_split_answer(0, [own]) == [Give(1, [own])]
    # leaf 1 is gone on to other work; the spawn comes back and leaf 0 takes it
    policy.children[1].outstanding = 0
    policy.pool.append(own)
    policy.children[0].want, policy.children[0].asked = 5, True
    assert policy.distribute() == [Give(0, [own])]
    assert policy.children[0].outstanding == 1          # the root task only
    mine, routes = policy.results_from(0, [(((0,), 3), b"value")])
    assert mine == [] and routes == [Route(0, [(((0,), 3), b"value")])]
    assert policy.children[0].outstanding == 1
    mine, routes = policy.results_from(0, [(0, b"root result")])
    assert mine == [(0, b"root result")] and routes == []
    assert policy.children[0].outstanding == 0
    policy.begin_round()
    assert policy.children[0].want == 5                  # it gets the next round's share


# parking: an idle request waits while work that could serve it is still out ----------

def parked_behind_a_dry_leaf():
    """A root of two leaves: leaf 1 ran dry, leaf 0 still holds its 5 tasks but
    answered the split with nothing (it is dry), so nothing can be split for leaf 1."""
    policy = root([("leaf", 1, 5), ("leaf", 1, 5)])
    policy.on_tasks([job(i) for i in range(10)])
    assert policy.on_child_results(1, 5, 5, idle=True) == [AskSplit(0, 5)]
    assert policy.on_split_answer(0, []) == []
    return policy


def test_an_idle_leaf_is_parked_while_another_holds_work():
    policy = parked_behind_a_dry_leaf()
    assert policy.children[1].split_wait and policy.children[1].want == 5
    assert policy.child_wants(1, 5, idle=True) == []     # asks again: still parked
    assert outstanding(policy) == [5, 0] and policy.busy()
    assert steals(policy) == counts()


def test_a_parked_leaf_is_served_by_the_busy_leafs_next_split():
    policy = parked_behind_a_dry_leaf()
    # leaf 0 returns two results with a refill: no longer dry, it is split for the
    # parked leaf; its own refill finds nothing and is refused (no failed steal)
    assert policy.on_child_results(0, 2, 5) == [AskSplit(0, 5), Refuse(0)]
    assert policy.on_split_answer(0, [job(3), job(4)]) == [Give(1, [job(3), job(4)])]
    assert outstanding(policy) == [1, 2]
    assert steals(policy) == counts(steals_split=1)


def test_a_parked_leaf_is_refused_once_the_busy_leaf_is_idle_too():
    policy = parked_behind_a_dry_leaf()
    # leaf 0 returns all its results and runs dry: nothing is out, both requests fail
    assert policy.on_child_results(0, 5, 5, idle=True) == [Refuse(0), Refuse(1)]
    assert steals(policy) == counts(steals_failed=2)     # one per leaf
    assert outstanding(policy) == [0, 0] and not policy.busy()


def test_a_leaf_waiting_at_sync_is_never_refused():
    """Leaf 0 of router (1,) waits at sync for a spawn split off to a leaf elsewhere
    (its task is still out): even when nothing else is out and the parent has refused
    the router's idle request, it is not refused (refused, it would ask no more this
    round); its idle sibling waits too, until leaf 0's task comes back."""
    policy = router(leaves=2, quota=1)
    policy.path = (1,)
    t0, t1, s1 = job(0), job(1), spawn((1, 0), 1)
    assert policy.on_tasks([t0, t1]) == [Give(0, [t0]), Give(1, [t1])]
    # every busy child is split for the parent; the first to give answers it
    assert policy.on_split_request(1) == [AskSplit(0, 1), AskSplit(1, 1)]
    assert policy.on_split_answer(0, [s1]) == [Yield([s1])]
    assert policy.on_split_answer(1, []) == []
    assert outstanding(policy) == [1, 1]                 # its own spawn: not counted
    policy.keep_results([(1, "r1")])
    assert policy.on_child_results(1, 1, 1, idle=True) == [AskParent([(1, "r1")], 10)]
    assert policy.on_child_results(0, 0, 1, idle=True) == []    # at sync: waits
    assert policy.on_nomore() == [AskParent([], 10, True)]
    assert policy.on_nomore() == []                      # nothing outside either
    assert policy.split_refused and outstanding(policy) == [1, 0]
    assert policy.child_wants(0, 1, idle=True) == []     # asks again: still waits
    # s1's result comes down; leaf 0 resumes, and then returns its task's result
    assert policy.route([(s1[0], "v1")]) == \
        ([], [Route(0, [(s1[0], "v1")], at_once=True)])
    assert policy.distribute() == [AskSplit(0, 1)]          # woken: split for leaf 1
    policy.keep_results([(0, "r0")])
    assert policy.on_child_results(0, 1, 1, idle=True) == [
        Refuse(0), Refuse(1), SendResults([(0, "r0")])]
    assert steals(policy) == counts(steals_remote=2, steals_failed=2)
    assert outstanding(policy) == [0, 0] and not policy.busy()


def woken_at_the_root():
    """A root of three leaves: leaf 2 runs s1, split off leaf 0's task; leaf 1 ran dry
    and is parked (leaves 0 and 2 answered its split with nothing); leaf 0 waits at
    sync for s1; then s1's result comes up from leaf 2 and goes down to leaf 0."""
    policy = root([("leaf", 1, 1), ("leaf", 1, 1), ("leaf", 1, 1)])
    t, s1 = [job(i) for i in range(3)], spawn((0,), 1)
    assert policy.on_tasks(t) == [Give(0, [t[0]]), Give(1, [t[1]]), Give(2, [t[2]])]
    assert policy.on_child_results(2, 1, 1, idle=True) == [AskSplit(0, 1)]
    assert policy.on_split_answer(0, [s1]) == [Give(2, [s1])]
    # the busy leaves are asked in turn: leaf 0 was the last, so leaf 2 is first now
    assert policy.on_child_results(1, 1, 1, idle=True) == [AskSplit(2, 1)]
    assert policy.on_split_answer(2, []) == [AskSplit(0, 1)]
    assert policy.on_split_answer(0, []) == []
    assert policy.on_child_results(0, 0, 1, idle=True) == []    # at sync
    assert outstanding(policy) == [1, 0, 1]
    assert not policy.children[0].splittable(0.0)          # idle: nothing to split
    assert policy.results_from(2, [(s1[0], "v1")]) == \
        ([], [Route(0, [(s1[0], "v1")], at_once=True)])
    return policy


def test_a_result_routed_to_a_leaf_at_sync_wakes_it():
    policy = woken_at_the_root()
    assert policy.children[0].woken and policy.children[0].splittable(0.0)
    assert not policy.children[2].woken                  # it sent the result
    # a result for a leaf that is not idle wakes nothing
    policy = root([("leaf", 1, 1), ("leaf", 1, 1)])
    s1 = spawn((0,), 1)
    policy.on_tasks([job(0), s1])
    assert policy.route([(s1[0], "v1")]) == ([], [Route(0, [(s1[0], "v1")])])
    assert not policy.children[0].woken
    # the woken leaf's next request (it ran dry again) puts it back to sleep
    policy = woken_at_the_root()
    assert policy.child_wants(0, 1, idle=True) == []
    assert not policy.children[0].woken and not policy.children[0].splittable(0.0)


def test_results_for_a_leaf_waiting_at_sync_go_at_once_the_next_may_wait():
    """Rule: the first results routed to a leaf that said it has nothing left to run
    go now (``Route.at_once``: its sync may wait for them); more before it asks
    again may wait to go with others (it is computing again)."""
    policy = woken_at_the_root()                # s1's result went to leaf 0 at once
    assert not policy.waiting(0) and not policy.waiting(2)
    s2 = spawn((0,), 2)
    assert policy.route([(s2[0], "v2")]) == ([], [Route(0, [(s2[0], "v2")])])
    assert policy.child_wants(0, 1, idle=True) == []      # it waits again
    assert policy.waiting(0)
    assert policy.route([(s2[0], "v2")]) == \
        ([], [Route(0, [(s2[0], "v2")], at_once=True)])


def test_a_parked_leaf_splits_a_woken_sibling():
    """Rule: a woken leaf may be computing again and can be split; the parked leaf's
    next distribute (leaf 2's request after its result, as Node handles RESULTS)
    asks it for work."""
    policy = woken_at_the_root()
    actions = policy.child_wants(2, 0)
    assert [(type(a), a.child) for a in actions] == [(AskSplit, 0)]


def parked_below_a_router():
    """A router whose two leaves ran dry, with nothing left out below it: it asked its
    parent for a refill, then (no more) to split elsewhere; the leaves wait."""
    policy = router(leaves=2, quota=5, own_quota=10)
    policy.on_tasks([job(i) for i in range(10)])
    policy.keep_results([(0, "r0")])
    assert policy.on_child_results(0, 5, 5, idle=True) == [AskParent([(0, "r0")], 20)]
    assert policy.on_child_results(1, 5, 5, idle=True) == []     # asked already
    assert policy.on_nomore() == [AskParent([], 20, True)]
    # asked once: the leaves' repeated requests wait, nothing goes up again
    assert policy.child_wants(0, 5, idle=True) == []
    assert policy.child_wants(1, 5, idle=True) == []
    assert [c.split_wait for c in policy.children] == [True, True]
    assert outstanding(policy) == [0, 0] and policy.requested
    assert steals(policy) == counts(steals_remote=2)
    return policy


def test_a_router_parks_its_idle_leaves_until_no_more_then_refuses_them():
    policy = parked_below_a_router()
    assert policy.on_nomore() == [Refuse(0), Refuse(1)]
    assert steals(policy) == counts(steals_remote=2, steals_failed=2)
    assert policy.split_refused and not policy.busy()
    # a later idle request in this round is refused at once, with no new ask
    assert policy.child_wants(1, 5, idle=True) == [Refuse(1)]
    assert steals(policy) == counts(steals_remote=2, steals_failed=3)


def test_a_router_gives_its_parked_leaves_the_tasks_split_for_them_elsewhere():
    policy = parked_below_a_router()
    stolen = [job(20), job(21), job(22), job(23)]
    assert policy.on_tasks(stolen) == [Give(0, stolen[:2]), Give(1, stolen[2:])]
    assert steals(policy) == counts(steals_remote=2, steals_split=2)
    assert outstanding(policy) == [2, 2] and not policy.split_refused


def test_a_split_voided_by_an_idle_request_still_answers_the_parent():
    """The parent asks router to split; the router passes it to leaf 0, whose idle
    request crosses the SPLIT (stealing.roles.leaf ignores a SPLIT once idle). The parent
    must still get an answer, and the router must not stay busy after the round."""
    policy = router(leaves=2, quota=5)
    policy.on_tasks([job(i) for i in range(10)])
    actions = policy.on_split_request(4)
    assert actions == [AskSplit(0, 4), AskSplit(1, 4)]
    actions += policy.on_child_results(0, 5, 5, idle=True)
    actions += policy.on_nomore()
    actions += policy.on_child_results(1, 5, 5, idle=True)
    actions += policy.on_nomore()
    assert Refuse(0) in actions and Refuse(1) in actions     # the round is over
    assert sum(isinstance(a, Yield) for a in actions) == 1
    assert policy.split_up == 0 and not policy.busy()


# a lost child (stealing.roles.node.Node.lose_child under Open MPI's ULFM) --------------
def test_a_lost_leaf_s_tasks_go_back_to_the_head_of_the_pool_and_to_the_others():
    policy = root([("leaf", 1, 2), ("leaf", 1, 2)])
    tasks = [(i, f"t{i}".encode()) for i in range(6)]
    assert policy.on_tasks(tasks) == [Give(0, tasks[0:2]), Give(1, tasks[2:4])]
    mine, _ = policy.results_from(0, [(0, b"r0")])          # leaf 0 returned task 0
    assert mine == [(0, b"r0")] and policy.children[0].held == {1: tasks[1]}
    redone, actions = policy.lose_child(0)
    assert redone == [tasks[1]]
    assert list(policy.pool) == [tasks[1], tasks[4], tasks[5]]     # redone one first
    assert actions == []        # leaf 1 still holds work and asks for nothing yet
    assert policy.losses == {"leaves_lost": 1, "routers_lost": 0, "leaves_removed": 0,
                             "tasks_redone": 1, "results_dropped": 0}
    assert policy.children[0].lost and policy.children[0].outstanding == 0
    # leaf 1 returns its batch and asks: it is served the redone task first
    policy.results_from(1, [(2, b"r2"), (3, b"r3")])
    assert policy.child_wants(1, 2) == [Give(1, [tasks[1], tasks[4]])]
    policy.begin_round()
    assert policy.children[0].want == 0         # a lost child gets no share any more


def test_a_second_copy_of_a_result_is_dropped():
    policy = root([("leaf", 1, 1), ("leaf", 1, 1)])
    policy.on_tasks([(0, b"a"), (1, b"b")])
    mine, _ = policy.results_from(0, [(0, b"r0")])
    assert mine == [(0, b"r0")]
    mine, _ = policy.results_from(0, [(0, b"r0 again")])    # not held any more
    assert mine == [] and policy.losses["results_dropped"] == 1
    assert policy.children[0].outstanding == 0


def test_results_for_work_split_off_a_lost_leaf_are_dropped():
    """Leaf 0 ran a root task whose spawn leaf 1 stole; leaf 0 dies: its task is
    redone (new spawns, new ids), and the stolen spawn's result, on its way to the dead
    owner, is dropped instead of being routed to it."""
    policy = root([("leaf", 1, 5), ("leaf", 1, 5)])
    assert policy.on_tasks([(0, b"t0")]) == [Give(0, [(0, b"t0")]), AskSplit(0, 5)]
    spawn_ = (((0,), 1), b"spawn")
    assert policy.on_split_answer(0, [spawn_]) == [Give(1, [spawn_])]
    assert policy.children[1].held == {((0,), 1): spawn_}    # its owner is outside leaf 1
    redone, _ = policy.lose_child(0)
    assert redone == [(0, b"t0")]
    mine, routes = policy.results_from(1, [(((0,), 1), b"value")])
    assert mine == [] and routes == []
    assert policy.losses["results_dropped"] == 1 and policy.children[1].outstanding == 0


def test_a_lost_child_owing_the_parent_a_split_answers_it_empty():
    policy = router(leaves=2, quota=2)
    tasks = [(i, b"x") for i in range(4)]
    policy.on_tasks(tasks)
    assert policy.on_split_request(3) == [AskSplit(0, 3), AskSplit(1, 3)]
    redone, actions = policy.lose_child(0)
    assert redone == tasks[0:2]
    # the redone tasks are in the pool: they answer the parent's split at once
    assert actions == [Yield(tasks[0:2])]


def test_a_joining_child_wants_its_share_at_once():
    policy = root([("leaf", 1, 2)])
    policy.on_tasks([(i, b"x") for i in range(5)])
    k = policy.join_child("leaf", 1, 2)
    assert k == 1 and policy.children[1].want == 2 and policy.children[1].idle
    assert policy.distribute() == [Give(1, [(2, b"x"), (3, b"x")])]


# --- shares by speed ------------------------------------------------------------------
def _drain(rates, batch_s=0.05, overhead_s=0.0, floor=None, tasks=4000):
    """Run ``tasks`` independent tasks through a root's policy on leaves of these
    ``rates`` (tasks/s); a batch of n takes ``overhead_s + n / rate``; each leaf asks for
    ``batch_s`` of work at its rate (at least ``floor[k]``) when its batch is done, and
    reports its rate. Returns the tasks each leaf ran and the time the last one ended."""
    import heapq
    clock = Clock()
    policy = StealPolicy(2.0, has_parent=False, now=clock)
    for _ in rates:
        policy.add_child("leaf", 1, 5)
    ran = [0] * len(rates)
    events = []     # (time, leaf, tasks in its batch)

    def act(actions):
        for a in actions:
            if isinstance(a, Give):
                n = len(a.tasks)
                heapq.heappush(events, (clock.t + overhead_s + n / rates[a.child],
                                        a.child, n))

    act(policy.on_tasks([(i, b"") for i in range(tasks)]))
    end = 0.0
    while events:
        clock.t, k, n = heapq.heappop(events)
        ran[k] += n
        end = clock.t
        want = max((floor or {}).get(k, 1), round(rates[k] * batch_s))
        policy.note_rate(k, rates[k])               # what its RESULTS say
        act(policy.on_child_results(k, n, want, idle=True))
    assert sum(ran) == tasks
    return ran, end


def test_a_leaf_50_times_faster_than_each_of_16_others_gets_its_share_by_rate():
    """Grants follow the children's measured rates (share = rate / sum of rates), not
    their processor counts: a leaf 50x faster than each of 16 others, asking for
    2048 tasks like a GPU leaf, gets a batch sized by its rate, and the run ends
    near the ideal time. (Before: at most ceil(pool / 17) per grant, whatever its rate.)"""
    rates = [50_000.0] + [1000.0] * 16
    policy = root([("leaf", 1, 5)] * 17)
    for k, r in enumerate(rates):
        policy.note_rate(k, r)
    policy.on_tasks([(i, b"") for i in range(4000)])
    policy.children[0].outstanding = 0
    acts = policy.child_wants(0, 2048, idle=True)
    assert sizes(acts) == [("Give", 0, 2048)]       # 2048 <= 3915 * 50/66
    # the whole run: a batch costs 2 ms more than its tasks (a GPU's launch)
    ran, end = _drain(rates, overhead_s=0.002, floor={0: 2048})
    ideal = 4000 / sum(rates)
    assert ran[0] / 4000 >= 0.70            # its rate's share is 50/66 = 0.76
    assert end <= 1.25 * ideal              # (before: 2.08x, the fast leaf 55%)


def test_without_measured_rates_shares_follow_processors():
    policy = root([("leaf", 1, 5)] * 16 + [("router", 16, 50)])
    policy.on_tasks([(i, b"") for i in range(320)])
    policy.children[16].outstanding = 0
    acts = policy.child_wants(16, 10_000, idle=True)
    # the round's quotas went first: 16 * 5 + 50, then at most its processors' half
    assert sizes(acts) == [("Give", 16, -(-(320 - 130) * 16 // 32))]


def test_a_subtree_reports_the_sum_of_its_childrens_rates():
    policy = router(leaves=3)
    assert policy.subtree_rate() == 0.0                 # nothing measured yet
    policy.note_rate(0, 100.0)
    assert policy.subtree_rate() == 300.0               # the others as fast, per processor
    policy.note_rate(1, 50.0)
    policy.note_rate(2, 10.0)
    assert policy.subtree_rate() == 160.0


def test_once_rates_are_measured_a_round_starts_with_shares_by_speed():
    """Initial quotas follow the measured rates too (rate / sum of rates of the round's
    quotas): the next job on a kept tree gives a leaf 50x faster than each of 16
    others its share at once. Before, every child started with its processors' quota
    (5 each)."""
    policy = root([("leaf", 1, 5)] * 17)
    rates = [50_000.0] + [1000.0] * 16
    for k, r in enumerate(rates):
        policy.note_rate(k, r)
    acts = policy.on_tasks([(i, b"") for i in range(85)])
    given = dict((k, n) for _, k, n in sizes(acts))
    assert given[0] == round(85 * 50 / 66) == 64
    assert all(given[k] == 1 for k in range(1, 17))


def test_a_child_not_measured_yet_keeps_its_quota_at_the_start_of_a_round():
    policy = root([("leaf", 1, 5)] * 3)
    policy.note_rate(0, 300.0)          # the others: as fast per processor, not measured
    acts = policy.on_tasks([(i, b"") for i in range(100)])
    assert sizes(acts) == [("Give", 0, 5), ("Give", 1, 5), ("Give", 2, 5)]
