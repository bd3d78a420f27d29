"""Where batch work runs: processes on this machine or a Ray cluster (docs/CLI.md, "Scaling out").

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
  A Ray cluster has no authentication by default and its workers' results are trusted
  (:data:`RAY_WARNING`, in every ``--executor``/``--address`` help): only a cluster you control.

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

from typing import TYPE_CHECKING

from privcore._lazy import lazy_exports

if TYPE_CHECKING:
    from privcore.executors.local import LocalExecutor
    from privcore.executors.ray_cluster import RayExecutor

# the classes and functions are loaded on use (PEP 562): the CLI modules import the help texts below
# for their options, and ``privcore --help`` should not load numpy for them
_EXPORTS = {
    "ChunkOutcome": "base",
    "Executor": "base",
    "LocalExecutor": "local",
    "PointsOutcome": "points",
    "chunk_size_for": "points",
    "run_points": "points",
    "JobProgress": "progress",
    "ProgressCallback": "progress",
    "cli_progress": "progress",
    "RAY_INSTALL_HINT": "ray_cluster",
    "RayExecutor": "ray_cluster",
    "RayNotInstalledError": "ray_cluster",
}
__getattr__, __dir__, _LAZY_ALL = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(
    [*_LAZY_ALL, "ADDRESS_HELP", "EXECUTORS", "EXECUTOR_HELP", "RAY_WARNING", "executor_from_options"]
)

#: ``--executor`` choices.
EXECUTORS = ("local", "ray")
#: help texts shared by every CLI that takes ``--executor`` / ``--address`` (one place to parse them)
#: the warning every Ray option carries (docs/CLI.md, "Scaling out")
RAY_WARNING = (
    "WARNING: a Ray cluster has no authentication by default: anyone who can reach its ports can run "
    "code on it, and the driver trusts what its workers return (certificates, φ, hence what is "
    "released). Use only a cluster you control, on a private network"
)
EXECUTOR_HELP = f"where batch certification runs: local (processes on this machine) or ray. {RAY_WARNING}"
ADDRESS_HELP = (
    f"Ray cluster address (ray://host:10001 or host:6379); none: start a local Ray runtime. {RAY_WARNING}"
)


def executor_from_options(
    executor: str = "local", *, address: str | None = None, workers: int = 2, chunk_size: int | None = None
) -> LocalExecutor | RayExecutor:
    """The executor named by the CLI's ``--executor local|ray [--address ADDR] [--workers N]``
    (the one place they are parsed). ``workers`` is ignored by Ray (the cluster's CPUs count)."""
    from privcore.executors.local import LocalExecutor
    from privcore.executors.ray_cluster import RayExecutor
    from privcore.validation import check_choice

    check_choice("executor", executor, EXECUTORS)
    if executor == "local":
        if address:
            raise ValueError(f"address={address!r} applies to --executor ray only")
        return LocalExecutor(workers=workers, chunk_size=chunk_size)
    return RayExecutor(address=address or None, chunk_size=chunk_size)
