"""What a leaf does with a task: load the job's functions, run the call serially.

The scheduler reaches these functions through ``Executor`` (by reference in a leaf, as
an object on the root), never by importing this module.

A task's payload is a ``dac.task_call.TaskCall``, read there; a spawn split off a running
task (``dac.stealable``) has the id ``(owner's path, number)``.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
from typing import TYPE_CHECKING

from stealing.exceptions import SetupFailure, from_user_frames
from stealing.tree.tasks import Blob, Result, Task, TaskId, is_split

from . import context, latent, task_call
from .errors import Lazy, TaskError, exception_message, shorten_traceback
from .serialize import SCRIPT_PREFIX, dumps
from .spawn import SpawnFunction, short_repr
from .stealable import StealableContext, learn_runtime_dirs

if TYPE_CHECKING:
    from stealing.roles.executor import Worker


def load_table(entries: dict[str, bytes]) -> dict[str, SpawnFunction]:
    """Unpickle the job's ``{key: SpawnFunction}`` table.

    Classes and functions of the user's script arrive by value; they are also put in this
    process's ``__main__`` so that arguments and results naming ``__main__.X`` resolve
    here as they do on the root. The script objects that task arguments name come as
    entries of their own (``__main__:NAME#id``, see ``dac.serialize``): they replace an
    older ``X`` (the script may have redefined it) and are not functions to call.
    """
    main = sys.modules["__main__"]
    table: dict[str, SpawnFunction] = {}
    for key, blob in entries.items():
        value = pickle.loads(blob)      # (functions and classes: one stream each)
        if key.startswith(SCRIPT_PREFIX):
            name = key[len(SCRIPT_PREFIX):].rpartition("#")[0]
            setattr(main, name, value)
            _put_in_main.add(name)
        else:
            table[key] = value
    for sf in table.values():
        g = getattr(sf.fn, "__globals__", None)
        if g is not None and g.get("__name__") == "__main__" and g is not vars(main):
            for name, value in g.items():
                if not name.startswith("__") and not hasattr(main, name):
                    setattr(main, name, value)
                    _put_in_main.add(name)
    return table


_put_in_main: set[str] = set()   # names load_table gave this process's __main__


def forget_script() -> None:
    """Remove what ``load_table`` put in ``__main__`` (a warm leaf, another script)."""
    main = sys.modules["__main__"]
    for name in _put_in_main:
        if hasattr(main, name):
            delattr(main, name)
    _put_in_main.clear()


def run_task_payload(payload: Blob, table: dict[str, SpawnFunction],
                     stealable: StealableContext | None = None) -> Result:
    """Run one task, serially or (``stealable``, a ``StealableContext``) with its
    spawns on the leaf's deque; returns ``(task id, pickled result)``. A task at its
    function's grain (``TaskCall.serial``: by default a task of the root) runs the
    function's ``leaf=`` kernel if it has one; other tasks run the function itself,
    as they would have where they were spawned."""
    try:
        call = task_call.read(payload)
    except Exception as exc:                                # noqa: BLE001
        raise SetupFailure("unpickling the arguments of a task") from exc
    serial = not is_split(call.tid) if call.serial is None else call.serial
    if stealable is None:
        sf = call.spawn_function(table)
        value = context.run_serially(sf, call.args, call.kwargs, call.depth,
                                     use_leaf=serial)
    else:
        sf = stealable.function(call)
        args, kwargs = call.args, call.kwargs
        if serial and sf.leaf is not None and is_split(call.tid):
            args, kwargs = sf.fill(args, kwargs)    # (as the entry was, where it was made)
        value = stealable.run_task(sf, args, kwargs, call.depth, use_leaf=serial,
                                   grain=call.grain, target=call.target)
    return call.tid, dumps(value, Lazy("the result of", (sf, call.args, call.kwargs)))


def task_failure(payload: Blob, exc: BaseException, tb: str,
                 where: str | None = None) -> TaskError:
    """The ``TaskError`` the root raises for a failed task, with the exception object
    when it pickles. Repeated blocks of frames (a deep recursion) are collapsed here,
    so the message stays small.

    Nothing here may raise: it runs in the leaf's error path, and an exception whose
    ``__str__`` or an argument whose ``__repr__`` raises would otherwise kill the leaf
    and with it the run's report (the traceback module guards itself already).
    """
    call = "?"
    try:
        task = task_call.read(payload)
        parts = [short_repr(a) for a in task.args] + \
            [f"{k}={short_repr(v)}" for k, v in task.kwargs.items()]
        call = f"{task.name()}({', '.join(parts)})"
    except Exception:                                       # noqa: BLE001
        pass
    if where is None:
        where = f"leaf pid {os.getpid()} on {socket.gethostname()}"
    return TaskError(type(exc).__name__, exception_message(exc),
                     shorten_traceback(from_user_frames(tb)), call, where, exception=exc)


def run_batch_payloads(payloads: list[Blob],
                       table: dict[str, SpawnFunction]) -> list[Result]:
    """Run a batch of tasks on this leaf's GPU: ``[(task id, pickled result)]``.

    Tasks of a function with ``gpu_batch`` go to it together, one NumPy array per
    argument; the others run one by one as on a CPU leaf.
    """
    import numpy as np  # lazy: ~0.1 s; only a GPU leaf runs batches
    groups: dict[str, list[tuple[TaskId, tuple]]] = {}
    out: list[Result] = []
    for payload in payloads:
        task = task_call.read(payload)
        key = task.key
        sf = table.get(key) if key is not None else None
        if key is None or sf is None or sf.gpu_batch is None:
            out.append(run_task_payload(payload, table))
            continue
        if task.kwargs:
            raise TypeError(f"{sf.__name__}: a gpu_batch task takes positional "
                            f"arguments only, got keywords {sorted(task.kwargs)}")
        groups.setdefault(key, []).append((task.tid, task.args))
    for key, items in groups.items():
        sf = table[key]
        batch = sf.gpu_batch
        assert batch is not None            # only such functions' tasks were grouped
        columns = [np.asarray(col) for col in zip(*(args for _, args in items))]
        values = np.asarray(batch(*columns))
        if values.shape[:1] != (len(items),):
            raise ValueError(f"{sf.__name__}: gpu_batch returned {values.shape[:1]} "
                             f"results for a batch of {len(items)} tasks")
        for (tid, _), value in zip(items, values.tolist()):
            out.append((tid, dumps(value, f"the result of {sf.__name__}")))
    return out


class Executor:
    """dac's task executor for the scheduler (``stealing.roles.executor.TaskExecutor``): the
    functions above, and on a worker leaf the ``StealableContext`` its tasks run in.
    Leaves find it by ``REFERENCE``."""

    load_table = staticmethod(load_table)
    forget_script = staticmethod(forget_script)
    run_batch = staticmethod(run_batch_payloads)
    task_failure = staticmethod(task_failure)

    def __init__(self) -> None:
        self.stealable: StealableContext | None = None

    @staticmethod
    def warm_up() -> None:
        """The folders a ring's handler tells the program's code by, and
        cloudpickle, which a function that travels by value needs to load (the
        leaf's first JOB imported it: 7-8 ms, before the first task could run)."""
        learn_runtime_dirs()
        latent.LEAF = True              # (its clones' comprehensions: batches)
        import cloudpickle  # lazy: a leaf's start, never the root's  # noqa: F401

    @staticmethod
    def prepare(table: dict[str, SpawnFunction]) -> None:
        """Each function's fast clone written before its first task, and the folders
        a ring's handler tells the program's code by (``dac.stealable``): both cost
        milliseconds, which the first task of a job that starts as one task paid on
        the way to its first split, and its thief again before its first spawn."""
        learn_runtime_dirs()
        for sf in table.values():
            try:
                sf.ready()
            except Exception:           # noqa: BLE001 - the task that calls it says why
                pass

    def run_task(self, payload: Blob, table: dict[str, SpawnFunction],
                 worker: Worker | None = None) -> Result:
        if worker is None:
            return run_task_payload(payload, table)
        if self.stealable is None:
            self.stealable = StealableContext(worker)
        self.stealable.table = table
        return run_task_payload(payload, table, self.stealable)

    def split(self, want: int) -> list[Task]:
        return self.stealable.split(want) if self.stealable is not None else []

    def deliver(self, results: list) -> None:
        if self.stealable is not None:      # else no task ever ran here to own them
            self.stealable.deliver(results)


REFERENCE = "dac.execution:Executor"
