"""How processes of a run reach each other: starting MPI in the root and ending it,
spawning children (``MPI_Comm_spawn``), the messages between a parent and its children
(declared once, as types), the mailbox that waits for them without spinning, and the
doorbells that wake a waiting process."""
