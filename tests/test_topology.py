"""Topology files: validation errors by message, placement, and `dac topology`."""

import json
import os
import socket
import subprocess
import sys

import pytest

from stealing.tree.placement import plan_topology, steal_params
from stealing.tree.topology import (
    TopologyError,
    check_hosts,
    expand_range,
    load_topology,
    parse_slurm_nodelist,
    parse_topology,
    parse_slurm_tasks,
    read_hostfile,
    slurm_hosts,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPOS = os.path.join(ROOT, "examples", "topologies")
DAC = [sys.executable, "-c", "import sys; from launcher.cli import main; sys.exit(main())"]


def write(tmp_path, text, name="t.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def error_of(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    assert str(info.value).startswith(path + ":")
    return str(info.value)


GOOD_HOST = '[[clusters]]\nname = "a"\nhosts = [{ name = "n1", slots = 2 }]\n'


def test_missing_file():
    with pytest.raises(TopologyError, match="nope.toml: no such file"):
        load_topology("/tmp/nope.toml")


def test_toml_syntax_error_names_the_line(tmp_path):
    msg = error_of(tmp_path, GOOD_HOST + "slots = = 3\n")
    assert "TOML syntax error" in msg and "line 4" in msg


def test_unknown_key_suggests_the_closest(tmp_path):
    msg = error_of(tmp_path, '[[clusters]]\nname = "a"\n'
                             'hosts = [{ name = "n1", slot = 2 }]\n')
    assert "clusters[0].hosts[0].slot: unknown key; did you mean 'slots'?" in msg
    msg = error_of(tmp_path, "[stealing]\nbranch = 2\n" + GOOD_HOST)
    assert "stealing.branch: unknown key; did you mean 'branches'?" in msg
    msg = error_of(tmp_path, GOOD_HOST.replace("name = \"a\"", "name = \"a\"\nlatncy_ms = 3"))
    assert "clusters[0].latncy_ms: unknown key; did you mean 'latency_ms'?" in msg


@pytest.mark.parametrize("text, key, problem", [
    ('[[clusters]]\nname = "a"\nhosts = [{ name = "n1", slots = 0 }]\n',
     "clusters[0].hosts[0].slots", "must be from 1 to 4096, got 0"),
    ('[[clusters]]\nname = "a"\nhosts = [{ name = "n1", slots = "two" }]\n',
     "clusters[0].hosts[0].slots", "must be an integer from 1 to 4096, got 'two'"),
    ('[[clusters]]\nname = "a"\nhosts = [{ name = "n1" }]\n',
     "clusters[0].hosts[0].slots", "missing"),
    ('[[clusters]]\nname = "a"\nhosts = []\n', "clusters[0].hosts", "has no hosts"),
    ('[[clusters]]\nname = "a"\nlatency_ms = -1\nhosts = [{ name = "n1", slots = 1 }]\n',
     "clusters[0].latency_ms", "must be a number from 0 to 60000"),
    ('[[clusters]]\nname = "a"\nhosts = [{ name = "n1", slots = 1, slowdown = 0.5 }]\n',
     "clusters[0].hosts[0].slowdown", "must be a number from 1 to 1000"),
    ('[stealing]\nbranches = 1\n' + GOOD_HOST, "stealing.branches", "must be from 2 to 1024, got 1"),
    ('[stealing]\nsteal_factor = 1\n' + GOOD_HOST, "stealing.steal_factor",
     "must be a number > 1"),
    ('[stealing]\ntasks_per_leaf = 0\n' + GOOD_HOST, "stealing.tasks_per_leaf",
     "must be from 1 to 1000000"),
    ('[[clusters]]\nname = "a"\nhosts = [{ name = "n1", slots = 99999999999999999999 }]\n',
     "clusters[0].hosts[0].slots", "must be from 1 to 4096, got 99999999999999999999"),
    ('[[clusters]]\nname = "a"\nhosts = [{ name = "n[1-30000]", slots = 4 }]\n',
     "clusters", "asks for 120000 processes (slots and gpus of every host), more than "
     "the 100000 a dac tree may have"),
    ('[[clusters]]\nname = "a"\nhosts = [{ name = "n[1-9999999]", slots = 1 }]\n',
     "clusters[0].hosts[0].name", "more than 100000 hosts"),
    ("[stealing]\nbranches = 2\n", "clusters", "missing"),
    ('[[clusters]]\nname = "a"\nhosts = [{ name = "n1", slots = 1 }, '
     '{ name = "n1", slots = 2 }]\n', "clusters[0].hosts", "duplicate host 'n1'"),
    ('[[clusters]]\nname = "a"\nhosts = [{ name = "n[1-2]", slots = 1 }]\n'
     '[[clusters]]\nname = "b"\nhosts = [{ name = "n2", slots = 1 }]\n',
     "clusters[1].hosts", "duplicate host 'n2' (already in cluster 'a')"),
    ('[[clusters]]\nname = "a"\nhosts = [{ name = "n1", slots = 1 }]\n'
     '[[clusters]]\nname = "a"\nhosts = [{ name = "n2", slots = 1 }]\n',
     "clusters[1].name", "duplicate cluster name 'a'"),
    ('[[clusters]]\nname = "a"\nhosts = [{ name = "n[5-2]", slots = 1 }]\n',
     "clusters[0].hosts[0].name", "bad host range"),
])
def test_validation_errors(tmp_path, text, key, problem):
    msg = error_of(tmp_path, text)
    assert f": {key}: " in msg, msg
    assert problem in msg, msg


def test_a_host_that_does_not_resolve_is_caught_before_any_spawn(tmp_path):
    topo = load_topology(write(tmp_path, GOOD_HOST.replace("n1", "no-such-host.invalid")))
    with pytest.raises(TopologyError, match="host 'no-such-host.invalid' does not resolve"):
        check_hosts(topo)
    check_hosts(topo.localized())          # --local: every host is this machine


def test_ranges_hostfiles_and_slurm(tmp_path):
    assert expand_range("labtec[01-03]") == ["labtec01", "labtec02", "labtec03"]
    assert expand_range("n[8-10]") == ["n8", "n9", "n10"]
    assert parse_slurm_nodelist("a[01-03,07],b5") == ["a01", "a02", "a03", "a07", "b5"]
    assert parse_slurm_tasks("2(x3),1") == [2, 2, 2, 1]
    hosts = slurm_hosts({"SLURM_JOB_NODELIST": "gpu[1-2]", "SLURM_TASKS_PER_NODE": "4(x2)"})
    assert [(h.name, h.slots) for h in hosts] == [("gpu1", 4), ("gpu2", 4)]
    with pytest.raises(TopologyError, match="not inside a Slurm allocation"):
        slurm_hosts({})
    hf = write(tmp_path, "# comment\nn1\nn2:4\nn3 slots=2 max_slots=8\n", "hosts")
    assert [(h.name, h.slots) for h in read_hostfile(hf)] == [("n1", 1), ("n2", 4),
                                                              ("n3", 2)]
    bad = write(tmp_path, "n1\nn1:2\n", "bad")
    with pytest.raises(TopologyError, match="line 2: duplicate host 'n1'"):
        read_hostfile(bad)
    topo = load_topology(write(tmp_path, '[[clusters]]\nname = "c"\nhostfile = "hosts"\n'))
    assert topo.slots == 7


def test_figure_5_4_placement():
    topo = load_topology(os.path.join(TOPOS, "thesis-figure-5-4.toml"))
    tree = plan_topology(topo, steal_params(topo), "rootbox")
    assert [c.tasks for c in tree.children] == [220, 220]
    seven = tree.children[0]
    assert [c.tasks for c in seven.children] == [80, 30]
    assert [c.tasks for c in seven.children[0].children] == [20, 20]
    assert all(leaf.tasks == 5 for leaf in tree.leaves())
    # leaves fill the hosts' slots in order; a router sits on its first leaf's host
    assert [leaf.host for leaf in tree.leaves()][:4] == ["labtec01", "labtec01",
                                                         "labtec02", "labtec02"]
    assert seven.children[1].host == seven.children[1].leaves()[0].host


def test_two_clusters_get_one_router_each():
    topo = load_topology(os.path.join(TOPOS, "thesis-20-14.toml"))
    tree = plan_topology(topo, steal_params(topo), "rootbox")
    assert tree.host == "rootbox" and tree.procs == 68
    labtec, corisco = tree.children
    assert (labtec.cluster, labtec.procs, corisco.cluster, corisco.procs) == \
        ("labtec", 40, "corisco", 28)
    assert corisco.latency_ms == 20 and labtec.latency_ms == 0
    assert {n.cluster for n in labtec.walk()} == {"labtec"}
    assert all(leaf.host.startswith("corisco") and leaf.slowdown == 1.5
               for leaf in corisco.leaves())
    assert len(tree.leaves()) == 68


def test_hosts_with_several_leaves_get_a_router_each():
    def plan(*hosts):
        topo = parse_topology({"clusters": [{"name": "c", "hosts": [
            {"name": n, "slots": s} for n, s in hosts]}]})
        return plan_topology(topo, steal_params(topo), "rootbox")

    tree = plan(("a", 16), ("b", 16))
    assert [(c.role, c.host, c.procs, c.tasks) for c in tree.children] == \
        [("router", "a", 16, 160), ("router", "b", 16, 160)]
    assert [{leaf.host for leaf in c.leaves()} for c in tree.children] == [{"a"}, {"b"}]
    # a host with fewer than `branches` (4) leaves keeps them on the node above
    tree = plan(("a", 16), ("b", 2), ("c", 6))
    assert [(c.role, c.host, c.procs) for c in tree.children] == \
        [("leaf", "b", 1), ("leaf", "b", 1), ("router", "a", 16), ("router", "c", 6)]
    assert len(tree.leaves()) == 24
    # one such host alone is no boundary; small hosts stay flat
    assert all(c.role == "leaf" for c in plan(("a", 16), ("b", 3)).children)
    assert all(c.role == "leaf" for c in plan(("a", 2), ("b", 2)).children)
    # above 95 leaves the split by count comes first; a router of it that would
    # hold leaves of two hosts holds a router per host instead
    big = plan(("a", 100), ("b", 8))
    assert [(c.host, c.procs) for c in big.children] == [("a", 27)] * 4
    assert [(c.host, c.procs, c.tasks) for c in big.children[3].children] == \
        [("a", 19, 190), ("b", 8, 80)]
    assert all(len({leaf.host for leaf in n.children if leaf.role == "leaf"}) <= 1
               for n in big.walk())


def run_cli(*args):
    return subprocess.run(DAC + list(args), capture_output=True, text=True, cwd=ROOT,
                          timeout=60)


def test_cli_show_prints_figure_5_4():
    res = run_cli("topology", "show", os.path.join(TOPOS, "thesis-figure-5-4.toml"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith(f"root procs=14 tasks=0 cluster=labtec host={socket.gethostname()}")
    assert lines[1].strip() == "router procs=7 tasks=220 cluster=labtec host=labtec01"
    assert lines[2].strip() == "router procs=4 tasks=80 cluster=labtec host=labtec01"
    assert sum(1 for line in lines if line.strip().startswith("leaf procs=1 tasks=5")) == 14


def test_cli_show_json_for_20_plus_14():
    res = run_cli("topology", "show", "--json", os.path.join(TOPOS, "thesis-20-14.toml"))
    assert res.returncode == 0, res.stderr
    tree = json.loads(res.stdout)
    assert set(tree) >= {"role", "cluster", "host", "procs", "tasks", "children"}
    assert [(c["cluster"], c["procs"], c["tasks"]) for c in tree["children"]] == \
        [("labtec", 40, 12800), ("corisco", 28, 7040)]   # tasks_per_leaf = 10


def test_cli_check_exit_codes(tmp_path):
    ok = run_cli("topology", "check", "--local", os.path.join(TOPOS, "thesis-20-14.toml"))
    assert ok.returncode == 0 and "2 cluster(s), 34 host(s), 68 slots" in ok.stdout
    bad = run_cli("topology", "check", os.path.join(TOPOS, "thesis-20-14.toml"))
    assert bad.returncode == 2 and "host 'labtec01' does not resolve" in bad.stderr
    broken = write(tmp_path, "[[clusters]\n")
    res = run_cli("topology", "check", broken)
    assert res.returncode == 2 and "TOML syntax error" in res.stderr
    res = run_cli("run", "--topology", broken, "examples/fib.py", "10")
    assert res.returncode == 2 and broken in res.stderr


def test_cli_from_hostfile_and_slurm(tmp_path):
    hf = write(tmp_path, "n1:2\nn2:2\n", "hosts")
    res = run_cli("topology", "from-hostfile", hf, "--name", "mine")
    assert res.returncode == 0
    out = write(tmp_path, res.stdout, "made.toml")
    topo = load_topology(out)
    assert topo.clusters[0].name == "mine" and topo.slots == 4
    env = dict(os.environ, SLURM_JOB_NODELIST="c[1-3]", SLURM_TASKS_PER_NODE="2(x3)")
    res = subprocess.run(DAC + ["topology", "from-slurm"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert res.returncode == 0 and load_topology(write(tmp_path, res.stdout, "s.toml")).slots == 6


def test_help_has_examples():
    for args in (["run", "--help"], ["topology", "--help"], ["topology", "show", "--help"]):
        res = run_cli(*args)
        assert res.returncode == 0 and "examples:" in res.stdout
