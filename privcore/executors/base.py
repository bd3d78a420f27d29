"""What every executor shares: a finished task (:class:`ChunkOutcome`), the :class:`Executor`
protocol that :func:`~privcore.executors.points.run_points` drives, and how a task runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from privcore.executors.progress import ProgressCallback


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


def describe_error(exc: BaseException) -> str:
    """``Type: first line`` of a task's exception (the task's own, where Ray wrapped it)."""
    cause = getattr(exc, "cause", None)  # Ray's RayTaskError wraps the task's own exception
    if isinstance(cause, BaseException):
        exc = cause
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def run_task(fn: Callable[[Any, Any], Any], shared: Any, chunk: Any) -> Any:
    """Run one task with single-threaded BLAS/OpenMP: the executor provides the parallelism, and
    threads fighting over the cores slow the small matrix products of certification down."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return fn(shared, chunk)
