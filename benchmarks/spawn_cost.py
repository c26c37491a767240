"""What a spawn costs inside a leaf's task, in nanoseconds, against the serial elision.

A leaf runs its task in a ``dac.stealable.StealableContext``: a ``@spawn`` call is a
deque *entry* near the top of the task (so that thieves find the shallowest calls;
here the task's top makes every call), and a plain call below (``HORIZON`` levels
down). This measures both in this process, with a stand-in for the leaf's worker (no
MPI, nothing stolen: the cost of the bookkeeping only), beside the same code outside
``dac.run``:

  call         ``f(i)`` spawned and dropped by the task's top call (entries pile up
               on the deque and run at the task's implicit sync)
  call+sync    ``f(i)`` spawned, then ``sync()`` and ``.result()`` (an entry's whole
               life: pushed, popped by sync, run as a scope)
  plain call   ``f(i)`` spawned and dropped by a call ``HORIZON`` levels below the
               task's top (a plain call: each crosses to the serial context below
               the horizon and back; a recursion crosses once a subtree, as its
               clone runs below)
  UTS          examples/uts.py on a small binomial tree (6231 nodes): the ratio of the
               leaf's time to the elision's, per node
  promotion    an entry made a task for a thief (its call pickled, as a split does)
  over plain   the elision against plain Python: a spawn over a plain call, and two
               spawns and ``sync(a, b)`` over two plain calls, per spawn

Best of --repeat runs for every figure. Every side runs on a fresh stretch of the
interpreter's frame stack, as a leaf serves (``stealing.host.stack``): a recursion at
the end of one of CPython's frame chunks is slower on one side only otherwise.

Run:  python benchmarks/spawn_cost.py
      python benchmarks/spawn_cost.py --calls 100000 --repeat 3 --json
Exit status: 0 (figures are reported, not asserted).
"""

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples")]

import uts  # noqa: E402

import dac  # noqa: E402
from dac import context  # noqa: E402
from dac.spawn import spawn_function  # noqa: E402
from dac.stealable import EVERY, HORIZON, StealableContext  # noqa: E402
from stealing.host.stack import on_fresh_stack  # noqa: E402


@dac.spawn
def ident(x):
    return x


@dac.spawn
def calls(n):
    for i in range(n):
        ident(i)
    return 0


@dac.spawn
def calls_below(n, levels):
    """``calls(n)``'s loop, ``levels`` calls down."""
    if levels:
        return dac.sync(calls_below(n, levels - 1))
    for i in range(n):
        ident(i)
    return 0


@dac.spawn
def calls_and_syncs(n):
    for i in range(n):
        f = ident(i)
        dac.sync()
        f.result()
    return 0


def plain_ident(x):
    return x


def plain_calls(n):
    for i in range(n):
        plain_ident(i)
    return 0


def plain_pairs(n):
    total = 0
    for i in range(n):
        a, b = plain_ident(i), plain_ident(i)
        total += a - b
    return total


@dac.spawn
def pairs(n):
    total = 0
    for i in range(n):
        a, b = dac.sync(ident(i), ident(i))
        total += a - b
    return total


def over_plain(repeat, n):
    """ns a spawn over a plain call in the serial elision: ``ident(i)`` spawned and
    dropped against ``plain_ident(i)``, and two spawns synced together
    (``a, b = sync(ident(i), ident(i))``, as a binary recursion does) against two
    plain calls, per spawn."""
    rows = {}
    for name, plain, f, per in (("spawn", plain_calls, calls, 1),
                                ("spawn+sync", plain_pairs, pairs, 2)):
        base = best(repeat, on_fresh_stack, plain, n)
        spawned = best(repeat, on_fresh_stack, context.run_serially, spawn_function(f),
                       (n,), {})
        rows[name] = (spawned - base) / (n * per) * 1e9
    return rows


class StandIn:
    """The leaf as the executor sees it (stealing.roles.executor.Worker), with nothing to
    read and nobody stealing."""

    path, owed = (0,), 0

    def poll(self):
        pass

    def wait(self, done):
        raise AssertionError("nothing was stolen")

    def offer(self, tasks):
        raise AssertionError("nobody asked")


def best(repeat, fn, *args):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times)


def in_leaf(f, args):
    """``f(*args)`` (``f`` a ``@spawn`` function) as a leaf runs a task (on a fresh
    stack, as a leaf serves)."""
    ctx = StealableContext(StandIn())
    return on_fresh_stack(ctx.run_task, spawn_function(f), args, {}, 0, False)


def promotion_ns(repeat, n):
    """What turning one entry into a task for a thief costs (``_take``: the call
    pickled with its arguments, as a split answers), in ns: ``n`` entries of
    ``ident(i)`` pushed on a leaf that owes a thief, then split off half by half."""
    times = []
    for _ in range(repeat):
        ctx = StealableContext(StandIn())
        ctx.horizon = EVERY                 # every spawn an entry (a leaf owing a thief)
        saved = context.current()
        context.set_current(ctx)
        try:
            for i in range(n):
                ident(i)
        finally:
            context.set_current(saved)
        taken = 0
        t0 = time.perf_counter()
        while ctx.deque:
            taken += len(ctx._take(n))
        times.append((time.perf_counter() - t0) / taken)
    return min(times) * 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    n = args.calls
    rows = {}
    for name, f, fargs in (("call", calls, (n,)), ("call+sync", calls_and_syncs, (n,)),
                           ("plain call", calls_below, (n, HORIZON))):
        serial = best(args.repeat, on_fresh_stack, context.run_serially,
                      spawn_function(f), fargs, {})
        leaf = best(args.repeat, in_leaf, f, fargs)
        rows[name] = {"elision": serial / n * 1e9, "leaf": leaf / n * 1e9}
    tree = uts.Tree("binomial", 30, 42, q=0.124875, m=8)
    root = uts.rng_init(tree.seed)
    nodes = uts.count_recursive(tree)[0]
    serial = best(args.repeat, on_fresh_stack, uts.count_recursive, tree)
    leaf = best(args.repeat, in_leaf, uts.uts, (tree, root, 0))
    rows["UTS node"] = {"elision": serial / nodes * 1e9, "leaf": leaf / nodes * 1e9}
    print(f"ns per spawn inside a leaf's task (best of {args.repeat}; {n} calls, UTS: "
          f"{nodes} nodes); in brackets the extra over the elision")
    print(f"{'':10s} {'elision':>9s} {'in a leaf':>18s}")
    for name, r in rows.items():
        e = r["elision"]
        print(f"{name:10s} {e:9.0f} {r['leaf']:9.0f} ({r['leaf'] - e:+5.0f})")
    rows["over plain"] = over_plain(args.repeat, n)
    print(f"the elision over plain Python: a spawn {rows['over plain']['spawn']:.0f} ns "
          f"over a plain call; two spawns and their sync "
          f"{rows['over plain']['spawn+sync']:.0f} ns a spawn over two plain calls")
    rows["promotion"] = {"ns": promotion_ns(args.repeat, min(n, 20000))}
    print(f"a promotion (an entry made a task for a thief: its call pickled): "
          f"{rows['promotion']['ns']:.0f} ns")
    u = rows["UTS node"]
    print(f"UTS in a leaf: {u['leaf'] / u['elision']:.2f}x the elision")
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
