"""Ctrl-C after MPI_Comm_spawn returned, while the root sends its new processes their
INIT: the interrupt lands as the root introduces child ``K`` (0: the first). With
``kill``, the root is killed there instead (SIGKILL: no cleanup at all).

    python cut_introductions.py LEAVES K [kill]
"""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dac  # noqa: E402
from stealing.roles import node  # noqa: E402

if __name__ == "__main__":
    leaves, cut = int(sys.argv[1]), int(sys.argv[2])
    kill = sys.argv[3:] == ["kill"]
    introduce, seen = node.Node._introduce, []

    def interrupted(self, *args, **kwargs):
        if len(seen) == cut:
            if kill:
                print("killed", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            raise KeyboardInterrupt         # as a Ctrl-C landing here would
        seen.append(args)
        return introduce(self, *args, **kwargs)

    node.Node._introduce = interrupted
    began = time.monotonic()
    try:
        dac.Runtime(procs=leaves, progress=False).start()
    except KeyboardInterrupt:
        print(f"interrupted; stopped in {time.monotonic() - began:.1f} s", flush=True)
        sys.exit(130)
    print("not interrupted", flush=True)
