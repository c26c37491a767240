"""Turning arguments, results and functions into bytes for another process.

Plain ``pickle`` first (fast, and classes travel by reference so a result comes back as
the root's own class); ``cloudpickle`` when pickle cannot (lambdas, functions and
classes of the user's script). Failures say what could not be pickled and where.
"""

from __future__ import annotations

import pickle

from .errors import SerializationError

PROTOCOL = pickle.HIGHEST_PROTOCOL


def dumps(obj, what: str) -> bytes:
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
    """A ``SpawnFunction`` with its options, by value when it lives in a script."""
    import cloudpickle
    try:
        return cloudpickle.dumps(sf, PROTOCOL)
    except Exception as exc:                                # noqa: BLE001
        raise SerializationError(f"@spawn function {sf.__qualname__} cannot be pickled "
                                 f"to send it to the leaves: {type(exc).__name__}: "
                                 f"{exc}") from exc


loads = pickle.loads
