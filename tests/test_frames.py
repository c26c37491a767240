"""Large buffers travel beside a message's pickle stream (``stealing.transport.frames``)
and beside a task's payload (``dac.serialize.dumps``): a NumPy array is sent from its
own memory and used where it was received, in a run's tasks and results too."""

from __future__ import annotations

import errno
import os
import pickle
import subprocess

import numpy as np
import programs  # noqa: F401  (the tests' path)
import pytest

import dac
from dac.serialize import dumps, loads
from stealing.transport import frames, segments
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


# --- shared memory between processes of one host (stealing.transport.segments) ---------
def _send_and_take(MPI, obj, segments=None):
    """``obj`` sent to this process itself and received: (table of its buffers, object)."""
    comm = MPI.COMM_SELF
    out = frames.isend(MPI, comm, obj, 0, 9, segments)
    status = MPI.Status()
    msg = comm.improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
    tag, got = frames.receive(MPI, comm, msg, status)
    out.Wait()
    assert tag == 9
    return out.keep[0], got


def _dac_files():
    return sorted(n for n in os.listdir(segments.FOLDER) if n.startswith("dac-"))


def _owner(a):
    while isinstance(a, np.ndarray):
        a = a.base
    return a


def test_a_large_buffer_goes_by_shared_memory_and_is_mapped_copy_on_write():
    MPI = init_mpi()
    made = segments.Segments(os.getpid())
    big = np.arange(segments.SHM_MIN // 8 * 2.0)                 # 2 MB: a segment
    mid = np.arange(frames.OOB_MIN // 8 * 2.0)                   # 128 KB: over MPI
    head, (name, payload) = _send_and_take(MPI, ("TASK", dumps((big, mid), "test")), made)
    assert made.made == 1 and len(_dac_files()) == 1            # one file, for big
    seg = _dac_files()[0]
    assert seg.startswith(f"dac-{os.getuid()}-{os.getpid()}-{os.getpid()}-")
    assert os.stat(os.path.join(segments.FOLDER, seg)).st_mode & 0o777 == 0o600
    assert seg.encode() in head                                 # the message names it
    file = open(os.path.join(segments.FOLDER, seg), "rb")      # what other processes see
    parts = payload[1:]
    assert [type(p) for p in parts] == [memoryview, memoryview]
    assert segments.segment_of(parts[0]) == seg and segments.segment_of(parts[1]) is None
    got_big, got_mid = loads(payload)
    assert _dac_files() == []                   # unpickled where it was going: removed
    assert np.array_equal(got_big, big) and np.array_equal(got_mid, mid)
    assert type(_owner(got_big).obj) is segments.Mapping and got_big.flags.writeable
    got_big[0] = -1.0                           # copy-on-write: the writer's own page
    with file:
        assert np.frombuffer(file.read(8), np.float64)[0] == 0.0
    again = segments.open_segment(seg, big.nbytes)      # (still mapped here: by name)
    assert np.frombuffer(again, np.float64)[0] == -1.0
    del again, parts, payload, got_big
    assert type(segments.open_segment(seg, big.nbytes)) is segments.Gone    # gone now


def test_a_received_segment_is_passed_on_by_its_name_and_to_another_host_by_mpi():
    MPI = init_mpi()
    made = segments.Segments(os.getpid())
    big = np.arange(segments.SHM_MIN // 8 * 2.0)
    _, (_, payload) = _send_and_take(MPI, ("TASK", dumps(big, "test")), made)
    first = _dac_files()
    head, (_, passed) = _send_and_take(MPI, ("TASK", payload), made)  # a router's hop
    assert made.made == 1 and _dac_files() == first             # the same file, no copy
    assert segments.segment_of(passed[1]) == first[0]
    head, (_, away) = _send_and_take(MPI, ("TASK", passed), None)   # to another host
    assert len(head) < 1000                     # out of band (it was copied in the stream)
    assert segments.segment_of(away[1]) is None and type(away[1].obj) is bytearray
    assert np.array_equal(loads(away), big)
    assert _dac_files() == first            # (that copy was not the segment's)
    assert np.array_equal(loads(passed), big) and _dac_files() == []
    inline = frames.dumps_parts(("RESULTS", passed))          # a warm tree's socket
    assert np.array_equal(loads(pickle.loads(inline)[1]), big)


def test_a_full_dev_shm_sends_by_mpi(monkeypatch):
    MPI = init_mpi()
    made = segments.Segments(os.getpid())

    def no_space(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(segments.os, "write", no_space)
    big = np.arange(segments.SHM_MIN // 8 * 2.0)
    _, (_, payload) = _send_and_take(MPI, ("TASK", dumps(big, "test")), made)
    assert made.broken and _dac_files() == []         # tried once, removed, then MPI
    assert type(payload[1].obj) is bytearray and np.array_equal(loads(payload), big)


def test_a_segment_that_is_not_a_private_file_of_this_user_is_refused(tmp_path):
    """Another user cannot make a process map a file of theirs (or follow a link to one)
    as a task's buffer: the name, the owner, the mode and the size are checked."""
    size = segments.SHM_MIN
    name = f"dac-{os.getuid()}-{os.getpid()}-1-00ff-0"
    path = os.path.join(segments.FOLDER, name)
    try:
        with open(path, "wb") as f:
            f.write(b"x" * size)
        os.chmod(path, 0o644)                   # others may read it: not dac's
        gone = segments.open_segment(name, size)
        assert type(gone) is segments.Gone and "not a private file" in gone.why
        os.chmod(path, 0o600)
        assert type(segments.open_segment(name, size - 1)) is segments.Gone  # wrong size
        os.unlink(path)
        os.symlink(str(tmp_path / "elsewhere"), path)           # a link: never followed
        assert type(segments.open_segment(name, size)) is segments.Gone
    finally:
        if os.path.lexists(path):
            os.unlink(path)
    gone = segments.open_segment("../../etc/passwd", size)
    assert type(gone) is segments.Gone and "not a segment name" in gone.why
    with pytest.raises(dac.SerializationError, match="shared memory that is gone"):
        loads((b"", gone))


def test_sweep_removes_the_segments_of_a_tree_and_of_roots_that_are_gone():
    dead = _a_dead_pid()
    names = [f"dac-{os.getuid()}-{os.getpid()}-2-ab-0", f"dac-{os.getuid()}-{dead}-2-ab-0",
             f"dac-{os.getuid()}-1-2-ab-0"]          # pid 1 runs: not swept as gone
    for n in names:
        with open(os.path.join(segments.FOLDER, n), "wb"):
            pass
    try:
        assert segments.sweep() == 1 and _dac_files() == sorted([names[0], names[2]])
        assert segments.sweep(os.getpid()) == 1 and _dac_files() == [names[2]]
    finally:
        for n in names:
            if os.path.exists(os.path.join(segments.FOLDER, n)):
                os.unlink(os.path.join(segments.FOLDER, n))


def _a_dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_a_run_moves_arrays_by_shared_memory_and_leaves_no_segment():
    a = np.arange(4_000_000.0)                             # 32 MB, split 32 ways
    report = dac.run_report(doubled_sum, a, procs=2)
    assert np.array_equal(report.result, 2 * np.arange(4_000_000.0))
    assert np.array_equal(a, np.arange(4_000_000.0))       # the root's copy untouched
    assert report.stats["split_tasks"] >= 1
    assert _dac_files() == []
