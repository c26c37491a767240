"""What a run asks of the tree it runs on, whichever it is: a tree of its own
(``stealing.roles.root.RootScheduler``) or a warm tree it attached to
(``stealing.warm.attached.AttachedScheduler``). ``dac.runtime`` calls nothing else."""

from __future__ import annotations

from typing import Protocol

from stealing.observe.output import Printer
from stealing.transport.protocol import ScriptEnv
from stealing.tree.tasks import Blob, Task, TaskId


class Scheduler(Protocol):
    """A tree's scheduler, as the runtime sees it."""

    attached: bool              # a warm tree's (stop lets go; it stays up)
    job_id: int                 # the number of the latest job begun
    sent_keys: set              # function-table keys the leaves have already
    lost: dict | None           # the record of a lost process, once one was lost
    job_timeline: bool          # the next job records what every process does
    job_env: ScriptEnv | None   # the script's, for a warm tree's leaves
    printer: Printer            # where what the tasks print is written
    view: tuple[int, int, int] | None   # (leaves at work, leaves, steals): progress line

    @property
    def startup_s(self) -> float | None:
        """Seconds from the tree's start until its last leaf was ready (None: not
        known, or long ago)."""

    def start(self) -> None:
        """Spawn the tree (or nothing: attached already)."""

    def stop(self) -> None:
        """End every process of the tree (or let go of a warm one)."""

    def begin_job(self) -> None:
        """A job begins: errors and counters of the last one are forgotten."""

    def open_stream(self) -> None:
        """Tasks come in several ``feed`` calls: idle leaves wait for more."""

    def feed(self, payloads: list[Task], table: dict) -> None:
        """Tasks for the tree, and the functions they need that were not sent."""

    def close_stream(self) -> None:
        """No more tasks for now: idle leaves may hear "no more"."""

    def wait_results(self, wanted: set[TaskId] | None = None,
                     local_table: dict | None = None,
                     timeout: float | None = None) -> dict[TaskId, Blob]:
        """Results that came, once one of ``wanted`` did (None: any) or after
        ``timeout``; ``local_table``: functions the root may run itself meanwhile."""

    def end_job(self) -> list[dict]:
        """The job's statistics, one record per process, root first."""

    def grow(self, count: int, host: str | None = None, wait_s: float = 0.0,
             cluster: str | None = None) -> None:
        """Add ``count`` leaves now (between runs), under their cluster's node."""

    def shrink(self, count: int) -> int:
        """Let ``count`` leaves go now (between runs); how many went."""

    def check_shrink(self, count: int) -> None:
        """Refuse a shrink the tree cannot do (a ``DacError`` saying why)."""

    def ask_change(self, kind: str, count: int, host: str | None = None,
                   cluster: str | None = None) -> None:
        """``grow`` or ``shrink`` from another thread while a run drives the tree."""



