"""The tree plan and the thesis' initial task counts (qtdTarefasRamo, Figure 5.4)."""

import pytest

from stealing import plan_tree, tasks_per_branch
from stealing.tree.plan import split_procs

FIG_5_4 = dict(branches=2, min_procs=2, tasks_per_leaf=5, steal_factor=2)


def shape(node):
    """(role, procs, tasks, [children]) of a plan, recursively."""
    return (node.role, node.procs, node.tasks, [shape(c) for c in node.children])


def leaves(n):
    return [("leaf", 1, 5, [])] * n


# --- tasks_per_branch -------------------------------------------------------------------
@pytest.mark.parametrize("np_, expected", [(7, 220), (4, 80), (3, 30), (2, 20), (14, 880),
                                           (1, 10), (6, 120), (13, 680)])
def test_tasks_per_branch_figure_5_4(np_, expected):
    assert tasks_per_branch(np_, **FIG_5_4) == expected


def test_tasks_per_branch_positional_arguments_in_documented_order():
    assert tasks_per_branch(7, 2, 2, 5, 2) == 220


def test_tasks_per_branch_below_the_split_is_procs_times_leaf_tasks_times_factor():
    # 5 processors with min_procs=8: no split, 5 * 5 * 2
    assert tasks_per_branch(5, branches=2, min_procs=8, tasks_per_leaf=5,
                            steal_factor=2) == 50
    assert tasks_per_branch(3, branches=2, min_procs=2, tasks_per_leaf=7,
                            steal_factor=3) == 63


def test_tasks_per_branch_with_three_branches():
    # 9 >= 2*3 splits into 3+3+3; each 3 < 6 is a leaf group: 3*5*2 = 30
    assert tasks_per_branch(3, branches=3, min_procs=2, tasks_per_leaf=5,
                            steal_factor=2) == 30
    assert tasks_per_branch(9, branches=3, min_procs=2, tasks_per_leaf=5,
                            steal_factor=2) == 180


# --- plan_tree ----------------------------------------------------------------------------
def test_plan_tree_figure_5_4():
    r2 = ("router", 2, 20, leaves(2))
    r3 = ("router", 3, 30, leaves(3))
    r4 = ("router", 4, 80, [r2, r2])
    r7 = ("router", 7, 220, [r4, r3])
    assert shape(plan_tree(14, **FIG_5_4)) == ("root", 14, 0, [r7, r7])


def test_plan_tree_figure_5_4_counts():
    tree = plan_tree(14, **FIG_5_4)
    roles = [n.role for n in tree.walk()]
    assert roles.count("root") == 1
    assert roles.count("router") == 10
    assert roles.count("leaf") == 14
    assert len(tree.leaves()) == 14
    assert all(leaf.tasks == 5 and leaf.procs == 1 for leaf in tree.leaves())


@pytest.mark.parametrize("np_", [1, 2, 3])
def test_small_trees_are_the_root_with_leaves(np_):
    assert shape(plan_tree(np_, **FIG_5_4)) == ("root", np_, 0, leaves(np_))


def test_plan_tree_four_is_the_smallest_split():
    r2 = ("router", 2, 20, leaves(2))
    assert shape(plan_tree(4, **FIG_5_4)) == ("root", 4, 0, [r2, r2])


def test_plan_tree_five_splits_unevenly():
    r3 = ("router", 3, 30, leaves(3))
    r2 = ("router", 2, 20, leaves(2))
    assert shape(plan_tree(5, **FIG_5_4)) == ("root", 5, 0, [r3, r2])


def test_plan_tree_prime_13():
    r2 = ("router", 2, 20, leaves(2))
    r3 = ("router", 3, 30, leaves(3))
    r4 = ("router", 4, 80, [r2, r2])
    r6 = ("router", 6, 120, [r3, r3])
    r7 = ("router", 7, 220, [r4, r3])
    tree = plan_tree(13, **FIG_5_4)
    assert shape(tree) == ("root", 13, 0, [r7, r6])
    assert len(tree.leaves()) == 13
    assert sum(1 for n in tree.walk() if n.role == "router") == 8


def test_plan_tree_min_procs_larger_than_np_gives_only_leaves():
    tree = plan_tree(6, branches=2, min_procs=8, tasks_per_leaf=3, steal_factor=2)
    assert shape(tree) == ("root", 6, 0, [("leaf", 1, 3, [])] * 6)


def test_plan_tree_three_branches():
    tree = plan_tree(7, branches=3, min_procs=2, tasks_per_leaf=5, steal_factor=2)
    # 7 >= 6: 3, 2, 2 processors, each below 6 so they spawn leaves
    assert [(c.role, c.procs, c.tasks, len(c.children)) for c in tree.children] == [
        ("router", 3, 30, 3), ("router", 2, 20, 2), ("router", 2, 20, 2)]


def test_split_procs_gives_the_remainder_to_the_first_children():
    assert split_procs(14, 2) == [7, 7]
    assert split_procs(7, 2) == [4, 3]
    assert split_procs(5, 3) == [2, 2, 1]
    assert split_procs(11, 4) == [3, 3, 3, 2]


def test_render_lists_every_process_with_procs_and_tasks():
    lines = plan_tree(14, **FIG_5_4).render().splitlines()
    assert len(lines) == 1 + 10 + 14
    assert lines[0].startswith("root procs=14 tasks=0")
    assert lines[1].startswith("  router procs=7 tasks=220")
    assert lines[2].startswith("    router procs=4 tasks=80")
    assert lines[3].startswith("      router procs=2 tasks=20")
    assert lines[4].startswith("        leaf procs=1 tasks=5")


# --- validation ---------------------------------------------------------------------------
BAD_VALUES = [
    ("branches", 1, ValueError),
    ("branches", 0, ValueError),
    ("branches", 2.5, TypeError),
    ("min_procs", 0, ValueError),
    ("min_procs", "2", TypeError),
    ("tasks_per_leaf", 0, ValueError),
    ("tasks_per_leaf", -3, ValueError),
    ("steal_factor", 1, ValueError),
    ("steal_factor", 0.5, ValueError),
    ("steal_factor", "2", TypeError),
]


@pytest.mark.parametrize("name, value, error", BAD_VALUES)
def test_tasks_per_branch_rejects_bad_parameters(name, value, error):
    params = dict(FIG_5_4, **{name: value})
    with pytest.raises(error, match=name):
        tasks_per_branch(7, **params)


@pytest.mark.parametrize("name, value, error", BAD_VALUES)
def test_plan_tree_rejects_bad_parameters(name, value, error):
    params = dict(FIG_5_4, **{name: value})
    with pytest.raises(error, match=name):
        plan_tree(7, **params)


@pytest.mark.parametrize("func", [tasks_per_branch, plan_tree])
@pytest.mark.parametrize("np_, error", [(0, ValueError), (-2, ValueError),
                                        (3.0, TypeError), (True, TypeError)])
def test_bad_processor_count(func, np_, error):
    with pytest.raises(error, match="np"):
        func(np_, **FIG_5_4)


@pytest.mark.parametrize("np, routers, leaves_under", [
    (32, 0, [32]), (95, 0, [95]), (96, 4, [24] * 4), (128, 4, [32] * 4),
    (256, 4, [64] * 4), (384, 20, [24] * 16)])
def test_the_default_tree_has_routers_only_above_95_leaves(np, routers, leaves_under):
    """A run's defaults (StealParams(): branches 4, min_procs 24): a router only where
    a node would hold 96 leaves or more; the thesis' 2, 2 gives one per pair."""
    from stealing.tree.plan import StealParams, plan_subtree
    plan = plan_subtree(np, StealParams(), "root", 0)
    assert sum(n.role == "router" for n in plan.walk()) == routers
    assert [len(n.children) for n in plan.walk()
            if n.children and n.children[0].role == "leaf"] == leaves_under
    assert sum(n.role == "router" for n in plan_tree(128).walk()) == 126
