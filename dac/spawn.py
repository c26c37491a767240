"""The ``@spawn`` decorator: marks a function whose calls become tasks."""

from __future__ import annotations

import functools
import itertools

from . import context
from .context import SerialContext
from .errors import exception_text
from .future import Future

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

    ``leaf`` and ``gpu_batch`` may be given as ``"module:function"``: the module is
    imported where the function is first needed (in the leaves), so the root never pays
    for importing numba or CUDA libraries it does not use.
    """

    def __init__(self, fn, depth=None, cutoff=None, leaf=None, gpu_batch=None):
        if not callable(fn):
            raise TypeError(f"@spawn decorates a function, got {fn!r}")
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)
                                  or depth < 0):
            raise ValueError(f"@spawn(depth=...) must be an integer >= 0, got {depth!r}")
        if cutoff is not None and not callable(cutoff):
            raise TypeError(f"@spawn(cutoff=...) must be callable, got {cutoff!r}")
        for name, value in (("leaf", leaf), ("gpu_batch", gpu_batch)):
            if value is not None and not callable(value) and not _is_reference(value):
                raise TypeError(f"@spawn({name}=...) must be callable or a "
                                f"'module:function' string, got {value!r}")
        if depth is not None and cutoff is not None:
            raise ValueError("@spawn takes depth= or cutoff=, not both")
        self.fn = fn
        self.depth = depth
        self.cutoff = cutoff
        self._leaf = leaf
        self._gpu_batch = gpu_batch
        self.key = f"{getattr(fn, '__qualname__', 'fn')}#{next(_keys)}"
        functools.update_wrapper(self, fn)

    @property
    def leaf(self):
        if isinstance(self._leaf, str):
            self._leaf = _resolve(self._leaf, "leaf")
        return self._leaf

    @property
    def gpu_batch(self):
        if isinstance(self._gpu_batch, str):
            self._gpu_batch = _resolve(self._gpu_batch, "gpu_batch")
        return self._gpu_batch

    def leaf_loaded(self) -> bool:
        """True unless the leaf function is a reference not imported yet."""
        return not isinstance(self._leaf, str)

    def __call__(self, *args, **kwargs):
        # The hot path, and one frame per level of the user's recursion in a serial
        # context: SerialContext.call is inlined here (see context.SERIAL_FRAMES).
        ctx = context.current
        if ctx.__class__ is SerialContext:
            return Future(self.fn(*args, **kwargs))
        if ctx is None:
            return context.run_serially(self, args, kwargs)
        return ctx.call(self, args, kwargs)

    def describe(self, args, kwargs) -> str:
        """``name(arg, ...)`` for messages, arguments shortened."""
        parts = [short_repr(a) for a in args] + \
            [f"{k}={short_repr(v)}" for k, v in kwargs.items()]
        return f"{self.__name__}({', '.join(parts)})"

    def __repr__(self) -> str:
        return f"<spawn function {self.__qualname__}>"


class Lazy:
    """A message naming a call, formatted only if an error needs it: describing a
    call costs a ``repr`` of every argument (a large array's is slow)."""

    __slots__ = ("what", "call")

    def __init__(self, what, call):
        self.what, self.call = what, call

    def __str__(self):
        sf, args, kwargs = self.call
        return f"{self.what} {sf.describe(args, kwargs)}"


def _is_reference(value) -> bool:
    return isinstance(value, str) and value.count(":") == 1 and all(value.split(":"))


def _resolve(reference: str, what: str):
    """Import ``"module:function"``."""
    import importlib
    module, _, name = reference.partition(":")
    try:
        obj = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"@spawn({what}={reference!r}): cannot import it: "
                          f"{type(exc).__name__}: {exc}") from exc
    return obj


def short_repr(value, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages naming a call.

    A failing ``repr`` gives a placeholder with its reason, not cut: the message is
    often about an error already under way, which it must not replace.
    """
    try:
        text = repr(value)
    except Exception as exc:                                # noqa: BLE001
        return f"<repr() of a {type(value).__name__} failed: {exception_text(exc)}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def spawn(fn=None, *, depth=None, cutoff=None, leaf=None, gpu_batch=None):
    """Decorate a recursive function so its calls become tasks.

    Use as ``@spawn`` or ``@spawn(depth=4)``, ``@spawn(cutoff=lambda n: n < 25)``,
    ``@spawn(leaf=fast_njit_version)``.
    """
    if fn is None:
        return lambda f: SpawnFunction(f, depth, cutoff, leaf, gpu_batch)
    return SpawnFunction(fn, depth, cutoff, leaf, gpu_batch)
