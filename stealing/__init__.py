"""The scheduler: the tree plan, the thesis' task counts, and the process loops.

Kept light to import: spawned routers import this package and mpi4py, nothing else.
"""

from .tree.plan import StealParams, TreeNode, plan_tree, tasks_per_branch

__all__ = ["StealParams", "TreeNode", "plan_tree", "tasks_per_branch"]
