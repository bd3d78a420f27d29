"""Shared steps of the posthoc-PTR experiments (Tables 1–6): embeddings, cached φ, batched releases.

Everything a release needs goes through the library's own code path: φ(z) from
:func:`privcore.mechanisms.cached_phi` (the persistent cache: φ depends on the model, z, R, Δp,
R_max, tol and the certifier, never on ε or δ, so one solve serves every ε of a table and every
later run), and each release from :func:`privcore.mechanisms.propose_test_release` with that φ.
Only the noise is seeded (reproducible experiments); real releases use the OS CSPRNG.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privcore.errors import CertificationError
from privcore.experiments.runner import Progress
from privcore.validation import check_delta, check_positive

__all__ = [
    "PTRSetup",
    "PhiBatch",
    "compute_phis",
    "compute_phis_detailed",
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
    """R_max and tol for a table over ``epsilons`` (docs/DESIGN.md, "certifier choice").

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


#: how a decision "U(z, r) ≤ Δp?" was settled (Certifier.stats keys) that needs no LP/MILP solver
_SOLVER_FREE = {"memo": None, "interval": "bounds", "sampled": "bounds", "closed-form": "bounds",
                "enumeration": "enumeration", "global-patterns": "enumeration", "box-patterns": "enumeration",
                "split": "enumeration"}


def _backend(worker: dict, kind: str, how: str) -> str:
    """What ``solver="auto"`` ran for an LP/MILP decision on that worker (checked on the worker;
    the ``lp`` certifier's own LP always runs on HiGHS)."""
    if not worker.get("gurobi") or (kind == "lp" and how == "lp"):
        return "highs"
    limit = worker.get("gurobi_size_limit")
    return "gurobi" if limit is None else f"gurobi|highs (auto: Gurobi up to {limit} variables/constraints)"


@dataclass(frozen=True)
class _PhiJob:
    """What every φ task shares: the parsed network, the PTR grid, the certifier kind, the cache."""

    net: Any
    grid: dict
    kind: str
    cache: Any


def _phi_chunk(job: _PhiJob, chunk: list[np.ndarray]) -> list[tuple[Any, str, dict]]:
    """One task: φ of each embedding through the cache, with how its decisions were settled."""
    from privcore.lipschitz import Certifier
    from privcore.lipschitz.backends import worker_solver_info
    from privcore.mechanisms.phi_cache import cached_phi_source

    worker = worker_solver_info()
    out: list[tuple[Any, str, dict]] = []
    for z in chunk:
        oracle = Certifier(kind=job.kind)  # a fresh memo per point, as always
        try:
            phi, source = cached_phi_source(job.net, z, certifier=oracle, cache=job.cache, **job.grid)
        except CertificationError as exc:  # a time-out is never a decision: this point releases nothing
            out.append((None, str(exc), {"decisions": oracle.stats, "solvers": [], "host": worker["host"]}))
            continue
        stats = oracle.stats
        names = {_SOLVER_FREE[h] if h in _SOLVER_FREE else _backend(worker, job.kind, h) for h in stats}
        names.discard(None)
        # a cached φ is used once its pass at R* is decided again here (docs/TRUST.md): "cache" first,
        # then the solvers of that check
        solvers = (["cache"] if source == "cache" else []) + sorted(names)
        out.append((phi, "", {"decisions": stats, "solvers": solvers, "host": worker["host"]}))
    return out


@dataclass(frozen=True)
class PhiBatch:
    """φ for a batch (:func:`compute_phis_detailed`).

    ``phis[i]`` is None where no φ exists (certification time-out, or a task that failed every
    retry: ``failures[i]``); PTR releases nothing there. ``decided_by[i]``: the certifier's decision
    counts per kind of evidence and the solvers behind them (``cache`` first when φ was read from the
    cache; the rest then decided its pass at R* again).
    """

    phis: list[Any]
    errors: list[str]
    failures: dict[int, str]
    decided_by: list[dict | None]
    executor: str
    tasks: int
    seconds: float

    @property
    def solvers(self) -> dict[str, int]:
        """How many points each solver helped decide."""
        counts: dict[str, int] = {}
        for d in self.decided_by:
            for name in (d or {}).get("solvers", []):
                counts[name] = counts.get(name, 0) + 1
        return counts


def compute_phis_detailed(
    f: Any,
    z: np.ndarray,
    setup: PTRSetup,
    *,
    workers: int = 2,
    progress: Progress | None = None,
    executor: Any = None,
    cache: Any = True,
) -> PhiBatch:
    """φ(z_i) (posthoc PTR, Alg. 1) for every row of ``z`` through the cache, on ``executor``
    (default: ``workers`` local processes; in this process for ≤ 32 points, where spawning solver
    processes would cost more than it saves). ``progress(done, total, message)`` gets tasks,
    throughput and ETA in its message. Returns a :class:`PhiBatch`."""
    from privcore.executors import LocalExecutor, run_points
    from privcore.lipschitz import as_network
    from privcore.lipschitz.cache import resolve_cache

    # certification runs on the CPU (and in other processes) whatever the device; parsed once here
    net = as_network(copy.deepcopy(f).cpu())
    zs = [np.asarray(z[i], dtype=np.float64) for i in range(len(z))]
    ex = executor if executor is not None else LocalExecutor(workers=workers if len(zs) > 32 else 1)
    job = _PhiJob(net=net, grid=setup.grid(), kind=setup.certifier, cache=resolve_cache(cache))

    def report(p: Any) -> None:
        if progress is not None:
            progress(p.points_done, p.points_total, f"φ · {p.describe()}")

    out = run_points(_phi_chunk, zs, executor=ex, shared=job, progress=report, description="φ")
    phis: list[Any] = [None] * len(zs)
    errors: list[str] = []
    decided: list[dict | None] = [None] * len(zs)
    for i, res in enumerate(out.results):
        if res is None:
            errors.append(f"point {i}: task failed after retries: {out.failures.get(i, 'no result')}")
            continue
        phis[i], err, decided[i] = res
        if err:
            errors.append(err)
    return PhiBatch(phis=phis, errors=errors, failures=dict(out.failures), decided_by=decided,
                    executor=ex.name, tasks=out.tasks, seconds=out.seconds)


def compute_phis(
    f: Any,
    z: np.ndarray,
    setup: PTRSetup,
    *,
    workers: int = 2,
    progress: Progress | None = None,
    executor: Any = None,
    cache: Any = True,
) -> tuple[list[Any], list[str]]:
    """φ(z_i) for every row of ``z`` through the cache (posthoc PTR, Alg. 1; ``workers`` local
    processes or ``executor``); None where the certifier could not decide or the point's task
    failed every retry (then PTR releases nothing for that point). Returns (phis, errors)."""
    res = compute_phis_detailed(
        f, z, setup, workers=workers, progress=progress, executor=executor, cache=cache
    )
    return res.phis, res.errors


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

    from privcore.nets.models import classify
    from privcore.train.release_aware import laplace_release_noise

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
                loss = F.cross_entropy(classify(clf, noisy, 0.0 if post is not None else scale), y[idx])
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
