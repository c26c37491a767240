"""A script's numba kernels, compiled in a leaf with an on-disk cache.

A script's ``@njit(cache=True)`` function reaches a leaf as its Python function
(``dac.serialize``), with its file name and line numbers kept. ``cached_njit`` makes it
a kernel again with the cache numba would give it in the script: numba's own cache
locators find the script's file on this host (``__pycache__`` beside it, or
``NUMBA_CACHE_DIR``), so a leaf loads what the root or an earlier run compiled. Where
the file is not on this host (a notebook cell, a host without the user's files), the
kernel is cached by its code instead (``CodeCacheLocator``, under
``$XDG_CACHE_HOME/dac/numba``). Where neither can be had, it compiles without a cache
and says so once: a run never fails for want of a cache.

Imported only where such a kernel is unpickled: it imports numba.
"""

from __future__ import annotations

import hashlib
import marshal
import os
from types import FunctionType
from typing import Any

from numba import njit
from numba.core.caching import CompileResultCacheImpl, FunctionCache, _CacheLocator

from stealing.observe.output import note


def cache_root() -> str:
    """Where kernels without a file on this host are cached: ``$DAC_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/dac``, else ``~/.cache/dac``; made private to the user."""
    base = os.environ.get("DAC_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "dac")
    os.makedirs(base, mode=0o700, exist_ok=True)
    return base


class CodeCacheLocator(_CacheLocator):
    """numba's cache for a function whose file is not on this host: its folder is
    named after the file's path, its freshness stamp is a digest of the function's
    code (``marshal``'s bytes: the code, its constants and line numbers), so an
    edited cell or script compiles again and an unchanged one loads."""

    def __init__(self, py_func: FunctionType, py_file: str) -> None:
        code = py_func.__code__
        self._lineno = code.co_firstlineno
        self._stamp = hashlib.sha256(marshal.dumps(code)).hexdigest()
        self._path = os.path.join(cache_root(), "numba",
                                  self.get_suitable_cache_subpath(py_file))

    def ensure_cache_path(self) -> None:
        os.makedirs(self._path, mode=0o700, exist_ok=True)
        super().ensure_cache_path()

    def get_cache_path(self) -> str:
        return self._path

    def get_source_stamp(self) -> str:
        return self._stamp

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func: FunctionType, py_file: str) -> CodeCacheLocator | None:
        """numba asks each locator class for one: None where the folder cannot be
        made."""
        self = cls(py_func, py_file)
        try:
            self.ensure_cache_path()
        except OSError:
            return None
        return self


class _CodeCacheImpl(CompileResultCacheImpl):
    _locator_classes = [CodeCacheLocator]


class CodeCache(FunctionCache):
    """numba's function cache, located by ``CodeCacheLocator``."""

    _impl_class = _CodeCacheImpl


def cached_njit(py_func: FunctionType, options: dict[str, Any]) -> Any:
    """``njit(**options)(py_func)`` with the best cache this host allows (see the
    module's docstring)."""
    kernel = njit(**options)(py_func)
    try:
        kernel.enable_caching()             # numba's locators: the script's own file
        return kernel
    except RuntimeError:                    # "no locator available": no file here
        pass
    try:
        kernel._cache = CodeCache(py_func)
    except Exception as exc:                                # noqa: BLE001
        where = py_func.__code__.co_filename
        note(f"numba kernel {py_func.__qualname__} of {where} compiles without an "
             f"on-disk cache on this host ({type(exc).__name__}: {exc}); every leaf "
             f"compiles it again")
    return kernel
