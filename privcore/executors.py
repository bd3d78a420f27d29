"""Where batch work runs: processes on this machine or a Ray cluster (issue 8, "scale out").

Batch certification (:func:`privcore.lipschitz.certify_batch`), φ for many test embeddings
(:func:`privcore.experiments.ptr_common.compute_phis`) and Δp statistics are embarrassingly
parallel over points. Only their *scheduling* lives here; the work function is the same code
whichever executor runs it, so certificates and φ do not depend on the executor.

* :class:`LocalExecutor` — ``workers`` spawned processes on this machine (``workers=1``: in this
  process), what the library always did. A task that raises is resubmitted ``max_retries`` times
  (default once); a worker that dies breaks the pool, which is rebuilt; the tasks that were in
  flight are then re-run one at a time, so only the task that kills its worker is charged.
* :class:`RayExecutor` — tasks on a Ray cluster (``address``) or on a local Ray runtime started on
  demand; Ray retries crashed workers and raised exceptions (``max_retries``, ``retry_exceptions``).

Both expose ``map_chunks(fn, chunks, *, shared=..., progress=...)``, which yields a
:class:`ChunkOutcome` per chunk as tasks finish (``fn(shared, chunk)``; ``shared`` — the parsed
model — is sent once per task, or once per job to Ray's object store). :func:`run_points` builds
jobs out of points: it chunks them, re-runs each chunk that still fails after its retries point by
point, so that only the points that keep failing are reported (:class:`PointsOutcome.failures`),
never dropped and never returned as results. Progress is one :class:`JobProgress` per finished task
(tasks done/total, points/s, ETA): :func:`cli_progress` draws it as a tqdm bar, the dashboard can
drive ``st.progress`` from the same callback.

Every task runs with single-threaded BLAS/OpenMP (and the certification code asks its solvers for
one thread): one task per core, the executor provides the parallelism.

Ray is optional (``pip install -r requirements-ray.txt``): importing this module never imports it.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import socket
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from privcore._mainguard import unguarded_main_call
from privcore.errors import PrivcoreError
from privcore.validation import check_choice, check_int

__all__ = [
    "EXECUTORS",
    "ChunkOutcome",
    "Executor",
    "JobProgress",
    "LocalExecutor",
    "PointsOutcome",
    "RayExecutor",
    "RayNotInstalledError",
    "chunk_size_for",
    "cli_progress",
    "executor_from_options",
    "run_points",
    "worker_solver_info",
]

#: ``--executor`` choices.
EXECUTORS = ("local", "ray")
#: help texts shared by every CLI that takes ``--executor`` / ``--address`` (one place to parse them)
EXECUTOR_HELP = "where batch certification runs: local (processes on this machine) or ray"
ADDRESS_HELP = "Ray cluster address (ray://host:10001 or host:6379); none: start a local Ray runtime"
RAY_INSTALL_HINT = "pip install -r requirements-ray.txt"

#: a progress callback receives one :class:`JobProgress` per finished task
ProgressCallback = Callable[["JobProgress"], None]


class RayNotInstalledError(PrivcoreError, ImportError):
    """``--executor ray`` was asked for but the optional dependency ``ray`` is not installed."""


# ---------------------------------------------------------------------------------------------
# progress
# ---------------------------------------------------------------------------------------------


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


class _Tracker:
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


# ---------------------------------------------------------------------------------------------
# executors
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkOutcome:
    """One finished task: ``value`` = ``fn(shared, chunk)``, or ``error`` (a message) after every
    retry failed. ``attempts`` is how many times it ran (Ray: ``None``, Ray counts them)."""

    index: int
    value: Any
    error: str | None
    attempts: int | None = None

    @property
    def ok(self) -> bool:
        """True when the task succeeded."""
        return self.error is None


@runtime_checkable
class Executor(Protocol):
    """What :func:`run_points` needs from an executor (see :class:`LocalExecutor`)."""

    name: str
    max_retries: int
    chunk_size: int | None

    @property
    def parallelism(self) -> int:
        """Tasks that run at once (for the default chunk size)."""
        ...

    def inline(self, n_chunks: int) -> bool:
        """True when ``n_chunks`` tasks would run in this process (solvers may then use threads)."""
        ...

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
        """``fn(shared, chunk)`` for every chunk, yielded as tasks finish (``isolated``: never in
        this process unless the executor has a single worker, so a crashing task cannot take the
        driver with it)."""
        ...


def _describe_error(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)  # Ray's RayTaskError wraps the task's own exception
    if isinstance(cause, BaseException):
        exc = cause
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


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
        tracker = _Tracker(description, progress, tasks=len(chunks), points=sum(len(c) for c in chunks))
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
                    value = _call(fn, shared, chunk)
                except Exception as exc:  # retried, then reported by the caller: never swallowed
                    error = _describe_error(exc)
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
                if suspects:
                    if not running:
                        i = suspects.pop()
                        attempts[i] += 1
                        running[pool.submit(_call, fn, shared, chunks[i])] = i
                else:
                    while queue and len(running) < width:  # at most `width` in flight: each one is running
                        i = queue.pop()
                        attempts[i] += 1
                        running[pool.submit(_call, fn, shared, chunks[i])] = i
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
                        last_error[i] = _describe_error(exc)
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


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise RayNotInstalledError(
            f"--executor ray needs the optional dependency Ray, which is not installed: {RAY_INSTALL_HINT}"
        ) from exc
    return ray


#: seconds to wait for cancelled Ray tasks to stop (a solver inside native code stops when it returns)
_CANCEL_WAIT_S = 60.0


def _call(fn: Callable[[Any, Any], Any], shared: Any, chunk: Any) -> Any:
    """Run one task with single-threaded BLAS/OpenMP: the executor provides the parallelism, and
    threads fighting over the cores slow the small matrix products of certification down."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return fn(shared, chunk)


@dataclass(frozen=True, kw_only=True, eq=False)
class RayExecutor:
    """Tasks on Ray: the cluster at ``address``, or a local runtime with ``num_cpus`` CPUs (None:
    all) started on first use when ``address`` is None (and shut down by :meth:`close`).

    Each task takes one CPU (solvers single-threaded). ``max_retries``: Ray re-runs a task whose
    worker died or that raised (``retry_exceptions=True``) up to this many times. ``runtime_env``
    is passed to ``ray.init`` (e.g. ``{"py_modules": [...]}`` for a cluster whose nodes lack
    privcore); a local runtime gets this checkout on its workers' ``PYTHONPATH``.
    Raises :class:`RayNotInstalledError` at construction when Ray is not installed.
    """

    address: str | None = None
    num_cpus: int | None = None
    max_retries: int = 2
    chunk_size: int | None = None
    runtime_env: Mapping[str, Any] | None = None
    name: str = field(default="ray", init=False)
    _state: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.num_cpus is not None:
            check_int("num_cpus", self.num_cpus, minimum=1)
            if self.address is not None:
                raise ValueError("num_cpus applies to a local Ray runtime; a cluster at address has its own")
        check_int("max_retries", self.max_retries, minimum=0)
        if self.chunk_size is not None:
            check_int("chunk_size", self.chunk_size, minimum=1)
        _import_ray()

    def _ray(self) -> Any:
        ray = _import_ray()
        if not ray.is_initialized():
            env = dict(self.runtime_env or {})
            if self.address is None:
                root = str(Path(__file__).resolve().parents[1])
                env_vars = dict(env.get("env_vars", {}))
                path = [p for p in (root, env_vars.get("PYTHONPATH") or os.environ.get("PYTHONPATH")) if p]
                env_vars["PYTHONPATH"] = os.pathsep.join(path)
                env["env_vars"] = env_vars
            ray.init(
                address=self.address or "local",
                num_cpus=self.num_cpus,
                include_dashboard=False,
                log_to_driver=False,
                runtime_env=env or None,
            )
            self._state["started"] = True
        return ray

    @property
    def parallelism(self) -> int:
        """CPUs of the cluster (connects or starts the runtime)."""
        return max(1, int(self._ray().cluster_resources().get("CPU", 1)))

    def inline(self, n_chunks: int) -> bool:
        """Never: every task runs in a Ray worker."""
        return False

    def close(self) -> None:
        """Shut down the Ray runtime if this executor started it."""
        if self._state.pop("started", False):
            _import_ray().shutdown()

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

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
        """``fn(shared, chunk)`` per chunk as Ray tasks (``shared`` put once in the object store),
        yielded as they finish; outstanding tasks are cancelled if the caller stops early."""
        ray = self._ray()
        tracker = _Tracker(description, progress, tasks=len(chunks), points=sum(len(c) for c in chunks))
        remote = self._state.get("remote")
        if remote is None:
            remote = self._state["remote"] = ray.remote(_call)
        task = remote.options(num_cpus=1, max_retries=self.max_retries, retry_exceptions=True)
        shared_ref = ray.put(shared)
        pending = {task.remote(fn, shared_ref, chunk): i for i, chunk in enumerate(chunks)}
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    i = pending.pop(ref)
                    try:
                        out = ChunkOutcome(i, ray.get(ref), None)
                    except ray.exceptions.RayError as exc:
                        out = ChunkOutcome(i, None, _describe_error(exc))
                    tracker.task_done(len(chunks[i]))
                    yield out
        finally:  # stopped early (a cancel, an error): nothing of this job runs on after it returns
            for ref in pending:
                ray.cancel(ref)
            if pending:
                ray.wait(list(pending), num_returns=len(pending), timeout=_CANCEL_WAIT_S)


def executor_from_options(
    executor: str = "local", *, address: str | None = None, workers: int = 2, chunk_size: int | None = None
) -> LocalExecutor | RayExecutor:
    """The executor named by the CLI's ``--executor local|ray [--address ADDR] [--workers N]``
    (the one place they are parsed). ``workers`` is ignored by Ray (the cluster's CPUs count)."""
    check_choice("executor", executor, EXECUTORS)
    if executor == "local":
        if address:
            raise ValueError(f"address={address!r} applies to --executor ray only")
        return LocalExecutor(workers=workers, chunk_size=chunk_size)
    return RayExecutor(address=address or None, chunk_size=chunk_size)


# ---------------------------------------------------------------------------------------------
# jobs over points
# ---------------------------------------------------------------------------------------------


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
    tracker = _Tracker(description, progress, tasks=len(chunks), points=n + skipped, skipped=skipped)
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


# ---------------------------------------------------------------------------------------------
# what a worker can run
# ---------------------------------------------------------------------------------------------

_SOLVER_INFO: dict[int, dict[str, Any]] = {}


def worker_solver_info() -> dict[str, Any]:
    """What ``solver="auto"`` can use in *this* process (checked on the worker, once per process):
    host, pid, whether Gurobi imports and starts a licence, and the licence's size limit (None =
    unlimited). Gurobi runs a model only when it fits; HiGHS otherwise."""
    pid = os.getpid()
    info = _SOLVER_INFO.get(pid)
    if info is None:
        from privcore.lipschitz.backends import gurobi_available, gurobi_size_limit

        gurobi = gurobi_available()
        limit = gurobi_size_limit() if gurobi else None
        info = {"host": socket.gethostname(), "pid": pid, "python": sys.version.split()[0],
                "gurobi": gurobi, "gurobi_size_limit": limit}
        _SOLVER_INFO.clear()
        _SOLVER_INFO[pid] = info
    return dict(info)
