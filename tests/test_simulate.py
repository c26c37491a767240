"""The stealing simulator (benchmarks/simulate.py): it drives the project's own
``StealPolicy``, is deterministic, runs every node of the sleep tree exactly once, and
its output ends with one JSON object. Small trees only: the whole file takes seconds."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import simulate
from sleep_scale import count, cpu_a_node, startup_steps, tree_bound

from stealing.tree import policy as policy_module

SMALL = simulate.Workload(seed=7, p=0.70, limit=14)


def steady(figures):
    """The figures that do not depend on this machine's speed."""
    return {k: v for k, v in figures.items() if k not in simulate.WALL_KEYS}


def test_it_drives_the_projects_own_steal_policy(monkeypatch):
    calls = []
    real = policy_module.StealPolicy.distribute

    def spy(self, last=-1):
        calls.append(self)
        return real(self, last)

    monkeypatch.setattr(policy_module.StealPolicy, "distribute", spy)
    figures = simulate.simulate(8, "thesis", SMALL)
    assert issubclass(simulate.Counted, policy_module.StealPolicy)
    # every router and the root decided through the real rules
    assert len(set(map(id, calls))) == 1 + figures["routers"]
    assert figures["policy_calls"]["child_wants"] > 0
    assert figures["policy_calls"]["on_split_answer"] > 0


def test_the_same_seed_gives_the_same_run():
    first = simulate.simulate(16, "two-clusters", SMALL)
    again = simulate.simulate(16, "two-clusters", SMALL)
    assert steady(first) == steady(again)
    other = simulate.simulate(16, "two-clusters", simulate.Workload(seed=8, limit=14))
    assert steady(other) != steady(first)


def test_every_node_runs_once_and_efficiency_falls_with_more_leaves(monkeypatch):
    """On the benchmark's default tree (5777 nodes of 20 ms)."""
    work = simulate.Workload()
    nodes = count(work.seed, 0, 0, work.limit, work.p)
    seen = []
    boundary = simulate.SimLeaf._boundary

    def record(self, ev):
        seen.append((self.current[0].d, self.current[0].i))
        boundary(self, ev)

    monkeypatch.setattr(simulate.SimLeaf, "_boundary", record)
    efficiency = {}
    for leaves in (2, 8, 32):
        seen.clear()
        figures = simulate.simulate(leaves, "default", work)
        assert len(seen) == len(set(seen)) == nodes == figures["nodes"]
        # the one task of the root, and the tasks split off running ones
        assert figures["split_tasks"] > 0
        efficiency[leaves] = figures["efficiency"]
    assert 0.95 < efficiency[2] <= 1.0
    assert efficiency[2] > efficiency[8] > efficiency[32] > 0.3


def test_the_far_cluster_makes_some_steals_cross():
    figures = simulate.simulate(16, "two-clusters", SMALL)
    assert 0.5 < figures["inside_share"] < 1.0
    assert simulate.simulate(16, "default", SMALL)["inside_share"] == 1.0


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_the_last_line_is_json_with_the_documented_keys(extra):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "simulate.py"),
                           "--leaves", "4", "--limit", "10", "--shape", "thesis"] + extra,
                          capture_output=True, text=True, timeout=120, check=True)
    lines = done.stdout.strip().splitlines()
    figures = json.loads(lines[-1])
    assert tuple(figures) == simulate.KEYS
    assert figures["leaves"] == 4 and figures["shape"] == "thesis"
    assert figures["nodes"] == count(7, 0, 0, 10, 0.70)
    assert len(lines) == (1 if extra else 3)


def test_sleep_scale_reports_the_median_leafs_start_up_steps():
    leaf = lambda py, mpi, ready: {"role": "leaf", "startup": {
        "python_s": py, "mpi_s": mpi, "init_s": 0.01, "imports_s": 0.5, "ready_s": ready}}
    stats = {"processes": [
        {"role": "router", "startup": {"python_s": 9.0, "mpi_s": 9.0, "ready_s": 9.0}},
        leaf(1.0, 5.0, 7.0), leaf(3.0, 2.0, 6.0), leaf(2.0, 9.0, 12.0),
        {"role": "leaf"}]}             # a leaf grown later has no start-up record
    assert startup_steps(stats) == ("launch and interpreter 2.00 / MPI_Init 5.00 / "
                                    "INIT 0.01 / imports 0.50 / ready 7.00")
    assert startup_steps({"processes": [{"role": "leaf"}]}) == "not recorded"


def test_sleep_scale_sums_each_roles_cpu_a_node():
    stats = {"processes": [
        {"role": "root", "cpu_s": 0.02}, {"role": "router", "cpu_s": 0.5},
        {"role": "router", "cpu_s": 0.3}, {"role": "leaf", "cpu_s": 2.0},
        {"role": "leaf", "cpu_s": 1.0}, {"role": "leaf"}]}
    assert cpu_a_node(stats, 10_000) == {"leaf": 300.0, "router": 80.0, "root": 2.0}


def test_the_sleep_trees_own_bound_is_a_schedule_without_overhead():
    """``sleep_scale.tree_bound``: the efficiency of the best list schedule with no
    overhead, one step a level's sleep. A complete binary tree of 3 levels (7 nodes,
    p = 1) takes 7 steps on 1 leaf (1.0), 4 on 2 leaves (1, 2, then 4 nodes in two
    steps: 7 / 2 / 4) and 3 on 4; a tree of one node keeps 1 leaf of 8 busy."""
    assert tree_bound(1, 7, 1.0, 2) == 1.0
    assert tree_bound(2, 7, 1.0, 2) == 7 / 2 / 4
    assert tree_bound(4, 7, 1.0, 2) == 7 / 4 / 3
    assert tree_bound(8, 7, 0.0, 5) == 1 / 8
    nodes = count(7, 0, 0, 22, 0.74)
    assert tree_bound(1, 7, 0.74, 22) == 1.0
    # the tree of the 128- and 256-leaf runs: what no scheduler can beat there
    assert round(tree_bound(128, 7, 0.74, 22), 3) == round(nodes / 128 / 237, 3) == 0.958
    assert round(tree_bound(256, 7, 0.74, 22), 3) == 0.908
