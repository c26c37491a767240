"""The CUDA kernel of ``nqueens_gpu`` (imported only inside GPU leaves).

One thread per partial board: the bitmask backtracking of ``nqueens_kernels.count_from``
with its stack in thread-local memory.
"""

from numba import cuda, int64

STACK = 32              # one frame per remaining row: enough for n <= 32


@cuda.jit
def kernel(n, cols0, d10, d20, out):
    i = cuda.grid(1)
    if i >= out.size:
        return
    full = (int64(1) << n[i]) - 1
    cols = cols0[i]
    d1 = d10[i]
    d2 = d20[i]
    if cols == full:
        out[i] = 1
        return
    st_cols = cuda.local.array(STACK, int64)
    st_d1 = cuda.local.array(STACK, int64)
    st_d2 = cuda.local.array(STACK, int64)
    st_avail = cuda.local.array(STACK, int64)
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
            if na:
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
    out[i] = count

