"""The messages between a process and its parent or children, declared once (one
intercommunicator per parent–child link, never a global communicator: thesis §3.1).

Every message is an MPI tag (``Tag``, a plain int on the wire) and a payload: one of the
types below, or ``None`` for the tags that carry nothing. ``PAYLOADS`` says which goes
with which tag. Payloads are pickled by mpi4py; the frequent ones are ``NamedTuple``
classes of this module, which pickle by reference (a RESULTS message of 100 results:
3155 bytes and 23 µs per pickle round trip, against 3121 bytes and 18 µs as the plain
tuple it replaces; a frozen dataclass with slots is as small but slower, 30 µs). INIT,
sent once per process, is a frozen dataclass of typed settings.

Task arguments and results travel as per-task ``bytes`` pickled by the root and the
leaves, so routers forward them without unpickling (routers never import the user's
libraries). A task is a ``(task id, payload bytes)`` pair and a result a ``(task id,
result bytes)`` pair: plain 2-tuples, not types, because a message carries many of them
and each would cost a Python-level constructor call when unpickled (about 1.5 µs per
pair, ten times the cost of the tuple), on every hop of every task.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, NamedTuple

from stealing.exceptions import RemoteError
from stealing.tree.plan import StealParams
from stealing.tree.tasks import Blob, Result, Task


class Tag(enum.IntEnum):
    """The MPI tag of each kind of message (sent as its int value)."""
    INIT = 1        # parent -> child: Init
    JOB = 2         # parent -> child: Job
    TASKS = 3       # parent -> child: Tasks
    NOMORE = 4      # parent -> child: NoMore, "no more tasks for now" (a failed steal)
    RESULTS = 5     # child -> parent: Results (also the steal request)
    READY = 6       # child -> parent: Ready
    ERROR = 7       # child -> parent: Failure
    STATS_REQ = 8   # parent -> child: None, "send your statistics for the job"
    STATS = 9       # child -> parent: Stats
    STOP = 10       # parent -> child: None, end (children first), answer with BYE
    BYE = 11        # child -> parent: Bye, before Disconnect
    SPLIT = 12      # parent -> child: Split, "hand over some of your unstarted work"
    STOLEN = 13     # child -> parent: Tasks, the answer to SPLIT (may be empty)
    RETURN = 14     # parent -> child: Returned, results of work split off the subtree
    OUTPUT = 15     # child -> parent: Output, lines its tasks printed (stealing.observe.output)
    GROW = 16       # parent -> router: Grow, add leaves under it (Runtime.grow)


(INIT, JOB, TASKS, NOMORE, RESULTS, READY, ERROR, STATS_REQ, STATS, STOP, BYE, SPLIT,
 STOLEN, RETURN, OUTPUT, GROW) = Tag

# Not a message: what a mailbox hands its caller for a link whose peer died (Open MPI
# with ULFM; the payload is the MPI.Exception). Never sent, so never a tag.
LOST = -1

NAMES = {t.value: t.name for t in Tag}


def name(tag: int) -> str:
    """A tag's name for messages, or the number if it is no tag of ours."""
    return "LOST" if tag == LOST else NAMES.get(tag, str(tag))


class Job(NamedTuple):
    """JOB: the job's number and the functions its tasks call, ``{key: entry}`` (the
    executor's opaque entries; only those not sent in an earlier JOB). ``env``: on a
    warm tree, the attached script's ``ScriptEnv`` (None: the root's own, given in
    INIT).
    ``timeline``: every process records what it does (``stealing.observe.recorder``) and sends
    it with its statistics."""
    job_id: int
    functions: dict[str, Any]
    env: ScriptEnv | None = None
    timeline: bool = False


class Tasks(NamedTuple):
    """TASKS: ``[(task id, payload bytes)]`` for the child (an answered steal);
    ``seq``: the number of the child's request it answers (0: none)."""
    tasks: list[Task]
    seq: int = 0


class NoMore(NamedTuple):
    """NOMORE: "no more tasks for now", the answer to the child's request ``seq``. A
    leaf may withdraw a request (its results asking for nothing) and send another:
    an answer to an older one must not be taken for the answer to the newer."""
    seq: int = 0


class Results(NamedTuple):
    """RESULTS: ``[(task id, result bytes)]`` and the child's steal request, ``want``
    tasks (0: none); ``leaf_stats`` is a spawn-per-batch leaf's statistics record in
    its last message (it exits after it), else None. ``idle``: the child has nothing
    left to run (a leaf with an empty queue, or waiting at ``sync`` for stolen
    children; a router none of whose children can be split), so the parent may serve
    the request by splitting another child's work, not only from its pool. ``rate``
    sizes the sender's share of its parent's pool (``StealPolicy.note_rate``)."""
    results: list[Result]
    want: int
    leaf_stats: dict[str, Any] | None = None
    idle: bool = False
    seq: int = 0        # the request's number (answers name it)
    rate: float = 0.0   # tasks/s the sender's subtree runs (0: not measured yet)


class Split(NamedTuple):
    """SPLIT: hand over up to ``want`` tasks of unstarted work (a leaf: its newest
    queued tasks, then its oldest stealable spawns; a router: from its pool, or from
    every busy child, in one answer). Answered with STOLEN, at once or, by a leaf
    whose deque is empty, at its next spawn; a leaf's idle request (RESULTS with
    ``idle``) voids a split it has not answered."""
    want: int


class Grow(NamedTuple):
    """GROW: spawn ``count`` leaves under this router, on ``host`` (None: its own
    machine): leaves grown on a cluster's host join that cluster's router, so their
    steals go local before remote like its other leaves'."""
    count: int  # type: ignore[assignment]  # the field hides tuple.count; the wire's name
    host: str | None = None


class Returned(NamedTuple):
    """RETURN: ``[(task id, result bytes)]`` of spawns stolen from the child's subtree,
    on their way down to the leaf that owns them (a split task's id is ``(owner's
    path, number)``; the path is the list of child indices from the root)."""
    results: list[Result]


class Output(NamedTuple):
    """OUTPUT: what a leaf's tasks printed, ``[(stream, text)]`` with ``stream``
    "out", "err" or "note" and ``text`` whole lines (a note: one remark of dac's, no
    newline); routers pass it up unchanged (``stealing.observe.output``)."""
    pid: int
    host: str
    chunks: list[tuple[str, str]]


class Process(NamedTuple):
    """One ready process of a READY message."""
    pid: int
    host: str
    role: str           # "router" or "leaf"
    time: float         # wall clock (time.time()) when it was ready
    shm: list[str]      # its MPI shared-memory segments (removed if the run breaks)
    monitor: int = 0    # its monitor's pid (0: a spawn-per-batch leaf, not watched)


class Ready(NamedTuple):
    """READY: processes of the subtree that are ready (routers forward them up)."""
    processes: list[Process]


class Failure(NamedTuple):
    """ERROR: a task raised (or a leaf cannot start): the error the root raises.
    ``payload``: the task's payload when a router reports it (a task that killed its
    leaf too often): the root, which can read it, names the call."""
    error: RemoteError  # a TaskError or ProcessError: the call or what the process did,
    #                     the process, the remote traceback, the exception
    payload: Blob | None = None


class Stats(NamedTuple):
    """STATS: per-process statistics records of the subtree (``stealing.observe.stats``)."""
    records: list[dict[str, Any]]


class Bye(NamedTuple):
    """BYE: the pids of the subtree's processes (for the root's clean-up)."""
    pids: list[int]


@dataclass(frozen=True)
class RunSettings:
    """How the run's processes work, chosen once by the root's caller (each default
    is written here only): ``leaf_mode`` (``"persistent"`` leaves, or ``"spawn"``: a
    new leaf per batch), ``batch`` (``"rate"``: ``batch_s`` seconds of work at the
    measured rate, or ``"fixed"``: ``tasks_per_leaf``), ``remote`` (how a router asks
    its parent: ``"prefetch"`` or ``"blocking"``), ``preload`` (modules a leaf imports
    before its first job), ``gpu_simulate`` (GPU leaves use numba's CUDA simulator),
    ``prefetch`` (a leaf asks for more when half its batch is left), ``executor``
    (``"module:name"`` of the task executor a leaf loads), ``fault_tolerant`` (one
    link per child, which survives the child's death: ULFM) and ``max_attempts``
    (processes a task may lose before the run fails)."""
    leaf_mode: str = "persistent"
    batch: str = "rate"
    batch_s: float = 0.05
    remote: str = "prefetch"
    preload: tuple[str, ...] = ()
    gpu_simulate: bool = False
    prefetch: bool = True
    executor: str = ""
    fault_tolerant: bool = False
    max_attempts: int = 2


@dataclass(frozen=True)
class ScriptEnv:
    """Where a script's tasks run as they would in it: its import path (put in front
    of the process's own), ``sys.argv``, folder and recursion limit. ``session``: on
    a warm tree, the number of the script that attached (0: the tree's own root)."""
    sys_path: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()
    cwd: str = ""
    recursion_limit: int = 0
    session: int = 0


@dataclass(frozen=True)
class TreeInfo:
    """What every process learns of its tree from the root: the root's pid and host
    (the watchdog ends a process whose root is gone), the run's folder (where monitors
    record lost processes), how many leaves the tree has (with more than one, spawns
    are worth splitting) and the thesis' parameters."""
    root_pid: int
    root_host: str
    run_dir: str | None
    leaves: int
    params: StealParams


@dataclass(frozen=True)
class Init:
    """INIT: what a new process is and does. The run's ``settings``, the ``tree`` and
    the ``script`` are the same for every process (a router passes its own on), the
    rest is the child's own: its ``role`` (``"router"`` or ``"leaf"``), a router's
    node of the ``plan`` (with its children), its ``cluster``, the emulated
    ``slowdown`` of its host and ``latency_ms`` of its link to the parent, a GPU
    leaf's ``device`` (-1: none), ``one_shot`` (a spawn-per-batch leaf: one batch,
    then exit), its ``path`` (child indices from the root: the owner of work split off
    it), ``spawned_at`` (``time.time()`` of the parent's Spawn call), the
    ``parent_host`` (on one host they ring each other's bell), ``parent_rings`` (the
    parent rings this process's bell after every message it sends it) and ``joined``
    (why it joined a running tree: ``"grow"`` or ``"replace"``; empty: with the
    tree)."""
    settings: RunSettings
    tree: TreeInfo
    script: ScriptEnv
    role: str = "leaf"
    plan: dict[str, Any] | None = None
    cluster: str = "local"
    slowdown: float = 1.0
    device: int = -1
    latency_ms: float = 0.0
    one_shot: bool = False
    path: tuple[int, ...] = ()
    spawned_at: float | None = None
    parent_host: str = ""
    parent_rings: bool = False
    joined: str = ""


# What travels with each tag (None: nothing).
PAYLOADS = {
    Tag.INIT: Init, Tag.JOB: Job, Tag.TASKS: Tasks, Tag.NOMORE: NoMore,
    Tag.RESULTS: Results, Tag.READY: Ready, Tag.ERROR: Failure, Tag.STATS_REQ: None,
    Tag.STATS: Stats, Tag.STOP: None, Tag.BYE: Bye, Tag.SPLIT: Split,
    Tag.STOLEN: Tasks, Tag.RETURN: Returned, Tag.OUTPUT: Output, Tag.GROW: Grow,
}


