"""Unbalanced Tree Search (UTS): count the nodes of an implicit, very unbalanced tree.

    python examples/uts.py T3                # binomial: 4,112,897 nodes, depth 1572
    python examples/uts.py T1 --procs 2      # geometric: 4,130,071 nodes, depth 10
    python examples/uts.py T3 --serial       # the sequential loop only, no MPI
    python examples/uts.py --list            # the named trees and their published sizes

UTS (Olivier, Huan, Liu, Prins, Dinan, Sadayappan, Tseng, LCPC 2006) is the standard
benchmark for irregular recursion: the tree exists only as a rule, each node's children
are derived from its 20-byte SHA-1 state, so no one knows a subtree's size before
walking it. A static split of the top of the recursion is unbalanced by design (most
of T3's 2000 root subtrees are single leaves, a few hold nearly all its nodes), which is
what dynamic load balancing must handle.

Everything below follows the reference implementation (``uts.c``, ``rng/brg_sha1.c``)
bit for bit, so the published sizes of its sample trees are exact checks:

* root state = SHA1(16 zero bytes || seed as 4 big-endian bytes);
* child ``i``'s state = SHA1(parent state || ``i`` as 4 big-endian bytes);
* a node's random value = its state's last 4 bytes (big-endian) masked to 31 bits, and
  its probability = value / 2**31;
* binomial trees: the root has ``floor(b0)`` children, every other node ``m`` children
  with probability ``q`` (else none); geometric trees: ``floor(log(1-u) / log(1-p))``
  children with ``p = 1 / (1 + b_i)``, ``b_i`` given by the shape function of the
  depth; hybrid trees: geometric above ``shift * gen_mx``, binomial below. No node has
  more than 100 children (except a binomial root).

``count_sequential`` (an explicit stack, no recursion) is the baseline; ``uts`` is the
same count as a ``@dac.spawn`` recursion with one spawn per node: called outside
``dac.run`` it is the serial elision, under ``dac.run`` the root expands its top and the
leaves count the subtrees below. hashlib's SHA-1 is C, so the per-node work is the same
in all three and numba would not help.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from hashlib import sha1

import dac

MAX_CHILDREN = 100          # the reference's MAXNUMCHILDREN (a binomial root is exempt)
_SPAWN = [i.to_bytes(4, "big") for i in range(4096)]    # child numbers, ready to hash


# --- the splittable SHA-1 random number generator (rng/brg_sha1.c) ---------------------
def rng_init(seed: int) -> bytes:
    """The root's state: SHA-1 of 16 zero bytes and the seed (4 bytes, big-endian)."""
    return sha1(bytes(16) + seed.to_bytes(4, "big")).digest()


def rng_spawn(state: bytes, i: int) -> bytes:
    """Child ``i``'s state: SHA-1 of the parent's state and ``i`` (4 bytes, big-endian)."""
    return sha1(state + (_SPAWN[i] if i < len(_SPAWN) else i.to_bytes(4, "big"))).digest()


def rng_rand(state: bytes) -> int:
    """A node's random value: the state's last 4 bytes, big-endian, masked to 31 bits."""
    return int.from_bytes(state[16:20], "big") & 0x7FFFFFFF


def to_prob(value: int) -> float:
    """A random value as a probability in [0, 1) (the reference's ``rng_toProb``)."""
    return value / 2147483648.0


# --- tree shapes (uts.c) ------------------------------------------------------------------
@dataclass(frozen=True)
class Tree:
    """One UTS tree: its kind, parameters and, for the sample trees, published size.

    ``kind`` is ``"binomial"``, ``"geometric"`` or ``"hybrid"``; ``shape`` (geometric
    and hybrid) is ``"linear"``, ``"expdec"``, ``"cyclic"`` or ``"fixed"``; ``gen_mx``
    is the reference's ``-d`` (the depth the shape functions aim at).
    """

    kind: str
    b0: float
    seed: int
    q: float = 15.0 / 64.0
    m: int = 4
    gen_mx: int = 6
    shape: str = "linear"
    shift: float = 0.5
    nodes: int | None = None          # published size, depth and leaves (None: unknown)
    depth: int | None = None
    leaves: int | None = None

    def num_children(self, state: bytes, depth: int) -> int:
        """How many children the node with this state at this depth has."""
        if self.kind == "binomial":
            if depth == 0:
                return int(math.floor(self.b0))   # never over ceil(b0): no truncation
            return min(self._binomial(state), MAX_CHILDREN)
        if self.kind == "hybrid" and depth >= self.shift * self.gen_mx:
            return min(self._binomial(state), MAX_CHILDREN)
        return min(self._geometric(state, depth), MAX_CHILDREN)

    def _binomial(self, state: bytes) -> int:
        return self.m if to_prob(rng_rand(state)) < self.q else 0

    def _geometric(self, state: bytes, depth: int) -> int:
        b = self.b0
        if depth > 0:
            if self.shape == "fixed":
                b = self.b0 if depth < self.gen_mx else 0.0
            elif self.shape == "expdec":
                b = self.b0 * float(depth) ** (-math.log(self.b0) / math.log(self.gen_mx))
            elif self.shape == "cyclic":
                b = 0.0 if depth > 5 * self.gen_mx else \
                    self.b0 ** math.sin(2.0 * 3.141592653589793 * depth / self.gen_mx)
            else:                                          # linear (the default)
                b = self.b0 * (1.0 - depth / self.gen_mx)
        if b <= 0.0:          # p = 1: the reference's floor(log(1-u) / log(0)) is 0
            return 0
        p = 1.0 / (1.0 + b)
        u = to_prob(rng_rand(state))
        return int(math.floor(math.log(1.0 - u) / math.log(1.0 - p)))


# The sample trees of the reference's sample_trees.sh, with their published statistics,
# and the reference's default tree (uts.c's default parameters; size as published with
# the STAPL port's verifyStats).
TREES = {
    "T1": Tree("geometric", 4, 19, shape="fixed", gen_mx=10,
               nodes=4130071, depth=10, leaves=3305118),
    "T2": Tree("geometric", 6, 502, shape="cyclic", gen_mx=16,
               nodes=4117769, depth=81, leaves=2342762),
    "T3": Tree("binomial", 2000, 42, q=0.124875, m=8,
               nodes=4112897, depth=1572, leaves=3599034),
    "T4": Tree("hybrid", 6, 1, q=0.234375, m=4, shape="linear", gen_mx=16,
               nodes=4132453, depth=134, leaves=3108986),
    "T5": Tree("geometric", 4, 34, shape="linear", gen_mx=20,
               nodes=4147582, depth=20, leaves=2181318),
    "default": Tree("geometric", 4, 0, shape="linear", gen_mx=6, nodes=1732, leaves=1050),
}


# --- the counts ------------------------------------------------------------------------
def count_sequential(tree: Tree) -> tuple[int, int]:
    """(nodes, deepest depth) by a plain loop over an explicit stack: the baseline.

    No recursion and no futures, so it runs trees of any depth and costs only the
    per-node work (one SHA-1 and one child-count rule per node).
    """
    num_children = tree.num_children
    stack = [(rng_init(tree.seed), 0)]
    pop, push = stack.pop, stack.append
    nodes = deepest = 0
    while stack:
        state, depth = pop()
        nodes += 1
        if depth > deepest:
            deepest = depth
        n = num_children(state, depth)
        if n:
            depth += 1
            for i in range(n):
                push((sha1(state + _SPAWN[i]).digest(), depth))
    return nodes, deepest


@dac.spawn
def uts(tree: Tree, state: bytes, depth: int) -> tuple[int, int]:
    """(nodes, deepest depth) of the subtree under one node: one spawn per child."""
    n = tree.num_children(state, depth)
    if n == 0:
        return 1, depth              # a leaf (most nodes): nothing to spawn or wait for
    children = [uts(tree, rng_spawn(state, i), depth + 1) for i in range(n)]
    nodes, deepest = 1, depth
    for n, d in dac.sync(children):
        nodes += n
        deepest = max(deepest, d)
    return nodes, deepest


def count_recursive(tree: Tree) -> tuple[int, int]:
    """The serial elision: ``uts`` called outside ``dac.run`` (plain recursion)."""
    return uts(tree, rng_init(tree.seed), 0)


def ensure_recursion_limit(tree: Tree) -> None:
    """Deep trees (T3: depth 1572) need more than Python's 1000 frames: ``uts`` costs
    a few frames per level. dac's leaves take the script's limit."""
    need = 8 * (tree.depth or 200) + 1000
    if sys.getrecursionlimit() < need:
        sys.setrecursionlimit(need)


def check(tree: Tree, nodes: int, deepest: int) -> str:
    """"ok" if the count matches the published size and depth, else what differs."""
    if tree.nodes is None:
        return "no published size"
    if nodes == tree.nodes and (tree.depth is None or deepest == tree.depth):
        return "ok (published size)"
    return f"MISMATCH: published {tree.nodes} nodes, depth {tree.depth}"


def main(argv=None) -> int:
    from stealing.observe.stats import format_stats, grain_text
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree", nargs="?", default="T3", choices=sorted(TREES))
    ap.add_argument("--procs", type=int, default=None, help="leaf processes")
    ap.add_argument("--depth", type=int, default=None, help="spawn depth (default auto)")
    ap.add_argument("--serial", action="store_true",
                    help="run the sequential loop only (no MPI)")
    ap.add_argument("--list", action="store_true", help="list the named trees")
    args = ap.parse_args(argv)
    if args.list:
        for name, t in TREES.items():
            print(f"{name:8} {t.kind:9} b0={t.b0:<6g} seed={t.seed:<4} nodes={t.nodes} "
                  f"depth={t.depth}")
        return 0
    tree = TREES[args.tree]
    ensure_recursion_limit(tree)
    if args.serial:
        t0 = time.perf_counter()
        nodes, deepest = count_sequential(tree)
        seconds = time.perf_counter() - t0
        print(f"{args.tree}: {nodes} nodes, depth {deepest} in {seconds:.3f} s "
              f"(sequential loop, {nodes / seconds:,.0f} nodes/s) "
              f"{check(tree, nodes, deepest)}")
    else:
        report = dac.run_report(uts, tree, rng_init(tree.seed), 0, procs=args.procs,
                                depth=args.depth)
        nodes, deepest = report.result
        print(f"{args.tree}: {nodes} nodes, depth {deepest} in {report.elapsed_s:.3f} s "
              f"({grain_text(report.stats)}) {check(tree, nodes, deepest)}")
        print(format_stats(report.stats))
    return 0 if tree.nodes is None or nodes == tree.nodes else 1


if __name__ == "__main__":
    sys.exit(main())
