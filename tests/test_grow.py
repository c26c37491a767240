"""A tree that grows and shrinks while it runs (``Runtime.grow``/``shrink``, ``dac grow``
and ``dac shrink`` on a warm tree): new leaves steal at once, leaves let go hand their
work to the others, the answer stays right and the statistics say who joined, when,
and what each did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from nested_programs import sleep_tree
from proctools import dac_processes, tagged_env, wait_for_no_processes
from programs import fib, plain_fib, queens

import dac

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def leaves(report):
    return [p for p in report.stats["processes"] if p["role"] == "leaf"]


def test_grow_from_two_to_four_leaves_in_the_middle_of_a_run():
    with dac.Runtime(procs=2) as rt:
        rt.start()
        asked = time.time()
        timer = threading.Timer(0.5, rt.grow, args=(2,))
        timer.start()
        report = rt.run_report(sleep_tree, 8, 20.0)
        timer.join()
        assert report.result == 2 ** 8
        assert report.stats["leaves_added"] == 2
        assert report.stats["spawns"] == 4         # the tree's 2 (first job) and 2 more
        added = [p for p in leaves(report) if p.get("joined") == "grow"]
        first = [p for p in leaves(report) if not p.get("joined")]
        assert len(added) == 2 and len(first) == 2
        for p in added:                     # they joined part way and did work
            assert p["tasks"] >= 1 and p["busy_s"] > 0.1
            assert p["started_at"] > asked + 0.4
            assert p["started_at"] > max(q["started_at"] for q in first)
        assert sum(p["tasks"] for p in leaves(report)) == report.stats["tasks"]
        # the next run has four leaves from the start, and its counters start afresh
        again = rt.run_report(fib, 18)
        assert again.result == plain_fib(18)
        assert len(leaves(again)) == 4 and again.stats["leaves_added"] == 0
    assert not wait_for_no_processes(timeout=5)


def test_grow_between_runs_counts_in_the_next_run():
    with dac.Runtime(procs=1) as rt:
        assert rt.run(queens, 8, 0, 0, 0) == 92
        rt.grow(1)
        # (N-Queens 9 could end before the new leaf's first steal on a loaded
        # machine: 1 failure in 8 runs beside a busy process)
        report = rt.run_report(queens, 11, 0, 0, 0)
        assert report.result == 2680
        assert report.stats["leaves_added"] == 1 and len(leaves(report)) == 2
        assert all(p["tasks"] > 0 for p in leaves(report))


def test_shrink_hands_the_work_back_and_nothing_is_lost():
    with dac.Runtime(procs=2) as rt:
        rt.start()
        rt.grow(2)
        timer = threading.Timer(0.6, rt.shrink, args=(2,))
        timer.start()
        report = rt.run_report(sleep_tree, 8, 20.0)
        timer.join()
        assert report.result == 2 ** 8
        assert report.stats["leaves_removed"] == 2
        gone = [p for p in report.stats["processes"] if p.get("left")]
        assert [p["joined"] for p in gone] == ["grow", "grow"]     # the newest go
        live = [p for p in leaves(report) if not p.get("left")]
        assert len(live) == 2 and not any(p.get("joined") for p in live)
        after = rt.run_report(sleep_tree, 5, 5.0)
        assert after.result == 32 and len(leaves(after)) == 2
        assert after.stats["leaves_removed"] == 0
    assert not wait_for_no_processes(timeout=5)


def test_grow_and_shrink_refuse_bad_input_clearly():
    rt = dac.Runtime(procs=1)
    with pytest.raises(dac.DacError, match=r"grow: the tree is not running here"):
        rt.grow(1)
    with rt:
        rt.start()
        with pytest.raises(ValueError, match=r"grow: leaves must be an integer >= 1, "
                                             r"got 0"):
            rt.grow(0)
        with pytest.raises(ValueError, match=r"shrink: leaves must be an integer >= 1"):
            rt.shrink(True)
        with pytest.raises(ValueError, match=r"grow: host 'no-such-host\.invalid' "
                                             r"does not resolve"):
            rt.grow(1, host="no-such-host.invalid")
        assert rt.run(queens, 6, 0, 0, 0) == 4


def dac_cmd(args, env, timeout=120):
    return subprocess.run([sys.executable, "-m", "launcher.cli", *args], cwd=CHECKOUT,
                          env=env, capture_output=True, text=True, timeout=timeout)


def test_dac_grow_and_shrink_on_a_warm_tree(tmp_path):
    env = tagged_env(os.environ["DAC_TEST_TAG"])
    env.update(DAC_TREE_DIR=str(tmp_path / "tree"), DAC_ATTACH="1")
    none = dac_cmd(["grow", "2"], env)
    assert none.returncode == 1 and "no warm tree is up" in none.stdout
    assert dac_cmd(["up", "--procs", "2"], env).returncode == 0
    try:
        grown = dac_cmd(["grow", "2"], env)
        assert grown.returncode == 0, grown.stderr
        assert "has 4 leaves now" in grown.stdout      # answered once they are ready
        script = tmp_path / "run.py"
        script.write_text(
            "import sys, json\n"
            f"sys.path.insert(0, {os.path.join(CHECKOUT, 'tests')!r})\n"
            "import dac\nfrom programs import queens\n"
            "r = dac.run_report(queens, 10, 0, 0, 0)\n"
            "print(json.dumps([r.result, [p.get('joined') for p in "
            "r.stats['processes'] if p['role'] == 'leaf']]))\n")
        ran = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                             text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
        result, joined = json.loads(ran.stdout.strip().splitlines()[-1])
        assert result == 724 and sorted(map(str, joined)) == ["None", "None", "grow",
                                                               "grow"]
        status = json.loads(dac_cmd(["status", "--json"], env).stdout)
        assert sum(p["role"] == "leaf" for p in status["processes"]) == 4
        shrunk = dac_cmd(["shrink", "2"], env)
        assert shrunk.returncode == 0 and "has 2 leaves now" in shrunk.stdout
        bad = dac_cmd(["grow", "0"], env)
        assert bad.returncode == 2 and "must be an integer >= 1, got 0" in bad.stderr
    finally:
        dac_cmd(["down"], env)
    assert not dac_processes()


TWO = os.path.join(CHECKOUT, "examples", "topologies", "two-clusters.toml")


def test_a_leaf_grown_for_a_cluster_joins_its_router():
    """Two emulated clusters (near and far, 50 ms apart): a leaf grown for the far
    cluster is spawned by the far router, sits below it, and takes its work from it
    (a local steal there), not across the wide link from the root. Before, grown
    leaves hung under the root whatever their cluster."""
    with dac.Runtime(topology=TWO, local=True, root_helps=False) as rt:
        assert rt.run(queens, 8, 0, 0, 0) == 92
        rt.grow(1, cluster="far")
        report = rt.run_report(sleep_tree, 7, 20.0)
        assert report.result == 2 ** 7
        procs = report.stats["processes"]
        far = [p for p in procs if p["role"] == "router" and p["cluster"] == "far"]
        assert len(far) == 1
        added = [p for p in leaves(report) if p.get("joined") == "grow"]
        assert len(added) == 1
        grown = added[0]
        assert grown["cluster"] == "far"
        assert grown["path"][:-1] == far[0]["path"]        # a child of the far router
        assert grown["tasks"] >= 1
        assert report.stats["leaves_added"] == 1
        assert far[0]["leaves_added"] == 1
        assert sorted(p["cluster"] for p in leaves(report)) == ["far"] * 3 + ["near"] * 2
    assert not wait_for_no_processes(timeout=5)


def test_grow_names_an_unknown_cluster_and_changes_nothing():
    with dac.Runtime(topology=TWO, local=True) as rt:
        assert rt.run(queens, 6, 0, 0, 0) == 4
        with pytest.raises(dac.DacError, match=r"no cluster 'mars' \(its clusters: "
                                               r"near, far\); nothing changed"):
            rt.grow(1, cluster="mars")
        with pytest.raises(TypeError, match="cluster must be a cluster's name"):
            rt.grow(1, cluster=3)
        report = rt.run_report(queens, 7, 0, 0, 0)
        assert report.result == 40 and len(leaves(report)) == 4


def test_grow_during_a_run_refuses_an_unknown_cluster_in_the_callers_thread():
    """Asked from another thread while a run drives the tree, a grow for a cluster the
    tree lacks is refused in that thread at once; the run goes on untouched."""
    failures = []

    def grow_mars():
        try:
            rt.grow(1, cluster="mars")
        except dac.DacError as exc:
            failures.append(str(exc))

    with dac.Runtime(topology=TWO, local=True) as rt:
        rt.start()
        timer = threading.Timer(0.3, grow_mars)
        timer.start()
        report = rt.run_report(sleep_tree, 6, 20.0)
        timer.join()
        assert report.result == 2 ** 6
        assert failures == ["grow: the tree has no cluster 'mars' (its clusters: near, "
                            "far); nothing changed"]
        assert report.stats["leaves_added"] == 0
