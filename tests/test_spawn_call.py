"""The function ``@spawn`` returns (``dac.spawn_call``): written for the decorated
function's signature, it must take every call the body takes, pass the same values
(defaults included), refuse a wrong call in the body's words, and survive pickling."""

from __future__ import annotations

import inspect
import pickle
from types import FunctionType

import pytest
from programs import fib

import dac
from dac import spawn, sync
from dac.context import current, set_current
from dac.serialize import dumps_function, script_entry
from dac.spawn import SpawnFunction, spawn_function

SHARED: list = []


def plain_mixed(x, y=2, *rest, k, m=SHARED, **kw):
    return (x, y, rest, k, m is SHARED, sorted(kw.items()))


def plain_posonly(p, q=1, /, r=2):
    return (p, q, r)


def plain_kwonly(*, k, m=3):
    return (k, m)


def plain_none():
    return "none"


def plain_star(*a):
    return a


def plain_fib(n):
    return n if n < 2 else plain_fib(n - 1) + plain_fib(n - 2)


mixed = spawn(plain_mixed)
posonly = spawn(plain_posonly)
kwonly = spawn(plain_kwonly)
none = spawn(plain_none)
star = spawn(plain_star)
SPAWNED = {"mixed": mixed, "posonly": posonly, "kwonly": kwonly, "none": none,
           "star": star}


@spawn
def outer(name, *args, **kwargs):
    """Spawns ``name`` with the arguments given and returns its value."""
    return sync((SPAWNED.get(name) or fib)(*args, **kwargs))


CALLS = [
    ("mixed", (1,), {"k": 4}),
    ("mixed", (1, 5, 6, 7), {"k": 4, "m": None, "z": 9}),
    ("mixed", (), {"x": 1, "y": 3, "k": 0}),
    ("posonly", (1,), {}),
    ("posonly", (1, 2), {"r": 3}),
    ("kwonly", (), {"k": 1}),
    ("kwonly", (), {"k": 1, "m": 2}),
    ("none", (), {}),
    ("star", (), {}),
    ("star", (1, 2, 3), {}),
]


@pytest.mark.parametrize("name,args,kwargs", CALLS)
def test_a_spawned_call_passes_what_the_body_gets_as_a_plain_call(name, args, kwargs):
    plain = globals()["plain_" + name]
    assert type(globals()[name]) is FunctionType            # a plain function
    assert outer(name, *args, **kwargs) == plain(*args, **kwargs)
    assert globals()[name](*args, **kwargs) == plain(*args, **kwargs)


@spawn
def every_call():
    """Every call of ``CALLS`` spawned, then synced (on a leaf: deque entries)."""
    return sync([SPAWNED[name](*args, **kwargs) for name, args, kwargs in CALLS])


def test_on_leaves_every_call_passes_what_the_body_gets():
    expected = [globals()["plain_" + name](*args, **kwargs) for name, args, kwargs in CALLS]
    assert dac.run(every_call, procs=2) == expected


WRONG = [
    ("mixed", (), {"k": 1}),
    ("mixed", (1,), {}),
    ("mixed", (1,), {"k": 1, "x": 2}),
    ("posonly", (1, 2, 3, 4), {}),
    ("posonly", (), {"p": 1}),
    ("kwonly", (1,), {"k": 1}),
    ("kwonly", (), {}),
    ("none", (1,), {}),
    ("none", (), {"a": 1}),
    ("fib", (1, 2), {}),
]


@pytest.mark.parametrize("name,args,kwargs", WRONG)
def test_a_wrong_call_is_refused_in_the_words_of_the_plain_function(name, args, kwargs):
    plain = globals()["plain_" + name]
    with pytest.raises(TypeError) as expected:
        plain(*args, **kwargs)
    for call in (lambda: globals()[name](*args, **kwargs),          # outside run
                 lambda: outer(name, *args, **kwargs)):             # a spawn
        with pytest.raises(TypeError) as got:
            call()
        assert str(got.value) == str(expected.value).replace("plain_fib", "fib")


def test_a_spawn_function_takes_exactly_the_body_parameters():
    """No ``*args`` catches surplus arguments (a function taking one is called 13 ns
    slower), and its signature is the body's, defaults shown as the body's."""
    code = fib.__code__
    assert code.co_argcount == 1 and code.co_kwonlyargcount == 0
    assert not code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    assert mixed.__code__.co_flags & inspect.CO_VARARGS            # the body's *rest
    assert inspect.signature(mixed) == inspect.signature(plain_mixed)


def test_the_elision_gives_the_serial_answer():
    assert fib(20) == plain_fib(20) == 6765


def test_a_signature_it_cannot_write_keeps_the_generic_call():
    assert type(spawn(len)) is SpawnFunction                # a builtin: no signature
    assert spawn(len)([1, 2]) == 2

    def odd(_dac_ctx, n):                                   # a name of its own code
        return n + 1
    sf = spawn(odd)
    assert type(sf) is SpawnFunction and sf(None, 1) == 2

    def shown(*args):                                       # a signature set by hand
        return args
    shown.__signature__ = inspect.signature(lambda a: None)
    sf = spawn(shown)
    assert type(sf) is SpawnFunction and sf(1, 2) == (1, 2)


def test_a_spawn_function_pickles_by_reference_and_travels_by_value():
    assert pickle.loads(pickle.dumps(fib)) is fib           # by reference: the same
    # (spawn(plain_mixed) is not named plain_mixed: pickle refuses it by reference,
    # and dac sends it by value, as below)
    assert spawn_function(pickle.loads(script_entry("mixed", mixed))).fn(1, k=2) == \
        plain_mixed(1, k=2)

    def local(a, b=10, *, c=100):
        return a + b + c
    f = spawn(local)
    again = pickle.loads(script_entry("local", f))          # by value, as dac sends it
    assert type(again) is FunctionType and again is not f
    assert again.__code__.co_filename == "<@spawn, not yet written>"
    assert again(1) == 111 and again(1, 2, c=3) == 6        # written at its first call
    assert again.__code__.co_filename.endswith(".<locals>.local>")
    sf = spawn_function(again)
    assert sf.fn is not local and sf.fn.__name__ == "local" and again.__name__ == "local"


def test_a_spawn_function_travels_with_the_function_that_calls_it_by_name():
    """A task's function refers to itself by name: the copy's name is the copy's own
    function, which belongs to the copy of its ``SpawnFunction``."""
    sf = pickle.loads(dumps_function(spawn_function(fib)))
    itself = sf.fn.__globals__["fib"]
    assert spawn_function(itself) is sf and itself is not fib
    assert itself(15) == 610


class Tree:
    def __init__(self, width):
        self.width = width

    @spawn
    def count(self, depth):
        if depth == 0:
            return 1
        return sum(sync([self.count(depth - 1) for _ in range(self.width)]))

    @staticmethod
    @spawn
    def double(n):
        return 2 * n

    @classmethod
    @spawn
    def name(cls, suffix=""):
        return cls.__name__ + suffix


def test_methods_take_their_own_call_path_too():
    assert Tree(3).count(4) == 81
    assert Tree.double(21) == 42
    assert Tree.name("!") == "Tree!"


@spawn(cutoff=lambda n: n < 6)          # the body's default left out, as callers do
def scaled_fib(n, scale=1):
    if n < 2:
        return n * scale
    a, b = sync(scaled_fib(n - 1), scaled_fib(n - 2))
    return a + b


def test_a_cutoff_and_a_task_get_the_call_as_given_not_the_defaults_filled_in():
    """The written ``__call__`` passes every parameter on, defaults included; a
    cutoff (or a task sent to another leaf) gets only what the call gave."""
    assert scaled_fib(15) == 610
    assert dac.run(scaled_fib, 15, procs=2) == 610
    assert spawn_function(scaled_fib).trim((15, 1), {}) == ((15,), {})
    assert spawn_function(scaled_fib).trim((15, 2), {}) == ((15, 2), {})
    assert spawn_function(mixed).trim((1, 2, 3), {"k": 1, "m": SHARED}) == \
        ((1, 2, 3), {"k": 1})


@spawn
def defaults(a, b=1, c=2, *, k=3):
    return (a, b, c, k)


class Recorder:
    """A context that takes every call (as the root's expansion does) and keeps it."""

    def call(self, sf, args, kwargs):
        self.got = (args, kwargs)


@pytest.mark.parametrize("args,kwargs,expected", [
    ((1,), {}, ((1,), {})),
    ((1, 1), {}, ((1, 1), {})),             # given, though the default's own value
    ((1,), {"c": 5}, ((1,), {"c": 5})),
    ((1, 2, 3), {"k": 3}, ((1, 2, 3), {"k": 3})),
    ((), {"a": 1, "c": 2}, ((1,), {"c": 2})),
])
def test_a_call_leaving_the_fast_paths_carries_its_arguments_as_given(args, kwargs,
                                                                       expected):
    saved = current()
    set_current(Recorder())
    try:
        defaults(*args, **kwargs)
        assert current().got == expected
    finally:
        set_current(saved)
    assert defaults(*args, **kwargs) == plain_defaults(*args, **kwargs)


def plain_defaults(a, b=1, c=2, *, k=3):
    return (a, b, c, k)


def _shown_body(*args):
    return args


_shown_body.__signature__ = inspect.signature(lambda a: None)   # set by hand
shown = spawn(_shown_body)


@spawn
def fan_generic(n):
    """``n`` spawns of a function that keeps the generic call path."""
    return sync([shown(i) for i in range(n)])


def test_the_generic_call_path_spawns_on_leaves_too():
    assert type(shown) is SpawnFunction
    assert dac.run(fan_generic, 40, procs=2) == [(i,) for i in range(40)]
