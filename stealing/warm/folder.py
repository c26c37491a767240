"""Where a warm tree is found: its folder, its tree file, its lock.

``dac up`` leaves a process tree running in the background; its root (the *tree
server*, ``stealing.warm.server``) listens on a Unix socket, and a script's ``dac.run``
attaches to it (``stealing.warm.attached``) instead of spawning a tree of its own. Both find
each other through the *tree folder*:

    $DAC_TREE_DIR, else tree/ in the user's state folder (``stealing.host.userdirs``)
        tree.json   who serves (pid and start time, uid, leaves, options)
        tree.sock   the server's socket
        tree.log    the server's output
        up.lock     held by the server for its life: one ``dac up`` at a time

The folder is the user's alone (mode 0700), and so are its files: a folder or file
that another user owns, or that others may use, is refused (``UnsafeFolder``, what is
wrong and where), never read, since what comes through the socket is unpickled. The
server checks its peers' uid as well (``SO_PEERCRED``). A tree file whose server is
gone (its pid ended, or now names another process: the pid and its start time must
both match) is stale, and one that does not parse is damaged: neither stops anything,
and ``dac down`` clears both.

What goes over the socket is ``stealing.warm.wire``'s.
"""

from __future__ import annotations

import fcntl
import json
import os
from typing import Any

from stealing.host.procs import same_process, start_time
from stealing.host.userdirs import check, default_tree_dir, private_dir

TREE_FILE = "tree.json"
SOCKET_FILE = "tree.sock"
LOG_FILE = "tree.log"
LOCK_FILE = "up.lock"


class TreeFileError(RuntimeError):
    """A tree file that is damaged: it does not parse, or lacks what a tree file has."""


class TreeGone(RuntimeError):
    """The warm tree stopped answering, or ended (``dac down``, a lost process)."""


class TreeBusy(RuntimeError):
    """Another ``dac up`` holds the tree folder's lock (its tree is up or starting)."""


def tree_dir() -> str:
    """The folder of this user's warm tree (it may not exist)."""
    return os.environ.get("DAC_TREE_DIR") or default_tree_dir()


def make_tree_dir(path: str | None = None) -> str:
    """Create the tree folder (mode 0700) if needed and check it is the user's."""
    return private_dir(path or tree_dir(), "warm tree folder")


# what tree.json holds, and of which type
_FIELDS: dict[str, type] = {"pid": int, "started_ticks": int, "socket": str, "uid": int,
                             "leaves": int}


def read_tree_file(folder: str | None = None) -> dict[str, Any] | None:
    """What ``tree.json`` says (plus ``"folder"``), or None when there is none. Raises
    ``UnsafeFolder`` for a folder or file that is not the user's alone and
    ``TreeFileError`` for one that is damaged."""
    folder = folder or tree_dir()
    path = os.path.join(folder, TREE_FILE)
    if not os.path.lexists(path):
        return None
    check(folder, "warm tree folder")
    check(path, "warm tree file", want_dir=False)
    try:
        with open(path) as f:
            info = json.load(f)
    except (OSError, ValueError) as exc:
        raise TreeFileError(f"warm tree file {path} cannot be read: {exc} (`dac down` "
                            f"removes it)") from None
    if not isinstance(info, dict):
        raise TreeFileError(f"warm tree file {path} is not a dac tree file: it holds "
                            f"no object (`dac down` removes it)")
    wrong = [f"{k} ({'missing' if k not in info else type(info[k]).__name__})"
             for k, t in _FIELDS.items()
             if not isinstance(info.get(k), t) or isinstance(info.get(k), bool)]
    if wrong:
        raise TreeFileError(f"warm tree file {path} is not a dac tree file: "
                            f"{', '.join(wrong)} (`dac down` removes it)")
    info["folder"] = folder
    return info


def server_alive(info: dict[str, Any]) -> bool:
    """The process ``info`` names still runs: the same pid and start time."""
    return same_process(info["pid"], info["started_ticks"])


def write_tree_file(folder: str, info: dict[str, Any]) -> str:
    """Write ``tree.json`` atomically, readable by the user alone; it names this
    process (pid and start time) as the server."""
    info = dict(info, pid=os.getpid(), started_ticks=start_time(os.getpid()))
    path = os.path.join(check(folder, "warm tree folder"), TREE_FILE)
    tmp = path + f".{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f, indent=1)
    os.replace(tmp, path)
    return path


def remove_tree_file(folder: str, pid: int | None = None) -> None:
    """Remove the tree file and socket (if ``pid`` is given: only while the file still
    names ``pid``'s server; a damaged file is ``dac down``'s to remove)."""
    path = os.path.join(folder, TREE_FILE)
    if pid is not None:
        try:
            with open(path) as f:
                if json.load(f).get("pid") != pid:
                    return
        except (OSError, ValueError, AttributeError):
            return
    for name in (TREE_FILE, SOCKET_FILE):
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass


def take_up_lock(folder: str) -> int:
    """Hold the tree folder's lock (``up.lock``): a file descriptor the tree server
    inherits and keeps for its life, so a second ``dac up`` is refused at once
    (``TreeBusy``); the lock goes with the last process holding it, whatever ends
    it."""
    path = os.path.join(folder, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        check(path, "warm tree lock", want_dir=False)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise TreeBusy("another `dac up` is starting or serving a warm tree in "
                       f"{folder}") from None
    except BaseException:
        os.close(fd)
        raise
    return fd
