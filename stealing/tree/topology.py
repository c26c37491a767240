"""Topology files: the clusters, hosts and stealing parameters of a run.

A topology is TOML, read with the standard library's ``tomllib``::

    [stealing]                 # optional; these are the defaults
    branches = 4               # (the thesis' Figure 5.4: 2 and 2)
    min_procs = 24
    tasks_per_leaf = 5
    steal_factor = 2.0

    [[clusters]]
    name = "labtec"
    hosts = [{ name = "labtec[01-20]", slots = 2 }]     # a range: labtec01 .. labtec20

    [[clusters]]
    name = "corisco"
    latency_ms = 20            # emulated one-way delay between this cluster and the root
    hosts = [{ name = "corisco[01-14]", slots = 2, slowdown = 2.0 },
             { name = "gpu01", slots = 4, gpus = 1 }]

A cluster may instead name an MPI hostfile (``hostfile = "hosts.txt"``) or take the Slurm
allocation of the job (``slurm = true``). Errors name the file, the key and what is
wrong; nothing is spawned from a topology that did not validate.
"""

from __future__ import annotations

import difflib
import os
import re
import socket
from dataclasses import dataclass, field
from typing import Any, Mapping

from stealing.exceptions import DacError

TOP_KEYS = ("stealing", "clusters")
STEALING_KEYS = ("branches", "min_procs", "tasks_per_leaf", "steal_factor")
CLUSTER_KEYS = ("name", "hosts", "hostfile", "slurm", "latency_ms")
HOST_KEYS = ("name", "slots", "gpus", "slowdown")
# the largest values a topology may give: more is a typo, or a tree no machine could
# start (a million slots planned 951,422 routers and took 13 s before this check)
LIMITS = {"slots": 4096, "gpus": 64, "procs": 100_000, "branches": 1024,
          "min_procs": 4096, "tasks_per_leaf": 1_000_000, "steal_factor": 1000,
          "latency_ms": 60_000, "slowdown": 1000}


def is_this_machine(host: str | None) -> bool:
    """Names dac spawns on without naming a host: MPI starts those processes here."""
    return not host or host in ("localhost", "127.0.0.1", socket.gethostname())


class TopologyError(DacError, ValueError):
    """A topology that cannot be used; the message names the file and the key."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source, self.key, self.problem = source, key, problem
        where = f"{source}: {key}" if key else source
        super().__init__(f"{where}: {problem}")


@dataclass
class Host:
    name: str
    slots: int
    gpus: int = 0
    slowdown: float = 1.0


@dataclass
class Cluster:
    name: str
    hosts: list[Host]
    latency_ms: float = 0.0

    @property
    def slots(self) -> int:
        return sum(h.slots for h in self.hosts)

    @property
    def procs(self) -> int:
        """Leaves of the cluster: one per slot and one per GPU."""
        return sum(h.slots + h.gpus for h in self.hosts)


@dataclass
class Topology:
    clusters: list[Cluster]
    stealing: dict[str, Any] = field(default_factory=dict)
    source: str = "<default>"
    local: bool = False         # every host mapped onto this machine (``localized``)

    @property
    def slots(self) -> int:
        return sum(c.slots for c in self.clusters)

    @property
    def procs(self) -> int:
        return sum(c.procs for c in self.clusters)

    def hosts(self) -> list[Host]:
        return [h for c in self.clusters for h in c.hosts]

    def localized(self) -> "Topology":
        """Every host mapped onto this machine, clusters and latencies kept (``--local``)."""
        here = socket.gethostname()
        clusters = [Cluster(c.name, [Host(here, h.slots, h.gpus, h.slowdown)
                                     for h in c.hosts], c.latency_ms)
                    for c in self.clusters]
        return Topology(clusters, dict(self.stealing), self.source + " (--local)", True)


def local_topology(procs: int | None = None, gpus: int = 0) -> Topology:
    """The default: one cluster, this host, one slot per core (and ``gpus`` GPUs)."""
    if procs is None:
        procs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else (os.cpu_count() or 1)
    return Topology([Cluster("local", [Host(socket.gethostname(), procs, gpus)])])


# parsing ---------------------------------------------------------------------------
def load_topology(path: str | os.PathLike[str]) -> Topology:
    """Read and validate a topology file (names are not resolved: see ``check_hosts``)."""
    # tomllib is new in Python 3.11 (dac runs on 3.10 without topology files, and mypy
    # checks as 3.10); importing it costs a spawned router 6 ms it never needs
    import tomllib  # type: ignore[import-not-found]  # 3.11+ # lazy: not in 3.10; 6 ms
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise TopologyError(path, "", "no such file") from None
    except IsADirectoryError:
        raise TopologyError(path, "", "is a directory, not a topology file") from None
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(path, "", f"TOML syntax error: {exc}") from None
    except UnicodeDecodeError:
        raise TopologyError(path, "", "is not a text file (a topology file is TOML, "
                            "UTF-8 text)") from None
    except OSError as exc:
        raise TopologyError(path, "", f"cannot be read: {exc.strerror}") from None
    return parse_topology(data, path)


def parse_topology(data: dict[str, Any], source: str = "<topology>") -> Topology:
    """Validate a topology's parsed TOML ``data`` (``source`` names it in errors)."""
    _unknown(data, TOP_KEYS, source, "")
    stealing = _stealing_table(data, source)
    raw = data.get("clusters")
    if raw is None:
        raise TopologyError(source, "clusters", "missing: a topology names at least one "
                            "cluster ([[clusters]] with name and hosts)")
    if not isinstance(raw, list) or not raw:
        raise TopologyError(source, "clusters", "must be a non-empty array of tables "
                            "([[clusters]])")
    clusters: list[Cluster] = []
    names: set[str] = set()
    seen_hosts: dict[str, str] = {}
    for i, c in enumerate(raw):
        clusters.append(_parse_cluster(i, c, source, names, seen_hosts))
    topology = Topology(clusters, dict(stealing), source)
    if topology.procs > LIMITS["procs"]:
        raise TopologyError(source, "clusters", f"asks for {topology.procs} processes "
                            f"(slots and gpus of every host), more than the "
                            f"{LIMITS['procs']} a dac tree may have")
    return topology


def _stealing_table(data: dict[str, Any], source: str) -> dict[str, Any]:
    """The ``[stealing]`` table, checked before any cluster (its errors come first)."""
    stealing = data.get("stealing", {})
    if not isinstance(stealing, dict):
        raise TopologyError(source, "stealing", "must be a table ([stealing])")
    _unknown(stealing, STEALING_KEYS, source, "stealing")
    for key in ("branches", "min_procs", "tasks_per_leaf"):
        if key in stealing:
            _int(stealing[key], source, f"stealing.{key}", 2 if key == "branches" else 1,
                 LIMITS[key])
    if "steal_factor" in stealing:
        sf = stealing["steal_factor"]
        if isinstance(sf, bool) or not isinstance(sf, (int, float)) or \
                not 1 < sf <= LIMITS["steal_factor"]:
            raise TopologyError(source, "stealing.steal_factor",
                                f"must be a number > 1 and <= "
                                f"{LIMITS['steal_factor']}, got {sf!r}")
    return stealing


def _parse_cluster(i: int, c: object, source: str, names: set[str],
                   seen_hosts: dict[str, str]) -> Cluster:
    """Cluster number ``i`` of the file; ``names`` and ``seen_hosts`` (host name ->
    the cluster that has it) are those of the clusters before it, and grow with it:
    a name or a host given twice is an error."""
    key = f"clusters[{i}]"
    if not isinstance(c, dict):
        raise TopologyError(source, key, "must be a table")
    _unknown(c, CLUSTER_KEYS, source, key)
    name = c.get("name", f"cluster{i}")
    if not isinstance(name, str) or not name.strip():
        raise TopologyError(source, f"{key}.name", f"must be a non-empty string, "
                            f"got {name!r}")
    if name in names:
        raise TopologyError(source, f"{key}.name", f"duplicate cluster name {name!r}")
    names.add(name)
    latency = c.get("latency_ms", 0.0)
    if isinstance(latency, bool) or not isinstance(latency, (int, float)) \
            or not 0 <= latency <= LIMITS["latency_ms"]:
        raise TopologyError(source, f"{key}.latency_ms",
                            f"must be a number from 0 to {LIMITS['latency_ms']}, "
                            f"got {latency!r}")
    hosts = _cluster_hosts(c, source, key)
    if not hosts:
        raise TopologyError(source, f"{key}.hosts", f"cluster {name!r} has no hosts")
    for h in hosts:
        if h.name in seen_hosts:
            raise TopologyError(source, f"{key}.hosts", f"duplicate host {h.name!r} "
                                f"(already in {seen_hosts[h.name]})")
        seen_hosts[h.name] = f"cluster {name!r}"
    return Cluster(name, hosts, float(latency))


def _cluster_hosts(c: dict[str, Any], source: str, key: str) -> list[Host]:
    given = [k for k in ("hosts", "hostfile", "slurm") if k in c and c[k] is not False]
    if len(given) != 1:
        raise TopologyError(source, key, "give exactly one of hosts, hostfile or "
                            f"slurm = true (got {', '.join(given) or 'none'})")
    if "hostfile" in c:
        path = c["hostfile"]
        if not isinstance(path, str) or not path:
            raise TopologyError(source, f"{key}.hostfile", "must be a file name")
        if not os.path.isabs(path):
            path = os.path.join(os.path.dirname(os.path.abspath(source)), path)
        return read_hostfile(path)
    if "slurm" in c:
        if c["slurm"] is not True:
            raise TopologyError(source, f"{key}.slurm", "must be true")
        return slurm_hosts()
    raw = c["hosts"]
    if not isinstance(raw, list):
        raise TopologyError(source, f"{key}.hosts", "must be an array of host tables")
    hosts: list[Host] = []
    for j, h in enumerate(raw):
        hk = f"{key}.hosts[{j}]"
        if not isinstance(h, dict):
            raise TopologyError(source, hk, "must be a table like "
                                "{ name = \"node01\", slots = 2 }")
        _unknown(h, HOST_KEYS, source, hk)
        name = h.get("name")
        if not isinstance(name, str) or not name.strip():
            raise TopologyError(source, f"{hk}.name", f"must be a non-empty host name, "
                                f"got {name!r}")
        if "slots" not in h:
            raise TopologyError(source, f"{hk}.slots", "missing (processors of the host)")
        slots = _int(h["slots"], source, f"{hk}.slots", 1, LIMITS["slots"])
        gpus = _int(h.get("gpus", 0), source, f"{hk}.gpus", 0, LIMITS["gpus"])
        slowdown = h.get("slowdown", 1.0)
        if isinstance(slowdown, bool) or not isinstance(slowdown, (int, float)) \
                or not 1 <= slowdown <= LIMITS["slowdown"]:
            raise TopologyError(source, f"{hk}.slowdown", f"must be a number from 1 to "
                                f"{LIMITS['slowdown']} (how many times slower this "
                                f"host is emulated), got {slowdown!r}")
        try:
            names = expand_range(name)
        except ValueError as exc:
            raise TopologyError(source, f"{hk}.name", str(exc)) from None
        hosts.extend(Host(n, slots, gpus, float(slowdown)) for n in names)
        if len(hosts) > LIMITS["procs"]:
            raise TopologyError(source, f"{hk}.name", f"the cluster has more than "
                                f"{LIMITS['procs']} hosts")
    return hosts


def _unknown(table: dict[str, Any], known: tuple[str, ...], source: str,
             prefix: str) -> None:
    """A key of ``table`` not in ``known`` is an error naming the closest known one."""
    for k in table:
        if k not in known:
            close = difflib.get_close_matches(k, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else \
                f"; known keys: {', '.join(known)}"
            raise TopologyError(source, f"{prefix}.{k}" if prefix else k,
                                f"unknown key{hint}")


def _int(value: object, source: str, key: str, minimum: int, maximum: int) -> int:
    """``value``, an integer from ``minimum`` to ``maximum`` (not a bool), or an error."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyError(source, key, f"must be an integer from {minimum} to "
                            f"{maximum}, got {value!r}")
    if not minimum <= value <= maximum:
        raise TopologyError(source, key, f"must be from {minimum} to {maximum}, got "
                            f"{value}")
    return value


_RANGE = re.compile(r"^(?P<pre>[^\[\]]*)\[(?P<lo>\d+)-(?P<hi>\d+)\](?P<post>[^\[\]]*)$")


def expand_range(name: str) -> list[str]:
    """``node[01-03]`` -> ``node01, node02, node03`` (width kept); other names as is."""
    m = _RANGE.match(name)
    if not m:
        if "[" in name or "]" in name:
            raise ValueError(f"bad host range {name!r}: write it like node[01-20]")
        return [name]
    lo, hi = m["lo"], m["hi"]
    if int(hi) < int(lo):
        raise ValueError(f"bad host range {name!r}: {hi} < {lo}")
    if int(hi) - int(lo) >= LIMITS["procs"]:
        raise ValueError(f"bad host range {name!r}: more than {LIMITS['procs']} hosts")
    width = len(lo) if lo.startswith("0") else 0
    return [f"{m['pre']}{i:0{width}d}{m['post']}" for i in range(int(lo), int(hi) + 1)]


# other sources of one cluster --------------------------------------------------------
def read_hostfile(path: str) -> list[Host]:
    """An MPI hostfile: ``host``, ``host:N``, ``host slots=N`` (MPICH and Open MPI)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise TopologyError(path, "", f"cannot read hostfile: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise TopologyError(path, "", "is not a text file (a hostfile names a host "
                            "per line)") from None
    hosts: list[Host] = []
    seen: set[str] = set()
    for n, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"^([A-Za-z0-9_.\-]+)(?::(\d+))?(?:\s+slots\s*=\s*(\d+))?"
                     r"(?:\s+max[-_]slots\s*=\s*\d+)?$", line)
        if not m:
            raise TopologyError(path, f"line {n}", f"cannot read {line!r}: write host, "
                                "host:slots or host slots=N")
        slots = int(m[2] or m[3] or 1)
        if not 1 <= slots <= LIMITS["slots"]:
            raise TopologyError(path, f"line {n}", f"slots must be from 1 to "
                                f"{LIMITS['slots']}, got {slots}")
        if m[1] in seen:
            raise TopologyError(path, f"line {n}", f"duplicate host {m[1]!r}")
        seen.add(m[1])
        hosts.append(Host(m[1], slots))
    if not hosts:
        raise TopologyError(path, "", "the hostfile names no host")
    return hosts


def slurm_hosts(env: Mapping[str, str] | None = None) -> list[Host]:
    """The hosts of a Slurm allocation (``SLURM_JOB_NODELIST``, ``SLURM_TASKS_PER_NODE``)."""
    env = os.environ if env is None else env
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    tasks = env.get("SLURM_TASKS_PER_NODE")
    if not nodelist or not tasks:
        raise TopologyError("environment", "SLURM_JOB_NODELIST",
                            "not inside a Slurm allocation (SLURM_JOB_NODELIST and "
                            "SLURM_TASKS_PER_NODE are not both set)")
    names = parse_slurm_nodelist(nodelist)
    counts = parse_slurm_tasks(tasks)
    if len(counts) != len(names):
        raise TopologyError("environment", "SLURM_TASKS_PER_NODE",
                            f"gives {len(counts)} counts for {len(names)} nodes")
    return [Host(n, c) for n, c in zip(names, counts)]


def parse_slurm_nodelist(text: str) -> list[str]:
    """``a[01-03,07],b5`` -> ``a01 a02 a03 a07 b5``."""
    out: list[str] = []
    parts: list[str] = []
    depth, cur = 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    parts.append(cur)
    for part in filter(None, parts):
        m = re.match(r"^([^\[]*)\[([^\]]+)\](.*)$", part)
        if not m:
            out.append(part)
            continue
        for item in m[2].split(","):
            if "-" in item:
                lo, hi = item.split("-", 1)
                width = len(lo) if lo.startswith("0") else 0
                out.extend(f"{m[1]}{k:0{width}d}{m[3]}" for k in range(int(lo), int(hi) + 1))
            else:
                out.append(f"{m[1]}{item}{m[3]}")
    return out


def parse_slurm_tasks(text: str) -> list[int]:
    """``2(x3),1`` -> ``[2, 2, 2, 1]``."""
    out: list[int] = []
    for part in text.split(","):
        m = re.match(r"^(\d+)(?:\(x(\d+)\))?$", part.strip())
        if not m:
            raise TopologyError("environment", "SLURM_TASKS_PER_NODE",
                                f"cannot read {part!r}")
        out.extend([int(m[1])] * int(m[2] or 1))
    return out


def check_hosts(topology: Topology, reach_timeout: float = 3.0) -> None:
    """Every host name must resolve (MPICH kills the whole job on an unknown spawn
    host) and, where MPI reaches hosts through ssh, answer on its ssh port: MPICH's
    spawn waits forever for a host that resolves but cannot be reached."""
    for c in topology.clusters:
        for h in c.hosts:
            try:
                socket.getaddrinfo(h.name, None)
            except OSError:
                raise TopologyError(topology.source, f"clusters[{c.name}].hosts",
                                    f"host {h.name!r} does not resolve (not in DNS or "
                                    f"/etc/hosts); MPI cannot start processes there. "
                                    f"Use --local to map every host onto this "
                                    f"machine") from None
    if not _launches_through_ssh():
        return
    for c in topology.clusters:
        for h in c.hosts:
            if is_this_machine(h.name):
                continue
            problem = _ssh_unreachable(h.name, reach_timeout)
            if problem:
                raise TopologyError(topology.source, f"clusters[{c.name}].hosts",
                                    f"host {h.name!r} resolves but cannot be reached: "
                                    f"{problem}. MPI starts processes there through "
                                    f"ssh. Use --local to map every host onto this "
                                    f"machine")


def _launches_through_ssh() -> bool:
    """Hydra (MPICH's process manager) uses ssh unless told otherwise or inside a
    batch system's allocation."""
    env = os.environ
    if env.get("HYDRA_LAUNCHER", "ssh") != "ssh" or env.get("HYDRA_LAUNCHER_EXEC"):
        return False
    return not any(k in env for k in ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID"))


def _ssh_unreachable(host: str, timeout: float) -> str:
    """Why ``host``'s ssh server cannot be reached, or "" (ssh's own configuration
    gives the real name and port: ``ssh -G``)."""
    # spawned routers import this module but never probe ssh
    import shutil  # lazy: only this probe needs it (bz2, lzma: 4 ms)
    import subprocess  # lazy: only this probe runs a command (3 ms)
    name, port = host, 22
    ssh = shutil.which("ssh")
    if ssh is None:
        return "there is no ssh command on this machine"
    try:
        conf = subprocess.run([ssh, "-G", host], capture_output=True, text=True,
                              timeout=timeout).stdout
        for line in conf.splitlines():
            key, _, value = line.partition(" ")
            if key == "hostname" and value:
                name = value
            elif key == "port" and value.isdigit():
                port = int(value)
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        socket.create_connection((name, port), timeout=timeout).close()
    except OSError as exc:
        return f"its ssh port {name}:{port} does not answer ({exc.strerror or exc})"
    return ""


def to_toml(topology: Topology) -> str:
    """The topology as TOML text (for ``dac topology from-slurm`` / ``from-hostfile``)."""
    lines: list[str] = []
    if topology.stealing:
        lines.append("[stealing]")
        lines += [f"{k} = {v!r}" for k, v in topology.stealing.items()]
        lines.append("")
    for c in topology.clusters:
        lines += ["[[clusters]]", f'name = "{c.name}"']
        if c.latency_ms:
            lines.append(f"latency_ms = {c.latency_ms}")
        hosts = []
        for h in c.hosts:
            extra = (f", gpus = {h.gpus}" if h.gpus else "") + \
                (f", slowdown = {h.slowdown}" if h.slowdown != 1 else "")
            hosts.append(f'  {{ name = "{h.name}", slots = {h.slots}{extra} }},')
        lines += ["hosts = ["] + hosts + ["]", ""]
    return "\n".join(lines)
