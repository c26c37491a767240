"""A ``@spawn`` function's own call path, made for its signature (the spawn's hot path).

A spawn that nobody steals must cost about a function call (work-first). The generic
``SpawnFunction.__call__(self, *args, **kwargs)`` packs a tuple and a dict on every
call and unpacks them again to call the body, then allocates a ``Future`` through its
Python ``__init__``: measured here about 100 ns for the packing and 35 ns for the
``__init__`` of a spawn's 450. So each ``@spawn`` function gets a class of its own whose
``__call__`` is written for the function's parameters (as ``dataclasses`` writes
``__init__``): ``fib(n - 1)`` passes ``n`` straight to the body, and the done future is
made with ``object.__new__`` and two slot stores. Tuples and dicts are built only where
the call leaves the fast paths (a task's call, an expansion, a deque entry's record).

The fast paths are those of ``SpawnFunction.__call__``, which stays the generic path
for functions whose signature cannot be read (a builtin, a callable object): the serial
elision (``SerialContext``), and in a leaf (``StealableContext``) a deque entry or a
plain call under the grain. Anything else goes to ``SpawnFunction._dispatch``.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, NamedTuple

from .context import SerialContext
from .context import current as _current
from .context import set_current as _set_current
from .future import _PENDING, Done
from .stealable import Entry, StealableContext

_new = object.__new__
_PREFIX = "_dac_"       # the generated code's own names; a parameter may not start so

_SOURCE = """\
def __call__(_dac_sf, {params}):
    if {extra}:             # too many arguments: the body says so, in its own words
        return _dac_fn({wrong})
    _dac_ctx = _dac_current()
    if _dac_ctx.__class__ is _dac_Serial:{wake}
        _dac_f = _dac_Done()
        _dac_f._value = _dac_fn({forward})
        return _dac_f
    if _dac_ctx.__class__ is _dac_Stealable:
        _dac_ctx.countdown -= 1
        if _dac_ctx.countdown > 0 and not _dac_sf.grain_fixed:
            if _dac_ctx.level < _dac_ctx.horizon:
                _dac_f = _dac_new(_dac_Entry)
                _dac_f._value = _dac_PENDING
                _dac_f._call = (_dac_sf, {args}, {kwargs})
                _dac_f.level = _dac_ctx.level
                _dac_f.seq = _dac_ctx.seq
                _dac_ctx.seq += 1
                _dac_ctx.deque.append(_dac_f)
                return _dac_f
            if _dac_ctx.full:
                _dac_ctx.level += 1
                _dac_b = _dac_ctx.below     # (itself where no ticker runs: no switch,
                if _dac_b is not _dac_ctx:  # two stores of the context cost 80 ns)
                    _dac_set(_dac_b)
                try:
                    _dac_f = _dac_Done()
                    _dac_f._value = _dac_fn({forward})
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
    extra: str          # true when surplus positional arguments came (``*_dac_extra``)
    wrong: str          # the positional ones with the surplus, for the body to refuse


def call_class(base: type, fn: Callable[..., Any], grain_fixed: bool = False
               ) -> type | None:
    """A subclass of ``base`` (``SpawnFunction``) whose ``__call__`` is written for
    ``fn``'s parameters, or None where they cannot be read; ``grain_fixed``: for a
    function with ``cutoff=`` or ``leaf=``."""
    if not inspect.isfunction(fn) or hasattr(fn, "__signature__"):
        return None             # (a signature set by hand may not be the code's own)
    try:
        sig = inspect.signature(fn, follow_wrapped=False)
    except (TypeError, ValueError):
        return None
    if any(p.startswith(_PREFIX) for p in sig.parameters):
        return None
    space: dict[str, Any] = {
        "_dac_current": _current, "_dac_set": _set_current, "_dac_Serial": SerialContext,
        "_dac_Stealable": StealableContext, "_dac_new": _new, "_dac_Done": Done,
        "_dac_Entry": Entry, "_dac_PENDING": _PENDING, "_dac_fn": fn, "_dac_D": UNSET}
    parts = _parts(sig, space)
    wake = _WAKE.format(given=parts.given) if grain_fixed else ""
    exec(compile(_SOURCE.format(wake=wake, **parts._asdict()),
                 f"<@spawn {getattr(fn, '__qualname__', 'fn')}>", "exec"), space)
    call = space["__call__"]
    # named as the body, so a call with a wrong keyword or a missing argument is
    # refused in the body's name (too many positional ones reach the body itself)
    call.__name__, call.__qualname__ = fn.__name__, fn.__qualname__
    own = {"__call__": call, "__slots__": ()}
    if fn.__defaults__ or fn.__kwdefaults__:
        own["trim"] = staticmethod(_trimmer(fn, sig))
    return type(base.__name__, (base,), {**own, "__module__": base.__module__,
                                         "__qualname__": base.__qualname__})


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
    star = "" if inspect.Parameter.VAR_POSITIONAL in kinds else "*_dac_extra"
    for i, p in enumerate(sig.parameters.values()):
        name, kind, stars = p.name, p.kind, _STARS.get(p.kind, "")
        if kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD) and star:
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
    extra = "_dac_extra" if star or "*_dac_extra" in params else "False"
    if star:
        params.append(star)
    args, kwargs = _tuple(positional), "{" + ", ".join(keywords) + "}"
    space["_dac_NOKW"] = NO_KEYWORDS
    given = f"{args}, {kwargs}"
    if "=_dac_D" in ", ".join(params):
        space["_dac_given"] = _giver(sig)
        given = f"*_dac_given({given})"
    entry_kwargs = "{" + ", ".join(filled_keywords) + "}"
    return Parts(", ".join(params), ", ".join(forward), _tuple(filled),
                 "_dac_NOKW" if entry_kwargs == "{}" else entry_kwargs, given, extra,
                 ", ".join(positional + ["*_dac_extra"]))


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


def _trimmer(fn: Callable[..., Any], sig: inspect.Signature
             ) -> Callable[[tuple, dict], tuple]:
    """``trim(args, kwargs) -> (args, kwargs)`` without the values that are ``fn``'s
    own defaults (the same objects). A deque entry keeps its call with the defaults
    filled in (it runs here, mostly); one that a thief takes travels without them, so
    the task finds its own process's defaults there (``def f(n, memo={})`` keeps a
    memo per process, not a copy in every task)."""
    defaults = fn.__defaults__ or ()
    kwdefaults = fn.__kwdefaults__ or {}
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
