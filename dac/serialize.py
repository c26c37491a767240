"""Turning arguments, results and functions into bytes for another process.

Plain ``pickle`` first (fast, and classes travel by reference so a result comes back as
the root's own class); ``cloudpickle`` when pickle cannot (lambdas, functions and
classes of the user's script). Failures say what could not be pickled and where.
"""

from __future__ import annotations

import pickle

from .errors import SerializationError

PROTOCOL = pickle.HIGHEST_PROTOCOL


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
