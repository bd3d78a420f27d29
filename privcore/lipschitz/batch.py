"""Certify many points (a training or test set) on several cores or a Ray cluster, with progress.

Used to compute the Δp statistics μ + n·σ of L(f, N(z_i, R)) over training embeddings (posthoc
PTR paper, Sec. 5). Only the scheduling is here; each certificate is :func:`local_lipschitz`
whatever runs it, with the settings of the :class:`~privcore.lipschitz.Certifier` passed in (kind,
solver, time limit, norms, cache: one value, not a dozen keywords). Points are split into chunks,
one task per chunk (:mod:`privcore.executors`: local processes started with ``spawn`` — no solver
thread pool or licence handle inherited through ``fork`` — or Ray tasks), each solver
single-threaded. The parsed network travels once per task; ``solver="auto"`` is resolved inside
the task, so a worker without a Gurobi licence uses HiGHS and every certificate records the
solver that produced it. Solvers run single-threaded everywhere, so a certificate does not depend
on which executor computed it.

Cache: the driver skips the points already cached; each task looks a point up again (another job
or node may have certified it) and writes every exact certificate as soon as it is computed, so a
job killed half-way resumes without recomputing what finished. A point whose task keeps failing
(after the executor's retries, then alone) is reported — :func:`certify_batch` raises
:class:`~privcore.errors.CertificationError` listing the indices once the others are done — and
never returned as certified.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from privcore.errors import CertificationError
from privcore.executors import (
    Executor,
    LocalExecutor,
    ProgressCallback,
    cli_progress,
    run_points,
)
from privcore.lipschitz.backends import worker_solver_info
from privcore.lipschitz.cache import LipschitzCache
from privcore.lipschitz.certifier import Certifier, certificate_key, load_certificate, store_certificate
from privcore.lipschitz.engine import Certificate, local_lipschitz
from privcore.lipschitz.network import ReluNetwork, as_network
from privcore.lipschitz.norms import Norms
from privcore.validation import check_finite_array, check_int, check_nonnegative

__all__ = ["BatchOutcome", "certify_batch", "certify_batch_detailed"]


@dataclass(frozen=True)
class _Job:
    """What every task of one batch shares (sent once per task, or once to Ray's object store)."""

    net: ReluNetwork
    radius: float
    kw: dict
    cache: LipschitzCache | None


@dataclass(frozen=True)
class _Point:
    """A point's certificate from a task: ``computed`` False when the task found it in the cache."""

    certificate: Certificate
    computed: bool
    worker: dict


def _certify_chunk(job: _Job, chunk: list[np.ndarray]) -> list[_Point]:
    """One task: parse nothing (the network is parsed), certify each centre, cache exact results
    (certificates come back without ``argmax``, cached or not: see :func:`store_certificate`)."""
    worker = worker_solver_info()
    norms = Norms(input=job.kw["input_norm"], output=job.kw["output_norm"])
    kind = job.kw["certifier"]
    out = []
    for c in chunk:
        key = certificate_key(job.net.digest, c, job.radius, kind=kind, norms=norms)
        if job.cache is not None:
            hit = load_certificate(job.cache, key, digest=job.net.digest, radius=job.radius, kind=kind,
                                   norms=norms)
            if hit is not None:
                out.append(_Point(hit, False, worker))
                continue
        cert = local_lipschitz(job.net, c, job.radius, **job.kw)
        out.append(_Point(store_certificate(job.cache, key, cert), True, worker))
    return out


@dataclass(frozen=True)
class BatchOutcome:
    """Everything :func:`certify_batch_detailed` learnt.

    ``certificates[i]`` is the i-th centre's certificate, None where it failed; ``failures`` maps
    those indices to the last error. ``n_cached`` points came from the cache (driver or task),
    ``n_computed`` were certified by :func:`local_lipschitz` in this run; ``solvers`` counts
    certificates per solver that produced them; ``workers`` lists the distinct (host, Gurobi
    available, licence size limit) of the processes that ran tasks.
    """

    certificates: list[Certificate | None]
    failures: dict[int, str]
    n_cached: int
    n_computed: int
    solvers: dict[str, int]
    workers: list[dict]
    tasks: int
    seconds: float
    executor: str


def _settings(certifier: Any, legacy: dict[str, Any], caller: str) -> Certifier:
    """The batch's :class:`Certifier` (default: exact, ``solver="auto"``, no time limit, no cache),
    refusing anything else with an error that says what to pass instead."""
    hint = (
        f"{caller} takes the certifier's settings as one Certifier, e.g. "
        f"{caller}(net, centers, radius, Certifier(kind='exact', time_limit=60, cache=True))"
    )
    if legacy:
        raise TypeError(f"{caller}() got unexpected keyword argument(s) {sorted(legacy)}: {hint}")
    if certifier is None:
        return Certifier(time_limit=None)
    if not isinstance(certifier, Certifier):
        raise TypeError(f"certifier must be a privcore.lipschitz.Certifier, got {certifier!r}: {hint}")
    return certifier


def certify_batch_detailed(
    net: Any,
    centers: Any,
    radius: float,
    certifier: Certifier | None = None,
    *,
    workers: int = 2,
    progress: bool | ProgressCallback = True,
    executor: Executor | None = None,
    **legacy: Any,
) -> BatchOutcome:
    """Like :func:`certify_batch` but returns a :class:`BatchOutcome` instead of raising on
    points that failed (the Δp statistics of posthoc PTR Sec. 5 need every point; a caller that can
    live with gaps reads ``failures``)."""
    cert = _settings(certifier, legacy, "certify_batch_detailed")
    workers = check_int("workers", workers, minimum=1)
    r = check_nonnegative("radius", radius)
    parsed: ReluNetwork = as_network(net)
    pts = check_finite_array("centers", centers)
    if pts.ndim == 1:
        pts = pts[None, :]
    if pts.ndim != 2 or pts.shape[1] != parsed.in_dim:
        raise ValueError(f"centers must have shape (n, {parsed.in_dim}), got {pts.shape}")
    ex: Executor = executor if executor is not None else LocalExecutor(workers=workers)
    store: LipschitzCache | None = cert.cache
    norms = cert.norms
    kind = cert.kind
    results: list[Certificate | None] = [None] * len(pts)
    todo: list[int] = []
    for i, c in enumerate(pts):
        if store is not None:
            key = certificate_key(parsed.digest, c, r, kind=kind, norms=norms)
            hit = load_certificate(store, key, digest=parsed.digest, radius=r, kind=kind, norms=norms)
            if hit is not None:
                results[i] = hit
                continue
        todo.append(i)
    # one solver thread per task, wherever it runs: the executor provides the parallelism, and a
    # multi-threaded MILP may end on a bound a few ulp apart, which would make results depend on it
    kw: dict[str, Any] = dict(
        certifier=kind, solver=cert.solver, time_limit=cert.time_limit, threads=1, **norms.kwargs
    )
    job = _Job(net=parsed, radius=r, kw=kw, cache=store)
    items = [np.array(pts[i]) for i in todo]
    skipped = len(pts) - len(todo)
    with cli_progress("Lipschitz certificates", enabled=progress is True) as bar:
        callback = progress if callable(progress) else bar
        outcome = run_points(
            _certify_chunk, items, executor=ex, shared=job, progress=callback,
            description="Lipschitz certificates", skipped=skipped,
        )
    failures: dict[int, str] = {}
    computed = 0
    hosts: dict[tuple, dict] = {}
    for pos, i in enumerate(todo):
        point = outcome.results[pos]
        if point is None:
            failures[i] = outcome.failures.get(pos, "no result")
            continue
        results[i] = point.certificate
        computed += point.computed
        w = point.worker
        hosts.setdefault((w["host"], w["gurobi"], w["gurobi_size_limit"]), w)
    return BatchOutcome(
        certificates=results,
        failures=failures,
        n_cached=sum(c is not None for c in results) - computed,
        n_computed=computed,
        solvers=dict(Counter(c.solver for c in results if c is not None)),
        workers=[{k: w[k] for k in ("host", "gurobi", "gurobi_size_limit")} for w in hosts.values()],
        tasks=outcome.tasks,
        seconds=outcome.seconds,
        executor=ex.name,
    )


def certify_batch(
    net: Any,
    centers: Any,
    radius: float,
    certifier: Certifier | None = None,
    *,
    workers: int = 2,
    progress: bool | ProgressCallback = True,
    executor: Executor | None = None,
    **legacy: Any,
) -> list[Certificate]:
    """One :class:`Certificate` per row of ``centers`` (same order), with ``certifier``'s kind
    (exact/lp/interval), solver, time limit, norms and cache (LipMIP, Jordan & Dimakis 2020; used
    for posthoc PTR's Δp, Sec. 5). Default ``Certifier(time_limit=None)``: exact, no time limit, no
    cache. Solvers run single-threaded in every task whatever ``certifier.threads`` says (results
    must not depend on the executor).

    ``executor`` runs the tasks (default ``LocalExecutor(workers=workers)``: ``workers`` processes,
    1 = in this process; or a :class:`~privcore.executors.RayExecutor`). A time-out yields a
    certificate with ``exact=False`` whose ``upper`` is still a proven bound. Exact results are
    stored in / read from the certifier's cache. ``progress``: True for a bar, or a callback
    receiving :class:`~privcore.executors.JobProgress`. Points that fail every retry raise
    :class:`CertificationError` naming their indices after the rest finished. Anything but a
    Certifier (a kind as a string, the old ``solver=``/``cache=``/… keywords) raises TypeError
    saying what to pass.
    """
    cert = _settings(certifier, legacy, "certify_batch")
    out = certify_batch_detailed(
        net, centers, radius, cert, workers=workers, progress=progress, executor=executor
    )
    if out.failures:
        idx = sorted(out.failures)
        first = out.failures[idx[0]]
        raise CertificationError(
            f"{len(idx)} of {len(out.certificates)} points could not be certified after retries "
            f"(indices {idx}; first error: {first}); nothing is reported for them, the other "
            f"{len(out.certificates) - len(idx)} certificates are done"
            + (" and cached" if cert.cache is not None else "")
        )
    return [c for c in out.certificates if c is not None]
