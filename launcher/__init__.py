"""The command line (``dac``) and the glue that starts a run under Open MPI's launcher:
the top layer, above ``dac``. ``launcher.load_topology`` reads a topology file (the
reader itself lives in ``stealing.tree.topology``)."""

from stealing.tree.topology import load_topology

__all__ = ["load_topology"]
