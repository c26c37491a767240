"""The interpreter's frame stack: a leaf serves on a fresh stretch of it (and the serial
elision runs its long top calls on one: ``dac.context.run_top``).

CPython keeps Python frames in chunks (16 KiB) and frees a chunk (``munmap``) as soon as
the frame at its start returns (CPython issue gh-142183; later 3.13 and 3.14 releases
keep one spare). A recursion whose hot levels straddle a chunk's end maps and unmaps a
chunk every time it crosses: fib 30 in a leaf made 17,500 ``mmap``/``munmap`` pairs a
second, and with MPI's memory hooks and a second thread in the process the kernel's
share of the leaf's CPU was as large as the user's (fib 30 on 2 leaves: 3.4-4.0 s,
1.55-1.65 s serving on a fresh stack).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

# Python frames live in chunks of a stack (3.11 on); before, each frame is an object
# of its own, and ``on_fresh_stack``'s frame would allocate (and clear) its 1 MiB
CHUNKED_STACK = sys.version_info >= (3, 11)


def on_fresh_stack(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with about 1 MiB of the frame stack before a chunk's end.

    This frame asks for 1 MiB of evaluation stack (set below: a larger
    ``co_stacksize`` than the code needs is only a bound, never touched), so it starts
    a chunk of its own (2 MiB of address space, mapped lazily) and the frames it calls
    follow it there. The chunk is mapped when this is called and unmapped when it
    returns (about 14 us), so it wraps a whole loop (a leaf's), not each task.
    """
    return fn(*args, **kwargs)


on_fresh_stack.__code__ = on_fresh_stack.__code__.replace(co_stacksize=1 << 17)
