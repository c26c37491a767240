"""Hardening: script classes as data, bounds on what a run may ask for, and messages that
say what went wrong (deep tracebacks, results that do not unpickle, MemoryError), and
the root's memory across many runs."""

import os
import sys

import pytest

from proctools import finish, launch, new_tag, wait_for_no_processes

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")


def run_script(name, *args, timeout=120):
    """Runs tests/scripts/NAME in its own session; returns (code, stdout, stderr, tag)."""
    tag = new_tag()
    proc = launch([sys.executable, os.path.join(SCRIPTS, name), *map(str, args)], tag)
    code, out, err, _seconds = finish(proc, timeout)
    return code, out, err, tag


# --- classes and functions of the user's script ------------------------------------------
def test_script_classes_travel_as_arguments_and_come_back_as_the_roots_own():
    code, out, err, tag = run_script("script_classes.py")
    assert wait_for_no_processes(tag, timeout=5) == {}
    assert code == 0, f"exit code {code}, stderr {err[-1500:]!r}"
    assert out.splitlines() == [
        "total 40",                                 # 8 tasks, each got Box(5)
        "collect [Box(v=1), Box(v=2), Box(v=3), Box(v=4)] True",
        "nest [[Box(v=1), [Box(v=2)]], [Box(v=1), [Box(v=2)]]] True",
        "apply 42",                                 # double(10) + double(11)
        "root class True 3",                        # not replaced by a copy
    ]
