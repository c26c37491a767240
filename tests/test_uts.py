"""UTS (examples/uts.py): the SHA-1 generator, the child-count rules, exact tree sizes.

The sample trees T1..T5 (~4 million nodes each) are too big for the test suite; their
published sizes are checked by ``python examples/uts.py T1 --serial`` (about 15 s
each). Here: a small tree whose size the UTS authors published, and small trees counted
three ways (sequential loop, serial elision, ``dac.run`` on 2 leaves) that must agree
with each other and with the numbers recorded below.
"""

import os
import sys

import pytest

import dac

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "examples")
if EXAMPLES not in sys.path:
    sys.path.append(EXAMPLES)          # also on the leaves' path (they get the root's)

import uts  # noqa: E402

# Expected SHA-1 states, computed with coreutils' sha1sum (an implementation independent
# of Python's hashlib) from the byte strings the reference's rng_init / rng_spawn hash:
#   root:    printf '\x00' x 19 + '\x2a' | sha1sum          (16 zero bytes, then seed 42
#                                                            as 4 big-endian bytes)
#   child i: echo -n "<root hex>0000000i" | xxd -r -p | sha1sum
# The values are the last 4 bytes with the top bit cleared (rng_rand), worked by hand:
# 0xeb582782 & 0x7fffffff = 0x6b582782 = 1800939394, and so on.
ROOT_42 = "a11dabbcec7aab309c890ab3dbc256eaeb582782"
CHILDREN_42 = {0: "7407806c9e18f6e1d4d944809de9c0c94b892757",
               1: "c77bf3c481adf653ab30ed7cd2064af420d42274",
               2: "3faa461e7b75349e0e7c8579568cce8ec8fffee5",
               258: "7c3de914f48db17ce4287df557046293f6203c92"}   # 0x00000102
GRANDCHILD_42_0_3 = "18bd5397b7d77352d543079dcec90b5e12a94fab"
VALUES_42 = {"root": 1800939394, 0: 1267279703, 1: 550773364, 2: 1224736485}

# Small trees, sizes recorded from this implementation and confirmed three ways below
# (no published figures for them): a fixed-shape geometric tree of depth 5 (T1's rule,
# shallower) and a binomial tree of a few thousand nodes.
GEO_D5 = uts.Tree("geometric", 4, 19, shape="fixed", gen_mx=5)
BIN_SMALL = uts.Tree("binomial", 200, 42, q=0.18, m=5)
SMALL = [(GEO_D5, 3987, 5), (BIN_SMALL, 2021, 25)]


def test_rng_states_match_sha1sum():
    root = uts.rng_init(42)
    assert root.hex() == ROOT_42
    for i, expected in CHILDREN_42.items():
        assert uts.rng_spawn(root, i).hex() == expected
    assert uts.rng_spawn(uts.rng_spawn(root, 0), 3).hex() == GRANDCHILD_42_0_3


def test_rng_values_and_probabilities():
    root = uts.rng_init(42)
    assert uts.rng_rand(root) == VALUES_42["root"]
    for i in range(3):
        assert uts.rng_rand(uts.rng_spawn(root, i)) == VALUES_42[i]
    assert uts.to_prob(VALUES_42[1]) == 550773364 / 2**31
    assert uts.to_prob(0x7FFFFFFF) < 1.0


def test_binomial_rule_on_t3():
    t3, root = uts.TREES["T3"], uts.rng_init(42)
    assert t3.num_children(root, 0) == 2000          # the root: floor(b0), no draw
    # probabilities 0.590, 0.256, 0.570: all >= q = 0.124875, so leaves
    assert [t3.num_children(uts.rng_spawn(root, i), 1) for i in range(3)] == [0, 0, 0]
    low = next(i for i in range(2000)
               if uts.to_prob(uts.rng_rand(uts.rng_spawn(root, i))) < t3.q)
    assert t3.num_children(uts.rng_spawn(root, low), 1) == 8


def test_geometric_rule_ends_at_gen_mx():
    t1 = uts.TREES["T1"]
    state = uts.rng_init(19)
    assert all(t1.num_children(state, d) == 0 for d in (10, 11, 50))
    counts = [t1.num_children(uts.rng_spawn(state, i), 3) for i in range(2000)]
    assert max(counts) <= uts.MAX_CHILDREN
    assert 3.5 < sum(counts) / len(counts) < 4.5       # a geometric law of mean b0 = 4


def leaf_count(tree):
    """Leaves of a small tree, by an independent walk (checks the published figure)."""
    stack, leaves = [(uts.rng_init(tree.seed), 0)], 0
    while stack:
        state, depth = stack.pop()
        n = tree.num_children(state, depth)
        leaves += n == 0
        stack.extend((uts.rng_spawn(state, i), depth + 1) for i in range(n))
    return leaves


def test_published_default_tree():
    """The reference's default tree (geometric, linear shape, depth 6, b0 4, seed 0):
    published 1732 nodes, 1050 leaves."""
    tree = uts.TREES["default"]
    assert uts.count_sequential(tree) == (1732, 6)
    assert uts.count_recursive(tree) == (1732, 6)
    assert leaf_count(tree) == tree.leaves == 1050


@pytest.mark.parametrize("tree,nodes,depth", SMALL, ids=["geometric-d5", "binomial"])
def test_small_trees_three_ways(tree, nodes, depth):
    assert uts.count_sequential(tree) == (nodes, depth)
    assert uts.count_recursive(tree) == (nodes, depth)
    assert dac.run(uts.uts, tree, uts.rng_init(tree.seed), 0, procs=2) == (nodes, depth)


def test_main_checks_the_published_size(capsys):
    assert uts.main(["default", "--serial"]) == 0
    assert "1732 nodes, depth 6" in capsys.readouterr().out
