"""The user's private folders on this host, for everything dac keeps between processes.

A run keeps records on its host (lost processes, MPI shared-memory names, the
``mpiexec`` launcher it puts first on ``PATH``), and a warm tree keeps its file, socket,
log and lock. Another local user must not be able to read, plant or swap anything
there: a planted record once made a run delete a file its owner named, and a swapped
launcher folder made a run execute another user's program. So every folder is the
user's alone (mode 0700, no symbolic link) and is checked before every use; what fails
the check is refused with ``UnsafeFolder``, which says what is wrong and where.

Where (``state_dir``): ``$DAC_STATE_DIR`` if set; else ``$XDG_RUNTIME_DIR/dac`` where
that folder is the user's (a per-user tmpfs on most desktops and login nodes); else
``<tmp>/dac-<uid>``. Another user can make that last one first, in a world-writable
``/tmp``: then dac uses ``~/.cache/dac/state-<host>`` instead and says so once, so a
squatter can deny nothing. Below it: ``runs/`` (a folder per run, see
``stealing.host.losses``) and ``tree/`` (the warm tree, unless ``$DAC_TREE_DIR`` says).
"""

from __future__ import annotations

import os
import socket
import stat
import sys

from stealing.exceptions import DacError


class UnsafeFolder(DacError):
    """A folder (or file) dac would keep its state in is not the user's alone."""


_said: set[str] = set()          # fallbacks already told on stderr


def problem(path: str, want_dir: bool = True) -> str | None:
    """What makes ``path`` unfit to hold this user's state, or None: it must not be a
    symbolic link, must belong to this user and must give no access to anyone else."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "it does not exist"
    except OSError as exc:
        return f"it cannot be examined ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if want_dir and not stat.S_ISDIR(st.st_mode):
        return "it is not a folder"
    if not want_dir and not stat.S_ISREG(st.st_mode) and not stat.S_ISSOCK(st.st_mode):
        return "it is not a regular file"
    if st.st_uid != os.getuid():
        return f"it belongs to uid {st.st_uid}, not to you (uid {os.getuid()})"
    if st.st_mode & 0o077:
        return f"others may use it (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def check(path: str, what: str, want_dir: bool = True) -> str:
    """``path`` if it is the user's alone, else ``UnsafeFolder`` naming it, what is
    wrong and what to do."""
    why = problem(path, want_dir)
    if why is not None:
        raise UnsafeFolder(f"dac's {what} {path} cannot be trusted: {why}. dac keeps "
                           f"its state only where no other user can reach it: remove "
                           f"it, or set DAC_STATE_DIR to a folder of your own")
    return path


def private_dir(path: str, what: str) -> str:
    """Make the folder ``path`` (mode 0700; its parent must exist) unless it is there,
    then ``check`` it."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UnsafeFolder(f"dac's {what} {path} cannot be made: {exc.strerror} (set "
                           f"DAC_STATE_DIR to a folder of your own)") from None
    return check(path, what)


def _xdg_base() -> str | None:
    """``$XDG_RUNTIME_DIR/dac`` where that folder is the user's alone, else None."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and problem(runtime) is None:
        return os.path.join(runtime, "dac")
    return None


def _home_fallback(squatted: str, why: str) -> str:
    """``~/.cache/dac/state-<host>``, for when ``squatted`` in /tmp is not ours."""
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or
                         os.path.expanduser("~/.cache"))
    os.makedirs(cache, mode=0o700, exist_ok=True)
    base = private_dir(os.path.join(cache, "dac"), "cache folder")
    path = private_dir(os.path.join(base, f"state-{socket.gethostname()}"),
                       "state folder")
    if squatted not in _said:
        _said.add(squatted)
        print(f"dac: {squatted} is not yours alone ({why}): keeping dac's state in "
              f"{path} instead", file=sys.stderr, flush=True)
    return path


def state_dir() -> str:
    """This user's state folder on this host (see the module's docstring), made and
    checked now."""
    given = os.environ.get("DAC_STATE_DIR")
    if given:
        return private_dir(given, "state folder (DAC_STATE_DIR)")
    xdg = _xdg_base()
    if xdg is not None:
        return private_dir(xdg, "state folder")
    import tempfile  # lazy: every process imports this module, few call this

    shared = os.path.join(tempfile.gettempdir(), f"dac-{os.getuid()}")
    try:
        os.mkdir(shared, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        return _home_fallback(shared, exc.strerror or "it cannot be made")
    why = problem(shared)
    return shared if why is None else _home_fallback(shared, why)


def runs_dir() -> str:
    """Where runs keep their folders (``stealing.host.losses``)."""
    return private_dir(os.path.join(state_dir(), "runs"), "runs folder")


def default_tree_dir() -> str:
    """The warm tree's folder unless ``$DAC_TREE_DIR`` names another (not made)."""
    return os.path.join(state_dir(), "tree")
