"""One query's time limit, seen by every step of the engine that may run long.

``local_lipschitz`` and ``decide_exact`` take a ``time_limit`` for the whole query. The solvers get
what is left of it as their own limit; the engine's own searches (pattern tables, the ∞→1 branch
and bound, region LPs) check :func:`check_deadline` between blocks of work instead, so that a time
limit holds on every path. The deadline lives in a context variable: set by the entry point for the
duration of one query (nested queries keep the earlier of the two deadlines), invisible to any other
query, thread or process.

Reaching it raises :class:`TimeLimitReached`, a :class:`~privcore.errors.CertificationError`: the
value is then not known, and nothing may be decided or released on it (docs/TRUST.md). What the
search had found is dropped (except a finished split step's certified bracket, which a value query
whose MILP then runs out keeps: :func:`~privcore.lipschitz.engine.local_lipschitz`), and nothing
half-built is memoised (every memo stores a value only once it is complete).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from privcore.errors import CertificationError

__all__ = ["TimeLimitReached", "cancel_on", "check_deadline", "deadline_after", "no_deadline", "seconds_left"]

_DEADLINE: ContextVar[float | None] = ContextVar("privcore_lipschitz_deadline", default=None)
_CANCEL: ContextVar[threading.Event | None] = ContextVar("privcore_lipschitz_cancel", default=None)


class TimeLimitReached(CertificationError):
    """A query's ``time_limit`` was reached inside one of the engine's own searches."""


@contextmanager
def deadline_after(seconds: float | None, *, start: float | None = None) -> Iterator[None]:
    """Within the block, :func:`check_deadline` raises once ``seconds`` have passed since ``start``
    (``time.perf_counter()``; default now). None sets nothing; an earlier deadline already set wins."""
    if seconds is None:
        yield
        return
    at = (time.perf_counter() if start is None else start) + float(seconds)
    current = _DEADLINE.get()
    token = _DEADLINE.set(at if current is None else min(current, at))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


@contextmanager
def cancel_on(event: threading.Event) -> Iterator[None]:
    """Within the block, :func:`check_deadline` also raises once ``event`` is set (by another thread:
    a portfolio's other peer answered first, :mod:`~privcore.lipschitz.portfolio`)."""
    token = _CANCEL.set(event)
    try:
        yield
    finally:
        _CANCEL.reset(token)


@contextmanager
def no_deadline() -> Iterator[None]:
    """Within the block neither a deadline nor a cancellation is seen (a query's last, bounded step
    after its time ran out: the certified bound it still reports)."""
    tokens = (_DEADLINE.set(None), _CANCEL.set(None))
    try:
        yield
    finally:
        _CANCEL.reset(tokens[1])
        _DEADLINE.reset(tokens[0])


def seconds_left() -> float | None:
    """Seconds until the current deadline (negative once past it), None when none is set."""
    at = _DEADLINE.get()
    return None if at is None else at - time.perf_counter()


def check_deadline(what: str) -> None:
    """Raise :class:`TimeLimitReached` (naming ``what`` was running) once the deadline has passed or
    the query was cancelled (:func:`cancel_on`)."""
    event = _CANCEL.get()
    if event is not None and event.is_set():
        raise TimeLimitReached(f"the query was stopped during {what}: another peer answered first")
    at = _DEADLINE.get()
    if at is not None and time.perf_counter() > at:
        raise TimeLimitReached(
            f"the query's time limit was reached during {what}; the value is not known, so nothing is "
            "decided or released on it (a longer time limit may answer; the `lp` or `interval` "
            "certifier, chosen before any query, always answers)"
        )
