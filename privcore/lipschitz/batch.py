"""Certify many points (a training or test set) on several cores, with a progress bar.

Used to compute the Δp statistics μ + n·σ of L(f, N(z_i, R)) over training embeddings (posthoc
PTR paper, Sec. 5). Work is spread over ``workers`` processes (started with ``spawn``, so no
solver thread pool or licence handle is inherited through ``fork``), each solver single-threaded;
the cache is consulted and filled by the parent only.
"""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from typing import Any

import numpy as np

from privcore.lipschitz.backends import SOLVERS
from privcore.lipschitz.cache import resolve_cache
from privcore.lipschitz.certifier import certificate_from_dict, certificate_key
from privcore.lipschitz.engine import CERTIFIERS, Certificate, local_lipschitz
from privcore.lipschitz.network import ReluNetwork, as_network
from privcore.validation import check_choice, check_finite_array, check_int, check_nonnegative, check_positive

__all__ = ["certify_batch"]


def _one(args: tuple) -> tuple[int, Certificate]:
    index, net, center, radius, kw = args
    return index, local_lipschitz(net, center, radius, **kw)


def certify_batch(
    net: Any,
    centers: Any,
    radius: float,
    *,
    certifier: str = "exact",
    solver: str = "auto",
    workers: int = 2,
    time_limit: float | None = None,
    progress: bool = True,
    cache: Any = None,
    input_norm: str = "linf",
    output_norm: str = "l1",
) -> list[Certificate]:
    """One :class:`Certificate` per row of ``centers`` (same order), ``certifier`` ∈ exact/lp/interval.

    ``workers`` processes share the points (1 = in this process); a time-out yields a
    certificate with ``exact=False`` whose ``upper`` is still a proven bound. Exact results are
    stored in / read from ``cache`` (None, True, a directory or a LipschitzCache).
    """
    check_choice("certifier", certifier, CERTIFIERS)
    check_choice("solver", solver, SOLVERS)
    workers = check_int("workers", workers, minimum=1)
    r = check_nonnegative("radius", radius)
    if time_limit is not None:
        time_limit = check_positive("time_limit", time_limit)
    parsed: ReluNetwork = as_network(net)
    pts = check_finite_array("centers", centers)
    if pts.ndim == 1:
        pts = pts[None, :]
    if pts.ndim != 2 or pts.shape[1] != parsed.in_dim:
        raise ValueError(f"centers must have shape (n, {parsed.in_dim}), got {pts.shape}")
    store = resolve_cache(cache)
    norms = dict(input_norm=input_norm, output_norm=output_norm)
    results: list[Certificate | None] = [None] * len(pts)
    todo: list[int] = []
    for i, c in enumerate(pts):
        if store is not None:
            hit = store.get("certificate", certificate_key(parsed.digest, c, r, kind=certifier, **norms))
            if hit is not None:
                try:
                    results[i] = certificate_from_dict(hit)
                    continue
                except (TypeError, ValueError):
                    pass
        todo.append(i)
    kw = dict(certifier=certifier, solver=solver, time_limit=time_limit, **norms)
    bar = _progress_bar(len(pts), progress, initial=len(pts) - len(todo))

    def record(i: int, cert: Certificate) -> None:
        results[i] = cert
        if store is not None and cert.exact:
            key = certificate_key(parsed.digest, pts[i], r, kind=certifier, **norms)
            store.put("certificate", key, asdict(cert))
        if bar is not None:
            bar.update(1)

    try:
        if workers == 1 or len(todo) <= 1:
            for i in todo:
                record(i, local_lipschitz(parsed, pts[i], r, **kw))
        else:
            kw["threads"] = 1
            ctx = mp.get_context("spawn")
            with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=ctx) as pool:
                futures = [pool.submit(_one, (i, parsed, np.array(pts[i]), r, kw)) for i in todo]
                for fut in as_completed(futures):
                    i, cert = fut.result()
                    record(i, cert)
    finally:
        if bar is not None:
            bar.close()
    return [c for c in results if c is not None]


def _progress_bar(total: int, enabled: bool, *, initial: int = 0) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc="Lipschitz certificates", unit="pt")
