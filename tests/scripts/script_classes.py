"""Classes and functions of the script as task arguments and results; prints what came
back.

    python script_classes.py

Here ``__main__`` is this script, as in a user's program, and the leaves' ``__main__``
is not: ``Box``, ``Pair`` and ``double`` exist in the leaves only if dac sends them.
The ``@spawn`` functions do not name ``Box`` in their code (it is not among their
globals), so only the arguments carry it. Every task runs in a leaf (root_helps off).

Run in a subprocess by the tests (tests/test_hardening.py).
"""

import os
import sys
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))     # this checkout's dac

import dac  # noqa: E402

SCALE = 2


@dataclass
class Box:
    v: int

    def scaled(self):
        return self.v * SCALE


@dataclass
class Pair:
    a: object
    b: object


def double(x):
    return 2 * x


@dac.spawn(depth=2)
def total(n, box):
    """Sum of box.v over the 2**n tasks: the argument is a Box."""
    if n == 0:
        return box.v
    a, b = dac.sync(total(n - 1, box), total(n - 1, box))
    return a + b


@dac.spawn(depth=2)
def collect(n, box):
    """The boxes of the tasks, as a list: every task returns its argument."""
    if n == 0:
        return box
    a, b = dac.sync(collect(n - 1, box), collect(n - 1, type(box)(box.v + n)))
    return (a if isinstance(a, list) else [a]) + (b if isinstance(b, list) else [b])


@dac.spawn(depth=1)
def nest(n, pair):
    """A task returns a list of the boxes inside its Pair argument, nested."""
    if n == 0:
        return [pair.a, [pair.b]]
    a, b = dac.sync(nest(n - 1, pair), nest(n - 1, pair))
    return [a, b]


@dac.spawn(depth=1)
def apply(n, fn, x):
    """A script function as an argument."""
    if n == 0:
        return fn(x)
    a, b = dac.sync(apply(n - 1, fn, x), apply(n - 1, fn, x + 1))
    return a + b


def main():
    init = Box.__init__
    opts = dict(procs=2, root_helps=False)
    print("total", dac.run(total, 3, Box(5), **opts), flush=True)
    boxes = dac.run(collect, 2, Box(1), **opts)
    print("collect", boxes, all(isinstance(b, Box) for b in boxes), flush=True)
    with dac.Runtime(**opts) as rt:
        out = rt.run(nest, 1, Pair(Box(1), Box(2)))
        inner = out[0][1][0]
        print("nest", out, isinstance(inner, Box), flush=True)
        print("apply", rt.run(apply, 1, double, 10), flush=True)      # a second job
    # the root's class is its own and untouched: no copy replaced its methods
    global SCALE
    SCALE = 3
    print("root class", Box.__init__ is init, Box(1).scaled(), flush=True)


if __name__ == "__main__":
    main()
