"""The ``@spawn`` decorator: marks a function whose calls become tasks."""

from __future__ import annotations

import functools
import importlib
import inspect
import itertools
from types import FunctionType, MethodType
from typing import TYPE_CHECKING, Any, Callable, Union, overload

from . import context
from .context import SerialContext
from .context import current as _current  # per thread: the hot path reads it
from .errors import SerializationError, exception_text
from .future import done
from .serialize import dumps
from .spawn_call import function_of, name_as_body, readable, ready, trimmer, write_call
from .stealable import StealableContext

if TYPE_CHECKING:
    # ``leaf=`` and ``gpu_batch=``: a function, or "module:function" imported when
    # first needed
    Loadable = Union[Callable[..., Any], str]
    # what @spawn decorates: a function, or a static or class method (@spawn above it)
    Decorated = Union[Callable[..., Any], staticmethod, classmethod]

_keys = itertools.count()


class SpawnFunction:
    """A function whose calls may run as tasks on other processes: its options, and
    what its calls do.

    Outside ``dac.run`` a call runs serially and returns the value (serial elision);
    inside a computation it returns a ``Future`` at once.

    ``@spawn`` returns a plain Python function written for the decorated one's
    parameters (``dac.spawn_call``: a spawn costs about a function call), which holds
    this object; ``spawn_function(f)`` gives it back. Where the parameters cannot be
    read (a builtin, a callable object), ``@spawn`` returns this object itself.

    Options: ``depth`` — calls at this recursion depth or deeper are tasks (the root's
    call is depth 0); ``cutoff`` — a predicate on the arguments that makes a call a task
    when true; ``leaf`` — a fast sequential function with the same arguments that a leaf
    calls instead of the body for each task; ``gpu_batch`` — solves a batch of tasks on a
    GPU. With neither ``depth`` nor ``cutoff`` the depth is chosen by the run.

    ``leaf`` and ``gpu_batch`` may be given as ``"module:function"``: the module is
    imported where the function is first needed (in the leaves), so the root never pays
    for importing numba or CUDA libraries it does not use.

    In a class, a ``@spawn`` function is a method: ``obj.m`` is a bound method whose
    calls (and ``dac.run(obj.m, ...)``) pass ``obj`` first, so ``obj`` travels to the
    leaves with every task and must be picklable; ``cutoff``, ``leaf`` and
    ``gpu_batch`` get it too. ``@staticmethod`` and ``@classmethod`` work above or
    below ``@spawn``.
    """

    # set by functools.update_wrapper from the decorated function
    __name__: str
    __qualname__: str
    # this process's last top call in the serial elision was short (``context.run_top``)
    _short_top: bool

    def __init__(self, fn: Decorated,
                 depth: int | None = None, cutoff: Callable[..., Any] | None = None,
                 leaf: Loadable | None = None, gpu_batch: Loadable | None = None) -> None:
        binds = "instance"
        if isinstance(fn, (staticmethod, classmethod)):    # @spawn above them
            binds = "nothing" if isinstance(fn, staticmethod) else "class"
            fn = fn.__func__
        if not callable(fn):
            raise TypeError(f"@spawn decorates a function, got {fn!r}")
        _refuse_lazy(fn)
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
        self.fn: Callable[..., Any] = fn
        self.binds = binds         # what obj.m passes first: the instance, class, nothing
        self.depth = depth
        self.cutoff = cutoff
        self._leaf: Loadable | None = leaf
        self._gpu_batch: Loadable | None = gpu_batch
        # the user chose the grain: in a leaf, calls at it run as the user asked, and
        # calls below it are plain (dac.stealable.Grain)
        self.grain_fixed = cutoff is not None or leaf is not None
        self.key = f"{getattr(fn, '__qualname__', 'fn')}#{next(_keys)}"
        functools.update_wrapper(self, fn)
        # no function can be written for fn's parameters: calls come to __call__
        self._generic = not readable(fn)

    def public(self) -> Any:
        """What ``@spawn`` returns: the plain function written for the decorated
        one's parameters (``dac.spawn_call``; a static or class method as one), or
        this object where the parameters cannot be read (its ``__call__`` serves)."""
        if self._generic:
            return self
        function = function_of(self)
        write_call(function, self)
        if self.binds == "nothing":
            return staticmethod(function)
        if self.binds == "class":
            return classmethod(function)
        return function

    # the function of an unpickled SpawnFunction (``dac.serialize`` reaches it through
    # the class, which it cannot import)
    function_of = staticmethod(function_of)

    def first_call(self, args: tuple, kwargs: dict) -> Any:
        """The first call of this function unpickled (``dac.spawn_call.function_of``):
        the function it holds is whole now, so the call's code is written, then run."""
        function = self.__dict__["function"]
        write_call(function, self)
        return function(*args, **kwargs)

    def ready(self) -> None:
        """Its function and fast clone written now (``dac.spawn_call.ready``)."""
        if not self._generic:
            ready(self)

    def serial_body(self) -> Callable[..., Any]:
        """What runs a call whose nested calls are all plain (at a grain set by
        ``cutoff=``, in the elision): the body's fast clone where it has one."""
        if self._generic:
            return self.fn
        ready(self)
        run: Callable[..., Any] = function_of(self).__globals__["_dac_run"]
        return run

    def trim(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """A call's arguments as they travel in a task: without the values that are
        the function's own defaults (see ``dac.spawn_call.trimmer``)."""
        trim = self.__dict__.get("_trim")
        if trim is None:
            trim = self.__dict__["_trim"] = trimmer(self.fn)
        return trim(args, kwargs)

    def fill(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """A travelled call's arguments with the defaults ``trim`` left out put back
        (this process's own default objects), as a deque entry here holds them: what
        a thief's task at its grain gives the ``leaf=`` function."""
        fn = self.fn
        if not (getattr(fn, "__defaults__", None) or getattr(fn, "__kwdefaults__", None)):
            return args, kwargs
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except (TypeError, ValueError):
            return args, kwargs
        bound.apply_defaults()
        return bound.args, bound.kwargs

    def __reduce__(self) -> tuple:
        """Pickled as a generic ``SpawnFunction`` with its attributes, less what
        this process made for it (its function, its trimmer): the function is made
        again where it is needed (``dac.spawn_call.function_of``)."""
        return _blank, (), {k: v for k, v in self.__dict__.items() if k not in _MADE}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        function = self.__dict__.get("function")
        if function is not None:        # made while this object had no state
            name_as_body(function, self)

    @property
    def leaf(self) -> Callable[..., Any] | None:
        value = self._leaf
        if isinstance(value, str):
            value = self._leaf = _resolve(value, "leaf")
        return value

    @property
    def gpu_batch(self) -> Callable[..., Any] | None:
        value = self._gpu_batch
        if isinstance(value, str):
            value = self._gpu_batch = _resolve(value, "gpu_batch")
        return value

    def has_kernels(self) -> bool:
        """A ``leaf=`` or ``gpu_batch=`` function was given (loaded or not)."""
        return self._leaf is not None or self._gpu_batch is not None

    def leaf_loaded(self) -> bool:
        """True unless the leaf function is a reference not imported yet."""
        return not isinstance(self._leaf, str)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The generic call path, for a function whose signature cannot be read (for
        # the others @spawn returns a function, dac.spawn_call); one frame per level
        # of the user's recursion in a serial context (see context.SERIAL_FRAMES).
        ctx = _current()
        if ctx.__class__ is SerialContext:
            if ctx.leaf is None or not self.grain_fixed:
                return done(self.fn(*args, **kwargs))
            ctx = ctx.leaf.woken()      # a leaf's task below its horizon: its grain
        if ctx.__class__ is StealableContext:      # a task on a leaf: see dac.stealable
            ctx.countdown -= 1          # (its fast paths are the written function's)
            return ctx.call(self, args, kwargs)
        return self._dispatch(ctx, args, kwargs)

    def _dispatch(self, ctx: Any, args: tuple, kwargs: dict) -> Any:
        """A call outside the fast paths: outside ``run`` (the serial elision's top),
        or in a context that takes every call (an ``Expansion`` on the root)."""
        if ctx is None:
            return context.run_top(self, args, kwargs)
        return ctx.call(self, args, kwargs)

    def __get__(self, obj: object,
                owner: type | None = None) -> SpawnFunction | MethodType:
        """``obj.m``: a bound method passing ``obj`` first, as for a plain function in
        a class, and ``Class.m`` the spawn function itself; a class method passes the
        class first, a static method nothing."""
        if self.binds == "instance":
            return self if obj is None else MethodType(self, obj)
        if self.binds == "class":
            return MethodType(self, owner if owner is not None else type(obj))
        return self

    def describe(self, args: tuple, kwargs: dict) -> str:
        """``name(arg, ...)`` for messages, arguments shortened."""
        parts = [short_repr(a) for a in args] + \
            [f"{k}={short_repr(v)}" for k, v in kwargs.items()]
        return f"{self.__name__}({', '.join(parts)})"

    def __repr__(self) -> str:
        return f"<spawn function {self.__qualname__}>"


def _blank() -> SpawnFunction:
    """An empty ``SpawnFunction`` for unpickling (``SpawnFunction.__reduce__``)."""
    return SpawnFunction.__new__(SpawnFunction)


# what a SpawnFunction holds that this process made for it, and that does not travel
_MADE = frozenset(("function", "_trim", "_short_top"))


def spawn_function(obj: object) -> SpawnFunction | None:
    """The ``SpawnFunction`` behind what ``@spawn`` returned, or None."""
    if isinstance(obj, SpawnFunction):      # @spawn could not read the signature
        return obj
    if type(obj) is FunctionType:           # the function @spawn wrote (spawn_call)
        return obj.__dict__.get("__dac_spawn__")
    return None


def _refuse_lazy(fn: Callable[..., Any]) -> None:
    """Refuse generator and async functions: a call returns a generator or a coroutine
    at once, before the body has run, and dac would take that as the value (a
    coroutine never awaited, a generator that cannot travel)."""
    if inspect.isasyncgenfunction(fn):
        what, gives, fix = ("an async generator function", "an async generator",
                            "use def and return a list")
    elif inspect.iscoroutinefunction(fn):
        what, gives, fix = ("an async function", "a coroutine",
                            "use def, not async def: dac never awaits")
    elif inspect.isgeneratorfunction(fn):
        what, gives, fix = ("a generator function", "a generator",
                            "return a list instead of yielding")
    else:
        return
    raise TypeError(f"@spawn cannot decorate {getattr(fn, '__qualname__', fn)!s}: it is "
                    f"{what}, so a call returns {gives} before its body runs, and "
                    f"dac needs a plain function that returns its value ({fix})")


def as_call(fn: Callable[..., Any], args: tuple) -> tuple[SpawnFunction, tuple]:
    """``(SpawnFunction, args)`` for the function given to ``run``: a bound ``@spawn``
    method becomes its function with the instance (or class) as first argument.

    The instance travels to the leaves with every task: it is pickled here once, to
    fail before anything is spawned and say why if it cannot be.
    """
    method = spawn_function(fn.__func__) if isinstance(fn, MethodType) else None
    if method is not None:
        assert isinstance(fn, MethodType)
        sf, bound = method, fn.__self__
        try:
            dumps(bound, "it")
        except SerializationError as exc:
            assert exc.__cause__ is not None        # dumps raises it from pickle's error
            raise SerializationError(
                f"{sf.__qualname__} is bound to {short_repr(bound)}, which goes to the "
                f"leaves as the method's first argument with every task, and it cannot "
                f"be pickled: {exception_text(exc.__cause__)}; make it picklable "
                f"(e.g. with __getstate__) or pass what the method needs as arguments"
            ) from exc.__cause__
        return sf, (bound, *args)
    found = spawn_function(fn)
    if found is None:
        raise TypeError(f"dac runs functions decorated with @dac.spawn, got {fn!r}")
    return found, args


def _is_reference(value: object) -> bool:
    return isinstance(value, str) and value.count(":") == 1 and all(value.split(":"))


def _resolve(reference: str, what: str) -> Any:
    """Import ``"module:function"``."""
    module, _, name = reference.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"@spawn({what}={reference!r}): cannot import it: "
                          f"{type(exc).__name__}: {exc}") from exc
    return obj


def short_repr(value: object, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages naming a call.

    A failing ``repr`` gives a placeholder with its reason, not cut: the message is
    often about an error already under way, which it must not replace.
    """
    try:
        text = repr(value)
    except Exception as exc:                                # noqa: BLE001
        return f"<repr() of a {type(value).__name__} failed: {exception_text(exc)}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


@overload
def spawn(fn: Decorated, *, depth: int | None = None,
          cutoff: Callable[..., Any] | None = None, leaf: Loadable | None = None,
          gpu_batch: Loadable | None = None) -> Any: ...


@overload
def spawn(fn: None = None, *, depth: int | None = None,
          cutoff: Callable[..., Any] | None = None, leaf: Loadable | None = None,
          gpu_batch: Loadable | None = None
          ) -> Callable[[Decorated], Any]: ...


def spawn(fn: Decorated | None = None, *, depth: int | None = None,
          cutoff: Callable[..., Any] | None = None, leaf: Loadable | None = None,
          gpu_batch: Loadable | None = None) -> Any:
    """Decorate a recursive function so its calls become tasks.

    Use as ``@spawn`` or ``@spawn(depth=4)``, ``@spawn(cutoff=lambda n: n < 25)``,
    ``@spawn(leaf=fast_njit_version)``. Returns a plain function with the decorated
    one's parameters (a static or class method where one was decorated), whose
    options ``spawn_function`` gives (see ``SpawnFunction``); typed ``Any``: a call
    returns the value outside ``run`` and a ``Future`` inside.
    """
    if fn is None:
        return lambda f: SpawnFunction(f, depth, cutoff, leaf, gpu_batch).public()
    return SpawnFunction(fn, depth, cutoff, leaf, gpu_batch).public()
