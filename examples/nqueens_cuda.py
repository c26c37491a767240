"""The CUDA kernel of ``nqueens_gpu`` (imported only inside GPU leaves).

One thread per partial board, running ``nqueens_kernels.search`` (the CPU leaf's loop,
compiled as a device function) with its stack in thread-local memory.
"""

from nqueens_kernels import search
from numba import cuda, int64

STACK = 32              # one frame per remaining row: enough for n <= 32

_search_gpu = cuda.jit(device=True)(search)


@cuda.jit
def kernel(n, cols, d1, d2, out):
    i = cuda.grid(1)
    if i >= out.size:
        return
    out[i] = _search_gpu((int64(1) << n[i]) - 1, cols[i], d1[i], d2[i],
                         cuda.local.array(STACK, int64), cuda.local.array(STACK, int64),
                         cuda.local.array(STACK, int64), cuda.local.array(STACK, int64))
