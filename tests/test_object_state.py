"""Objects in a task's payload keep their attributes inline (dac.object_state).

On CPython 3.11 and 3.12 an object whose ``__dict__`` was made (pickle makes one at
both ends) loses the specialized method calls: UTS T3's leaves spent 5-8% more CPU
than its elision. These tests check that an object travels whole and right (state,
identity within a payload, cycles, what pickle itself would do for classes that
reduce themselves) and that neither end makes the dict.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field

import nested_programs as nest
import pytest

import dac
from dac import object_state
from dac.serialize import dumps_payload, loads

needs_inline = pytest.mark.skipif(not object_state.APPLIES,
                                  reason="inline values and __dict__: CPython 3.11, 3.12")


@dataclass(frozen=True)
class Params:
    size: int
    name: str = "p"
    table: tuple = (1, 2, 3)

    def doubled(self) -> int:
        return 2 * self.size


class Plain:
    def __init__(self, a: int, b: list) -> None:
        self.a = a
        self.b = b


@dataclass
class Extra:
    x: int
    y: int = field(default=0)

    def __post_init__(self) -> None:
        self.derived = self.x * 10          # an attribute that is not a field


class Guarded:
    """``x`` is a property with a setter: pickle's BUILD writes the dict behind it."""

    def __init__(self) -> None:
        self._x = 1

    @property
    def x(self) -> int:
        return self.__dict__.get("x", self._x)

    @x.setter
    def x(self, value: int) -> None:
        raise AssertionError("pickle never calls a property's setter")


class OwnState:
    def __init__(self) -> None:
        self.v = 3

    def __getstate__(self) -> dict:
        return {"v": self.v + 1}


class Slotted:
    __slots__ = ("v",)

    def __init__(self) -> None:
        self.v = 4


class Listed(list):
    pass


def travel(value):
    """``value`` pickled as a task's argument is, and unpickled."""
    return travel_all(value)[0]


def travel_all(*arguments):
    """A call's ``arguments`` pickled as a task's payload is, and unpickled."""
    blob, _ = dumps_payload(arguments, "the test values", arguments)
    return loads(blob)


@needs_inline
def test_a_dataclass_travels_inline_and_leaves_the_sender_inline():
    p = Params(7, "seven")
    assert object_state.has_inline_values(p)
    got = travel(p)
    assert got == p and got is not p and got.doubled() == 14
    assert object_state.has_inline_values(got)
    assert object_state.has_inline_values(p)          # read by its fields' names
    again = travel(got)                              # a receiver sending it on
    assert again == p and object_state.has_inline_values(got)
    assert object_state.has_inline_values(again)


@needs_inline
def test_pickle_itself_makes_the_dict_at_both_ends():
    """What the module works around (the test fails if CPython stops doing it)."""
    p = Params(7)
    got = pickle.loads(pickle.dumps(p))
    assert not object_state.has_inline_values(p)
    assert not object_state.has_inline_values(got)


@needs_inline
def test_a_plain_class_is_read_by_the_names_its_objects_brought():
    first = Plain(1, [2])
    got = travel(first)
    assert (got.a, got.b) == (1, [2]) and object_state.has_inline_values(got)
    assert not object_state.has_inline_values(first)  # its first send made the dict
    other = Plain(5, [6])
    assert (travel(other).a, travel(other).b) == (5, [6])
    assert object_state.has_inline_values(other)      # names known from then on


@needs_inline
def test_an_attribute_beyond_the_fields_travels_too():
    e = Extra(4)
    got = travel(e)
    assert (got.x, got.y, got.derived) == (4, 0, 40)
    assert object_state.has_inline_values(got)


@needs_inline
def test_cycles_and_shared_objects_keep_their_shape():
    a, b = Plain(1, []), Plain(2, [])
    a.b.append(b)
    b.b.append(a)
    shared = Params(3)
    got_a, got_b, s1, s2 = travel_all(a, b, shared, shared)
    assert got_a.b[0] is got_b and got_b.b[0] is got_a
    assert s1 is s2 and s1 == shared
    assert object_state.has_inline_values(got_a)
    assert object_state.has_inline_values(s1)


@needs_inline
def test_objects_an_argument_holds_are_left_to_pickle():
    """Only the call's own arguments: an object costs 1-2 us more to pickle so, and
    a list of 100,000 of them would pay it for each."""
    inside = [Params(1), Params(2)]
    got = travel(inside)
    assert got == inside
    assert not any(object_state.has_inline_values(p) for p in got)


@needs_inline
def test_classes_that_pickle_their_own_way_are_left_to_pickle():
    g = Guarded()
    g.__dict__["x"] = 9
    assert object_state.reduce(g) is NotImplemented
    assert travel(g).x == 9
    odd = Plain(1, [])
    odd.__dict__["__class__"] = "a key, not the class"
    assert object_state.reduce(odd) is NotImplemented
    assert type(travel(odd)) is Plain
    assert object_state.reduce(OwnState()) is NotImplemented
    assert travel(OwnState()).v == 4
    for value in (Slotted(), Listed([1]), ValueError("e"), 3.5j):
        assert object_state.reduce(value) is NotImplemented
    assert travel(Slotted()).v == 4 and travel(Listed([1])) == [1]


def test_other_interpreters_leave_every_object_to_pickle(monkeypatch):
    monkeypatch.setattr(object_state, "APPLIES", False)
    monkeypatch.setattr(object_state, "_FIT", type(object_state._FIT)())

    class Fresh:
        pass

    assert object_state.reduce(Fresh()) is NotImplemented


@needs_inline
def test_objects_stay_inline_in_every_task_and_on_the_root():
    """A tree of naps on 2 leaves, split off the one task: every node's object, in
    the task that received it and after the node's spawns were sent to a thief, kept
    its inline values; so did the caller's (fails before: 0 of 63 nodes)."""
    knobs = nest.Knobs(2.0)
    report = dac.run_report(nest.knob_tree, 5, knobs, procs=2)
    nodes, before, after = report.result
    assert nodes == 63
    assert (before, after) == (63, 63)
    assert sum(p["split_tasks"] for p in report.stats["processes"]
               if p["role"] == "leaf") > 0
    assert object_state.has_inline_values(knobs)
