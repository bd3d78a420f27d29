"""``experiment select``: two ARL-C-N choices made on a validation split, then one read of the
test set.

Two choices of the ARL-C-N pipeline must not be made on test outcomes: the release margin of the
release-aware N regulariser (``ObfuscatorRecipe.release_margin`` = 0.08) and the release
classifier's schedule (``ReleaseClassifierRecipe``: 120 epochs, cosine). Here, with everything
stated before any candidate is trained (:data:`MARGINS`, :data:`SCHEDULES`, :data:`CRITERION`):

1. A seeded, stratified :data:`VALIDATION_FRACTION` of the training set is held out
   (:func:`privcore.data.validation_split`; fraction, seed, sizes and a SHA-256 of the held-out
   indices go into the JSON card). Every model below is trained on the rest: the β-VAE embedder,
   each obfuscator, its Δp (exact certifier, μ + 3σ over 300 of those training embeddings, as the
   shipped cards) and its release classifier. Checkpoints go to :func:`select_cache_root`.
2. (A) One ARL-C-N obfuscator per release margin in :data:`MARGINS` (all else the shipped recipe),
   each with Δp and the default release classifier, scored on the validation images by PTR
   exactly as ``table1`` scores: ε ∈ {1, 2, 5, 10}, δ = 0.05, the dataset's R, ⊥ answered by a
   uniform guess; the margin with the best :data:`CRITERION` is selected.
3. (B) For the selected obfuscator, one release classifier per schedule in :data:`SCHEDULES`, scored
   the same way on the same validation releases (same noise seeds: common random numbers).
4. The selected pair is evaluated once on the test set (all of it in full mode).

Every row carries n, a 95 % interval for the accuracy (Hoeffding, as the report: per-image scores
in [0, 1] with ⊥ scoring 1/K) and a Wilson interval for the release rate. Not part of ``all``
(it trains models).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from privcore.data.split import VALIDATION_FRACTION
from privcore.experiments.ptr_common import (
    compute_phis,
    embed,
    expected_accuracy,
    ptr_release_batch,
    ptr_setup,
    test_indices,
)
from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.seeds import row_seed
from privcore.train.ensure import (
    ensure_classifier,
    ensure_delta_p,
    ensure_embedder,
    ensure_obfuscator,
    select_cache_root,
)

__all__ = ["COLUMNS", "CRITERION", "MARGINS", "SCHEDULES", "VALIDATION_FRACTION", "run"]

COLUMNS = (
    "dataset",
    "choice",
    "candidate",
    "release_margin",
    "classifier_epochs",
    "classifier_schedule",
    "split",
    "epsilon",
    "delta",
    "radius",
    "delta_p",
    "noise_scale",
    "accuracy",
    "accuracy_lo",
    "accuracy_hi",
    "accuracy_bot_wrong",
    "accuracy_released",
    "release_rate",
    "release_rate_lo",
    "release_rate_hi",
    "n",
    "n_released",
    "selected",
    "certifier",
    "seed",
)
KEY = ("choice", "candidate", "split", "epsilon")
VARIANT = "ARL-C-N"
EPSILONS = (1.0, 2.0, 5.0, 10.0)
#: (A) release margins of the release-aware N regulariser (0.08 is the shipped recipe's)
MARGINS = (0.0, 0.04, 0.08, 0.12)
#: (B) release-classifier schedules, (epochs, lr schedule) (120/cosine is the shipped recipe's)
SCHEDULES = ((30, "constant"), (30, "cosine"), (60, "constant"), (60, "cosine"), (120, "constant"),
             (120, "cosine"))
CRITERION = (
    "highest validation accuracy at epsilon = 1 (PTR, bot = uniform guess); ties: higher mean "
    "validation accuracy over epsilon in {1, 2, 5, 10}, then the earlier candidate in grid order"
)


def _plan(ctx: RunContext) -> dict[str, Any]:
    """Grids, sample sizes and recipe overrides of this mode (tiny: seconds, for the tests)."""
    tiny = ctx.mode == "tiny"
    plan = {
        "margins": ctx.pick(full=MARGINS, quick=(0.0, 0.08), tiny=(0.0, 0.08)),
        "schedules": ctx.pick(full=SCHEDULES, quick=((15, "constant"), (30, "cosine")),
                              tiny=((1, "constant"), (2, "cosine"))),
        "epsilons": ctx.pick(full=EPSILONS, quick=EPSILONS, tiny=(1.0, 5.0)),
        "n_val": ctx.pick(full=None, quick=500, tiny=8),
        "n_test": ctx.n_test(full=None, quick=1000, tiny=6),
        "delta_p_n": ctx.pick(full=300, quick=100, tiny=3),
        "grid_steps": ctx.pick(full=32, quick=32, tiny=4),
        "embedder": {"epochs": 1, "batch_size": 512} if tiny else {},
        "obfuscator": {"warmup_epochs": 0, "epochs": 1, "classifier_refit_epochs": 1, "batch_size": 512}
        if tiny else {},
        "classifier": ctx.pick(full={}, quick={"epochs": 30}, tiny={"epochs": 2, "batch_size": 512}),
    }
    return plan


def _wilson(k: int, n: int) -> tuple[float, float]:
    if n <= 0:
        return math.nan, math.nan
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def _hoeffding(acc: float, n: int) -> tuple[float, float]:
    from privcore.experiments.report import hoeffding_halfwidth

    h = hoeffding_halfwidth(n)
    return max(0.0, acc - h), min(1.0, acc + h)


def _classify(pipe: Any, v: np.ndarray, scale: float) -> np.ndarray:
    import torch

    v_t = torch.as_tensor(np.nan_to_num(v), dtype=torch.float32)
    return pipe.classify(v_t, scale).argmax(-1).cpu().numpy()


def _score(ctx: RunContext, pipe: Any, x: Any, y: np.ndarray, *, plan: dict[str, Any], split: str,
           seed_key: str) -> list[dict[str, Any]]:
    """PTR rows (ε = inf, then each ε of the plan) of ``pipe`` on images ``x``, as table1 scores."""
    import torch

    n_classes = len(pipe.class_names)
    z = embed(pipe, x)
    setup = ptr_setup(radius=pipe.radius, delta_p=pipe.proposed_delta_p, epsilons=plan["epsilons"],
                      certifier=ctx.certifier, grid_steps=plan["grid_steps"])
    common = {"dataset": ctx.dataset, "split": split, "radius": setup.radius, "delta_p": setup.delta_p,
              "n": len(y), "certifier": ctx.certifier}
    clean = pipe.obfuscate(torch.as_tensor(z, dtype=torch.float32)).double().cpu().numpy()
    acc = float((_classify(pipe, clean, 0.0) == y).mean())
    rows = [{**common, "epsilon": math.inf, "delta": None, "noise_scale": 0.0, "accuracy": acc,
             "accuracy_bot_wrong": acc, "accuracy_released": acc, "release_rate": 1.0, "n_released": len(y),
             "seed": None}]
    with ctx.progress(f"φ {split} {seed_key}") as progress:
        phis, _ = compute_phis(pipe.obfuscator, z, setup, workers=ctx.workers, progress=progress,
                               executor=ctx.executor)
    for eps in plan["epsilons"]:
        seed = row_seed(ctx.seed, "select", split, seed_key, eps)
        scale = setup.delta_p * setup.radius / eps
        rel = ptr_release_batch(pipe.obfuscator, z, phis, setup, epsilon=eps, rng=np.random.default_rng(seed))
        released = ~np.isnan(rel).all(axis=1)
        correct = _classify(pipe, rel, scale) == y
        rows.append({**common, "epsilon": eps, "delta": setup.delta, "noise_scale": scale,
                     **expected_accuracy(correct, released, n_classes), "seed": seed})
    for r in rows:
        r["accuracy_lo"], r["accuracy_hi"] = _hoeffding(r["accuracy"], r["n"])
        r["release_rate_lo"], r["release_rate_hi"] = _wilson(r["n_released"], r["n"])
    return rows


def _pick(scored: list[tuple[Any, list[dict[str, Any]]]]) -> Any:
    """The candidate that :data:`CRITERION` selects (``scored``: (candidate, rows) in grid order)."""
    def score(rows: list[dict[str, Any]]) -> tuple[float, float]:
        finite = [r for r in rows if math.isfinite(r["epsilon"])]
        at1 = next(r["accuracy"] for r in finite if r["epsilon"] == min(r["epsilon"] for r in finite))
        return at1, float(np.mean([r["accuracy"] for r in finite]))

    best = max(range(len(scored)), key=lambda i: (*score(scored[i][1]), -i))
    return scored[best][0]


def _margin_name(m: float) -> str:
    return f"margin={m:g}"


def _schedule_name(s: tuple[int, str]) -> str:
    return f"epochs={s[0]},{s[1]}"


def _with_classifier(pipe: Any, stem: Path) -> Any:
    """``pipe`` reading its releases with the release classifier at ``stem`` (checked to belong to
    the pipeline's obfuscator)."""
    from privcore.nets.checkpoint import load_checkpoint

    clf = load_checkpoint(stem, kind="release-classifier", dataset=pipe.dataset, device=pipe.device)
    if clf.card["obfuscator"]["sha256"] != pipe.cards["obfuscator"]["weights"]["sha256"]:
        raise ValueError(f"{stem} was fitted on another obfuscator")
    cards = {**pipe.cards, "classifier": clf.card}
    return dataclasses.replace(pipe, classifier=clf["classifier"], classifier_source="release-classifier",
                               cards=cards)


def _add(table: Any, rows: list[dict[str, Any]], *, key: tuple[str, ...] = KEY, **fields: Any) -> None:
    """Add ``rows`` (each completed by ``fields``) that ``table`` does not hold yet under ``key``."""
    for r in rows:
        row = {**r, **fields}
        if not table.done(**{k: row[k] for k in key}):
            table.add(row)


def _selected(frame: Any, choice: str) -> Any:
    """The candidate marked selected for ``choice`` in a resumed table (None when not yet there)."""
    if frame is None or frame.empty:
        return None
    part = frame[(frame["choice"] == choice) & (frame["selected"].astype(str) == "True")]
    return None if part.empty else part.iloc[0]


def run(ctx: RunContext) -> Any:
    """Validation-only selection of the release margin and classifier schedule; one test read."""
    from privcore.data import load_dataset, validation_split
    from privcore.models.pipeline import load_pipeline
    from privcore.train.recipes import embedder_recipe, obfuscator_recipe, release_classifier_recipe

    plan = _plan(ctx)
    ds = load_dataset(ctx.dataset)
    split = validation_split(ds, fraction=VALIDATION_FRACTION, seed=ctx.seed)
    rec = split.record()
    fit = split.dataset
    emb_recipe = embedder_recipe(ctx.dataset, **plan["embedder"])
    clf_default = release_classifier_recipe(ctx.dataset, **plan["classifier"])
    obf_recipes = {m: obfuscator_recipe(ctx.dataset, VARIANT, release_margin=m, **plan["obfuscator"])
                   for m in plan["margins"]}
    val_idx = test_indices(split.x_val.shape[0], plan["n_val"], ctx.seed)
    test_idx = test_indices(ds.x_test.shape[0], plan["n_test"], ctx.seed)
    config = {
        "variant": VARIANT,
        "validation_split": {k: v for k, v in rec.items() if k != "fit_fingerprint"},
        "margins": list(plan["margins"]),
        "schedules": [list(s) for s in plan["schedules"]],
        "epsilons": list(plan["epsilons"]),
        "criterion": CRITERION,
        "n_val": len(val_idx),
        "n_test": len(test_idx),
        "delta_p": {"n": plan["delta_p_n"], "n_sigma": 3.0, "certifier": "exact",
                    "source": "training set minus validation"},
        "certifier": ctx.certifier,
        "recipes": {"embedder": emb_recipe.to_json(), "obfuscator": obf_recipes[plan["margins"][0]].to_json(),
                    "classifier": clf_default.to_json()},
        "recipe_varied": {"A": "obfuscator.release_margin", "B": "classifier.epochs, classifier.lr_schedule"},
    }
    table = ctx.table("select", columns=COLUMNS, key=KEY, config=config)
    run_dir = select_cache_root() / ctx.dataset / f"{ctx.mode}-seed{ctx.seed}-{rec['held_out_sha256'][:8]}"
    base = f"python -m privcore experiment select --dataset {ctx.dataset}"
    train = {"seed": ctx.seed, "device": ctx.device, "progress": ctx.show_progress}
    emb_stem = run_dir / "embedder" / ctx.dataset / "embedder"
    x_val, y_val = split.x_val[val_idx], split.y_val[val_idx].numpy()
    notes: dict[str, Any] = {"cache_dir": str(run_dir), "candidates": {}}
    frame = table.frame() if table.n_rows else None

    def obf_stem(m: float) -> Path:
        return run_dir / f"margin-{m:g}" / ctx.dataset / f"obfuscator-{VARIANT}"

    def build(m: float) -> Any:
        """Obfuscator of margin m with Δp and default classifier, trained on the fit part."""
        ensure_embedder(fit, emb_recipe, emb_stem, command=f"{base} (embedder on the fit part)", **train)
        stem = obf_stem(m)
        ensure_obfuscator(fit, obf_recipes[m], embedder=emb_stem, stem=stem,
                          command=f"{base} (candidate release_margin={m:g})", **train)
        card = ensure_delta_p(stem, n=plan["delta_p_n"], seed=ctx.seed, workers=ctx.workers,
                              executor=ctx.executor, progress=ctx.show_progress,
                              command=f"{base} (Δp of candidate release_margin={m:g})")
        ensure_classifier(stem, clf_default, stem.with_name(f"classifier-{VARIANT}"),
                          command=f"{base} (classifier of candidate release_margin={m:g})", **train)
        notes["candidates"][_margin_name(m)] = {
            "obfuscator_sha256": card["weights"]["sha256"], "delta_p": card["delta_p"]["proposed"],
            "delta_p_n": card["delta_p"]["n"], "train_seconds": card.get("train_seconds"),
            "validation_accuracy_no_noise": card["metrics"]["test_accuracy"],
        }
        return load_pipeline(ctx.dataset, VARIANT, models_dir=stem.parent.parent, device=ctx.torch_device())

    # (A) release margin, on validation
    chosen = _selected(frame, "release_margin")
    if chosen is None:
        scored = [(m, _score(ctx, build(m), x_val, y_val, plan=plan, split="validation",
                             seed_key=_margin_name(m))) for m in plan["margins"]]
        margin = _pick(scored)
        for m, rows in scored:
            _add(table, rows, choice="release_margin", candidate=_margin_name(m), release_margin=m,
                 classifier_epochs=clf_default.epochs, classifier_schedule=clf_default.lr_schedule,
                 selected=m == margin)
    else:
        margin = float(chosen["release_margin"])
    pipe = build(margin)
    stem = obf_stem(margin)

    # (B) release-classifier schedule for the selected obfuscator, on the same validation releases
    def clf_stem(s: tuple[int, str]) -> tuple[Path, Any]:
        recipe = dataclasses.replace(clf_default, epochs=s[0], lr_schedule=s[1])
        name = f"classifier-{VARIANT}" if recipe == clf_default else f"classifier-{VARIANT}-e{s[0]}-{s[1]}"
        return stem.with_name(name), recipe

    chosen = _selected(frame, "classifier_schedule")
    if chosen is None:
        scored = []
        for s in plan["schedules"]:
            cstem, recipe = clf_stem(s)
            ensure_classifier(stem, recipe, cstem, command=f"{base} (schedule {_schedule_name(s)})", **train)
            rows = _score(ctx, _with_classifier(pipe, cstem), x_val, y_val, plan=plan, split="validation",
                          seed_key=_margin_name(margin))
            scored.append((s, rows))
        schedule = _pick(scored)
        for s, rows in scored:
            _add(table, rows, choice="classifier_schedule", candidate=_schedule_name(s),
                 release_margin=margin, classifier_epochs=s[0], classifier_schedule=s[1],
                 selected=s == schedule)
    else:
        schedule = (int(chosen["classifier_epochs"]), str(chosen["classifier_schedule"]))
    cstem, recipe = clf_stem(schedule)
    ensure_classifier(stem, recipe, cstem, command=f"{base} (schedule {_schedule_name(schedule)})", **train)
    final = _with_classifier(pipe, cstem)

    # the one read of the test set
    name = f"{_margin_name(margin)},{_schedule_name(schedule)}"
    if not table.done(choice="final", candidate=name, split="test", epsilon=plan["epsilons"][-1]):
        x_test, y_test = ds.x_test[test_idx], ds.y_test[test_idx].numpy()
        rows = _score(ctx, final, x_test, y_test, plan=plan, split="test", seed_key="final")
        _add(table, rows, choice="final", candidate=name, release_margin=margin,
             classifier_epochs=schedule[0], classifier_schedule=schedule[1], selected=True)
    notes.update({
        "selected": {"release_margin": margin, "classifier_epochs": schedule[0],
                     "classifier_schedule": schedule[1]},
        "final_checkpoints": {"obfuscator": str(stem), "classifier": str(cstem),
                              "classifier_sha256": final.cards["classifier"]["weights"]["sha256"]},
        "test_set": "read once, for the selected pair only (rows with split = test)",
        "validation_split": rec,
    })
    out = table.frame()
    figures = save_figure(_figure(out, ctx.dataset), ctx.dataset_dir / "select")
    return table.finish(figures=figures, notes=notes)


def _figure(frame: Any, dataset: str) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    titles = ("A: margin (validation)", "B: schedule (validation)", "selected (test)")
    fig = make_subplots(rows=1, cols=3, subplot_titles=titles, shared_yaxes=True)
    finite = frame[np.isfinite(frame["epsilon"])]
    for col, choice in enumerate(("release_margin", "classifier_schedule", "final"), start=1):
        for cand, part in finite[finite["choice"] == choice].groupby("candidate", sort=False):
            part = part.sort_values("epsilon")
            sel = str(part["selected"].iloc[0]) == "True"
            fig.add_trace(go.Scatter(
                x=part["epsilon"], y=part["accuracy"], mode="lines+markers",
                name=f"{cand}{' *' if sel else ''}",
                line={"width": 3 if sel else 1},
                error_y={"type": "data", "symmetric": False, "array": part["accuracy_hi"] - part["accuracy"],
                         "arrayminus": part["accuracy"] - part["accuracy_lo"]},
            ), row=1, col=col)
    fig.update_xaxes(title_text="ε", type="log")
    fig.update_yaxes(title_text="accuracy (⊥ = uniform guess)", row=1, col=1)
    fig.update_annotations(font_size=13)
    fig.update_layout(title=f"Validation-only selection ({dataset}, ARL-C-N; * = selected)",
                      template="plotly_white", height=430, width=1300)
    return fig
