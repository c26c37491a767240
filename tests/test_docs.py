"""The documents name only what exists: every file path, every dotted name of dac,
stealing or launcher, and every ``Class.method`` in docs/ and the README resolves in
the code as it is (so a rename that forgets the docs fails here)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
PACKAGES = ("dac", "stealing", "launcher")


def _classes() -> dict:
    """``{class name: set of its attribute and method names}`` over the three packages."""
    found: dict = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    names = found.setdefault(node.name, set())
                    for sub in ast.walk(node):
                        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            names.add(sub.name)
                        elif isinstance(sub, ast.Attribute):
                            names.add(sub.attr)
                        elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
                            names.add(sub.target.id)
                        elif isinstance(sub, ast.Name):
                            names.add(sub.id)
    return found


CLASSES = _classes()


def code_spans(path: Path) -> list:
    return re.findall(r"`([^`\n]+)`", path.read_text())


def resolves(dotted: str) -> bool:
    """``dac.x.y`` names a module, or an attribute of the longest module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_named_files_exist(path):
    paths = re.findall(r"(?<![\w/.~-])((?:dac|stealing|launcher|tests|benchmarks|examples|docs)"
                       r"/[\w/.-]*\w)", path.read_text())
    assert [p for p in paths if not (ROOT / p).exists()] == []


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_named_functions_and_modules_exist(path):
    wrong = []
    for span in code_spans(path):
        name = span.split("(")[0].strip()
        if not re.fullmatch(r"[A-Za-z_][\w.]*", name) or "." not in name:
            continue
        head, *rest = name.split(".")
        if head in PACKAGES:
            if not resolves(name):
                wrong.append(name)
        elif head in CLASSES and len(rest) == 1 and rest[0] not in CLASSES[head]:
            wrong.append(name)
    assert wrong == []


def test_the_check_finds_a_wrong_name():
    assert resolves("dac.task_call.TaskCall.wire")
    assert not resolves("dac.task_call.TaskCall.nothing_here")
    assert "run_task" in CLASSES["Executor"]
