"""``experiment table1``: posthoc paper Table 1 — test accuracy of the obfuscators under PTR.

For every Table-1 obfuscator shipped for the dataset (the paper's eight: Encoder, ARL, C, N,
ARL-C, ARL-N, C-N, ARL-C-N, and the paper-recipe twins ``<variant>-paper`` of the N variants;
whichever exist, :func:`privcore.train.recipes.table1_order`), on a seeded test subsample:

* ``epsilon = inf`` ("Informal"): classifier(f(g(x))) with no noise and no test;
* ε ∈ {1, 2, 5, 10}: the full extended PTR (Algorithm 1 with docs/DESIGN.md's corrections) with the
  paper's δ = 0.05, the dataset's R and the Δp stored with the obfuscator (μ + 3σ over training
  embeddings); the pipeline's classifier (the noise-aware release classifier when shipped) sees
  the release f(z) + Lap(Δp·R/ε) and its public scale Δp·R/ε, and ⊥ is answered by a
  uniform guess (``accuracy``; the paper's ε = 0 column is chance) — ``accuracy_bot_wrong`` and
  ``accuracy_released`` give the other two readings. The release is (2ε, δ/2, R)-private.
* ``accuracy_refit``: the same releases classified by the pipeline's classifier fine-tuned on
  releases of training images at that ε (:func:`~privcore.experiments.ptr_common.refit_classifier`;
  post-processing, no privacy cost), ⊥ again a uniform guess.

φ is computed once per (obfuscator, test point) through the persistent cache and reused for
every ε (and by ``table2`` and the dashboard). Each obfuscator is a part of the table
(:class:`~privcore.experiments.tables.Parts`): ``--obfuscators NAME`` adds or redoes that
obfuscator's rows and keeps the others'.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privcore.experiments.ptr_common import (
    compute_phis,
    embed,
    expected_accuracy,
    ptr_release_batch,
    ptr_setup,
    refit_classifier,
    refit_plan,
    test_indices,
)
from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.seeds import row_seed
from privcore.experiments.tables import Parts
from privcore.train.recipes import VARIANTS, table1_order

__all__ = ["COLUMNS", "EPSILONS", "PARTS", "VARIANTS", "ptr_accuracy_rows", "run", "table1_obfuscators"]

COLUMNS = (
    "dataset",
    "obfuscator",
    "epsilon",
    "delta",
    "radius",
    "delta_p",
    "noise_scale",
    "accuracy",
    "accuracy_bot_wrong",
    "accuracy_released",
    "accuracy_refit",
    "release_rate",
    "n_test",
    "n_released",
    "certifier",
    "seed",
)
KEY = ("obfuscator", "epsilon")
EPSILONS = (1.0, 2.0, 5.0, 10.0)
#: One part per obfuscator: its weights, release classifier and Δp (the rest of the config is shared).
PARTS = Parts(column="obfuscator", names="variants", fields=("weights", "classifiers", "delta_p"))


def table1_obfuscators(ctx: RunContext, infos: dict[str, Any]) -> list[str]:
    """The Table-1 obfuscators among ``infos`` (name → card) that this run covers: all of them in
    :func:`~privcore.train.recipes.table1_order`, or those ``--obfuscators`` names (ValueError for
    a name not shipped); in tiny mode only the last (ARL-C-N when shipped) unless chosen."""
    names = table1_order(infos)
    if ctx.options.get("obfuscators"):
        wanted = [v.strip() for v in str(ctx.options["obfuscators"]).split(",") if v.strip()]
        unknown = [v for v in wanted if v not in names]
        if unknown:
            raise ValueError(f"obfuscators {unknown} are not shipped for {ctx.dataset}; have {names}")
        return [v for v in names if v in wanted]
    if ctx.mode == "tiny":
        return [v for v in names if v in VARIANTS][-1:]  # ARL-C-N when shipped: the tests' smoke run
    return names


def _classify(pipe: Any, v: np.ndarray, scale: float = 0.0) -> np.ndarray:
    import torch

    v_t = torch.as_tensor(np.nan_to_num(v), dtype=torch.float32)
    return pipe.classify(v_t, scale).argmax(-1).cpu().numpy()


def ptr_accuracy_rows(
    ctx: RunContext,
    pipe: Any,
    *,
    epsilons: tuple[float, ...],
    x: Any,
    y: np.ndarray,
    table: Any,
    key_extra: dict[str, Any],
    seed_key: tuple[Any, ...],
    x_train: Any = None,
    y_train: Any = None,
    refit_epochs: int = 0,
) -> None:
    """Add one row per ε (plus ε = inf) for ``pipe`` to ``table``: informal accuracy, then PTR.

    ``key_extra`` holds the row's identifying columns besides ``epsilon`` (e.g. the obfuscator).
    Rows already in the table are skipped; φ is computed only if some PTR row is missing. With
    ``refit_epochs`` > 0 and training data, ``accuracy_refit`` uses a classifier fine-tuned on
    training releases at each ε (else it is left empty). Noise seeds: :func:`row_seed` of
    ``seed_key`` and ε.
    """
    if pipe.delta_p is None:
        raise ValueError(f"{pipe.obfuscator_name}: no Δp in its card; run `python -m privcore train delta-p`")
    n_classes = len(pipe.class_names)
    z = embed(pipe, x)
    f = pipe.obfuscator
    setup = ptr_setup(
        radius=pipe.radius,
        delta_p=pipe.proposed_delta_p,
        epsilons=epsilons,
        certifier=ctx.certifier,
        grid_steps=ctx.pick(full=32, quick=32, tiny=4),
    )
    common = {
        "dataset": ctx.dataset,
        "radius": setup.radius,
        "delta_p": setup.delta_p,
        "n_test": len(y),
        "certifier": ctx.certifier,
        **key_extra,
    }
    import torch

    from privcore.nets.models import classify

    clean = pipe.obfuscate(torch.as_tensor(z, dtype=torch.float32)).double().cpu().numpy()
    if not table.done(epsilon=float("inf"), **key_extra):
        acc = float((_classify(pipe, clean) == y).mean())
        table.add(
            {
                **common,
                "epsilon": float("inf"),
                "delta": None,
                "noise_scale": 0.0,
                "accuracy": acc,
                "accuracy_bot_wrong": acc,
                "accuracy_released": acc,
                "accuracy_refit": acc,
                "release_rate": 1.0,
                "n_released": len(y),
                "seed": None,
            }
        )
    todo = [e for e in epsilons if not table.done(epsilon=e, **key_extra)]
    if not todo:
        return
    with ctx.progress(f"φ {pipe.obfuscator_name} R={setup.radius:g}") as progress:
        phis, errors = compute_phis(
            f, z, setup, workers=ctx.workers, progress=progress, executor=ctx.executor
        )
    zt_train = None
    if refit_epochs and x_train is not None:
        zt_train = pipe.obfuscate(torch.as_tensor(embed(pipe, x_train), dtype=torch.float32)).cpu()
    for eps in epsilons:
        if eps not in todo:
            continue
        seed = row_seed(ctx.seed, *seed_key, eps)
        scale = setup.delta_p * setup.radius / eps
        rel = ptr_release_batch(f, z, phis, setup, epsilon=eps, rng=np.random.default_rng(seed))
        released = ~np.isnan(rel).all(axis=1)
        correct = _classify(pipe, rel, scale) == y
        refit = None
        if zt_train is not None:
            clf = refit_classifier(pipe, zt_train, y_train, scale=scale, epochs=refit_epochs, seed=seed)
            with torch.no_grad():
                rel_t = torch.as_tensor(np.nan_to_num(rel), dtype=torch.float32, device=pipe.device)
                pred = classify(clf, rel_t, scale)
            refit = expected_accuracy(pred.argmax(-1).cpu().numpy() == y, released, n_classes)["accuracy"]
        table.add(
            {
                **common,
                "epsilon": eps,
                "delta": setup.delta,
                "noise_scale": scale,
                **expected_accuracy(correct, released, n_classes),
                "accuracy_refit": refit,
                "seed": seed,
            }
        )
    if errors:
        table.meta.setdefault("certification_failures", []).extend(errors[:5])


def _figure(frame: Any, dataset: str) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("test accuracy (⊥ = uniform guess)", "fraction released")
    )
    finite = frame[np.isfinite(frame["epsilon"])]
    for name, part in finite.groupby("obfuscator", sort=False):
        part = part.sort_values("epsilon")
        fig.add_trace(
            go.Scatter(
                x=part["epsilon"], y=part["accuracy"], mode="lines+markers", name=name, legendgroup=name
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=part["epsilon"],
                y=part["release_rate"],
                mode="lines+markers",
                name=name,
                legendgroup=name,
                showlegend=False,
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(title_text="ε (release is (2ε, δ/2, R)-private)", type="log")
    fig.update_layout(
        title=f"Table 1 ({dataset}): obfuscators under extended PTR", template="plotly_white", height=430
    )
    return fig


def run(ctx: RunContext) -> Any:
    """Table 1 for every shipped obfuscator variant; write ``table1.csv`` + figure."""
    from privcore.data import load_dataset

    infos = {m.name: m for m in ctx.model_infos() if m.kind == "obfuscator"}
    variants = table1_obfuscators(ctx, infos)
    if not variants:
        raise FileNotFoundError(
            f"no Table-1 obfuscator for {ctx.dataset}: train them with "
            f"`python -m privcore train all --dataset {ctx.dataset}`"
        )
    ds = load_dataset(ctx.dataset)
    n_test = ctx.n_test(full=None if ds.x_test.shape[0] <= 2000 else 2000, quick=40, tiny=6)
    idx = test_indices(ds.x_test.shape[0], n_test, ctx.seed)
    epsilons = ctx.pick(full=EPSILONS, quick=EPSILONS, tiny=(1.0, 5.0))
    config = {
        "variants": variants,
        "epsilons": list(epsilons),
        "n_test": len(idx),
        "certifier": ctx.certifier,
        "weights": {v: infos[v].card["weights"]["sha256"] for v in variants},
        "classifiers": ctx.classifier_weights(variants),
        "delta_p": {v: (infos[v].card.get("delta_p") or {}).get("proposed") for v in variants},
        "refit": "fine-tuned on training releases (ptr_common.refit_plan)",
    }
    table = ctx.table("table1", columns=COLUMNS, key=KEY, config=config, parts=PARTS)
    x, y = ds.x_test[idx], ds.y_test[idx].numpy()
    x_train, y_train, refit_epochs = refit_plan(ctx, ds)
    for v in variants:
        pipe = ctx.pipeline(v)
        ptr_accuracy_rows(
            ctx,
            pipe,
            epsilons=epsilons,
            x=x,
            y=y,
            table=table,
            key_extra={"obfuscator": v},
            seed_key=("table1", v),
            x_train=x_train,
            y_train=y_train,
            refit_epochs=refit_epochs,
        )
    missing = [v for v in VARIANTS if v not in infos]
    frame = table.frame()
    return table.finish(
        figures=save_figure(_figure(frame, ctx.dataset), ctx.dataset_dir / "table1"),
        notes={"variants_not_shipped": missing} if missing else None,
    )
