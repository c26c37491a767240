"""The tree on a launcher's ranks (``mpiexec -n P``, ``srun -n P``): nothing is spawned.

Where ``MPI_Comm_spawn`` is refused (Cray MPI, MPICH under ``srun`` with PMI2) or not
wanted, the launcher starts every process of the run at once. Rank 0 is the root; the
others play the routers and leaves of a plan made from the launcher's allocation: each
host's ranks are its slots (a topology file, where one is given, says which cluster a
host belongs to, its GPUs, latency and slowdown). The plan is the one a spawned tree
would have, with as many leaves as leave room for its routers among the ranks.

Each process then links to its parent as if the parent had spawned it: the children a
node would start with one spawn call (``host_groups``) share one intercommunicator
with it, so the rest of dac cannot tell the two modes apart.
"""

from __future__ import annotations

import copy
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass

from stealing.tree.placement import plan_topology
from stealing.tree.plan import StealParams, TreeNode, host_groups
from stealing.tree.topology import Cluster, Host, Topology, TopologyError


@dataclass(frozen=True)
class Assignment:
    """One rank's place in a run's tree: the rank of its parent, the ranks linked to
    that parent together with it (itself among them, in the order of the parent's
    children), and the groups it links below itself, in the order it starts them."""
    parent: int
    group: tuple[int, ...]
    down: tuple[tuple[int, ...], ...] = ()


def ranks_topology(hosts: Sequence[str], given: Topology | None = None) -> Topology:
    """The hosts of ranks 1 and up (``hosts[r]``: rank ``r``'s host; rank 0 is the
    root and holds no leaf) as a topology: one cluster, each host's ranks its slots;
    with a ``given`` topology, its clusters, each host's GPUs (ranks of their own)
    and slowdown, and its ``[stealing]`` table. A rank on a host the file does not
    list is refused (``TopologyError``), naming the host."""
    counts = Counter(hosts[1:])
    if given is None:
        return Topology([Cluster("local", [Host(h, n) for h, n in counts.items()])],
                        source="<launcher's ranks>")
    listed = {h.name for h in given.hosts()}
    unknown = [h for h in counts if h not in listed]
    if unknown:
        raise TopologyError(given.source, "clusters",
                            f"the launcher started ranks on host {unknown[0]!r}, which "
                            f"no cluster lists (hosts of the file: "
                            f"{', '.join(sorted(listed)[:6])})")
    clusters = []
    for c in given.clusters:
        mine = [Host(h.name, counts[h.name] - min(h.gpus, counts[h.name]),
                     min(h.gpus, counts[h.name]), h.slowdown)
                for h in c.hosts if counts.get(h.name)]
        if mine:
            clusters.append(Cluster(c.name, mine, c.latency_ms))
    return Topology(clusters, dict(given.stealing), given.source + " (launcher's ranks)")


def plan_for_ranks(topology: Topology, params: StealParams, root_host: str,
                   workers: int) -> TreeNode:
    """The plan of ``topology`` with at most ``workers`` processes below the root: a
    leaf fewer (on the host with the most) until its routers fit beside its leaves."""
    if workers < 1:
        raise ValueError("a run under a launcher needs 2 ranks or more: rank 0 is the "
                         "root, the others are its leaves (mpiexec -n 3: two leaves)")
    topo = copy.deepcopy(topology)
    while True:
        plan = plan_topology(topo, params, root_host)
        if sum(1 for _ in plan.walk()) - 1 <= workers:
            return plan
        host = max(topo.hosts(), key=lambda h: h.slots + h.gpus)
        if host.slots:
            host.slots -= 1
        else:
            host.gpus -= 1


def assign_ranks(plan: TreeNode, hosts: Sequence[str]
                 ) -> tuple[tuple[tuple[int, ...], ...], dict[int, Assignment]]:
    """Ranks for the processes of ``plan`` (``hosts[r]``: rank ``r``'s host): each
    takes a rank of its own host while there is one, else any. Returns the root's
    groups (what it links below itself, in order) and every other used rank's
    ``Assignment``."""
    free: dict[str, deque[int]] = {}
    for rank, host in enumerate(hosts):
        if rank:
            free.setdefault(host, deque()).append(rank)

    def take(host: str) -> int:
        ready = free.get(host) or next((q for q in free.values() if q), None)
        if not ready:
            raise ValueError(f"the plan has more processes than the {len(hosts) - 1} "
                             f"ranks below the root")
        return ready.popleft()

    rank_of = {id(plan): 0}
    downs: dict[int, list[tuple[int, ...]]] = {0: []}
    ups: dict[int, tuple[int, tuple[int, ...]]] = {}
    for node in plan.walk():            # a parent before its children
        parent = rank_of[id(node)]
        for _host, kids in host_groups(node.children, host_of=lambda n: n.host):
            group = tuple(take(kid.host) for kid in kids)
            for kid, rank in zip(kids, group):
                rank_of[id(kid)] = rank
                ups[rank] = (parent, group)
                downs[rank] = []
            downs[parent].append(group)
    return tuple(downs[0]), {r: Assignment(p, g, tuple(downs[r]))
                             for r, (p, g) in ups.items()}
