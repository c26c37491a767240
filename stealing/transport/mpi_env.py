"""The environment MPI starts in, in every process of a run: set before ``mpi4py.MPI``
is imported, in the root (``stealing.transport.mpi.init_mpi``, which a launcher's ranks
use too) and in each spawned process (``stealing.roles.process``; it inherits the root's
environment through MPI's process manager, and sets the same again for itself).

Defaults only: a variable the user set is left as it is. They stay in the root's
environment, so a program the root starts afterwards inherits them too.

* ``UCX_LOG_LEVEL=error``: UCX (MPICH's network layer) warns at disconnect about
  messages nobody received, e.g. a STOP that crossed a spawn-per-batch leaf's last
  results; that is expected when a run ends early, so only UCX errors are shown.
* ``UCX_MEM_EVENTS=no``: UCX's memory hooks, installed when its library loads, cost
  about 40 ms of CPU a process (importing ``mpi4py.MPI`` took 51-55 ms with them and
  11-13 ms without, five warm runs on a 2-core VM; a 128-leaf tree starts 4% faster,
  the 2-leaf quick start 9%). They serve only UCX's registration cache for RDMA
  networks (InfiniBand, RoCE), which without them registers large buffers at each
  transfer instead of reusing a registration; dac's messages are small, except those
  that carry large NumPy arrays. On such a network, ``UCX_MEM_EVENTS=yes`` in the
  environment keeps the hooks.
"""

from __future__ import annotations

import os

DEFAULTS = (("UCX_LOG_LEVEL", "error"), ("UCX_MEM_EVENTS", "no"))


def set_defaults() -> None:
    """Put each of ``DEFAULTS`` in this process's environment, unless already set."""
    for name, value in DEFAULTS:
        os.environ.setdefault(name, value)
