"""Placement: the process tree of a topology, each process on a host.

A host with ``gpus = g`` gets ``g`` GPU leaves beside its CPU leaves (a GPU is one more
processor in the thesis' split). The root's children are one router per cluster (thesis §5.3), so steals stay inside a
cluster until its pool runs dry; a single cluster needs no extra level (the root plays
its router). Inside a cluster the tree is the thesis' split (Algorithm 5.3.2) over the
cluster's slots; leaves take the hosts' slots in order, and a router runs on the host
of its first leaf, so every process sits on a host of its own cluster.

Hosts are a boundary too: a node that would hold the leaves of several hosts itself
holds one router per host instead, where at least two of its hosts have ``branches``
leaves or more there (``host_routers``). Steals then stay on a host until its router's
pool runs low, as they stay in a cluster. The thesis' split (``min_procs = 2``) leaves
at most three leaves on a node, so its trees keep their shape.
"""

from __future__ import annotations

from typing import Any

from stealing.tree.plan import StealParams, TreeNode, plan_subtree, tasks_per_branch

from .topology import Cluster, Topology


def steal_params(topology: Topology,
                 overrides: dict[str, Any] | None = None) -> StealParams:
    """The topology's ``[stealing]`` table with explicit options on top."""
    values = dict(topology.stealing)
    for k, v in (overrides or {}).items():
        if v is not None:
            values[k] = v
    return StealParams(**values)


def plan_topology(topology: Topology, params: StealParams, root_host: str) -> TreeNode:
    """The whole tree: root, cluster routers, their subtrees, hosts on every node."""
    clusters = topology.clusters
    if len(clusters) == 1:
        c = clusters[0]
        root = plan_subtree(c.procs, params, "root", 0, c.name, root_host)
        _place(root, c, keep_top=True)
        host_routers(root, params)
        return root
    root = TreeNode("root", topology.procs, 0, "root", root_host)
    for c in clusters:
        tasks = tasks_per_branch(c.procs, params.branches, params.min_procs,
                                 params.tasks_per_leaf, params.steal_factor)
        sub = plan_subtree(c.procs, params, "router", tasks, c.name)
        sub.latency_ms = c.latency_ms
        _place(sub, c)
        host_routers(sub, params)
        root.children.append(sub)
    return root


def _place(node: TreeNode, cluster: Cluster, keep_top: bool = False) -> None:
    """Give the leaves the cluster's slots in order (each host: its CPU slots, then one
    GPU leaf per GPU, pinned to that device); routers the host of a leaf."""
    places = [p for h in cluster.hosts
              for p in [(h, -1)] * h.slots + [(h, d) for d in range(h.gpus)]]
    for leaf, (host, device) in zip(node.leaves(), places):
        leaf.host, leaf.slowdown, leaf.cluster = host.name, host.slowdown, cluster.name
        leaf.device = device
    for n in node.walk():
        n.cluster = cluster.name
        if n.role == "router" or (n.role == "root" and not keep_top):
            n.host = n.leaves()[0].host


def host_routers(node: TreeNode, params: StealParams) -> None:
    """Below ``node``, give every node that holds leaves of several hosts one router
    per host with at least ``params.branches`` of them, when two hosts or more have
    that many; the other leaves stay where they were. A host router's subtree is the
    split of its leaves (a host of 96 slots or more gets routers of its own) and its
    tasks ``tasks_per_branch`` of them."""
    for n in list(node.walk()):
        leaves = [c for c in n.children if c.role == "leaf"]
        by_host: dict[str, list[TreeNode]] = {}
        for leaf in leaves:
            by_host.setdefault(leaf.host, []).append(leaf)
        groups = [g for g in by_host.values() if len(g) >= params.branches]
        if len(groups) < 2:
            continue
        grouped = {id(leaf) for g in groups for leaf in g}
        n.children = [c for c in n.children if id(c) not in grouped] + \
            [_host_router(g, params) for g in groups]


def _host_router(leaves: list[TreeNode], params: StealParams) -> TreeNode:
    """A router on its leaves' host whose subtree is the split of those leaves."""
    first = leaves[0]
    sub = plan_subtree(len(leaves), params, "router",
                       tasks_per_branch(len(leaves), params.branches, params.min_procs,
                                        params.tasks_per_leaf, params.steal_factor),
                       first.cluster, first.host)
    for slot, leaf in zip(sub.leaves(), leaves):
        slot.slowdown, slot.device = leaf.slowdown, leaf.device
    return sub
