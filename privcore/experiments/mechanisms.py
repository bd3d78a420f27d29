"""``experiment mechanisms``: the registry's never-⊥ posthoc mechanisms side by side at equal total (ε, δ).

On the dataset's default model, every registered mechanism of the posthoc family that needs no per-image
certificate (the certified global Laplace and Gaussian mechanisms) releases each image through the
mechanism protocol itself (:meth:`~privcore.mechanisms.protocol.Mechanism.release`, the API's path), at
total ε in :data:`EPSILONS_TOTAL` and δ = :data:`DELTA`; the release classifier's class is scored.

Two splits, in this order: ``validation`` (the dataset's validation split) is where the choice between
the mechanisms is made — per ε, the one with the higher validation accuracy (:func:`chosen`) — and
``test`` is then read once for every mechanism, so the chosen one's test accuracy is an unbiased
estimate and the others stand beside it. ``draws`` noise draws per image; ``accuracy`` is the mean
over images and draws; ``low``/``high`` a 95 % percentile bootstrap over images of per-image mean
correctness (draws of one image are not independent trials), as in ``table1-global``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privcore.experiments.runner import RunContext
from privcore.experiments.seeds import row_seed
from privcore.experiments.table1_global import _bootstrap
from privcore.mechanisms.protocol import Options

__all__ = ["COLUMNS", "DELTA", "EPSILONS_TOTAL", "chosen", "run"]

COLUMNS = ("dataset", "model", "split", "mechanism", "epsilon_total", "delta", "radius", "noise_scale",
           "noise_scale_effective", "accuracy", "low", "high", "n", "draws", "seed")
KEY = ("split", "mechanism", "epsilon_total")
EPSILONS_TOTAL = (1.0, 2.0, 4.0, 10.0)
DELTA = 1e-5


def _mechanisms() -> list[Any]:
    from privcore.mechanisms.registry import MECHANISMS

    return [m for m in MECHANISMS if m.family == "posthoc" and "certification" not in m.uses_options]


def chosen(frame: Any) -> dict[float, str]:
    """Per total ε, the mechanism with the highest validation accuracy (the choice; test never enters)."""
    val = frame[frame["split"] == "validation"].sort_values("accuracy", ascending=False, kind="stable")
    return {float(e): str(m) for e, m in val.groupby("epsilon_total")["mechanism"].first().items()}


def _rows(ctx: RunContext, pipe: Any, *, split: str, x: Any, y: np.ndarray, table: Any, epsilons: Any,
          draws: int, model: str) -> None:
    z = np.stack([pipe.embed(xi).double().cpu().numpy().reshape(-1) for xi in x])
    for mech in _mechanisms():
        for eps in epsilons:
            if table.done(split=split, mechanism=mech.name, epsilon_total=eps):
                continue
            seed = row_seed(ctx.seed, "mechanisms", split, mech.name, eps)
            rng = np.random.default_rng(seed)
            setting = mech.setting(epsilon=eps, delta=DELTA)
            look = mech.outlook(pipe, setting)
            correct = np.zeros((draws, len(y)), dtype=bool)
            options = Options(rng=rng)
            for d in range(draws):
                correct[d] = [mech.release(pipe, zi, setting, options).predicted_class == int(yi)
                              for zi, yi in zip(z, y, strict=True)]
            per_image = correct.mean(axis=0)
            low, high = _bootstrap(per_image, seed)
            table.add({
                "dataset": ctx.dataset, "model": model, "split": split, "mechanism": mech.name,
                "epsilon_total": eps, "delta": float(look.guarantee.delta), "radius": pipe.radius,
                "noise_scale": look.noise_scale, "noise_scale_effective": look.noise_scale_effective,
                "accuracy": float(per_image.mean()), "low": low, "high": high, "n": len(y), "draws": draws,
                "seed": seed,
            })


def run(ctx: RunContext) -> Any:
    """The never-⊥ posthoc mechanisms on validation (the choice) then test (read once)."""
    from privcore.data import load_dataset
    from privcore.data.split import validation_split
    from privcore.defaults import default_model

    model = default_model(ctx.dataset)
    pipe = ctx.pipeline(model)
    ds = load_dataset(ctx.dataset)
    val = validation_split(ds).dataset
    n = ctx.n_test(full=None, quick=300, tiny=8)
    epsilons = ctx.pick(full=EPSILONS_TOTAL, quick=EPSILONS_TOTAL, tiny=(2.0,))
    draws = ctx.pick(full=3, quick=1, tiny=1)
    config = {"model": model, "weights": pipe.cards["obfuscator"]["weights"]["sha256"],
              "mechanisms": [m.name for m in _mechanisms()], "epsilons_total": list(epsilons),
              "delta": DELTA, "n": n, "draws": draws}
    table = ctx.table("mechanisms", columns=COLUMNS, key=KEY, config=config)
    with ctx.progress("mechanisms") as progress:
        for i, (split, xs, ys) in enumerate((("validation", val.x_test, val.y_test),
                                             ("test", ds.x_test, ds.y_test))):
            progress(i, 2, split)
            k = xs.shape[0] if n is None else min(n, xs.shape[0])
            _rows(ctx, pipe, split=split, x=xs[:k], y=ys[:k].numpy(), table=table, epsilons=epsilons,
                  draws=draws, model=model)
        progress(2, 2, "")
    return table.finish(notes={"chosen_on_validation": chosen(table.frame())})
