"""``run`` and ``Runtime``: a computation on a tree of spawned MPI processes.

``Runtime`` spawns the tree once and keeps it for several ``run`` calls; ``dac.run``
makes a ``Runtime`` for one call. Each run expands the top of the recursion on the root,
lets the tree solve the tasks while the root runs the top again whenever a result a
waiting frame needs is in (``dac.driving``: combine steps, and spawns that depend on
earlier results, without rounds), and gathers the statistics. A failure or Ctrl-C ends every
process of the tree before the error reaches the caller.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Union

from stealing.observe.stats import totals
from stealing.transport.mpi import MPIBroken, lock
from stealing.transport.world import current as launcher_ranks
from stealing.tree.placement import plan_topology, steal_params
from stealing.tree.ranks import plan_for_ranks, ranks_topology
from stealing.tree.topology import (
    Topology,
    TopologyError,
    check_hosts,
    is_this_machine,
    load_topology,
    local_topology,
)

from . import execution, progress
from .driving import drive
from .errors import DacError, LostProcessError, TaskError
from .expansion import Expansion, choose_depth, function_table
from .settings import REPORT_VAR, Options, check_cwd, command_line_options, crowding
from .spawn import SpawnFunction, as_call

if TYPE_CHECKING:
    from stealing.roles.root import RootScheduler
    from stealing.roles.scheduler import Scheduler

    # ``topology=``: None (this machine), a topology file's path, or a Topology
    TopologyArg = Union[Topology, str, os.PathLike[str], None]


@dataclass
class RunReport:
    """What one run gives back: the value, the time inside ``run`` and the statistics.

    ``stats`` holds the totals ``spawns``, ``batches``, ``steals_local``,
    ``steals_remote``, ``steals_failed``, ``tasks``, ``startup_s``, plus ``passes``
    (how many times the root ran the top of the recursion),
    ``depth`` and a ``processes`` list (role, cluster, host, pid, cpu_s, tasks, busy_s,
    idle_s, ...), root first.
    """

    result: Any
    elapsed_s: float
    stats: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"result": self.result, "elapsed_s": self.elapsed_s, "stats": self.stats}

    def json_text(self) -> str:
        """The report as one line of JSON (values JSON has no type for: NumPy
        arrays as lists, anything else by its repr)."""
        return json.dumps(self.to_json(), default=_json_default)

    def hand_over(self) -> None:
        """Write the report where ``DAC_REPORT_FILE`` says, if it is set (``dac run
        --json`` reads the last run's)."""
        path = os.environ.get(REPORT_VAR)
        if path:
            with open(path, "w") as f:
                f.write(self.json_text())


def _json_default(value: Any) -> Any:
    """What ``json`` writes for a value it has no type for: a NumPy array as a list,
    anything else as its repr."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    return repr(value)


def _check_grow_host(host: object) -> None:
    """A host for ``grow``: this machine or a name that resolves (MPICH ends the
    whole job on a host it cannot reach, so it is checked first)."""
    if not isinstance(host, str) or not host:
        raise ValueError(f"grow: host must be a host name, got {host!r}")
    if is_this_machine(host):
        return
    try:
        socket.getaddrinfo(host, None)
    except OSError as exc:
        raise ValueError(f"grow: host {host!r} does not resolve ({exc})") from None


def _resolve_topology(topology: TopologyArg, opts: Options) -> Topology:
    """A ``Topology`` from None (this machine, or ``dac run --topology``'s file), a
    path or an object."""
    if topology is None:
        topology = command_line_options().get("topology")
    ranks = launcher_ranks()
    if ranks is not None:
        return _ranks_topology(topology, opts, ranks.hosts)
    if topology is None:
        return local_topology(opts.procs, opts.gpus)
    for key in ("procs", "gpus"):
        if key in opts.given:
            raise ValueError(f"{key}= sets the leaves of the default topology; a "
                             f"topology file gives its hosts' slots and gpus instead")
    if not isinstance(topology, Topology):
        topology = load_topology(topology)
    if opts.local:
        topology = topology.localized()
    if not topology.local:
        check_hosts(topology)
        return topology
    crowded = crowding(topology.procs, opts.oversubscribe)  # every host is this machine
    if crowded:
        big = max(topology.clusters, key=lambda c: c.procs)
        raise TopologyError(topology.source, "clusters",
                            f"local=True puts all {topology.procs} leaves of the topology "
                            f"on this machine (slots and gpus of every host; cluster "
                            f"{big.name!r} alone has {big.procs}), {crowded}")
    return topology


def _ranks_topology(topology: TopologyArg, opts: Options, hosts: list[str]) -> Topology:
    """The topology of a launcher's ranks (``stealing.tree.ranks``; a file, where
    given, groups their hosts into clusters); what only a spawned tree can do is
    refused, saying why."""
    how = ("under a launcher (mpiexec -n P, srun -n P) its ranks are the tree: rank 0 "
           "the root, the others its leaves and routers, and nothing is spawned")
    for key in ("procs", "gpus", "local", "oversubscribe"):
        if key in opts.given and getattr(opts, key) not in (False, 0):
            raise DacError(f"{key}= cannot be honoured {how}; leave it out (the launcher's "
                           f"-n sets the leaves), or run the script without the launcher "
                           f"to spawn a tree")
    if opts.leaf_mode != "persistent":
        raise DacError(f"leaf_mode='spawn' starts a process per batch, and {how}")
    if opts.fault_tolerant:
        raise DacError(f"fault_tolerant: {how}, and a lost rank ends the whole job (MPI's "
                       f"launcher does that); to survive lost leaves, spawn the tree "
                       f"under Open MPI: dac run --fault-tolerant script.py")
    if topology is not None and not isinstance(topology, Topology):
        topology = load_topology(topology)
    return ranks_topology(hosts, topology)


class Runtime:
    """A process tree kept alive across several ``run`` calls.

    >>> with Runtime(procs=2) as rt:             # doctest: +SKIP
    ...     rt.run(fib, 30), rt.run(fib, 31)

    ``topology`` is None (this machine, one leaf per core; ``procs=`` changes the
    count), a topology file's path, or a ``stealing.tree.topology.Topology``.
    Options: ``procs``; ``local`` (map every host of the topology onto this machine,
    keeping clusters and emulated latencies); the thesis' parameters ``branches``,
    ``min_procs``, ``tasks_per_leaf``, ``steal_factor`` (they override the topology's
    ``[stealing]``); ``leaf_mode`` (``"persistent"``, or ``"spawn"``: a new leaf process
    per batch); ``depth`` (spawn depth; automatic by default); ``batch`` (``"rate"``: a
    leaf asks for ``batch_s`` seconds of work at its measured rate, default; ``"fixed"``:
    always ``tasks_per_leaf``, the thesis); ``batch_s`` (0.05); ``prefetch`` (a leaf
    asks for more when half its batch is left; default on); ``remote``
    (``"prefetch"``: a router asks its parent before its pool runs dry, default;
    ``"blocking"``: only when empty, the thesis); ``root_helps`` (the root solves tasks
    while the leaves start, for functions whose ``leaf`` it has loaded; default on);
    ``preload`` (modules every leaf imports as soon as it starts: with ``start()``
    called before the script's own heavy imports, the leaves' cold start overlaps the
    root's); ``gpus`` (GPU leaves on this machine
    with the default topology; topology files say ``gpus`` per host); ``gpu_simulate``
    (GPU leaves run their kernels in numba's CUDA simulator: no GPU needed);
    ``oversubscribe`` (allow more than 64 leaves per core of this machine, from
    ``procs`` or from a topology mapped here with ``local``; refused otherwise).
    ``fault_tolerant`` (survive lost leaves and routers; needs Open MPI with ULFM, as
    ``dac run --fault-tolerant`` starts it, and is on there by default) and
    ``max_attempts`` (processes a task may lose before the run fails, 2);
    ``progress`` (a live line on stderr for runs over 2 s: None, the default, shows it
    on a terminal); ``timeline`` (an ``.html`` page or ``.png`` image of what every
    process did, written after each run; the ``timeline`` attribute changes it between
    runs); ``output_prefix`` (lines that tasks print reach this process's stdout and
    stderr whole, each behind ``(leaf PID)``; False: no prefix; default True unless
    ``DAC_PREFIX=0``). ``grow`` and ``shrink`` add and let go leaves of the running
    tree.

    ``start()`` spawns the tree now (``run`` does it otherwise). The first run of a
    runtime reports the tree's start-up in ``stats["startup_s"]``; its ``elapsed_s``
    includes the spawn only if the run started the tree. Runs on a tree that is already
    running send tasks to the leaves while the root is still finding them.
    """

    def __init__(self, topology: TopologyArg = None, **options: Any) -> None:
        check_cwd()
        self.options = Options.parse(options)
        self.topology = _resolve_topology(topology, self.options)
        self.params = steal_params(self.topology, self.options.steal_overrides())
        ranks = launcher_ranks()
        self.plan = plan_topology(self.topology, self.params, socket.gethostname()) \
            if ranks is None else plan_for_ranks(self.topology, self.params,
                                                 socket.gethostname(), ranks.size - 1)
        self.scheduler: Scheduler | None = None
        # where the next runs write their timeline (an .html path), or None; the
        # option sets it, and it may be changed between runs
        self.timeline: str | os.PathLike[str] | None = self.options.timeline
        self.attach_tried = False   # this tree's run looked for a warm tree already
        self.report: RunReport | None = None
        self._spawned_in_run = False
        self.owner_pid = os.getpid()    # a forked child never stops its parent's tree

    # life cycle -------------------------------------------------------------------
    def start(self) -> "Runtime":
        """Spawn the tree now (``run`` does it otherwise)."""
        with lock:
            return self._start()

    def _start(self) -> "Runtime":
        if self.scheduler is None and not self._attach():
            from stealing.transport.spawning import SpawnRefused  # lazy: as make_scheduler
            sched = self.make_scheduler()
            self.scheduler = sched
            try:
                sched.start()
            except MPIBroken as exc:
                self.close()
                raise DacError(str(exc)) from None
            except SpawnRefused as exc:
                self.close()
                raise DacError(str(exc)) from exc.__cause__
            except BaseException:
                self.close()
                raise
            # a runtime left open ends with Python (before MPI is finalized: atexit
            # calls the latest registration first)
            atexit.register(self.close)
            self._spawned_in_run = True
        return self

    def make_scheduler(self) -> RootScheduler:
        """A ``RootScheduler`` for this runtime's tree (not started). Imported here,
        not with this module: a script attached to a warm tree (``dac up``) runs no
        root of its own, and the root's modules were most of the 24 ms ``import`` of
        this module took there."""
        from stealing.roles.root import RootScheduler  # lazy: a tree spawned here
        sched = RootScheduler(self.plan, self.params,
                              self.options.run_settings(execution.REFERENCE),
                              execution.Executor())
        sched.printer.prefix = self.options.output_prefix
        return sched

    def tree_shape(self) -> dict:
        """What makes two trees interchangeable (``dac.warm_tree``: a run attaches to a
        warm tree only if it has the shape this runtime would spawn)."""
        p, o = self.params, self.options
        shape = {"leaves": len(self.plan.leaves()),
                 "routers": sum(1 for n in self.plan.walk() if n.role == "router"),
                 "plan": self.plan.to_dict(),
                 "params": [p.branches, p.min_procs, p.tasks_per_leaf, p.steal_factor],
                 "prefetch": o.prefetch, "leaf_mode": o.leaf_mode, "batch": o.batch,
                 "batch_s": o.batch_s, "remote": o.remote, "gpu_simulate": o.gpu_simulate,
                 "fault_tolerant": o.fault_tolerant, "max_attempts": o.max_attempts}
        return json.loads(json.dumps(shape))            # as the tree file holds it

    def _attach(self) -> bool:
        """Use the warm tree if one is up and fits (``dac.attaching``); looked for
        once per tree, so a tree that does not answer costs its wait once."""
        if self.attach_tried or launcher_ranks() is not None:
            return False
        self.attach_tried = True
        from .attaching import attach  # lazy: the warm tree's client; leaves import dac
        sched = attach(self)
        if sched is None:
            return False
        sched.printer.prefix = self.options.output_prefix
        self.scheduler = sched
        atexit.register(self.close)
        self._spawned_in_run = False
        return True

    def close(self) -> None:
        """Stop every process of the tree (idempotent); an attached runtime lets go of
        the warm tree, which stays up. In a child forked from the process that runs
        the tree, only the child's reference goes: the tree is its parent's."""
        with lock:
            sched, self.scheduler = self.scheduler, None
            self.attach_tried = False           # the next run looks again
            if sched is not None:
                atexit.unregister(self.close)
                if os.getpid() == self.owner_pid:
                    sched.stop()

    def grow(self, leaves: int = 1, host: str | None = None,
             cluster: str | None = None) -> None:
        """Add ``leaves`` leaf processes to the running tree, on ``host`` (default:
        this machine), under their cluster's router: the topology's ``cluster``
        (its name), else the first cluster with a leaf on that host, so their steals
        stay inside it as its other leaves' do (under the root where the tree has one
        cluster or no cluster has the host). Called during a run (from another
        thread), they join at the root's next step and start stealing at once;
        between runs, now. Their statistics say ``joined: "grow"`` and
        ``started_at``, and the run's ``leaves_added`` counts them. ``shrink`` lets go
        only leaves the root holds: those grown under a cluster's router stay."""
        if cluster is not None and not isinstance(cluster, str):
            raise TypeError(f"grow: cluster must be a cluster's name, got {cluster!r}")
        self._change("grow", leaves, host, cluster)

    def shrink(self, leaves: int = 1) -> None:
        """Let ``leaves`` leaf processes go, the newest first, among those with a
        link of their own (added by ``grow``, or every leaf under fault tolerance):
        every task a leaf held is given to the others (a task it was running starts
        again there), then it stops. ``leaves_removed`` counts them."""
        self._change("shrink", leaves, None)

    def _change(self, kind: str, count: int, host: str | None,
                cluster: str | None = None) -> None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"{kind}: leaves must be an integer >= 1, got {count!r}")
        if host is not None:
            _check_grow_host(host)
        sched = self.scheduler
        if sched is None or sched.attached:
            raise DacError(f"{kind}: the tree is not running here (call start() or "
                           f"run first; an attached warm tree grows with `dac grow`)")
        if launcher_ranks() is not None:
            raise DacError(f"{kind}: under a launcher (mpiexec -n P, srun -n P) its "
                           f"ranks are the tree, and nothing is spawned or let go")
        if kind == "shrink":
            sched.check_shrink(count)
        if lock.acquire(blocking=False):    # no run under way: change it now
            try:
                if kind == "grow":
                    sched.grow(count, host, cluster=cluster)
                else:
                    sched.shrink(count)
            finally:
                lock.release()
        else:
            sched.ask_change(kind, count, host, cluster)

    def __enter__(self) -> "Runtime":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # running ----------------------------------------------------------------------
    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` on the tree and return its value; ``fn`` is a
        ``@spawn`` function or a bound ``@spawn`` method (``obj.method``)."""
        return self.run_report(fn, *args, **kwargs).result

    def run_report(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> RunReport:
        """Like ``run`` but returns a ``RunReport`` (value, elapsed_s, stats).

        Runs from several threads are served one after the other (MPI and the tree
        are driven by one thread at a time), each with its own tasks and results.
        """
        with lock:
            return self._run_report(fn, args, kwargs)

    def _run_report(self, fn: Callable[..., Any], args: tuple,
                    kwargs: dict) -> RunReport:
        sf, args = as_call(fn, args)          # a bound method: its instance goes first
        t0, wall0 = time.perf_counter(), time.time()
        # the passes over the top freeze what they leave alive (Expansion.run_pass),
        # unless the program froze objects itself: that is left as it was
        freeze = gc.get_freeze_count() == 0
        try:
            exp, streamer = self._first_pass(sf, args, kwargs, freeze)
            done, value = exp.first
            passes = 1
            stats_list: list[dict] = []
            startup = 0.0
            if not done:
                value, passes, stats_list, startup = self._solve(sf, args, kwargs, exp,
                                                                 streamer)
        finally:
            if freeze:
                gc.unfreeze()
        elapsed = time.perf_counter() - t0
        if self.timeline is not None and stats_list:
            self._write_timeline(self.timeline, stats_list, wall0, _call_title(sf, args))
        for record in stats_list:
            record.pop("timeline", None)
        stats = totals(stats_list, startup)
        stats["passes"] = passes if exp.calls else 0     # none ran the user's code
        stats["root_calls"] = exp.calls
        stats["depth"] = exp.max_task_depth
        stats["attached"] = bool(self.scheduler is not None and self.scheduler.attached)
        self.report = RunReport(value, elapsed, stats)
        self.report.hand_over()
        return self.report

    def _first_pass(self, sf: SpawnFunction, args: tuple, kwargs: dict,
                    freeze: bool) -> tuple[Expansion, _Streamer | None]:
        """The first pass over the top of the recursion, and the streamer that sent
        its tasks, if any. On a tree already running, tasks go out while the root is
        still finding them; a fresh tree is spawned only after the first pass (bad
        arguments fail first). ``freeze``: see ``Expansion.run_pass``."""
        target = self._task_target()
        streamer = None
        if self.scheduler is None:
            self._attach()
        # else the root expands the top (GPU leaves, one-shot leaves, or the depth
        # option): to that depth, or the functions' depth= or cutoff=, or the
        # automatic depth, found by passes over the top
        top = self._top_is_task(sf)
        fixed = 0 if top else self.options.depth
        if self.scheduler is not None:
            self.scheduler.job_timeline = self.timeline is not None
            self.scheduler.begin_job()
            streamer = _Streamer(self.scheduler, target, fixed is not None)
        try:
            exp = choose_depth(sf, args, kwargs, target, fixed, streamer, top, freeze)
            if streamer is not None:
                streamer.check()
        except BaseException as exc:
            sched = self.scheduler
            if streamer is not None and streamer.started:
                self.close()
            err = _translate(exc, None, sched)
            raise err.with_traceback(None) from _cause(err, exc)
        return exp, streamer

    def _solve(self, sf: SpawnFunction, args: tuple, kwargs: dict, exp: Expansion,
               streamer: _Streamer | None) -> tuple[Any, int, list[dict], float]:
        """Solve on the tree (started now if it is not running) the job whose first
        pass is ``exp``: ``(value, passes, the processes' statistics, start-up s)``.
        A failure ends every process of the tree before the error is raised."""
        fresh = self.scheduler is None
        self._start()
        sched = self.scheduler
        assert sched is not None                # _start spawned or attached one
        try:
            if fresh:
                sched.job_timeline = self.timeline is not None
                sched.begin_job()
            streamed = False
            if streamer is not None and streamer.exp is exp and streamer.started:
                streamed = True
                streamer.flush()
                streamer.check()
            value, passes = self._drive(sched, sf, args, kwargs, exp, streamed)
            stats_list = sched.end_job()
            startup = 0.0
            if sched.job_id == 1:
                startup = sched.startup_s or 0.0
        except BaseException as exc:
            self.close()            # every process of the tree ends first
            err = _translate(exc, exp, sched)
            raise err.with_traceback(None) from _cause(err, exc)
        return value, passes, stats_list, startup

    def _drive(self, sched: Scheduler, sf: SpawnFunction, args: tuple, kwargs: dict,
               exp: Expansion, streamed: bool) -> tuple[Any, int]:
        """``drive`` the job, with the live progress line when it is wanted."""
        helps = self.options.helps()
        if progress.wanted(self.options.progress):
            with progress.Progress(sched) as shown:
                return drive(sched, exp, sf, args, kwargs, helps, streamed, shown)
        return drive(sched, exp, sf, args, kwargs, helps, streamed)

    @staticmethod
    def _write_timeline(where: str | os.PathLike[str], stats_list: list[dict],
                        wall0: float, title: str) -> None:
        """Write the run's timeline to ``where`` (a page or an image), and say so."""
        from . import timeline_page as timeline  # lazy: only a run that asks for one
        path = os.path.abspath(os.fspath(where))
        timeline.write(path, timeline.build(stats_list, wall0, time.time(), title=title))
        print(f"dac: timeline of {title} written to {path}", file=sys.stderr,
              flush=True)

    def _top_is_task(self, sf: SpawnFunction) -> bool:
        """The top call is the one task and the root runs none of the user's code:
        every leaf is a worker that splits its spawns (persistent, CPU), and neither
        the run (``depth`` option) nor the function (``depth=``) names a spawn depth
        for the root to expand to. A function's ``cutoff=`` and ``leaf=`` set its
        grain on the workers (``dac.stealable.Grain``).

        A spawn depth keeps the thesis' method: the root's pool holds every call at
        that depth and hands them down with the thesis' counts. For a wide, flat
        spawn that is the better schedule: 1360 naps of 30 ms spawned by one top
        call on 20 leaves ran at 0.96-0.98 efficiency from the root's pool and
        0.76-0.78 split off the one task (``benchmarks/flat_spawn.py``; the thesis'
        Table 6.5, ``benchmarks/thesis/table_6_5.py``, is this shape)."""
        return self.options.depth is None and sf.depth is None and \
            self.options.leaf_mode == "persistent" and \
            all(leaf.device < 0 for leaf in self.plan.leaves())


    def _task_target(self) -> int:
        """Tasks the automatic depth aims for: twice what the root hands out at the
        start (so its pool can answer steals), and at least 16 per leaf."""
        first = sum(c.tasks for c in self.plan.children)
        return max(16 * len(self.plan.leaves()), int(2 * first))


def _call_title(fn: SpawnFunction, args: tuple) -> str:
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "run"))
    shown = ", ".join(repr(a) for a in args)
    return f"{name}({shown[:60]})"


def _translate(exc: BaseException, exp: Expansion | None,
               sched: Scheduler | None) -> BaseException:
    """The error to raise for ``exc``: a lost process names the task it ran (the
    scheduler knows the task's id, the expansion its call); a warm tree that went
    away is a ``DacError``; a task that ended the program (``sys.exit``, a
    ``KeyboardInterrupt`` it raised) ends it here too, as the plain program would, at
    whatever depth it ran."""
    from stealing.warm.folder import TreeGone  # lazy: as .attaching (see _attach)
    if isinstance(exc, TaskError) and isinstance(exc.exception, _ENDS_PROGRAM):
        return exc.exception
    if isinstance(exc, TreeGone):
        return DacError(f"the warm tree {exc}")
    lost = getattr(sched, "lost", None)
    if not isinstance(exc, LostProcessError) or exp is None or lost is None \
            or lost["tid"] < 0:
        return exc
    for t in exp.tasks.values():
        if t.tid == lost["tid"]:
            return LostProcessError(exc.role, exc.pid, exc.host, exc.how, exc.exit_code,
                                    exc.signal, t.sf.describe(*t.call[1:]),
                                    exc.remote_traceback)
    return exc


_ENDS_PROGRAM = (SystemExit, KeyboardInterrupt)


def _cause(err: BaseException, exc: BaseException) -> BaseException | None:
    """What ``err`` (``exc`` translated) is raised from: a task's own exception when
    it travelled (as ``concurrent.futures`` shows it); for a task's ``SystemExit`` or
    ``KeyboardInterrupt``, the ``TaskError`` that says which call raised it and where;
    nothing of dac's internals otherwise (a ``ProcessError`` shows its cause once, in
    its own text: ``exception`` has it)."""
    if err is not exc and isinstance(exc, TaskError):
        return exc.with_traceback(None)
    return err.exception if isinstance(err, TaskError) else None


class _Streamer:
    """Sends the first pass's tasks to a running tree in growing chunks, once the pass
    is sure to be kept (see ``choose_depth``). Errors are held until the pass ends: they
    must not surface inside the user's frames."""

    def __init__(self, sched: Scheduler, target: int, fixed: bool) -> None:
        self.sched, self.target, self.fixed = sched, target, fixed
        self.exp: Expansion | None = None
        self.sent = 0               # tasks of ``exp`` sent
        self.chunk = 16             # how many more make the next chunk
        self.started = False
        self.error: BaseException | None = None

    def __call__(self, exp: Expansion) -> None:
        if self.error is not None:
            return
        if exp is not self.exp:              # a new pass (a deeper trial)
            self.exp, self.sent, self.chunk = exp, 0, 16
        found = len(exp.new_tasks)
        if not self.started:
            if not (self.fixed or found >= self.target):
                return
            self.started = True
            self.sched.open_stream()
        if found - self.sent >= self.chunk:
            self.flush()
            self.chunk = min(self.chunk * 2, 1024)

    def flush(self) -> None:
        """Send the pass's tasks found since the last chunk (an error is kept for
        ``check``)."""
        assert self.exp is not None         # called once a pass found tasks
        tasks = self.exp.new_tasks[self.sent:]
        self.sent = len(self.exp.new_tasks)
        if not tasks or self.error is not None:
            return
        try:
            self.sched.feed([(t.tid, t.payload) for t in tasks],
                            function_table(tasks, self.sched.sent_keys))
        except BaseException as exc:         # noqa: BLE001 - raised by check()
            self.error = exc

    def check(self) -> None:
        """Raise the error a ``flush`` met, once the pass is over."""
        if self.error is not None:
            raise self.error


def run(fn: Callable[..., Any], *args: Any, topology: TopologyArg = None,
        **options: Any) -> Any:
    """Run ``fn(*args)`` on a fresh process tree and return its value.

    Each fresh tree leaves ~0.1 MB per process the root spawned in MPICH and UCX (see
    the README, "Memory"): for many runs, keep a ``Runtime``."""
    return run_report(fn, *args, topology=topology, **options).result


def run_report(fn: Callable[..., Any], *args: Any, topology: TopologyArg = None,
               **options: Any) -> RunReport:
    """Run ``fn(*args)`` on a fresh process tree; returns value, time and statistics."""
    rt = Runtime(topology, **options)
    try:
        return rt.run_report(fn, *args)
    finally:
        rt.close()
