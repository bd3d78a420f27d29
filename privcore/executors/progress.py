"""Progress of a batch job: one :class:`JobProgress` per finished task, drawn by :func:`cli_progress`
as a tqdm bar or by the dashboard as ``st.progress`` from the same callback."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

#: a progress callback receives one :class:`JobProgress` per finished task
ProgressCallback = Callable[["JobProgress"], None]


@dataclass(frozen=True, kw_only=True)
class JobProgress:
    """State of a whole batch job after a task finished.

    ``points_done`` includes the ``points_skipped`` found in the cache before any task ran;
    ``points_per_s`` is the throughput of this run's tasks (skipped points excluded) since the
    job started, ``eta_s`` the remaining points at that rate (None before the first task ends).
    """

    description: str
    tasks_done: int
    tasks_total: int
    points_done: int
    points_total: int
    points_skipped: int = 0
    failed_points: int = 0
    elapsed_s: float = 0.0

    @property
    def fraction(self) -> float:
        """Points done / total (1.0 for an empty job)."""
        return self.points_done / self.points_total if self.points_total else 1.0

    @property
    def points_per_s(self) -> float:
        """Points computed by this run's tasks per second of wall time."""
        computed = self.points_done - self.points_skipped
        return computed / self.elapsed_s if self.elapsed_s > 0 and computed > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the current throughput (0 when done, None when unknown)."""
        left = self.points_total - self.points_done
        if left <= 0:
            return 0.0
        rate = self.points_per_s
        return left / rate if rate > 0 else None

    def describe(self) -> str:
        """One line: ``tasks 3/10 · 42/100 pts · 2.1 pt/s · ETA 27 s`` (+ failures)."""
        eta = self.eta_s
        text = (
            f"tasks {self.tasks_done}/{self.tasks_total} · {self.points_done}/{self.points_total} pts · "
            f"{self.points_per_s:.3g} pt/s · ETA {'?' if eta is None else f'{eta:.0f} s'}"
        )
        return text + (f" · {self.failed_points} failed" if self.failed_points else "")


@contextmanager
def cli_progress(description: str, *, enabled: bool = True) -> Iterator[ProgressCallback | None]:
    """A tqdm bar over points (rate and ETA by tqdm, tasks and failures as postfix) as a
    :data:`ProgressCallback`; ``None`` when disabled."""
    if not enabled:
        yield None
        return
    from tqdm.auto import tqdm

    bar: Any = None

    def update(p: JobProgress) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=p.points_total, initial=p.points_skipped, desc=description, unit="pt")
        post = f"tasks {p.tasks_done}/{p.tasks_total}"
        bar.set_postfix_str(post + (f", {p.failed_points} failed" if p.failed_points else ""), refresh=False)
        if p.points_done > bar.n:
            bar.update(p.points_done - bar.n)  # redraws with the new postfix
        else:
            bar.refresh()

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


class Tracker:
    """Counts tasks and points of one job and calls the progress callback."""

    def __init__(self, description: str, callback: ProgressCallback | None, *, tasks: int, points: int,
                 skipped: int = 0) -> None:
        self.description, self.callback = description, callback
        self.tasks_total, self.points_total, self.skipped = tasks, points, skipped
        self.tasks_done, self.points_done, self.failed = 0, skipped, 0
        self.start = time.perf_counter()

    def add_tasks(self, n: int) -> None:
        self.tasks_total += n

    def task_done(self, points: int, *, failed: int = 0, counted: bool = True) -> None:
        self.tasks_done += 1
        if counted:
            self.points_done += points
        self.failed += failed
        self.emit()

    def snapshot(self) -> JobProgress:
        return JobProgress(
            description=self.description,
            tasks_done=self.tasks_done,
            tasks_total=self.tasks_total,
            points_done=self.points_done,
            points_total=self.points_total,
            points_skipped=self.skipped,
            failed_points=self.failed,
            elapsed_s=time.perf_counter() - self.start,
        )

    def emit(self) -> None:
        if self.callback is not None:
            self.callback(self.snapshot())
