"""Sequential N-Queens bitmask kernels (no dependency on dac).

Bitmask formulation: rows are filled top to bottom.  A partial board is
described by three ``n``-bit masks, all expressed for the *next* row:

* ``cols`` - columns already holding a queen,
* ``d1``   - squares attacked along one diagonal direction,
* ``d2``   - squares attacked along the other diagonal direction.

The free squares of the next row are ``avail = full & ~(cols | d1 | d2)``
with ``full = (1 << n) - 1``.  Placing a queen on ``bit`` gives the child
``(cols | bit, ((d1 | bit) << 1) & full, (d2 | bit) >> 1)``.  The board is
complete when ``cols == full``.

``count_from`` is an iterative depth-first search with a small explicit
stack; in numba it matched or beat the recursive version and runs at parity
with the same loop compiled by ``cc -O3`` (see benchmarks/leaf_vs_c.py).
"""

import numpy as np
from nqueens_boards import KNOWN_COUNTS, children  # noqa: F401  (re-exported)
from numba import njit

# Stack capacity: one frame per remaining row; int64 masks limit n to 62.
_STACK = 64


def search(full, cols, d1, d2, st_cols, st_d1, st_d2, st_avail):
    """Completions of (cols, d1, d2), depth first, with the given stack arrays.

    Plain Python compiled twice: by ``njit`` for CPU leaves (``count_from``) and by
    ``cuda.jit(device=True)`` for GPU threads (``nqueens_cuda``), so both run exactly
    this loop.
    """
    if cols == full:
        return 1
    count = 0
    sp = 0
    avail = full & ~(cols | d1 | d2)
    while True:
        if avail:
            bit = avail & -avail
            avail ^= bit
            nc = cols | bit
            if nc == full:
                count += 1
                continue
            nd1 = ((d1 | bit) << 1) & full
            nd2 = (d2 | bit) >> 1
            na = full & ~(nc | nd1 | nd2)
            if na:  # descend only into rows that still have a free square
                st_cols[sp] = cols
                st_d1[sp] = d1
                st_d2[sp] = d2
                st_avail[sp] = avail
                sp += 1
                cols = nc
                d1 = nd1
                d2 = nd2
                avail = na
        else:
            if sp == 0:
                break
            sp -= 1
            cols = st_cols[sp]
            d1 = st_d1[sp]
            d2 = st_d2[sp]
            avail = st_avail[sp]
    return count


_search_cpu = njit(cache=True)(search)


@njit(cache=True)
def count_from(n, cols, d1, d2):
    """Count all completions of the partial board (cols, d1, d2) on n x n."""
    return _search_cpu((1 << n) - 1, cols, d1, d2, np.empty(_STACK, np.int64),
                       np.empty(_STACK, np.int64), np.empty(_STACK, np.int64),
                       np.empty(_STACK, np.int64))


@njit(cache=True)
def count_all(n):
    """Number of solutions of the n-queens problem."""
    return count_from(n, 0, 0, 0)



