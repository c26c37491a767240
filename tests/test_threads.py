"""dac from several threads of one process: never a wrong answer, never a hang.

MPI and a process tree are driven by one thread at a time (runs are served one after
the other); the context that decides what a ``@spawn`` call does belongs to its thread.
"""

import threading
import time

import programs

import dac


def in_threads(count, target):
    """Runs ``target(i)`` in ``count`` threads at once; returns ``{i: value or error}``."""
    out = {}
    start = threading.Barrier(count)

    def body(i):
        start.wait()
        try:
            out[i] = target(i)
        except BaseException as exc:            # noqa: BLE001 - the test looks at it
            out[i] = exc

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return out


def test_one_runtime_used_from_four_threads_at_once():
    with dac.Runtime(procs=2) as rt:
        out = in_threads(4, lambda i: [rt.run(programs.fib, 18 + i % 2) for _ in range(3)])
    assert out == {0: [2584] * 3, 1: [4181] * 3, 2: [2584] * 3, 3: [4181] * 3}


def test_separate_runs_from_two_threads_at_once():
    out = in_threads(2, lambda i: dac.run(programs.fib, 16 + i, procs=2))
    assert out == {0: 987, 1: 1597}


@dac.spawn(depth=1)
def leaf_value(i):
    return i


@dac.spawn
def slow_top(n):
    """Spends its time above the spawn depth, on the root, between its spawns."""
    futures = []
    for i in range(n):
        time.sleep(0.02)
        futures.append(leaf_value(i))
    return sum(dac.sync(*futures))


def test_serial_calls_in_one_thread_while_another_runs():
    # a @spawn function called outside run is plain serial Python, whatever another
    # thread of the process is doing with dac at the same time
    stop = threading.Event()

    def target(i):
        if i == 0:
            try:
                return [dac.run(slow_top, 20, procs=2) for _ in range(2)]
            finally:
                stop.set()
        values = set()
        while not stop.is_set():
            values.add(programs.fib(12))
        return values

    out = in_threads(2, target)
    assert out == {0: [190] * 2, 1: {144}}
