"""The module graph of dac, stealing and launcher: layers, top to bottom, each importing
only those below it (and itself).

    launcher          the command line and the Open MPI glue
    dac               the API
    stealing.warm     the warm tree: folder, socket messages, server, a script's side
    stealing.roles    the processes: root, routers, leaves, their monitor and loops
    stealing.observe  statistics, timeline recorder, trace, tasks' output
    stealing.transport MPI, spawning, messages, the mailbox, doorbells
    stealing.host     this host's processes and files
    stealing.tree     topology, placement, plan, steal policy, task identities
    stealing          the package itself and its exceptions (the bottom)

``stealing`` imports nothing of ``dac`` or ``launcher`` (a leaf learns its task
executor by reference); no module imports another package's private names; there is no
cycle. Every import counts, those inside functions too. Read from the source with
``ast``: nothing is imported here.
"""

from __future__ import annotations

import ast
import pickle
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dac", "stealing", "launcher")

# the layers, bottom first: each may import its own and those before it
ORDER = ("stealing", "stealing.tree", "stealing.host", "stealing.transport",
         "stealing.observe", "stealing.roles", "stealing.warm", "dac", "launcher")
ALLOWED = {name: set(ORDER[:i + 1]) for i, name in enumerate(ORDER)}
# the package's own __init__ re-exports the public names of stealing.tree
ALLOWED["stealing"] = {"stealing", "stealing.tree"}


def find_modules() -> dict:
    """``{module name: path}`` of every module of the three packages."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = find_modules()


def layer(module: str) -> str:
    """The layer of a module: its subpackage of ``stealing`` (``stealing.tree``, ...),
    else its package; ``stealing`` itself for the modules at its top
    (``stealing.exceptions``)."""
    parts = module.split(".")
    if parts[0] == "stealing" and len(parts) > 1 and f"stealing.{parts[1]}" in ORDER:
        return f"stealing.{parts[1]}"
    return parts[0]


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def type_only(tree: ast.AST) -> set:
    """The import nodes under ``if TYPE_CHECKING:``: read by the type checker, never
    run."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (dotted(node.test) or [""])[-1] == "TYPE_CHECKING":
            for sub in node.body:
                found.update(id(n) for n in ast.walk(sub))
    return found


def imports(module: str, source: str, is_package: bool = False, runtime: bool = False):
    """``(imported module, names or None, line)`` for every import in ``source``
    (with ``runtime``, only those that run: not those under ``if TYPE_CHECKING:``).

    ``from pkg import sub`` where ``pkg.sub`` is a module is an import of ``pkg.sub``
    (names None); relative imports are resolved against ``module``.
    """
    tree = ast.parse(source)
    here = module.split(".") if is_package else module.split(".")[:-1]
    skip = type_only(tree) if runtime else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            plain = []
            for alias in node.names:
                if f"{target}.{alias.name}" in MODULES:
                    yield f"{target}.{alias.name}", None, node.lineno
                else:
                    plain.append(alias.name)
            if plain or not node.names:
                yield target, plain, node.lineno


def module_aliases(module: str, source: str, is_package: bool = False) -> dict:
    """Names bound to modules of the three packages: ``{local name: module}``."""
    aliases = {}
    tree = ast.parse(source)
    here = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = here[:len(here) - (node.level - 1)] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                if f"{target}.{alias.name}" in MODULES:
                    aliases[alias.asname or alias.name] = f"{target}.{alias.name}"
    return {k: v for k, v in aliases.items() if v.split(".")[0] in PACKAGES}


def dotted(node) -> list | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything but names and attributes."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id] + parts[::-1]


def problems(module: str, source: str, is_package: bool = False) -> list:
    """What ``module`` does against the layout, one line each."""
    out = []
    package, allowed = module.split(".")[0], ALLOWED[layer(module)]
    for target, names, line in imports(module, source, is_package):
        top = target.split(".")[0]
        if top not in PACKAGES:
            continue
        if layer(target) not in allowed:
            out.append(f"{module}:{line} imports {target} ({layer(module)} may import "
                       f"{', '.join(sorted(allowed))})")
        if top != package:
            hidden = [p for p in target.split(".") if private(p)]
            hidden += [n for n in names or () if private(n)]
            if hidden:
                out.append(f"{module}:{line} imports private {', '.join(hidden)} of "
                           f"{target}")
    # module.attribute uses of another package's private names (rt._x)
    aliases = module_aliases(module, source, is_package)
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        parts = dotted(node)
        if not parts or parts[0] not in aliases:
            continue
        target = aliases[parts[0]]
        rest = parts[1:]
        while rest and f"{target}.{rest[0]}" in MODULES:
            target, rest = f"{target}.{rest[0]}", rest[1:]
        if target.split(".")[0] != package and rest and private(rest[0]):
            out.append(f"{module}:{node.lineno} uses private {rest[0]} of {target}")
    # importlib.import_module("dac...") and __import__ count as imports too
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and \
                isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, str):
            func = dotted(node.func) or []
            if func[-1:] in (["import_module"], ["__import__"]):
                target = node.args[0].value
                if target.split(".")[0] in PACKAGES and layer(target) not in allowed:
                    out.append(f"{module}:{node.lineno} imports {target} dynamically")
    return list(dict.fromkeys(out))


def read(module: str):
    path = MODULES[module]
    return module, path.read_text(), path.name == "__init__.py"


def graph() -> dict:
    """``{module: {modules of the three packages it imports when it runs}}``: an import
    for the type checker alone (``if TYPE_CHECKING:``) is no edge, since it never runs;
    it must still go down (``problems``)."""
    edges = {}
    for module in MODULES:
        targets = set()
        for target, _, _ in imports(*read(module), runtime=True):
            while target and target not in MODULES:      # from pkg.mod import name
                target = target.rpartition(".")[0]
            if target and target != module:
                targets.add(target)
        edges[module] = targets
    return edges


# --- the three packages -------------------------------------------------------------
def test_the_packages_are_found():
    for name in ("dac", "dac.runtime", "dac.execution", "stealing", "stealing.roles.leaf",
                 "stealing.roles.root", "stealing.roles.executor", "launcher.cli",
                 "stealing.tree.topology", "stealing.tree.placement"):
        assert name in MODULES


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_go_down_and_no_private_names_cross_packages(module):
    assert problems(*read(module)) == []


def test_the_module_graph_has_no_cycle():
    edges = graph()
    state: dict = {}                # 1: on the current path, 2: done
    path: list = []

    def visit(module):
        state[module] = 1
        path.append(module)
        for target in sorted(edges[module]):
            if state.get(target) == 1:
                cycle = path[path.index(target):] + [target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module)


def test_every_subpackage_of_stealing_says_what_it_owns():
    for name in ORDER[1:7]:
        doc = ast.get_docstring(ast.parse(MODULES[name].read_text()))
        assert doc and len(doc.split()) >= 20, name


def test_topology_and_placement_are_below_the_api():
    edges = graph()
    assert not any(layer(t) in ("dac", "launcher")
                   for m in ("stealing.tree.topology", "stealing.tree.placement")
                   for t in edges[m])


# --- the checker itself finds what it must ------------------------------------------
@pytest.mark.parametrize("module, source, found", [
    ("stealing.roles.leaf", "def f():\n    from dac.execution import load_table\n",
     "stealing.roles.leaf:2 imports dac.execution"),
    ("stealing.roles.root", "import dac\n", "stealing.roles.root:1 imports dac"),
    ("stealing.tree.topology", "from dac.errors import DacError\n",
     "stealing.tree.topology:1 imports dac.errors"),
    ("stealing.tree.placement", "from launcher import cli\n",
     "stealing.tree.placement:1 imports launcher.cli"),
    ("stealing.tree.policy", "from stealing.transport import protocol\n",
     "stealing.tree.policy:1 imports stealing.transport.protocol"),
    ("stealing.host.procs", "from stealing.roles import leaf\n",
     "stealing.host.procs:1 imports stealing.roles.leaf"),
    ("dac.runtime", "from launcher.topology import load_topology\n",
     "dac.runtime:1 imports launcher.topology"),
    ("dac.runtime", "import launcher.cli\n", "dac.runtime:1 imports launcher.cli"),
    ("dac.runtime", "from stealing.tree.plan import _tasks_per_branch\n",
     "dac.runtime:1 imports private _tasks_per_branch of stealing.tree.plan"),
    ("launcher.cli", "import dac.runtime as rt\nrt._crowding(1, {})\n",
     "launcher.cli:2 uses private _crowding of dac.runtime"),
    ("stealing.roles.leaf", "import importlib\nimportlib.import_module('dac.execution')\n",
     "stealing.roles.leaf:2 imports dac.execution dynamically"),
    ("stealing.roles.leaf", "if TYPE_CHECKING:\n    from dac.spawn import SpawnFunction\n",
     "stealing.roles.leaf:2 imports dac.spawn"),
])
def test_the_checker_finds_a_wrong_import(module, source, found):
    assert any(p.startswith(found) for p in problems(module, source)), \
        problems(module, source)


def test_an_import_for_the_type_checker_alone_is_no_edge_of_the_graph():
    source = ("from typing import TYPE_CHECKING\nfrom . import errors\n"
              "if TYPE_CHECKING:\n    from .spawn import SpawnFunction\n")
    assert [t for t, _, _ in imports("dac.future", source, runtime=True)] == \
        ["typing", "dac.errors"]
    assert "dac.spawn" in [t for t, _, _ in imports("dac.future", source)]


def test_the_checker_allows_what_the_layout_allows():
    assert problems("dac.runtime", "from stealing.tree.placement import plan_topology\n"
                                   "from stealing.transport.mpi import lock\n") == []
    assert problems("launcher.cli", "import dac.runtime as rt\nrt.defaults['x'] = 1\n"
                                    "from stealing.tree.topology import LIMITS\n") == []
    assert problems("stealing.roles.leaf", "from stealing.transport import protocol as P"
                                           "\nP.NAMES\n") == []


# --- the executor a leaf gets by reference --------------------------------------------
def test_dac_executor_is_what_the_scheduler_asks_for():
    from dac import execution
    from stealing.roles.executor import TaskExecutor, load_executor
    executor = load_executor(execution.REFERENCE)
    assert isinstance(executor, execution.Executor)
    assert isinstance(executor, TaskExecutor)


def test_a_leafs_executor_warms_up_what_every_first_job_needs():
    """In a fresh interpreter: the leaf's first JOB imported cloudpickle (7-8 ms:
    a function that travels by value needs it to load) and found the runtime's
    folders (``sysconfig``, 1-2 ms) before its first task could run; a leaf now
    does both while it waits for that job (``TaskExecutor.warm_up``), and loading
    and preparing a job's function then imports nothing more than the function's
    own module."""
    import subprocess
    import textwrap
    script = textwrap.dedent("""
        import pickle, sys
        sys.path.insert(0, sys.argv[1])
        from dac import execution, stealable
        assert "cloudpickle" not in sys.modules and not stealable._NOT_USER
        execution.Executor.warm_up()
        assert "cloudpickle" in sys.modules and stealable._NOT_USER
        before = set(sys.modules)
        table = execution.load_table(pickle.loads(bytes.fromhex(sys.argv[2])))
        execution.Executor.prepare(table)
        print(sorted(set(sys.modules) - before))
        """)
    from dac.serialize import dumps_function
    from dac.spawn import spawn_function
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import clone_programs
    finally:
        sys.path.remove(str(ROOT / "tests"))
    entries = {"fib": dumps_function(spawn_function(clone_programs.fib))}
    out = subprocess.run([sys.executable, "-c", script, str(ROOT / "tests"),
                          pickle.dumps(entries).hex()], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() in (["[]"], ["['clone_programs']"])


@pytest.mark.parametrize("reference", [None, "dac.execution", 3])
def test_a_malformed_executor_reference_is_refused(reference):
    from stealing.roles.executor import load_executor
    with pytest.raises(ValueError, match="module:name"):
        load_executor(reference)


def test_import_dac_leaves_the_tree_plan_unloaded():
    """``import dac`` is on the path of every script, a warm tree's included (fib 35
    attached to one: about 0.6 s in all); ``stealing``'s package imported the tree
    plan, whose ``dataclasses`` brings ``inspect`` and ``ast``: 13 of 40 ms. The plan's
    names still come from ``stealing`` at their first use."""
    import subprocess
    script = ("import sys; import dac; print('dataclasses' in sys.modules, "
              "'stealing.tree.plan' in sys.modules); import stealing; "
              "stealing.plan_tree; print('stealing.tree.plan' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.stdout.split() == ["False", "False", "True"], out.stderr
