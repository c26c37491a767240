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
MARKER = "stealing.roles.process"
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def dac_processes(tag: str = SESSION_TAG, monitors: bool = False) -> dict[int, str]:
    """``{pid: command line}`` of live (non-zombie) dac processes carrying ``tag``:
    routers and leaves, and with ``monitors`` also the monitor process that is the
    parent of each of them (see stealing/roles/process.py)."""
    found = {}
    parents = {}
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
        fields = stat.rsplit(")", 1)[-1].split()
        if not fields or fields[0] in ("Z", "X"):
            continue
        found[pid] = cmdline.replace(b"\0", b" ").decode(errors="replace")
        parents[pid] = int(fields[1])
    if not monitors:
        for parent in set(parents.values()) & set(found):
            del found[parent]
    return found


def tagged_pids(tag: str, python_only: bool = False) -> list[int]:
    """Every live process (any command; with ``python_only``, Python interpreters
    only) whose environment carries ``tag``."""
    needle = f"{TAG_VAR}={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if python_only and "python" not in os.path.basename(
                    os.readlink(f"/proc/{entry}/exe")):
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
                    continue
        except OSError:
            continue
        found.append(int(entry))
    return found


def wait_for_no_processes(tag: str = SESSION_TAG, timeout: float = 5.0) -> dict:
    """Waits up to ``timeout`` seconds for every tagged dac process to end; returns
    those still alive."""
    deadline = time.monotonic() + timeout
    while True:
        left = dac_processes(tag, monitors=True)
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


def mapped_shm() -> set:
    """``/dev/shm`` files some live process of this machine has mapped."""
    names = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            for line in _read(f"/proc/{entry}/maps").decode(errors="replace").splitlines():
                if "/dev/shm/" in line:
                    names.add(line.split()[-1])
    return names


def leftover_shm(since: float) -> list:
    """MPICH shared-memory files made after ``since`` (a ``time.time()``) that no live
    process uses: what a run that ended left behind (runs of other programs still
    going map theirs)."""
    out = []
    for name in os.listdir("/dev/shm"):
        path = os.path.join("/dev/shm", name)
        try:
            made = os.stat(path).st_mtime
        except OSError:
            continue
        if name.startswith(("mpich_shm_", "mpich_shar_tmp", "ucx_shm_posix_")) \
                and made >= since - 1:
            out.append(path)
    if not out:
        return []
    used = mapped_shm()
    return sorted(p for p in out if p not in used and os.path.exists(p))


def snapshot(tag: str) -> str:
    """What each process carrying ``tag`` is doing (state, kernel wait, command
    line): for the message of a test that found a run hanging, before it kills it."""
    lines = []
    for pid in tagged_pids(tag):
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/wchan") as f:
                wchan = f.read().strip() or "-"
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().replace(b"\0", b" ").decode(errors="replace")[:160]
        except OSError:
            continue
        lines.append(f"{pid} {state} {wchan} {args}")
    return "\n".join(lines) or "(no process)"


def dump_stacks(tag: str, wait_s: float = 1.0) -> None:
    """Make each Python of ``tag`` that dac did not spawn (the command's own: the
    root) write the stack of every thread to its stderr, through ``faulthandler``
    (``PYTHONFAULTHANDLER=1`` in its environment): a run that hangs then says in
    which call, even one inside MPI. The process ends on it (SIGABRT)."""
    import signal
    pids = [p for p in tagged_pids(tag, python_only=True)
            if MARKER.encode() not in _read(f"/proc/{p}/cmdline")]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGABRT)
        except OSError:
            pass
    time.sleep(wait_s if pids else 0)


# a spawned child that never reaches MPI_Init: its sibling does, makes MPICH's node
# segment for the pair, and waits for it at the first barrier
STALLED_CHILD = """import os, sys, time
if os.environ.get("PMI_RANK") == "1" and sys.argv[:1] == ["-c"]:
    mark = os.environ.get("DAC_TEST_STALLED")
    if mark:
        with open(mark, "w") as f:
            f.write(str(os.getpid()))
    time.sleep(300)
"""


def mpi_shm_files() -> set:
    """The names of this user's MPICH shared-memory files in ``/dev/shm``."""
    uid = os.getuid()
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return set()
    mine = set()
    for n in names:
        try:
            if n.startswith("mpich_shm_") and \
                    os.lstat(os.path.join("/dev/shm", n)).st_uid == uid:
                mine.add(n)
        except OSError:             # (removed meanwhile)
            pass
    return mine


def assert_no_new_shm(before: set) -> None:
    """No MPICH shared-memory file beyond ``before`` (any found is removed, so that
    the next test does not trip on it)."""
    left = mpi_shm_files() - before
    for name in left:
        os.unlink(os.path.join("/dev/shm", name))
    assert left == set()
