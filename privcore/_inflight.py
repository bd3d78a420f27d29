"""One computation per key at a time, across threads: :class:`InFlight`, and the in-memory memo built
on it, :class:`Memo`.

The in-memory memos of certified quantities (G over a box, a model's pattern table) are filled by
whichever thread asks first — the dashboard's warm-up or a page. A second thread asking for the same
key meanwhile waits for that result instead of computing it again beside it (on a small machine the
two would only slow each other down) — except that a thread never waits for a *background* one
(:func:`mark_background`: a thread running at the lowest CPU priority): on a loaded machine that one
gets almost no CPU, and whoever waited for it would wait as long (a priority inversion). Such a
caller computes the key itself beside it; the first result stored is the one every caller gets.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["MISSING", "InFlight", "Memo", "is_background", "mark_background"]

#: what a look-up returns when the memo has no entry (None may be a value)
MISSING: Any = object()

_THREAD = threading.local()


def mark_background() -> None:
    """Mark the calling thread as background work at a low CPU priority: no other thread waits for a
    key it computes (module docstring)."""
    _THREAD.background = True


def is_background() -> bool:
    """Whether the calling thread was marked by :func:`mark_background`."""
    return bool(getattr(_THREAD, "background", False))


class InFlight:
    """Keys being computed now. :meth:`run` returns ``lookup()`` when the memo has the key, else
    ``compute()`` (which stores its result in the memo), computing each key in one thread at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[Hashable, tuple[threading.Event, bool]] = {}

    def run(self, key: Hashable, lookup: Callable[[], Any], compute: Callable[[], Any]) -> Any:
        """``lookup()`` if it is not :data:`MISSING`, else ``compute()``, waiting first while another
        thread computes ``key`` — unless that one is a background thread and this one is not: then it
        computes beside it (``compute`` must then store first-come, as :class:`Memo` does). A failed
        computation is not remembered: the next caller tries."""
        mine = is_background()
        while True:
            hit = lookup()
            if hit is not MISSING:
                return hit
            with self._lock:
                claim = self._running.get(key)
                if claim is None or (claim[1] and not mine):  # never wait for a thread at the lowest priority
                    running = threading.Event()
                    self._running[key] = (running, mine)
                    break
            claim[0].wait()
        try:
            hit = lookup()  # stored by a computation that ended between the look-up and the claim
            return compute() if hit is MISSING else hit
        finally:
            with self._lock:
                if self._running.get(key, (None,))[0] is running:  # a foreground caller may have taken over
                    del self._running[key]
            running.set()


class Memo:
    """An in-memory memo of at most ``max_entries`` values (the least recently used goes first) whose
    :meth:`get` computes a missing key once, however many threads ask for it at the same time."""

    def __init__(self, max_entries: int) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._running = InFlight()
        self.max_entries = int(max_entries)

    def peek(self, key: Hashable) -> Any:
        """The value held for ``key`` (now the most recently used), else :data:`MISSING`."""
        with self._lock:
            hit = self._items.get(key, MISSING)
            if hit is not MISSING:
                self._items.move_to_end(key)
            return hit

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value for ``key``: held, or ``compute()`` (once across threads; a failure stores nothing)."""

        def store() -> Any:
            value = compute()
            with self._lock:  # the first value stored stays (a caller may compute beside a background one)
                value = self._items.setdefault(key, value)
                self._items.move_to_end(key)
                while len(self._items) > self.max_entries:
                    self._items.popitem(last=False)
            return value

        return self._running.run(key, lambda: self.peek(key), store)
