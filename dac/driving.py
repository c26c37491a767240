"""The root's loop over a job: send the top's tasks, wait for a result that a suspended
frame waits on, run the top again, until the top call returns.

There are no rounds: the tree keeps working on every task it has while the root re-runs
the top, and the tasks a new pass finds (spawns after a ``sync``) join the same stream.
A branch whose first results are in goes on to its next spawns while the other branches
are still busy, as it would on a Cilk or Satin master, without a barrier across the
tree. Passes are kept cheap: frames that finished are not run again; a pass happens
only when a result some suspended frame waits on has arrived (with every other result
that came meanwhile), and no more often than every 1 / ``PASS_SHARE`` times the last
pass's own time (a top of thousands of frames would otherwise be re-run for every
other result: fib with 2584 tasks lost a fifth of its speed to it).
"""

from __future__ import annotations

import time
import traceback
from typing import TYPE_CHECKING, Any

from stealing.tree.tasks import Blob, TaskId

from .errors import DacError, SerializationError
from .expansion import Expansion, Task, function_table
from .serialize import loads

if TYPE_CHECKING:
    from stealing.roles.scheduler import Scheduler

    from .progress import Progress
    from .spawn import SpawnFunction

PASS_SHARE = 0.05       # the most of the root's time that passes over the top may take


def drive(sched: Scheduler, exp: Expansion, fn: SpawnFunction, args: tuple, kwargs: dict,
          root_helps: bool, streamed: bool,
          progress: Progress | None = None) -> tuple[Any, int]:
    """Solve the job whose first pass is ``exp`` on ``sched`` (a ``RootScheduler`` with
    a job begun); returns ``(value, passes)``. ``streamed``: the first pass's tasks were
    sent while it ran (``open_stream`` called already). ``progress``: a
    ``dac.progress.Progress`` told of the tasks sent and the results taken."""
    counts = progress or _NoProgress
    if not streamed:
        sched.open_stream()
    outstanding: dict[TaskId, Task] = {}    # task id -> Task sent and not answered
    # what the root may run while leaves start
    helpers: dict[str, SpawnFunction] | None = {} if root_helps else None
    helpers = _send(sched, exp.new_tasks, outstanding, helpers, sent=streamed)
    counts.sent(len(exp.new_tasks))
    # The first pass found what it could: idle leaves may hear "no more" now; tasks
    # of later passes reach them anyway (a leaf that holds nothing is served first).
    sched.close_stream()
    passes = 1
    next_pass = 0.0
    while True:
        if not outstanding:
            raise DacError("the computation is waiting on futures that no task will "
                           "produce (a future kept from another run, or synced in a "
                           "frame that did not spawn it)")
        wanted: set[TaskId] | None = {exp.tasks[p].tid for p in exp.blockers} or None
        counts.took(_take(exp, outstanding, sched.wait_results(wanted, helpers)))
        # pace the passes: the top's frames run again from their start each time,
        # so a big top (thousands of frames) is re-run at most every 1 / PASS_SHARE
        # times its cost, unless every task is in (then nothing else can happen)
        while outstanding and (left := next_pass - time.perf_counter()) > 0:
            counts.took(_take(exp, outstanding,
                              sched.wait_results(None, helpers, timeout=left)))
        t0 = time.perf_counter()
        done, value = exp.run_pass(fn, args, kwargs)
        now = time.perf_counter()
        next_pass = now + (now - t0) / PASS_SHARE
        passes += 1
        if done:
            return value, passes
        helpers = _send(sched, exp.new_tasks, outstanding, helpers)
        counts.sent(len(exp.new_tasks))


class _NoProgress:
    """No line to show: counts go nowhere."""

    @staticmethod
    def sent(n: int) -> None:
        pass

    @staticmethod
    def took(n: int) -> None:
        pass


def _take(exp: Expansion, outstanding: dict[TaskId, Task],
          blobs: dict[TaskId, Blob]) -> int:
    """Record results that came in (the next pass reads them); returns how many."""
    for tid, blob in blobs.items():
        task = outstanding.pop(tid)
        exp.results[task.path] = load_result(task, blob)
    return len(blobs)


def _send(sched: Scheduler, tasks: list[Task], outstanding: dict[TaskId, Task],
          helpers: dict[str, SpawnFunction] | None,
          sent: bool = False) -> dict[str, SpawnFunction] | None:
    """Feed ``tasks`` (unless ``sent``) and count them outstanding; returns the
    functions the root may run itself while the leaves start (``helpers``), or None
    once a task's function has no ``leaf=`` kernel loaded here."""
    for t in tasks:
        outstanding[t.tid] = t
        if helpers is not None:
            if t.sf.leaf_loaded():
                helpers[t.sf.key] = t.sf
            else:
                helpers = None
    if tasks and not sent:
        sched.feed([(t.tid, t.payload) for t in tasks],
                   function_table(tasks, sched.sent_keys))
    return helpers


def load_result(task: Task, blob: Blob) -> Any:
    """A task's result, unpickled; a failure names the task and what failed (the
    result's class may be missing here, or its ``__setstate__`` may refuse)."""
    try:
        return loads(blob)
    except Exception as exc:                                # noqa: BLE001
        sf, args, kwargs = task.call
        where = ""
        frames = traceback.extract_tb(exc.__traceback__)
        if frames and frames[-1].filename != __file__:
            last = frames[-1]
            where = f" (in {last.name}, {last.filename}:{last.lineno})"
        raise SerializationError(f"the result of {sf.describe(args, kwargs)} was "
                                 f"computed but cannot be unpickled on the root: "
                                 f"{type(exc).__name__}: {exc}{where}") from exc
