"""Doorbells (stealing.transport.bell): a waiting process sleeps until a message is on its way."""

import os
import threading
import time

import programs

import dac
from stealing.transport.bell import Bell, bell_name, ring


def test_bell_names_follow_the_tree():
    assert bell_name(42, ()) == b"\0dac-bell-42-root"
    assert bell_name(42, (0, 2, 1)) == b"\0dac-bell-42-0.2.1"


def test_a_ring_wakes_a_sleeping_bell_at_once():
    name = bell_name(os.getpid(), (99, 7))
    bell = Bell(name)
    try:
        assert bell.sleep(0.0) is False
        threading.Timer(0.05, ring, (name,)).start()
        t0 = time.monotonic()
        assert bell.sleep(5.0) is True
        assert time.monotonic() - t0 < 2.0
        for _ in range(3):                  # rings pile up; one sleep takes them all
            ring(name)
        assert bell.sleep(0.0) is True and bell.sleep(0.0) is False
        assert Bell.open(name) is None      # the name is taken while it lives
    finally:
        bell.close()
    ring(name)                              # nobody there: dropped, no error
    Bell(name).close()                      # and the name is free again


def abstract_sockets() -> set:
    with open("/proc/net/unix") as f:
        return {line.split()[-1] for line in f if line.split()[-1].startswith("@")}


def test_the_root_and_every_process_of_a_tree_on_this_host_have_a_bell():
    with dac.Runtime(procs=4, branches=2, min_procs=2) as rt:
        assert rt.run(programs.fib, 15) == 610
        node = rt.scheduler.node
        assert node.mailbox.bell is not None
        names = {n for n in abstract_sockets() if n.startswith(f"@dac-bell-{os.getpid()}-")}
        paths = {n.rsplit("-", 1)[1] for n in names}
        # root, its 2 routers, their 2 leaves each
        assert paths == {"root", "0", "1", "0.0", "0.1", "1.0", "1.1"}
        assert len(node.mailbox._ring_to) == 2          # the root rings its routers


def test_a_leaf_waiting_for_stolen_work_sleeps_until_rung():
    """A leaf waiting at ``sync`` for a call another leaf stole probed every
    millisecond (the longest sleep while work is under way), and so did every leaf
    waiting for an answer: 128 leaves on a 14 s run burnt 0.2 CPU-s each and filled
    both cores. A leaf whose parent rings its bell now sleeps up to 50 ms
    (``RUNG_SLEEP``) between probes: about 20 wakes a second, plus the few of the
    backoff after each message."""
    report = dac.run_report(programs.waits_for_stolen, 1.5, procs=2)
    assert report.result == 1.5
    assert report.stats["split_given"] == report.stats["split_tasks"] == 1
    leaves = [p for p in report.stats["processes"] if p["role"] == "leaf"]
    top = [p for p in leaves if p["tasks"] == 1 and p["split_tasks"] == 0]
    assert len(top) == 1
    assert top[0]["wakes"] < 300, top      # at 1 ms: more than 1000 in 1.2 s


def test_the_root_waiting_for_its_leaves_sleeps_until_rung():
    """The root (and a router) waited on its children's links probing every
    millisecond, though children of its host ring its bell after every send: 128
    leaves' root woke 2,700 times in a 6 s job (14% of a core). It now sleeps up to
    50 ms between probes there too."""
    with dac.Runtime(procs=2) as rt:
        assert rt.run(programs.fib, 10) == 55
        mailbox = rt.scheduler.node.mailbox
        before = mailbox.sleeps
        assert rt.run(programs.waits_for_stolen, 1.5) == 1.5
        slept = mailbox.sleeps - before
    assert slept < 300, slept           # at 1 ms: more than 1000 in 1.5 s


def test_a_later_tree_in_the_same_process_has_its_doorbell_too():
    """The root's bell was never closed: the next tree's root found its name taken,
    had no bell, and probed every millisecond for all its waits."""
    for _ in range(2):
        with dac.Runtime(procs=1) as rt:
            assert rt.run(programs.fib, 10) == 55
            assert rt.scheduler.node.mailbox.bell is not None


def test_one_look_finds_a_message_that_came_while_nobody_probed():
    """MPICH's Improbe matches only what an earlier call's progress took in: a message
    that came while the process slept was found by the second probe, never the first,
    so every wake on a ring cost a second sleep (and a running task's poll on a ring
    found its message 2 ms later). A look now probes twice when the first finds
    nothing (the second look, ``stealing.transport.mailbox``)."""
    import sys

    from mpi4py import MPI

    from stealing.transport.mailbox import Mailbox
    script = os.path.join(os.path.dirname(__file__), "scripts", "mpi_sender.py")
    child = MPI.COMM_SELF.Spawn(sys.executable, [script], 1)
    try:
        time.sleep(0.5)                     # the message is there; nobody probed
        got = Mailbox(MPI).poll([child])
        assert got is not None and got[2:] == (5, "hello"), got
    finally:
        child.send("bye", 0, 6)
        child.Disconnect()


class _Quiet:
    """A link with nothing to read (``Mailbox.wait`` only probes it)."""

    def improbe(self, source, tag, status):
        return None


def _sleeps_of_a_quiet_wait(path, timeout, **flags):
    """How many times a wait on one ringing link that never gets a message sleeps
    in ``timeout`` seconds, with the mailbox's ``flags`` (``crowded``, ``ring_waits``)
    set; its bell is at ``path``."""
    from mpi4py import MPI

    from stealing.transport import mailbox as M
    mb = M.Mailbox(MPI)
    mb.bell = Bell(bell_name(os.getpid(), path))
    link = _Quiet()
    mb._rung.add(id(link))
    for name, value in flags.items():
        setattr(mb, name, value)
    try:
        assert mb.wait([link], timeout=timeout) is None
    finally:
        mb.bell.close()
    return mb.sleeps


def test_a_crowded_wait_sleeps_until_a_ring_from_its_start():
    """With more leaves than cores every wake-up takes CPU from a task: a wait on
    links that all ring sleeps until a ring from its start (at most
    ``RUNG_IDLE_SLEEP``) instead of probing from 20 us up; elsewhere it still probes
    from 20 us."""
    from stealing.transport import mailbox as M
    for crowded, most in ((True, 3), (False, 100)):
        sleeps = _sleeps_of_a_quiet_wait((98, 1), 0.1, crowded=crowded)
        assert (sleeps <= most) and (crowded or sleeps >= 8), (crowded, sleeps)
    assert M.crowded(2 * (os.cpu_count() or 1)) and not M.crowded(1)


def test_a_crowded_wait_wakes_once_a_second_under_a_lost_ring():
    """A crowded wait whose links all ring has a net of ``RUNG_IDLE_SLEEP`` under a
    lost ring from its first sleep: a leaf waiting 1.6 s for work sleeps twice, not
    32 times (probing every 50 ms), nor 5 or 6 (a net doubling from 50 ms: on 256
    leaves on 2 cores, 5,517 of a job's 12,613 wakes of the leaves were such nets
    running out, each the wake of a process that then found nothing to do)."""
    sleeps = _sleeps_of_a_quiet_wait((98, 2), 1.6, crowded=True)
    assert sleeps == 2, sleeps


def test_a_root_or_router_waits_for_rings_on_any_host():
    """A root or router (``ring_waits``) runs no task: on links that all ring it
    sleeps until a ring from its start even where the leaves fit the cores, and its
    net under a lost ring stays ``RUNG_SLEEP`` (a crowded wait's is a second).
    Probing from 20 us, the 2-leaf comb's root woke about 5 times a message."""
    sleeps = _sleeps_of_a_quiet_wait((98, 3), 0.26, ring_waits=True)
    assert 5 <= sleeps <= 7, sleeps             # 50 ms apart, not doubling
