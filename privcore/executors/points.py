"""Jobs over points: :func:`run_points` chunks them, runs the chunks on an executor and isolates
the points that keep failing."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from privcore.errors import PrivcoreError
from privcore.executors.base import ChunkOutcome, Executor
from privcore.executors.progress import ProgressCallback, Tracker
from privcore.validation import check_int


def chunk_size_for(n_points: int, parallelism: int, *, chunk_size: int | None = None) -> int:
    """Points per task: ``chunk_size`` if given, else about four tasks per worker (load balance and
    a short tail), between 1 and 32 points (a task parses the model once; its overhead is ms)."""
    if chunk_size is not None:
        return check_int("chunk_size", chunk_size, minimum=1)
    return max(1, min(32, math.ceil(n_points / (4 * max(1, parallelism)))))


@dataclass(frozen=True)
class PointsOutcome:
    """Results of :func:`run_points`: ``results[k]`` for the k-th item (None where it failed),
    ``failures`` {item position: error message} for items that failed every retry, alone."""

    results: list[Any]
    failures: dict[int, str]
    tasks: int
    seconds: float


def run_points(
    fn: Callable[[Any, Sequence[Any]], Sequence[Any]],
    items: Sequence[Any],
    *,
    executor: Executor,
    shared: Any = None,
    progress: ProgressCallback | None = None,
    description: str = "",
    skipped: int = 0,
) -> PointsOutcome:
    """``fn(shared, chunk)`` → one result per item of the chunk, over ``items`` in chunks.

    A chunk that fails after its retries is re-run one item per task (with retries again), so a
    point that keeps failing is reported in ``failures`` and its neighbours still finish; nothing
    is returned for it. ``skipped`` points (e.g. cache hits found by the caller) count as done in
    the progress. Raises whatever ``progress`` raises (e.g. a cancel button), after cancelling.
    """
    start = time.perf_counter()
    n = len(items)
    size = chunk_size_for(n, executor.parallelism if n else 1, chunk_size=executor.chunk_size)
    chunks = [list(range(k, min(n, k + size))) for k in range(0, n, size)]
    tracker = Tracker(description, progress, tasks=len(chunks), points=n + skipped, skipped=skipped)
    results: list[Any] = [None] * n
    failures: dict[int, str] = {}
    tasks = len(chunks)

    def accept(positions: list[int], out: ChunkOutcome) -> bool:
        if not out.ok:
            return False
        values = list(out.value)
        if len(values) != len(positions):
            raise PrivcoreError(f"a task returned {len(values)} results for {len(positions)} points")
        for p, v in zip(positions, values, strict=True):
            results[p] = v
        return True

    tracker.emit()  # the bar appears before the first task ends
    retry: list[list[int]] = []
    with closing(executor.map_chunks(fn, [[items[p] for p in c] for c in chunks], shared=shared)) as first:
        for out in first:  # a raising progress callback closes the generator: outstanding tasks cancelled
            positions = chunks[out.index]
            if accept(positions, out):
                tracker.task_done(len(positions))
            else:
                retry.append(positions)
                tracker.task_done(len(positions), counted=False)
    if retry:  # isolate the points that keep failing: one point per task
        singles = [[p] for c in retry for p in c]
        tracker.add_tasks(len(singles))
        tasks += len(singles)
        retried = executor.map_chunks(fn, [[items[s[0]]] for s in singles], shared=shared, isolated=True)
        with closing(retried):
            for out in retried:
                p = singles[out.index][0]
                if not accept([p], out):
                    failures[p] = out.error or "failed"
                tracker.task_done(1, failed=0 if out.ok else 1)
    return PointsOutcome(results=results, failures=failures, tasks=tasks, seconds=time.perf_counter() - start)


