"""A task that ends the program the way a serial script would: ``sys.exit(3)`` or
``raise KeyboardInterrupt``, at a given depth of the recursion (0: the top frame, on
the root; 2 and 3: tasks on the leaves, 3 below a spawn inside a leaf's task).

    python exiting_task.py exit|interrupt DEPTH
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dac  # noqa: E402


@dac.spawn(depth=2)
def walk(depth, where, what):
    if depth == where:
        if what == "exit":
            sys.exit(3)
        raise KeyboardInterrupt
    if depth == 4:
        return 1
    return sum(dac.sync([walk(depth + 1, where, what) for _ in range(2)]))


if __name__ == "__main__":
    what, where = sys.argv[1], int(sys.argv[2])
    print("total", dac.run(walk, 0, where, what, procs=2))
    print("not reached")
