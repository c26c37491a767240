"""What the scheduler needs from a task executor, and how a leaf finds its own.

The scheduler moves tasks as opaque ``bytes`` and functions as opaque entries of a job's
table; only an executor knows what is in them. ``stealing`` never imports one: the root's
caller gives the scheduler an executor object (the root solves tasks itself while the
leaves start) and, in the settings, a reference ``"module:name"`` to the same executor
that goes to every process in INIT; a leaf imports it when it first needs it
(``load_executor``). dac's executor is ``dac.execution:Executor``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from stealing.exceptions import TaskError
from stealing.tree.tasks import Blob, Result, Task


class Worker(Protocol):
    """What a leaf offers the executor while a task runs (``stealing.roles.leaf.Leaf``)."""

    path: tuple[int, ...]
    """The leaf's address: the owner part of the ids of the spawns it splits off."""

    owed: int
    """Tasks a split asked for before the next task started: the executor takes the
    debt over when it starts that task (and sets this to 0)."""

    @property
    def ring_fd(self) -> int | None:
        """A socket that receives a datagram each time the parent sends this leaf a
        message (its doorbell), or None: while a task runs, the executor may ask the
        kernel to signal it (``SIGIO``) and poll then."""

    def poll(self) -> bool:
        """Handle the messages waiting from the parent: a SPLIT calls the executor's
        ``split``, a RETURN its ``deliver``. Call it about every millisecond. True
        if there was one."""

    def wait(self, done: Callable[[], bool]) -> None:
        """Return when ``done()`` is true (a spawn split off to another leaf came
        back); meanwhile run other work on this leaf, nested on the caller's stack."""

    def offer(self, tasks: list[Task]) -> None:
        """Answer a split the executor owed (see ``TaskExecutor.split``) with ``tasks``."""


@runtime_checkable
class TaskExecutor(Protocol):
    """What the scheduler asks of an executor."""

    def load_table(self, entries: dict) -> dict:
        """A job's function table from the ``{key: bytes}`` entries sent with JOB;
        the leaf adds it to the tables of earlier jobs and passes the result to
        ``run_task`` and ``run_batch``."""

    def warm_up(self) -> None:
        """Make ready now, once, what the first job's functions and first task would
        need whatever they are, while the leaf waits for that job (its parent's
        JOB comes milliseconds after INIT, and the job's first split waits for it)."""

    def prepare(self, table: dict) -> None:
        """Make ready now what the first task of each function of ``table`` (new in
        this job) would, while the leaf has no task yet. A failure is the task's to
        report, not this call's. (dac writes each function's fast clone, about 3 ms:
        made in the first task, it delayed the first split of a job that starts as
        one task by that much, and the thief's start by as much again.)"""

    def run_task(self, payload: Blob, table: dict,
                 worker: Worker | None = None) -> Result:
        """Run one task payload; returns ``(task id, result bytes)``. With a ``worker``
        the task's spawns may be split off to other leaves (see ``split``)."""

    def split(self, want: int) -> list[Task]:
        """Hand over up to ``want`` of the running task's oldest unstarted spawns as
        ``[(task id, payload bytes)]`` whose ids are ``(worker.path, number)``. With
        none to give, the executor owes them: it calls ``worker.offer`` at its next
        spawn. ``want == 0`` cancels what it owes."""

    def deliver(self, results: list[Result]) -> None:
        """Results ``[(task id, result bytes)]`` of spawns this leaf split off."""

    def run_batch(self, payloads: list[Blob], table: dict) -> list[Result]:
        """Run a batch of task payloads on this leaf's GPU; returns
        ``[(task id, result bytes)]``."""

    def forget_script(self) -> None:
        """Another script attached to this warm leaf (``dac up``): drop what the
        last one's functions left in the process (its names in ``__main__``)."""

    def task_failure(self, payload: Blob, exc: BaseException, tb: str,
                     where: str | None = None) -> TaskError:
        """A task's exception (``tb`` its formatted traceback) as the error the root
        raises (``stealing.exceptions.TaskError``, sent up in an ERROR message): the call,
        the process (``where``; None: this leaf) and the exception object itself."""


def load_executor(reference: object) -> TaskExecutor:
    """The executor that ``reference`` names: ``"module:name"``, where ``name`` is a
    class or factory called with no arguments."""
    if not isinstance(reference, str) or ":" not in reference:
        raise ValueError(f"a task executor is named \"module:name\", got {reference!r}")
    module, _, name = reference.partition(":")
    factory: Any = importlib.import_module(module)     # then any attribute of it
    for part in name.split("."):
        factory = getattr(factory, part)
    return factory()
