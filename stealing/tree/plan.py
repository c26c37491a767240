"""The shape of the router tree and the initial task counts (thesis §5.3.2).

A process holding ``np`` processors splits them among ``branches`` child routers when
``np >= min_procs * branches`` (child ``i`` gets ``np // branches + (1 if i < np %
branches else 0)``); otherwise it spawns one leaf per processor (Algorithm 5.3.2).
``tasks_per_branch`` is the thesis' ``qtdTarefasRamo`` (Figure 5.3): how many tasks a
parent sends down a branch at the start so that every router can answer
``steal_factor`` rounds of steals from its own pool before it asks upwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterator, Sequence, TypeVar


@dataclass(frozen=True)
class StealParams:
    """The four stealing parameters of the thesis, validated on construction.

    A run's defaults put routers only where a node would otherwise hold 96 leaves or
    more (``branches = 4``, ``min_procs = 24``: a node has up to 95 leaves, or 4
    routers): a router costs a process and a hop. Measured on one 2-core machine with
    sleeping tasks (``benchmarks/sleep_scale.py``, efficiency after start-up): 64
    leaves flat 0.60, under 4 routers 0.48, under the thesis' 62 routers 0.29; 128
    leaves under 4 routers 0.36 (start-up 17 s), flat 0.10 (24 s), under 126 routers
    0.17 (48 s). The thesis' worked example (Figure 5.4:
    ``branches = 2``, ``min_procs = 2``) is what ``plan_tree`` and
    ``tasks_per_branch`` take by default, and what a topology file or the options
    may ask for.
    """

    branches: int = 4
    min_procs: int = 24
    tasks_per_leaf: int = 5
    steal_factor: float = 2.0

    def __post_init__(self) -> None:
        _check_int("branches", self.branches, 2)
        _check_int("min_procs", self.min_procs, 1)
        _check_int("tasks_per_leaf", self.tasks_per_leaf, 1)
        sf = self.steal_factor
        if isinstance(sf, bool) or not isinstance(sf, (int, float)):
            raise TypeError(f"steal_factor must be a number > 1, got {sf!r}")
        if not sf > 1:
            raise ValueError(f"steal_factor must be > 1 (extra steals a router serves "
                             f"locally), got {sf!r}")


def _check_int(name: str, value: object, minimum: int) -> None:
    """``value`` must be an integer (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")


def split_procs(np: int, branches: int) -> list[int]:
    """Processors of each child router when ``np`` is split among ``branches``."""
    return [np // branches + (1 if i < np % branches else 0) for i in range(branches)]


def splits(np: int, params: StealParams) -> bool:
    """True when a process with ``np`` processors spawns routers, not leaves."""
    return np >= params.min_procs * params.branches


def tasks_per_branch(np: int, branches: int = 2, min_procs: int = 2,
                     tasks_per_leaf: int = 5, steal_factor: float = 2.0) -> int:
    """qtdTarefasRamo: tasks a parent sends down a branch holding ``np`` processors.

    >>> tasks_per_branch(7, 2, 2, 5, 2)   # thesis Figure 5.4
    220
    """
    params = StealParams(branches, min_procs, tasks_per_leaf, steal_factor)
    _check_int("np", np, 1)
    return _tasks_per_branch(np, params)


@lru_cache(maxsize=None)
def _tasks_per_branch(np: int, params: StealParams) -> int:
    if not splits(np, params):
        return _round(np * params.tasks_per_leaf * params.steal_factor)
    total = sum(_tasks_per_branch(p, params) for p in split_procs(np, params.branches))
    return _round(total * params.steal_factor)


def _round(x: float) -> int:
    return int(round(x))


@dataclass
class TreeNode:
    """One process of the planned tree: its role, processors and initial tasks.

    ``tasks`` is how many tasks its parent sends it at the start (``tasks_per_leaf``
    for a leaf, ``tasks_per_branch(procs)`` for a router; the root generates its own).
    ``cluster`` and ``host`` say where it runs.
    """

    role: str                      # "root" | "router" | "leaf"
    procs: int
    tasks: int
    cluster: str = "local"
    host: str = "localhost"
    children: list["TreeNode"] = field(default_factory=list)
    latency_ms: float = 0.0        # emulated delay of the link to the parent
    slowdown: float = 1.0          # emulated slowness of a leaf's host
    device: int = -1               # a GPU leaf's device index on its host (-1: CPU leaf)

    def leaves(self) -> list["TreeNode"]:
        if self.role == "leaf":
            return [self]
        return [leaf for child in self.children for leaf in child.leaves()]

    def walk(self) -> Iterator[TreeNode]:
        """This node, then every node below it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "cluster": self.cluster, "host": self.host,
               "procs": self.procs, "tasks": self.tasks,
               "children": [c.to_dict() for c in self.children]}
        if self.latency_ms:
            out["latency_ms"] = self.latency_ms
        if self.slowdown != 1.0:
            out["slowdown"] = self.slowdown
        if self.device >= 0:
            out["device"] = self.device
        return out

    def render(self, indent: str = "") -> str:
        """The tree as text, one process a line (thesis Figure 5.4)."""
        extra = (f" latency={self.latency_ms:g}ms" if self.latency_ms else "") + \
            (f" slowdown={self.slowdown:g}" if self.slowdown != 1.0 else "") + \
            (f" gpu={self.device}" if self.device >= 0 else "")
        line = (f"{indent}{self.role} procs={self.procs} tasks={self.tasks} "
                f"cluster={self.cluster} host={self.host}{extra}")
        return "\n".join([line] + [c.render(indent + "  ") for c in self.children])


K = TypeVar("K")


def host_groups(kids: Sequence[K], one_each: bool = False,
                host_of: Callable[[K], str | None] = lambda kid: kid.get("host")  # type: ignore[attr-defined]
                ) -> list[tuple[str | None, list[K]]]:
    """The children a node starts together, in order: consecutive ones on the same
    host, ``[(host, [kid, ...]), ...]`` (one spawn call, or one link to a launcher's
    ranks, each). ``one_each``: every child alone (under fault tolerance, processes
    linked together fail together: Open MPI's ULFM). ``host_of``: a child's host
    (the plan's ``dict``s by default)."""
    groups: list[tuple[str | None, list[K]]] = []
    for kid in kids:
        host = host_of(kid)
        if groups and groups[-1][0] == host and not one_each:
            groups[-1][1].append(kid)
        else:
            groups.append((host, [kid]))
    return groups


def plan_subtree(procs: int, params: StealParams, role: str, tasks: int,
                 cluster: str = "local", host: str = "localhost") -> TreeNode:
    """The subtree of a process with ``procs`` processors (Algorithm 5.3.2)."""
    node = TreeNode(role, procs, tasks, cluster, host)
    if splits(procs, params):
        for p in split_procs(procs, params.branches):
            node.children.append(plan_subtree(p, params, "router",
                                              _tasks_per_branch(p, params), cluster, host))
    else:
        node.children = [TreeNode("leaf", 1, params.tasks_per_leaf, cluster, host)
                         for _ in range(procs)]
    return node


def plan_tree(np: int, branches: int = 2, min_procs: int = 2, tasks_per_leaf: int = 5,
              steal_factor: float = 2.0, cluster: str = "local",
              host: str = "localhost") -> TreeNode:
    """The process tree for ``np`` processors on one cluster, rooted at the root.

    The root plays the first non-leaf of the thesis: it splits into routers when
    ``np >= min_procs * branches`` and spawns leaves itself otherwise.
    """
    params = StealParams(branches, min_procs, tasks_per_leaf, steal_factor)
    _check_int("np", np, 1)
    return plan_subtree(np, params, "root", 0, cluster, host)
