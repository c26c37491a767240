"""dac: divide-and-conquer programs on a work-stealing tree of spawned MPI processes.

Decorate a recursive function with ``@spawn``, wait for children with ``sync``, and
``run`` it::

    from dac import spawn, sync, run

    @spawn
    def fib(n):
        if n < 2:
            return n
        a, b = sync(fib(n - 1), fib(n - 2))
        return a + b

    print(run(fib, 32))
"""

from typing import TYPE_CHECKING, Any

from stealing.transport.world import launched as _launched

from .context import sync
from .errors import (
                     DacError,
                     LostProcessError,
                     ProcessError,
                     ReplayMismatchError,
                     SerializationError,
                     SyncError,
                     TaskError,
)
from .future import Future
from .spawn import SpawnFunction, spawn

if TYPE_CHECKING:
    from .runtime import RunReport, Runtime, run, run_report

# The root's side (``run``, ``Runtime``: the tree, its scheduler, topology files) is
# imported when first named: every leaf imports ``dac`` (its tasks' module does), and
# the root's modules and their own imports were a third of the CPU a leaf spends
# starting, on each of hundreds of leaves sharing a machine's cores.
_ROOT_SIDE = ("run", "run_report", "Runtime", "RunReport")


def __getattr__(name: str) -> Any:
    if name in _ROOT_SIDE:
        from . import runtime  # lazy: the root's side, see _ROOT_SIDE
        return getattr(runtime, name)
    raise AttributeError(f"module 'dac' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_ROOT_SIDE})

__all__ = ["spawn", "sync", "run", "run_report", "Runtime", "RunReport", "Future",
           "TaskError", "ProcessError", "LostProcessError", "DacError", "ReplayMismatchError",
           "SerializationError", "SyncError", "SpawnFunction"]
__version__ = "0.1.0"

# Under ``mpiexec -n P`` / ``srun -n P`` (a launcher's rank, not a process dac spawned)
# the ranks meet here: rank 0 goes on as the root, the others serve its trees and never
# return (``stealing.roles.ranks``).
if _launched():
    from stealing.roles.ranks import enter_if_launched  # lazy: only under a launcher
    enter_if_launched()
