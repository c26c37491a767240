"""A GPU leaf's device: pinned before numba is imported, checked at start-up.

A leaf whose topology gives it GPU ``device`` of its host sees only that device
(``CUDA_VISIBLE_DEVICES``), so its CUDA context lives on its own GPU; a host without a
usable GPU refuses to start with an error that says how to run anyway (the simulator,
or no GPU in the topology).
"""

from __future__ import annotations

import os
import socket


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
