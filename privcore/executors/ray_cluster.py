"""Tasks on a Ray cluster or a local Ray runtime: :class:`RayExecutor`. Importing this module never
imports Ray; constructing an executor does, and names the install when it is missing."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privcore.errors import PrivcoreError
from privcore.executors.base import ChunkOutcome, describe_error, run_task
from privcore.executors.progress import ProgressCallback, Tracker
from privcore.validation import check_int

RAY_INSTALL_HINT = "pip install -r requirements-ray.txt"


class RayNotInstalledError(PrivcoreError, ImportError):
    """``--executor ray`` was asked for but the optional dependency ``ray`` is not installed."""


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


@dataclass(frozen=True, kw_only=True, eq=False)
class RayExecutor:
    """Tasks on Ray: the cluster at ``address``, or a local runtime with ``num_cpus`` CPUs (None:
    all) started on first use when ``address`` is None (and shut down by :meth:`close`).

    Each task takes one CPU (solvers single-threaded). ``max_retries``: Ray re-runs a task whose
    worker died or that raised (``retry_exceptions=True``) up to this many times. ``runtime_env``
    is passed to ``ray.init`` (e.g. ``{"py_modules": [...]}`` for a cluster whose nodes lack
    privcore); a local runtime gets this checkout on its workers' ``PYTHONPATH``.
    Raises :class:`RayNotInstalledError` at construction when Ray is not installed.

    Security: a Ray cluster has no authentication by default — anyone who can reach its ports can
    run code on it — and the driver trusts what its workers return (certificates and φ decide
    what is released). Use only a cluster you control, on a private network.
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
                root = str(Path(__file__).resolve().parents[2])
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
        tracker = Tracker(description, progress, tasks=len(chunks), points=sum(len(c) for c in chunks))
        remote = self._state.get("remote")
        if remote is None:
            remote = self._state["remote"] = ray.remote(run_task)
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
                        out = ChunkOutcome(i, None, describe_error(exc))
                    tracker.task_done(len(chunks[i]))
                    yield out
        finally:  # stopped early (a cancel, an error): nothing of this job runs on after it returns
            for ref in pending:
                ray.cancel(ref)
            if pending:
                ray.wait(list(pending), num_returns=len(pending), timeout=_CANCEL_WAIT_S)
