"""Network namespaces as hosts on one machine, for tests (needs root and iproute2).

``Lab`` makes namespaces ``dacns1``, ``dacns2``, ... each with a veth pair whose root
side (``dacv1``, ...) is a port of the bridge ``dacbr0`` (10.200.0.1/24) in the root
namespace; namespace N has 10.200.0.1N on its ``eth0``, loopback up and a default route
through the bridge, and its name in /etc/hosts (lines marked ``# dac-netns-test``).
Hydra starts its proxies inside the namespaces through ``launch.sh`` (``env()`` gives the
variables), and MPI traffic is forced onto TCP, so every byte between the root (in the
root namespace) and a namespace crosses that namespace's veth pair.

Two kinds of byte counters: ``link_bytes()`` (the veth's own counters: everything,
hydra's control traffic included) and ``ucx_bytes()`` (only TCP segments to or from
the port range UCX is told to listen on, counted by an htb class with a u32 filter on
each end of the pair), so the test can tell that MPI messages crossed, not just hydra.

Setting up takes a lock file, so two test sessions on the machine do not fight over
the names; ``down()`` undoes everything (also what a killed earlier run left) and
restores /etc/hosts even after a failure. By hand::

    python tests/netns/lab.py up 3      # make dacns1..3 (left in place)
    python tests/netns/lab.py down      # remove them
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER = os.path.join(HERE, "launch.sh")
BRIDGE = "dacbr0"
PREFIX = "dacns"
VETH = "dacv"
NET = "10.200.0"
HOSTS_FILE = "/etc/hosts"
HOSTS_MARK = "# dac-netns-test"
MAX_NAMESPACES = 8
# UCX listens on a port of this range (UCX_TCP_PORT_RANGE): 0x5000-0x53ff, one u32
# match with mask 0xfc00, below Linux's ephemeral ports (32768-60999 by default), so a
# port in it is a UCX listener and a segment to or from it is MPI traffic.
UCX_PORT_LO, UCX_PORT_HI = 0x5000, 0x53FF
LOCK_PATHS = ("/run/lock/dac-netns-test.lock", "/tmp/dac-netns-test.lock")
CMD_TIMEOUT = 30
SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def _tool(name: str) -> str | None:
    """``ip``/``tc`` on PATH or in the sbin directories (often not on a user's PATH)."""
    return shutil.which(name, path=SBIN_PATH)


class NetnsError(RuntimeError):
    """The namespaces could not be made (the message says which step and why)."""


def unavailable() -> str | None:
    """Why namespaces cannot be made here (None when they can be tried)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return ("needs root: makes network namespaces, veth pairs, a bridge and "
                "/etc/hosts entries (run the tests as root to include it)")
    missing = [t for t in ("ip", "tc") if _tool(t) is None]
    if missing:
        return (f"needs iproute2 ({' and '.join(missing)} not found; "
                f"apt-get install -y iproute2)")
    if not os.path.exists(LAUNCHER) or not os.access(LAUNCHER, os.X_OK):
        return f"launcher wrapper {LAUNCHER} is missing or not executable"
    return None


def _run(*args, check=True):
    """Runs a command (never longer than CMD_TIMEOUT); NetnsError when it fails."""
    args = (_tool(args[0]) or args[0],) + tuple(args[1:])
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=CMD_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise NetnsError(f"`{' '.join(args)}` took over {CMD_TIMEOUT} s") from None
    except OSError as exc:
        raise NetnsError(f"`{' '.join(args)}`: {exc}") from None
    if check and p.returncode != 0:
        raise NetnsError(f"`{' '.join(args)}` failed ({p.returncode}): "
                         f"{(p.stderr or p.stdout).strip()}")
    return p


class Lab:
    """``count`` namespaces joined by a bridge; a context manager (up, then down)."""

    def __init__(self, count: int = 3, lock_timeout: float = 300.0):
        if not 1 <= count <= MAX_NAMESPACES:
            raise ValueError(f"count must be 1..{MAX_NAMESPACES}, got {count}")
        self.count = count
        self.names = [f"{PREFIX}{i}" for i in range(1, count + 1)]
        self.veths = {n: f"{VETH}{i}" for i, n in enumerate(self.names, 1)}
        self.addresses = {n: f"{NET}.{10 + i}" for i, n in enumerate(self.names, 1)}
        self.bridge_address = f"{NET}.1"
        self.lock_timeout = lock_timeout
        self._lock = None
        self.accounting = None        # None: ucx_bytes() works; else why it does not

    # life cycle -------------------------------------------------------------------
    def __enter__(self) -> "Lab":
        self.acquire()
        try:
            self.up()
        except BaseException:
            try:
                self.down()
            finally:
                self.release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            errors = self.down()
        finally:
            self.release()
        if errors and exc[0] is None:
            raise NetnsError("tearing down the namespaces: " + "; ".join(errors))

    def acquire(self) -> None:
        """The machine-wide lock on the names (waits up to ``lock_timeout``)."""
        last = None
        for path in LOCK_PATHS:
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                f = open(path, "a+")
                break
            except OSError as exc:
                last = exc
        else:
            raise NetnsError(f"cannot open a lock file: {last}")
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    f.close()
                    raise NetnsError(f"another test session has held {f.name} for "
                                     f"over {self.lock_timeout:.0f} s") from None
                time.sleep(0.2)
        self._lock = f

    def release(self) -> None:
        f, self._lock = self._lock, None
        if f is not None:
            fcntl.flock(f, fcntl.LOCK_UN)
            f.close()

    def up(self) -> None:
        """Make the bridge, namespaces, links, routes, /etc/hosts entries, counters."""
        self.down(all_names=True)         # whatever a killed earlier run left
        routed = _run("ip", "-4", "route", "show", f"{NET}.0/24").stdout.strip()
        if routed:
            raise NetnsError(f"{NET}.0/24 is already routed here ({routed}); "
                             "the test needs that subnet for its bridge")
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "add", f"{self.bridge_address}/24", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        for name in self.names:
            veth = self.veths[name]
            _run("ip", "netns", "add", name)
            _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                 "netns", name)
            _run("ip", "link", "set", veth, "master", BRIDGE)
            _run("ip", "link", "set", veth, "up")
            _run("ip", "-n", name, "link", "set", "lo", "up")
            _run("ip", "-n", name, "addr", "add", f"{self.addresses[name]}/24",
                 "dev", "eth0")
            _run("ip", "-n", name, "link", "set", "eth0", "up")
            _run("ip", "-n", name, "route", "add", "default", "via",
                 self.bridge_address)
        self._add_hosts()
        for name in self.names:
            self._wait_reachable(name)
        try:
            for name in self.names:
                self._count_ucx([], self.veths[name])            # root -> namespace
                self._count_ucx(["-n", name], "eth0")           # namespace -> root
            self.accounting = None
        except NetnsError as exc:
            self.accounting = str(exc)

    def down(self, all_names: bool = False) -> list:
        """Remove everything (best effort, every step tried); returns the errors.

        Processes still running inside the namespaces are killed first (a namespace
        outlives its name while a process is in it)."""
        errors = []
        names = [f"{PREFIX}{i}" for i in range(1, MAX_NAMESPACES + 1)] if all_names \
            else self.names
        existing = set(_run("ip", "netns", "list", check=False).stdout.split())
        for name in names:
            if name in existing:
                for pid in self.pids(name):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    except OSError as exc:
                        errors.append(f"kill {pid} in {name}: {exc}")
        for i, name in enumerate(names, 1):
            veth = f"{VETH}{i}"
            if os.path.exists(f"/sys/class/net/{veth}"):
                p = _run("ip", "link", "del", veth, check=False)
                if p.returncode:
                    errors.append(f"ip link del {veth}: {p.stderr.strip()}")
            if name in existing:
                p = _run("ip", "netns", "del", name, check=False)
                if p.returncode:
                    errors.append(f"ip netns del {name}: {p.stderr.strip()}")
        if os.path.exists(f"/sys/class/net/{BRIDGE}"):
            p = _run("ip", "link", "del", BRIDGE, check=False)
            if p.returncode:
                errors.append(f"ip link del {BRIDGE}: {p.stderr.strip()}")
        try:
            self._remove_hosts()
        except OSError as exc:
            errors.append(f"restoring {HOSTS_FILE}: {exc}")
        return errors

    # /etc/hosts -----------------------------------------------------------------
    def _add_hosts(self) -> None:
        with open(HOSTS_FILE) as f:
            text = f.read()
        if text and not text.endswith("\n"):
            text += "\n"
        text += "".join(f"{self.addresses[n]} {n}  {HOSTS_MARK}\n" for n in self.names)
        self._write_hosts(text)

    def _remove_hosts(self) -> None:
        with open(HOSTS_FILE) as f:
            text = f.read()
        kept = [line for line in text.splitlines(keepends=True)
                if not line.rstrip().endswith(HOSTS_MARK)]
        if "".join(kept) != text:
            self._write_hosts("".join(kept))

    @staticmethod
    def _write_hosts(text: str) -> None:
        # in place, not a rename: /etc/hosts is often a bind mount in containers
        with open(HOSTS_FILE, "r+") as f:
            f.seek(0)
            f.write(text)
            f.truncate()

    # checks and counters --------------------------------------------------------
    def _wait_reachable(self, name: str, timeout: float = 10.0) -> None:
        """Until the namespace reaches the bridge address (a TCP connect that is
        refused proves the packet went there and back)."""
        probe = ("import socket,sys\n"
                 "s=socket.socket(); s.settimeout(1)\n"
                 "try: s.connect((sys.argv[1], 9))\n"
                 "except ConnectionRefusedError: pass\n")
        import sys
        deadline = time.monotonic() + timeout
        while True:
            p = _run("ip", "netns", "exec", name, sys.executable, "-c", probe,
                     self.bridge_address, check=False)
            if p.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise NetnsError(f"namespace {name} cannot reach {self.bridge_address}"
                                 f": {p.stderr.strip()[-300:]}")
            time.sleep(0.2)

    @staticmethod
    def _count_ucx(ns: list, dev: str) -> None:
        """An htb qdisc on ``dev`` whose class 1:10 gets the TCP segments from or to
        the UCX port range (everything else goes to 1:20); rates far above any use."""
        tc = ["tc", *ns]
        _run(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb",
             "default", "20", "r2q", "1000000")
        for cls in ("1:10", "1:20"):
            _run(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", cls,
                 "htb", "rate", "20gbit", "burst", "4mb", "cburst", "4mb")
        mask = 0xFFFF & ~(UCX_PORT_HI - UCX_PORT_LO)
        for field in ("sport", "dport"):
            _run(*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip",
                 "prio", "1", "u32", "match", "ip", "protocol", "6", "0xff",
                 "match", "ip", field, hex(UCX_PORT_LO), hex(mask), "flowid", "1:10")

    @staticmethod
    def _class_bytes(ns: list, dev: str, cls: str = "1:10") -> int:
        out = _run("tc", *ns, "-s", "class", "show", "dev", dev).stdout
        m = re.search(rf"class htb {re.escape(cls)} .*?\n\s*Sent (\d+) bytes", out)
        if not m:
            raise NetnsError(f"no htb class {cls} on {dev}: {out[:300]}")
        return int(m[1])

    def ucx_bytes(self) -> dict:
        """``{namespace: (bytes to it, bytes from it)}`` of UCX's TCP traffic."""
        if self.accounting is not None:
            raise NetnsError(f"no UCX byte counters: {self.accounting}")
        return {n: (self._class_bytes([], self.veths[n]),
                    self._class_bytes(["-n", n], "eth0")) for n in self.names}

    def link_bytes(self) -> dict:
        """``{namespace: (bytes to it, bytes from it)}``: the veth's counters, all
        traffic (read on the root side: tx goes into the namespace)."""
        out = {}
        for n in self.names:
            base = f"/sys/class/net/{self.veths[n]}/statistics/"
            with open(base + "tx_bytes") as f:
                tx = int(f.read())
            with open(base + "rx_bytes") as f:
                rx = int(f.read())
            out[n] = (tx, rx)
        return out

    @staticmethod
    def pids(name: str) -> list:
        """Processes living in namespace ``name``."""
        p = _run("ip", "netns", "pids", name, check=False)
        return [int(x) for x in p.stdout.split() if x.isdigit()]

    def env(self, launch_log: str | None = None) -> dict:
        """Variables for a dac run whose hosts are the namespaces (root stays here).

        Hydra (the singleton's mpiexec) starts proxies through the wrapper and
        advertises the bridge's address; UCX may only use TCP (by default it takes
        shared memory across namespaces and nothing crosses the veth), also over the
        bridge (UCX leaves bridge devices out unless told), listening on the counted
        port range."""
        env = {
            "HYDRA_LAUNCHER": "ssh",
            "HYDRA_LAUNCHER_EXEC": LAUNCHER,
            "HYDRA_IFACE": BRIDGE,
            "MPIR_CVAR_CH4_NETMOD": "ucx",
            "UCX_TLS": "self,tcp",
            "UCX_TCP_BRIDGE_ENABLE": "y",
            "UCX_TCP_PORT_RANGE": f"{UCX_PORT_LO}-{UCX_PORT_HI}",
            "UCX_LOG_LEVEL": "error",
        }
        if launch_log:
            env["DAC_NETNS_LOG"] = launch_log
        return env


def main(argv=None) -> int:
    import sys
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("up", "down"):
        print("usage: lab.py up [COUNT] | down", file=sys.stderr)
        return 2
    reason = unavailable()
    if reason:
        print(reason, file=sys.stderr)
        return 1
    lab = Lab(int(argv[1]) if len(argv) > 1 else 3)
    lab.acquire()
    try:
        if argv[0] == "up":
            lab.up()
            print("up:", ", ".join(f"{n}={lab.addresses[n]}" for n in lab.names),
                  "| ucx counters:", lab.accounting or "yes")
            print("env:", " ".join(f"{k}={v}" for k, v in lab.env().items()))
        else:
            errors = lab.down(all_names=True)
            for e in errors:
                print(e, file=sys.stderr)
            return 1 if errors else 0
    except NetnsError as exc:
        print(exc, file=sys.stderr)
        if argv[0] == "up":
            lab.down()
        return 1
    finally:
        lab.release()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
