"""The scheduler: the tree plan, the thesis' task counts, and the process loops.

Kept light to import: spawned routers import this package and mpi4py, nothing else;
the plan's names load at their first use (``import dac`` needs the transport alone,
and the plan's ``dataclasses`` brings ``inspect``: 13 of the 40 ms of ``import dac``).
"""

from typing import Any

__all__ = ["StealParams", "TreeNode", "plan_tree", "tasks_per_branch"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from .tree import plan      # lazy: see the module's docstring
        return getattr(plan, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
