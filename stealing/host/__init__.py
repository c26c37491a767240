"""This host's processes and files: which processes live (``/proc``), the user's private
state folders, the records of processes lost in a run, the shared-memory files MPI
leaves behind, the root's watch over its host's monitors and MPI's process manager,
and the stretch of the interpreter's frame stack a leaf serves on. No MPI here."""
