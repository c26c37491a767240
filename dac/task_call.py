"""A task's call, as it travels to a leaf: written and read here only.

A task reaches a leaf as ``(task id, payload)`` (``stealing.tree.tasks``); the payload is
the pickled call, ``(task id, function key, depth, args, kwargs)``, with the function's
own bytes sixth when the job's table has no entry for it (a spawn split off a running
task whose function only other ``@spawn`` functions call; the key is then None). The
wire form stays a plain tuple: a tuple pickles smaller and faster than any object, and a
leaf unpickles thousands a second.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from stealing.tree.tasks import Blob, TaskId

from .serialize import dumps_payload, loads

if TYPE_CHECKING:
    from .spawn import SpawnFunction


class TaskCall(NamedTuple):
    """One call of a ``@spawn`` function: which function, at which recursion depth, with
    which arguments. ``function`` is the pickled ``SpawnFunction`` when ``key`` is None.

    The grain of a function with ``cutoff=``, ``depth=`` or ``leaf=`` (``dac.stealable``):
    ``serial`` says whether the call is at its grain (True: it runs as the user asked
    for a task, its ``leaf=`` function or its body with nested calls of such functions
    plain; False: its body, its spawns on the deque; None: a task of the root is, a
    split one is not); ``grain`` is the depth of the grain of ``leaf=`` functions
    without ``depth=`` or ``cutoff=`` where a worker already fixed it, and ``target``
    the number of tasks the run aims for, which the top task's worker fixes it by."""

    tid: TaskId
    key: str | None
    depth: int
    args: tuple
    kwargs: dict
    function: bytes | None = None
    serial: bool | None = None
    grain: int | None = None
    target: int | None = None

    def wire(self) -> tuple:
        """The plain tuple that is pickled (no class reference in the bytes)."""
        if self.serial is not None or self.grain is not None or self.target is not None:
            return tuple(self)
        if self.function is None:
            return (self.tid, self.key, self.depth, self.args, self.kwargs)
        return (self.tid, None, self.depth, self.args, self.kwargs, self.function)

    def spawn_function(self, table: dict[str, SpawnFunction]) -> SpawnFunction:
        """The ``SpawnFunction`` to call: from the job's table, or unpickled."""
        if self.key is not None:
            return table[self.key]
        assert self.function is not None    # a call without a key carries its function
        return loads(self.function)

    def name(self) -> str:
        """The function's name, for messages (its key without the redefinition tag)."""
        if self.key is not None:
            return self.key.split('#')[0]
        assert self.function is not None    # a call without a key carries its function
        return str(loads(self.function).__qualname__)


def read(payload: Blob) -> TaskCall:
    """The call a payload holds."""
    return TaskCall(*loads(payload))


def write(call: TaskCall, what: Any) -> Blob:
    """The payload of ``call``; ``what`` describes it if pickling fails. Objects among
    its arguments travel as ``dumps_payload`` sends them (``dac.object_state``); the
    script's objects they name are in the job's table already."""
    return write_noting(call, what, False)[0]


def write_noting(call: TaskCall, what: Any,
                 scalars: bool) -> tuple[Blob, dict[str, Any] | None]:
    """``(payload, {name: script object} or None)``: as ``write``, also naming the
    objects of the user's script the arguments refer to (``dumps_payload``)."""
    values = (*call.args, *call.kwargs.values()) if call.kwargs else call.args
    return dumps_payload(call.wire(), what, values, scalars)
