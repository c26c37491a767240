"""Finding the processes of dac runs started by this test session, through /proc.

Every process of a run inherits the environment of the root (MPICH passes it on to
spawned processes), so a tag in the environment tells this session's processes apart
from those of anything else running on the machine (benchmarks, another test run).
"""

from __future__ import annotations

import os
import time
import uuid

TAG_VAR = "DAC_TEST_TAG"
SESSION_TAG = os.environ.setdefault(TAG_VAR, f"dac-tests-{uuid.uuid4().hex[:12]}")
MARKER = "stealing.process"
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def dac_processes(tag: str = SESSION_TAG) -> dict[int, str]:
    """``{pid: command line}`` of live (non-zombie) dac processes carrying ``tag``."""
    found = {}
    needle = f"{TAG_VAR}={tag}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        cmdline = _read(f"/proc/{pid}/cmdline")
        if MARKER.encode() not in cmdline:
            continue
        if needle not in _read(f"/proc/{pid}/environ").split(b"\0"):
            continue
        stat = _read(f"/proc/{pid}/stat").decode(errors="replace")
        if stat and stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
            continue
        found[pid] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


def wait_for_no_processes(tag: str = SESSION_TAG, timeout: float = 5.0) -> dict:
    """Waits up to ``timeout`` seconds for every tagged dac process to end; returns
    those still alive."""
    deadline = time.monotonic() + timeout
    while True:
        left = dac_processes(tag)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def wait_for(predicate, timeout: float, interval: float = 0.05):
    """Polls ``predicate`` until it returns something true; returns it (or the last
    false value after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def new_tag() -> str:
    return f"dac-tests-{uuid.uuid4().hex[:12]}"


def tagged_env(tag: str) -> dict:
    """The environment of a launched process: the tag, and this checkout first on
    ``PYTHONPATH``. A script's ``sys.path`` starts with its own folder, so without it
    ``import dac`` found the installed copy (an editable install of another checkout)
    and the test checked that code, not this one."""
    env = dict(os.environ)
    env[TAG_VAR] = tag
    env["PYTHONPATH"] = os.pathsep.join(
        [CHECKOUT] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def launch(args, tag: str, cwd: str | None = None):
    """Starts ``args`` in its own session (a signal or a kill aimed at its process
    group cannot reach the test run) with the dac process tag ``tag``."""
    import subprocess
    return subprocess.Popen(args, env=tagged_env(tag), cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc, timeout: float):
    """``(returncode, stdout, stderr, seconds)``; kills ``proc`` after ``timeout``
    seconds (returncode None then)."""
    import subprocess
    t0 = time.monotonic()
    try:
        out, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        code = None
    return code, out, err, time.monotonic() - t0


def marked_pids(path: str) -> set:
    """Process ids that tasks wrote to the marker file ``path``."""
    try:
        with open(path) as f:
            return {int(x) for x in f.read().split()}
    except OSError:
        return set()
