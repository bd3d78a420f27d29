"""Δp statistics of a trained obfuscator (posthoc-PTR paper, Sec. 6 "How to propose Δ"):
mean μ and standard deviation σ of the local Lipschitz constants L(f, N(z_i, R)) (ℓ∞ → ℓ1) over
a random subsample of TRAINING embeddings z_i = g(x_i), and the proposal Δp = μ + n·σ (n = 3).
The authors' public code used test points; the proposal must not depend on the data it later
protects beyond the training set, so only training embeddings are used here.

Each L is the certified upper bound of the exact LipMIP solve (:func:`privcore.lipschitz.certify_batch`),
so the statistics never understate the constants; the per-point certification times are
recorded too (the dashboard's "seconds per image").
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import numpy as np
import torch

from privcore.nets.checkpoint import load_checkpoint, update_card
from privcore.train.common import batched_apply
from privcore.validation import check_int, check_nonnegative, check_positive

__all__ = ["compute_delta_p", "delta_p_statistics"]


def delta_p_statistics(values: Any, *, n_sigma: float = 3.0) -> dict[str, float]:
    """μ, σ (sample standard deviation, ddof = 1), Δp = μ + n·σ and quantiles of ``values``."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        raise ValueError(f"values needs at least 2 local Lipschitz constants, got {v.size}")
    n_sigma = check_nonnegative("n_sigma", n_sigma)
    mu, sd = float(v.mean()), float(v.std(ddof=1))
    return {
        "mu": mu,
        "sigma": sd,
        "n_sigma": n_sigma,
        "proposed": mu + n_sigma * sd,
        "min": float(v.min()),
        "median": float(np.median(v)),
        "q95": float(np.quantile(v, 0.95)),
        "max": float(v.max()),
        "fraction_above_proposed": float((v > mu + n_sigma * sd).mean()),
    }


def compute_delta_p(
    obfuscator_ckpt: str | os.PathLike[str],
    *,
    n: int = 300,
    radius: float | None = None,
    n_sigma: float = 3.0,
    certifier: str = "exact",
    solver: str = "auto",
    workers: int = 2,
    time_limit: float | None = None,
    seed: int = 0,
    progress: bool = True,
    command: str | None = None,
    executor: Any = None,
    cache: Any = True,
) -> dict[str, Any]:
    """Certify L(f, N(z_i, R)) at ``n`` random training embeddings and store the Δp statistics and
    certification times in the obfuscator's card (``delta_p``, ``certification``). Returns the card.

    ``executor`` (a :mod:`privcore.executors` executor, e.g. Ray) runs the certificates; default
    ``workers`` local processes. A point that fails every retry raises CertificationError and the
    card is left unchanged (Δp needs every point). Each certificate goes into ``cache`` (privcore's
    Lipschitz cache by default; None/False: none) as it is done, so a rerun after an interruption
    solves only the points still missing."""
    from privcore.lipschitz import Certifier, certify_batch
    from privcore.train.embedder import dataset_from_card

    n = check_int("n", n, minimum=2)
    obf = load_checkpoint(obfuscator_ckpt, kind="obfuscator")
    name = obf.card["dataset"]["name"]
    emb_stem = Path(obfuscator_ckpt).with_name(obf.card["embedder"]["file"]).with_suffix("")
    emb = load_checkpoint(emb_stem, kind="embedder", dataset=name)
    if emb.card["weights"]["sha256"] != obf.card["embedder"]["sha256"]:
        raise ValueError(
            f"the embedder beside {obfuscator_ckpt} is not the one its obfuscator was trained on"
        )
    r = check_positive("radius", radius if radius is not None else float(obf.card["radius"]["value"]))
    ds = dataset_from_card(obf.card["dataset"])
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(ds.x_train.shape[0], generator=g)[: min(n, ds.x_train.shape[0])].sort().values
    vae = emb["vae"]
    z = batched_apply(lambda b: vae.encode(b)[0], ds.x_train[idx], device=torch.device("cpu")).double()
    f = obf["obfuscator"]
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    certs = certify_batch(
        f,
        z.numpy(),
        r,
        Certifier(kind=certifier, solver=solver, time_limit=time_limit, cache=cache),
        workers=workers,
        progress=progress,
        executor=executor,
    )
    uppers = [c.upper for c in certs]
    stats = delta_p_statistics(uppers, n_sigma=n_sigma)
    secs = np.asarray([c.seconds for c in certs], dtype=np.float64)
    solvers: dict[str, int] = {}
    for c in certs:
        solvers[c.solver] = solvers.get(c.solver, 0) + 1
    delta_p = {
        **stats,
        "n": len(certs),
        "radius": r,
        "input_norm": "linf",
        "output_norm": "l1",
        "source": f"training embeddings (VAE means), uniform subsample without replacement, seed {seed}",
        "certifier": certifier,
        "values_are": "certified upper bounds (exact MIP optimum when all_exact)",
        "all_exact": all(c.exact for c in certs),
        "n_inexact": sum(not c.exact for c in certs),
    }
    certification = {
        "radius": r,
        "certifier": certifier,
        "solvers": solvers,
        "seconds_mean": float(secs.mean()),
        "seconds_median": float(np.median(secs)),
        "seconds_q90": float(np.quantile(secs, 0.9)),
        "seconds_max": float(secs.max()),
        "unstable_neurons_mean": float(np.mean([c.n_unstable for c in certs])),
        "workers": workers,
        "executor": "local" if executor is None else executor.name,
        "load_average_before": load_before,
        "n": len(certs),
        "note": "one exact L(f, B(z, R)) solve per point (a PTR release needs one per bisection step)",
        "machine": f"{platform.machine()} {platform.processor() or platform.system()}, "
        f"{os.cpu_count()} logical CPUs, solver single-threaded",
    }
    updates: dict[str, Any] = {"delta_p": delta_p, "certification": certification}
    if command:
        updates["delta_p_command"] = command
    return update_card(obfuscator_ckpt, updates)
