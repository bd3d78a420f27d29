"""BLAS threads of the engine's numpy work: a query's ``threads`` bounds them as it bounds the solvers'.

A query that names no ``threads`` runs on :data:`DEFAULT_THREADS` (:func:`query_threads`): BLAS, the
solvers and torch together (torch's CPU kernels run on one thread inside every search,
:func:`~privcore.lipschitz.clarke.single_threaded`), so the dashboard and the CLI, which name none,
are bounded too.

OpenBLAS starts one thread per core for every product, also for the engine's small matrices; on a
shared machine they only spin against the other workers (docs/ENGINE.md). threadpoolctl's limits
are process-wide, so nested and concurrent queries share one limit, set by the first to enter and
restored by the last to leave (the smallest ``threads`` among them while they overlap would need a
per-thread BLAS, which OpenBLAS does not have).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["DEFAULT_THREADS", "blas_threads", "query_threads"]

#: threads of a query that names none. One: on two shared cores (load 11.6–14.0) plus one competing
#: process, two threads took the engine's d = 16 Fig. 4 query 4.1× as long as one (median per-query
#: ratio, 95 % bootstrap interval [2.6, 5.3], n = 10; d = 8: 0.74× [0.30, 1.08]), and Gurobi's MILP
#: 1.18× [1.03, 1.27] at d = 8 and 0.92× [0.79, 1.01] at d = 16 (``bench/threads.py``)
DEFAULT_THREADS = 1

_LOCK = threading.Lock()


def query_threads(threads: int | None) -> int:
    """A query's thread count: ``threads`` (validated, ≥ 1), or :data:`DEFAULT_THREADS` for None."""
    from privcore.validation import check_int

    return DEFAULT_THREADS if threads is None else check_int("threads", threads, minimum=1)
_STATE: dict[str, Any] = {"depth": 0, "limit": None, "controller": None, "modules": -1}


def _controller() -> Any:
    """One ThreadpoolController (scanning the loaded libraries costs about a millisecond), rebuilt
    when modules were imported since (one may have loaded another BLAS)."""
    from threadpoolctl import ThreadpoolController

    if _STATE["controller"] is None or _STATE["modules"] != len(sys.modules):
        _STATE["controller"], _STATE["modules"] = ThreadpoolController(), len(sys.modules)
    return _STATE["controller"]


@contextmanager
def blas_threads(threads: int | None) -> Iterator[None]:
    """At most ``threads`` BLAS threads while the block runs (None: leave them as they are)."""
    if threads is None:
        yield
        return
    with _LOCK:
        if _STATE["depth"] == 0:
            # a count above the machine's cores asks for no limit beyond them (and fits BLAS's C int)
            count = max(1, min(int(threads), os.cpu_count() or 1))
            _STATE["limit"] = _controller().limit(limits=count, user_api="blas")
        _STATE["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0:
                _STATE["limit"].restore_original_limits()
                _STATE["limit"] = None
