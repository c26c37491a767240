"""A leaf serves its tasks on a fresh stretch of the interpreter's frame stack
(``stealing.host.stack.on_fresh_stack``), so a recursion that goes up and down across
the end of one of CPython's 16 KiB frame chunks does not map and unmap a chunk at each
crossing (fib 30 on 2 leaves took 3.4-4.0 s with it, 1.8 s without)."""

import sys

import programs
import pytest

import dac
from stealing.host.stack import on_fresh_stack

N = 200


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="3.13+ keep a spare chunk")
def test_a_recursion_across_a_chunks_end_faults_at_each_crossing_without_it():
    assert programs.chunk_faults(400, N) >= N


def test_on_a_fresh_stack_no_recursion_crosses_a_chunks_end():
    assert on_fresh_stack(programs.chunk_faults, 400, N) < N // 4
    assert on_fresh_stack(lambda a, b=1: (a, b), 2, b=3) == (2, 3)


def test_a_leaf_runs_its_task_on_a_fresh_stack():
    report = dac.run_report(programs.chunk_faults_in_a_task, 400, N, procs=1)
    assert report.result < N // 4


@pytest.mark.skipif(sys.version_info < (3, 11), reason="frames are objects before 3.11")
def test_the_serial_elision_runs_a_long_top_call_on_a_fresh_stack():
    """Outside ``run`` too: UTS T3's elision mapped and unmapped 316,000 chunks and
    took 10.2-10.9 s, 7.5 s on a fresh stack. A top call that took under
    ``FRESH_STACK_S`` leaves the function's next one where it is (the chunk costs
    about 14 us a call)."""
    assert programs.chunk_faults_in_a_task(400, N) < N // 4       # no run: the elision
    from dac.context import FRESH_STACK_S
    assert programs.fresh_stack_now(2 * FRESH_STACK_S)      # a first call: fresh
    assert programs.fresh_stack_now(0)                      # the last one was long
    assert not programs.fresh_stack_now(2 * FRESH_STACK_S)  # ... short: in place
    assert programs.fresh_stack_now(0)                      # ... long: fresh
    assert dac.run(programs.fresh_stack_now, 0, procs=1)    # (a leaf serves on one)
