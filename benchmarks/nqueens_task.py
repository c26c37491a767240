"""The N-Queens task of the peer benchmarks (``peers.py``): one partial board, solved by
the same numba kernel dac's leaves run (``nqueens_kernels.count_from``).

A module of its own so that every pool can name it: a fork pool inherits it, a fresh
worker (``mpi4py.futures``) imports it by name.
"""

from nqueens_boards import children
from nqueens_kernels import count_from


def count_task(board):
    """Solutions under ``board = (n, cols, d1, d2)``."""
    n, cols, d1, d2 = board
    return count_from(n, cols, d1, d2)


def two_queen_boards(n):
    """One task per placement of the first two queens (what the pools are given)."""
    return [(n, c2, a2, b2) for c1, a1, b1 in children(n, 0, 0, 0)
            for c2, a2, b2 in children(n, c1, a1, b1)]
