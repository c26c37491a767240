"""Records of processes lost in the middle of a run, in the run's folder.

A monitor (``stealing.roles.process``) writes one when its child dies without saying it
finished; the root reads them while it waits, and a spawn that can no longer return
reads them to say why. Nothing here touches MPI.
"""

from __future__ import annotations

import os
import signal
from typing import Any, Collection

from stealing.host.procs import same_process, start_time, started_at
from stealing.host.shm import (
    mapped_shm,
    sweep_hydra_files,
    sweep_unused_shm,
    unlink_shm,
)
from stealing.host.userdirs import check, problem, runs_dir


def describe_loss(record: dict[str, Any]) -> str:
    """How a process ended, in words: ``killed by signal 11 (SIGSEGV)`` (or the
    record's own ``how``: a loss the root saw itself, ``stealing.host.watch``)."""
    if isinstance(record.get("how"), str):
        return record["how"]
    code = record["code"]
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "?"
        return f"killed by signal {-code} ({name})"
    if code == 0:
        return "exited with code 0 before the run ended"
    return f"exited with code {code}"


def make_run_dir(kind: str = "run") -> str:
    """A private folder of this process, ``<runs>/<pid>-<start>-<kind>-*`` in the
    user's state folder (``stealing.host.userdirs``): a root's run records, its
    ``mpiexec`` launcher. Folders of processes that no longer run (killed before they
    could clean up; a pid reused since counts as gone) go first, with the MPI
    shared-memory files their processes listed and no one maps any more."""
    # the root alone makes and reads these folders, and every leaf imports this module
    import shutil  # lazy: the root's
    import tempfile  # lazy: the root's

    base = runs_dir()
    since = None                # when the earliest run found dead started
    for name in os.listdir(base):
        pid, _, rest = name.partition("-")
        started = rest.partition("-")[0]
        if not pid.isdigit():
            continue
        if started.isdigit() and same_process(int(pid), int(started)):
            continue
        folder = os.path.join(base, name)
        if problem(folder) is None:
            _remove_listed_shm(folder)
            shutil.rmtree(folder, ignore_errors=True)
            began = started_at(int(started)) if started.isdigit() else None
            since = began if since is None or began is None else min(since, began)
            since = since if since is not None else os.lstat(base).st_mtime - 3600
    if since is not None:       # a run was killed: what no process listed in time
        sweep_unused_shm(since)  # (made after it began, mapped by nobody) goes too,
        sweep_hydra_files()     # and its process manager's files
    me = os.getpid()
    return tempfile.mkdtemp(prefix=f"{me}-{start_time(me)}-{kind}-", dir=check(
        base, "runs folder"))


def note_shm(run_dir: str | None, names: Collection[str]) -> None:
    """Write the MPI shared-memory segments this process maps into the run's folder:
    if the whole run is killed (the root by SIGKILL, and MPI then its processes), the
    next root removes them (``make_run_dir``)."""
    if not run_dir or not names:
        return
    try:
        with open(os.path.join(run_dir, f"shm-{os.getpid()}"), "w") as f:
            f.write("\n".join(names))
    except OSError:
        pass


def _remove_listed_shm(folder: str) -> None:
    """Unlink the shared-memory files a dead run's processes listed in ``folder``
    (``note_shm``) that no live process maps."""
    names: list[str] = []
    try:
        for entry in os.listdir(folder):
            if entry.startswith("shm-"):
                with open(os.path.join(folder, entry)) as f:
                    names += f.read().split()
    except OSError:
        return
    if names:
        used = mapped_shm()
        unlink_shm(n for n in names if n not in used)


def lost_record_path(run_dir: str, pid: int) -> str:
    """Where the monitor of process ``pid`` records its loss in ``run_dir``."""
    return os.path.join(run_dir, f"lost-{pid}.json")


def read_lost_records(run_dir: str) -> list[dict[str, Any]]:
    """The records monitors wrote in ``run_dir``, earliest first."""
    import json  # lazy: the root's (see make_run_dir)
    out: list[dict[str, Any]] = []
    try:
        names = [n for n in os.listdir(run_dir) if n.startswith("lost-")
                 and n.endswith(".json")]
    except OSError:
        return out
    for name in names:
        try:
            with open(os.path.join(run_dir, name)) as f:
                record = json.load(f)
        except (OSError, ValueError):
            continue
        if _valid_record(record):
            out.append(record)
    return sorted(out, key=lambda r: r["time"])


_RECORD: dict[str, type | tuple[type, ...]] = {
    "pid": int, "host": str, "role": str, "code": int, "tid": int, "time": (int, float)}


def _valid_record(record: object) -> bool:
    """A record has the fields a monitor writes, of their types (and a traceback, if
    any, is text)."""
    return isinstance(record, dict) and \
        all(isinstance(record.get(k), t) for k, t in _RECORD.items()) and \
        isinstance(record.get("traceback", ""), str)
