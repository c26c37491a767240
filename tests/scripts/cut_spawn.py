"""Ctrl-C while the tree is being spawned: the interrupt reaches Python when
MPI_Comm_spawn returns, before the tree knows its new processes.

    python cut_spawn.py LEAVES DELAY_S
"""

import _thread
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dac  # noqa: E402

if __name__ == "__main__":
    leaves, delay = int(sys.argv[1]), float(sys.argv[2])
    threading.Timer(delay, _thread.interrupt_main).start()
    try:
        dac.Runtime(procs=leaves, progress=False).start()
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
    print("not interrupted in time", flush=True)
