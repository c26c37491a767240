"""Attaching a run to the user's warm tree (``dac up``, see ``dac.warm_tree``).

``Runtime`` asks ``attach`` for a scheduler before it spawns a tree: it gets one when a
warm tree is up, alive, answering, and of the shape the runtime would spawn itself
(same plan of leaves and routers, same leaf mode and stealing settings). Otherwise it
gets None, with a note on stderr saying why when a tree is up, and spawns its own.
``attach=False`` or ``DAC_ATTACH=0`` never attach.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from stealing.warm import folder as W
from stealing.warm import wire
from stealing.warm.attached import AttachedScheduler
from stealing.warm.attached import attach as attach_socket
from stealing.warm.folder import TreeGone

from .errors import DacError

if TYPE_CHECKING:
    from .runtime import Runtime

_T = TypeVar("_T")

_said: set[str] = set()     # notes already printed by this process


def _note(text: str, once: str | None = None) -> None:
    if once is not None:
        if once in _said:
            return
        _said.add(once)
    print(f"dac: {text}", file=sys.stderr, flush=True)


def read_tree(call: Callable[[], _T]) -> _T:
    """``call()`` (a ``stealing.warm.folder`` function on the tree folder), its
    ``TreeFileError`` a ``DacError``."""
    try:
        return call()
    except W.TreeFileError as exc:
        raise DacError(str(exc)) from None


def find(strict: bool = True) -> dict[str, Any] | None:
    """The tree file of this user's warm tree if its server is alive, else None (a
    stale file, whose server is gone, is removed). A damaged or untrusted tree file
    raises a ``DacError`` saying what is wrong, or with ``strict=False`` (a run
    looking for a tree to attach to) is passed over with a note: it must not stop a
    script that can spawn a tree of its own."""
    try:
        info = read_tree(W.read_tree_file)
    except DacError as exc:
        if strict:
            raise
        _note(f"{exc}; this run starts a tree of its own", once=str(exc))
        return None
    if info is None:
        return None
    if not W.server_alive(info):
        W.remove_tree_file(info["folder"], info["pid"])
        return None
    return info


def attach(runtime: Runtime) -> AttachedScheduler | None:
    """An ``AttachedScheduler`` on the warm tree for ``runtime``, or None (none up,
    another shape, or not answering: the runtime spawns its own; a note says why)."""
    if runtime.options.attach is False or \
            os.environ.get("DAC_ATTACH", "1").lower() in ("0", "no", "false", "off"):
        return None
    info = find(strict=False)
    if info is None:
        return None
    mismatch = _mismatch(info.get("shape"), runtime.tree_shape())
    if mismatch:
        _note(f"a warm tree is up (pid {info['pid']}) but {mismatch}: this run starts "
              f"a tree of its own", once=f"shape{info['pid']}")
        return None
    hello = wire.Hello(os.getpid(), list(sys.argv), [p for p in sys.path if p],
                    os.getcwd(), sys.getrecursionlimit())

    def queued(msg: wire.Queued) -> None:
        _note(f"the warm tree (pid {info['pid']}) is serving pid {msg.holder_pid}; "
              f"waiting for it (place {msg.position} in line)")
    try:
        sched = attach_socket(info, hello, on_queued=queued)
    except TreeGone as exc:
        _note(f"the warm tree (pid {info['pid']}) {exc}: this run starts a tree of "
              f"its own")
        return None
    _note(f"attached to the warm tree (pid {info['pid']}, {info['leaves']} leaves; "
          f"`dac down` stops it)", once="attached")
    return sched


def _mismatch(theirs: object, ours: dict[str, Any]) -> str | None:
    """Why a tree of shape ``theirs`` cannot run what asks for ``ours``, or None."""
    if theirs == ours:
        return None
    if not isinstance(theirs, dict):
        return "its shape is unknown"
    if theirs.get("leaves") != ours["leaves"]:
        return f"it has {theirs.get('leaves')} leaves and this run asks for {ours['leaves']}"
    for key in ("leaf_mode", "gpu_simulate", "batch", "batch_s", "remote", "prefetch"):
        if theirs.get(key) != ours[key]:
            return f"it has {key}={theirs.get(key)!r} and this run asks for {ours[key]!r}"
    return "its topology or stealing parameters differ from this run's"
