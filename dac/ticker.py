"""A wall-clock timer that ticks every ``POLL_S`` while a leaf runs a task.

Below its horizon a leaf's task runs in a serial context, as the elision does
(``dac.stealable``): a spawn there neither counts itself towards the next poll nor
keeps the recursion's level, so nothing on its path says when to read messages. The
timer does: ``SIGALRM`` every ``period`` seconds, whose handler (run by Python between
two bytecodes of the main thread) turns the task back into the leaf's own context, so
the next spawn polls. Wall-clock time, not CPU time: a task that sleeps must still
answer thieves. The timer runs only while a task does (an idle leaf gets no signal),
only in the main thread (where Python runs handlers), and never where the program set
its own ``SIGALRM`` handler. Interrupted system calls are restarted (``siginterrupt``),
and Python retries its own (PEP 475): ``time.sleep`` in a task sleeps as long as asked.
"""

from __future__ import annotations

import signal
import threading
from typing import Any, Callable

# what a tick calls now (None: the timer is stopped; a tick raised just before that
# still finds the handler, which then does nothing)
_target: list[Callable[[], None] | None] = [None]


def _on_tick(signum: int, frame: Any) -> None:
    target = _target[0]
    if target is not None:
        target()


def start(target: Callable[[], None], period: float) -> bool:
    """Call ``target()`` every ``period`` seconds; False where no timer can run
    (another thread, no ``setitimer``, a ``SIGALRM`` handler of the program's)."""
    if _target[0] is not None:
        return _target[0] == target
    if not hasattr(signal, "setitimer") or \
            threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGALRM) is not _on_tick:
        if signal.getsignal(signal.SIGALRM) != signal.SIG_DFL:
            return False
        signal.signal(signal.SIGALRM, _on_tick)
        signal.siginterrupt(signal.SIGALRM, False)
    _target[0] = target
    signal.setitimer(signal.ITIMER_REAL, period, period)
    return True


def stop() -> None:
    """No more ticks."""
    if _target[0] is not None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _target[0] = None
