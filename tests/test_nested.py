"""Work stealing inside running tasks (dac.stealable, the leaves' SPLIT/STOLEN/RETURN).

The programs (tests/nested_programs.py) mostly use ``depth=0``: the whole call is one
task on one leaf, so every other leaf gets work only by splitting that task's spawns,
and every result of a split spawn travels back to the leaf that owns the waiting frame.
Values are exact; the counters must show the splits and add up.
"""

import os
import socket
import sys
import time

import nested_programs as nest
import numpy as np
import pytest
from proctools import wait_for_no_processes

import dac
from dac.spawn import spawn_function


def leaves_of(stats):
    return [p for p in stats["processes"] if p["role"] == "leaf"]


def split_tasks(report):
    """Spawns split off a running task and run on another leaf."""
    return sum(p["split_tasks"] for p in leaves_of(report.stats))


def check_counters(stats, procs):
    """Every batch a leaf received is its first one or an answered steal (a leaf asks
    only once it has had work), and every task ran somewhere."""
    leaves = leaves_of(stats)
    assert len(leaves) == procs
    assert stats["batches"] == sum(p["batches"] for p in leaves)
    started = sum(1 for p in leaves if p["batches"])
    assert stats["batches"] == started + stats["steals_local"] + \
        stats["steals_after_remote"] + stats["steals_split"]
    assert stats["tasks"] == sum(p["tasks"] for p in stats["processes"])
    given = sum(p["split_given"] for p in leaves)
    split = sum(p["split_tasks"] for p in leaves)
    assert split <= given               # split work runs once (some may be re-split)


@pytest.mark.parametrize("procs", [1, 2, 5, 14])
def test_one_task_is_shared_by_splitting(procs):
    """A 64-leaf tree of naps handed to one leaf as one task: with more leaves the
    others get work only by splitting it; with routers (5 and 14 leaves) splits go
    through them and results come back down by the owner's path."""
    report = dac.run_report(nest.sleep_tree, 6, 10.0, procs=procs)
    assert report.result == 64
    stats = report.stats
    check_counters(stats, procs)
    busy = [p for p in leaves_of(stats) if p["tasks"] > 0]
    split = sum(p["split_tasks"] for p in leaves_of(stats))
    if procs == 1:
        assert split == 0 and len(busy) == 1
    else:
        # a leaf's first batch (split off the one task) is no steal: every leaf but
        # the first got work, all of it split off running tasks
        assert split >= len(busy) - 1 >= 1
        # the one task of the root, plus every split spawn, ran on some leaf
        assert stats["tasks"] == 1 + sum(p["split_tasks"] for p in leaves_of(stats))


def test_a_spine_of_naps_runs_on_both_leaves():
    report = dac.run_report(nest.sleep_spine, 30, 10.0, procs=2)
    assert report.result == 30
    assert sum(p["split_tasks"] for p in leaves_of(report.stats)) >= 2
    assert all(p["tasks"] > 0 for p in leaves_of(report.stats))
    check_counters(report.stats, 2)


def test_sync_without_arguments_and_result():
    assert dac.run(nest.busy_tree, 10, 2000, procs=2) == nest.plain_busy_tree(10, 2000)


def test_merge_sort_merges_where_the_frame_is():
    data = np.random.default_rng(5).integers(0, 10**6, 4000)
    report = dac.run_report(nest.merge_sort, data, 2.0, procs=2)
    assert np.array_equal(report.result, np.sort(data))
    assert split_tasks(report) >= 1


def test_spawn_after_sync():
    report = dac.run_report(nest.deepening, 8, 5.0, procs=2)
    assert report.result == nest.plain_deepening(8)


def test_mutual_recursion_with_a_function_outside_the_job_table():
    report = dac.run_report(nest.even, 25, 5.0, procs=2)
    assert report.result is False
    assert split_tasks(report) >= 1
    assert dac.run(nest.even, 24, 2.0, procs=2) is True


def test_results_of_several_types_come_back_from_stolen_children():
    report = dac.run_report(nest.shapes, 5, 5.0, procs=2)
    assert report.result == nest.plain_shapes(5)
    assert type(report.result) is nest.Pair
    assert split_tasks(report) >= 1


def test_an_error_in_a_stolen_child_ends_the_run():
    with pytest.raises(dac.TaskError) as info:
        dac.run(nest.fails_deep, 6, 45, 5.0, procs=2)
    err = info.value
    assert err.type_name == "Boom"
    assert "leaf 45 of the tree failed" in str(err)
    assert wait_for_no_processes(timeout=5) == {}
    assert dac.run(nest.sleep_tree, 3, 1.0, procs=2) == 8      # the process still works


def test_a_deep_spine_with_a_raised_recursion_limit():
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(3000)
    try:
        assert dac.run(nest.deep_spine, 2500, procs=2) == 2500
    finally:
        sys.setrecursionlimit(saved)


def test_spawn_per_batch_leaves_run_nested_spawns_serially():
    """A spawn-per-batch leaf runs its task serially (it exits after one batch, so
    nothing can be split off it): the value is right, nothing is split."""
    report = dac.run_report(nest.sleep_tree, 4, 1.0, procs=2, leaf_mode="spawn")
    assert report.result == 16
    assert report.stats["steals_split"] == 0 and split_tasks(report) == 0


def test_a_kept_runtime_splits_in_every_run():
    with dac.Runtime(procs=2) as rt:
        for depth in (3, 5, 4):
            report = rt.run_report(nest.sleep_tree, depth, 5.0)
            assert report.result == 2 ** depth
            check_counters(report.stats, 2)


class _Worker:
    """A stand-in for a leaf: counts polls, never waits (nothing is stolen)."""

    path, owed = (0,), 0

    def __init__(self):
        self.polls = 0

    def poll(self):
        self.polls += 1

    def wait(self, done):
        raise AssertionError("nothing was stolen: sync never waits")

    def offer(self, tasks):
        raise AssertionError("nobody asked")


def test_a_task_polls_between_slow_spawns():
    """The number of spawns between two polls follows the spawn rate, but one fast
    sample must not put the next poll thousands of spawns away: a spine of 30 spawns
    10 ms apart polled once in 300 ms (a thief waited for the whole task)."""
    from dac.stealable import StealableContext
    worker = _Worker()
    ctx = StealableContext(worker)
    assert ctx.run_task(spawn_function(nest.sleep_spine), (30, 10.0), {}, 0, False) == 30
    assert worker.polls >= 20


def _deque_peak(worker, n):
    from dac.stealable import StealableContext
    ctx = StealableContext(worker)
    peak = []
    value = ctx.run_task(spawn_function(nest.fan_and_watch), (n, ctx, peak), {}, 0, False)
    return value, max(peak)


def test_the_top_call_of_a_task_makes_every_spawn_stealable():
    """The task's top call's spawns are all entries: the oldest, shallowest ones are
    there to steal (kept to 2 entries, a thief of UTS T3 got one node at a time:
    1.1x the elision on 2 leaves; every spawn an entry: 1.9x). A leaf alone in its
    run does the same (a leaf added by ``grow`` may steal from it): it once kept 2
    entries and ran the body, counted, for every other spawn (fib 30 took 8.7x its
    elision in one process, N-Queens 12 2.1x, UTS T3 1.3x)."""
    assert _deque_peak(_Worker(), 10) == (45, 10)


def test_a_sync_that_runs_slow_entries_polls_by_the_clock():
    """Fast spawns stretch the number of spawns between two polls; the entries they
    made, run by sync, spawn nothing: the clock makes the polls (a spine on 2
    leaves: one leaf idle for the whole run, 0.9x the elision; polled, 1.7x)."""
    from dac.stealable import StealableContext
    worker = _Worker()
    ctx = StealableContext(worker)
    assert ctx.run_task(spawn_function(nest.fan_of_naps), (100, 1.0), {}, 0, False) == 100
    assert worker.polls >= 30            # 100 ms of naps, a poll every ~2 ms


def test_every_form_of_sync_in_a_leaf():
    """``dac.context.sync`` hands a leaf's context every call as it came: the pair,
    three, one future, one list (a list back), any other iterable (a list back),
    ``sync()``, each over entries; and the elision's."""
    from dac.stealable import StealableContext
    want = ((1, 2), (3, 4, 5), 6, [0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3], [], [7, 8])
    ctx = StealableContext(_Worker())
    assert ctx.run_task(spawn_function(nest.sync_forms), (4,), {}, 0, False) == want
    assert ctx.seq == 20                                    # every spawn an entry
    assert nest.sync_forms(4) == want                       # the elision


@pytest.mark.parametrize("form, named", [("list", "int 2"), ("pair", "str 'two'"),
                                         ("one", "int 3")])
def test_sync_of_a_non_future_in_a_leaf(form, named):
    from dac import SyncError
    from dac.stealable import StealableContext
    ctx = StealableContext(_Worker())
    with pytest.raises(SyncError, match=f"got {named}"):
        ctx.run_task(spawn_function(nest.sync_mistake), (form,), {}, 0, False)


def _warm(ctx):
    """``ctx`` as on a leaf whose spawns come fast (thousands between two polls)."""
    ctx.interval = 1 << 12
    return ctx


def test_a_leaf_with_peers_makes_entries_only_at_the_top_of_a_task():
    """Spawns made less than ``HORIZON`` levels below the task's top call are entries,
    deeper ones plain calls (with every spawn an entry, fib 32 ran at 0.65-0.69x its
    elision on 2 leaves, and Langford 12 at 1.42x against a ceiling of 1.9-2.0x)."""
    from dac.stealable import HORIZON, StealableContext
    ctx = _warm(StealableContext(_Worker()))
    assert ctx.run_task(spawn_function(nest.binary), (10,), {}, 0, False) == 1024
    assert ctx.seq == 2 ** (HORIZON + 1) - 2          # of 2046 spawns
    ctx = _warm(StealableContext(_Worker()))  # a thief's task: top levels of its own
    assert ctx.run_task(spawn_function(nest.binary), (3,), {}, 5, False) == 8
    assert ctx.seq == 14


def test_a_wide_task_makes_entries_only_while_its_deque_is_short():
    """Below the task's top call, a spawn above the horizon is an entry only while the
    deque holds fewer than ``WIDE`` entries: a tree 10 wide made every one of the
    11,110 spawns of its top 4 levels an entry (N-Queens 12 on 2 leaves: the leaves
    busy 0.44-0.47 s against 0.37-0.43 s with the root's pool at ``depth=1``); the top
    call's own spawns all are (a thief's biggest pieces), and a binary tree, whose
    deque holds one entry a level, keeps its 30."""
    from dac.stealable import WIDE, StealableContext
    assert WIDE == 8
    ctx = _warm(StealableContext(_Worker()))
    assert ctx.run_task(spawn_function(nest.fan_tree), (10, 4), {}, 0, False) == 10 ** 4
    assert 10 < ctx.seq < 1110          # of 11,110 (496-552: the count of spawns
    #                                     between two polls varies with the clock)
    ctx = _warm(StealableContext(_Worker()))
    peak = []
    assert ctx.run_task(spawn_function(nest.fan_and_watch), (20, ctx, peak), {}, 0,
                        False) == 190
    assert max(peak) == 20                          # the top call's: all entries
    ctx = _warm(StealableContext(_Worker()))
    assert ctx.run_task(spawn_function(nest.fan_tree), (2, 10), {}, 0, False) == 1024
    assert ctx.seq == 30


def test_slow_spawns_are_all_entries():
    """Spawns a millisecond apart are entries at any depth: beside the work between
    them an entry costs nothing, and thieves find all of it (a tree of naps)."""
    from dac.stealable import StealableContext
    ctx = StealableContext(_Worker())
    assert ctx.run_task(spawn_function(nest.sleep_tree), (6, 1.0), {}, 0, False) == 64
    assert ctx.seq == 126                           # every spawn


class _Thief(_Worker):
    """A stand-in whose thief asks for work at every poll until the leaf has none to
    give, keeps what it is given or paid, and answers it when a sync waits: a
    ``binary(d)`` call is worth 2**d."""

    def __init__(self):
        super().__init__()
        self.ctx, self.given, self.paid, self.owed_at = None, [], [], []
        self.horizons = []                  # the leaf's horizon as it pays

    def poll(self):
        super().poll()
        if self.owed_at or self.polls == 1:     # (the first: the task's first spawn)
            return
        got = self.ctx.split(1)
        if got:
            self.given.extend(got)
        else:
            self.owed_at.append(self.ctx.level)

    def offer(self, tasks):
        self.paid.extend(tasks)
        self.horizons.append(self.ctx.horizon)

    def wait(self, done):
        from dac import task_call
        from dac.serialize import dumps
        self.ctx.deliver([(tid, dumps(2 ** task_call.read(payload).args[0], "a result"))
                          for tid, payload in self.given + self.paid
                          if tid[1] in self.ctx.stolen])
        assert done()


def test_a_thief_that_finds_no_entry_is_paid_from_spawns_made_since():
    """A thief that asks while the leaf runs a plain call below the horizon gets
    nothing then (owed); every spawn is an entry until a poll ``POLL_S`` later pays
    it from them: calls made below the first horizon, plain calls until a thief
    needed them. Then the horizon is back."""
    from dac import task_call
    from dac.stealable import EVERY, HORIZON, StealableContext
    worker = _Thief()
    ctx = worker.ctx = _warm(StealableContext(worker))
    # (24 levels: the part the leaf keeps runs for tens of ms in the fast clone, so
    # that the clock's wakes, every 2 ms, find it running)
    assert ctx.run_task(spawn_function(nest.binary), (24,), {}, 0, False) == 2 ** 24
    assert worker.given and worker.owed_at and worker.paid
    assert worker.owed_at[0] > HORIZON              # asked below the horizon
    sizes = [task_call.read(p).args[0] for _, p in worker.paid]
    assert max(sizes) < 24 - HORIZON                # promoted from below it
    assert EVERY not in worker.horizons and not ctx.owed


class _PaidThief(_Thief):
    """A ``_Thief`` that also notes, at each payment, the sizes it was paid and the
    sizes of the entries left on the leaf's deque."""

    def __init__(self):
        super().__init__()
        self.payments = []

    def offer(self, tasks):
        from dac import task_call
        super().offer(tasks)
        self.payments.append(([task_call.read(p).args[0] for _, p in tasks],
                              [e._call[1][0] for e in self.ctx.deque]))


def test_a_split_owed_is_paid_with_the_shallowest_spawns_made_since():
    """What a leaf pays a thief it owed is the oldest half of the entries at the
    shallowest level made since it was asked, not half of them all: those are mostly
    deep calls of the running path (a split of UTS T3 handed a thief 456 and 857
    tasks, most of one node). Of ``binary``'s two calls a level, one."""
    from dac.stealable import StealableContext
    worker = _PaidThief()
    ctx = worker.ctx = _warm(StealableContext(worker))
    assert ctx.run_task(spawn_function(nest.binary), (24,), {}, 0, False) == 2 ** 24
    assert worker.payments
    for paid, left in worker.payments:
        assert len(paid) == 1, worker.payments
        assert paid[0] >= max(left, default=0), worker.payments


def test_a_thief_takes_the_oldest_half_of_the_entries():
    """However few it asks for: on a spine of 3 ms levels, batches of 50 ms made nine
    steals, each an idle round trip for the thief (1.58-1.61x the elision); half the
    deque makes one or two (1.60-1.79x)."""
    from dac.serialize import loads
    from dac.stealable import StealableContext
    ctx = StealableContext(_Worker())
    stolen = []
    assert ctx.run_task(spawn_function(nest.fan_then_split), (10, ctx, stolen), {}, 0,
                        False) == 45
    assert [loads(payload)[3] for _, payload in stolen] == [(i,) for i in range(5)]
    assert [tid for tid, _ in stolen] == [((0,), i) for i in range(5)]


class _Offered(_Worker):
    """A stand-in that keeps what the context pays a thief, and answers it as the
    thief would when a sync waits (a call of ``counted(4, i)`` run in full: 16)."""

    def __init__(self):
        super().__init__()
        self.offered, self.ctx = [], None

    def offer(self, tasks):
        self.offered.extend(tasks)

    def wait(self, done):
        from dac.serialize import dumps
        self.ctx.deliver([(tid, dumps(16, "a result")) for tid, _ in self.offered])
        assert done()


class _Returns(_Worker):
    """A stand-in whose thieves' results come back one at a time, oldest first,
    while a sync waits; counts the waits."""

    def __init__(self):
        super().__init__()
        self.ctx, self.stolen, self.waits = None, [], 0

    def wait(self, done):
        from dac.serialize import dumps, loads
        self.waits += 1
        while not done():
            tid, payload = self.stolen.pop(0)
            self.ctx.deliver([(tid, dumps(loads(payload)[3][0], "a result"))])


@pytest.mark.parametrize("form", ["list", "all"])
def test_a_sync_waits_once_for_all_its_stolen_children(form):
    """A sync whose children thieves hold waits once for them all: a wait per child
    withdrew the leaf's idle request at each result and sent it again at the next
    wait (two messages a result, 256 sleeping leaves)."""
    from dac.stealable import StealableContext
    worker = _Returns()
    ctx = worker.ctx = StealableContext(worker)
    assert ctx.run_task(spawn_function(nest.fan_split_off),
                        (8, ctx, worker.stolen, form), {}, 0, False) == sum(range(8))
    assert worker.waits == 1 and not worker.stolen


def test_a_split_waits_for_the_grain_of_a_leaf_function():
    """A ``leaf=`` function without ``depth=``/``cutoff=``: its grain is fixed from the
    number of calls the top makes (``grain_depth``). A split asked while the top was
    still spawning was answered at once, its grain from 2 calls: N-Queens 14 cut 2
    levels too deep (1.5 times the leaves' CPU). Now it is owed until the top has made
    its calls, then paid with the grain that all of them give."""
    from dac import task_call
    from dac.stealable import StealableContext, grain_depth
    worker = _Offered()
    ctx = worker.ctx = StealableContext(worker)
    log = []
    value = ctx.run_task(spawn_function(nest.split_while_counting), (8, ctx, log), {}, 0,
                         False, target=64)
    assert log == [[]]                              # owed: the grain was not known
    assert ctx.grain == grain_depth(64, 8) == 2     # 8 calls a level: 64 at depth 2
    assert len(worker.offered) >= 1
    calls = [task_call.read(payload) for _, payload in worker.offered]
    assert all(c.depth == 1 and c.serial is False and c.grain == 2 for c in calls)
    # counted(4, i) is 2 here, with the kernel at depth 2 (the body alone: 16); the
    # paid ones were answered 16
    assert value == 2 * (8 - len(calls)) + 16 * len(calls)


def test_grain_depth_aims_for_the_target():
    from dac.stealable import grain_depth
    assert [grain_depth(32, b) for b in (1, 2, 3, 12, 40)] == [5, 5, 4, 2, 1]
    assert grain_depth(1, 2) == 1


def test_below_the_horizon_a_task_runs_in_the_elisions_context():
    """Below its horizon a leaf's task runs in a serial context that stands in for the
    leaf's (a spawn is the elision's plain call, with no count and no level to keep);
    the ticker (``dac.ticker``) turns it back every ``POLL_S``, so the worker still
    polls, and stops with the task."""
    import signal

    from dac.context import current
    from dac.stealable import HORIZON, POLL_S, StealableContext
    worker = _Worker()
    ctx = _warm(StealableContext(worker))
    seen = []
    assert ctx.run_task(spawn_function(nest.where), (10, seen), {}, 0, False) == 1024
    below = seen.count(("SerialContext", True))
    assert below >= 900 and below + seen.count(("StealableContext", False)) == 1024
    assert current() is None and ctx.below is ctx
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    # entries only at the top; but a task descheduled between a tick and its next
    # spawn takes its spawns for slow ones (``SLOW_GAP``, wall time: a task that
    # sleeps is slow) and makes entries of them until a few polls measure them fast
    # (CI: 128 entries), so one of three tries must show the undisturbed count
    entries = []
    for _ in range(3):
        worker = _Worker()
        ctx = _warm(StealableContext(worker))
        t0 = time.perf_counter()
        assert ctx.run_task(spawn_function(nest.binary), (17,), {}, 0, False) == 2 ** 17
        spent = time.perf_counter() - t0
        assert worker.polls >= min(10, spent / POLL_S / 4)  # polled after ticks
        entries.append(ctx.seq)
        if ctx.seq == 2 ** (HORIZON + 1) - 2:
            break
    assert entries[-1] == 2 ** (HORIZON + 1) - 2, entries
    assert max(entries) < 2 ** 17 // 64, entries        # a misjudgement costs little


def test_a_grain_function_below_the_horizon_keeps_its_grain():
    """A ``cutoff=``/``leaf=`` function called where the task runs below its horizon
    gets the leaf's own context back: its calls at the grain run the ``leaf=``
    function (the body, as in the elision, would give 32)."""
    from dac.stealable import StealableContext
    nest.LEAF_CALLS.clear()
    ctx = _warm(StealableContext(_Worker()))
    assert ctx.run_task(spawn_function(nest.chain_to), (8, 5), {}, 0, False) == 8
    assert nest.LEAF_CALLS == [2] * 8
    assert nest.chain_to(8, 5) == 32                        # the elision


def test_a_nap_below_the_horizon_lasts_as_long_as_asked():
    """The ticker's signals interrupt a task's sleep, which Python resumes."""
    from dac.stealable import StealableContext
    ctx = _warm(StealableContext(_Worker()))
    t0 = time.perf_counter()
    assert ctx.run_task(spawn_function(nest.chain_to), (8, 0, 0.05), {}, 0, False) == 0
    assert time.perf_counter() - t0 >= 0.05


def test_the_ticker_leaves_a_programs_own_alarm_alone():
    """A program with its own ``SIGALRM`` handler keeps it: no ticker, and the leaf
    counts its spawns to poll, as it did before."""
    import signal

    from dac import ticker
    from dac.stealable import StealableContext
    rang = []
    old = signal.signal(signal.SIGALRM, lambda *a: rang.append(1))
    try:
        assert not ticker.start(lambda: None, 0.002)
        worker = _Worker()
        ctx = _warm(StealableContext(worker))
        seen = []
        assert ctx.run_task(spawn_function(nest.where), (10, seen), {}, 0, False) == 1024
        assert ("SerialContext", True) not in seen
        assert signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, ticker._on_tick)
    finally:
        signal.signal(signal.SIGALRM, old)
    assert rang == []


class _RungPeer(_Worker):
    """A stand-in for a leaf whose parent rings its doorbell after each message."""

    def __init__(self):
        super().__init__()
        self.bell = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.bell.bind(b"\0dac-test-ring-%d" % os.getpid())
        self.bell.setblocking(False)
        self.ring_fd = self.bell.fileno()


def _run_then_close(peer, fn, args_of):
    """``fn`` run as a task in a new context of ``peer`` (its arguments from
    ``args_of(ctx)``), then ``peer``'s bell closed where it has one."""
    from dac.stealable import StealableContext
    try:
        ctx = StealableContext(peer)
        return ctx.run_task(spawn_function(fn), args_of(ctx), {}, 0, False)
    finally:
        if hasattr(peer, "bell"):
            peer.bell.close()


def test_slow_spawns_poll_by_the_clock_where_a_ring_signals():
    """Spawns that come slowly each poll while nothing rings the leaf (a parent on
    another host); where the parent's rings signal the task (something on its deque
    to give), a spawn polls only after a ring, or ``SLOW_TICK_S`` after the last
    poll (a net for a ring lost): 256 sleeping leaves on 2 cores polled 1.3 times a
    node, the poll's probe with cold caches the leaves' largest cost after the
    program's own (0.48-0.52 efficiency; 0.52-0.56 polling so)."""
    from dac.stealable import SLOW_TICK_S
    levels, ms = 40, 5.0
    for peer, most in ((_Worker(), None), (_RungPeer(), 2 + levels * ms / 1e3 / SLOW_TICK_S)):
        assert _run_then_close(peer, nest.slow_comb, lambda ctx: (levels, ms)) == levels
        if most is None:
            assert peer.polls >= levels - 2        # every slow spawn
        else:
            assert 1 <= peer.polls <= most, peer.polls


def test_spawns_that_speed_up_again_are_counted_again():
    """A leaf whose spawns came slowly (each one to poll) and whose polls are put off
    while nothing rings still counts the spawns it lets by: when they come fast again
    its polls space out again, with the horizon back (a count left at one made every
    spawn of UTS T3 an entry that looked at the clock: 1.34x its elision on 2 leaves
    against 1.74x)."""
    from dac.stealable import SLOW
    for peer in (_Worker(), _RungPeer()):
        seen = []
        assert _run_then_close(peer, nest.slow_then_fast,
                               lambda ctx: (20, 5.0, 15, ctx, seen)) == 20 + 2 ** 15
        assert seen[0] == 1 and seen[1] > SLOW, seen


def test_a_ring_wakes_a_running_task_and_the_clock_slows_down():
    """Where the parent rings the leaf, a datagram on the doorbell raises ``SIGIO``,
    which wakes the task (``rung`` True) long before the clock would; the clock then
    ticks every ``SLOW_TICK_S``, not every ``POLL_S``: 2 ms ticks on 128 sleeping
    leaves took the sleep tree from 0.70 to 0.45 efficiency on 2 cores. Both end
    with the task; while spawns are slow (each one polls then) the clock stops,
    and a ring still signals only while the deque holds something to give (a nap
    between two spawns must not hold a thief's request:
    ``test_a_ring_is_answered_at_once_in_the_programs_code``)."""
    import fcntl
    import signal

    from dac import ticker
    from dac.stealable import HORIZON, SLOW_TICK_S, StealableContext
    peer = _RungPeer()
    try:
        ctx = _warm(StealableContext(peer))
        seen = []
        assert ctx.run_task(spawn_function(nest.timers), (peer.ring_fd, seen), {}, 0,
                            False) == 1
        assert seen == [(SLOW_TICK_S, True)]
        assert not fcntl.fcntl(peer.ring_fd, fcntl.F_GETFL) & os.O_ASYNC
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        seen.clear()        # slow spawns (a tick finds them so): each polls, and
        #                     with nothing on the deque to give, no signal
        assert ctx.run_task(spawn_function(nest.slow_chain),
                            (HORIZON + 40, peer.ring_fd, seen), {}, 0, False) == 1
        assert seen == [(0.0, False)]
        assert not fcntl.fcntl(peer.ring_fd, fcntl.F_GETFL) & os.O_ASYNC
        calls = []
        assert ticker.start(lambda rung, frame: calls.append(rung), 60.0, peer.ring_fd, 60.0)
        try:
            ring = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            ring.sendto(b"!", peer.bell.getsockname())
            deadline = time.monotonic() + 5
            while not calls and time.monotonic() < deadline:
                time.sleep(0.001)
            assert calls == [True]
        finally:
            ticker.stop()
        ring.sendto(b"!", peer.bell.getsockname())
        time.sleep(0.05)
        assert calls == [True]
    finally:
        peer.bell.close()


class _RungCounter(_RungPeer):
    """A leaf whose polls are noted: when, and whether inside the signal's handler
    (the task's frame below the poll is the program's ``nap``)."""

    def __init__(self):
        super().__init__()
        self.polled = []

    def poll(self):
        frame, inside = sys._getframe(1), False
        for _ in range(4):
            inside = inside or frame.f_code.co_name == "_answer"
            frame = frame.f_back
        self.polled.append((time.perf_counter(), inside))
        return True


def _ring_in_a_nap():
    """A task of slow spawns whose last but one rings the leaf's doorbell and naps
    0.3 s (``nest.nap_after_ring``): the leaf (its polls noted), the times of the
    ring and of the end of the nap, and the context."""
    from dac.stealable import StealableContext
    peer = _RungCounter()
    out = {}

    def ring():
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as bell:
            out["rung"] = time.perf_counter()
            bell.sendto(b"!", peer.bell.getsockname())
    try:
        ctx = _warm(StealableContext(peer))
        assert ctx.run_task(spawn_function(nest.nap_after_ring), (3, ring, 0.3, out), {},
                            0, False) == 3
    finally:
        peer.bell.close()
    return peer, out, ctx


def test_a_ring_is_answered_at_once_in_the_programs_code():
    """A ring that finds the task in the program's own code (here a 0.3 s nap
    between two slow spawns) is answered from the signal's handler: the worker
    reads its messages within milliseconds of the ring, not at the next spawn
    (a thief waited the rest of the victim's nap; on a spine of 3 ms levels the
    median split took 0.6-2.3 ms to reach its victim, 0.08-0.22 ms since)."""
    peer, out, ctx = _ring_in_a_nap()
    answered = [t for t, inside in peer.polled if inside]
    assert len(answered) == 1, peer.polled
    assert 0 <= answered[0] - out["rung"] < 0.1 and answered[0] < out["woke"]
    assert not ctx.polling


def test_a_ring_in_the_runtimes_code_waits_for_the_next_spawn(monkeypatch):
    """A ring that finds the task in the runtime's code (or Python's, or while it
    pickles for a thief) only marks the next spawn to poll: the runtime may be half
    way through a change of its deque or a message. The same nap as above, the
    signal taken as if in the runtime's code: no poll inside the handler, one at
    the spawn after the nap."""
    from dac import stealable
    monkeypatch.setattr(stealable, "_user_code", lambda frame: False)
    peer, out, _ = _ring_in_a_nap()
    assert not [t for t, inside in peer.polled if inside]
    assert [t for t, _ in peer.polled if out["rung"] <= t < out["woke"]] == []
    assert [t for t, _ in peer.polled if t >= out["woke"]]


def test_a_rings_handler_imports_nothing(monkeypatch):
    """The folders that tell the program's code from the runtime's are found when a
    task starts, never in a signal's handler: a handler that imported while the
    task was importing (``dac run examples/fib.py``, numba compiling in the leaf)
    broke CPython 3.11's import lock (``KeyError`` in ``_ModuleLock.acquire``)."""
    from dac import stealable
    from dac.stealable import StealableContext

    def no_import():
        raise AssertionError("found in a handler")
    monkeypatch.setattr(stealable, "_NOT_USER", [])
    real = stealable._runtime_dirs
    monkeypatch.setattr(stealable, "_runtime_dirs", no_import)
    peer = _RungCounter()
    try:
        ctx = _warm(StealableContext(peer))
        ctx._tick(True, sys._getframe())       # not found yet: the next spawn polls
        assert peer.polled == [] and ctx.countdown > 0
        monkeypatch.setattr(stealable, "_runtime_dirs", real)
        assert ctx.run_task(spawn_function(nest.one_more), (1,), {}, 0, False) == 2
        assert stealable._NOT_USER and stealable._user_code(sys._getframe())
    finally:
        peer.bell.close()


def test_a_leaf_prepares_a_loaded_function_before_its_first_task(monkeypatch):
    """``Executor.prepare`` (a leaf calls it once it has said READY): each loaded
    function's fast clone is written and the runtime's folders found, so that the
    first task of a job that starts as one task splits at its first spawn and its
    thief starts at once (fib 32 on 2 leaves waited about 5 ms at each); a function
    that cannot be prepared is left to its first task to report."""
    from types import SimpleNamespace

    from dac import stealable
    from dac.execution import Executor, load_table
    from dac.serialize import dumps_function
    from dac.spawn_call import function_of

    @dac.spawn
    def halves(n):
        if n < 2:
            return n
        a, b = dac.sync(halves(n // 2), halves(n - n // 2))
        return a + b

    monkeypatch.setattr(stealable, "_NOT_USER", [])
    table = load_table({"halves#1": dumps_function(spawn_function(halves))})
    space = function_of(table["halves#1"]).__globals__
    assert getattr(space.get("_dac_run"), "build", True)        # not written yet

    def boom():
        raise RuntimeError("no clone")
    Executor.prepare({**table, "bad#2": SimpleNamespace(ready=boom)})
    assert not hasattr(space["_dac_run"], "build")              # the clone, written
    assert stealable._NOT_USER and space["_dac_run"] is not halves


def test_the_programs_code_is_told_from_the_runtimes():
    """``_user_code``: a frame of the program (this test) is; frames of ``dac``, of
    ``stealing`` and of Python's library are not, nor a ``@spawn`` function's
    written code; and a handler finds nothing to answer while the context pickles
    for a thief or reads a result (``polling``)."""
    import copy

    from dac import context, stealable
    from dac.stealable import StealableContext, _user_code
    if not stealable._NOT_USER:         # (as a leaf's first task finds them)
        stealable._NOT_USER.append(stealable._runtime_dirs())
    assert _user_code(sys._getframe())
    frames = []

    class Grab:
        def __iter__(self):
            frames.append(sys._getframe(1))     # the runtime's frame that iterates
            return iter(())

        def __deepcopy__(self, memo):
            frames.append(sys._getframe(1))     # copy.deepcopy's frame
            return self
    context.sync_iterable(context.SerialContext(0), Grab())
    copy.deepcopy(Grab())
    assert [f.f_code.co_filename.rsplit(os.sep, 2)[-2:] for f in frames] == \
        [["dac", "context.py"], [frames[1].f_code.co_filename.rsplit(os.sep, 2)[-2],
                                 "copy.py"]]
    assert not any(_user_code(f) for f in frames)
    peer = _RungCounter()
    try:
        ctx = _warm(StealableContext(peer))
        ctx.polling = 1
        ctx._tick(True, sys._getframe())
        assert peer.polled == [] and ctx.polling == 1
        ctx.polling = 0
        ctx._tick(True, sys._getframe())
        assert [inside for _, inside in peer.polled] == [True] and ctx.polling == 0
    finally:
        peer.bell.close()


class _RungFinder(_RungPeer):
    """A leaf whose every poll finds a message (its time noted)."""

    def __init__(self):
        super().__init__()
        self.polled = []

    def poll(self):
        self.polled.append(time.perf_counter())
        return True


def test_a_ring_while_the_task_runs_above_its_horizon_is_not_lost():
    """A ring that comes while the task runs in the leaf's own context (above the
    horizon, where spawns are counted) makes the next spawn poll: the task may go
    below the horizon before its count runs out, where only a signal wakes it, and
    its ring was spent (one of three ways a ring was lost: UTS T3 on 2 leaves, 11-14
    splits of about 200 a run waited 41-50 ms for the clock's next tick)."""
    from dac.stealable import HORIZON, SLOW_TICK_S, StealableContext
    peer = _RungFinder()
    out = []

    def ring():
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as bell:
            bell.sendto(b"!", peer.bell.getsockname())
    try:
        ctx = _warm(StealableContext(peer))
        assert ctx.run_task(spawn_function(nest.ring_then_descend),
                            (HORIZON + 3, ring, peer, out, ctx), {}, 0, False) == 1
        assert out[0] is not None and out[0] < SLOW_TICK_S / 5, out
    finally:
        peer.bell.close()


def test_a_ring_while_a_routed_call_runs_is_not_lost():
    """A ring that comes while a spawn of the fast clone runs in the leaf's own
    context (routed there by a tick, ``StealableContext.run_here``) keeps the clone's
    spawns routed: its frames go on below the horizon when it returns, and with
    them put back as plain calls nothing read the thief's request until the
    clock's next tick (UTS T3 on 2 leaves: a split asked after a sync's results
    came back waited 45-50 ms, 11 of 205 splits)."""
    from dac import clone
    from dac.stealable import SLOW_TICK_S, StealableContext
    peer = _RungFinder()

    def ring():
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as bell:
            bell.sendto(b"!", peer.bell.getsockname())
    try:
        ctx = _warm(StealableContext(peer))
        st = {"ctx": ctx, "ring": ring, "worker": peer}
        sf = spawn_function(nest.ring_when_routed)
        assert clone.of(sf) is not None         # (the test is of its fast clone)
        ctx.run_task(sf, (40, st), {}, 0, False)
        assert "t" in st
        waited = peer.polled[st["polls"]] - st["t"] if len(peer.polled) > st["polls"] \
            else None
        assert waited is not None and waited < SLOW_TICK_S / 5, waited
    finally:
        peer.bell.close()


class _NestsInWait(_Worker):
    """A stand-in whose wait, as a leaf's while its task's child is out with a thief,
    runs a task nested in it (``owe_then_fan``: owed a split, then pays it from its
    spawns), then gets the child's result; notes the time of each poll."""

    def __init__(self):
        super().__init__()
        self.ctx, self.stolen, self.polled = None, [], []

    def poll(self):
        self.polled.append(time.perf_counter())

    def wait(self, done):
        from dac.serialize import dumps
        ctx, sf = self.ctx, spawn_function(nest.owe_then_fan)
        sf.ready()                              # (its clone written)
        ctx.last_poll = time.perf_counter()     # (else its sync polls by the clock)
        assert ctx.run_task(sf, (4, ctx, []), {}, 0, False) == 6
        ctx.deliver([(tid, dumps(0, "a result")) for tid, _ in self.stolen])
        assert done()


def test_a_task_run_in_a_wait_leaves_the_clock_to_the_waiting_task():
    """A task run while another waits at ``sync`` may end with the clock paused (a
    thief it owed, paid from its deque, left every spawn an entry until its next
    poll); the waiting task takes its horizon back, and the clock with it: its
    frames below the horizon ran with no signal to wake them (UTS T3 on 2 leaves: a
    split reached its victim 750-880 ms late in three of four jobs, the thief idle
    all that while, a quarter of the job)."""
    from dac import clone
    from dac.stealable import HORIZON, SLOW_TICK_S, StealableContext
    worker = _NestsInWait()
    ctx = worker.ctx = _warm(StealableContext(worker))
    st = {"ctx": ctx, "worker": worker, "stolen": worker.stolen}
    sf = spawn_function(nest.wait_then_descend)
    assert clone.of(sf) is not None         # (its frames below the horizon: the clone)
    assert ctx.run_task(sf, (HORIZON + 3, st), {}, 0, False) == 1
    assert st["waited"] is not None and st["waited"] < SLOW_TICK_S, st["waited"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETOWN_EX is Linux's")
def test_a_ring_signals_the_main_thread_not_another_one():
    """The parent's ring signals the leaf's main thread alone. Sent to the process,
    ``SIGIO`` goes to any thread that does not block it, such as UCX's ``async``
    thread in a leaf when the main thread already has a signal pending (it does,
    descheduled on cores the leaves share). Python's handler then only notes it
    (a signal that reaches another thread does not make the main one look), and
    a task running pure Python, which never lets go of Python's lock, took the
    ring at the next signal to reach it, the clock's tick 50 ms later (UTS T3 on 2
    leaves: 1-2 splits a job reached their victim 42-51 ms late). Here the main
    thread blocks ``SIGIO`` while its bell rings beside a C thread waiting in
    ``pause()``: the signal must wait for the main thread, not go to that one."""
    import ctypes
    import signal

    from dac import ticker
    libc = ctypes.CDLL(None)
    mask = (ctypes.c_ulong * 16)()
    mask[0] = 1 << (signal.SIGIO - 1)
    peer, calls = _RungPeer(), []
    thread = ctypes.c_ulong()
    assert libc.pthread_create(ctypes.byref(thread), None,
                               ctypes.cast(libc.pause, ctypes.c_void_p), None) == 0
    try:
        assert ticker.start(lambda rung, frame: calls.append(rung), 60.0, peer.ring_fd, 60.0)
        assert libc.pthread_sigmask(signal.SIG_BLOCK, ctypes.byref(mask), None) == 0
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as bell:
                bell.sendto(b"!", peer.bell.getsockname())
            time.sleep(0.05)        # (where another thread took it, Python's handler
            blocked = list(calls)   # runs when this one takes Python's lock again)
        finally:
            libc.pthread_sigmask(signal.SIG_UNBLOCK, ctypes.byref(mask), None)
        t0 = time.perf_counter()
        while not calls and time.perf_counter() - t0 < 0.5:
            pass
        assert (blocked, calls) == ([], [True])
    finally:
        ticker.stop()
        libc.pthread_kill(thread, signal.SIGIO)     # (its pause() ends)
        libc.pthread_join(thread, None)
        peer.bell.close()


def test_a_tasks_poll_empties_its_doorbell():
    """A task's poll takes the rings off the doorbell, so that the next ring signals
    again: a task runs for seconds without sleeping on its bell, which holds 10
    datagrams (``net.unix.max_dgram_qlen``); past them rings are dropped and raise
    no ``SIGIO``, and a thief's request waited for the clock's 50 ms tick (UTS T3
    on 2 leaves: one leaf idle 1.6 s of a 3.8 s run)."""
    from dac import ticker
    from dac.stealable import StealableContext
    peer = _RungFinder()
    ctx = _warm(StealableContext(peer))
    rungs = []
    out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    out.setblocking(False)              # as a parent rings: a full queue drops it

    def ring(times):
        for _ in range(times):
            try:
                out.sendto(b"!", peer.bell.getsockname())
            except BlockingIOError:
                pass
        time.sleep(0.05)                # (the signals are taken meanwhile)
        return rungs.count(True)
    try:
        assert ticker.start(lambda rung, frame: rungs.append(rung), 60.0, peer.ring_fd, 60.0)
        ctx.below = ctx._serial_below   # as while a task runs with the ticker
        full = ring(15)
        assert 0 < full < 15            # the queue filled: later rings were dropped
        assert ring(1) == full          # ... and so is this one: no signal
        ctx._poll()
        assert ring(1) == full + 1
    finally:
        ticker.stop()
        out.close()
        peer.bell.close()


def test_the_ticker_leaves_a_programs_own_sigio_alone():
    """A program with its own ``SIGIO`` handler keeps it: no ring signals (the
    doorbell stays without ``O_ASYNC``), and the clock ticks every ``POLL_S``."""
    import fcntl
    import signal

    from dac import ticker
    from dac.stealable import POLL_S
    peer = _RungPeer()
    got = []
    old = signal.signal(signal.SIGIO, lambda *a: got.append(1))
    try:
        assert ticker.start(lambda rung, frame: None, POLL_S, peer.ring_fd, 60.0)
        try:
            assert signal.getitimer(signal.ITIMER_REAL)[1] == POLL_S
            assert not fcntl.fcntl(peer.ring_fd, fcntl.F_GETFL) & os.O_ASYNC
            assert signal.getsignal(signal.SIGIO) not in (signal.SIG_DFL, ticker._on_tick)
        finally:
            ticker.stop()
    finally:
        signal.signal(signal.SIGIO, old)
        peer.bell.close()
    assert got == []


def test_a_task_that_polls_by_itself_arms_no_signal():
    """A leaf's task whose spawns each poll from the start (slow, or none at all: a
    thief's task of one UTS node) starts the ticker paused: no timer and no
    ``O_ASYNC`` set and cleared again, which cost such a task 17 us (19 us against
    1.8 us on a leaf alone). A task whose spawns come fast arms both."""
    import signal

    from dac import ticker
    from dac.stealable import StealableContext
    peer = _RungPeer()
    real, armed = signal.setitimer, []

    def counting(which, seconds, interval=0.0):
        armed.append(seconds)
        return real(which, seconds, interval)

    ticker.signal.setitimer = counting
    real_async, rings = ticker._set_async, []
    ticker._set_async = lambda on: rings.append(on) or real_async(on)
    try:
        ctx = StealableContext(peer)
        for i in range(3):
            assert ctx.run_task(spawn_function(nest.one_more), (i,), {}, 0, False) == i + 1
        assert armed == [] and rings == []
        ctx = _warm(StealableContext(peer))         # fast spawns: signals on, then off
        assert ctx.run_task(spawn_function(nest.binary), (6,), {}, 0, False) == 64
        assert armed and armed[0] > 0 and armed[-1] == 0, armed
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        ticker.signal.setitimer = real
        ticker._set_async = real_async
        peer.bell.close()


class _OwedBefore(_Thief):
    """A ``_Thief`` whose split came before the task started (the leaf owed it: a
    thief's request and the task came in one look); notes how many entries the task
    had made when it paid, and the sizes paid; runs ``lopsided``."""

    owed = 1

    def __init__(self):
        super().__init__()
        self.paid_after = []

    def poll(self):
        self.polls += 1             # (the thief asks nothing more)

    def wait(self, done):
        from dac import task_call
        from dac.serialize import dumps

        def calls(n):               # what a thief's lopsided(n) returns
            a, b = 1, 1
            for _ in range(n - 1):
                a, b = b, a + b
            return b
        self.ctx.deliver([(tid, dumps(calls(task_call.read(payload).args[0]), "a result"))
                          for tid, payload in self.paid if tid[1] in self.ctx.stolen])
        assert done()

    def offer(self, tasks):
        from dac import task_call
        super().offer(tasks)
        self.paid_after.append((self.ctx.seq, [task_call.read(p).args[0]
                                               for _, p in tasks]))


def test_a_split_owed_before_the_task_started_is_paid_at_its_first_sync():
    """A thief's request that came with the task (the two leaves of a run passing the
    last work back and forth) is paid from the top call's own spawns, the biggest
    there are, at the top call's first sync: paid a poll ``POLL_S`` later, the
    victim had run the smaller spawn and into the bigger one meanwhile and handed
    over a piece from inside it (a traced run of fib 32 on 2 leaves ended in 86
    such hand-overs, one leaf idle 2.4 ms in each; 11 and 13 splits after)."""
    from dac.stealable import StealableContext
    sf = spawn_function(nest.lopsided)
    sf.ready()                  # (its clone written: that takes milliseconds)
    worker = _OwedBefore()
    ctx = worker.ctx = _warm(StealableContext(worker))
    # as on a leaf mid-run: it just polled (the look that took the task and the
    # request: no look by the clock before the clock's first tick, POLL_S after the
    # task's start), its count of spawns to the next poll is full, its last split
    # owed was a moment ago
    ctx.countdown = ctx.interval
    ctx.owed_at = time.perf_counter()
    ctx.last_poll = ctx.owed_at + 60
    assert ctx.run_task(sf, (22,), {}, 0, False) == 28657     # fib(23)
    assert worker.paid_after == [(2, [21])]         # the top's two spawns made: one
    assert not ctx.owed and worker.owed == 0


class _PaysTaken(_Worker):
    """A stand-in whose wait answers the calls a thief took off batches as their
    thief would: a subtree of ``chain_then_fan`` ``depth`` deep has ``width ** depth``
    leaves."""

    def wait(self, done):
        from dac.serialize import dumps, loads
        from dac.task_call import TaskCall
        ctx = nest.SPLITTER["ctx"]
        results = []
        for tid, payload in nest.SPLITTER["taken"]:
            call = TaskCall(*loads(payload))
            _, depth, width = call.args
            results.append((tid, dumps(width ** depth, "a result")))
        ctx.deliver(results)
        assert done()


def test_a_thief_takes_the_unstarted_calls_of_the_oldest_batches():
    """Below a task's horizon a comprehension of spawns is a batch (``dac.latent``):
    a split that finds the deque empty takes the last half of each batch's unstarted
    calls, oldest (shallowest) first, and the batch waits for their values after
    running the rest. Before, those calls were not yet made: the split was owed,
    and paid 2 ms later with what was spawned meanwhile (UTS T3 on 2 leaves: a node
    or a few a split, the thief idle 0.3-0.7 s of a 3.6 s job)."""
    from dac import latent
    from dac.serialize import loads
    from dac.stealable import HORIZON, StealableContext
    from dac.task_call import TaskCall
    nest.SPLITTER.clear()
    ctx = nest.SPLITTER["ctx"] = _warm(StealableContext(_PaysTaken()))
    sf = spawn_function(nest.chain_then_fan)
    assert ctx.run_task(sf, (HORIZON + 1, 4, 3), {}, 0, False) == 3 ** 4
    taken = [TaskCall(*loads(p)).args for _, p in nest.SPLITTER["taken"]]
    # of each level's 3 calls the first runs, and of the 2 others the last is taken
    assert taken == [(0, 3, 3), (0, 2, 3), (0, 1, 3), (0, 0, 3)]
    assert ctx.owed == 0 and not ctx.stolen
    assert latent.BATCHES == [] and latent.TAKEN == {}


def test_only_the_batches_a_thief_cut_end_by_the_slow_path(monkeypatch):
    """A batch's end knows its record by identity: only a batch a thief cut (its
    record replaced by a copy) ends through ``dac.latent.end``, which waits for the
    calls taken; the batches that end while those wait pop their own record. Before,
    every batch that ended while a thief held calls of any batch took the slow path
    (here 15 of them, beside the 4 cut)."""
    from dac import latent
    from dac.stealable import HORIZON, StealableContext
    ends: list = []

    def counted(rec, popped, out):
        ends.append(len(out))
        return latent.end(rec, popped, out)
    sf = spawn_function(nest.chain_then_fan)
    for counting in (False, True):      # (the first run writes the clone)
        nest.SPLITTER.clear()
        ctx = nest.SPLITTER["ctx"] = _warm(StealableContext(_PaysTaken()))
        if counting:
            monkeypatch.setitem(vars(nest), "_dac_end", counted)
        assert ctx.run_task(sf, (HORIZON + 1, 4, 3), {}, 0, False) == 3 ** 4
    assert ends == [2, 2, 2, 2]         # (each ran 2 of its 3 calls, the last taken)
    assert latent.BATCHES == [] and latent.TAKEN == {}


class _NestsThenPays(_PaysTaken):
    """As ``_PaysTaken``, after running a task nested in the wait (as a leaf runs
    what it holds while a batch waits for its thief); notes the leaf's state then."""

    def __init__(self):
        super().__init__()
        self.after = None

    def wait(self, done):
        from dac import latent
        ctx = nest.SPLITTER["ctx"]
        assert ctx.run_task(spawn_function(nest.binary), (3,), {}, 0, False) == 8
        self.after = (latent.on(), ctx.below is not ctx)
        super().wait(done)


def test_a_task_run_while_a_batch_waits_leaves_the_waiting_task_as_it_was():
    """A batch's end waits for its thief in the leaf's own context: from the frames
    below the horizon, where the context is the serial one, a task run in the wait
    took itself for the leaf's outer task, and its end stopped the clock and the
    batches of the task still running (and, with a batch's end that read whether
    batches were on, UTS T3's count came out 11,872 nodes short)."""
    from dac import latent
    from dac.stealable import HORIZON, StealableContext
    nest.SPLITTER.clear()
    worker = _NestsThenPays()
    ctx = nest.SPLITTER["ctx"] = _warm(StealableContext(worker))
    sf = spawn_function(nest.chain_then_fan)
    assert ctx.run_task(sf, (HORIZON + 1, 4, 3), {}, 0, False) == 3 ** 4
    assert worker.after == (True, True)         # batches and the clock still on
    assert latent.BATCHES == [] and latent.TAKEN == {}


class _PaysBinary(_Worker):
    """A stand-in that answers the calls thieves took off ``binary_asked`` (taken by
    a split, or paid to an owed one) as their thief would: ``2 ** depth``."""

    def offer(self, tasks):
        nest.SPLITTER.setdefault("taken", []).extend(tasks)

    def wait(self, done):
        from dac.serialize import dumps, loads
        from dac.task_call import TaskCall
        results = [(tid, dumps(2 ** TaskCall(*loads(p)).args[0], "a result"))
                   for tid, p in nest.SPLITTER.get("taken", [])]
        nest.SPLITTER["ctx"].deliver(results)
        assert done()


def test_once_asked_a_leaf_runs_its_last_entry_with_a_horizon_of_its_own():
    """After a thief's first request, the deque's last entry runs with its own
    ``HORIZON`` levels of entries (``_horizon_of_last``), so a thief that asks deep
    in the run finds whole calls on the deque. Under the task's horizon alone the
    leaf that ran its last entry held nothing until it ended: the split was owed
    and paid from a poll's spawns (fib 32 on 2 leaves: 19-30 splits in slow jobs,
    122-201 ms against 121-136 ms)."""
    from dac.serialize import loads
    from dac.stealable import StealableContext
    from dac.task_call import TaskCall
    nest.SPLITTER.clear()
    ctx = nest.SPLITTER["ctx"] = _warm(StealableContext(_PaysBinary()))
    at = (1, 200)
    assert ctx.run_task(spawn_function(nest.binary_asked), (10, at), {}, 0, False) \
        == 1024         # (the thieves' leaves counted in: their results came back)
    # the first request takes the top band's oldest half (the calls 9 and 8 deep);
    # the leaf then runs 256 leaves: 64 under its path, 64 in the entry 6 deep, and
    # the last entry (7 deep) from the 129th: the second request, at the 200th,
    # takes the oldest half of that entry's own band (before: none, owed, never paid
    # in this run of plain calls)
    assert nest.SPLITTER["sizes"] == [2, 2]
    assert [TaskCall(*loads(p)).args[0] for _, p in nest.SPLITTER["taken"]] == [9, 8, 5, 4]
    assert ctx.owed == 0 and not ctx.stolen


def test_a_sync_that_raises_runs_its_other_calls_first():
    """A ``sync`` whose call raised runs its other calls still on the deque before the
    exception goes up (the first one raised), as plain Python had run the calls
    before the one that raised. Left on the deque, they ran at the caller's scope
    end, and one that raised again escaped the caller's ``try``."""
    from dac.stealable import StealableContext
    ctx = _warm(StealableContext(_Worker()))
    log: list = []
    assert ctx.run_task(spawn_function(nest.catches_its_sync), (log,), {}, 0, False) == \
        "call 2 failed"                 # (the newest entry runs first)
    assert log == [2, 1] and not ctx.deque
    log.clear()
    assert nest.catches_its_sync(log) == "call 1 failed" and log == [1]   # the elision
    # and the frame that caught it goes on at its own level, in its own scope: the
    # entries that raised left theirs (a level each) to the task's end
    nest.SPLITTER.clear()
    ctx = nest.SPLITTER["ctx"] = _warm(StealableContext(_Worker()))
    before, after = ctx.run_task(spawn_function(nest.level_around_a_catch), (log,), {},
                                 0, False)
    assert after == before
