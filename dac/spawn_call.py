"""The function ``@spawn`` returns, written for the decorated function's signature.

A spawn that nobody steals must cost about a function call (work-first). So what
``@spawn`` returns is a plain Python function, not a callable object: CPython 3.11
calls a function from Python code without a C call (about 27 ns), where an object's
``__call__`` costs 63 ns; and its body is written for the function's parameters (as
``dataclasses`` writes ``__init__``): ``fib(n - 1)`` passes ``n`` straight to the body,
with no tuple and dict packed and unpacked, and the done future is a ``Done`` made by
C code only. Tuples and dicts are built only where the call leaves the fast paths (a
task's call, an expansion, a deque entry's record). The ``SpawnFunction`` holding the
options is in the function's globals (``_dac_sf``) and its ``__dac_spawn__``.

The fast paths: the serial elision (``SerialContext``), and in a leaf
(``StealableContext``) a deque entry or a plain call under the grain. Anything else
goes to ``SpawnFunction._dispatch``. A function whose signature cannot be read (a
builtin, a callable object) keeps ``SpawnFunction``'s generic ``__call__``.

A function unpickled (``function_of``: a task's function refers to itself by name)
is made before the ``SpawnFunction`` it belongs to has its state: it starts as a
forwarder that writes its own code at its first call (``SpawnFunction.first_call``),
when the function it holds is whole.
"""

from __future__ import annotations

import inspect
import sys
from types import FunctionType
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from . import clone
from .context import SerialContext
from .context import current as _current
from .context import set_current as _set_current
from .future import _PENDING, Done
from .stealable import WIDE, Entry, StealableContext

if TYPE_CHECKING:
    from .spawn import SpawnFunction

_new = object.__new__
_PREFIX = "_dac_"       # the generated code's own names; a parameter may not start so

_SOURCE = """\
def _dac_spawn({params}):
    _dac_ctx = _dac_current()
    if _dac_ctx.__class__ is _dac_Serial:{wake}
        _dac_f = _dac_Done()
        _dac_f._value = _dac_run({forward})
        return _dac_f
    if _dac_ctx.__class__ is _dac_Stealable:
        _dac_ctx.countdown -= 1
        if _dac_ctx.countdown > 0 and not _dac_sf.grain_fixed:
            if _dac_ctx.level < _dac_ctx.horizon and (_dac_ctx.level <= _dac_ctx.open_to
                                                      or len(_dac_ctx.deque) < _dac_WIDE):
                _dac_f = _dac_new(_dac_Entry)
                _dac_f._value = _dac_PENDING
                _dac_f._call = (_dac_sf, {args}, {kwargs})
                _dac_f.level = _dac_ctx.level
                _dac_f.seq = _dac_ctx.seq
                _dac_ctx.seq += 1
                _dac_ctx.deque.append(_dac_f)
                return _dac_f
            _dac_ctx.level += 1
            _dac_b = _dac_ctx.below         # (itself where no ticker runs: no switch,
            if _dac_b is not _dac_ctx:      # two stores of the context cost 80 ns)
                _dac_set(_dac_b)
                _dac_r = _dac_run           # (below the horizon: the fast clone)
            else:
                _dac_r = _dac_fn            # (no ticker to wake a clone: the body)
            try:
                _dac_f = _dac_Done()
                _dac_f._value = _dac_r({forward})
                return _dac_f
            finally:
                _dac_ctx.level -= 1
                if _dac_b is not _dac_ctx:
                    _dac_set(_dac_ctx)
        return _dac_ctx.call(_dac_sf, {given})
    return _dac_sf._dispatch(_dac_ctx, {given})
"""
# A function with ``cutoff=`` or ``leaf=`` called where a leaf's task runs below its
# horizon (a serial context that stands in for the leaf's): the leaf's own context
# takes the call, which honours the grain
_WAKE = """
        if _dac_ctx.leaf is not None:
            return _dac_ctx.leaf.woken().call(_dac_sf, {given})"""


class _Unset:
    """A parameter the call left to its default (the written ``__call__``'s own
    default for every parameter that has one)."""

    def __repr__(self) -> str:
        return "<left to its default>"


UNSET = _Unset()
# the keyword arguments of every deque entry whose call has none: one dict, never
# changed (an entry's call is read, passed on with ``**`` or trimmed into a new dict),
# not a new empty dict per spawn
NO_KEYWORDS: dict[str, Any] = {}


class Parts(NamedTuple):
    """The pieces of the source of a ``__call__`` written for one signature."""
    params: str         # its parameter list (defaults: ``_dac_D``, i.e. ``UNSET``)
    forward: str        # passing them on to the body, defaults filled in
    args: str           # the same as an ``args`` tuple
    kwargs: str         # ... and a ``kwargs`` dict
    given: str          # ``args, kwargs`` as the call gave them (nothing left UNSET)


def readable(fn: Callable[..., Any]) -> bool:
    """True when ``fn``'s parameters can be read, so a function can be written for
    them (a Python function whose signature was not set by hand: a ``__signature__``
    may not be the code's own)."""
    if not inspect.isfunction(fn) or hasattr(fn, "__signature__"):
        return False
    try:
        sig = inspect.signature(fn, follow_wrapped=False)
    except (TypeError, ValueError):
        return False
    return not any(p.startswith(_PREFIX) for p in sig.parameters)


def write_call(function: FunctionType, sf: SpawnFunction) -> None:
    """Give ``function`` (``sf``'s, see ``function_of``) the code written for the
    parameters of ``sf.fn`` (which ``readable`` accepts); with ``cutoff=`` or
    ``leaf=`` (``sf.grain_fixed``) it honours the leaf's grain below its horizon."""
    fn = sf.fn
    sig = inspect.signature(fn, follow_wrapped=False)
    space: dict[str, Any] = function.__globals__    # (function_of's: its names)
    space["_dac_fn"] = fn
    space["_dac_run"] = _first_run(sf, space)
    parts = _parts(sig, space)
    wake = _WAKE.format(given=parts.given) if sf.grain_fixed else ""
    made: dict[str, Any] = {}
    exec(compile(_SOURCE.format(wake=wake, **parts._asdict()),
                 f"<@spawn {getattr(fn, '__qualname__', 'fn')}>", "exec"), space, made)
    written = made["_dac_spawn"]
    # named as the body in tracebacks, and a wrong call (a keyword it does not take,
    # one missing, too many arguments) is refused in the words of the body, whose
    # parameters it has (no *args to catch surplus ones: a function taking *args is
    # called 13 ns slower)
    code = written.__code__.replace(co_name=fn.__name__)
    if sys.version_info >= (3, 11):
        code = code.replace(co_qualname=fn.__qualname__)
    function.__code__ = code
    function.__defaults__ = written.__defaults__
    function.__kwdefaults__ = written.__kwdefaults__
    name_as_body(function, sf)


def _first_run(sf: SpawnFunction, space: dict[str, Any]) -> Callable[..., Any]:
    """What a call that runs at once runs (``_dac_run``): the body's fast clone
    (``dac.clone``), written at the first such call (by then the module has bound the
    function's name, which the clone's spawns are found by) or by ``ready``, or the
    body."""
    def build() -> Callable[..., Any]:
        run = space["_dac_run"] = clone.of(sf) or sf.fn
        return run

    def first(*args: Any, **kwargs: Any) -> Any:
        return build()(*args, **kwargs)
    first.build = build         # type: ignore[attr-defined]
    return first


def ready(sf: SpawnFunction) -> None:
    """``sf``'s function written and its fast clone too, where not yet: a leaf does
    it before a task's clock starts (writing a clone takes milliseconds, which the
    task's first poll would take for slow spawns)."""
    function = function_of(sf)
    space = function.__globals__
    if "_dac_run" not in space:
        write_call(function, sf)
    build = getattr(space["_dac_run"], "build", None)
    if build is not None:
        build()


def name_as_body(function: FunctionType, sf: SpawnFunction) -> None:
    """``function`` named, documented and placed as ``sf``'s body (what
    ``functools.wraps`` does), so that pickle finds it by its module and name."""
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        value = sf.__dict__.get(attr)
        if value is not None or attr == "__doc__":
            setattr(function, attr, value)
    function.__annotations__ = getattr(sf.fn, "__annotations__", None) or {}
    function.__dict__.update(getattr(sf.fn, "__dict__", {}))
    function.__wrapped__ = sf.fn       # type: ignore[attr-defined]


# the code of a function made before its SpawnFunction has its state (unpickled)
_FORWARDER = compile("def _dac_spawn(*args, **kwargs):\n"
                     "    return _dac_sf.first_call(args, kwargs)\n",
                     "<@spawn, not yet written>", "exec")


def function_of(sf: SpawnFunction) -> FunctionType:
    """The plain function ``@spawn`` returned for ``sf``: made here once, as a
    forwarder that writes its own code at its first call (``sf`` may have no state
    yet: unpickling gives a function before the object it belongs to is filled)."""
    function = sf.__dict__.get("function")
    if function is None:
        space: dict[str, Any] = {       # the globals of the forwarder and written code
            "_dac_sf": sf, "__builtins__": __builtins__,
            "_dac_current": _current, "_dac_set": _set_current,
            "_dac_Serial": SerialContext, "_dac_Stealable": StealableContext,
            "_dac_new": _new, "_dac_Done": Done, "_dac_Entry": Entry,
            "_dac_PENDING": _PENDING, "_dac_D": UNSET, "_dac_WIDE": WIDE}
        exec(_FORWARDER, space)
        function = sf.__dict__["function"] = space["_dac_spawn"]
        function.__dac_spawn__ = sf
    return function


def _parts(sig: inspect.Signature, space: dict[str, Any]) -> Parts:
    """The pieces of ``__call__`` for ``sig``; the default values go into ``space``
    (``_dac_d0``, ...), which the written code reads."""
    params: list[str] = []
    forward: list[str] = []
    positional: list[str] = []      # as given, UNSET where left to the default
    filled: list[str] = []          # the same, defaults filled in
    keywords: list[str] = []        # the keyword ones, as given
    filled_keywords: list[str] = []
    kinds = [p.kind for p in sig.parameters.values()]
    star = "" if inspect.Parameter.VAR_POSITIONAL in kinds else "*"
    for i, p in enumerate(sig.parameters.values()):
        name, kind, stars = p.name, p.kind, _STARS.get(p.kind, "")
        if kind is p.KEYWORD_ONLY and star:
            params.append(star)                 # before the first keyword-only one
            star = ""
        value = name
        if p.default is not p.empty:
            space[f"_dac_d{i}"] = p.default
            value = f"(_dac_d{i} if {name} is _dac_D else {name})"
        params.append(stars + name + ("" if p.default is p.empty else "=_dac_D"))
        if kind is p.POSITIONAL_ONLY and p.POSITIONAL_ONLY not in kinds[i + 1:]:
            params.append("/")                  # after the last positional-only one
        if kind is p.KEYWORD_ONLY:
            forward.append(f"{name}={value}")
            keywords.append(f"{name!r}: {name}")
            filled_keywords.append(f"{name!r}: {value}")
        elif kind is p.VAR_KEYWORD:
            forward.append("**" + name)
            keywords.append("**" + name)
            filled_keywords.append("**" + name)
        else:
            forward.append(stars + value)
            positional.append(stars + name)
            filled.append(stars + value)
    args, kwargs = _tuple(positional), "{" + ", ".join(keywords) + "}"
    space["_dac_NOKW"] = NO_KEYWORDS
    given = f"{args}, {kwargs}"
    if "=_dac_D" in ", ".join(params):
        space["_dac_given"] = _giver(sig)
        given = f"*_dac_given({given})"
    entry_kwargs = "{" + ", ".join(filled_keywords) + "}"
    return Parts(", ".join(params), ", ".join(forward), _tuple(filled),
                 "_dac_NOKW" if entry_kwargs == "{}" else entry_kwargs, given)


def _tuple(items: list[str]) -> str:
    return "(" + "".join(a + ", " for a in items) + ")"


def _giver(sig: inspect.Signature) -> Callable[[tuple, dict], tuple]:
    """``given(args, kwargs) -> (args, kwargs)``: a call's arguments as it gave them,
    from the written ``__call__``'s (``UNSET`` where left to the default). A
    parameter given by name after one left out goes back into ``kwargs``."""
    names = [p.name for p in sig.parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    count = len(names)

    def given(args: tuple, kwargs: dict) -> tuple:
        for cut in range(min(count, len(args))):
            if args[cut] is UNSET:
                later = {names[i]: v for i, v in enumerate(args[cut + 1:count], cut + 1)
                         if v is not UNSET}
                args, kwargs = args[:cut], {**later, **kwargs}
                break
        if any(v is UNSET for v in kwargs.values()):
            kwargs = {k: v for k, v in kwargs.items() if v is not UNSET}
        return args, kwargs
    return given


def _as_given(args: tuple, kwargs: dict) -> tuple:
    return args, kwargs


def trimmer(fn: Callable[..., Any]) -> Callable[[tuple, dict], tuple]:
    """``trim(args, kwargs) -> (args, kwargs)`` without the values that are ``fn``'s
    own defaults (the same objects). A deque entry keeps its call with the defaults
    filled in (it runs here, mostly); one that a thief takes travels without them, so
    the task finds its own process's defaults there (``def f(n, memo={})`` keeps a
    memo per process, not a copy in every task)."""
    defaults = getattr(fn, "__defaults__", None) or ()
    kwdefaults = getattr(fn, "__kwdefaults__", None) or {}
    if not (defaults or kwdefaults) or not readable(fn):
        return _as_given
    sig = inspect.signature(fn, follow_wrapped=False)
    named = len([p for p in sig.parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])

    def trim(args: tuple, kwargs: dict) -> tuple:
        n = len(args)
        if n == named:          # no *args values: trailing defaults can go
            first = named - len(defaults)
            while n > first and args[n - 1] is defaults[n - 1 - first]:
                n -= 1
        if any(k in kwdefaults and v is kwdefaults[k] for k, v in kwargs.items()):
            kwargs = {k: v for k, v in kwargs.items()
                      if not (k in kwdefaults and v is kwdefaults[k])}
        return args[:n], kwargs
    return trim


_STARS: dict[inspect._ParameterKind, str] = {inspect.Parameter.VAR_POSITIONAL: "*",
                                          inspect.Parameter.VAR_KEYWORD: "**"}
