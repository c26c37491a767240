"""A spawned child for tests/test_bell.py: sends its parent one message (tag 5), then
waits for a word back (tag 6) and leaves."""
from mpi4py import MPI

parent = MPI.Comm.Get_parent()
parent.send("hello", 0, 5)
parent.recv(source=0, tag=6)
parent.Disconnect()
