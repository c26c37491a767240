"""The wire protocol (``stealing.transport.protocol``): one type per message, a tag enum, INIT's
keys in one place. No MPI: messages go through pickle as mpi4py sends them, and the
scheduler's source is read with ``ast`` to check that what it names is declared."""

from __future__ import annotations

import ast
import enum
import pickle
import typing
from pathlib import Path

from stealing.exceptions import TaskError
from stealing.tree.plan import StealParams
from stealing.transport import protocol as P

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "stealing").rglob("*.py"))
# the modules that build and read messages (mailbox.py only moves them)
MESSAGING = ("node.py", "root.py", "router.py", "leaf.py", "process.py")

SAMPLES = {
    P.Tag.INIT: P.Init(P.RunSettings(batch="fixed", executor="dac.execution:Executor"),
                       P.TreeInfo(42, "host", "/run/dac", 4, StealParams(2, 2, 4, 2.0)),
                       P.ScriptEnv(("/src",), ("s.py",), "/src", 3000), role="router",
                       plan={"role": "router", "procs": 2, "tasks": 20, "children": []},
                       path=(0,)),
    P.Tag.JOB: P.Job(3, {"fib#1": b"\x80\x05fn"}),
    P.Tag.TASKS: P.Tasks([(1, b"a"), (2, b"bb")]),
    P.Tag.NOMORE: P.NoMore(4),
    P.Tag.RESULTS: P.Results([(1, b"r1"), (2, b"r2")], 7, {"pid": 9, "tasks": 2}),
    P.Tag.READY: P.Ready([P.Process(12, "host", "leaf", 1.5, ["/dev/shm/x"])]),
    P.Tag.ERROR: P.Failure(TaskError("ValueError", "bad", "Traceback ...", "f(1)",
                                     "leaf pid 1", exception=ValueError("bad"))),
    P.Tag.STATS_REQ: None,
    P.Tag.STATS: P.Stats([{"pid": 1, "tasks": 3}]),
    P.Tag.STOP: None,
    P.Tag.SPLIT: P.Split(8),
    P.Tag.STOLEN: P.Tasks([(((0, 1), 4), b"entry")]),
    P.Tag.RETURN: P.Returned([(((0, 1), 4), b"value")]),
    P.Tag.BYE: P.Bye([1, 2, 3]),
    P.Tag.OUTPUT: P.Output(12, "host", [("out", "a line\n"), ("note", "a remark")]),
    P.Tag.GROW: P.Grow(2, "far1"),
}


def message_types():
    """The NamedTuple messages (INIT, once per process, is a dataclass)."""
    return [t for t in P.PAYLOADS.values() if t not in (None, P.Init)]


def test_every_tag_has_a_payload_and_a_sample():
    assert set(P.PAYLOADS) == set(P.Tag) == set(SAMPLES)
    for tag, kind in P.PAYLOADS.items():
        sample = SAMPLES[tag]
        assert sample is None if kind is None else type(sample) is kind, tag


def test_every_message_round_trips_through_pickle():
    for tag, msg in SAMPLES.items():
        for protocol in (pickle.DEFAULT_PROTOCOL, pickle.HIGHEST_PROTOCOL):
            back = pickle.loads(pickle.dumps(msg, protocol))
            if tag == P.Tag.ERROR:          # an exception compares by identity
                back, msg_ = (back.error.args, back.error.__reduce__()[1]), \
                    (msg.error.args, msg.error.__reduce__()[1])
                assert back == msg_, tag
                continue
            assert back == msg and type(back) is type(msg), tag
    ready = pickle.loads(pickle.dumps(SAMPLES[P.Tag.READY]))
    assert type(ready.processes[0]) is P.Process and ready.processes[0].pid == 12


def test_message_types_are_module_level_namedtuples():
    for kind in message_types() + [P.Process]:
        assert issubclass(kind, tuple) and hasattr(kind, "_fields"), kind
        assert kind.__module__ == "stealing.transport.protocol"
        assert getattr(P, kind.__name__) is kind


def test_a_results_message_costs_about_what_the_tuple_did():
    results = [(i, bytes(24)) for i in range(100)]
    new = len(pickle.dumps(P.Results(results, 7), pickle.HIGHEST_PROTOCOL))
    old = len(pickle.dumps((results, 7, None), pickle.HIGHEST_PROTOCOL))
    assert new <= old + 64


def test_tags_are_unique_ints():
    assert issubclass(P.Tag, enum.IntEnum)
    enum.unique(P.Tag)
    values = [t.value for t in P.Tag]
    assert len(values) == len(set(values)) and all(type(v) is int for v in values)
    assert P.NAMES == {t.value: t.name for t in P.Tag}
    for t in P.Tag:
        assert getattr(P, t.name) is t          # the module-level aliases
        assert pickle.loads(pickle.dumps(int(t))) == t
    assert P.name(5) == "RESULTS" and P.name(99) == "99"


def test_a_failure_travels_as_the_error_the_root_raises():
    err = pickle.loads(pickle.dumps(SAMPLES[P.Tag.ERROR])).error
    assert type(err) is TaskError
    assert (err.type_name, err.message, err.remote_traceback, err.task, err.where) == \
        ("ValueError", "bad", "Traceback ...", "f(1)", "leaf pid 1")
    assert type(err.exception) is ValueError and err.exception.args == ("bad",)
    assert str(err).startswith("task f(1) raised ValueError: bad (in leaf pid 1)")


def _trees(names=None):
    for path in SOURCES:
        if names is None or path.name in names:
            yield path.name, ast.parse(path.read_text())


def test_names_the_scheduler_uses_exist_in_the_protocol():
    """Every ``P.<name>`` in stealing/*.py is declared in stealing.transport.protocol."""
    used = set()
    for name, tree in _trees():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "P"):
                used.add(node.attr)
                assert hasattr(P, node.attr), f"{name}:{node.lineno}: P.{node.attr}"
    assert {"RESULTS", "Results", "Tasks", "Job", "Ready", "Process"} <= used


def test_fields_read_from_messages_are_declared():
    """``msg.<field>`` in the scheduler names a field of some message type."""
    fields = set()
    for kind in message_types() + [P.Process]:
        fields.update(kind._fields)
        fields.update(n for n in vars(kind) if not n.startswith("_"))
    for name, tree in _trees(MESSAGING):
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in ("msg", "job")
                    and isinstance(node.ctx, ast.Load)):
                assert node.attr in fields, f"{name}:{node.lineno}: .{node.attr}"


def test_init_is_typed_and_read_by_its_fields():
    """INIT is a frozen dataclass: what a process reads of it is a field, checked by
    attribute (a misspelt key was a ``KeyError`` far from its cause), and no process
    writes into it."""
    import dataclasses
    init = SAMPLES[P.Tag.INIT]
    assert dataclasses.is_dataclass(init) and init.__dataclass_params__.frozen
    names = {f.name for f in dataclasses.fields(P.Init)}
    nested = {f.name for k in (P.RunSettings, P.TreeInfo, P.ScriptEnv)
              for f in dataclasses.fields(k)}
    for name, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "init" and isinstance(node.ctx, ast.Load):
                assert node.attr in names, f"{name}:{node.lineno}: init.{node.attr}"
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                    and isinstance(node.value.value, ast.Name) \
                    and node.value.value.id == "init" and node.value.attr in (
                        "settings", "tree", "script"):
                assert node.attr in nested, f"{name}:{node.lineno}: .{node.attr}"
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                assert node.value.id != "init", f"{name}:{node.lineno}: init[...]"


def test_message_fields_are_annotated():
    for kind in message_types() + [P.Process]:
        hints = typing.get_type_hints(kind)
        assert list(hints) == list(kind._fields), kind


class _Sent:
    """A stand-in mailbox: records what is sent, in order."""

    def __init__(self):
        self.sent = []

    def send(self, comm, obj, dest, tag):
        self.sent.append((dest, tag, obj))


def _bare_node():
    from stealing.roles.node import Node
    node = object.__new__(Node)         # only what RETURNs need
    node.returns, node.returned_at, node.mailbox = {}, {}, _Sent()
    return node


def test_returns_to_one_child_go_at_most_every_few_milliseconds_as_one():
    """One RETURN per result outran a leaf reading between 30 ms naps (16 messages a
    read, the root sending about 20): a SPLIT behind them waited 0.1-0.5 s, and 1360
    naps split off one task ran at 0.51-0.57 efficiency on 20 leaves (0.76-0.78 with
    RETURNs held)."""
    import time
    from types import SimpleNamespace
    from stealing.roles.node import RETURN_EVERY_S
    from stealing.transport import protocol as P
    node = _bare_node()
    child = SimpleNamespace(comm=object(), rank=3, wide=False)
    node.hold_return(child, [("a", b"1")])              # the first goes at once
    node.hold_return(child, [("b", b"2")])              # the next ones wait ...
    node.hold_return(child, [("c", b"3")])
    assert [(d, t, o.results) for d, t, o in node.mailbox.sent] == \
        [(3, P.RETURN, [("a", b"1")])]
    wait = node.flush_returns()
    assert wait is not None and 0 < wait <= RETURN_EVERY_S
    time.sleep(wait + 0.001)
    assert node.flush_returns() is None                 # ... and go as one when due
    assert [o.results for _, _, o in node.mailbox.sent] == \
        [[("a", b"1")], [("b", b"2"), ("c", b"3")]]
    node.hold_return(child, [("d", b"4")])              # held: one went just now
    node.send(child.comm, 3, P.SPLIT, P.Split(2))       # another message: after them
    assert [(t, getattr(o, "results", None)) for _, t, o in node.mailbox.sent[2:]] == \
        [(P.RETURN, [("d", b"4")]), (P.SPLIT, None)]


def test_returns_to_a_child_that_waits_go_at_once():
    """A child waiting at sync with nothing to run gets its results now, not after
    ``RETURN_EVERY_S``: at the end of fib 32 on 2 leaves each of the last steals'
    results waited up to 5 ms at the root while both leaves were idle."""
    from types import SimpleNamespace
    from stealing.transport import protocol as P
    node = _bare_node()
    waits = {3: False}
    went = []
    node.policy = SimpleNamespace(waiting=lambda k: waits[k],
                                  results_went=went.append)
    child = SimpleNamespace(comm=object(), rank=3, wide=False, index=3)
    node.hold_return(child, [("a", b"1")])              # the first goes at once
    node.hold_return(child, [("b", b"2")])              # held: the child computes
    assert len(node.mailbox.sent) == 1
    node.hold_return(child, [("c", b"3")], at_once=True)    # it waits: all go now
    assert [o.results for _, _, o in node.mailbox.sent] == \
        [[("a", b"1")], [("b", b"2"), ("c", b"3")]]
    assert node.returns == {}
    node.hold_return(child, [("d", b"4")])              # held again ...
    node.release_returns(child)                         # ... till it says it waits
    assert [(t, o.results) for _, t, o in node.mailbox.sent[2:]] == \
        [(P.RETURN, [("d", b"4")])]
    assert went == [3] and node.returns == {} and node.flush_returns() is None
    node.release_returns(child)                         # nothing held: nothing sent
    assert len(node.mailbox.sent) == 3
