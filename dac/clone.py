"""The fast clone of a ``@spawn`` function: its body with spawns as plain calls.

Cilk-5 compiles every spawning function twice: a *fast clone* for the common case,
where nobody steals and a spawn is a plain call, and a slow clone for the rare one.
dac does the same where a call runs at once (the serial elision, and a leaf's task
below its horizon): ``@spawn``'s function runs the fast clone, written here from the
body's source, in which a spawn of the function itself is a plain call that returns
its value and ``sync`` is gone (``sync(a, b)`` is ``(a, b)``, ``sync(kids)`` is
``[*kids]``, or ``kids`` where no copy can be told apart, ``sync()`` is ``None``).
Under it a recursion costs what plain Python costs: no context read, no future, no
``sync`` call per node (the spawn's fast path cost 244-745 ns over a plain call, and
the elision of fib 7x plain Python).

A clone's frames must still let a leaf's thieves in. Its spawns call the function in
a global of the body's module (``_dac_clone_<name>_<n>``, the *slot*), not the clone
by name: the slot holds the clone itself (``direct``) until the leaf's ticker or its
parent's ring wakes the task (``dac.stealable``, ``StealableContext.woken``), which
puts ``routed`` calls in every slot (``route``). The next spawn a clone's frame makes
then runs the body as a scope of the leaf's context (``StealableContext.run_here``):
it polls, and its spawns are deque entries where thieves need them; and unless every
spawn must be an entry (a thief is owed work), it puts the clones back in the slots,
so the frames go on as plain calls until the next wake.

A function with ``cutoff=`` or ``leaf=`` runs its clone where its nested calls are
plain calls anyway: at the grain (``dac.stealable.Grain``, without ``leaf=``) and in
the elision; no wake routes that clone (nothing under the user's grain is stealable).

A clone is written only where it is the same program: a function of a module (no
closure) whose source is at hand and compiles to the body's own code (not edited
since), whose spawns call itself by its global name, and whose futures only go to
``sync``, straight or through one local name (``a = f(x)`` ... ``sync(a, b)`` or
``a.result()``; ``kids`` a list of them, filled by ``append``, given to ``sync`` or
looped over for ``.result()``). Anything else (another ``@spawn`` function called,
``.done()``, a future passed on or returned, ``sync(*fs)``, nested functions)
keeps the body as it is (``of`` returns None) and costs what it cost before.
"""

from __future__ import annotations

import ast
import copy
import inspect
import itertools
import linecache
import weakref
from collections.abc import Iterator
from types import CodeType, FunctionType
from typing import TYPE_CHECKING, Any

from . import context, latent, source_lines

if TYPE_CHECKING:
    from .spawn import SpawnFunction

# (the clone, its slot's name) of every clone written here that is alive: a weak
# reference, so that a warm leaf drops the clones of the scripts it served before
# with their modules (each clone holds its routed call, ``_dac_routed``)
_SLOTS: list[tuple[weakref.ref[FunctionType], str]] = []
_NUMBERS = itertools.count()
_FUTURE_METHODS = {"result", "done", "_value", "_call"}
_LOOPS = (ast.For, ast.comprehension)


class Unfit(Exception):
    """Why a body gets no clone (``of`` returns None; ``why`` tells tests)."""


def direct() -> None:
    """Every clone's spawns plain calls again (after a routed call polled)."""
    for ref, slot in _SLOTS:
        clone = ref()
        if clone is not None:
            clone.__globals__[slot] = clone


def route() -> None:
    """Every clone's next spawn a routed call (a leaf's task was woken)."""
    dead = False
    for ref, slot in _SLOTS:
        clone = ref()
        if clone is None:
            dead = True
        else:
            clone.__globals__[slot] = clone._dac_routed   # type: ignore[attr-defined]
    if dead:
        _SLOTS[:] = [(ref, slot) for ref, slot in _SLOTS if ref() is not None]


def of(sf: SpawnFunction) -> FunctionType | None:
    """The fast clone of ``sf``'s body, or None where it has none (see ``why``)."""
    try:
        return _write(sf)
    except Unfit:
        return None


def why(sf: SpawnFunction) -> str:
    """Why ``sf`` gets no clone ("" where it gets one; for tests and diagnostics)."""
    try:
        _write(sf, register=False)
    except Unfit as e:
        return str(e)
    return ""


def _write(sf: SpawnFunction, register: bool = True) -> FunctionType:
    fn = sf.fn
    if not inspect.isfunction(fn) or fn.__code__.co_freevars or "." in fn.__qualname__:
        raise Unfit("not a function of a module")
    tree, imports = _definition(fn)
    number = next(_NUMBERS)
    slot = f"_dac_clone_{fn.__name__}_{number}"
    batch = None if sf.grain_fixed or not latent.LEAF else f"_dac_batch_{fn.__name__}_{number}"
    rewrite = _Replace(_Rewrite(fn, sf, slot, batch).found(tree))
    clone = _compiled(rewrite.visit(tree), fn, imports)
    if register:
        fn.__globals__[slot] = clone
        if batch is not None:
            _batches(rewrite.made, fn, sf)
            _routable(clone, sf, slot)
    return clone


# A comprehension of spawns in a clone (``_Replace.visit_ListComp``): in a leaf's task,
# in its thread (``dac.latent.on``: another thread's batches would interleave with the
# task's on the one stack), a list of its items whose iterator it runs over, pushed
# on the batches in a record with the locals its calls read and what a thief needs
# (``KNOWN``), popped at its end, where the record popped is its own unless a thief
# took from it or an exception left a batch above it (then ``dac.latent.end``);
# elsewhere its items alone (``_dac_it_K``: what the comprehension runs over). The
# record (None: not pushed) is kept for its end: ``on`` may change meanwhile.
# ``push(...) or ...``: a push returns None, and the comprehension's list is never
# None. The stack's list is never rebound, so the
# module's globals name its methods. About 250 ns a comprehension over its
# elision's (8 calls; 365 ns as a tuple of three steps that compared thread idents
# and read the list's last record before popping it).
_BATCH = """(
    (_dac_push(_dac_rec_K := ((_dac_it_K := _dac_iter([*ITEMS])), KNOWN, VALUES))
     if _dac_on() else ((_dac_rec_K := None), (_dac_it_K := ITEMS))[0])
    or (_dac_out_K if (_dac_out_K := COMP) is not None
        and (_dac_rec_K is None or (_dac_popped_K := _dac_pop()) is _dac_rec_K)
        else _dac_end(_dac_rec_K, _dac_popped_K, _dac_out_K)))"""


def _batch_expression(k: int) -> ast.expr:
    """``_BATCH`` for the ``k``-th comprehension of a clone (its names numbered)."""
    tree = ast.parse(_BATCH.replace("_K", f"_{k}"), mode="eval")
    return tree.body


class _Fill(ast.NodeTransformer):
    """``_BATCH``'s place-holders (``ITEMS``, ``COMP``, ...) replaced by nodes; a
    tuple's ``VALUES`` by its list of nodes, spliced in (a record is one flat tuple:
    a second one for the locals' values cost a batch 200-300 instructions)."""

    def __init__(self, parts: dict[str, Any]) -> None:
        self.parts = parts

    def visit_Name(self, node: ast.Name) -> ast.AST:
        part = self.parts.get(node.id, node)
        assert isinstance(part, ast.AST)
        return part

    def visit_Tuple(self, node: ast.Tuple) -> ast.AST:
        elts: list[ast.expr] = []
        for e in node.elts:
            part = self.parts.get(e.id) if isinstance(e, ast.Name) else None
            if isinstance(part, list):
                elts += part
            else:
                elts.append(self.visit(e))
        node.elts = elts
        return node


def _batches(made: list[tuple[str, ast.FunctionDef, bool]], fn: FunctionType,
             sf: SpawnFunction) -> None:
    """The globals a clone's batches use (``_BATCH``, ``dac.latent``): the stack of
    batches and what pushes, pops and ends one, and for each comprehension what a
    thief needs to make a taken item's call (``KNOWN``: the function, ``make``
    compiled here, which makes a call's arguments with the comprehension's own
    expressions, and whether its target is a tuple)."""
    space = fn.__globals__
    if made:
        space.update(_dac_push=latent.BATCHES.append, _dac_pop=latent.BATCHES.pop,
                     _dac_iter=iter, _dac_on=latent.on, _dac_end=latent.end)
    for name, make, unpack in made:
        module = ast.fix_missing_locations(ast.Module(body=[make], type_ignores=[]))
        defined: dict[str, Any] = {}
        exec(compile(module, fn.__code__.co_filename, "exec", dont_inherit=True),
             space, defined)
        space[name] = (sf, defined[make.name], unpack)


def _routable(clone: FunctionType, sf: SpawnFunction, slot: str) -> None:
    """``clone`` among those a wake routes (``route``). Not the clone of a function
    with ``cutoff=`` or ``leaf=``: it runs only at or below the grain the user set,
    where nothing is stealable."""
    def routed(*args: Any, **kwargs: Any) -> Any:
        run_here = getattr(context.current(), "run_here", None)
        if run_here is None:            # (no leaf's context woke: nothing to poll)
            direct()
            return clone(*args, **kwargs)
        return run_here(sf, args, kwargs)
    clone._dac_routed = routed      # type: ignore[attr-defined]
    _SLOTS.append((weakref.ref(clone), slot))


def _definition(fn: FunctionType) -> tuple[ast.FunctionDef, list[ast.stmt]]:
    """``fn``'s definition, checked against its code, and the module's imports as
    ``_compiled`` declares them: from the function's own lines and the module's
    import lines (``dac.source_lines``, tenths of a millisecond) where those compile
    to its code, else from the whole module parsed (3-4 ms for 450 lines)."""
    lines = linecache.getlines(fn.__code__.co_filename)
    node = source_lines.definition(fn, lines) if lines else None
    if node is not None:
        imports = _declared(source_lines.import_names(lines))
        node.decorator_list = []
        _strip(node)
        if _same(_compiled(node, fn, imports).__code__, fn.__code__):
            return node, imports
    module = _module_tree(fn)
    imports = _imports(module)
    return _source_of(fn, module, imports), imports


def _module_tree(fn: FunctionType) -> ast.Module | None:
    """The parsed source of ``fn``'s module (``linecache``: a function that came by
    value brings its file's lines), None where there is none or it does not parse."""
    text = "".join(linecache.getlines(fn.__code__.co_filename))
    try:
        return ast.parse(text) if text else None
    except (SyntaxError, ValueError):
        return None


def _source_of(fn: FunctionType, module: ast.Module | None,
               imports: list[ast.stmt]) -> ast.FunctionDef:
    """``fn``'s definition in its module's parsed source, checked against its code.
    Found by its first line in the module's tree, not by ``inspect.getsource``,
    whose tokenizer cost a leaf 3-4 ms in its first job (its regular expressions
    compiled) where the whole file parses in a fraction of that."""
    node = _def_at(module, fn.__name__, fn.__code__.co_firstlineno) if module else None
    if node is None:
        raise Unfit("no source")
    node.decorator_list = []
    _strip(node)
    if not _same(_compiled(node, fn, imports).__code__, fn.__code__):
        raise Unfit("its source does not compile to its code (edited since?)")
    return node


def _def_at(module: ast.Module, name: str, line: int) -> ast.FunctionDef | None:
    """The ``def name`` of ``module`` that starts (its first decorator, or the
    ``def`` itself) at ``line``, outside any function or class."""
    for n in _outside_functions(module):
        if isinstance(n, ast.FunctionDef) and n.name == name and \
                min([n.lineno, *(d.lineno for d in n.decorator_list)]) == line:
            return n
    return None


def _outside_functions(module: ast.Module) -> Iterator[ast.AST]:
    """The statements of ``module`` that run when it is imported (in an ``if``, a
    ``try``, ...), the ``def`` and ``class`` statements among them, not what those
    hold."""
    todo: list[ast.AST] = list(module.body)
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                              ast.Lambda, ast.expr)):
            todo.extend(ast.iter_child_nodes(n))


def _strip(node: ast.FunctionDef) -> None:
    """No decorators, defaults or annotations: the clone takes the body's own values
    (so nothing is evaluated twice)."""
    a = node.args
    a.defaults, a.kw_defaults = [], [None] * len(a.kwonlyargs)
    node.returns = None
    for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
        if arg is not None:
            arg.annotation = None


def _compiled(node: ast.FunctionDef, fn: FunctionType,
              imports: list[ast.stmt]) -> FunctionType:
    """``node`` compiled as the body's module compiled it: the names the module
    imports (``_imports``) are declared so (never run): CPython 3.11 reads
    ``time.sleep()`` as an attribute and a call, not a method call, where ``time``
    is an imported name."""
    module = ast.fix_missing_locations(ast.Module(body=[*imports, node],
                                                  type_ignores=[]))
    code = compile(module, fn.__code__.co_filename, "exec", dont_inherit=True)
    made: dict[str, Any] = {}
    exec(code, fn.__globals__, made)
    clone = made[node.name]
    clone.__defaults__, clone.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
    return clone


def _shape(code: CodeType) -> tuple:
    """What two codes of one body share, constants aside: bytecode, names and
    parameters (the same bytecode may take its arguments otherwise)."""
    return (code.co_code, code.co_names, code.co_varnames, code.co_argcount,
            code.co_posonlyargcount, code.co_kwonlyargcount,
            code.co_flags & 0xFFFF)     # (not the __future__ flags: none is compiled in)


def _imports(module: ast.Module | None) -> list[ast.stmt]:
    """``if False: import ... as name`` for each name ``module`` (a function's,
    parsed) binds by an import outside its functions and classes (none where its
    source is missing)."""
    if module is None:
        return []
    names: set[str] = set()
    for n in _outside_functions(module):
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names
                         if a.name != "*")
    return _declared(names)


def _declared(names: set[str]) -> list[ast.stmt]:
    """``if False: import sys as name`` for each of ``names`` (none: nothing)."""
    if not names:
        return []
    imports: list[ast.stmt] = [ast.Import([ast.alias("sys", n)]) for n in sorted(names)]
    return [ast.If(ast.Constant(False), imports, [])]


def _same(a: CodeType, b: CodeType) -> bool:
    if _shape(a) != _shape(b):
        return False
    if len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, CodeType) and isinstance(y, CodeType):
            if not _same(x, y):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Await,
           ast.Yield, ast.YieldFrom)
_MANY = (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp)


class _Rewrite:
    """The clone's body: spawns of the function itself call ``slot``, ``sync`` calls
    become their values; ``Unfit`` where a future could be seen as anything but an
    argument of ``sync`` (the clone's spawns return values, not futures). With a
    ``batch`` (the prefix of its names), a list comprehension of spawns is a batch of
    latent calls that thieves can take (``dac.latent``)."""

    def __init__(self, fn: FunctionType, sf: SpawnFunction, slot: str,
                 batch: str | None = None) -> None:
        self.fn, self.sf, self.slot, self.batch = fn, sf, slot, batch
        self.local = set(fn.__code__.co_varnames) | set(fn.__code__.co_cellvars)
        self.parent: dict[ast.AST, ast.AST] = {}
        self.one: set[str] = set()      # local names that hold one future
        self.many: set[str] = set()     # ... a list of them
        self.each: set[str] = set()     # loop names over such a list (``.result()``)

    def found(self, node: ast.FunctionDef) -> _Rewrite:
        """What ``node`` holds, checked (``Unfit``), for ``_Replace`` to rewrite it."""
        for outer in ast.walk(node):
            for inner in ast.iter_child_nodes(outer):
                self.parent[inner] = outer
        body = [n for stmt in node.body for n in ast.walk(stmt)]
        for n in body:
            self._check(n)
        for n in body:
            if isinstance(n, ast.Call) and self._spawns(n):
                self._place(n)
        for n in body:
            if isinstance(n, _LOOPS) and self._over_futures(n):
                self.each.add(n.target.id)  # type: ignore[attr-defined]
        for n in body:
            if isinstance(n, ast.Name):
                self._check_name(n)
                self._check_each(n)
        for n in body:
            if isinstance(n, ast.Call) and self._is_sync(n.func):
                self._check_sync(n)
        return self

    def latent(self, comp: ast.ListComp) -> bool:
        """``comp`` is a comprehension of spawns whose items a thief may take
        (``dac.latent``): one loop, no condition, a name or a flat tuple of names
        as its target, the spawn's arguments positional, no ``:=`` in them, and not
        itself inside a comprehension (its batch's iterator is a local name)."""
        if not (self._spawns(comp.elt) and _positional(comp.elt)):
            return False
        if len(comp.generators) != 1:
            return False
        loop = comp.generators[0]
        target = loop.target
        if loop.ifs or loop.is_async or not (isinstance(target, ast.Name) or (
                isinstance(target, ast.Tuple) and target.elts and
                all(isinstance(e, ast.Name) for e in target.elts))):
            return False
        if any(isinstance(n, ast.NamedExpr) for n in ast.walk(comp.elt)):
            return False
        up = self.parent.get(comp)
        while up is not None and not isinstance(up, ast.FunctionDef):
            if isinstance(up, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                return False
            up = self.parent.get(up)
        return True

    # what a name or a call is --------------------------------------------------
    def _global(self, name: str) -> Any:
        return None if name in self.local else self.fn.__globals__.get(name)

    def _spawns(self, n: ast.AST) -> bool:
        """A call of the function itself, by its global name."""
        if not isinstance(n, ast.Call) or not isinstance(n.func, ast.Name):
            return False
        return self._is_self(self._global(n.func.id))

    def _is_self(self, value: Any) -> bool:
        """``value`` is this function's ``@spawn`` function (on a leaf, maybe that of
        another unpickled ``SpawnFunction`` of the same body)."""
        sf = _spawn_of(value)
        return sf is not None and (sf is self.sf or getattr(sf, "fn", None) is self.fn)

    def _is_sync(self, func: ast.AST) -> bool:
        if isinstance(func, ast.Name):
            return self._global(func.id) is context.sync
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            return func.attr == "sync" and \
                getattr(self._global(func.value.id), "sync", None) is context.sync
        return False

    def _check(self, n: ast.AST) -> None:
        if isinstance(n, _NESTED):
            raise Unfit(f"it holds a {type(n).__name__}")
        if isinstance(n, ast.Attribute) and n.attr in _FUTURE_METHODS and \
                not self._result_of(n.value):
            raise Unfit(f"it reads .{n.attr} (of a future?)")
        if isinstance(n, ast.Name) and n.id not in self.local:
            value = self._global(n.id)
            up = self.parent.get(n)
            at_call = isinstance(up, ast.Call) and up.func is n
            if isinstance(n.ctx, ast.Store) and (value is context.sync or _spawn_of(value)):
                raise Unfit(f"it assigns the global {n.id}")
            if _spawn_of(value) is not None and not (at_call and self._is_self(value)):
                raise Unfit(f"it uses the @spawn function {n.id} other than by calling "
                            f"itself")
            if value is context.sync and not at_call:
                raise Unfit("it passes sync on")
            if isinstance(value, type) and value.__module__ == "dac.future":
                raise Unfit(f"it names {n.id}")
        if isinstance(n, ast.Call) and self._is_sync(n.func) and (
                n.keywords or any(isinstance(a, ast.Starred) for a in n.args)):
            raise Unfit("it calls sync with * or keywords")

    # where futures go ----------------------------------------------------------
    def _place(self, call: ast.Call) -> None:
        """A spawn's future goes to ``sync``, to nothing, or to one local name (which
        holds it, or a list of such)."""
        up = self.parent[call]
        if isinstance(up, ast.Expr) or self._sync_arg(call):
            return
        self._hold(up, call)

    def _hold(self, up: ast.AST, call: ast.Call) -> None:
        if isinstance(up, ast.Assign) and up.value is call and _one_name(up):
            self.one.add(up.targets[0].id)  # type: ignore[attr-defined]
            return
        if isinstance(up, ast.Call) and up.args == [call] and not up.keywords \
                and isinstance(up.func, ast.Attribute) and up.func.attr == "append" \
                and isinstance(up.func.value, ast.Name):
            self.many.add(up.func.value.id)
            return
        if isinstance(up, (ast.List, ast.Tuple)) or \
                isinstance(up, (ast.ListComp, ast.GeneratorExp)) and up.elt is call:
            group = self.parent[up]
            if self._sync_arg(up):
                return
            if isinstance(group, ast.Assign) and group.value is up and _one_name(group):
                self.many.add(group.targets[0].id)  # type: ignore[attr-defined]
                return
        raise Unfit("a future goes elsewhere than to sync or one local name")

    def _sync_arg(self, n: ast.AST) -> bool:
        up = self.parent.get(n)
        return isinstance(up, ast.Call) and self._is_sync(up.func) and n in up.args

    def _check_name(self, n: ast.Name) -> None:
        name = n.id
        if name not in self.one and name not in self.many:
            return
        if name not in self.local:
            raise Unfit(f"{name}, which holds futures, is not a local name")
        if name in self.one and name in self.many:
            raise Unfit(f"{name} holds a future and a list of them")
        up = self.parent[n]
        if isinstance(n.ctx, ast.Store):
            if isinstance(up, ast.Assign) and _one_name(up) and self._holds(name, up.value):
                return
            raise Unfit(f"{name} is given something other than futures")
        if isinstance(n.ctx, ast.Load):
            if self._sync_arg(n):
                return
            if name in self.one and isinstance(up, (ast.List, ast.Tuple)) and \
                    self._sync_arg(up):
                return
            if name in self.many and isinstance(up, ast.Attribute) and \
                    up.attr == "append" and self.parent[up].func is up:  # type: ignore
                return
            if name in self.one and self._result_of(n) or \
                    name in self.many and isinstance(up, _LOOPS) and up.iter is n and \
                    self._over_futures(up):
                return
        raise Unfit(f"{name} (a future, or a list of them) is used other than by sync")

    # ``.result()``: of a name holding a future, or looping over a list of them ------
    def _result_of(self, n: ast.AST) -> bool:
        """``n`` is a local name read by ``n.result()`` (no arguments)."""
        up = self.parent.get(n)
        call = self.parent.get(up) if up is not None else None
        return isinstance(n, ast.Name) and isinstance(up, ast.Attribute) and \
            up.attr == "result" and isinstance(call, ast.Call) and call.func is up \
            and not call.args and not call.keywords

    def _over_futures(self, loop: ast.For | ast.comprehension) -> bool:
        """``for x in kids`` (a loop or a comprehension's), ``kids`` a name holding
        a list of futures, ``x`` a plain name."""
        return isinstance(loop.iter, ast.Name) and loop.iter.id in self.many and \
            isinstance(loop.target, ast.Name)

    def _check_each(self, n: ast.Name) -> None:
        """A loop name over futures is given only by its loop and read only by
        ``.result()``."""
        if n.id not in self.each:
            return
        if n.id in self.one or n.id in self.many:
            raise Unfit(f"{n.id} holds a future and a list of them")
        up = self.parent[n]
        if isinstance(n.ctx, ast.Store) and isinstance(up, _LOOPS) and up.target is n \
                and self._over_futures(up) or \
                isinstance(n.ctx, ast.Load) and self._result_of(n):
            return
        raise Unfit(f"{n.id} (a future of a loop) is used other than by .result()")

    def _holds(self, name: str, value: ast.AST) -> bool:
        if name in self.one:
            return self._spawns(value)
        if isinstance(value, (ast.List, ast.Tuple)):
            return all(self._spawns(e) for e in value.elts)
        return isinstance(value, (ast.ListComp, ast.GeneratorExp)) and \
            self._spawns(value.elt)

    def _check_sync(self, call: ast.Call) -> None:
        kinds = [self.kind(a) for a in call.args]
        if len(kinds) == 1 and kinds[0] in ("one", "many") or \
                all(k == "one" for k in kinds):
            return
        raise Unfit("sync is given something other than futures")

    def kind(self, n: ast.AST) -> str:
        """``one`` future, ``many`` (an iterable of them) or ``other``."""
        if self._spawns(n) or isinstance(n, ast.Name) and n.id in self.one:
            return "one"
        if isinstance(n, ast.Name) and n.id in self.many:
            return "many"
        if isinstance(n, (ast.List, ast.Tuple)) and all(
                self.kind(e) == "one" for e in n.elts):
            return "many"
        if isinstance(n, (ast.ListComp, ast.GeneratorExp)) and self._spawns(n.elt):
            return "many"
        return "other"


def _needs_no_copy(call: ast.Call, loop: ast.AST | None = None) -> bool:
    """``sync(kids)`` whose list of values may be ``kids`` itself rather than a copy
    (``[*kids]``, 40-100 ns): ``kids`` a list made there (``sync([f(x) for x in
    xs])``), or a name that a ``for`` loop (``loop``, where given) runs over and its
    body does not name (nothing appends to the list while the loop reads it)."""
    if len(call.args) != 1 or call.keywords:
        return False
    arg = call.args[0]
    if isinstance(arg, (ast.List, ast.ListComp)):
        return True
    return isinstance(arg, ast.Name) and isinstance(loop, ast.For) and \
        loop.iter is call and not any(
            isinstance(n, ast.Name) and n.id == arg.id
            for part in (*loop.body, *loop.orelse) for n in ast.walk(part))


def _target_names(target: ast.AST) -> list[str]:
    """The names a comprehension's target binds: one name, or a flat tuple of them."""
    if isinstance(target, ast.Name):
        return [target.id]
    assert isinstance(target, ast.Tuple)
    return [e.id for e in target.elts if isinstance(e, ast.Name)]


def _positional(call: ast.AST) -> bool:
    """A call with positional arguments only, none of them starred."""
    return isinstance(call, ast.Call) and not call.keywords and \
        not any(isinstance(a, ast.Starred) for a in call.args)


def _one_name(assign: ast.Assign) -> bool:
    return len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Name)


def _spawn_of(value: Any) -> Any:
    return getattr(value, "__dac_spawn__", None) if callable(value) else None


class _Replace(ast.NodeTransformer):
    """The rewrite itself, from what ``_Rewrite`` found (kinds read before any
    node changes)."""

    def __init__(self, found: _Rewrite) -> None:
        self.found = found
        self.spawns: set[int] = set()
        self.syncs: dict[int, list[str]] = {}
        self.results: set[int] = set()  # ``x.result()`` of a future: ``x``
        self.batches: set[int] = set()  # ``[f(...) for ...]``: latent calls
        self.as_is: set[int] = set()    # ``sync(kids)`` that needs no copy: ``kids``
        # (the name of what a thief needs, the function making a taken item's
        # arguments, whether the comprehension's target is a tuple) of each batch
        self.made: list[tuple[str, ast.FunctionDef, bool]] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        f = self.found
        for n in ast.walk(node):
            if f._spawns(n):
                self.spawns.add(id(n))
            elif isinstance(n, ast.Call) and f._is_sync(n.func):
                self.syncs[id(n)] = [f.kind(a) for a in n.args]
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    isinstance(n.func.value, ast.Name) and f._result_of(n.func.value) \
                    and n.func.value.id in f.one | f.each:
                self.results.add(id(n))
            elif isinstance(n, ast.ListComp) and f.batch is not None and f.latent(n):
                self.batches.add(id(n))
            if isinstance(n, ast.Call) and f._is_sync(n.func) and \
                    _needs_no_copy(n, f.parent.get(n)):
                self.as_is.add(id(n))
        node.body = [self.visit(s) for s in node.body]
        return node

    def visit_ListComp(self, node: ast.ListComp) -> ast.AST:
        """``[f(a, x) for x in xs]`` of spawns: a batch thieves may take its items
        from (``dac.latent``, ``_BATCH``), written out with no call of Python's
        own (a call to register the batch and one to end it cost UTS T3 on one
        leaf 3-5%); ``make(a, x)``, written beside it, makes a taken item's
        arguments."""
        if id(node) not in self.batches or self.found.batch is None:
            self.generic_visit(node)
            return node
        assert isinstance(node.elt, ast.Call)
        loop = node.generators[0]
        names = _target_names(loop.target)
        used = sorted({n.id for a in node.elt.args for n in ast.walk(a)
                       if isinstance(n, ast.Name) and n.id in self.found.local} - set(names))
        k = len(self.made)
        known = f"{self.found.batch}_{k}"
        self.generic_visit(node)
        make = ast.FunctionDef(
            f"{known}_args", ast.arguments([], [ast.arg(a) for a in [*used, *names]],
                                           None, [], [], None, []),
            [ast.Return(ast.Tuple([copy.deepcopy(a) for a in node.elt.args],
                                  ast.Load()))], [], None)
        self.made.append((known, ast.copy_location(make, node),
                          isinstance(loop.target, ast.Tuple)))
        items = loop.iter
        loop.iter = ast.Name(f"_dac_it_{k}", ast.Load())
        parts = {"ITEMS": items, "COMP": node, "KNOWN": ast.Name(known, ast.Load()),
                 "VALUES": [ast.Name(u, ast.Load()) for u in used]}
        return ast.copy_location(_Fill(parts).visit(_batch_expression(k)), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if id(node) in self.spawns:
            node.func = ast.copy_location(ast.Name(self.found.slot, ast.Load()), node.func)
            return node
        if id(node) in self.results:
            return node.func.value          # type: ignore[attr-defined]
        kinds = self.syncs.get(id(node))
        if kinds is None:
            return node
        if not kinds:
            value: ast.expr = ast.Constant(None)
        elif kinds == ["many"] and id(node) in self.as_is:
            value = node.args[0]
        elif kinds == ["many"]:
            value = ast.List([ast.Starred(node.args[0], ast.Load())], ast.Load())
        elif len(kinds) == 1:
            value = node.args[0]
        else:
            value = ast.Tuple(node.args, ast.Load())
        return ast.copy_location(value, node)
