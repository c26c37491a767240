"""A leaf process: solves batches of tasks and returns the results (Algorithm 5.3.2).

Returning results *is* the steal request. To hide the round trip, a leaf sends the
results it has and asks for more when half of its batch is left (``prefetch``), so the
next batch is there before the last task ends. How many tasks it asks for is either the
thesis' fixed ``tasks_per_leaf`` (``batch="fixed"``) or, by default, what it solves in
``batch_s`` seconds at its measured rate (``batch="rate"``): fast leaves (a GPU, a
faster host) take bigger batches and per-batch costs stay small against the work.
A persistent leaf loops over batches; a spawn-per-batch leaf (the thesis' model) solves
one batch and exits.

What a task is, the leaf does not know: its executor (``stealing.roles.executor``), named in
INIT, loads the job's functions and runs the tasks.

A persistent CPU leaf is also a *worker* for its executor (``stealing.roles.executor.Worker``):
while a task runs, the executor keeps the task's stealable spawns on its own deque,
calls ``poll`` every millisecond or so, and calls ``wait`` when a ``sync`` needs the
result of a spawn that was split off to another leaf. ``wait`` keeps the leaf busy:
it runs queued tasks, or asks the parent for work and runs that, nested on the same
stack, until the result is back. A SPLIT from the parent is answered with the oldest
queued tasks, then the executor's oldest spawns (``TaskExecutor.split``); results of work
split off from elsewhere go to their owner at once, and those of this leaf's own split
spawns come back in RETURN messages (``TaskExecutor.deliver``), or straight to the
executor where a pool gave such a spawn back to this leaf.
"""

from __future__ import annotations

import enum
import importlib
import math
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

from stealing.exceptions import ProcessError, SetupFailure, process_error
from stealing.host.stack import on_fresh_stack
from stealing.observe.output import Capture, capture_output, finish_lines, release_output
from stealing.observe.recorder import Recorder
from stealing.observe.stats import Meter, startup_steps
from stealing.roles.executor import TaskExecutor, Worker, load_executor
from stealing.roles.gpu import GPU_MIN_BATCH, check_gpu, next_gpu_batch, use_gpu
from stealing.roles.script_env import ScriptModules, adopt
from stealing.roles.status import Start
from stealing.transport import protocol as P
from stealing.transport.mailbox import IDLE_SLEEP, MAX_SLEEP, Mailbox
from stealing.tree.tasks import Blob, Result, Task, TaskId, is_split, owner

if TYPE_CHECKING:
    from mpi4py.MPI import Intercomm


# a split task's result that took less than this may wait as long for the next message
# up while the leaf runs the tasks queued after it (``Leaf.split_result``): as long as
# a running task lets its messages wait (``dac.stealable.POLL_S``)
RESULT_HOLD_S = 0.002


class Phase(enum.Enum):
    """Where a leaf is in the job: it counts idle time and asks for work only while
    ``WORKING``; ``FAILED`` waits to be stopped; nothing is sent once ``STOPPED``."""
    NEW = "no batch yet in this job"
    WORKING = "got a batch in this job"
    FAILED = "a task raised: waiting to be stopped"
    STOPPED = "BYE sent: the parent reads no more"


class Ask(enum.Enum):
    """Where the leaf's steal request stands. Returning results is the request; the
    parent answers with TASKS or NOMORE (both echo the request's number), and a leaf
    withdraws a request by sending results that ask for nothing."""
    NONE = "no request outstanding"
    REFILL = "asked ahead while it still holds work (prefetch)"
    IDLE = "asked with nothing left to run: a split it owed is void"
    IDLE_AT_SYNC = "asked with nothing to run while a task waits at sync for split work"
    REFUSED = "an idle request got no more: waits for TASKS"


PENDING = frozenset((Ask.REFILL, Ask.IDLE, Ask.IDLE_AT_SYNC))    # answer still to come


class Abort(BaseException):
    """SIGTERM from the root: the run is ending and this leaf is in the middle of a task."""


class Unwind(BaseException):
    """Raised out of a task waiting for split work when the leaf was told to stop or
    one of its tasks failed: the task cannot finish, the leaf returns to its loop."""


def _on_sigterm(signum: int, frame: FrameType | None) -> NoReturn:
    """SIGTERM's handler while the leaf works: abandon the task (``Abort``)."""
    raise Abort()


def _leaf_meter(init: P.Init) -> Meter:
    """A new leaf's statistics, with what ``init`` says of it: why it joined, its
    address and its GPU."""
    meter = Meter("leaf", init.cluster, counters=("largest_batch",))
    if init.joined:
        meter.keep(joined=init.joined)
    meter.keep(path=list(init.path))
    if init.device >= 0:
        meter.keep(device=init.device)
    return meter


class Leaf:
    """The state of one leaf: its batch, its unsent results and its job's functions."""

    watchdog: Callable[[], None]    # called while it waits for messages (``serve``)

    def __init__(self, MPI: ModuleType, parent: Intercomm, init: P.Init, start: Start,
                 mailbox: Mailbox) -> None:
        """A leaf as ``init`` says, talking to ``parent`` through ``mailbox``."""
        settings = init.settings
        self.parent = parent
        self.mailbox = mailbox
        self.status = start.status          # read by this process's monitor if it dies
        self.shm = start.shm
        self.monitor = start.monitor        # its monitor's pid (0: none)
        if init.latency_ms:
            mailbox.set_delay(parent, init.latency_ms / 1000.0)
        self.meter = _leaf_meter(init)
        self._init_batches(init)
        self.start_marks, self.spawned_at = start.marks, init.spawned_at
        self.imported: float | None = None  # time its executor and preload were in
        self.session: int | None = None     # the attached script's (warm tree)
        self.script_modules: ScriptModules | None = None    # once a script attached
        self.preloaded = settings.preload
        self.device = init.device
        self.real_gpu = self.device >= 0 and not settings.gpu_simulate
        if self.device >= 0:
            use_gpu(self.device, settings.gpu_simulate)
        self.one_shot = init.one_shot
        self.prefetch = settings.prefetch and not self.one_shot
        self.tasks: deque[Task] = deque()
        self.results: list[Result] = []
        self.table: dict[Any, Any] = {}     # the executor's: the job's functions
        self.executor_ref = settings.executor
        self._executor: TaskExecutor | None = None
        self.phase = Phase.NEW
        self.asking = Ask.NONE
        self.exhausted = False     # the parent said "no more" (no asking ahead)
        self.ready_sent = False
        self.path = init.path               # owner address of its split spawns
        # Only a persistent CPU leaf is a worker (see the module docstring); a
        # spawn-per-batch or GPU leaf runs each task serially, as it comes.
        self.worker: Worker | None = self if not self.one_shot and self.device < 0 else None
        self.owed = 0               # a split asked before the next task started
        self.split_owed = False     # the running task owes a split its next spawn pays
        self.held = False           # a split task's result waits in results for the
        #                             next message up (``split_result``) ...
        self.held_at = -math.inf    # ... since when (-inf: one came of a long task)
        self.seq = 0                # number of its latest request
        self.running = 0            # tasks under way (nested ones while waiting)
        self.idle_in_task = 0.0     # seconds a waiting task spent with nothing to run
        self.timeline: Recorder | None = None   # when the job asked for a timeline
        self.capture: Capture | None = None     # what tasks print
        self.host = self.meter.record["host"]
        self.job_id: int | None = None      # the job it has the functions of
        self.sleeps0 = 0                    # the mailbox's sleeps when the job began

    def _init_batches(self, init: P.Init) -> None:
        """How many tasks it asks for (``want``): ``tasks_per_leaf``, or ``batch_s``
        seconds of work at the rate measured over windows of its tasks (kept apart
        from ``__init__``, which holds its links and its requests' state)."""
        settings = init.settings
        self.tasks_per_leaf = init.tree.params.tasks_per_leaf
        self.by_rate = settings.batch == "rate"
        self.batch_s = settings.batch_s
        self.slowdown = init.slowdown       # an emulated slower host (1.0: none)
        self.batch_len = self.tasks_per_leaf
        self.rate: float | None = None      # tasks per second, smoothed
        self.win_tasks, self.win_busy = 0, 0.0
        self.gpu_batch = GPU_MIN_BATCH      # a real GPU's floor (``next_gpu_batch``)

    @property
    def executor(self) -> TaskExecutor:
        """The task executor INIT names, imported when first needed."""
        if self._executor is None:
            self._executor = load_executor(self.executor_ref)
        return self._executor

    @property
    def requested(self) -> bool:
        """A steal request waits for its answer."""
        return self.asking in PENDING

    def send(self, tag: int, obj: object) -> None:
        """Send ``obj`` (a ``protocol`` payload) to the parent, unless it said BYE."""
        if self.phase is Phase.STOPPED:     # the parent disconnects and reads no more
            return
        self.mailbox.send(self.parent, obj, 0, tag)

    def send_output(self) -> None:
        """Send the lines tasks printed since the last time (``stealing.observe.output``)."""
        capture = self.capture
        if capture is not None and capture.ready:
            self.send(P.OUTPUT, P.Output(self.meter.record["pid"], self.host,
                                         capture.take()))

    def fail(self, doing: str, exc: BaseException) -> None:
        """Report a failure outside a task as a ``ProcessError`` (what the process
        was ``doing``) and wait to be stopped: the process does not die, so the run
        ends cleanly and the caller's MPI stays usable."""
        finish_lines()
        self.send_output()
        self.send(P.ERROR, P.Failure(process_error("leaf", doing, exc)))
        if self.phase is not Phase.STOPPED:
            self.phase = Phase.FAILED
        self.tasks.clear()
        self.results = []

    # messages ------------------------------------------------------------------
    def handle(self, tag: int, msg: Any) -> None:
        """React to one message from the parent (``msg``: the payload ``tag``
        carries, ``protocol.PAYLOADS``)."""
        if tag == P.TASKS:
            self._take_tasks(msg)
        elif tag == P.NOMORE:
            self._refused(msg)
        elif tag == P.SPLIT:
            self.split(msg.want)
        elif tag == P.RETURN:
            self.executor.deliver(msg.results)
        elif tag == P.JOB:
            self.load_job(msg)
        elif tag == P.STATS_REQ:
            record = self.meter.snapshot()
            record["wakes"] = self.mailbox.sleeps - self.sleeps0
            if self.timeline is not None:
                record["timeline"] = self.timeline.export()
            self.send(P.STATS, P.Stats([record]))
            if self.script_modules is not None:     # what this job imported
                self.script_modules.note()
        elif tag == P.STOP:
            finish_lines()
            self.send_output()
            self.send(P.BYE, P.Bye([]))
            self.phase = Phase.STOPPED      # nothing is sent after BYE
        else:
            raise RuntimeError(f"leaf: unexpected {P.name(tag)}")

    def _take_tasks(self, msg: P.Tasks) -> None:
        """TASKS: a batch joins the queue; it answers the request ``msg.seq``."""
        self.tasks.extend(msg.tasks)
        self.batch_len = len(msg.tasks)
        if self.asking is Ask.REFUSED:
            self.asking = Ask.NONE
        if any(not is_split(t[0]) for t in msg.tasks):
            # tasks of the root's pool: the parent may have more (prefetch
            # again); work split off another leaf says nothing of the pool
            # (asking ahead for more would only bring "no more")
            self.exhausted = False
        if self.timeline is not None:   # (the first batch of a round too)
            self.timeline.answer("split" if is_split(msg.tasks[0][0])
                                 else "local", len(msg.tasks))
        if msg.seq == self.seq:         # (else it answers a request replaced since)
            self.withdraw()
        if self.phase is Phase.NEW:
            self.phase = Phase.WORKING
        rec = self.meter.record
        rec["batches"] += 1
        rec["largest_batch"] = max(rec["largest_batch"], len(msg.tasks))

    def _refused(self, msg: P.NoMore) -> None:
        """NOMORE: the parent had nothing for the request ``msg.seq``."""
        self.exhausted = True   # the parent had nothing: no asking ahead (it
        #                         says so even if the request was since replaced)
        if not self.requested or msg.seq != self.seq:
            return              # the answer to a request withdrawn or replaced
        # a refused refill leaves no request; a refused idle one waits for TASKS
        if self.timeline is not None:
            self.timeline.answer("failed", 0)
        self.asking = Ask.NONE if self.asking is Ask.REFILL else Ask.REFUSED

    def load_job(self, job: P.Job) -> None:
        """JOB: a new job restarts the counters; its functions join the table; the
        first job's READY says the leaf is up."""
        if job.job_id != self.job_id:
            self.job_id = job.job_id
            self.meter.reset()
            self.sleeps0 = self.mailbox.sleeps
            if self.phase is Phase.WORKING:
                self.phase = Phase.NEW
            self.asking, self.exhausted = Ask.NONE, False
            self.rate, self.win_tasks, self.win_busy = None, 0, 0.0   # new tasks, new rate
            self.gpu_batch = GPU_MIN_BATCH
            self.timeline = Recorder() if job.timeline else None
        try:
            if job.env is not None and job.env.session != self.session:
                self.new_script(job.env)
            loaded = self.executor.load_table(job.functions)
            self.table.update(loaded)
        except Exception as exc:                            # noqa: BLE001 - reported
            loaded = {}
            self.fail("loading the job's functions", exc)
        if not self.ready_sent:
            self.ready_sent = True
            self.meter.keep(startup=startup_steps(self.start_marks, self.spawned_at,
                                                  time.time(), self.imported),
                            started_at=round(time.time(), 3))
            rec = self.meter.record
            monitor = 0 if self.one_shot else self.monitor
            self.send(P.READY, P.Ready([P.Process(rec["pid"], rec["host"], "leaf",
                                                  time.time(), self.shm, monitor)]))
        if loaded:                  # (after READY: the tree's start-up waits for none)
            self.executor.prepare(loaded)

    def new_script(self, env: P.ScriptEnv) -> None:
        """Another script attached to this warm leaf: its functions replace the last
        one's, script modules whose files changed (or that another project's path
        would load from elsewhere) are imported afresh, its settings are taken."""
        self.session = env.session
        self.table = {}
        self.executor.forget_script()
        if self.script_modules is None:
            self.script_modules = ScriptModules(keep=self.preloaded)
        self.script_modules.refresh(list(env.sys_path))
        adopt(env)

    # the work loop -------------------------------------------------------------
    @property
    def want(self) -> int:
        """Tasks to ask for: fixed, or ``batch_s`` seconds of work at the measured rate.

        The rate is smoothed over the windows between two requests, so a slow first
        task (JIT, cache loading) is soon forgotten. A real GPU leaf asks for at least
        ``gpu_batch``, from ``GPU_MIN_BATCH`` up (``stealing.roles.gpu.next_gpu_batch``):
        its time per batch hardly grows until the batch fills the device, so a rate
        measured on small batches (one board per thread, each slower than on a CPU
        core) would keep its batches small and the device idle (measured on an H100,
        N-Queens 18: batches of 5 boards, the GPU leaf solved 171 of 36264 tasks).
        """
        if self.win_tasks and self.win_busy > 0:
            rate = self.win_tasks / self.win_busy
            self.rate = rate if self.rate is None else 0.5 * (self.rate + rate)
            self.win_tasks, self.win_busy = 0, 0.0
        floor = self.gpu_batch if self.real_gpu else 1
        if not self.by_rate or self.rate is None:
            return max(floor, self.tasks_per_leaf)
        return max(floor, min(1 << 20, round(self.rate * self.batch_s)))

    def ask(self, idle: bool = False, at_sync: bool = False) -> None:
        """Send the results so far with a request for more (``idle``: nothing is left
        to run here, so a split this leaf owed is void; ``at_sync``: a task waits at
        ``sync`` for split work meanwhile)."""
        results, self.results = self.results, []
        self.held = False
        self.asking = Ask.IDLE_AT_SYNC if at_sync else Ask.IDLE if idle else Ask.REFILL
        self.seq += 1
        if self.timeline is not None:
            self.timeline.ask()
        if idle:
            self.owed = 0
            self.split_owed = False
            if self.running:
                self.executor.split(0)
        self.send(P.RESULTS, P.Results(results, self.want, idle=idle, seq=self.seq,
                                       rate=self.rate or 0.0))

    def send_results(self, results: list) -> None:
        """Results, asking for nothing: a leaf's RESULTS replaces its request, so one
        outstanding is withdrawn (this leaf has work again; it asks anew when it runs
        dry). A parent's answer still on its way is taken as it comes."""
        self.withdraw()
        self.held = False
        self.send(P.RESULTS, P.Results(results, 0))

    def send_all_results(self) -> None:
        """``send_results`` of every result so far."""
        results, self.results = self.results, []
        self.send_results(results)

    def withdraw(self) -> None:
        """The outstanding request is answered or withdrawn (a refusal stays)."""
        if self.asking in PENDING:
            self.asking = Ask.NONE

    # the worker's side of a running task (stealing.roles.executor.Worker) ---------------
    def split(self, want: int) -> None:
        """SPLIT: hand over the newest queued tasks (the queue runs oldest first),
        then, while a task runs, the executor's oldest spawns; a leaf with nothing
        to give owes the answer until the executor has some (it calls ``offer``),
        or until it runs out of work: its idle request voids the split."""
        if self.phase is not Phase.WORKING or (not self.tasks and not self.running):
            return          # idle: the request it sent already voided the split
        n = min(want, (len(self.tasks) + 1) // 2) if len(self.tasks) > 1 else 0
        given = [self.tasks.pop() for _ in range(n)][::-1]
        if len(given) < want and self.worker is not None:
            if self.running:
                got = self.executor.split(want - len(given))
                self.split_owed = not got       # the executor pays later (offer)
                given += got
            else:               # its one queued task has not started: owe from it
                self.owed = want - len(given)
        if given:
            self.offer(given)

    def offer(self, tasks: list) -> None:
        """Answer the parent's SPLIT with ``tasks``."""
        self.split_owed = False
        self.meter.record["split_given"] += len(tasks)
        self.send(P.STOLEN, P.Tasks(tasks))

    @property
    def ring_fd(self) -> int | None:
        """The doorbell the parent rings after each message, if it does
        (``stealing.roles.executor.Worker``)."""
        return self.mailbox.rung_fd(self.parent)

    def poll(self) -> bool:
        """Handle the messages waiting from the parent (a task calls it by clock);
        True if there was one. Told to stop meanwhile, the leaf abandons the task
        (``Unwind``)."""
        mb, comms = self.mailbox, [self.parent]
        if self.capture is not None and self.capture.ready:
            self.send_output()
        if self.held and not self.holding():
            self.send_all_results()
        got = mb.poll(comms)
        handled = got is not None
        while got is not None:
            self.handle(got[2], got[3])
            if self.phase is Phase.STOPPED:
                raise Unwind()
            got = mb.poll(comms)
        return handled

    def wait(self, done: Callable[[], bool]) -> None:
        """Until ``done()``: run queued tasks, or ask the parent for work, nested on
        this stack; in between, sleep until a message comes (never spin)."""
        mb, comms = self.mailbox, [self.parent]
        asked = False
        while not done():
            if self.phase is Phase.STOPPED or self.phase is Phase.FAILED:
                raise Unwind()
            if self.tasks:
                self.run_one()
                continue
            got = mb.poll(comms)
            if got is None:
                # idle: ask (again, if a split came since the last idle request: the
                # new request voids it at the parent, which waits for its answer)
                if self.asking is Ask.NONE or self.asking is Ask.REFILL or \
                        (self.split_owed and self.asking is not Ask.REFUSED):
                    self.ask(idle=True, at_sync=True)
                    asked = True
                t0 = time.perf_counter()
                got = mb.wait(comms, on_idle=self.watchdog, max_sleep=MAX_SLEEP)
                assert got is not None      # (no timeout: it waits for a message)
                self.idle_in_task += time.perf_counter() - t0
                if self.timeline is not None:
                    self.timeline.span("idle", t0, time.perf_counter() - t0)
            self.handle(got[2], got[3])
        if (asked and self.asking is Ask.IDLE_AT_SYNC) or self.held:
            # the task goes on: withdraw the idle request, so the parent sees this
            # leaf busy (and may split it) instead of waiting for it to ask again;
            # a split task's result held for that request goes now
            self.send_all_results()

    def run_one(self) -> None:
        """Run the oldest queued task. Nested in a waiting task, its time is that
        task's; the time a task spends waiting with nothing to run is idle time."""
        if self.held and not self.holding():    # another task first: the owner may
            self.send_all_results()             # wait for it
        tid, payload = self.tasks.popleft()
        outer = self.status.current
        self.status.task(tid)
        t0 = time.perf_counter()
        idle0 = self.idle_in_task
        self.running += 1
        try:
            tid, blob = self.executor.run_task(payload, self.table, self.worker)
        except (Abort, Unwind):
            raise
        except SetupFailure as exc:
            self.fail(exc.doing, exc.__cause__ or exc)
            return
        except BaseException as exc:            # noqa: BLE001 - reported to the root
            self.report_error(payload, exc)
            return
        finally:
            self.running -= 1
        self.status.task(outer)
        if self.capture is not None:
            finish_lines()
            self.send_output()
        rec = self.meter.record
        self.task_done(tid, blob, time.perf_counter() - t0 < RESULT_HOLD_S)
        if self.running:                # nested: the outer task's time covers it
            return
        waited = self.idle_in_task - idle0
        spent = time.perf_counter() - t0 - waited
        if self.slowdown > 1:               # an emulated slower host
            time.sleep(spent * (self.slowdown - 1))
            spent *= self.slowdown
        rec["busy_s"] += spent
        rec["idle_s"] += waited
        if self.timeline is not None:
            self.timeline.span("busy", t0, spent)
        self.win_tasks += 1
        self.win_busy += spent

    def task_done(self, tid: TaskId, blob: Blob, short: bool) -> None:
        """A task's result: a split task's to ``split_result`` (its owner waits for
        it; ``short``: the task took less than ``RESULT_HOLD_S``), or to the
        executor where this leaf is the owner (a split's tasks beyond what its
        thief wanted wait in the parent's pool, and may come back: their results
        went up and came back down in RETURN, while the owner's sync waited);
        another's with the next request."""
        rec = self.meter.record
        rec["tasks"] += 1
        if is_split(tid):
            rec["split_tasks"] += 1
            if owner(tid) == self.path:     # its own spawn (its id holds this path),
                self.executor.deliver([(tid, blob)])    # back from a pool
            else:
                self.split_result(tid, blob, short)
        else:
            self.results.append((tid, blob))

    def split_result(self, tid: TaskId, blob: Blob, short: bool = False) -> None:
        """A split task's result goes up at once, or with the next message up (the
        results so far ride on every request): where the leaf's queue is empty and
        it asks for work next, or, for a ``short`` task (under ``RESULT_HOLD_S``),
        while it runs the tasks queued after it for up to that long. Two messages
        0.1 ms apart were about a fifth of a 256-leaf run's leaf messages, and the
        first (asking for nothing) made the router see a busy leaf and send it a
        SPLIT it answered idle; on UTS T3 on 2 leaves, 2,033 of the leaves' 3,009
        messages were one stolen task's result each. Nested in a task waiting at
        ``sync``, what comes first instead (the wait ends, another task runs, a
        poll) sends it, unless it may still wait (``holding``)."""
        if (self.phase is Phase.WORKING and not self.one_shot
                and (self.asking is Ask.NONE or self.asking is Ask.REFILL)
                and (not self.tasks or short)):
            self.results.append((tid, blob))
            if not short:               # (it goes before the next task: ``holding``)
                self.held_at = -math.inf
            elif not self.held:
                self.held_at = time.perf_counter()
            self.held = True
        else:
            self.send_results([(tid, blob)])

    def holding(self) -> bool:
        """The results held (``split_result``) may wait on: each came from a short
        task, the queue holds more, and the first waited less than
        ``RESULT_HOLD_S``."""
        return bool(self.tasks) and time.perf_counter() - self.held_at < RESULT_HOLD_S

    def run_batch(self) -> None:
        """A GPU leaf solves everything it holds in one call of the task's gpu_batch."""
        batch = [payload for _, payload in self.tasks]
        self.status.task(self.tasks[0][0])
        self.tasks.clear()
        t0 = time.perf_counter()
        try:
            results = self.executor.run_batch(batch, self.table)
        except Abort:
            raise
        except SetupFailure as exc:
            self.fail(exc.doing, exc.__cause__ or exc)
            return
        except BaseException as exc:            # noqa: BLE001 - reported to the root
            self.report_error(batch[0], exc)
            return
        if self.capture is not None:
            finish_lines()
            self.send_output()
        spent = time.perf_counter() - t0
        rec = self.meter.record
        rec["busy_s"] += spent
        rec["tasks"] += len(batch)
        if self.timeline is not None:
            self.timeline.span("busy", t0, spent)
        self.win_tasks += len(batch)
        self.win_busy += spent
        if self.real_gpu:
            self.gpu_batch = next_gpu_batch(self.gpu_batch, len(batch), spent)
        self.results.extend(results)

    def report_error(self, payload: Blob, exc: BaseException) -> None:
        """A task raised: report it as its ``TaskError`` and wait to be stopped."""
        tb = traceback.format_exc()
        finish_lines()
        self.send_output()
        self.send(P.ERROR, P.Failure(self.executor.task_failure(payload, exc, tb)))
        if self.phase is not Phase.STOPPED:
            self.phase = Phase.FAILED
        self.tasks.clear()
        self.results = []

    def serve(self, watchdog: Callable[[], None]) -> None:
        """Work until stopped; a task abandoned (``Unwind``) drops the queue."""
        self.watchdog = watchdog
        while True:
            try:
                return self._serve()
            except Unwind:          # a task abandoned: stopped, or waiting to be
                self.tasks.clear()

    def _serve(self) -> None:
        mb, comms, watchdog = self.mailbox, [self.parent], self.watchdog
        while self.phase is not Phase.STOPPED:
            working = self.phase is Phase.WORKING
            if self.tasks and self.phase is not Phase.FAILED:
                got = mb.poll(comms)
                if got is not None:
                    self.handle(got[2], got[3])
                    continue
                if self.device >= 0:        # the next batch is asked for before this one
                    if self.prefetch and not self.requested and not self.exhausted:
                        self.ask()
                    self.run_batch()
                    continue
                if (self.prefetch and not self.requested and not self.exhausted
                        and len(self.tasks) <= max(1, self.batch_len // 2)):
                    self.ask()
                self.run_one()
                continue
            if self.one_shot and working:
                self.send_output()
                rec = self.meter.snapshot()
                self.send(P.RESULTS, P.Results(self.results, self.want, rec, idle=True))
                return
            if working:
                if self.asking is not Ask.REFUSED and (self.asking is not Ask.IDLE
                                                       or self.results):
                    # a new idle request replaces one sent while a task waited at sync
                    # (the task ended), a refill, or one sent before tasks that came
                    # since for an older request (their results must go up: the parent
                    # counts them out until then)
                    self.ask(idle=True)
                elif self.exhausted and self.results:
                    self.send_all_results()
            self.send_output()
            t0 = time.perf_counter()
            eager = self.requested or (working and not self.exhausted)
            got = mb.wait(comms, on_idle=watchdog,
                          max_sleep=MAX_SLEEP if eager else IDLE_SLEEP)
            assert got is not None          # (no timeout: it waits for a message)
            _, _, tag, msg = got
            if working:
                waited = time.perf_counter() - t0
                self.meter.record["idle_s"] += waited
                if self.timeline is not None:
                    self.timeline.span("idle", t0, waited)
            self.handle(tag, msg)


def preload(modules: Iterable[str]) -> None:
    """Import what the job will need while the root is still busy (``preload=``):
    a cold interpreter spends most of its start-up importing numba and the like."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:                            # noqa: BLE001
            print(f"dac leaf: preload of {name!r} failed: {type(exc).__name__}: {exc}",
                  file=sys.stderr)


def _refuse_to_start(mailbox: Mailbox, parent: Intercomm, error: ProcessError) -> None:
    """Report why this leaf cannot work (``error``, a ``ProcessError``), then wait for
    the root to stop the run."""
    mailbox.send(parent, P.Failure(error), 0, P.ERROR)
    while True:
        got = mailbox.wait([parent])
        assert got is not None              # (no timeout: it waits for a message)
        if got[2] == P.STOP:
            mailbox.send(parent, P.Bye([]), 0, P.BYE)
            return


def serve(MPI: ModuleType, parent: Intercomm, init: P.Init, start: Start, mailbox: Mailbox,
          watchdog: Callable[[], None]) -> None:
    """Run the leaf; on SIGTERM (the root stopping a run mid-task) leave cleanly:
    take the STOP message, say BYE, and let the caller disconnect. A leaf that cannot
    start (no GPU, an executor that does not import) says why and waits to be
    stopped."""
    device = init.device
    doing = f"starting CUDA on GPU {device}" if device >= 0 else "starting"
    try:
        leaf = Leaf(MPI, parent, init, start, mailbox)
        if leaf.device >= 0 and not init.settings.gpu_simulate:
            check_gpu(leaf.device)
        doing = f"importing the task executor {leaf.executor_ref!r}"
        leaf.executor.warm_up()     # imported now, while the root may still be busy
    except Exception as exc:                                # noqa: BLE001 - reported
        _refuse_to_start(mailbox, parent, process_error("leaf", doing, exc))
        return
    leaf.capture = capture_output()
    signal.signal(signal.SIGTERM, _on_sigterm)
    preload(init.settings.preload)
    leaf.imported = time.time()
    try:
        on_fresh_stack(leaf.serve, watchdog)    # (the tasks' recursions: see there)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except Abort:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        got = mailbox.wait([parent], timeout=2.0)
        while got is not None and got[2] != P.STOP:
            got = mailbox.wait([parent], timeout=2.0)
        finish_lines()
        leaf.send_output()
        leaf.send(P.BYE, P.Bye([]))
    release_output()
    # From here on the leaf only disconnects and finalizes, which can wait for the
    # other leaves spawned with it; a SIGTERM meant for a busy sibling must not kill it
    # (MPICH would then kill the whole job, the user's root process included).
    sys.stdout.flush()
