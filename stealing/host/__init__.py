"""This host's processes and files: which processes live (``/proc``), the user's private
state folders, the records of processes lost in a run, the shared-memory files MPI
leaves behind, and the root's watch over its host's monitors and MPI's process
manager. No MPI here."""
