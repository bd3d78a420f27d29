"""Processes on this machine: :class:`LocalExecutor` (``spawn``ed workers, or this process)."""

from __future__ import annotations

import multiprocessing as mp
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

from privcore._mainguard import unguarded_main_call
from privcore.executors.base import ChunkOutcome, describe_error, run_task
from privcore.executors.progress import ProgressCallback, Tracker
from privcore.validation import check_int


def _unguarded(script: str, workers: int, isolated: bool) -> None:
    """Spawned workers would re-run ``script``'s top level: warn and run here, or refuse."""
    fix = f'put the call under `if __name__ == "__main__":` in {script}'
    if isolated:
        raise RuntimeError(f"this work needs separate worker processes, which would re-run {script}; {fix}")
    warnings.warn(
        f"called from the top level of {script} without a main guard: spawned workers would re-run "
        f"the script, so this runs in this process (1 worker, not {workers}); to use {workers}, {fix}",
        RuntimeWarning,
        stacklevel=4,
    )


def _next_chunks(queue: list[int], suspects: list[int], *, in_flight: int, width: int) -> list[int]:
    """The chunks to start now, popped from their lists: a suspect alone once nothing else runs (so a
    crash blames it exactly), else queued chunks up to ``width`` in flight (each one running)."""
    if suspects:
        return [suspects.pop()] if in_flight == 0 else []
    return [queue.pop() for _ in range(min(len(queue), max(0, width - in_flight)))]


@dataclass(frozen=True, kw_only=True)
class LocalExecutor:
    """Processes on this machine (posthoc-PTR's batch certification as it always ran).

    ``workers`` spawned processes (``spawn``: no solver thread pool or licence handle inherited
    through ``fork``); 1 = in this process. ``max_retries`` resubmissions of a failing task (a
    raised exception or a dead worker). ``chunk_size`` points per task (None: :func:`chunk_size_for`).
    """

    workers: int = 2
    max_retries: int = 1
    chunk_size: int | None = None
    name: str = field(default="local", init=False)

    def __post_init__(self) -> None:
        check_int("workers", self.workers, minimum=1)
        check_int("max_retries", self.max_retries, minimum=0)
        if self.chunk_size is not None:
            check_int("chunk_size", self.chunk_size, minimum=1)

    @property
    def parallelism(self) -> int:
        """``workers``."""
        return self.workers

    def inline(self, n_chunks: int) -> bool:
        """One worker, or a single task: run it here (spawning a solver process costs seconds)."""
        return self.workers == 1 or n_chunks <= 1

    def map_chunks(
        self,
        fn: Callable[[Any, Any], Any],
        chunks: Sequence[Sequence[Any]],
        *,
        shared: Any = None,
        progress: ProgressCallback | None = None,
        description: str = "",
        isolated: bool = False,
    ) -> Iterator[ChunkOutcome]:
        """``fn(shared, chunk)`` per chunk, yielded as tasks finish (module docstring: retries)."""
        tracker = Tracker(description, progress, tasks=len(chunks), points=sum(len(c) for c in chunks))
        here = self.workers == 1 or (self.inline(len(chunks)) and not isolated)
        if not here and (script := unguarded_main_call()) is not None:
            _unguarded(script, self.workers, isolated)
            here = True
        source = self._inline(fn, chunks, shared) if here else self._pool(fn, chunks, shared)
        for out in source:
            tracker.task_done(len(chunks[out.index]))
            yield out

    def _inline(self, fn: Callable, chunks: Sequence[Sequence[Any]], shared: Any) -> Iterator[ChunkOutcome]:
        for index, chunk in enumerate(chunks):
            error = ""
            for attempt in range(1, self.max_retries + 2):
                try:
                    value = run_task(fn, shared, chunk)
                except Exception as exc:  # retried, then reported by the caller: never swallowed
                    error = describe_error(exc)
                    continue
                yield ChunkOutcome(index, value, None, attempt)
                break
            else:
                yield ChunkOutcome(index, None, error, self.max_retries + 1)

    def _pool(self, fn: Callable, chunks: Sequence[Sequence[Any]], shared: Any) -> Iterator[ChunkOutcome]:
        ctx = mp.get_context("spawn")
        width = min(self.workers, len(chunks))
        queue = list(range(len(chunks)))[::-1]  # popped from the end: chunk order
        suspects: list[int] = []  # in flight when the pool broke: re-run one at a time, so blame is exact
        attempts = [0] * len(chunks)
        last_error = [""] * len(chunks)
        pool = ProcessPoolExecutor(max_workers=width, mp_context=ctx)
        running: dict[Future, int] = {}

        def failed(i: int) -> ChunkOutcome | None:
            if attempts[i] <= self.max_retries:
                queue.append(i)
                return None
            return ChunkOutcome(i, None, last_error[i], attempts[i])

        try:
            while queue or suspects or running:
                for i in _next_chunks(queue, suspects, in_flight=len(running), width=width):
                    attempts[i] += 1
                    running[pool.submit(run_task, fn, shared, chunks[i])] = i
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                lost: list[int] = []
                for fut in done:
                    i = running.pop(fut)
                    try:
                        value = fut.result()
                    except BrokenProcessPool:
                        lost.append(i)
                        continue
                    except Exception as exc:
                        last_error[i] = describe_error(exc)
                    else:
                        yield ChunkOutcome(i, value, None, attempts[i])
                        continue
                    out = failed(i)
                    if out is not None:
                        yield out
                if lost:  # a worker died: every future of the pool fails with it; rebuild the pool
                    lost += list(running.values())
                    running.clear()
                    pool.shutdown(wait=True, cancel_futures=True)
                    pool = ProcessPoolExecutor(max_workers=width, mp_context=ctx)
                    if len(lost) == 1:  # it ran alone: its own fault
                        i = lost[0]
                        last_error[i] = "worker process died (killed, out of memory or a native crash)"
                        if attempts[i] <= self.max_retries:
                            suspects.append(i)
                        else:
                            yield ChunkOutcome(i, None, last_error[i], attempts[i])
                    else:  # unknown culprit: no attempt is charged; each runs alone next
                        for i in lost:
                            attempts[i] -= 1
                        suspects.extend(sorted(lost, reverse=True))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
