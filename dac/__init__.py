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
from .runtime import RunReport, Runtime, run, run_report
from .spawn import SpawnFunction, spawn

__all__ = ["spawn", "sync", "run", "run_report", "Runtime", "RunReport", "Future",
           "TaskError", "ProcessError", "LostProcessError", "DacError", "ReplayMismatchError",
           "SerializationError", "SyncError", "SpawnFunction"]
__version__ = "0.1.0"
