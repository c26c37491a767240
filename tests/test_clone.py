"""The fast clone (``dac.clone``): a ``@spawn`` body whose spawns are plain calls,
run where calls run at once (the serial elision, a leaf's task below its horizon);
what it refuses; and that a leaf's thieves still get work from under it."""

import dis
import importlib.util
import linecache
import sys

import pytest

import dac
from dac import clone
from dac.spawn import spawn_function

sys.path.insert(0, __import__("os").path.dirname(__file__))
import clone_programs as cp  # noqa: E402


@pytest.mark.parametrize("fn", [cp.fib, cp.below, cp.kids, cp.appended, cp.frames,
                                cp.grain_below, cp.results])
def test_these_bodies_get_a_clone(fn):
    assert clone.why(spawn_function(fn)) == ""


def test_the_elision_runs_the_clone_with_the_serial_answers():
    assert cp.fib(20) == 6765
    assert cp.below(10) == (1024, 1024)          # every leaf of the tree in the clone
    assert cp.kids(10) == 1024
    assert cp.results(10) == 1024
    seen = []
    assert cp.appended(6, seen) == 64
    assert seen and all(seen)


def test_a_level_of_the_clone_is_one_frame():
    """The clone calls itself: one frame a level (two, the written function's and the
    body's, without it), under the top call (its written function and body) and its
    first spawn's written function."""
    seen = []
    assert cp.frames(30, seen) == 30
    assert seen == [30 + 3]


@pytest.mark.parametrize("fn, why", [
    (cp.reads_result, "it reads .result (of a future?)"),
    (cp.asks_done, "it reads .done (of a future?)"),
    (cp.loop_name_kept, "f (a future of a loop) is used other than by .result()"),
    (cp.calls_another, "it uses the @spawn function fib other than by calling itself"),
    (cp.returns_a_future, "a future goes elsewhere than to sync or one local name"),
    (cp.prints_a_future, "a (a future, or a list of them) is used other than by sync"),
    (cp.syncs_starred, "it calls sync with * or keywords"),
    (cp.holds_a_lambda, "it holds a Lambda"),
    (cp.keeps_a_global, "FUTURES, which holds futures, is not a local name"),
    (cp.closure(), "not a function of a module"),
])
def test_a_body_that_could_see_a_future_keeps_its_spawns(fn, why):
    """Where a clone could run differently from the body (a future read, passed on,
    returned), the body runs as it is, with the same answers."""
    assert clone.why(spawn_function(fn)) == why


def test_the_answers_of_refused_bodies():
    assert cp.reads_result(5) == 5
    assert cp.asks_done(4) == 4
    assert cp.loop_name_kept(3) == 3
    assert cp.calls_another(4) == 3 + 2 + 1 + 1
    assert cp.syncs_starred(4) == 4
    assert cp.prints_a_future(0) == 0
    assert cp.keeps_a_global(3) == 3


_CHAIN = ("from dac import spawn, sync\n\n@spawn\ndef f(n):\n"
          "    return 0 if n == 0 else sync(f(n - 1)) + 1\n")


def _chain_module(tmp_path, name):
    """A module of its own file holding ``f``, a chain of spawns: (its path, it)."""
    path = tmp_path / f"{name}.py"
    path.write_text(_CHAIN)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def test_a_body_edited_since_it_was_imported_gets_no_clone(tmp_path):
    """The clone is written from the source file: where it no longer compiles to the
    body's code, no clone (it would run the new text)."""
    path, module = _chain_module(tmp_path, "edited_since")
    path.write_text(_CHAIN.replace("+ 1", "+ 2"))
    linecache.checkcache(str(path))
    assert clone.why(spawn_function(module.f)) == \
        "its source does not compile to its code (edited since?)"
    assert module.f(3) == 3


_PLACES = ("import sys\nfrom dac import spawn, sync\n\n"
           "def same(fn):\n    return fn\n\n"
           "@spawn\ndef f(n):\n    return 0\n\n"
           "if sys.version_info >= (3,):\n"
           "    def g(n):\n        return n\n\n"
           "    @spawn\n    @same\n"
           "    def f(n):\n        return 0 if n == 0 else sync(f(n - 1)) + 2\n")


def test_a_clone_is_found_in_its_modules_tree_without_the_tokenizer(tmp_path,
                                                                     monkeypatch):
    """The clone's source is the ``def`` whose first line is the code's first line
    in the module's parsed file, wherever it sits outside functions and classes (in
    an ``if`` here, after another ``f`` of the same name, under two decorators).
    ``inspect.getsource`` was used, whose tokenizer cost a leaf 3-4 ms in its first
    job; with it unavailable the clone was not written ("no source (OSError)")."""
    import inspect
    import tokenize

    def unavailable(*args, **kwargs):
        raise OSError("the tokenizer was used")
    monkeypatch.setattr(inspect, "getsource", unavailable)
    monkeypatch.setattr(tokenize, "generate_tokens", unavailable)
    path = tmp_path / "placed.py"
    path.write_text(_PLACES)
    spec = importlib.util.spec_from_file_location("placed", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sf = spawn_function(module.f)
    assert clone.why(sf) == ""
    assert module.f(5) == 10
    assert clone._write(sf, register=False).__code__.co_firstlineno == 17   # 2nd def
    path.write_text("")                       # a file gone empty: no source, no clone
    linecache.checkcache(str(path))
    assert clone.why(sf) == "no source"
    assert module.f(4) == 8


def _module_of(tmp_path, name, text):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _count_whole_parses(monkeypatch):
    """How many times the clone parsed a whole module (a list that grows)."""
    calls = []
    whole = clone._module_tree

    def counted(fn):
        calls.append(fn.__name__)
        return whole(fn)
    monkeypatch.setattr(clone, "_module_tree", counted)
    return calls


def test_a_clone_is_written_from_the_functions_own_lines(tmp_path, monkeypatch):
    """Parsing the whole module cost a leaf 3-4 ms a function at its first job (a
    450-line module): the function's own lines and the module's import lines do,
    indented under an ``if`` and decorated too, with its lines where they are in the
    file (a traceback through the clone names them)."""
    whole = _count_whole_parses(monkeypatch)
    module = _module_of(tmp_path, "own_lines", _PLACES)
    sf = spawn_function(module.f)
    written = clone._write(sf, register=False)
    assert whole == []
    assert written.__code__.co_firstlineno == 17
    assert module.f(5) == 10
    fails = _module_of(tmp_path, "fails_at", _CHAIN.replace(
        "    return 0 if n == 0 else sync(f(n - 1)) + 1\n",
        "    if n == 0:\n        raise ValueError(n)\n"
        "    return sync(f(n - 1)) + 1\n"))
    with pytest.raises(ValueError) as caught:
        fails.f(3)
    assert caught.traceback[-1].lineno + 1 == 6        # (pytest counts from 0)
    assert whole == []


def test_lines_that_are_no_longer_its_definition_give_none():
    """A file edited since (comments where the ``def`` was, or its lines gone): no
    definition from its lines, and the clone falls back as before."""
    from dac import source_lines
    fn = spawn_function(cp.fib).fn
    assert source_lines.definition(fn, ["# nothing here\n"] * 200) is None
    assert source_lines.definition(fn, ["    # indented\n"] * 200) is None
    assert source_lines.definition(fn, []) is None


_TRY_IMPORT = ("import sys\ntry: import json as js\nexcept ImportError: js = None\n"
               "from dac import spawn, sync\n\n@spawn\ndef f(n):\n"
               "    return 0 if n == 0 else sync(f(n - 1)) + len(js.dumps(n))\n")


def test_an_import_its_lines_miss_makes_the_clone_parse_the_whole_module(
        tmp_path, monkeypatch):
    """``try: import json as js`` on one line is no import line: ``js.dumps(n)``
    then compiles otherwise than in the module (a method call, not an attribute
    and a call), the check fails, and the whole module is parsed, which finds it."""
    whole = _count_whole_parses(monkeypatch)
    module = _module_of(tmp_path, "try_import", _TRY_IMPORT)
    assert clone.why(spawn_function(module.f)) == ""
    assert whole == ["f"]
    assert module.f(3) == 3


def test_leaves_run_the_clone_below_the_horizon_and_thieves_still_get_work():
    """On 2 leaves the tree's bottom runs in clones on the leaves (the top levels of
    each task are deque entries, and a wake routes one spawn through the leaf's
    context), and the other leaf steals."""
    report = dac.run_report(cp.below, 14, procs=2)
    leaves, in_clones = report.result
    assert leaves == 2 ** 14
    assert in_clones >= leaves // 2
    busy = [p for p in report.stats["processes"] if p["role"] == "leaf" and p["tasks"]]
    assert len(busy) == 2


def test_a_wake_routes_a_clones_next_spawn_through_the_leaf(monkeypatch):
    """In a leaf with a thief (``test_nested._Thief``: it asks at every poll), a
    task's bottom runs in the clone, whose frames poll only when the ticker wakes the
    task: the next spawn then runs the body in the leaf's context
    (``run_here``), which polls, pays the owed thief from entries, and puts the clone
    back in its slot. Fails without the wake's routing: the thief is never owed."""
    import nested_programs as nest
    from test_nested import _Thief, _warm

    from dac.stealable import StealableContext
    routed, back = [], []
    run_here = StealableContext.run_here

    def spied(self, *a):
        routed.append(a[1])
        try:
            return run_here(self, *a)
        finally:        # (a later tick may route them again before the task ends)
            back.append(all(ref().__globals__[slot] is ref()
                            for ref, slot in clone._SLOTS if ref() is not None))
    monkeypatch.setattr(StealableContext, "run_here", spied)
    worker = _Thief()
    ctx = worker.ctx = _warm(StealableContext(worker))
    assert clone.why(spawn_function(nest.binary)) == ""
    assert ctx.run_task(spawn_function(nest.binary), (24,), {}, 0, False) == 2 ** 24
    assert routed and worker.owed_at and worker.paid
    assert any(back)                # a routed call put the clones back in their slots


def _slots_routed() -> list[bool]:
    return [ref().__globals__[slot] is ref()._dac_routed for ref, slot in clone._SLOTS
            if ref() is not None]


def _ticking(ctx):
    """``ctx`` as while a ticker runs (its task goes below the horizon in a serial
    context), with ``binary``'s clone written and every slot holding its clone."""
    import nested_programs as nest
    ctx.below = ctx._serial_below
    spawn_function(nest.binary).ready()
    clone.direct()
    return ctx


def test_a_tick_in_the_leafs_own_context_routes_the_clones():
    """A clone's frames can run in the leaf's own context with their slots holding
    the clones (a call nested below the horizon put them back after a wake routed
    them): a tick there routes them, so their next spawn polls. Without it, a thief
    owed work while the clock was paused (every spawn then an entry, counted)
    waited for the whole subtree under those frames: on UTS T3, 2 leaves, a split
    answered 805-888 ms after it came, near the end of the run."""
    from test_nested import _Worker

    from dac import context
    from dac.stealable import StealableContext
    ctx = _ticking(StealableContext(_Worker()))
    saved = context.current()
    context.set_current(ctx)
    try:
        ctx._tick(False, None)
        assert _slots_routed() and all(_slots_routed())
        assert ctx.countdown == 1          # a clock's tick: the count left as it was
        ctx._tick(True, None)
        assert ctx.countdown == 0          # a ring: the next counted spawn polls
    finally:
        context.set_current(saved)
        clone.direct()


def test_a_routed_call_that_returns_while_a_thief_is_owed_leaves_the_clones_routed():
    """``run_here`` returns into a clone's frames. While a thief is owed work (every
    spawn an entry, the clock paused) those frames' spawns must come back through
    the leaf's context, whatever a nested call did to the slots meanwhile; else
    they run as plain calls until the subtree ends, and the thief waits for it."""
    import nested_programs as nest
    from test_nested import _Worker

    from dac import context
    from dac.stealable import EVERY, StealableContext
    ctx = _ticking(StealableContext(_Worker()))
    ctx.owed = 1
    ctx._place_horizon()
    assert ctx.horizon == EVERY
    saved = context.current()
    context.set_current(ctx)
    try:
        assert ctx.run_here(spawn_function(nest.binary), (0,), {}) == 1
        assert context.current() is ctx
        assert _slots_routed() and all(_slots_routed())
    finally:
        context.set_current(saved)
        clone.direct()


def test_a_clone_is_dropped_with_its_module(tmp_path):
    """A warm leaf serves many scripts: the clones of a module nobody holds any more
    go with it, and wakes stop visiting them."""
    import gc
    gc.collect()
    clone.route()                   # (the slots of modules other tests dropped go)
    clone.direct()
    _path, module = _chain_module(tmp_path, "short_lived")
    assert module.f(5) == 5
    slots = len(clone._SLOTS)
    mine = [ref for ref, _ in clone._SLOTS if ref().__globals__ is module.__dict__]
    assert len(mine) == 1
    del module
    gc.collect()
    assert mine[0]() is None
    clone.route()
    clone.direct()
    assert len(clone._SLOTS) == slots - 1


def test_at_a_grain_the_user_set_the_clone_runs_and_no_wake_routes_it():
    """With ``cutoff=`` the calls at the grain run their nested calls plain: the
    clone does (in the elision and on the leaves), and it is not among the clones a
    wake routes (nothing below that grain is stealable)."""
    assert cp.grain_below(10) == (1024, 1024)
    assert all(ref().__name__ != "grain_below" for ref, _ in clone._SLOTS)
    report = dac.run_report(cp.grain_below, 12, procs=2)
    assert report.result == (4096, 4096)


def test_a_body_whose_code_takes_other_parameters_gets_no_clone():
    """The same bytecode with its parameters otherwise (keyword-only here) is not
    the same code: the source would not match it."""
    sf = spawn_function(cp.fib)
    code = sf.fn.__code__
    assert not clone._same(code, code.replace(co_argcount=0, co_kwonlyargcount=1))
    assert clone._same(code, code)


def _batched(fn) -> bool:
    """The clone of ``fn`` pushes batches of latent calls (``dac.latent``)."""
    return "_dac_push" in clone.of(spawn_function(fn)).__code__.co_names


def test_sync_gives_a_list_made_for_it_or_a_loop_that_leaves_it_alone_as_is():
    """``sync(kids)`` in a clone is ``[*kids]`` (``sync`` returns a new list), except
    where no copy can be told apart: a list made in its call, or ``for x in
    sync(kids)`` whose body does not name ``kids``. A body that spawns into
    ``kids`` still loops over the values ``sync`` gave."""
    for fn in (cp.appends_while_looping, cp.sums_over_kids):
        assert clone.why(spawn_function(fn)) == ""
    assert cp.appends_while_looping(4) == 2
    assert cp.sums_over_kids(6) == 64
    # the copy (``[*kids]``: a LIST_EXTEND) is gone where nothing can tell: the two
    # bodies differ by it alone (their comprehensions are alike in or out of a leaf)
    def extends(fn):
        code = clone.of(spawn_function(fn)).__code__
        return [i.opname for i in dis.get_instructions(code)].count("LIST_EXTEND")
    assert extends(cp.appends_while_looping) == extends(cp.sums_over_kids) + 1


def test_a_comprehension_of_spawns_is_a_batch_in_a_leafs_clone(monkeypatch):
    """A list comprehension of spawns in a leaf's clone runs over a batch a thief can
    take its unstarted items from (``dac.latent``): a name or a tuple of names as its
    target. Not with a condition, two loops, or inside another comprehension; nor
    in the clone of a function with ``cutoff=``, under whose grain nothing is
    stealable; nor outside a leaf (the elision costs what it cost). Every form gives
    the serial answers, and leaves no batch behind."""
    from dac import latent
    monkeypatch.setattr(latent, "LEAF", False)
    assert not _batched(cp.kids)
    monkeypatch.setattr(latent, "LEAF", True)
    assert _batched(cp.kids) and _batched(cp.pairs_fanned)
    assert not _batched(cp.filtered) and not _batched(cp.grain_below)
    assert cp.pairs_fanned(5, 3) == 3 ** 5
    assert cp.filtered(6) == 64
    assert latent.BATCHES == [] and latent.TAKEN == {}


def test_a_batch_an_exception_left_is_dropped_when_one_below_it_ends():
    """In a leaf's task, an exception out of a batch's call leaves its batch (and
    those of the calls it went through) on the stack, up to where it is caught;
    the next batch to end under them drops them, and the task's end any left."""
    from dac import latent
    from dac.stealable import StealableContext
    from test_nested import _warm, _Worker
    seen: list = []
    ctx = _warm(StealableContext(_Worker()))
    assert ctx.run_task(spawn_function(cp.caught_below), (8, seen), {}, 0, False) == 0
    # the top 4 levels' spawns are deque entries (their bodies make no batch); the
    # clones below: the batches of 3, 2 and 1 at the first catch, then 2 and 1 again
    assert seen == [3, 5] * 32       # (in each of the 32 calls of 3)
    assert latent.BATCHES == [] and latent.on() is False


def test_only_the_thread_of_a_leafs_task_makes_batches():
    """Batches are made in the thread that runs a leaf's task: another thread's
    would interleave with the task's on the process's one stack (and a thief could
    take calls whose values nobody collects)."""
    from dac import latent
    from dac.stealable import StealableContext
    from test_nested import _warm, _Worker
    ctx = _warm(StealableContext(_Worker()))
    seen: list = []
    assert ctx.run_task(spawn_function(cp.batches_seen), (8, seen), {}, 0, False) == 256
    assert max(seen) >= 2                       # (the clone's levels, below the top's)
    seen.clear()
    task = spawn_function(dac.spawn(cp.in_a_thread))
    assert ctx.run_task(task, (8, seen), {}, 0, False) == 256
    assert len(seen) == 256 and set(seen) == {0}
    assert latent.BATCHES == [] and latent.on() is False
