"""Tasks that print: ``LINES`` tasks on 2 leaves, each printing one numbered line
(to stdout, or to stderr for every tenth), with a partial write before the newline so a
line is made of several writes. The root prints nothing while they run.

    python task_prints.py [LINES]
"""

import sys

import dac
from dac import spawn, sync


@spawn(depth=1)
def shout(i):
    out = sys.stderr if i % 10 == 0 else sys.stdout
    out.write(f"line {i:04d} ")
    out.write("x" * (i % 50))
    print(" end", file=out)
    return 1


@spawn(depth=1)
def many(n):
    return sum(sync([shout(i) for i in range(n)]))


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    total = dac.run(many, n, procs=2, root_helps=False)
    print(f"total {total}", file=sys.stderr)
