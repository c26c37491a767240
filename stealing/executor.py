"""What the scheduler needs from a task executor, and how a leaf finds its own.

The scheduler moves tasks as opaque ``bytes`` and functions as opaque entries of a job's
table; only an executor knows what is in them. ``stealing`` never imports one: the root's
caller gives the scheduler an executor object (the root solves tasks itself while the
leaves start) and, in the settings, a reference ``"module:name"`` to the same executor
that goes to every process in INIT; a leaf imports it when it first needs it
(``load_executor``). dac's executor is ``dac.execution:Executor``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Executor(Protocol):
    """The four things the scheduler asks of an executor."""

    def load_table(self, entries: dict) -> dict:
        """A job's function table from the ``{key: bytes}`` entries sent with JOB;
        the leaf adds it to the tables of earlier jobs and passes the result to
        ``run_task`` and ``run_batch``."""

    def run_task(self, payload: bytes, table: dict) -> tuple:
        """Run one task payload; returns ``(task id, result bytes)``."""

    def run_batch(self, payloads: list, table: dict) -> list:
        """Run a batch of task payloads on this leaf's GPU; returns
        ``[(task id, result bytes)]``."""

    def describe_failure(self, payload: bytes, exc: BaseException, tb: str) -> dict:
        """A task's exception (``tb`` its formatted traceback) as the ERROR message the
        root turns into an error: a dict with the keys ``type``, ``message``,
        ``traceback``, ``task`` (the call) and ``where`` (the process), the fields of
        ``stealing.protocol.Failure``."""


def load_executor(reference) -> Executor:
    """The executor that ``reference`` names: ``"module:name"``, where ``name`` is a
    class or factory called with no arguments."""
    import importlib
    if not isinstance(reference, str) or ":" not in reference:
        raise ValueError(f"a task executor is named \"module:name\", got {reference!r}")
    module, _, name = reference.partition(":")
    factory = importlib.import_module(module)
    for part in name.split("."):
        factory = getattr(factory, part)
    return factory()
