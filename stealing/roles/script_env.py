"""Where a leaf's tasks run: as they would in the script that started the run.

A leaf takes the script's import path, ``sys.argv`` and recursion limit, from INIT when
the script spawned the tree, and from each job when the script attached to a warm tree
(``dac up``), where the leaf is older than the script. A warm leaf keeps what it
imported (that is what keeps it warm: numba, numpy, the script's own modules and
their compiled kernels), but when a file of the script's own modules (files outside
the Python installation and dac) changed since it was loaded, it forgets all of
them, so an edited script runs its new code.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from collections.abc import Iterable
from importlib.machinery import PathFinder

import stealing
from stealing.transport.protocol import ScriptEnv

_adopted: list[str] = []      # the sys.path entries the last script brought

# a module's file when it was noticed: (path, mtime_ns, size); None, None: it was gone
Stamp = tuple[str, int | None, int | None]


def adopt(env: ScriptEnv) -> None:
    """Take the script's ``sys_path`` (its entries first, and those of the script
    before it gone: two projects' folders never mix), ``argv``, ``cwd`` and
    ``recursion_limit``, each if given."""
    if env.sys_path:
        for path in _adopted:
            if path in sys.path:
                sys.path.remove(path)
        _adopted[:] = [p for p in env.sys_path if p not in sys.path]
        for path in reversed(env.sys_path):
            if path in sys.path:
                sys.path.remove(path)
            sys.path.insert(0, path)
    if env.argv:
        sys.argv = list(env.argv)
    if env.cwd:
        try:
            os.chdir(env.cwd)
        except OSError:
            pass
    if env.recursion_limit:
        sys.setrecursionlimit(max(sys.getrecursionlimit(), env.recursion_limit))


def _installed_dirs() -> list[str]:
    """Folders whose modules belong to the Python installation, not to a script."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(path)
    try:
        dirs.update(site.getsitepackages())
        dirs.add(site.getusersitepackages())
    except AttributeError:                                  # pragma: no cover
        pass
    # dac's own packages, wherever they are (a checkout not installed, an editable
    # install): the folder holding the ``stealing`` package holds the others too
    here = os.path.dirname(os.path.dirname(os.path.abspath(stealing.__file__)))
    dirs.update(os.path.join(here, p) for p in ("stealing", "dac", "launcher"))
    return [os.path.realpath(d) + os.sep for d in dirs if d]


class ScriptModules:
    """The modules of scripts' own code this process loaded, with their files'
    modification time and size when it noticed them (``note``).

    Every module is judged once (script's or not: the real path of its file), not at
    every ``note``: a warm leaf with numpy and numba loaded holds about 530 modules,
    and resolving all their paths again took 14 ms of each job's end and 19 ms of a
    new script's first job (a trivial job on a warm tree of 2 leaves took 20-30 ms
    where a kept ``Runtime`` takes 1-2 ms)."""

    def __init__(self, keep: Iterable[str] = ()) -> None:
        self.keep = tuple(keep)         # never forgotten (``--preload``)
        self.stamps: dict[str, Stamp] = {}      # module name -> (file, mtime_ns, size)
        # name -> the module object judged (a name imported afresh is judged again)
        self.judged: dict[str, object] = {}
        self._installed: tuple[str, ...] | None = None

    def _is_script(self, name: str, module: object) -> str | None:
        """The real path of ``module``'s file when it is a script's own module not
        stamped yet (not ``__main__``, not kept, not of the installation), else None."""
        path = getattr(module, "__file__", None)
        if not path or name == "__main__" or name in self.stamps:
            return None
        if any(name == k or name.startswith(k + ".") for k in self.keep):
            return None
        if self._installed is None:
            self._installed = tuple(_installed_dirs())
        real = os.path.realpath(path)
        return None if real.startswith(self._installed) else real

    def note(self) -> None:
        """Stamp the script modules loaded since the last call."""
        judged = self.judged
        for name, module in list(sys.modules.items()):
            if judged.get(name, judged) is module:
                continue
            judged[name] = module
            path = self._is_script(name, module)
            if path is not None:
                self.stamps[name] = _stamp(path)
        # a module gone from sys.modules is not held here: a forgotten script's
        # modules (and the clones in them, ``dac.clone``) must be free to go
        for name in [n for n in judged if n not in sys.modules]:
            del judged[name]

    def refresh(self, sys_path: list[str] | None = None) -> list[str]:
        """If a stamped module's file changed (or went), or with ``sys_path`` (the
        next script's) the module's name would now load another file (another
        project's module of the same name), forget every stamped module (a module
        that did not change may hold the old code of one that did); returns the
        names forgotten."""
        self.note()
        if all(_stamp(st[0]) == st for st in self.stamps.values()) and \
                (sys_path is None or not any(
                    _moved(name, st[0], sys_path) for name, st in self.stamps.items()
                    if "." not in name)):
            return []
        gone = list(self.stamps)
        for name in gone:
            sys.modules.pop(name, None)
            self.judged.pop(name, None)
        self.stamps = {}
        return gone


def _moved(name: str, loaded: str, sys_path: list[str]) -> bool:
    """The top-level module ``name``, loaded from ``loaded``, would come from another
    file (or from none) on ``sys_path``."""
    try:
        spec = PathFinder.find_spec(name, [p for p in sys_path if p])
    except (ImportError, ValueError):
        return True
    origin = getattr(spec, "origin", None)
    return not origin or os.path.realpath(origin) != loaded


def _stamp(path: str) -> Stamp:
    """``path``'s modification time and size now (None, None: it is gone)."""
    try:
        st = os.stat(path)
        return (path, st.st_mtime_ns, st.st_size)
    except OSError:
        return (path, None, None)
