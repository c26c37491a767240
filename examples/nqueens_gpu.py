"""N-Queens on a GPU: one CUDA thread per partial board (a dac ``gpu_batch``).

``count_batch(n, cols, d1, d2)`` takes one NumPy array per argument of the task
``queens(n, cols, d1, d2)`` — a whole batch of partial boards — and returns the number
of completions of each board. Every thread runs the same bitmask backtracking as the CPU
kernel (``nqueens_kernels.count_from``) with a small stack in thread-local memory.

A launch takes as long as its slowest thread, so the batch is first split, on the
leaf's CPU, into the boards a level or two further down until there are ``FILL`` of
them (``nqueens_kernels.split_boards``: about 20 ns a board), and their counts are
summed back per board. So the root sends tasks of a few thousand boards (N = 18:
3,420 of depth 3), the CPU leaves solve them whole, and the device still gets the
hundreds of thousands of threads it needs to be full: the root writes and ships each
task itself, and 321,700 tasks of depth 5 kept the device waiting for them
(docs/gpu.md).

numba.cuda is imported on the first call, inside a GPU leaf: the root and the routers
import this module but never touch CUDA (a process holding a CUDA context must not
fork). Under ``NUMBA_ENABLE_CUDASIM=1`` the same kernel runs in numba's simulator.
"""

import warnings

import numpy as np

THREADS = 128           # threads per block
FILL = 150_000          # boards a launch is split into at least (a few per CUDA core)
SIM_FILL = 64           # ... under numba's CUDA simulator, which runs threads in Python

# a batch is as large as the leaf was given: small launches near the end are expected
warnings.filterwarnings("ignore", message=".*Grid size .* under-utilization")


def count_batch(n, cols, d1, d2):
    """Completions of each board of a batch (arrays of equal length) on the GPU."""
    from nqueens_cuda import kernel
    from nqueens_kernels import split_boards
    from numba import config, cuda
    arrays = [np.ascontiguousarray(a, dtype=np.int64) for a in (n, cols, d1, d2)]
    size = arrays[0].size
    if size == 0:
        return np.zeros(0, np.int64)
    *boards, owner = split_boards(*arrays, SIM_FILL if config.ENABLE_CUDASIM else FILL)
    counts = np.zeros(size, np.int64)
    if owner.size == 0:                 # dead ends only
        return counts
    dev = [cuda.to_device(a) for a in boards]
    out = cuda.device_array(owner.size, np.int64)
    kernel[(owner.size + THREADS - 1) // THREADS, THREADS](*dev, out)
    np.add.at(counts, owner, out.copy_to_host())
    return counts
