"""A message on the wire: a pickle stream, and its large buffers beside it.

mpi4py's ``isend`` pickles a message into one buffer, so a NumPy array in a task's
arguments or result was copied into the pickle stream, and at every hop again
(measured on a 160 MB array: pickling the message 101 ms, unpickling it 93 ms; a
whole task sent to a leaf moved at about 140 MB/s). Here a message is pickled with
protocol 5, and every buffer of ``OOB_MIN`` bytes or more that the pickler meets (a
NumPy array's memory, a ``pickle.PickleBuffer``, a ``bytearray``) goes out of band:
sent from its own memory and received into a ``bytearray`` that the unpickled object
then uses, with no copy on either side. A router that passes a task on sends the
same ``bytearray`` again, out of band too.

On the wire a message without such buffers is one MPI message with its own tag; one
with ``k`` of them is ``k + 1`` messages under ``tag + OOB_TAG``: the sizes and the
stream, then each buffer. MPI keeps their order (same sender, tag and communicator).
"""

from __future__ import annotations

import pickle
import struct
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from mpi4py.MPI import Comm, Message, Request, Status

OOB_MIN = 1 << 16       # smaller buffers stay in the stream: a message each costs more
OOB_TAG = 1 << 14       # added to the tag of a message whose buffers follow it
_COUNT = struct.Struct("<q")


def taker(bufs: list[Any]) -> Callable[[pickle.PickleBuffer], bool]:
    """A pickler's ``buffer_callback`` that keeps buffers of ``OOB_MIN`` bytes or
    more out of band (appended to ``bufs``) and the others in the stream."""
    def take(buf: pickle.PickleBuffer) -> bool:
        if buf.raw().nbytes < OOB_MIN:
            return True
        bufs.append(buf)
        return False
    return take


class _Large(Exception):
    """A buffer of ``OOB_MIN`` bytes or more: pickle again, keeping them apart."""


def _small_only(buf: pickle.PickleBuffer) -> bool:
    if buf.raw().nbytes < OOB_MIN:
        return True
    raise _Large


def dumps(obj: object) -> tuple[bytes, list[pickle.PickleBuffer]]:
    """``obj`` pickled (protocol 5), and its buffers of ``OOB_MIN`` bytes or more kept
    out of the stream. Most values have none: they are pickled once, with a callback
    that keeps no state (a list and a closure per call cost more than the pickling
    of a small message); a value that has one is pickled again, collecting them."""
    try:
        return pickle.dumps(obj, 5, buffer_callback=_small_only), []
    except _Large:
        bufs: list[pickle.PickleBuffer] = []
        return pickle.dumps(obj, 5, buffer_callback=taker(bufs)), bufs


class Outgoing:
    """The sends of one message under way, and what they send from (kept alive
    until they complete)."""

    __slots__ = ("reqs", "keep")

    def __init__(self, reqs: list[Request], keep: object) -> None:
        self.reqs, self.keep = reqs, keep

    def Test(self) -> bool:
        """Every send of the message completed (the ``Request.Test`` of one)."""
        reqs = self.reqs
        if len(reqs) == 1:
            return bool(reqs[0].Test())
        return bool(reqs[0].Testall(reqs))

    def Wait(self) -> None:
        self.reqs[0].Waitall(self.reqs)


def isend(MPI: ModuleType, comm: Comm, obj: object, dest: int,
          tag: int) -> Outgoing | Request:
    """Start sending ``obj`` to ``dest`` of ``comm`` (its ``Test`` completes it). A
    message without large buffers is one ``Isend`` of its stream, as mpi4py's own
    ``isend`` is (the request keeps the stream alive)."""
    data, bufs = dumps(obj)
    if not bufs:
        return comm.Isend(data, dest, tag)
    raws = [b.raw() for b in bufs]
    head = struct.pack(f"<{len(raws) + 1}q", len(raws), *[r.nbytes for r in raws]) + data
    reqs = [comm.Isend([head, MPI.BYTE], dest, tag + OOB_TAG)]
    reqs += [comm.Isend([r, MPI.BYTE], dest, tag + OOB_TAG) for r in raws]
    return Outgoing(reqs, (head, bufs, raws))


def receive(MPI: ModuleType, comm: Comm, msg: Message, status: Status) -> tuple[int, Any]:
    """The tag and the object of the message ``msg`` that ``status`` describes (its
    buffers, if any, are received here from the same sender)."""
    tag = status.Get_tag()
    if tag < OOB_TAG:               # a stream alone: what mpi4py's own recv reads
        return tag, msg.recv()
    buf = bytearray(status.Get_count(MPI.BYTE))
    msg.Recv([buf, MPI.BYTE])
    count = _COUNT.unpack_from(buf)[0]
    sizes = struct.unpack_from(f"<{count}q", buf, _COUNT.size)
    source = status.Get_source()
    parts = []
    for size in sizes:
        part = bytearray(size)
        comm.Recv([part, MPI.BYTE], source, tag)
        parts.append(part)
    stream = memoryview(buf)[_COUNT.size * (count + 1):]
    return tag - OOB_TAG, pickle.loads(stream, buffers=parts)
