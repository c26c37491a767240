"""Large buffers travel beside a message's pickle stream (``stealing.transport.frames``)
and beside a task's payload (``dac.serialize.dumps``): a NumPy array is sent from its
own memory and used where it was received, in a run's tasks and results too."""

from __future__ import annotations

import numpy as np
import programs  # noqa: F401  (the tests' path)
import pytest

import dac
from dac.serialize import dumps, loads
from stealing.transport import frames
from stealing.transport.mpi import init_mpi


def test_a_payload_keeps_large_buffers_out_of_its_stream():
    big, small = np.arange(frames.OOB_MIN // 8 + 1.0), np.arange(10.0)
    blob = dumps({"big": big, "small": small}, "test")
    assert type(blob) is tuple and len(blob) == 2          # the stream, one buffer
    assert len(blob[0]) < 1000                             # the big array is not in it
    back = loads(blob)
    assert np.array_equal(back["big"], big) and np.array_equal(back["small"], small)
    assert type(dumps(small, "test")) is bytes             # nothing large: one stream


def test_a_message_sends_its_large_buffers_apart_and_receives_them_in_place():
    MPI = init_mpi()
    comm = MPI.COMM_SELF
    big = np.arange(200_000.0)                             # 1.6 MB
    out = frames.isend(MPI, comm, ("TASKS", [(1, big)], np.arange(3)), 0, 7)
    status = MPI.Status()
    msg = comm.improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
    assert status.Get_tag() == 7 + frames.OOB_TAG          # buffers follow it
    tag, (name, tasks, small) = frames.receive(MPI, comm, msg, status)
    out.Wait()
    got = tasks[0][1]
    assert (tag, name) == (7, "TASKS") and np.array_equal(got, big)
    owner = got
    while isinstance(owner, np.ndarray):
        owner = owner.base
    if isinstance(owner, memoryview):
        owner = owner.obj
    assert type(owner) is bytearray and got.flags.writeable   # used where it landed
    assert list(small) == [0, 1, 2]
    out = frames.isend(MPI, comm, {"x": 1}, 0, 8)          # no large buffer: one message
    msg = comm.improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
    assert status.Get_tag() == 8
    assert frames.receive(MPI, comm, msg, status) == (8, {"x": 1})
    out.Wait()


@dac.spawn
def doubled_sum(a):
    if len(a) <= 100_000:
        a *= 2                          # the argument arrived writable
        return a
    h = len(a) // 2
    left, right = dac.sync(doubled_sum(a[:h]), doubled_sum(a[h:]))
    return np.concatenate([left, right])


@pytest.mark.parametrize("procs, thesis", [(2, False), (4, True)])
def test_arrays_go_through_leaves_and_routers_whole(procs, thesis):
    a = np.arange(1_600_000.0)                             # 12.8 MB, split 16 ways
    extra = {"branches": 2, "min_procs": 2} if thesis else {}
    report = dac.run_report(doubled_sum, a, procs=procs, **extra)
    assert np.array_equal(report.result, 2 * np.arange(1_600_000.0))
    assert np.array_equal(a, np.arange(1_600_000.0))       # the root's copy untouched
    if thesis:
        assert [p["role"] for p in report.stats["processes"]].count("router") == 2
    assert report.stats["split_tasks"] >= 1                # pieces moved between leaves
