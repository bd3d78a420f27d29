"""The server process's background threads: :func:`start` one, and interpreter exit waits for them.

Each is a daemon thread (a page never waits for it to end), but at interpreter exit every one still
running may finish its step for at most :data:`EXIT_JOIN_S` seconds: a thread still inside HiGHS when the
interpreter finalises aborts the process. A thread polls :func:`exiting` between steps; :func:`on_exit`
registers a callback that wakes threads waiting on a condition of their own.

:func:`soon` computes a value once per key in a worker thread of this kind (at the process's priority)
and lets a page wait for it a little, then show "computing…" and look again later.

``PRIVLENS_WARM_UP=off`` (the test suite's many short-lived dashboards) turns background work off
(:func:`enabled`): whoever would have started a thread computes in its own instead.
``PRIVLENS_BACKGROUND_NICE`` (0–19, default :data:`BACKGROUND_NICE`) is the nice value background threads
run at (:func:`background_nice`).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from privcore._inflight import mark_background
from privcore.validation import ParameterError

__all__ = ["BACKGROUND_NICE", "EXIT_JOIN_S", "Job", "background_nice", "enabled", "exiting", "lower_priority",
           "on_exit", "soon", "start", "wait_all"]

LOG = logging.getLogger("privlens")

#: the longest interpreter exit waits for one background thread
EXIT_JOIN_S = 10.0
#: the nice value of background threads: the lowest priority Linux gives, so that a page wins the cores
BACKGROUND_NICE = 19

_EXITING = threading.Event()
_LOCK = threading.Lock()
_THREADS: list[threading.Thread] = []
_WAKE: list[Callable[[], None]] = []


def background_nice() -> int:
    """:data:`BACKGROUND_NICE`, or ``$PRIVLENS_BACKGROUND_NICE`` (an integer in [0, 19]; 0: the process's
    own priority, e.g. where every core is busy with work that waits for the background, as in the test
    suite's parallel workers). Anything else is a :class:`~privcore.validation.ParameterError` naming it."""
    text = os.environ.get("PRIVLENS_BACKGROUND_NICE", "").strip()
    if not text:
        return BACKGROUND_NICE
    if not (text.isascii() and text.isdigit()) or int(text) > 19:
        raise ParameterError(f"PRIVLENS_BACKGROUND_NICE must be an integer in [0, 19], got {text!r}")
    return int(text)


def lower_priority(nice: int | None = None) -> None:
    """Run the calling thread from now on at nice value ``nice`` (None: :func:`background_nice`; Linux: a
    thread's own nice value, which it cannot lower again), so that a page the user waits for wins the
    cores, and with them the interpreter lock, while background work (φ tables, certifications) runs
    beside it. The thread is marked as background work (:func:`privcore._inflight.mark_background`): a
    page asking for a result it is computing computes it beside it instead of waiting for a thread that
    a loaded machine barely runs."""
    nice = background_nice() if nice is None else nice
    mark_background()
    if nice <= 0:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except (AttributeError, OSError):  # not Linux, or not allowed: run at the process's priority
        pass


def _yielding(target: Callable[[], None], nice: int) -> Callable[[], None]:
    """``target``, run at nice value ``nice`` (:func:`lower_priority`)."""

    def run() -> None:
        lower_priority(nice)
        target()

    return run


def start(target: Callable[[], None], *, name: str, yielding: bool = True) -> threading.Thread:
    """Run ``target`` in a daemon thread named ``name`` that interpreter exit waits for; return it. With
    ``yielding`` (background work) it runs at :func:`background_nice` (read here, so that a bad value is
    named to the caller); without (the early imports, which must end before a page imports the same
    modules) at the process's."""
    run = _yielding(target, background_nice()) if yielding else target
    thread = threading.Thread(target=run, name=name, daemon=True)
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


@dataclass(kw_only=True)
class Job:
    """One value computed in the background by :func:`soon`: ``value`` once ``done`` is set (None when
    the computation failed: ``error`` says why, and the server log has the traceback); ``asked`` when a
    page last asked for it (:func:`time.monotonic`)."""

    compute: Callable[[], Any] = field(repr=False)
    name: str
    asked: float
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: str | None = None

    def wait(self, timeout: float) -> bool:
        """:func:`wait_all` for this job alone; whether it is done."""
        return wait_all([self], timeout)

    def run(self) -> None:
        """Compute the value (once)."""
        try:
            self.value = self.compute()
        except Exception as exc:  # the page shows what it has without it
            LOG.warning("background %s failed", self.name, exc_info=True)
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.done.set()


_JOBS: OrderedDict[Hashable, Job] = OrderedDict()
_QUEUED: dict[Hashable, Job] = {}
_JOBS_COND = threading.Condition()
_WORKERS: list[threading.Thread] = []
#: worker threads of :func:`soon` (two cores: one row's certification does not hold up every other row)
WORKERS = 2
#: values of :func:`soon` kept per process (the least recently asked go first)
MAX_JOBS = 256
#: a queued job no page has asked for in this many seconds is dropped (the user has moved on; asking
#: again queues it again)
STALE_S = 10.0


def soon(key: Hashable, compute: Callable[[], Any], *, name: str, wait_s: float = 0.0) -> Job:
    """The job computing ``compute()`` for ``key``, once per key in this process, after waiting at most
    ``wait_s`` seconds for it to be done. :data:`WORKERS` worker threads compute the queued jobs, the
    most recently asked first, at the process's priority: these are numbers a page shows now, which the
    page is drawn without (never at the lowest priority, where a loaded machine would starve them).
    Callers check :func:`enabled` first (without background work they compute in their own thread)."""
    now = time.monotonic()
    with _JOBS_COND:
        job = _JOBS.get(key)
        if job is None:
            job = _JOBS[key] = _QUEUED[key] = Job(compute=compute, name=name, asked=now)
            while len(_JOBS) > MAX_JOBS:
                old_key, _ = _JOBS.popitem(last=False)
                _QUEUED.pop(old_key, None)
            _WORKERS[:] = [t for t in _WORKERS if t.is_alive()]
            while len(_WORKERS) < WORKERS:
                _WORKERS.append(start(_work, name=f"privlens-soon-{len(_WORKERS)}", yielding=False))
            _JOBS_COND.notify_all()
        else:
            job.asked = now
            _JOBS.move_to_end(key)
    job.wait(wait_s)
    return job


def wait_all(jobs: list[Job], timeout: float) -> bool:
    """Wait at most ``timeout`` seconds for every job of ``jobs``, counting as asking for them meanwhile
    (a queued job someone waits for is never dropped as stale); whether all are done."""
    deadline = time.monotonic() + max(0.0, timeout)
    while True:
        now = time.monotonic()
        left = [job for job in jobs if not job.done.is_set()]
        if not left:
            return True
        if now >= deadline:
            return False
        for job in left:
            job.asked = now
        left[0].done.wait(timeout=min(deadline - now, 1.0))


def _next_job() -> Job | None:
    """The queued job asked for most recently (stale ones dropped), waiting for one; None at exit."""
    with _JOBS_COND:
        while not exiting():
            now = time.monotonic()
            for key, job in list(_QUEUED.items()):
                if now - job.asked > STALE_S:  # nobody looks at it any more: forget it
                    del _QUEUED[key]
                    if _JOBS.get(key) is job:
                        del _JOBS[key]
            if _QUEUED:
                key = max(_QUEUED, key=lambda k: _QUEUED[k].asked)
                return _QUEUED.pop(key)
            _JOBS_COND.wait(timeout=1.0)
    return None


def _work() -> None:
    while (job := _next_job()) is not None:
        job.run()


def _notify_all() -> None:
    with _JOBS_COND:
        _JOBS_COND.notify_all()


on_exit(_notify_all)  # at exit the worker stops waiting for jobs
