"""Shared steps of the posthoc-PTR experiments (Tables 1–6): embeddings, cached φ, batched releases.

Everything a release needs goes through the library's own code path: φ(z) from
:func:`privcore.lipschitz.cached_phi` (the persistent cache: φ depends on the model, z, R, Δp,
R_max, tol and the certifier, never on ε or δ, so one solve serves every ε of a table and every
later run), and each release from :func:`privcore.mechanisms.propose_test_release` with that φ.
Only the noise is seeded (reproducible experiments); real releases use the OS CSPRNG.
"""

from __future__ import annotations

import copy
import math
import multiprocessing as mp
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from privcore.errors import CertificationError
from privcore.experiments.runner import Progress
from privcore.validation import check_delta, check_positive

__all__ = [
    "PTRSetup",
    "compute_phis",
    "embed",
    "expected_accuracy",
    "ptr_release_batch",
    "ptr_setup",
    "refit_classifier",
    "refit_plan",
    "test_indices",
]

#: PTR δ of the posthoc paper (App. E).
PAPER_DELTA = 0.05


@dataclass(frozen=True, kw_only=True)
class PTRSetup:
    """Public PTR parameters fixed before any data is seen: R, Δp, the bisection grid, δ, certifier."""

    radius: float
    delta_p: float
    r_max: float
    tol: float
    delta: float
    certifier: str

    def grid(self) -> dict[str, float]:
        """Keyword arguments shared by compute_phi / cached_phi / propose_test_release."""
        return {"radius": self.radius, "delta_p": self.delta_p, "r_max": self.r_max, "tol": self.tol}


def ptr_setup(
    *,
    radius: float,
    delta_p: float,
    epsilons: Sequence[float],
    delta: float = PAPER_DELTA,
    certifier: str = "exact",
    grid_steps: int = 32,
) -> PTRSetup:
    """R_max and tol for a table over ``epsilons`` (DESIGN.md, "certifier choice").

    R_max is where the test passes with probability ≥ 1 − 10⁻³ at the smallest finite ε:
    φ must exceed ln(1/δ)·b + b·ln(500), b = (R + ζ)/ε_min, and φ ≥ R* − R, so
    R_max = R + 1.01·b·(ln(1/δ) + ln 500); bisecting beyond buys nothing. tol = R/``grid_steps``
    (32 by default: the test noise (R + ζ)/ε is at most 3.1 % above the paper's R/ε; each halving
    of tol costs one more exact decision per point; the tests' tiny runs use a coarser grid).
    """
    r = check_positive("radius", radius)
    dp = check_positive("delta_p", delta_p)
    dl = check_delta(delta)
    finite = [e for e in epsilons if math.isfinite(e)]
    eps_min = min(finite) if finite else 1.0
    tol = r / float(grid_steps)
    b = (r + tol) / eps_min
    r_max = r + 1.01 * b * (math.log(1.0 / dl) + math.log(500.0))
    return PTRSetup(radius=r, delta_p=dp, r_max=r_max, tol=tol, delta=dl, certifier=certifier)


def test_indices(n_total: int, n: int | None, seed: int) -> np.ndarray:
    """A sorted uniform subsample (without replacement, seeded) of ``n`` of ``n_total`` indices."""
    if n is None or n >= n_total:
        return np.arange(n_total)
    return np.sort(np.random.default_rng(seed).choice(n_total, size=n, replace=False))


def embed(pipe: Any, x: Any, *, batch_size: int = 512) -> np.ndarray:
    """z = g(x) as float64 numpy (VAE means), batched."""
    import torch

    out = []
    for start in range(0, x.shape[0], batch_size):
        out.append(pipe.embed(torch.as_tensor(x[start : start + batch_size])).double().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, pipe.latent_dim))


def _phi_one(args: tuple) -> tuple[int, Any, str]:
    index, f, z, grid, kind = args
    from privcore.lipschitz import Certifier, cached_phi

    try:
        phi = cached_phi(f, z, certifier=Certifier(kind=kind), **grid)
    except CertificationError as exc:  # a time-out is never a decision: this point releases nothing
        return index, None, str(exc)
    return index, phi, ""


def compute_phis(
    f: Any, z: np.ndarray, setup: PTRSetup, *, workers: int = 2, progress: Progress | None = None
) -> tuple[list[Any], list[str]]:
    """φ(z_i) for every row of ``z`` through the cache (``workers`` processes); None where the
    certifier could not decide (then PTR releases nothing for that point). Returns (phis, errors)."""
    f = copy.deepcopy(f).cpu()  # certification runs on the CPU (and in spawned processes) whatever the device
    jobs = [(i, f, np.asarray(z[i], dtype=np.float64), setup.grid(), setup.certifier) for i in range(len(z))]
    phis: list[Any] = [None] * len(jobs)
    errors: list[str] = []
    done = 0

    def record(i: int, phi: Any, err: str) -> None:
        nonlocal done
        phis[i] = phi
        if err:
            errors.append(err)
        done += 1
        if progress is not None:
            progress(done, len(jobs), "φ")

    if workers <= 1 or len(jobs) <= 32:  # spawning solver processes costs seconds: not for a few points
        for job in jobs:
            record(*_phi_one(job))
    else:
        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            for i, phi, err in pool.map(_phi_one, jobs, chunksize=max(1, len(jobs) // (8 * workers))):
                record(i, phi, err)
    return phis, errors


def ptr_release_batch(
    f: Any, z: np.ndarray, phis: Sequence[Any], setup: PTRSetup, *, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    """One PTR release per row of ``z`` at ``epsilon``: an (n, out_dim) array, NaN rows for ⊥.

    Rows whose φ is None (certification failed) are ⊥ without drawing anything, as the library
    does when the query fails.
    """
    from privcore.lipschitz import Certifier
    from privcore.mechanisms import propose_test_release

    oracle = Certifier(kind=setup.certifier)  # not called: φ is given
    out = np.full((len(phis), _out_dim(f)), np.nan)
    for i, phi in enumerate(phis):
        if phi is None:
            continue
        res = propose_test_release(
            f, z[i], epsilon=epsilon, delta=setup.delta, lipschitz=oracle, rng=rng, phi=phi, **setup.grid()
        )
        if res.released:
            out[i] = res.value
    return out


def _out_dim(f: Any) -> int:
    """Output size of a Linear/ReLU network (its last Linear layer)."""
    return int([m for m in f.modules() if hasattr(m, "out_features")][-1].out_features)


def expected_accuracy(correct: np.ndarray, released: np.ndarray, n_classes: int) -> dict[str, float]:
    """Accuracy with ⊥ answered by a uniform guess (expected 1/K each: the paper's ε = 0 column is
    chance), with ⊥ counted wrong, and among released points only."""
    n = len(correct)
    n_rel = int(released.sum())
    hits = int((correct & released).sum())
    return {
        "accuracy": (hits + (n - n_rel) / n_classes) / n,
        "accuracy_bot_wrong": hits / n,
        "accuracy_released": hits / n_rel if n_rel else math.nan,
        "release_rate": n_rel / n,
        "n_released": n_rel,
    }


def refit_classifier(
    pipe: Any,
    z_tilde_train: Any,
    y_train: Any,
    *,
    scale: float,
    epochs: int,
    seed: int,
    batch_size: int = 128,
    lr: float = 1e-3,
    after_noise: Any = None,
) -> Any:
    """The pipeline's classifier fine-tuned on releases of *training* images, f(z) + Lap(scale).

    ``z_tilde_train`` is what the noise is added to; ``after_noise`` (a fixed torch module, e.g. the
    obfuscator for LDP-Embedding, whose noise is on z) is applied before the classifier.

    Post-processing of the release: the mechanism and the training data are public, so a service
    provider may train its classifier on the noise it will receive, at no privacy cost (the same
    knowledge the reconstruction attacker uses). Training noise is plain torch sampling (training
    data is not a release). Returns the fine-tuned copy in eval mode on the pipeline's device.
    """
    import torch
    import torch.nn.functional as F

    from privcore.attacks.reconstruction import laplace_release_noise

    gen = torch.Generator().manual_seed(seed)
    zt = torch.as_tensor(z_tilde_train, dtype=torch.float32).cpu()
    y = torch.as_tensor(y_train, dtype=torch.int64).cpu()
    clf = copy.deepcopy(pipe.classifier).cpu().train()
    post = None if after_noise is None else copy.deepcopy(after_noise).cpu().eval()
    for p in clf.parameters():
        p.requires_grad_(True)
    opt = torch.optim.Adam(clf.parameters(), lr=lr)
    with torch.enable_grad():
        for _ in range(epochs):
            perm = torch.randperm(zt.shape[0], generator=gen)
            for s in range(0, zt.shape[0], batch_size):
                idx = perm[s : s + batch_size]
                noisy = zt[idx] + laplace_release_noise(zt[idx].shape, scale, generator=gen)
                if post is not None:
                    with torch.no_grad():
                        noisy = post(noisy)
                loss = F.cross_entropy(clf(noisy), y[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    for p in clf.parameters():
        p.requires_grad_(False)
    return clf.eval().to(pipe.device)


def refit_plan(ctx: Any, ds: Any) -> tuple[Any, Any, int]:
    """Training images, labels and epochs for :func:`refit_classifier` in this run's mode.

    Roughly 10⁵ (full), 1.5·10⁴ … 4·10⁴ (quick) or 10³ (tiny) noisy training samples per fit.
    """
    n_total = ds.x_train.shape[0]
    n = ctx.pick(full=min(n_total, 20_000), quick=min(n_total, 5_000), tiny=min(n_total, 500))
    epochs = max(1, ctx.pick(full=100_000, quick=40_000, tiny=1_000) // n)
    idx = test_indices(n_total, n, ctx.seed + 1)
    return ds.x_train[idx], ds.y_train[idx].numpy(), min(epochs, ctx.pick(full=60, quick=30, tiny=2))
