"""``experiment attack-global``: posthoc paper Tables 3–6 (SSIM, PSNR, ℓ1, ℓ2 of a reconstruction attack)
for the dataset's default model under the certified global mechanism.

The attacker is the model's scale-told attacker (``python -m privcore train told-attacker``; trained on
the training split, its epochs and width chosen on validation), told the public scale G·R/ε. Each of the
first :data:`N_TEST` test images (all 1 000 on MNIST; the dashboard's live readings read the first ones
too) is released ``draws`` times through the mechanism's simulation at total ε in :data:`EPSILONS_TOTAL`
(R the card's) and once without noise (ε = ∞, told b = 0); every row holds each metric's mean over
images and draws with a 95 % percentile bootstrap interval over images of per-image means
(:func:`privcore.mechanisms.attack_live.live_attack`), and the no-release baseline (the training mean
image as the guess) with its interval. The test split is read once, by this script.
"""

from __future__ import annotations

import math
from typing import Any

from privcore.experiments.runner import RunContext
from privcore.experiments.seeds import row_seed

__all__ = ["COLUMNS", "EPSILONS_TOTAL", "MECHANISM", "N_TEST", "run"]

MECHANISM = "Global"
EPSILONS_TOTAL = (1.0, 2.0, 4.0, 10.0, 20.0, math.inf)
#: test images of a full run (intervals of about ±0.006 in SSIM)
N_TEST = 2000
_METRICS = ("ssim", "psnr", "l1", "l2")
COLUMNS = ("dataset", "model", "mechanism", "split", "epsilon_total", "radius", "told_scale",
           *(f"{m}{s}" for m in _METRICS for s in ("", "_low", "_high")),
           *(f"baseline_{m}{s}" for m in _METRICS for s in ("", "_low", "_high")), "n", "draws", "seed")
KEY = ("epsilon_total",)


def _row(reading: Any, *, dataset: str, eps: float, radius: float, seed: int) -> dict[str, Any]:
    row: dict[str, Any] = {"dataset": dataset, "model": reading.model, "mechanism": reading.mechanism,
                           "split": reading.split, "epsilon_total": eps, "radius": radius,
                           "told_scale": reading.told_scale, "n": reading.n, "draws": reading.draws,
                           "seed": seed}
    for prefix, values in (("", reading.metrics), ("baseline_", reading.baseline)):
        for m in _METRICS:
            iv = values[m]
            row |= {f"{prefix}{m}": iv.mean, f"{prefix}{m}_low": iv.low, f"{prefix}{m}_high": iv.high}
    return row


def run(ctx: RunContext) -> Any:
    """The attack on the default model's global-mechanism releases at every ε of the grid, test once."""
    from privcore.defaults import default_model
    from privcore.mechanisms import registry
    from privcore.mechanisms.attack_live import live_attack, noise_free_attack

    mech = registry.get(MECHANISM)
    model = default_model(ctx.dataset)
    pipe = ctx.pipeline(model)
    n = ctx.n_test(full=N_TEST, quick=300, tiny=16)
    draws = ctx.pick(full=3, quick=1, tiny=1)
    epsilons = ctx.pick(full=EPSILONS_TOTAL, quick=EPSILONS_TOTAL, tiny=(2.0, math.inf))
    mdir = None if ctx.models_dir is None else str(ctx.models_dir)
    config = {"model": model, "mechanism": mech.name,
              "weights": pipe.cards["obfuscator"]["weights"]["sha256"],
              "epsilons_total": [str(e) for e in epsilons], "n": n, "draws": draws}
    table = ctx.table("attack-global", columns=COLUMNS, key=KEY, config=config)
    with ctx.progress("attack-global") as progress:
        for i, eps in enumerate(epsilons):
            progress(i, len(epsilons), f"ε = {eps:g}")
            if table.done(epsilon_total=eps):
                continue
            seed = row_seed(ctx.seed, "attack-global", model, eps)
            if math.isinf(eps):
                reading = noise_free_attack(mech, pipe, dataset=ctx.dataset, model=model, n=n, seed=seed,
                                            models_dir=mdir)
            else:
                reading = live_attack(mech, pipe, mech.setting(epsilon=eps), dataset=ctx.dataset, model=model,
                                      n=n, draws=draws, seed=seed, models_dir=mdir)
            if not reading.available:
                raise ValueError(f"attack-global: {reading.reason}")
            table.add(_row(reading, dataset=ctx.dataset, eps=eps, radius=pipe.radius, seed=seed))
        progress(len(epsilons), len(epsilons), "")
    return table.finish()
