"""A message on the wire: a pickle stream, and its large buffers beside it.

mpi4py's ``isend`` pickles a message into one buffer, so a NumPy array in a task's
arguments or result was copied into the pickle stream, and at every hop again
(measured on a 160 MB array: pickling the message 101 ms, unpickling it 93 ms; a
whole task sent to a leaf moved at about 140 MB/s). Here a message is pickled with
protocol 5, and every buffer of ``OOB_MIN`` bytes or more that the pickler meets (a
NumPy array's memory, a ``pickle.PickleBuffer``, a ``bytearray``) goes out of band:
sent from its own memory and received into a ``bytearray`` that the unpickled object
then uses, with no copy on either side. A router that passes a task on sends the
same buffer again, out of band too (pickled into the stream, an 80 MB half of an
array passed on by the root cost 81 ms).

On the wire a message without such buffers is one MPI message with its own tag; one
with buffers is one message under ``tag + OOB_TAG`` that holds the table of its
buffers (a size, or a segment's name and size) and the stream, then one message per
buffer that goes over MPI. MPI keeps their order (same sender, tag and communicator).

Between two processes of one host (``segments`` given), a buffer of ``SHM_MIN`` bytes
or more goes through a shared-memory file instead (``stealing.transport.segments``):
the message names it, and a part received so is passed on by that name.

A received part is a ``memoryview`` (of a ``bytearray``, or of a segment's mapping):
a message that holds one again (a task a router passes on) is pickled by
``_PartPickler``, which keeps the part out of band (plain pickle refuses a
``memoryview``, and would copy a ``bytearray`` into the stream).
"""

from __future__ import annotations

import io
import pickle
import struct
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

from stealing.transport.segments import SHM_MIN, Segments, open_segment, segment_of

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


def _as_received(part: Any) -> Any:
    """A part, as the receiver got it (``_PartPickler``'s reduction)."""
    return part


class _PartPickler(pickle.Pickler):
    """Pickles a message that holds received parts (``memoryview``): each goes out
    of band again, as a ``pickle.PickleBuffer`` of itself."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is memoryview:
            return _as_received, (pickle.PickleBuffer(obj),)
        return NotImplemented


def dumps_parts(obj: object, bufs: list[pickle.PickleBuffer] | None = None) -> bytes:
    """``obj`` pickled (protocol 5) with its received parts: out of band into
    ``bufs`` (those of ``OOB_MIN`` bytes or more), or in the stream if ``bufs`` is
    None (a message for a socket: ``stealing.warm.wire``)."""
    stream = io.BytesIO()
    _PartPickler(stream, 5, buffer_callback=None if bufs is None else taker(bufs)).dump(obj)
    return stream.getvalue()


def _dumps_message(obj: object) -> tuple[bytes, list[pickle.PickleBuffer]]:
    """``dumps`` for a message, which may hold parts received earlier."""
    try:
        return dumps(obj)
    except TypeError:           # a memoryview (or something no pickler takes)
        bufs: list[pickle.PickleBuffer] = []
        return dumps_parts(obj, bufs), bufs


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


def isend(MPI: ModuleType, comm: Comm, obj: object, dest: int, tag: int,
          segments: Segments | None = None) -> Outgoing | Request:
    """Start sending ``obj`` to ``dest`` of ``comm`` (its ``Test`` completes it). A
    message without large buffers is one ``Isend`` of its stream, as mpi4py's own
    ``isend`` is (the request keeps the stream alive). With ``segments`` (``dest``
    is on this host), buffers of ``SHM_MIN`` bytes or more go by shared memory."""
    data, bufs = _dumps_message(obj)
    if not bufs:
        return comm.Isend(data, dest, tag)
    places: list[int | tuple[str, int]] = []
    raws = []
    for b in bufs:
        raw = b.raw()
        name = None
        if segments is not None and raw.nbytes >= SHM_MIN:
            name = segment_of(raw.obj) or segments.place(raw)
        if name is None:
            places.append(raw.nbytes)
            raws.append(raw)
        else:
            places.append((name, raw.nbytes))
    table = pickle.dumps(places, 5)
    head = _COUNT.pack(len(table)) + table + data
    reqs = [comm.Isend([head, MPI.BYTE], dest, tag + OOB_TAG)]
    reqs += [comm.Isend([r, MPI.BYTE], dest, tag + OOB_TAG) for r in raws]
    return Outgoing(reqs, (head, bufs, raws))


def receive(MPI: ModuleType, comm: Comm, msg: Message, status: Status) -> tuple[int, Any]:
    """The tag and the object of the message ``msg`` that ``status`` describes (its
    buffers, if any, are received here from the same sender, or mapped from shared
    memory)."""
    tag = status.Get_tag()
    if tag < OOB_TAG:               # a stream alone: what mpi4py's own recv reads
        return tag, msg.recv()
    buf = bytearray(status.Get_count(MPI.BYTE))
    msg.Recv([buf, MPI.BYTE])
    size = _COUNT.unpack_from(buf)[0]
    view = memoryview(buf)
    places = pickle.loads(view[_COUNT.size:_COUNT.size + size])
    source = status.Get_source()
    parts: list[Any] = []
    for place in places:
        if type(place) is tuple:
            parts.append(open_segment(*place))
            continue
        part = bytearray(place)
        comm.Recv([part, MPI.BYTE], source, tag)
        parts.append(memoryview(part))
    return tag - OOB_TAG, pickle.loads(view[_COUNT.size + size:], buffers=parts)
