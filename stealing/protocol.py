"""Message tags between a process and its parent or children (one intercommunicator
per parent–child link, never a global communicator: thesis §3.1).

Payloads are plain Python objects pickled by mpi4py. Task arguments and results travel
as per-task ``bytes`` pickled by the root and the leaves, so routers forward them without
unpickling (routers never import the user's libraries).
"""

INIT = 1        # parent -> child: dict with role, plan, params, leaf mode, sys.path, ...
JOB = 2         # parent -> child: (job_id, {function key: cloudpickled SpawnFunction})
TASKS = 3       # parent -> child: list of task payloads (bytes)
NOMORE = 4      # parent -> child: "no more tasks for now" (a failed steal)
RESULTS = 5     # child -> parent: (results [(task id, bytes)], want, leaf stats or None)
READY = 6       # child -> parent: [(pid, host, role, wall time)] of ready processes
ERROR = 7       # child -> parent: dict describing a task's exception
STATS_REQ = 8   # parent -> child: send your statistics for the job
STATS = 9       # child -> parent: list of per-process statistics dicts
STOP = 10       # parent -> child: end (children first), answer with BYE
BYE = 11        # child -> parent: (pids of the subtree's processes) before Disconnect

NAMES = {v: k for k, v in dict(globals()).items() if isinstance(v, int) and k.isupper()}
