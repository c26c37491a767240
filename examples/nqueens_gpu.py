"""N-Queens on a GPU: one CUDA thread per partial board (a dac ``gpu_batch``).

``count_batch(n, cols, d1, d2)`` takes one NumPy array per argument of the task
``queens(n, cols, d1, d2)`` — a whole batch of partial boards — and returns the number
of completions of each board. Every thread runs the same bitmask backtracking as the CPU
kernel (``nqueens_kernels.count_from``) with a small stack in thread-local memory.

numba.cuda is imported on the first call, inside a GPU leaf: the root and the routers
import this module but never touch CUDA (a process holding a CUDA context must not
fork). Under ``NUMBA_ENABLE_CUDASIM=1`` the same kernel runs in numba's simulator.
"""

import warnings

import numpy as np

THREADS = 128           # threads per block

def count_batch(n, cols, d1, d2):
    """Completions of each board of a batch (arrays of equal length) on the GPU."""
    from nqueens_cuda import kernel
    from numba import cuda

    # a batch is as large as the leaf was given: small ones near the end are expected
    warnings.filterwarnings("ignore", message=".*Grid size .* under-utilization")
    arrays = [np.ascontiguousarray(a, dtype=np.int64) for a in (n, cols, d1, d2)]
    size = arrays[0].size
    if size == 0:
        return np.zeros(0, np.int64)
    dev = [cuda.to_device(a) for a in arrays]
    out = cuda.device_array(size, np.int64)
    blocks = (size + THREADS - 1) // THREADS
    kernel[blocks, THREADS](*dev, out)
    return out.copy_to_host()
