"""``experiment attack``: posthoc paper Tables 3–6 — reconstruction attack on PTR releases.

For each radius R ∈ {0.1, 0.2, 0.4, 0.6, 0.8, 1.0} (ℓ∞ on z), with the ARL-C-N pipeline:

1. Δp(R) = μ + 3σ of exact L(f, N(z_i, R)) over training embeddings (the card's Δp at the
   card's R; for other R the same recipe on a seeded training subsample, certificates cached);
2. an attacker — the library's :func:`privcore.train.attacker.train_reconstruction_attacker`
   — trained on releases of *training* images, f(z) + Lap(Δp(R)·R/ε) at ε ∈ {1, 2, 5, 10} mixed
   with noise-free f(z) (the "⊥-free samples": the attacker trains on the release distribution
   without PTR's test, which needs no certification and only helps it);
3. at each ε, the full PTR on the test subsample (φ cached per R); the attacker rebuilds every
   released test image and SSIM / PSNR / ℓ1 / ℓ2 against the original image are averaged over
   the released ones. ε = ∞ rows attack the noise-free obfuscated vector of every test image.

Every cell stores n (``n_eval``) and a 95 % percentile-bootstrap interval per metric
(``<metric>_lo``/``_hi``: 2 000 resamples of the released images, seeded), and the no-release
floor on the same images (``<metric>_floor``): the training mean image as the attacker's guess,
what an attacker gets from ⊥ or from nothing.

The attackers are cached beside the Lipschitz cache (``<cache>/attackers/<dataset>/``, see
:func:`privcore.lipschitz.default_cache_dir`) keyed by the obfuscator's hash, R, Δp, the epochs
and the seed, so reruns and resumed runs do not retrain them.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np

from privcore.experiments.ptr_common import compute_phis, embed, ptr_release_batch, ptr_setup, test_indices
from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.seeds import row_seed

__all__ = ["COLUMNS", "EPSILONS", "RADII", "attacker_cache_dir", "delta_p_at", "run"]

COLUMNS = (
    "dataset",
    "obfuscator",
    "radius",
    "epsilon",
    "delta_p",
    "noise_scale",
    "ssim",
    "psnr",
    "psnr_paper",
    "l1",
    "l2",
    "ssim_std",
    "psnr_std",
    "l1_std",
    "l2_std",
    "ssim_lo",
    "ssim_hi",
    "psnr_lo",
    "psnr_hi",
    "l1_lo",
    "l1_hi",
    "l2_lo",
    "l2_hi",
    "ssim_floor",
    "psnr_floor",
    "l1_floor",
    "l2_floor",
    "n_eval",
    "release_rate",
    "n_train_attack",
    "seed",
)
KEY = ("radius", "epsilon")
RADII = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0)
EPSILONS = (1.0, 2.0, 5.0, 10.0)
OBFUSCATOR = "ARL-C-N"
METRICS = ("ssim", "psnr", "l1", "l2")
BOOTSTRAP_RESAMPLES = 2000


def bootstrap_interval(values: np.ndarray, *, seed: int, level: float = 0.95) -> tuple[float, float]:
    """Percentile-bootstrap ``level`` interval for the mean of the finite ``values`` (NaNs if < 2)."""
    from scipy.stats import bootstrap

    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size < 2 or np.ptp(v) == 0.0:
        m = float(v.mean()) if v.size else math.nan
        return (m, m) if v.size else (math.nan, math.nan)
    res = bootstrap((v,), np.mean, confidence_level=level, n_resamples=BOOTSTRAP_RESAMPLES,
                    method="percentile", random_state=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def cell_statistics(metrics: Any, floor: Any, *, seed: int) -> dict[str, float]:
    """A cell's means, sds, bootstrap intervals and no-release floors (empty metrics: NaNs)."""
    if metrics is None or metrics.n == 0:
        names = [*METRICS, "psnr_paper", *(f"{m}_{s}" for m in METRICS for s in ("std", "lo", "hi", "floor"))]
        return dict.fromkeys(names, math.nan)
    out = dict(metrics.summary())
    fl = floor.summary()
    for k, m in enumerate(METRICS):
        out[f"{m}_lo"], out[f"{m}_hi"] = bootstrap_interval(getattr(metrics, m), seed=seed + k)
        out[f"{m}_floor"] = fl[m]
    return out


def attacker_cache_dir() -> Path:
    """Where trained per-R attackers are kept: ``<Lipschitz cache dir>/attackers``."""
    from privcore.lipschitz import default_cache_dir

    return default_cache_dir() / "attackers"


def delta_p_at(
    pipe: Any,
    x_train: Any,
    radius: float,
    *,
    n: int,
    seed: int,
    certifier: str,
    workers: int,
    progress: bool,
    executor: Any = None,
) -> float:
    """Δp = μ + 3σ of certified L(f, N(z_i, R)) over ``n`` training embeddings (posthoc Sec. 6).

    The card's value is used when ``radius`` is the card's R (it came from more points).
    """
    from privcore.lipschitz import Certifier, certify_batch
    from privcore.train.delta_p import delta_p_statistics

    if pipe.delta_p is not None and math.isclose(radius, pipe.delta_p.radius):
        return float(pipe.delta_p.proposed)
    idx = test_indices(x_train.shape[0], n, seed)
    z = embed(pipe, x_train[idx])
    certs = certify_batch(
        copy.deepcopy(pipe.obfuscator).cpu(),
        z,
        radius,
        Certifier(kind=certifier, time_limit=None, cache=True),
        workers=workers if n > 32 else 1,
        progress=progress,
        executor=executor,
    )
    return float(delta_p_statistics([c.upper for c in certs], n_sigma=3.0)["proposed"])


def _attacker(ctx: RunContext, pipe: Any, *, radius: float, delta_p: float, epochs: int) -> Any:
    """Train (or load the cached) attacker for this R and Δp."""
    from privcore.models.pipeline import default_models_dir
    from privcore.nets.checkpoint import card_path, load_checkpoint
    from privcore.train.attacker import train_reconstruction_attacker
    from privcore.train.recipes import attacker_recipe

    sha = pipe.cards["obfuscator"]["weights"]["sha256"][:12]
    tag = f"R{radius:g}-dp{delta_p:.6g}-e{epochs}-s{ctx.seed}".replace(
        ".", "p"
    )  # no dots in checkpoint stems
    stem = attacker_cache_dir() / ctx.dataset / f"attacker-{OBFUSCATOR}-{sha}-{tag}"
    if not card_path(stem).is_file():
        mdir = ctx.models_dir or default_models_dir()
        train_reconstruction_attacker(
            mdir / ctx.dataset / f"obfuscator-{OBFUSCATOR}",
            out=stem,
            recipe=attacker_recipe(ctx.dataset, epochs=epochs),
            delta_p=delta_p,
            radius=radius,
            device=ctx.torch_device(),
            seed=ctx.seed,
            progress=ctx.show_progress,
            command=ctx.command,
        )
    return load_checkpoint(stem, kind="attacker", dataset=ctx.dataset, device=ctx.torch_device())["attacker"]


def _reconstruct(attacker: Any, v: np.ndarray, batch: int = 512) -> Any:
    import torch

    out = []
    with torch.no_grad():
        for s in range(0, len(v), batch):
            dev = next(attacker.parameters()).device
            out.append(attacker(torch.as_tensor(v[s : s + batch], dtype=torch.float32, device=dev)).cpu())
    return torch.cat(out)


def _figure(frame: Any, dataset: str) -> Any:
    from plotly.subplots import make_subplots

    metrics = (("ssim", "SSIM"), ("l1", "ℓ1 (MAE)"), ("l2", "ℓ2 (MSE)"), ("psnr", "PSNR (dB, range 1)"))
    fig = make_subplots(rows=1, cols=4, subplot_titles=[t for _, t in metrics])
    colours = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#7f7f7f")
    for col, (m, _) in enumerate(metrics, start=1):
        for k, (eps, part) in enumerate(frame.groupby("epsilon")):
            part = part.sort_values("radius")
            fig.add_scatter(
                x=part["radius"],
                y=part[m],
                mode="lines+markers",
                row=1,
                col=col,
                name="ε = ∞" if math.isinf(eps) else f"ε = {eps:g}",
                legendgroup=str(eps),
                showlegend=col == 1,
                line_color=colours[k % len(colours)],
            )
        fig.update_xaxes(title_text="R", row=1, col=col)
    fig.update_layout(
        title=f"Reconstruction attack on PTR releases ({dataset}, {OBFUSCATOR})",
        template="plotly_white",
        height=400,
    )
    return fig


def run(ctx: RunContext) -> Any:
    """Tables 3–6 for one dataset; write ``attack.csv`` + figure."""
    import torch

    from privcore.attacks.metrics import image_metrics
    from privcore.data import load_dataset

    pipe = ctx.pipeline(OBFUSCATOR)
    ds = load_dataset(ctx.dataset)
    radii = ctx.pick(full=RADII, quick=RADII, tiny=(0.4,))
    epsilons = ctx.pick(full=EPSILONS, quick=EPSILONS, tiny=(1.0, 10.0))
    n_test = ctx.n_test(full=None if ds.x_test.shape[0] <= 2000 else 2000, quick=30, tiny=4)
    n_dp = ctx.pick(full=200, quick=20, tiny=4)
    big = ds.x_train.shape[0] > 10_000
    epochs = ctx.pick(full=8 if big else 150, quick=2 if big else 30, tiny=2)
    idx = test_indices(ds.x_test.shape[0], n_test, ctx.seed)
    x, z = ds.x_test[idx], embed(pipe, ds.x_test[idx])
    config = {
        "radii": list(radii),
        "epsilons": list(epsilons),
        "n_test": len(idx),
        "n_delta_p": n_dp,
        "attacker_epochs": epochs,
        "certifier": ctx.certifier,
        "weights": pipe.cards["obfuscator"]["weights"]["sha256"],
    }
    table = ctx.table("attack", columns=COLUMNS, key=KEY, config=config)
    mean_guess = torch.as_tensor(ds.x_train, dtype=torch.float32).mean(dim=0, keepdim=True)
    clean = pipe.obfuscate(torch.as_tensor(z, dtype=torch.float32)).double().cpu().numpy()
    for r in radii:
        todo = [e for e in (*epsilons, math.inf) if not table.done(radius=r, epsilon=e)]
        if not todo:
            continue
        dp = delta_p_at(
            pipe,
            ds.x_train,
            r,
            n=n_dp,
            seed=ctx.seed,
            certifier=ctx.certifier,
            workers=ctx.workers,
            progress=ctx.show_progress,
            executor=ctx.executor,
        )
        attacker = _attacker(ctx, pipe, radius=r, delta_p=dp, epochs=epochs)
        setup = ptr_setup(
            radius=r,
            delta_p=dp,
            epsilons=epsilons,
            certifier=ctx.certifier,
            grid_steps=ctx.pick(full=32, quick=32, tiny=4),
        )
        phis = None
        for eps in (*epsilons, math.inf):
            if eps not in todo:
                continue
            seed = row_seed(ctx.seed, "attack", r, eps)
            if math.isinf(eps):
                rel, released = clean, np.ones(len(idx), dtype=bool)
            else:
                if phis is None:
                    with ctx.progress(f"φ R={r:g}") as progress:
                        phis, _ = compute_phis(
                            pipe.obfuscator, z, setup, workers=ctx.workers, progress=progress,
                            executor=ctx.executor,
                        )
                rel = ptr_release_batch(
                    pipe.obfuscator, z, phis, setup, epsilon=eps, rng=np.random.default_rng(seed)
                )
                released = ~np.isnan(rel).all(axis=1)
            row: dict[str, Any] = {
                "dataset": ctx.dataset,
                "obfuscator": OBFUSCATOR,
                "radius": r,
                "epsilon": eps,
                "delta_p": dp,
                "noise_scale": 0.0 if math.isinf(eps) else dp * r / eps,
                "n_eval": int(released.sum()),
                "release_rate": float(released.mean()),
                "n_train_attack": int(ds.x_train.shape[0]),
                "seed": None if math.isinf(eps) else seed,
            }
            if released.any():
                metrics = image_metrics(x[released], _reconstruct(attacker, rel[released]))
                floor = image_metrics(x[released], mean_guess.expand(int(released.sum()), -1, -1, -1))
                row.update(cell_statistics(metrics, floor, seed=seed if seed is not None else ctx.seed))
            else:
                row.update(cell_statistics(None, None, seed=0))
            table.add(row)
    frame = table.frame()
    return table.finish(figures=save_figure(_figure(frame, ctx.dataset), ctx.dataset_dir / "attack"))
