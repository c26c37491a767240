"""A task that raises on a known line of this file (the test reads the line back)."""

import dac
from dac import spawn, sync


@spawn(depth=1)
def check(i):
    if i == 3:
        raise ValueError(f"bad item {i}")  # THE FAILING LINE
    return i


@spawn(depth=1)
def all_of(n):
    return sum(sync([check(i) for i in range(n)]))


if __name__ == "__main__":
    dac.run(all_of, 6, procs=2, root_helps=False)
