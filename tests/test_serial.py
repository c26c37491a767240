"""Serial elision and the programming model's errors, without any MPI process."""

import sys
from types import FunctionType, MethodType

import programs
import pytest

import dac
from dac import Future, SyncError, spawn, sync
from dac.spawn import spawn_function


# --- serial elision ---------------------------------------------------------------------
def test_fib_outside_run_is_the_plain_value():
    assert programs.fib(20) == 6765
    assert programs.fib(0) == 0
    assert programs.fib(1) == 1


def test_depth_and_cutoff_options_do_not_change_serial_values():
    assert programs.fib_depth3(18) == programs.plain_fib(18)
    assert programs.fib_cutoff(18) == programs.plain_fib(18)


@pytest.mark.parametrize("n", [1, 4, 6, 8])
def test_nqueens_python_body_outside_run(n):
    assert programs.queens(n, 0, 0, 0) == programs.QUEENS[n]


def test_serial_elision_uses_the_body_not_the_leaf_function():
    calls = []

    def leaf(n):
        calls.append(n)
        return -1

    @spawn(leaf=leaf)
    def double(n):
        return 2 * n

    assert double(21) == 42
    assert calls == []


def test_mutual_recursion_outside_run():
    assert programs.ping(12) == programs.plain_ping(12)
    assert programs.pong(9) == programs.plain_pong(9)


def test_kwargs_outside_run():
    expected = sum(3 * i + 2 for i in range(5, 40))
    assert programs.weighted_sum(5, 40, scale=3, offset=2) == expected


def test_a_spawn_function_returns_a_done_future_inside_a_serial_call():
    seen = []

    @spawn
    def child(x):
        return x + 1

    @spawn
    def parent(x):
        f = child(x)
        seen.append(f)
        return sync(f)

    assert parent(1) == 2
    assert isinstance(seen[0], Future) and seen[0].done()
    assert seen[0].result() == 2


def test_sync_with_no_argument_waits_for_all_children_and_returns_none():
    @spawn
    def child(x):
        return x * 10

    @spawn
    def parent():
        fs = [child(i) for i in range(4)]
        assert sync() is None
        return [f.result() for f in fs]

    assert parent() == [0, 10, 20, 30]


def test_sync_of_several_futures_returns_a_tuple_of_one_future_the_value():
    @spawn
    def child(x):
        return x

    @spawn
    def parent():
        one = sync(child(7))
        three = sync(child(1), child(2), child(3))
        return one, three

    assert parent() == (7, (1, 2, 3))


# --- recursion depth ---------------------------------------------------------------------
def test_a_900_level_recursion_runs_outside_run_as_in_plain_python():
    assert sys.getrecursionlimit() == 1000
    assert programs.plain_chain(900) == 900
    assert programs.chain(900) == 900
    assert sys.getrecursionlimit() == 1000          # restored after the call


def test_a_runaway_recursion_still_raises_recursion_error_and_restores_the_limit():
    with pytest.raises(RecursionError):
        programs.chain(10 ** 6)
    assert sys.getrecursionlimit() == 1000
    assert dac.context._users == 0


def test_the_recursion_limit_is_raised_once_for_nested_and_concurrent_users():
    from dac import context
    base = sys.getrecursionlimit()
    context.deeper(3)
    raised = sys.getrecursionlimit()
    assert raised == min(base * 3, max(base, 3 * (context._C_STACK_LEVELS or base)))
    context.deeper(3)                                # nested, or another thread
    assert sys.getrecursionlimit() == raised
    context.undeeper()
    assert sys.getrecursionlimit() == raised         # one user is left
    context.undeeper()
    assert sys.getrecursionlimit() == base


def test_a_recursion_limit_set_inside_a_serial_call_is_kept():
    @spawn
    def sets_limit(n):
        sys.setrecursionlimit(n)
        return sys.getrecursionlimit()

    base = sys.getrecursionlimit()
    try:
        assert sets_limit(1500) == 1500
        assert sys.getrecursionlimit() == 1500
    finally:
        sys.setrecursionlimit(base)


def test_a_serial_call_in_another_thread_restores_the_limit():
    import threading
    results = []
    threads = [threading.Thread(target=lambda: results.append(programs.chain(300)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [300] * 4
    assert sys.getrecursionlimit() == 1000


# --- what @spawn accepts: methods, static and class methods; not generators or async --
def test_a_spawn_method_runs_serially_bound_to_its_instance():
    f = programs.Fibber(3)
    assert f.fib(10) == 3 * 55
    assert programs.Fibber.fib(f, 10) == 3 * 55         # through the class: explicit self
    assert f.total(list(range(10))) == 3 * 45
    assert isinstance(f.fib, MethodType) and f.fib.__self__ is f
    assert f.fib.__func__ is programs.Fibber.fib
    assert f.fib.__name__ == "fib" and spawn_function(f.fib.__func__).depth is None
    assert repr(spawn_function(programs.Fibber.fib)) == "<spawn function Fibber.fib>"


def test_a_spawn_method_call_returns_a_done_future_inside_a_computation():
    seen = []

    class Tree:
        def __init__(self, k):
            self.k = k

        @spawn
        def child(self, x):
            return self.k * x

        @spawn
        def parent(self, x):
            f = self.child(x)
            seen.append(f)
            return sync(f) + 1

    assert Tree(5).parent(4) == 21
    assert isinstance(seen[0], Future) and seen[0].result() == 20


def test_a_spawn_method_recurses_as_deep_as_plain_python():
    class Chain:
        @spawn
        def down(self, n):
            return 0 if n == 0 else sync(self.down(n - 1)) + 1

    assert Chain().down(900) == 900


def test_static_and_class_methods_with_spawn_in_either_order():
    f, sub = programs.Fibber(2), programs.SubFibber(2)
    assert programs.Fibber.static_fib(15) == f.static_fib(15) == 610
    assert programs.Fibber.static_sum(0, 20) == f.static_sum(0, 20) == 190
    assert programs.Fibber.class_sum(0, 20) == f.class_sum(0, 20) == ("Fibber", 190)
    assert programs.SubFibber.class_sum(0, 8) == sub.class_sum(0, 8) == ("SubFibber", 28)
    assert programs.Fibber.class_count(6) == ("Fibber", 6)
    assert sub.class_count(6) == ("SubFibber", 6)


def _gen(n):
    yield n


async def _coro(n):
    return n


async def _agen(n):
    yield n


@pytest.mark.parametrize("fn, what, gives", [
    (_gen, "a generator function", "a generator"),
    (_coro, "an async function", "a coroutine"),
    (_agen, "an async generator function", "an async generator"),
], ids=["generator", "async", "async-generator"])
def test_generator_and_async_functions_are_refused_at_decoration(fn, what, gives):
    text = (f"@spawn cannot decorate {fn.__qualname__}: it is {what}, so a call returns "
            f"{gives} before its body runs, and dac needs a plain function that "
            f"returns its value")
    with pytest.raises(TypeError) as info:
        spawn(fn)
    assert str(info.value).startswith(text)
    with pytest.raises(TypeError, match="dac needs a plain function"):
        spawn(depth=2)(staticmethod(fn))


def test_run_accepts_a_bound_method_without_spawning_when_no_task_is_made(no_spawning):
    # depth 30 is below the whole recursion: it all runs on the root
    assert dac.run(programs.Fibber(4).fib, 12, procs=1, depth=30) == 4 * 144
    assert dac.run(programs.Fibber.class_count, 5, procs=1, depth=30) == ("Fibber", 5)


def test_run_of_a_method_bound_to_an_unpicklable_instance_says_so(no_spawning):
    with pytest.raises(dac.SerializationError) as info:
        dac.run(programs.LockedFibber(1).fib, 12, procs=1)
    text = str(info.value)
    assert text.startswith("Fibber.fib is bound to <programs.LockedFibber object at ")
    assert ("which goes to the leaves as the method's first argument with every task, "
            "and it cannot be pickled: TypeError: cannot pickle '_thread.lock' object"
            ) in text


def test_run_rejects_a_method_that_is_not_a_spawn_function(no_spawning):
    class Plain:
        def m(self, n):
            return n

    with pytest.raises(TypeError, match="decorated with @dac.spawn, got <bound method"):
        dac.run(Plain().m, 3, procs=1)


# --- sync and futures misused ---------------------------------------------------------
def test_sync_outside_a_spawned_call_raises_sync_error():
    with pytest.raises(SyncError, match=r"sync\(\) called outside a spawned call"):
        sync()
    with pytest.raises(SyncError, match="outside a spawned call"):
        sync(Future(3))


def test_sync_error_is_a_dac_error_and_a_runtime_error():
    assert issubclass(SyncError, dac.DacError)
    assert issubclass(SyncError, RuntimeError)


def test_sync_of_a_non_future_raises():
    with pytest.raises(SyncError, match=r"sync\(\) takes futures .* got int 5"):
        programs.sync_non_future(5)


def test_sync_of_a_non_future_among_futures_raises():
    @spawn
    def child(x):
        return x

    @spawn
    def parent():
        return sync(child(1), "two")

    with pytest.raises(SyncError, match="got str 'two'"):
        parent()


def test_the_serial_fast_path_still_refuses_what_is_no_done_future():
    """sync's fast path in the serial elision (one, two or a list of plain done
    futures) hands anything else to the checks: a non-future in a list, a future
    still pending."""
    @spawn
    def child(x):
        return x

    @spawn
    def in_a_list():
        return sync([child(1), 2])

    @spawn
    def pending(how):
        f = Future(call="g(1)")
        return sync(f) if how == 1 else sync(child(1), f) if how == 2 else sync([f])

    with pytest.raises(SyncError, match="got int 2"):
        in_a_list()
    for how in (1, 2, 3):
        with pytest.raises(SyncError, match=r"g\(1\) is not known yet"):
            pending(how)

    @spawn
    def fine(n):
        return sync(child(n)), sync(child(n), child(n + 1)), sync([child(n)] * 3), sync([])

    assert fine(4) == (4, (4, 5), [4, 4, 4], [])


def test_future_result_before_done_raises():
    f = Future(call="fib(30)")
    assert not f.done()
    with pytest.raises(SyncError, match=r"fib\(30\) is not known yet: call sync\(\)"):
        f.result()
    assert "pending" in repr(f)


def test_done_future():
    f = Future(None)
    assert f.done() and f.result() is None
    assert Future([1, 2]).result() == [1, 2]


# --- @spawn options ---------------------------------------------------------------------
def _body(n):
    return n


@pytest.mark.parametrize("depth", [-1, -10, True, 2.0, "3"])
def test_spawn_depth_must_be_a_non_negative_int(depth):
    with pytest.raises(ValueError, match=r"depth=.*>= 0"):
        spawn(depth=depth)(_body)


def test_spawn_depth_zero_is_allowed():
    f = spawn(depth=0)(_body)
    assert spawn_function(f).depth == 0 and f(5) == 5


@pytest.mark.parametrize("name", ["cutoff", "leaf", "gpu_batch"])
def test_spawn_function_options_must_be_callable(name):
    with pytest.raises(TypeError, match=rf"@spawn\({name}=\.\.\.\) must be callable"):
        spawn(**{name: 42})(_body)


def test_spawn_depth_and_cutoff_together_are_rejected():
    with pytest.raises(ValueError, match="depth= or cutoff=, not both"):
        spawn(depth=2, cutoff=lambda n: n < 3)(_body)


def test_spawn_of_a_non_function_is_rejected():
    with pytest.raises(TypeError, match="decorates a function"):
        spawn(5)


def test_spawn_keeps_the_function_metadata():
    assert programs.fib.__name__ == "fib"
    assert programs.fib.__doc__ is None
    assert type(programs.fib) is FunctionType and programs.fib.__wrapped__.__name__ == "fib"
    assert spawn_function(programs.queens).leaf is programs.count_from_py
    assert spawn_function(programs.fib_depth3).depth == 3
    assert spawn_function(programs.fib_cutoff).cutoff is programs._small
    assert repr(spawn_function(programs.fib)) == "<spawn function fib>"


def test_run_rejects_a_plain_function_without_spawning(no_spawning):
    with pytest.raises(TypeError, match="decorated with @dac.spawn"):
        dac.run(_body, 3, procs=1)


def test_leaf_may_be_a_module_function_reference():
    sf = spawn_function(spawn(leaf="math:floor", gpu_batch="os.path:join")(_body))
    assert not sf.leaf_loaded()
    import math
    assert sf.leaf is math.floor and sf.leaf_loaded()


@pytest.mark.parametrize("ref", ["math", "math:", ":floor", "a:b:c"])
def test_a_bad_reference_is_rejected(ref):
    with pytest.raises(TypeError, match="'module:function' string"):
        spawn(leaf=ref)(_body)


def test_an_unimportable_reference_says_which():
    sf = spawn_function(spawn(leaf="no_such_module_xyz:f")(_body))
    with pytest.raises(ImportError, match=r"@spawn\(leaf='no_such_module_xyz:f'\): "
                                          r"cannot import it"):
        sf.leaf
