"""The server process's background threads: :func:`start` one, and interpreter exit waits for them.

Each is a daemon thread (a page never waits for it to end), but at interpreter exit every one still
running may finish its step for at most :data:`EXIT_JOIN_S` seconds: a thread still inside HiGHS when the
interpreter finalises aborts the process. A thread polls :func:`exiting` between steps; :func:`on_exit`
registers a callback that wakes threads waiting on a condition of their own.

``PRIVLENS_WARM_UP=off`` (the test suite's many short-lived dashboards) turns background work off
(:func:`enabled`): whoever would have started a thread computes in its own instead.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable

__all__ = ["EXIT_JOIN_S", "enabled", "exiting", "on_exit", "start"]

#: the longest interpreter exit waits for one background thread
EXIT_JOIN_S = 10.0

_EXITING = threading.Event()
_LOCK = threading.Lock()
_THREADS: list[threading.Thread] = []
_WAKE: list[Callable[[], None]] = []


def _yielding(target: Callable[[], None]) -> Callable[[], None]:
    """``target``, run at the lowest CPU priority the OS gives this thread (Linux: a thread's own nice
    value), so that a page the user waits for wins the cores, and with them the interpreter lock, while
    background work (φ tables, certifications) runs beside it."""

    def run() -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except (AttributeError, OSError):  # not Linux, or not allowed: run at the process's priority
            pass
        target()

    return run


def start(target: Callable[[], None], *, name: str, yielding: bool = True) -> threading.Thread:
    """Run ``target`` in a daemon thread named ``name`` that interpreter exit waits for; return it. With
    ``yielding`` (background work) it runs at the lowest CPU priority (:func:`_yielding`); without (the
    early imports, which must end before a page imports the same modules) at the process's."""
    thread = threading.Thread(target=_yielding(target) if yielding else target, name=name, daemon=True)
    with _LOCK:
        _THREADS[:] = [t for t in _THREADS if t.is_alive()]
        _THREADS.append(thread)
    thread.start()
    return thread


def exiting() -> bool:
    """The interpreter is shutting down (or the main thread has ended: importing now fails)."""
    return _EXITING.is_set() or not threading.main_thread().is_alive()


def enabled() -> bool:
    """Whether to work in the background: not at exit, and not turned off (``PRIVLENS_WARM_UP=off``)."""
    return not exiting() and os.environ.get("PRIVLENS_WARM_UP", "").lower() not in ("off", "0", "no")


def on_exit(wake: Callable[[], None]) -> None:
    """Call ``wake`` at interpreter exit, before the threads are waited for."""
    with _LOCK:
        _WAKE.append(wake)


@atexit.register
def _finish_at_exit() -> None:
    _EXITING.set()
    with _LOCK:
        wakes, threads = list(_WAKE), list(_THREADS)
    for wake in wakes:
        wake()
    for thread in threads:
        thread.join(timeout=EXIT_JOIN_S)
