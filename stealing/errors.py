"""The base of the framework's errors, at the bottom of the import graph.

Users know it as ``dac.DacError``: ``dac.errors`` re-exports it, and its ``__module__``
says so. It is defined here, below ``dac`` and ``launcher``, so that an error of a lower
layer (``launcher.topology.TopologyError``) is a ``DacError`` too (``except
dac.DacError`` catches it) while imports still only go down (DESIGN §8).
"""


class DacError(Exception):
    """Base of dac's own errors."""

    __module__ = "dac.errors"       # its public home: tracebacks and pickles name it there
