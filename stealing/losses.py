"""Records of processes lost in the middle of a run, in the run's folder.

A monitor (``stealing.process``) writes one when its child dies without saying it
finished; the root reads them while it waits, and a spawn that can no longer return
reads them to say why. Nothing here touches MPI.
"""

from __future__ import annotations

import json
import os
import signal


def describe_loss(record: dict) -> str:
    """How a process ended, in words: ``killed by signal 11 (SIGSEGV)``."""
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
    """A private folder of this process: ``<tmp>/dac-runs-<uid>/<pid>-<kind>-*`` (a
    root's run records, its ``mpiexec`` launcher). Folders of processes that no longer
    live (killed before they could clean up) go."""
    import shutil
    import tempfile
    base = os.path.join(tempfile.gettempdir(), f"dac-runs-{os.getuid()}")
    os.makedirs(base, mode=0o700, exist_ok=True)
    for name in os.listdir(base):
        pid = name.split("-", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            _remove_listed_shm(os.path.join(base, name))
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{os.getpid()}-{kind}-", dir=base)


def note_shm(run_dir: str | None, names) -> None:
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
    from .shm import mapped_shm, unlink_shm
    names = []
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
    return os.path.join(run_dir, f"lost-{pid}.json")


def read_lost_records(run_dir: str) -> list:
    """The records monitors wrote in ``run_dir``, earliest first."""
    out = []
    try:
        names = [n for n in os.listdir(run_dir) if n.startswith("lost-")
                 and n.endswith(".json")]
    except OSError:
        return out
    for name in names:
        try:
            with open(os.path.join(run_dir, name)) as f:
                out.append(json.load(f))
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda r: r["time"])
