"""Turning arguments, results and functions into bytes for another process.

Plain ``pickle`` first (fast, and classes travel by reference so a result comes back as
the root's own class); ``cloudpickle`` when pickle cannot (lambdas, local functions and
classes). Failures say what could not be pickled and where.

Classes and functions of the user's script (``__main__``) pickle by reference too, but
a leaf's ``__main__`` is not the script: a task's arguments are pickled with
``dumps_payload``, which also names the script objects they refer to. The root sends
those once, by value, with the job's functions (``script_entry``), and the leaves put
them in their own ``__main__`` (``dac.execution.load_table``). A payload then stays as
small as a plain pickle, and a result naming ``__main__.Box`` comes back as the root's
own ``Box``, untouched (cloudpickle would overwrite the root's class with the copy).
"""

from __future__ import annotations

import importlib
import io
import linecache
import marshal
import pickle
import sys
import threading
from types import CodeType, FunctionType
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable, Tuple, cast

from stealing.transport import frames
from stealing.transport.frames import taker
from stealing.transport.segments import Gone, consumed
from stealing.tree.tasks import Blob

from . import object_state
from .errors import SerializationError

if TYPE_CHECKING:
    from .spawn import SpawnFunction

    # what ``pickle``'s reducer protocol gives back: (callable, its arguments)
    Reduced = Tuple[Callable[..., Any], tuple]

PROTOCOL = pickle.HIGHEST_PROTOCOL
SCRIPT_PREFIX = "__main__:"     # function-table key of a script object: __main__:NAME#id


def dumps(obj: Any, what: object) -> Blob:
    """Pickle ``obj``; ``what`` (a string, or an object whose str() is one) names it in
    the error. Large buffers (NumPy arrays) stay out of the stream: ``(stream,
    buffer, ...)`` (``stealing.tree.tasks.Blob``), which ``loads`` takes back."""
    try:
        data, bufs = frames.dumps(obj)
        return (data, *bufs) if bufs else data
    except Exception:                                       # noqa: BLE001
        pass
    return _by_value(obj, lambda: f"{what} cannot be pickled to send it to another "
                                  f"process", source=False)


class _ScriptNoter(pickle.Pickler):
    """The C pickler, noting the script's classes and functions that it pickles by
    reference (``reducer_override`` is not called for ints, floats, strings, bytes,
    tuples, lists, dicts and sets), and pickling the call's own arguments, where they
    are plain objects, so that their attributes stay fast to read at both ends
    (``dac.object_state``: 1-2 us an object more, so not the objects they hold).
    Reused: one per thread, see ``dumps_payload``."""

    def __init__(self) -> None:
        self.buf = io.BytesIO()
        self.bufs: list[pickle.PickleBuffer] = []     # out of the stream (see dumps)
        super().__init__(self.buf, PROTOCOL, buffer_callback=taker(self.bufs))
        self.script: dict[str, Any] | None = None
        self.arguments: set[int] = set()     # ids of the call's own arguments

    def reducer_override(self, obj: Any) -> Any:
        if not isinstance(obj, (type, FunctionType)):
            if id(obj) in self.arguments:
                return object_state.reduce(obj)
            return NotImplemented
        if obj.__module__ == "__main__":
            top = obj.__qualname__.partition(".")[0]
            value = getattr(sys.modules["__main__"], top, None)
            if "<" not in top and value is not None:        # else pickle refuses it
                if self.script is None:
                    self.script = {}
                self.script[top] = value
        return NotImplemented

    def pickle(self, obj: Any, arguments: Iterable[Any] = ()
               ) -> tuple[Blob, dict[str, Any] | None]:
        """``obj`` pickled, and the script objects it names; ``arguments`` are the
        call's (alive meanwhile: their ids stand for them)."""
        self.script = None
        self.arguments.update(map(id, arguments))
        self.bufs.clear()
        self.dump(obj)
        buf = self.buf
        blob: Blob = buf.getvalue()
        buf.seek(0)
        buf.truncate()
        self.clear_memo()           # the memo holds the objects: keep none between calls
        self.arguments.clear()
        if self.bufs:
            blob = (blob, *self.bufs)
            self.bufs.clear()
        return blob, self.script


_spare = threading.local()      # one reusable pickler per thread (a new one costs ~1 us)
_SCALARS = frozenset((int, float, complex, str, bytes, bool, type(None)))


def _plain(values: Iterable[Any]) -> bool:
    """True when ``values`` cannot name anything of the script: scalars and NumPy
    arrays without Python objects (the common arguments, pickled at full speed)."""
    for v in values:
        t = type(v)
        if t not in _SCALARS and not (t.__name__ == "ndarray" and t.__module__ == "numpy"
                                      and not v.dtype.hasobject):
            return False
    return True


def dumps_payload(obj: Any, what: object, values: Iterable[Any] = (),
                  scalars: bool = False) -> tuple[Blob, dict[str, Any] | None]:
    """``(bytes, {name: object} or None)``: ``obj`` pickled as ``dumps`` does, and the
    script's top-level classes and functions the bytes refer to by name (see the
    module's docstring). ``values`` are the task's arguments; ``scalars`` says the
    caller already knows them to be scalars: they hold no buffer to keep out of the
    stream and cannot fail, so they are pickled straight (the root writes one payload
    per task of its pass: 1.0 us where ``dumps`` took 1.7). Plain values (``_plain``)
    cannot refer to the script and ``dumps`` does it all; otherwise a reused noting
    pickler costs ~1 us more (benchmarks/payload_pickling.py).
    """
    if scalars:
        return pickle.dumps(obj, PROTOCOL), None
    if _plain(values):
        return dumps(obj, what), None
    pickler = _spare.__dict__.pop("pickler", None) or _ScriptNoter()
    try:
        blob, script = pickler.pickle(obj, values)
    except Exception:                                       # noqa: BLE001
        return dumps(obj, what), None   # the pickler is dropped: its state is unknown
    _spare.pickler = pickler
    return blob, script


def script_key(name: str, obj: object) -> str:
    """The function-table key of the script object ``name`` (a redefinition, e.g. in a
    notebook, gets a new key, so it is sent again)."""
    return f"{SCRIPT_PREFIX}{name}#{id(obj)}"


def script_entry(name: str, obj: object) -> bytes:
    """A class or function of the script, by value, for the leaves' ``__main__``."""
    return _by_value(obj, lambda: f"{name}, a {type(obj).__name__} of the script that "
                                  f"task arguments refer to, cannot be pickled to send "
                                  f"it to the leaves")


def dumps_function(sf: SpawnFunction) -> bytes:
    """A ``SpawnFunction`` with its options, by value when it lives in a script.

    numba functions need care: numba pickles a compiled function by value and the copy
    has no on-disk cache, so every leaf would compile it again (0.3–1 s) and a recursive
    one fails to link. An ``@njit`` function of an importable module travels by
    reference (the leaf imports it, cache and all); one of the user's script travels as
    its Python source function and is compiled in the leaf with a cache again
    (``dac.kernels``), which finds the script's own.
    """
    return _by_value(sf, lambda: f"@spawn function {sf.__qualname__} cannot be "
                                 f"pickled to send it to the leaves")


def _by_value(obj: Any, failure: Callable[[], str], source: bool = True) -> bytes:
    """``obj`` pickled by ``script_pickler`` (see ``_make_script_pickler``); if it
    cannot be, a ``SerializationError`` starting with ``failure()`` (a message is
    made only then: naming a call formats its arguments)."""
    buf = io.BytesIO()
    try:
        script_pickler(buf, source).dump(obj)
    except Exception as exc:                                # noqa: BLE001
        raise SerializationError(f"{failure()}: {type(exc).__name__}: {exc}") from exc
    return buf.getvalue()


def _make_script_pickler() -> Callable[[IO[bytes], bool], pickle.Pickler]:
    """The pickler class of ``script_pickler``, made on first use: the root imports
    cloudpickle only when something must travel by value."""
    import cloudpickle  # lazy: ~50 ms; only what travels by value needs it

    class ScriptPickler(cloudpickle.Pickler):
        """cloudpickle, with two things kept that it would lose.

        * Code objects keep their file name and line numbers (cloudpickle 3.1.3 and
          later name every function pickled by value ``<dynamic-code>``): a task's
          traceback then names the user's file and line, and numba finds the
          script's on-disk cache. With ``source``, the lines of that file travel too,
          so the traceback shows the source line on a host without the file (a
          notebook cell, a host with no shared filesystem).
        * numba dispatchers travel as their Python function, compiled again in the
          leaf with a cache (``_reduce_numba``).

        And a function ``@spawn`` returned travels as its ``SpawnFunction``: it is
        made again where it arrives (``SpawnFunction.function_of``), where a copy
        of its code would carry this process's context variable.
        """

        def __init__(self, file: IO[bytes], source: bool = True) -> None:
            super().__init__(file, protocol=PROTOCOL)
            self.source = source

        def reducer_override(self, obj: Any) -> Any:
            if type(obj) is CodeType:
                return _reduce_code(obj, self.source)
            reduced = _reduce_numba(obj)
            if reduced is not None:
                return reduced
            if type(obj) is FunctionType and "__dac_spawn__" in obj.__dict__:
                sf = obj.__dict__["__dac_spawn__"]
                return type(sf).function_of, (sf,)
            return super().reducer_override(obj)

    return ScriptPickler


# [the class script_pickler makes instances of], once made
_pickler_class: list[Callable[[IO[bytes], bool], pickle.Pickler]] = []


def script_pickler(file: IO[bytes], source: bool = True) -> pickle.Pickler:
    """A cloudpickle pickler writing to ``file`` that keeps code objects' file names
    and numba kernels' caches (see ``_make_script_pickler``)."""
    if not _pickler_class:
        _pickler_class.append(_make_script_pickler())
    return _pickler_class[0](file, source)


def _reduce_code(code: CodeType, source: bool) -> Reduced:
    """A code object as ``marshal`` writes it (everything kept: file name, line
    table, nested code), with its file's lines when ``source``."""
    lines = None
    if source:
        lines = linecache.getlines(code.co_filename) or None
    return _load_code, (marshal.dumps(code), code.co_filename, lines)


def _load_code(data: bytes, filename: str, lines: list[str] | None) -> CodeType:
    """The code object back; its file's lines, when they came, go into ``linecache``
    under the file's name (a traceback shows them; an entry with no modification
    time is one ``linecache.checkcache`` keeps)."""
    if lines:
        linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)
    return marshal.loads(data)


def loads(blob: Blob) -> Any:
    """The value of a ``dumps``: a stream, or a stream and its buffers. Buffers that
    came from another process are used in place (a shared-memory segment's name is
    removed now: this process is where it was going); a blob that never left this
    process (a task the root runs itself) still refers to the caller's arrays, which
    are copied: a task gets its own arguments wherever it runs."""
    if type(blob) is tuple:
        parts = [bytearray(b) if type(b) is pickle.PickleBuffer else b for b in blob[1:]]
        for part in parts:
            if type(part) is Gone:
                raise SerializationError(f"a buffer of this value was sent in shared "
                                         f"memory that is gone ({part.why}: {part.name})")
        value = pickle.loads(blob[0], buffers=parts)
        for part in parts:
            consumed(part)
        return value
    return pickle.loads(cast(bytes, blob))


def _reduce_numba(obj: Any) -> Reduced | None:
    """How to pickle a numba dispatcher so the leaf keeps numba's cache, or None."""
    cls = type(obj)
    if not cls.__module__.startswith("numba.") or not hasattr(obj, "py_func"):
        return None
    py_func = obj.py_func
    module, qualname = py_func.__module__, py_func.__qualname__
    if module != "__main__" and "<locals>" not in qualname:
        mod = sys.modules.get(module)
        if mod is not None and getattr(mod, qualname, None) is obj:
            return (_import_attr, (module, qualname))
    if type(getattr(obj, "_cache", None)).__name__ == "NullCache":
        return None
    options = {k: v for k, v in obj.targetoptions.items() if k != "nopython"}
    return (_cached_njit, (py_func, options))


def _import_attr(module: str, name: str) -> Any:
    """``module.name``, imported (a numba kernel of an importable module)."""
    return getattr(importlib.import_module(module), name)


def _cached_njit(py_func: FunctionType, options: dict[str, Any]) -> Any:
    """A script's ``@njit(cache=True)`` kernel, compiled here with a cache (imports
    numba: only a leaf that runs such a kernel pays for it)."""
    from .kernels import cached_njit  # lazy: imports numba (0.3-1 s)
    return cached_njit(py_func, options)
