"""Task identities: what a task id says about where its result goes.

A task travels as a pair ``(task id, payload bytes)`` and its result as ``(task id,
result bytes)``: plain 2-tuples (``stealing.transport.protocol`` says why). The id is
an ``int`` for a task the job's caller gave (its result goes to the root), or a
``SplitId`` ``(owner's path, number)`` for a spawn split off a running task on a leaf:
its result goes back down the tree to that leaf, whose address (``path``, the child
indices from the root) is the owner. Whatever needs to tell the two apart asks here.
"""

from __future__ import annotations

from typing import Any, Tuple, Union

Path = Tuple[int, ...]                  # a process's address: child indices from the root
SplitId = Tuple[Path, int]              # (owner's path, number)
TaskId = Union[int, SplitId]
# a payload or a result as the executor pickled it: the stream, or (stream, buffer, ...)
# where the value holds large buffers (NumPy arrays) kept out of the stream, which
# travel uncopied (``stealing.transport.frames``); opaque to the scheduler
Blob = Union[bytes, Tuple[Any, ...]]
Task = Tuple[TaskId, Blob]              # (task id, payload)
Result = Tuple[TaskId, Blob]            # (task id, result)


def blob_size(blob: Blob) -> int:
    """Bytes of a payload or a result, its buffers counted."""
    if isinstance(blob, bytes):
        return len(blob)
    return sum(memoryview(b).nbytes for b in blob)


def is_split(task_id: TaskId) -> bool:
    """The task was split off a running task on a leaf (its owner waits for it)."""
    return type(task_id) is tuple


def owner(task_id: TaskId) -> Path | None:
    """The path of the leaf waiting for this task's result, or None for the root's
    tasks."""
    return task_id[0] if type(task_id) is tuple else None


def split_id(owner_path: Path, number: int) -> SplitId:
    """The id of the ``number``-th spawn the leaf at ``owner_path`` split off."""
    return (owner_path, number)
