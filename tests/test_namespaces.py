"""Several real hosts on one machine: network namespaces joined by a bridge.

The fixture (tests/netns/lab.py) makes namespaces dacns1..3, each a host of its own
cluster; hydra starts its proxies inside them through tests/netns/launch.sh
(``ip netns exec``), MPI traffic is forced onto TCP, and N-Queens runs with the root in
the root namespace and one cluster per namespace. The test checks the answer, that
hydra launched into every namespace, that MPI bytes (UCX's TCP port range, not just
hydra's control traffic) crossed each veth pair both ways, and that no process is left.

Skipped, with the reason, where namespaces cannot be made (not root, no iproute2, no
kernel support).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import warnings

import pytest
from netns import lab as netlab
from proctools import (
    finish,
    new_tag,
    tagged_env,
    tagged_pids,
    wait_for,
    wait_for_no_processes,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DAC = shutil.which("dac", path=os.path.dirname(sys.executable)) or "dac"
N, SOLUTIONS = 10, 724
RUN_TIMEOUT = 120               # seconds; a hung cross-namespace spawn fails, not hangs
MIN_UCX_BYTES = 1000            # each way, each link: more than TCP handshakes and acks
TOPOLOGY = """\
[[clusters]]
name = "ns1"
hosts = [{ name = "dacns1", slots = 2 }]

[[clusters]]
name = "ns2"
hosts = [{ name = "dacns2", slots = 1 }]

[[clusters]]
name = "ns3"
hosts = [{ name = "dacns3", slots = 1 }]
"""


@pytest.fixture(scope="module")
def lab():
    reason = netlab.unavailable()
    if reason:
        pytest.skip(f"network namespaces as hosts: {reason}")
    the_lab = netlab.Lab(3)
    try:
        the_lab.__enter__()         # on failure it has already cleaned up
    except netlab.NetnsError as exc:
        pytest.skip(f"network namespaces as hosts: cannot make them here: {exc}")
    try:
        yield the_lab
    finally:
        the_lab.__exit__(None, None, None)      # restores /etc/hosts, deletes all


def kill_tagged(tag: str) -> None:
    """Kills, by pid, the processes this test started (they carry its tag)."""
    for pid in tagged_pids(tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def launched_hosts(log_path: str) -> list:
    """The host of each launch the wrapper logged ("PID [ssh options] HOST CMD...")."""
    try:
        with open(log_path) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    hosts = []
    for line in lines:
        m = re.match(r"^\d+ (?:-\S+ )*(\S+) ", line)
        hosts.append(m[1] if m else f"<unparsed: {line}>")
    return hosts


def test_skip_reasons(monkeypatch):
    """Where namespaces cannot be made the test says why (never a silent pass)."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "root" in netlab.unavailable()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    assert "iproute2" in netlab.unavailable()


def test_wrapper_runs_the_command_line_in_the_namespace(lab):
    """Hydra calls the wrapper like ssh: options, host, a command line to re-parse."""
    p = subprocess.run([netlab.LAUNCHER, "-x", "dacns2", '"/bin/sh"', "-c",
                        "'ip -4 -o addr show dev eth0'"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert f"{lab.addresses['dacns2']}/24" in p.stdout


def run_in_lab(lab, tmp_path, topology_text):
    """``dac run --json`` of N-Queens N over ``topology_text``, inside the lab: the
    report, a description for failures, the hosts hydra launched on, and what was
    left behind (dac's processes, the run's tagged ones, and each namespace's)."""
    topology = tmp_path / "namespaces.toml"
    topology.write_text(topology_text)
    log = str(tmp_path / "launches.log")
    tag = new_tag()
    env = tagged_env(tag)
    env.update(lab.env(log))
    proc = subprocess.Popen([DAC, "run", "--json", "--topology", str(topology),
                             "examples/nqueens.py", str(N)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        code, out, err, seconds = finish(proc, RUN_TIMEOUT)
        left = wait_for_no_processes(tag, timeout=15.0)
        stragglers = [] if wait_for(lambda: not tagged_pids(tag), timeout=10.0) \
            else tagged_pids(tag)
        in_namespaces = {n: lab.pids(n) for n in lab.names}
    finally:
        kill_tagged(tag)
    hosts = launched_hosts(log)
    details = (f"exit {code} after {seconds:.1f} s\nlaunches: {hosts}\n"
               f"stdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}")
    assert code is not None, f"no answer in {RUN_TIMEOUT} s (killed)\n{details}"
    assert code == 0, details
    report = json.loads(out.rstrip("\n").splitlines()[-1])
    assert report["result"] == SOLUTIONS, details
    assert left == {}, f"dac processes left: {left}"
    assert not stragglers, f"processes of the run left: {stragglers}"
    assert all(not pids for pids in in_namespaces.values()), in_namespaces
    return report, details, hosts, seconds


def test_nqueens_one_cluster_per_namespace(lab, tmp_path):
    links0 = lab.link_bytes()
    ucx0 = lab.ucx_bytes() if lab.accounting is None else None
    report, details, hosts, seconds = run_in_lab(lab, tmp_path, TOPOLOGY)
    links1 = lab.link_bytes()
    ucx1 = lab.ucx_bytes() if ucx0 is not None else None

    # every cluster's processes were launched inside its namespace, and worked
    assert sorted(set(hosts)) == lab.names, details
    procs = report["stats"]["processes"]
    for cluster in ("ns1", "ns2", "ns3"):
        mine = [p for p in procs if p["cluster"] == cluster]
        assert [p["role"] for p in mine].count("router") == 1, procs
        assert sum(p["tasks"] for p in mine) > 0, f"no task solved in {cluster}: {procs}"

    # bytes crossed every link, both ways: all traffic, and MPI's (UCX port range)
    grew = {n: (links1[n][0] - links0[n][0], links1[n][1] - links0[n][1])
            for n in lab.names}
    summary = f"veth bytes (to ns, from ns): {grew}"
    if ucx1 is not None:
        ucx = {n: (ucx1[n][0] - ucx0[n][0], ucx1[n][1] - ucx0[n][1]) for n in lab.names}
        summary += f"; UCX/TCP bytes: {ucx}"
    print(f"\n{N}-queens over namespaces in {seconds:.1f} s; {summary}")
    for n in lab.names:
        assert min(grew[n]) > 0, summary
    if ucx1 is None:
        warnings.warn(f"MPI bytes not told apart from hydra's (only the veth totals "
                      f"were checked): {lab.accounting}")
    else:
        for n in lab.names:
            assert min(ucx[n]) >= MIN_UCX_BYTES, summary


def test_a_cluster_over_hosts_gets_a_router_on_each_big_one(lab, tmp_path):
    """Hosts are a boundary: each namespace with 4 leaves has them under a router of
    its own host (stealing.tree.placement.host_routers), a host of one leaf hangs it
    on the root beside those routers, and every leaf works."""
    report, details, hosts, _ = run_in_lab(lab, tmp_path, """\
[[clusters]]
name = "lab"
hosts = [{ name = "dacns1", slots = 4 }, { name = "dacns2", slots = 4 },
         { name = "dacns3", slots = 1 }]
""")
    procs = report["stats"]["processes"]
    assert [p["role"] for p in procs].count("router") == 2, procs
    leaves = [p for p in procs if p["role"] == "leaf"]
    assert len(leaves) == 9 and all(p["tasks"] > 0 for p in leaves), procs
    # (every process reports the machine's name: namespaces share it.) The root
    # launched a router into each big namespace and the lone leaf into its own, and
    # each router its 4 leaves beside it
    assert sorted(hosts) == ["dacns1", "dacns1", "dacns2", "dacns2", "dacns3"], details


def test_mpiexec_ranks_in_three_namespaces(lab, tmp_path):
    """No spawn: MPICH's launcher starts one rank in each namespace (rank 0, the
    root, in the first), and N-Queens runs on them once."""
    from stealing.transport.mpi import find_mpiexec
    log = str(tmp_path / "launches.log")
    tag = new_tag()
    env = tagged_env(tag)
    env.update(lab.env(log))
    proc = subprocess.Popen([find_mpiexec(), "-hosts", ",".join(lab.names), "-n", "3",
                             sys.executable, "examples/nqueens.py", str(N)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        code, out, err, seconds = finish(proc, RUN_TIMEOUT)
        stragglers = [] if wait_for(lambda: not tagged_pids(tag), timeout=10.0) \
            else tagged_pids(tag)
        in_namespaces = {n: lab.pids(n) for n in lab.names}
    finally:
        kill_tagged(tag)
    details = f"exit {code} after {seconds:.1f} s\nstdout:\n{out[-3000:]}\n" \
        f"stderr:\n{err[-3000:]}"
    assert code == 0, details
    assert out.count(f"{N}-queens: {SOLUTIONS} solutions") == 1, details
    assert ", 0 spawns, " in out, details              # no MPI_Comm_spawn
    assert sorted(launched_hosts(log)) == lab.names, details
    assert not stragglers, f"processes of the run left: {stragglers}"
    assert all(not pids for pids in in_namespaces.values()), in_namespaces
