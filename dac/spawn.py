"""The ``@spawn`` decorator: marks a function whose calls become tasks."""

from __future__ import annotations

import functools
import itertools

from . import context

_keys = itertools.count()


class SpawnFunction:
    """A function whose calls may run as tasks on other processes.

    Outside ``dac.run`` a call runs serially and returns the value (serial elision);
    inside a computation it returns a ``Future`` at once.

    Options: ``depth`` — calls at this recursion depth or deeper are tasks (the root's
    call is depth 0); ``cutoff`` — a predicate on the arguments that makes a call a task
    when true; ``leaf`` — a fast sequential function with the same arguments that a leaf
    calls instead of the body for each task; ``gpu_batch`` — solves a batch of tasks on a
    GPU. With neither ``depth`` nor ``cutoff`` the depth is chosen by the run.
    """

    def __init__(self, fn, depth=None, cutoff=None, leaf=None, gpu_batch=None):
        if not callable(fn):
            raise TypeError(f"@spawn decorates a function, got {fn!r}")
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)
                                  or depth < 0):
            raise ValueError(f"@spawn(depth=...) must be an integer >= 0, got {depth!r}")
        for name, value in (("cutoff", cutoff), ("leaf", leaf), ("gpu_batch", gpu_batch)):
            if value is not None and not callable(value):
                raise TypeError(f"@spawn({name}=...) must be callable, got {value!r}")
        if depth is not None and cutoff is not None:
            raise ValueError("@spawn takes depth= or cutoff=, not both")
        self.fn = fn
        self.depth = depth
        self.cutoff = cutoff
        self.leaf = leaf
        self.gpu_batch = gpu_batch
        self.key = f"{getattr(fn, '__qualname__', 'fn')}#{next(_keys)}"
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        ctx = context.current
        if ctx is None:
            return context.run_serially(self, args, kwargs)
        return ctx.call(self, args, kwargs)

    def describe(self, args, kwargs) -> str:
        """``name(arg, ...)`` for messages, arguments shortened."""
        parts = [_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()]
        return f"{self.__name__}({', '.join(parts)})"

    def __repr__(self) -> str:
        return f"<spawn function {self.__qualname__}>"


def _short(value, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def spawn(fn=None, *, depth=None, cutoff=None, leaf=None, gpu_batch=None):
    """Decorate a recursive function so its calls become tasks.

    Use as ``@spawn`` or ``@spawn(depth=4)``, ``@spawn(cutoff=lambda n: n < 25)``,
    ``@spawn(leaf=fast_njit_version)``.
    """
    if fn is None:
        return lambda f: SpawnFunction(f, depth, cutoff, leaf, gpu_batch)
    return SpawnFunction(fn, depth, cutoff, leaf, gpu_batch)
