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

import io
import pickle
import sys
import threading
from types import FunctionType

from .errors import SerializationError

PROTOCOL = pickle.HIGHEST_PROTOCOL
SCRIPT_PREFIX = "__main__:"     # function-table key of a script object: __main__:NAME#id


def dumps(obj, what) -> bytes:
    """Pickle ``obj``; ``what`` (a string, or an object whose str() is one) names it in
    the error."""
    try:
        return pickle.dumps(obj, PROTOCOL)
    except Exception:                                       # noqa: BLE001
        pass
    import cloudpickle
    try:
        return cloudpickle.dumps(obj, PROTOCOL)
    except Exception as exc:                                # noqa: BLE001
        raise SerializationError(f"{what} cannot be pickled to send it to another "
                                 f"process: {type(exc).__name__}: {exc}") from exc


class _ScriptNoter(pickle.Pickler):
    """The C pickler, noting the script's classes and functions that it pickles by
    reference (``reducer_override`` is not called for ints, floats, strings, bytes,
    tuples, lists, dicts and sets). Reused: one per thread, see ``dumps_payload``."""

    def __init__(self):
        self.buf = io.BytesIO()
        super().__init__(self.buf, PROTOCOL)
        self.script = None

    def reducer_override(self, obj):
        if isinstance(obj, (type, FunctionType)) and obj.__module__ == "__main__":
            top = obj.__qualname__.partition(".")[0]
            value = getattr(sys.modules["__main__"], top, None)
            if "<" not in top and value is not None:        # else pickle refuses it
                if self.script is None:
                    self.script = {}
                self.script[top] = value
        return NotImplemented

    def pickle(self, obj) -> tuple:
        self.script = None
        self.dump(obj)
        buf = self.buf
        blob = buf.getvalue()
        buf.seek(0)
        buf.truncate()
        self.clear_memo()           # the memo holds the objects: keep none between calls
        return blob, self.script


_spare = threading.local()      # one reusable pickler per thread (a new one costs ~1 us)
_SCALARS = frozenset((int, float, complex, str, bytes, bool, type(None)))


def _plain(values) -> bool:
    """True when ``values`` cannot name anything of the script: scalars and NumPy
    arrays without Python objects (the common arguments, pickled at full speed)."""
    for v in values:
        t = type(v)
        if t not in _SCALARS and not (t.__name__ == "ndarray" and t.__module__ == "numpy"
                                      and not v.dtype.hasobject):
            return False
    return True


def dumps_payload(obj, what, values=(), scalars=False) -> tuple:
    """``(bytes, {name: object} or None)``: ``obj`` pickled as ``dumps`` does, and the
    script's top-level classes and functions the bytes refer to by name (see the
    module's docstring). ``values`` are the task's arguments; ``scalars`` says the
    caller already knows them to be scalars. Plain values (``_plain``) cannot refer to
    the script and ``dumps`` does it all; otherwise a reused noting pickler costs ~1 us
    more (benchmarks/payload_pickling.py).
    """
    if scalars or _plain(values):
        return dumps(obj, what), None
    pickler = _spare.__dict__.pop("pickler", None) or _ScriptNoter()
    try:
        blob, script = pickler.pickle(obj)
    except Exception:                                       # noqa: BLE001
        return dumps(obj, what), None   # the pickler is dropped: its state is unknown
    _spare.pickler = pickler
    return blob, script


def script_key(name: str, obj) -> str:
    """The function-table key of the script object ``name`` (a redefinition, e.g. in a
    notebook, gets a new key, so it is sent again)."""
    return f"{SCRIPT_PREFIX}{name}#{id(obj)}"


def script_entry(name: str, obj) -> bytes:
    """A class or function of the script, by value, for the leaves' ``__main__``."""
    import cloudpickle
    try:
        return cloudpickle.dumps(obj, PROTOCOL)
    except Exception as exc:                                # noqa: BLE001
        raise SerializationError(f"{name}, a {type(obj).__name__} of the script that "
                                 f"task arguments refer to, cannot be pickled to send "
                                 f"it to the leaves: {type(exc).__name__}: {exc}") from exc


def dumps_function(sf) -> bytes:
    """A ``SpawnFunction`` with its options, by value when it lives in a script.

    numba functions need care: numba pickles a compiled function by value and the copy
    has no on-disk cache, so every leaf would compile it again (0.3–1 s) and a recursive
    one fails to link. An ``@njit`` function of an importable module travels by
    reference (the leaf imports it, cache and all); one of the user's script travels as
    its Python source function and is compiled in the leaf with ``cache=True`` again,
    which finds the script's cache.
    """
    import io

    import cloudpickle

    class Pickler(cloudpickle.Pickler):
        def reducer_override(self, obj):
            reduced = _reduce_numba(obj)
            if reduced is not None:
                return reduced
            return super().reducer_override(obj)

    try:
        buf = io.BytesIO()
        Pickler(buf, protocol=PROTOCOL).dump(sf)
        return buf.getvalue()
    except Exception as exc:                                # noqa: BLE001
        raise SerializationError(f"@spawn function {sf.__qualname__} cannot be pickled "
                                 f"to send it to the leaves: {type(exc).__name__}: "
                                 f"{exc}") from exc


loads = pickle.loads


def _reduce_numba(obj):
    """How to pickle a numba dispatcher so the leaf keeps numba's cache, or None."""
    cls = type(obj)
    if not cls.__module__.startswith("numba.") or not hasattr(obj, "py_func"):
        return None
    py_func = obj.py_func
    module, qualname = py_func.__module__, py_func.__qualname__
    if module != "__main__" and "<locals>" not in qualname:
        import sys
        mod = sys.modules.get(module)
        if mod is not None and getattr(mod, qualname, None) is obj:
            return (_import_attr, (module, qualname))
    if type(getattr(obj, "_cache", None)).__name__ == "NullCache":
        return None
    options = {k: v for k, v in obj.targetoptions.items() if k != "nopython"}
    return (_cached_njit, (py_func, options))


def _import_attr(module: str, name: str):
    import importlib
    return getattr(importlib.import_module(module), name)


def _cached_njit(py_func, options):
    from numba import njit
    return njit(cache=True, **options)(py_func)
