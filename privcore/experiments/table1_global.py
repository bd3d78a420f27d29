"""``experiment table1-global``: Table 1's obfuscators under the certified global mechanism.

For every Table-1 obfuscator shipped for the dataset whose card records a clipping box, on the
*whole* test set (every choice — the box's margin, the classifier — was fixed before; nothing here
reads test labels except to score): the release f(clip z) + Lap(G·R/ε) of the registry's ``Global``
mechanism (:meth:`~privcore.mechanisms.protocol.Mechanism.release`, the API's path, with the row's
seeded generator), with G certified by this process (the card's value is only a hint), is classified
by the pipeline's classifier told the public scale G·R/ε. ``epsilon_total``
is the ε of each release's guarantee, (ε, 0, R); PTR's column at ε spends (2ε, δ/2, R), so
``epsilon_total`` = 2, 4, 10, 20 sit beside PTR's ε = 1, 2, 5, 10 at the same total ε
(docs/DESIGN.md, "Beyond the papers"). Every image is released (no ⊥).

``draws`` noise draws per image (seeded per row). ``accuracy`` is the mean over images and draws;
``low``/``high`` a 95 % percentile-bootstrap interval over images (per-image mean correctness,
2000 resamples, :func:`scipy.stats.bootstrap`), so the interval covers the test-set sampling
and the noise together.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privcore.experiments.ptr_common import embed
from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.seeds import row_seed
from privcore.experiments.table1 import table1_obfuscators
from privcore.experiments.tables import Parts

__all__ = ["COLUMNS", "EPSILONS_TOTAL", "run"]

COLUMNS = (
    "dataset",
    "obfuscator",
    "mechanism",
    "epsilon_total",
    "delta",
    "radius",
    "global_lipschitz",
    "global_lipschitz_how",
    "delta_p",
    "noise_scale",
    "noise_ratio_vs_ptr",
    "accuracy",
    "low",
    "high",
    "release_rate",
    "n_test",
    "draws",
    "seed",
)
KEY = ("obfuscator", "epsilon_total")
#: total ε of a release's guarantee: PTR's Table-1 columns ε = 1, 2, 5, 10 at the same total
EPSILONS_TOTAL = (2.0, 4.0, 10.0, 20.0)
PARTS = Parts(column="obfuscator", names="variants", fields=("weights", "classifiers"))


def _bootstrap(per_image: np.ndarray, seed: int) -> tuple[float, float]:
    from scipy.stats import bootstrap

    if per_image.size < 2 or np.all(per_image == per_image[0]):
        v = float(per_image.mean()) if per_image.size else float("nan")
        return v, v
    res = bootstrap((per_image,), np.mean, n_resamples=2000, confidence_level=0.95, method="percentile",
                    random_state=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def global_accuracy_rows(ctx: RunContext, pipe: Any, *, epsilons: tuple[float, ...], x: Any, y: np.ndarray,
                         table: Any, variant: str, draws: int) -> None:
    """One row per total ε for ``pipe`` (rows already in ``table`` are skipped)."""
    import torch

    from privcore.mechanisms import registry
    from privcore.mechanisms.protocol import Options

    todo = [e for e in epsilons if not table.done(obfuscator=variant, epsilon_total=e)]
    if not todo:
        return
    mech = registry.get("Global")
    constant = mech.constant(pipe)
    z = embed(pipe, x)
    dp = pipe.proposed_delta_p
    for eps in todo:
        seed = row_seed(ctx.seed, "table1-global", variant, eps)
        setting = mech.setting(epsilon=eps)  # R: the card's
        options = Options(rng=np.random.default_rng(seed))
        correct = np.zeros((draws, len(y)), dtype=bool)
        scale = None
        for d in range(draws):
            sent = [mech.release(pipe, zi, setting, options) for zi in z]
            values = np.stack([r.value for r in sent])
            scale = sent[0].noise_scale
            logits = pipe.classify(torch.as_tensor(values, dtype=torch.float32), float(scale))
            correct[d] = logits.argmax(-1).cpu().numpy() == y
        per_image = correct.mean(axis=0)
        low, high = _bootstrap(per_image, seed)
        table.add({
            "dataset": ctx.dataset, "obfuscator": variant, "mechanism": "global", "epsilon_total": eps,
            "delta": 0.0, "radius": pipe.radius, "global_lipschitz": constant.value,
            "global_lipschitz_how": constant.how.value, "delta_p": dp, "noise_scale": scale,
            "noise_ratio_vs_ptr": None if dp is None else constant.value / (2.0 * dp),
            "accuracy": float(per_image.mean()), "low": low, "high": high, "release_rate": 1.0,
            "n_test": len(y), "draws": draws, "seed": seed,
        })


def run(ctx: RunContext) -> Any:
    """Table 1 under the global mechanism for every shipped obfuscator with a clipping box."""
    from privcore.data import load_dataset

    infos = {m.name: m for m in ctx.model_infos() if m.kind == "obfuscator"}
    variants = [v for v in table1_obfuscators(ctx, infos) if infos[v].card.get("global_lipschitz")]
    if not variants:
        raise FileNotFoundError(
            f"no Table-1 obfuscator of {ctx.dataset} records a clipping box: "
            f"`privcore global compute --dataset {ctx.dataset}` writes them"
        )
    ds = load_dataset(ctx.dataset)
    n_test = ctx.n_test(full=None, quick=500, tiny=8)
    idx = np.arange(ds.x_test.shape[0]) if n_test is None else np.arange(min(n_test, ds.x_test.shape[0]))
    epsilons = ctx.pick(full=EPSILONS_TOTAL, quick=EPSILONS_TOTAL, tiny=(2.0,))
    draws = ctx.pick(full=3, quick=1, tiny=1)
    config = {
        "variants": variants,
        "epsilons_total": list(epsilons),
        "n_test": len(idx),
        "draws": draws,
        "weights": {v: infos[v].card["weights"]["sha256"] for v in variants},
        "classifiers": ctx.classifier_weights(variants),
    }
    table = ctx.table("table1-global", columns=COLUMNS, key=KEY, config=config, parts=PARTS)
    x, y = ds.x_test[idx], ds.y_test[idx].numpy()
    with ctx.progress("global mechanism") as progress:
        for i, v in enumerate(variants):
            progress(i, len(variants), v)
            global_accuracy_rows(ctx, ctx.pipeline(v), epsilons=epsilons, x=x, y=y, table=table, variant=v,
                                 draws=draws)
        progress(len(variants), len(variants), "")
    figure = _figure(table.frame(), ctx.dataset)
    return table.finish(figures=save_figure(figure, ctx.dataset_dir / "table1-global"))


def _figure(frame: Any, dataset: str) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, part in frame.groupby("obfuscator", sort=False):
        part = part.sort_values("epsilon_total")
        fig.add_trace(go.Scatter(
            x=part["epsilon_total"], y=part["accuracy"], mode="lines+markers", name=name,
            error_y={"type": "data", "symmetric": False, "array": part["high"] - part["accuracy"],
                     "arrayminus": part["accuracy"] - part["low"]},
        ))
    n = int(frame["n_test"].iloc[0]) if len(frame) else 0
    fig.update_xaxes(title_text="total ε of each release's guarantee (ε, 0, R)", type="log")
    fig.update_yaxes(title_text=f"test accuracy (n = {n} images, 95 % bootstrap interval)")
    fig.update_layout(title=f"Table 1 ({dataset}): obfuscators under the certified global mechanism",
                      template="plotly_white", height=430)
    return fig
