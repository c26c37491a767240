"""A run, then ``os.fork()``: the child tries a run of its own (it must be refused with
a clear error, touching nothing of the parent's), then the parent runs again.

    python fork_after_run.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import programs  # noqa: E402

import dac  # noqa: E402

print("parent", dac.run(programs.fib, 15, procs=2), flush=True)
with dac.Runtime(procs=2) as rt:
    print("kept", rt.run(programs.fib, 12), flush=True)
    child = os.fork()
    if child == 0:
        try:
            dac.run(programs.fib, 10, procs=2)
            print("child ran", flush=True)
        except dac.DacError as exc:
            print("child refused:", exc, flush=True)
        os._exit(0) if "--hard" in sys.argv else sys.exit(0)
    os.waitpid(child, 0)
    print("kept again", rt.run(programs.fib, 13), flush=True)
print("parent again", dac.run(programs.fib, 16, procs=2), flush=True)
