"""Satin-style statistics of a run: one record per process, and their totals.

Steal counters, counted where the request is answered or sent:

* ``steals_local`` — a leaf's request answered at once from its parent's pool;
* ``steals_remote`` — a request a router sent up to its parent (its pool was low or
  empty): a steal that leaves the subtree, across clusters at the top of the tree;
* ``steals_after_remote`` — a leaf's request answered with tasks that a remote steal
  brought (the leaf waited for the round trip);
* ``steals_split`` — a leaf's request answered with work split off a busy leaf (its
  queued tasks or the oldest spawns of its running task);
* ``steals_failed`` — a request answered "no more".

What crosses a cluster link (a parent and a child in different clusters: a cluster's
router and the root, which is the meeting point of the clusters), counted at the
parent: ``steals_wide`` (a child's request for work that came up such a link, or a
split asked down one), ``tasks_wide`` (tasks sent over one, either way),
``results_wide`` (results sent over one, either way) and ``bytes_wide`` (the bytes of
those tasks' and results' payloads). ``steals_remote`` counts every request a router
sent up, inside its cluster as well.

So the batches leaves received = first batches (one per leaf that got work) +
``steals_local`` + ``steals_after_remote`` + ``steals_split``. Leaves also count
``split_given`` (spawns and queued tasks they handed over) and ``split_tasks`` (split
work they ran, included in ``tasks``).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

TOTAL_KEYS = ("spawns", "batches", "steals_local", "steals_remote", "steals_after_remote",
              "steals_split", "steals_failed", "split_tasks", "split_given",
              "steals_wide", "tasks_wide", "results_wide", "bytes_wide",
              "leaves_lost", "routers_lost", "leaves_removed", "tasks_redone",
              "results_dropped", "leaves_added")


def new_record(role: str, cluster: str = "local") -> dict[str, Any]:
    """A fresh per-process record; counters start at zero for a job."""
    return {"role": role, "cluster": cluster, "host": socket.gethostname(),
            "pid": os.getpid(), "cpu_s": 0.0, "tasks": 0, "busy_s": 0.0, "idle_s": 0.0,
            "spawns": 0, "batches": 0, "steals_local": 0, "steals_remote": 0,
            "steals_after_remote": 0, "steals_split": 0, "steals_failed": 0,
            "split_tasks": 0, "split_given": 0, "steals_wide": 0, "tasks_wide": 0,
            "results_wide": 0, "bytes_wide": 0}


class Meter:
    """Measures a process's CPU seconds over one job."""

    record: dict[str, Any]          # this job's record (``new_record``), set by reset
    _cpu0: float                    # process time at the job's start

    def __init__(self, role: str, cluster: str = "local",
                 counters: tuple[str, ...] = ()) -> None:
        self.role, self.cluster = role, cluster
        self.extra: dict[str, Any] = {}  # fields kept across jobs (a GPU leaf's device)
        # the role's own counters, 0 in every job's record (one shape whatever the
        # job did: a leaf's ``largest_batch`` where no batch came)
        self.counters = counters
        self.reset()

    def keep(self, **fields: Any) -> None:
        """Fields of the process itself, in this job's record and every later one."""
        self.extra.update(fields)
        self.record.update(fields)

    def reset(self) -> None:
        """A new job: a fresh record (with the kept fields), CPU time from now."""
        self.record = new_record(self.role, self.cluster)
        self.record.update(dict.fromkeys(self.counters, 0))
        self.record.update(self.extra)
        self._cpu0 = time.process_time()

    def snapshot(self) -> dict[str, Any]:
        """The record now, with the CPU seconds of the job so far."""
        rec = dict(self.record)
        rec["cpu_s"] = time.process_time() - self._cpu0
        return rec


def startup_steps(marks: dict[str, float] | None, began: float | None, ready: float,
                  imported: float | None = None) -> dict[str, float]:
    """Where a spawned process's start went, in seconds (``startup`` in its record):
    ``python_s`` from its parent's Spawn call until its main ran (MPI's launch, the
    interpreter, dac's first imports), ``mpi_s`` MPI_Init, ``init_s`` waiting for the
    parent's INIT (Spawn returns once every process of the call is in MPI_Init),
    ``imports_s`` the task executor and ``preload`` (leaves), and ``ready_s`` from the
    Spawn call until it said READY (a leaf: when the first job came, a router: when its
    own children were spawned). ``marks``: the times of its steps (``main``, ``mpi``,
    ``init``); ``began``: when its parent called Spawn."""
    if not marks or began is None:
        return {}
    steps = {"python_s": marks["main"] - began, "mpi_s": marks["mpi"] - marks["main"],
             "init_s": marks["init"] - marks["mpi"]}
    if imported is not None:
        steps["imports_s"] = imported - marks["init"]
    steps["ready_s"] = ready - began
    return {k: round(v, 4) for k, v in steps.items()}


def totals(processes: list[dict[str, Any]], startup_s: float) -> dict[str, Any]:
    """The run's totals (``spawns``, ``batches``, steals, ``startup_s``, ``tasks``)."""
    out: dict[str, Any] = {key: sum(p.get(key, 0) for p in processes)
                           for key in TOTAL_KEYS}
    out["tasks"] = sum(p["tasks"] for p in processes)
    out["startup_s"] = round(startup_s, 6)
    out["processes"] = processes
    return out


def grain_text(stats: dict[str, Any]) -> str:
    """How the run cut the work, for the demos' first line: the spawn depth the
    root expanded the top to, or that the top call was the one task."""
    if stats.get("root_calls", 0) == 0 and stats.get("depth", 0) == 0:
        return "the top call a task on a leaf"
    return f"spawn depth {stats['depth']}"


def format_stats(stats: dict[str, Any]) -> str:
    """A short human table of the statistics, printed by the demos."""
    lines = [
        f"start-up {stats['startup_s']:.3f} s, {stats['spawns']} spawns, "
        f"{stats['tasks']} tasks in {stats['batches']} batches; steals: "
        f"{stats['steals_local']} local, {stats['steals_remote']} remote, "
        f"{stats.get('steals_split', 0)} split, {stats['steals_failed']} failed",
    ]
    if stats.get("steals_wide") or stats.get("tasks_wide"):
        lines.append(
            f"across clusters: {stats['steals_wide']} steals, {stats['tasks_wide']} "
            f"tasks, {stats['results_wide']} results, {stats['bytes_wide']} bytes")
    lines += [
        f"{'role':<7}{'cluster':<10}{'host':<16}{'pid':>8}{'tasks':>8}{'batches':>8}"
        f"{'busy s':>9}{'idle s':>9}{'cpu s':>9}",
    ]
    for p in stats["processes"]:
        role = f"gpu{p['device']}" if p.get("device", -1) >= 0 else p["role"]
        lines.append(
            f"{role:<7}{p['cluster'][:9]:<10}{p['host'][:15]:<16}{p['pid']:>8}"
            f"{p['tasks']:>8}{p['batches']:>8}{p['busy_s']:>9.3f}{p['idle_s']:>9.3f}"
            f"{p['cpu_s']:>9.3f}")
    return "\n".join(lines)
