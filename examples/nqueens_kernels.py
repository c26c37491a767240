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


@njit(cache=True)
def _free(full, cols, d1, d2):
    """Squares free in the next row: how many children a board has."""
    avail = full & ~(cols | d1 | d2)
    k = 0
    while avail:
        avail &= avail - 1
        k += 1
    return k


@njit(cache=True)
def split_boards(n, cols, d1, d2, fill):
    """The boards a level or more below each board of a batch, until there are at
    least ``fill`` (or no board has children): ``(n, cols, d1, d2, owner)``, ``owner``
    the index of the board each came from. A complete board stays as it is; a dead end
    goes (it has no completion). A GPU launch takes as long as its slowest thread, so a
    batch of few large boards leaves the device mostly idle (``nqueens_gpu``)."""
    owner = np.arange(cols.size)
    while cols.size < fill:
        total = 0
        for i in range(cols.size):
            full = (1 << n[i]) - 1
            total += 1 if cols[i] == full else _free(full, cols[i], d1[i], d2[i])
        if total <= cols.size:
            break
        nn, nc, na, nb, no = (np.empty(total, np.int64), np.empty(total, np.int64),
                              np.empty(total, np.int64), np.empty(total, np.int64),
                              np.empty(total, np.int64))
        j = 0
        for i in range(cols.size):
            full = (1 << n[i]) - 1
            if cols[i] == full:
                nn[j], nc[j], na[j], nb[j], no[j] = n[i], cols[i], d1[i], d2[i], owner[i]
                j += 1
                continue
            avail = full & ~(cols[i] | d1[i] | d2[i])
            while avail:
                bit = avail & -avail
                avail ^= bit
                nn[j], nc[j], no[j] = n[i], cols[i] | bit, owner[i]
                na[j] = ((d1[i] | bit) << 1) & full
                nb[j] = (d2[i] | bit) >> 1
                j += 1
        n, cols, d1, d2, owner = nn, nc, na, nb, no
    return n, cols, d1, d2, owner
