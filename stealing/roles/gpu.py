"""A GPU leaf's device: pinned before numba is imported, checked at start-up.

A leaf whose topology gives it GPU ``device`` of its host sees only that device
(``CUDA_VISIBLE_DEVICES``), so its CUDA context lives on its own GPU; a host without a
usable GPU refuses to start with an error that says how to run anyway (the simulator,
or no GPU in the topology).
"""

from __future__ import annotations

import os
import socket


GPU_MIN_BATCH = 2048        # tasks a real GPU leaf asks for at least
GPU_MAX_BATCH = 1 << 20     # ... and at most
GPU_BATCH_S = 0.5           # a batch that ran full in less than this doubles the next


def next_gpu_batch(current: int, ran: int, spent: float) -> int:
    """The least a real GPU leaf asks for next, after a batch of ``ran`` tasks took
    ``spent`` seconds, where it asked for at least ``current``.

    A GPU's time per batch hardly grows until the batch fills the device (each thread
    a board, the launch as long as its slowest thread), so its measured rate rises
    with the batch and a batch sized by that rate never grows: on an H200, N-Queens 18
    at depth 5 ran in batches of 2048 at about 14,000 boards/s where one launch over
    all 321,700 boards ran 80,000/s. So the floor doubles after each batch that came
    full and ran in under ``GPU_BATCH_S``, and stays once a batch takes longer: the
    device is then full enough that a bigger batch only coarsens the end of the run.
    """
    if ran >= current and spent < GPU_BATCH_S:
        return min(GPU_MAX_BATCH, 2 * current)
    return current


class GPUUnavailable(RuntimeError):
    """The topology gives this host a GPU that this process cannot use."""


def use_gpu(device: int, simulate: bool) -> None:
    """Pin this leaf to GPU ``device`` of its host, before anything imports numba.

    ``CUDA_VISIBLE_DEVICES`` is narrowed to that one device (an index into the list the
    host already sets, if any), so the leaf's CUDA context lives on its own GPU. With
    ``simulate`` the kernels run in numba's CUDA simulator instead.
    """
    if simulate:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        return
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        ids = [v for v in visible.split(",") if v.strip()]
        if device >= len(ids):
            raise GPUUnavailable(f"GPU leaf {device} needs device #{device} but "
                                 f"CUDA_VISIBLE_DEVICES={visible!r} lists {len(ids)}")
        os.environ["CUDA_VISIBLE_DEVICES"] = ids[device]
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(device)


def check_gpu(device: int) -> None:
    """Fail clearly, at start-up, when the topology's GPU is not there."""
    from numba import cuda  # lazy: ~1 s; GPU leaves only, once use_gpu pinned the device
    if not cuda.is_available():
        raise GPUUnavailable(
            f"host {socket.gethostname()} has no usable CUDA GPU for GPU leaf {device} "
            f"(numba.cuda.is_available() is False; CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}). Run with gpu_simulate=True "
            f"(dac run --gpu-simulate) to use numba's CUDA simulator, or give this host "
            f"no gpus in the topology.")
