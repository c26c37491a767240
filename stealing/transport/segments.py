"""Large buffers between processes of one host, through shared memory.

Over MPI a buffer is received into a fresh ``bytearray`` and, at a router or the root
that passes it on, received again and sent again (an 80 MB half of an array passed
on by the root: 98 ms receiving it, 81 ms sending it). Between two processes of the
same host, a buffer of ``SHM_MIN`` bytes or more goes instead into a file of its own
in ``/dev/shm`` (one ``write``: one copy, at 2.1-2.6 GB/s here, the speed at which
this machine hands out fresh pages), and the message carries its name. The receiver
maps the file copy-on-write: the array it unpickles uses the file's pages with no
copy, and writes to it stay its own, as with a buffer received over MPI. A router
passes a received segment on by its name (no copy at all); the process that finally
unpickles it (``dac.serialize.loads``) removes the name (``consumed``), and its pages
go when the last mapping does. Measured on 2 leaves (``benchmarks/array_transfer.py``,
the whole ``run`` call, over MPI before): a 160 MB array to a leaf 1.73-1.91 GB/s
(1.42-1.54), back 1.85-2.03 (1.19-1.30); 16 arrays of 1 MB in one task 1.69-1.70
(1.11-1.19); a 160 MB array summed by halves on 2 leaves 0.17-0.28 s (0.58-0.67).
A single 16 MB array went faster over MPI in that benchmark (1.5-1.8 against
2.9-3.9 GB/s): its receiver's allocator reused the memory of the one before, where a
segment's pages are always fresh.

A segment is ``/dev/shm/dac-<uid>-<root pid>-<pid>-<token>-<n>``: made by its sender
with ``O_EXCL`` and mode 0600 (a name another user took first is not used: the buffer
goes over MPI), and opened by its receiver only if it is a regular file of the same
user that no other user can read. Segments of a message that was never unpickled
(a job that failed, a process that was lost) are removed with the job
(``sweep``): the root removes those of its own tree when a job ends and when the tree
stops, and those of roots that are gone when a tree starts.

``/dev/shm`` missing, too small or full (a container's 64 MB): that buffer and every
later one of the process go over MPI.
"""

from __future__ import annotations

import errno
import mmap
import os
import re
import stat
import weakref

FOLDER = "/dev/shm"
SHM_MIN = 1 << 19       # smaller buffers go over MPI: a file each costs ~30 us more
NAME = re.compile(r"dac-(\d+)-(\d+)-\d+-[0-9a-f]+-\d+")


class Mapping(mmap.mmap):
    """A segment mapped copy-on-write into this process; ``name`` is its file name
    (a received part is a ``memoryview`` of one: ``part.obj``)."""

    name: str


class Gone:
    """A part whose segment could not be opened (its job ended and it was removed;
    the reason is in ``why``): loading the message that holds it fails with it."""

    def __init__(self, name: str, why: str) -> None:
        self.name, self.why = name, why

    def __repr__(self) -> str:
        return f"<shared-memory segment {self.name}: {self.why}>"


def segment_of(part: object) -> str | None:
    """The segment name of a received part (a ``memoryview`` of a whole ``Mapping``),
    or None for any other buffer."""
    if type(part) is memoryview:
        owner = part.obj
        if type(owner) is Mapping and part.nbytes == len(owner):
            return owner.name
    return None


class Segments:
    """The segments this process makes for the tree of ``root_pid``."""

    def __init__(self, root_pid: int) -> None:
        # (os.urandom, as secrets.token_hex is: importing secrets cost every spawned
        # process 5 ms, a tenth of its imports)
        self.prefix = f"dac-{os.getuid()}-{root_pid}-{os.getpid()}-{os.urandom(4).hex()}-"
        self.made = 0
        self.broken = False         # /dev/shm refused a segment: MPI from then on

    def place(self, raw: memoryview) -> str | None:
        """The name of a new segment holding a copy of ``raw`` (contiguous bytes),
        or None where ``/dev/shm`` would not take it."""
        if self.broken:
            return None
        name = f"{self.prefix}{self.made}"
        self.made += 1
        path = os.path.join(FOLDER, name)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno != errno.EEXIST:       # (another user's file: the next name)
                self.broken = True
            return None
        try:
            done = 0
            while done < raw.nbytes:
                done += os.write(fd, raw[done:])
        except OSError:             # no space left: this buffer and the next go by MPI
            self.broken = True
            _unlink(path)
            return None
        finally:
            os.close(fd)
        return name


# the segments this process maps, by name, while it does: a part passed on and back
# (a router's, a leaf's own split given back) is mapped once
_mapped: weakref.WeakValueDictionary[str, Mapping] = weakref.WeakValueDictionary()


def open_segment(name: str, size: int) -> memoryview | Gone:
    """The segment ``name`` of ``size`` bytes, mapped (or the one already mapped
    here), or a ``Gone`` that says why not."""
    m = _mapped.get(name)
    if m is not None:
        return memoryview(m)
    if NAME.fullmatch(name) is None:
        return Gone(name, "not a segment name of dac")
    try:
        fd = os.open(os.path.join(FOLDER, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return Gone(name, exc.strerror or str(exc))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() \
                or st.st_mode & 0o077 or st.st_size != size:
            return Gone(name, f"not a private file of this user of {size} bytes")
        m = Mapping(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except (OSError, ValueError) as exc:
        return Gone(name, str(exc))
    finally:
        os.close(fd)
    m.name = name
    _mapped[name] = m
    return memoryview(m)


def consumed(part: object) -> None:
    """``part`` was unpickled where it was going: its segment's name is removed (its
    pages stay while this process maps them). Any other buffer: nothing to do."""
    name = segment_of(part)
    if name is not None:
        _unlink(os.path.join(FOLDER, name))


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def sweep(root_pid: int | None = None) -> int:
    """Remove this user's segments of the tree of ``root_pid`` (None: of the trees
    whose root is no longer running); returns how many were removed."""
    uid = os.getuid()
    try:
        names = os.listdir(FOLDER)
    except OSError:
        return 0
    removed = 0
    for name in names:
        match = NAME.fullmatch(name)
        if match is None or int(match[1]) != uid:
            continue
        root = int(match[2])
        if (root != root_pid) if root_pid is not None else _alive(root):
            continue
        path = os.path.join(FOLDER, name)
        try:
            if os.lstat(path).st_uid == uid:
                os.unlink(path)
                removed += 1
        except OSError:
            pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True             # another user's process
    return True
