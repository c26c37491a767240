"""The steal rules alone (stealing/policy.py): no MPI, no processes, a fake clock.

Each test drives a ``StealPolicy`` with the events a node sees and checks the actions
it returns, message for message, and its counters, with exact numbers.
"""

from collections import deque

import pytest

from stealing import plan_tree
from stealing.policy import AskParent, Give, Refuse, SendResults, StealPolicy


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


def root(children):
    """The root's policy; ``children`` are ``(role, procs, quota)``."""
    policy = StealPolicy(2.0, has_parent=False)
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
        assert [a.tasks for a in actions] == _slices(tasks, [k.tasks for k in node.children])
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
    assert policy.on_child_results(1, 5, 5) == []       # one request at a time
    assert policy.counters["steals_remote"] == 1 and policy.requested
    clock.t += 0.01
    assert policy.on_tasks(list(range(100, 120))) == [Give(0, [100, 101, 102, 103, 104]),
                                                      Give(1, [105, 106, 107, 108, 109])]
    assert policy.rtt == pytest.approx(0.01)
    assert policy.counters == {"steals_local": 0, "steals_remote": 1,
                               "steals_after_remote": 2, "steals_split": 0, "steals_failed": 0,
                               "remote_pool_max": 0, "low_water": 0}
    assert policy.results == ["r2"]                      # goes up with the next request


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
    policy = router()
    policy.on_tasks(list(range(10)))
    policy.keep_results(["a"])
    assert policy.on_child_results(0, 5, 5) == [AskParent(["a"], 20)]
    assert policy.on_nomore() == [Refuse(0)]
    policy.keep_results(["b"])
    # the last child's request fails too, and the idle subtree's results go up
    assert policy.on_child_results(1, 5, 5) == [Refuse(1), SendResults(["b"])]
    assert policy.on_child_results(0, 0, 0) == []        # nothing asks any more
    assert policy.counters == {"steals_local": 0, "steals_remote": 1,
                               "steals_after_remote": 0, "steals_split": 0,
                               "steals_failed": 2,
                               "remote_pool_max": 0, "low_water": 0}
    assert not policy.busy()


def test_no_more_is_held_back_while_the_root_is_still_feeding():
    policy = root([("leaf", 1, 5), ("leaf", 1, 5)])
    policy.feeding = True
    policy.on_tasks(list(range(10)))
    assert policy.on_child_results(0, 5, 5) == []        # waits: more tasks may come
    assert policy.children[0].want == 5
    assert policy.on_tasks([10, 11, 12, 13, 14]) == [Give(0, [10, 11, 12])]
    assert policy.on_child_results(1, 5, 5) == [Give(1, [13])]
    assert policy.on_child_results(0, 3, 5) == [Give(0, [14])]
    assert policy.on_child_results(1, 1, 5) == []        # held back again
    assert policy.stop_feeding() == [Refuse(1)]          # the round has every task now
    assert policy.on_child_results(0, 1, 5) == [Refuse(0)]
    assert policy.counters == {"steals_local": 3, "steals_remote": 0,
                               "steals_after_remote": 0, "steals_split": 0,
                               "steals_failed": 2}


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
    ("blocking", 36, 20, 12, 9),
    ("prefetch", 35, 24, 7, 9),         # asking early: fewer leaves wait for the parent
])
def test_counters_add_up_over_a_whole_round(remote, batches, local, after_remote, asked):
    """A root, two routers of two leaves, messages delivered in order: every task comes
    back once, and the leaves' batches = initial + local + after-remote steals."""
    tasks, leaf_batches, counts = simulate(100, remote)
    assert sorted(tasks) == list(range(100))
    assert (leaf_batches, counts["local"], counts["after_remote"], counts["remote"]) == \
        (batches, local, after_remote, asked)
    assert leaf_batches == 4 + counts["local"] + counts["after_remote"]
    assert counts["root_failed"] == 2                    # one per router
    assert counts["router_failed"] == 4                  # one per leaf


def simulate(total: int, remote: str):
    """Run one round through three levels of policies; leaves solve a batch at once and
    ask for 5 more. Returns (results at the root, batches leaves got, counters)."""
    top = root([("router", 2, 20), ("router", 2, 20)])
    routers = [router(remote=remote, own_quota=20) for _ in range(2)]
    queue: deque = deque()
    collected, batches = [], 0

    def from_root(actions):
        for a in actions:
            queue.append(("router", a.child, type(a), getattr(a, "tasks", None)))

    def from_router(r, actions):
        nonlocal batches
        for a in actions:
            if isinstance(a, Give):
                batches += 1
                queue.append(("leaf", (r, a.child), Give, a.tasks))
            elif isinstance(a, Refuse):
                queue.append(("leaf", (r, a.child), Refuse, None))
            else:
                amount = a.amount if isinstance(a, AskParent) else 0
                queue.append(("root", r, a.results, amount))

    from_root(top.on_tasks(list(range(total))))
    while queue:
        where, who, *rest = queue.popleft()
        if where == "root":
            results, amount = rest
            collected.extend(results)
            from_root(top.on_child_results(who, len(results), amount))
        elif where == "router":
            kind, payload = rest
            policy = routers[who]
            from_router(who, policy.on_tasks(payload) if kind is Give
                        else policy.on_nomore())
        elif rest[0] is Give:                            # a leaf solves its batch
            r, k = who
            routers[r].keep_results(rest[1])
            from_router(r, routers[r].on_child_results(k, len(rest[1]), 5))
    counters = [p.counters for p in routers]
    return collected, batches, {
        "local": sum(c["steals_local"] for c in counters),
        "after_remote": sum(c["steals_after_remote"] for c in counters),
        "remote": sum(c["steals_remote"] for c in counters),
        "root_failed": top.counters["steals_failed"],
        "router_failed": sum(c["steals_failed"] for c in counters),
    }
