"""The leaf's side of a split, without MPI: a stand-in mailbox and executor."""

import time
from collections import deque

import pytest

from stealing.roles import leaf as leaf_module
from stealing.roles.leaf import Ask, Leaf, Phase
from stealing.roles.status import Start
from stealing.tree.plan import StealParams
from stealing.transport import protocol as P


class Mailbox:
    """Delivers the queued messages in order; a None in the queue is a poll that
    finds nothing. Records what the leaf sends."""

    def __init__(self, *messages):
        self.inbox = deque(messages)
        self.sent = []
        self.sleeps = 0

    def send(self, comm, obj, dest, tag):
        self.sent.append((P.name(tag), obj))

    def poll(self, comms):
        msg = self.inbox.popleft() if self.inbox else None
        return None if msg is None else (0, 0) + msg

    def wait(self, comms, **_):
        while self.inbox and self.inbox[0] is None:
            self.inbox.popleft()
        return (0, 0) + self.inbox.popleft()


class Executor:
    """Nothing to split; RETURN marks the waited-for spawn done."""

    def __init__(self):
        self.splits, self.delivered = [], False

    def split(self, want):
        self.splits.append(want)
        return []

    def deliver(self, results):
        self.delivered = True


class Status:
    current = None

    def task(self, tid):
        pass


@pytest.fixture(autouse=True)
def hold_bound(monkeypatch):
    """A ``RESULT_HOLD_S`` that no pause of a loaded machine between two steps of a
    test outlasts (a task is short, or slow, and a hold ends, by this bound)."""
    monkeypatch.setattr(leaf_module, "RESULT_HOLD_S", 0.25)


def a_leaf(*messages):
    mailbox = Mailbox(*messages)
    init = P.Init(P.RunSettings(), P.TreeInfo(1, "host", None, 2, StealParams(2, 2, 5, 2.0)),
                  P.ScriptEnv(), path=(0,))
    leaf = Leaf(None, "parent", init, Start({}, [], Status()), mailbox)
    leaf._executor = Executor()
    leaf.watchdog = None
    return leaf, mailbox


def test_a_leaf_waiting_at_sync_voids_a_split_it_cannot_pay():
    """A task waits at sync for a stolen spawn, its idle request already sent; a
    SPLIT comes, and the deque is empty: the split is owed until the next spawn,
    which may never come while the task waits. The leaf asks idle again, which
    voids the split at its parent. (Before: it stayed silent, the parent waited for
    the answer, and with it a router answering its own parent: a run of 32 sleeping
    leaves under routers hung, once in a few runs.)"""
    leaf, mailbox = a_leaf((P.SPLIT, P.Split(4)), None,
                           (P.RETURN, P.Returned([(((0,), 7), b"")])))
    leaf.phase, leaf.running = Phase.WORKING, 1
    leaf.asking, leaf.seq = Ask.IDLE_AT_SYNC, 3                   # asked before
    leaf.wait(lambda: leaf.executor.delivered)
    assert leaf.executor.splits == [4, 0]        # owed, then voided by the request
    assert [(tag, msg.want, msg.idle, msg.seq) for tag, msg in mailbox.sent] == [
        ("RESULTS", 5, True, 4),                 # the new idle request
        ("RESULTS", 0, False, 0)]                # withdrawn when the task goes on
    assert not leaf.split_owed
    assert leaf.asking is Ask.NONE


def test_a_leaf_waiting_at_sync_with_nothing_owed_does_not_ask_again():
    leaf, mailbox = a_leaf(None, (P.RETURN, P.Returned([(((0,), 7), b"")])))
    leaf.phase, leaf.running = Phase.WORKING, 1
    leaf.asking, leaf.seq = Ask.IDLE_AT_SYNC, 3
    leaf.wait(lambda: leaf.executor.delivered)
    assert mailbox.sent == [] and leaf.executor.splits == []


def test_split_work_does_not_make_the_leaf_ask_ahead():
    """After "no more", a batch of work split off another leaf says nothing of the
    pool: asking ahead for more (prefetch) would only bring another "no more". On a
    spine on 2 leaves, 63 of 198 messages the thief sent were such requests, each
    answered NOMORE. A batch with tasks of the root's pool may be followed by more."""
    leaf, mailbox = a_leaf()
    leaf.phase, leaf.exhausted = Phase.WORKING, True
    leaf.handle(P.TASKS, P.Tasks([(((1,), 5), b"a"), (((1,), 6), b"b")], 0))
    assert leaf.exhausted and len(leaf.tasks) == 2
    leaf.handle(P.TASKS, P.Tasks([(((1,), 7), b"c"), (12, b"d")], 0))
    assert not leaf.exhausted and len(leaf.tasks) == 4
    assert mailbox.sent == []


def test_the_request_states_follow_the_answers():
    """A refill refused leaves no request; an idle request refused waits for TASKS,
    which any batch ends; an answer to a replaced request changes nothing."""
    leaf, mailbox = a_leaf()
    leaf.phase = Phase.WORKING
    leaf.ask()
    assert (leaf.asking, leaf.seq) == (Ask.REFILL, 1)
    leaf.handle(P.NOMORE, P.NoMore(1))
    assert leaf.asking is Ask.NONE and leaf.exhausted
    leaf.ask(idle=True)
    leaf.ask(idle=True)                          # replaces the first (seq 2)
    leaf.handle(P.NOMORE, P.NoMore(2))           # the answer to the replaced one
    assert (leaf.asking, leaf.seq) == (Ask.IDLE, 3)
    leaf.handle(P.NOMORE, P.NoMore(3))
    assert leaf.asking is Ask.REFUSED and not leaf.requested
    leaf.send_results([])                        # a withdrawal keeps the refusal
    assert leaf.asking is Ask.REFUSED
    leaf.handle(P.TASKS, P.Tasks([(((1,), 5), b"a")], 0))
    assert leaf.asking is Ask.NONE and len(leaf.tasks) == 1
    assert [msg.seq for _, msg in mailbox.sent[:4]] == [1, 2, 3, 0]


def test_a_stale_no_more_still_stops_asking_ahead():
    """A refill (seq 1) is replaced by an idle request (seq 2) before its "no more"
    comes: the parent's pool was empty all the same. Split work then answers the idle
    request, and the leaf must not ask ahead for more: on a spine each such refill
    brought one more "no more", a message pair every 3 ms."""
    leaf, mailbox = a_leaf()
    leaf.phase = Phase.WORKING
    leaf.ask()
    leaf.ask(idle=True)
    leaf.handle(P.NOMORE, P.NoMore(1))
    assert leaf.exhausted and leaf.asking is Ask.IDLE
    leaf.handle(P.TASKS, P.Tasks([(((1,), 5), b"a"), (((1,), 6), b"b")], 2))
    assert leaf.exhausted and leaf.asking is Ask.NONE and len(leaf.tasks) == 2


def test_a_gpu_leaf_given_work_split_off_another_leaf_runs_it():
    """An idle GPU leaf beside CPU leaves may be given spawns split off a CPU leaf: their
    ids are (owner's path, number). Its status, shared with its monitor, holds -1 for
    them. (Before: packing the tuple id raised struct.error and killed the leaf.)"""
    from stealing.roles.status import SharedStatus

    class Batch(Executor):
        def run_batch(self, payloads, table):
            return [(((0,), 7), b"result")]

    leaf, mailbox = a_leaf()
    leaf.status = SharedStatus()
    leaf._executor = Batch()
    leaf.tasks.append((((0,), 7), b"payload"))
    leaf.run_batch()
    assert leaf.status.current == -1
    assert leaf.results == [(((0,), 7), b"result")]
    leaf.status.task(12)
    assert leaf.status.current == 12


class LoadingExecutor:
    """Loads a job's table as given and records what was prepared, and what the
    leaf had sent by then."""

    def __init__(self, sent):
        self.sent, self.calls = sent, []

    def load_table(self, entries):
        self.calls.append(("load", dict(entries), len(self.sent)))
        return dict(entries)

    def prepare(self, table):
        self.calls.append(("prepare", dict(table), len(self.sent)))


def test_a_leaf_prepares_a_jobs_new_functions_after_it_says_ready():
    """The first task of a function wrote its fast clone (about 3 ms): a job that
    starts as one task paid it before its first split, and the thief again before
    its first spawn. A leaf now prepares the functions it loads as soon as it has
    said READY (the tree's start-up does not wait for it), before any task; a later
    job prepares only the functions it brings."""
    leaf, mailbox = a_leaf()
    leaf._executor = executor = LoadingExecutor(mailbox.sent)
    leaf.load_job(P.Job(1, {"fib#1": "f"}))
    assert [tag for tag, _ in mailbox.sent] == ["READY"]
    assert executor.calls == [("load", {"fib#1": "f"}, 0), ("prepare", {"fib#1": "f"}, 1)]
    leaf.load_job(P.Job(2, {"g#2": "g"}))
    assert executor.calls[2:] == [("load", {"g#2": "g"}, 1), ("prepare", {"g#2": "g"}, 1)]
    assert leaf.table == {"fib#1": "f", "g#2": "g"}
    leaf.load_job(P.Job(3, {}))                 # nothing new: nothing to prepare
    assert [c[0] for c in executor.calls[4:]] == ["load"]


def test_a_leafs_record_has_the_same_keys_whether_or_not_a_batch_came():
    """A leaf that got no batch in a job (a small job can end first) had no
    ``largest_batch`` in its record: a launcher's run and a spawned tree's reported
    records of different shapes, once in a full suite's run."""
    leaf, mailbox = a_leaf((P.STATS_REQ, None), (P.STATS_REQ, None))
    leaf.load_job(P.Job(1, {}))
    leaf.handle(*leaf.mailbox.wait([leaf.parent])[2:])
    empty = mailbox.sent[-1][1].records[0]
    assert empty["largest_batch"] == 0
    leaf.handle(P.TASKS, P.Tasks([(((0,), 7), b"r")], 0))
    leaf.handle(*leaf.mailbox.wait([leaf.parent])[2:])
    fed = mailbox.sent[-1][1].records[0]
    assert fed["largest_batch"] == 1 and sorted(fed) == sorted(empty)


class Runner(Executor):
    """Runs a task as its id and the payload back; a payload ``b"slow"`` takes
    ``RESULT_HOLD_S`` (a task too long for its result to wait for the next)."""

    def run_task(self, payload, table, worker):
        if payload[1] == b"slow":
            time.sleep(leaf_module.RESULT_HOLD_S)
        return payload[0], payload[1]


def served(*queued, asking=Ask.NONE):
    """What a working leaf sends (results, asking?, idle?) after running ``queued``
    (task id, blob) pairs and then being stopped, and the leaf."""
    leaf, mailbox = a_leaf(*[None] * len(queued), (P.STOP, None))
    leaf._executor = Runner()
    leaf.phase, leaf.asking = Phase.WORKING, asking
    leaf.exhausted = True                       # no asking ahead (prefetch)
    leaf.tasks.extend((tid, (tid, blob)) for tid, blob in queued)
    leaf.serve(watchdog=None)
    return [(tag, msg.results, msg.want > 0, msg.idle) for tag, msg in mailbox.sent
            if tag != "BYE"], leaf


def test_a_split_tasks_result_goes_up_with_the_idle_request_that_follows_it():
    """A split task's owner waits for its result, so it went up at once, asking for
    nothing, and 0.1 ms later the leaf, its queue empty, asked for work: two
    messages, about a fifth of a 256-leaf run's leaf messages, and the first made
    the router see a busy leaf and send it a SPLIT that it answered idle. Now the
    result rides on the idle request; with tasks still queued, the result of a task
    that was not short goes at once."""
    split = (((1,), 7), b"slow")
    sent, leaf = served(split)
    assert sent == [("RESULTS", [split], True, True)]
    assert leaf.meter.record["split_tasks"] == 1
    sent, _ = served(split, (12, b"s"))
    assert sent == [("RESULTS", [split], False, False),    # the owner waits for it
                    ("RESULTS", [(12, b"s")], True, True)]


def test_the_results_of_short_split_tasks_wait_for_the_next_message():
    """A split task that took less than ``RESULT_HOLD_S`` leaves its result for the
    next message up while the leaf runs the tasks queued after it: on UTS T3 on 2
    leaves, 2,033 of the leaves' 3,009 messages were one stolen task's result each.
    Three short split tasks: one message, where three went."""
    tasks = [(((1,), k), b"r") for k in (7, 8, 9)]
    sent, _ = served(*tasks)
    assert sent == [("RESULTS", tasks, True, True)]
    slow = [(((1,), 7), b"slow"), *tasks[1:]]       # the first was not short
    sent, _ = served(*slow)
    assert sent == [("RESULTS", slow[:1], False, False),
                    ("RESULTS", slow[1:], True, True)]


def test_held_results_go_once_the_first_waited_its_bound():
    """Results held for short tasks go before the next task, or at a running task's
    poll, once the first of them waited ``RESULT_HOLD_S``."""
    split = (((1,), 7), b"r")
    leaf, mailbox = a_leaf()
    leaf._executor = Runner()
    leaf.phase = Phase.WORKING
    leaf.tasks.append((((1,), 8), b"s"))
    leaf.split_result(*split, short=True)
    assert leaf.held and leaf.holding() and mailbox.sent == []
    leaf.poll()
    assert mailbox.sent == []                       # (a poll lets it wait on)
    leaf.held_at -= leaf_module.RESULT_HOLD_S
    assert not leaf.holding()
    leaf.poll()
    assert [(tag, msg.results) for tag, msg in mailbox.sent] == [("RESULTS", [split])]
    assert not leaf.held


def test_a_refused_leaf_sends_a_split_tasks_result_at_once():
    """Refused, a leaf waits for TASKS without asking again: the result of split
    work it ran cannot wait for a request."""
    split = (((1,), 7), b"r")
    sent, _ = served(split, asking=Ask.REFUSED)
    assert sent == [("RESULTS", [split], False, False)]


def test_a_waiting_task_sends_a_nested_split_result_with_its_next_request():
    """A task waiting at sync is given split work (its idle request answered), runs
    it nested, and asks again: the result rides on that request, where it went up
    alone first (asking for nothing) and the request 0.1 ms after."""
    split = (((1,), 7), b"r")
    leaf, mailbox = a_leaf((P.TASKS, P.Tasks([(split[0], split)], 3)), None,
                           (P.RETURN, P.Returned([(((0,), 9), b"")])))
    leaf._executor = Runner()
    leaf.phase, leaf.running = Phase.WORKING, 1
    leaf.asking, leaf.seq = Ask.IDLE_AT_SYNC, 3                   # asked before
    leaf.wait(lambda: leaf.executor.delivered)
    assert [(tag, msg.results, msg.want > 0, msg.idle) for tag, msg in mailbox.sent] == [
        ("RESULTS", [split], True, True),       # the result with the new request
        ("RESULTS", [], False, False)]          # withdrawn when the task goes on
    assert not leaf.held and leaf.asking is Ask.NONE


def test_a_held_split_result_goes_before_the_next_task_runs():
    """Held for a request, a split task's result goes at once when a message brings
    another task first: its owner must not wait for that task too."""
    split, other = (((1,), 7), b"slow"), (((1,), 8), b"s")
    leaf, mailbox = a_leaf((P.TASKS, P.Tasks([(split[0], split)], 3)),
                           (P.TASKS, P.Tasks([(other[0], other)], 0)), None,
                           (P.RETURN, P.Returned([(((0,), 9), b"")])))
    leaf._executor = Runner()
    leaf.phase, leaf.running = Phase.WORKING, 1
    leaf.asking, leaf.seq = Ask.IDLE_AT_SYNC, 3
    leaf.wait(lambda: leaf.executor.delivered)
    assert [(tag, msg.results, msg.want > 0, msg.idle) for tag, msg in mailbox.sent] == [
        ("RESULTS", [split], False, False),     # before the other task ran
        ("RESULTS", [other], True, True),
        ("RESULTS", [], False, False)]


class Delivering(Executor):
    """An executor that keeps what it is delivered."""

    def __init__(self):
        super().__init__()
        self.results = []

    def deliver(self, results):
        super().deliver(results)
        self.results.extend(results)


@pytest.mark.parametrize("short", [False, True])
def test_a_leaf_delivers_its_own_split_spawn_at_once(short):
    """A split's tasks beyond what its thief wanted wait in the parent's pool, and
    may go back to the leaf they came from. Its result went up and came back down in
    RETURN while the sync that waits for it was on this leaf (UTS T3 on 2 leaves:
    164 of a job's 1,016 TASKS messages held the receiver's own spawns): now the
    leaf delivers it to its executor and sends nothing. Another leaf's still goes
    to its owner."""
    leaf, mailbox = a_leaf()
    leaf._executor = Delivering()
    leaf.phase, leaf.running = Phase.WORKING, 1
    leaf.task_done(((0,), 7), b"mine", short)
    assert leaf.executor.results == [(((0,), 7), b"mine")]
    assert mailbox.sent == [] and leaf.results == []
    leaf.tasks.append((((1,), 3), b""))       # (a result may wait for it: held)
    leaf.task_done(((1,), 3), b"theirs", short)
    assert leaf.executor.results == [(((0,), 7), b"mine")]
    sent = [r for _, msg in mailbox.sent for r in msg.results]
    assert sent + leaf.results == [(((1,), 3), b"theirs")]
    assert leaf.meter.record["split_tasks"] == 2
