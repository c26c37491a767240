"""N-Queens boards in plain Python (no numba): what the root needs to expand the
recursion, and the known solution counts.

A partial board is three bitmasks for the next row (see ``nqueens_kernels``).
"""


def children(n, cols, d1, d2):
    """List of (cols, d1, d2) for every legal queen in the next row (pure Python)."""
    full = (1 << n) - 1
    avail = full & ~(cols | d1 | d2)
    out = []
    while avail:
        bit = avail & -avail
        avail ^= bit
        out.append((cols | bit, ((d1 | bit) << 1) & full, (d2 | bit) >> 1))
    return out


KNOWN_COUNTS = {
    1: 1, 2: 0, 3: 0, 4: 2, 5: 10, 6: 4, 7: 40, 8: 92, 9: 352, 10: 724,
    11: 2680, 12: 14200, 13: 73712, 14: 365596, 15: 2279184, 16: 14772512,
    17: 95815104, 18: 666090624, 19: 4968057848, 20: 39029188884,
}
