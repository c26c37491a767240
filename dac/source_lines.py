"""A function's definition and its module's imported names, read from a few lines.

A fast clone (``dac.clone``) is written from the function's source, checked to compile
to the function's own code. Parsing the whole module for it cost 3-4 ms for a module of
450 lines, paid by every leaf at its first job for each function (and by the program's
own process at its first serial call): a fresh tree's leaves spent 6 ms of CPU each
loading a job of fib(1) from such a module. Here only the function's own lines are
parsed (from its first line, a decorator's, to the last line its code or nested code
names) with the module's import statements, found by their lines: each parsed alone,
where a line that is not one (a docstring's "from the ...") simply does not parse.

Both are guesses that the caller checks: the definition must compile to the
function's code with those names declared as imports (CPython 3.11 compiles
``name.attr()`` on an imported name as an attribute load and a call, not a method
call), and where it does not (an import on one line with ``try:``, a function ending
in a line no instruction names), the caller parses the whole module as before.
"""

from __future__ import annotations

import ast
import re
from types import CodeType, FunctionType

_IMPORT = re.compile(r"[ \t]*(?:import|from)[ \t]+[\w.]")


def definition(fn: FunctionType, lines: list[str]) -> ast.FunctionDef | None:
    """``fn``'s ``def`` (decorators included, line numbers and columns as in its
    file) parsed from its own lines, or None where they do not parse to it."""
    code = fn.__code__
    first, last = code.co_firstlineno, _last_line(code)
    if not 0 < first <= last <= len(lines):
        return None
    part = lines[first - 1:last]
    indented = part[0][:1] in (" ", "\t")
    text = "".join(["if 1:\n", *part] if indented else part)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    body = tree.body
    if indented and len(body) == 1 and isinstance(body[0], ast.If):
        body = body[0].body
    node = body[0] if len(body) == 1 else None
    if not isinstance(node, ast.FunctionDef) or node.name != fn.__name__:
        return None
    ast.increment_lineno(node, first - 1 - indented)
    return node


def import_names(lines: list[str]) -> set[str]:
    """The names bound by the import statements among ``lines`` (anywhere: more names
    than the module's own imports is only a guess that fails its check)."""
    names: set[str] = set()
    i = 0
    while i < len(lines):
        if not _IMPORT.match(lines[i]):
            i += 1
            continue
        statement, i = _statement_at(lines, i)
        try:
            tree = ast.parse(statement.strip())
        except (SyntaxError, ValueError):
            continue
        for n in tree.body:
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in n.names
                             if a.name != "*")
    return names


def _statement_at(lines: list[str], i: int) -> tuple[str, int]:
    """The import statement starting at line ``i`` with its continuation lines (in
    parentheses, or after a backslash), and the index of the line after it."""
    text = lines[i]
    i += 1
    while i < len(lines) and (text.count("(") > text.count(")") or
                              text.rstrip().endswith("\\")):
        text += lines[i]
        i += 1
    return text, i


def _last_line(code: CodeType) -> int:
    """The last line ``code`` or any code nested in it has an instruction of (its
    end, for an instruction that spans lines)."""
    last = code.co_firstlineno
    positions = getattr(code, "co_positions", None)     # (3.11 on)
    if positions is not None:
        last = max([last, *(p[1] for p in positions() if p[1] is not None)])
    else:
        last = max([last, *(line for _, _, line in code.co_lines() if line is not None)])
    for const in code.co_consts:
        if isinstance(const, CodeType):
            last = max(last, _last_line(const))
    return last
