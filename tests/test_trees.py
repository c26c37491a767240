"""Trees of several shapes in both leaf modes: right answer, and statistics that add up.

What the counters count (stealing/tree/policy.py, stealing/roles/leaf.py):

* ``spawns`` — processes a node spawned: its routers or persistent leaves when the tree
  is built, and in spawn-per-batch mode one leaf per batch it gives.
* ``batches`` — TASKS messages received by leaves (a node's gives to its leaves).
* ``steals_local`` — a leaf's steal request (its RESULTS asking for more) answered at
  once from its parent's pool.
* ``steals_remote`` — requests a router sent to its parent because its pool ran low.
* ``steals_after_remote`` — a leaf's request answered with tasks a remote steal brought.
* ``steals_split`` — a leaf's request answered with work split off a busy leaf (here:
  tasks it had queued).
* ``steals_failed`` — idle requests answered "no more" (a refused refill is not one).
* ``tasks`` — tasks solved by a process (leaves, and the root while the leaves start).

In one round where every leaf gets work, each leaf (slot, in spawn mode) and each router
ends with exactly one failed steal: its last (idle) request finds nothing left
anywhere, and after "no more" it asks no more in that round.
"""

import programs
import pytest

import dac
from stealing import plan_tree

DEPTH = 7                     # range_sum(0, 2**7, ...) at depth 7: exactly 128 tasks
TASKS = 2 ** DEPTH
NAP = 0.002


def run_tree(procs, leaf_mode):
    report = dac.run_report(programs.range_sum, 0, TASKS, NAP, procs=procs,
                            leaf_mode=leaf_mode, depth=DEPTH, **THESIS)
    plan = plan_tree(procs)             # the thesis' parameters, as THESIS
    routers = sum(1 for n in plan.walk() if n.role == "router")
    leaf_parents = sum(1 for n in plan.walk() if n.children and
                       n.children[0].role == "leaf")
    return report, report.stats, routers, leaf_parents


def by_role(stats, role):
    return [p for p in stats["processes"] if p["role"] == role]


def leaf_groups(processes):
    """(parent record, [its leaf records]): records come root first, each node followed
    by its subtree, so the leaf records right after a node are its leaves."""
    groups = []
    for i, p in enumerate(processes):
        if p["role"] == "leaf":
            continue
        kids = []
        for q in processes[i + 1:]:
            if q["role"] != "leaf":
                break
            kids.append(q)
        if kids:
            groups.append((p, kids))
    return groups


SHAPES = [(1, 0), (2, 0), (5, 2), (14, 10)]
THESIS = {"branches": 2, "min_procs": 2}    # the thesis' tree: routers above pairs


@pytest.mark.parametrize("procs, routers", SHAPES)
def test_persistent_tree(procs, routers):
    report, stats, n_routers, leaf_parents = run_tree(procs, "persistent")
    assert n_routers == routers
    assert report.result == sum(range(TASKS))
    assert stats["passes"] >= 2 and stats["depth"] == DEPTH

    roots, rtrs, leaves = (by_role(stats, r) for r in ("root", "router", "leaf"))
    assert len(roots) == 1 and stats["processes"][0] is roots[0]
    assert len(rtrs) == routers
    assert len(leaves) == procs
    assert len({p["pid"] for p in stats["processes"]}) == 1 + routers + procs

    # every task solved exactly once, by a leaf or by the root helping at start-up
    assert stats["tasks"] == TASKS
    assert sum(p["tasks"] for p in leaves) + roots[0]["tasks"] == TASKS
    assert all(p["tasks"] == 0 for p in rtrs)

    # one spawn per process of the tree
    assert stats["spawns"] == routers + procs
    assert roots[0]["spawns"] == (2 if routers else procs)

    # every leaf got its initial batch, and extra batches only through steals
    assert all(p["batches"] >= 1 for p in leaves)
    assert stats["batches"] == sum(p["batches"] for p in leaves)
    for parent, kids in leaf_groups(stats["processes"]):
        assert sum(k["batches"] for k in kids) == \
            len(kids) + parent["steals_local"] + parent["steals_after_remote"] + \
            parent["steals_split"]
    assert stats["batches"] == procs + stats["steals_local"] + \
        stats["steals_after_remote"] + stats["steals_split"]
    if not routers:
        # the root is the only parent and it never waits
        assert stats["steals_after_remote"] == 0

    assert stats["steals_failed"] == procs + routers
    assert all(p["steals_local"] == p["steals_remote"] == p["steals_failed"] == 0
               and p["spawns"] == 0 for p in leaves)
    assert roots[0]["steals_remote"] == 0
    if routers:
        assert stats["steals_remote"] >= routers
        assert all(p["steals_remote"] >= 1 for p in rtrs)
    else:
        assert stats["steals_remote"] == 0
    if procs == 14:
        assert stats["steals_remote"] >= 1


@pytest.mark.parametrize("procs, routers", SHAPES)
def test_spawn_per_batch_tree(procs, routers):
    report, stats, n_routers, leaf_parents = run_tree(procs, "spawn")
    assert n_routers == routers
    assert report.result == sum(range(TASKS))
    assert stats["passes"] >= 2

    roots, rtrs, leaves = (by_role(stats, r) for r in ("root", "router", "leaf"))
    assert len(rtrs) == routers
    # the one-shot leaves of a node are merged into one record (pid 0)
    assert len(leaves) == leaf_parents
    assert all(p["pid"] == 0 for p in leaves)

    assert stats["tasks"] == TASKS
    assert sum(p["tasks"] for p in leaves) + roots[0]["tasks"] == TASKS

    # each batch ran in a freshly spawned leaf that solved exactly that batch
    assert stats["batches"] == sum(p["batches"] for p in leaves)
    assert sum(p["processes"] for p in leaves) == stats["batches"]
    assert stats["spawns"] == routers + stats["batches"]
    assert stats["batches"] >= procs
    assert stats["batches"] == procs + stats["steals_local"] + \
        stats["steals_after_remote"] + stats["steals_split"]

    assert stats["steals_failed"] == procs + routers
    if routers:
        assert stats["steals_remote"] >= routers
    else:
        assert stats["steals_remote"] == 0


def test_persistent_tree_on_nqueens_with_routers():
    # depth=3: the thesis' method, 234 calls in the root's pool, handed down the tree
    report = dac.run_report(programs.queens, 9, 0, 0, 0, procs=5, depth=3, **THESIS)
    assert report.result == programs.QUEENS[9]
    assert report.stats["spawns"] == 2 + 5
    assert report.stats["steals_failed"] == 5 + 2


def test_tree_parameters_change_the_shape():
    # branches=3, min_procs=1: 6 processors split into 2+2+2, each a router of 2
    # leaves (2 < 1*3)
    report = dac.run_report(programs.range_sum, 0, 64, 0.0, procs=6, branches=3,
                            min_procs=1, tasks_per_leaf=2, depth=6)
    stats = report.stats
    assert report.result == sum(range(64))
    assert len(by_role(stats, "router")) == 3
    assert len(by_role(stats, "leaf")) == 6
    assert stats["spawns"] == 3 + 6
    assert stats["tasks"] == 64


def test_a_kept_spawn_per_batch_runtime_runs_several_jobs():
    # a leaf spawned for a later job must get every function sent so far, not only the
    # ones new in that job (it failed with KeyError: 'fib#0')
    with dac.Runtime(procs=2, leaf_mode="spawn") as rt:
        assert rt.run(programs.fib, 15) == 610
        assert rt.run(programs.fib, 16) == 987
        assert rt.run(programs.fib_depth3, 17) == 1597
