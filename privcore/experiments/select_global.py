"""``experiment select-global``: the ARL-C-N pipeline for the certified global mechanism, every
choice on a validation split, then one read of the test set.

Stated before any candidate is trained (:data:`CANDIDATES`, :data:`SCHEDULES`, :data:`CRITERION`):

1. The split of ``experiment select`` (:func:`privcore.data.validation_split`, fraction
   :data:`~privcore.experiments.select.VALIDATION_FRACTION`, the run's seed; the dataset's own
   fixed split where it has one). The β-VAE, each obfuscator, its Δp (exact, μ + 3σ over 300 fit
   embeddings: the release classifier's scale unit), its clipping box and G (certified by this
   process over the box of the fit embeddings, :func:`privcore.train.global_card.write_global_constant`)
   and its release classifier are trained or computed on the fit part only.
2. (A) One obfuscator per candidate of :data:`CANDIDATES`: the shipped recipes of three
   noise-trained Table-1 variants (ARL-C-N, C-N, N; PTR's release noise) and ``N-global``,
   trained with the global mechanism's own noise Ĝ·R/ε at total ε = 2 and 4, Ĝ sampled over the
   batch's R-balls and 512 points of the public box (``noise_mode="global"``,
   ``noise_box_samples``), each with the default release classifier; scored on the validation
   images by the global mechanism, f(clip z) + Lap(G·R/ε), at total ε = 2 (the issue's target)
   and 4 (ties). Every variant gives the same formal guarantee (ε, 0, R); they differ in what a
   reconstruction attack recovers (``experiment attack``).
3. (B) For the selected obfuscator, one release classifier per schedule in :data:`SCHEDULES`,
   scored the same way (same noise seeds).
4. The selected pair is evaluated once on the test set at every total ε of
   :data:`~privcore.experiments.table1_global.EPSILONS_TOTAL`, ``draws`` noise draws per image.

Rows carry n, draws and a 95 % percentile-bootstrap interval over images (as ``table1-global``).
Checkpoints go to ``select_cache_root()/<dataset>/global-…``. Not part of ``all`` (it trains models).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from privcore.experiments import select
from privcore.experiments.ptr_common import embed, test_indices
from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.seeds import row_seed
from privcore.experiments.select import VALIDATION_FRACTION, _selected
from privcore.experiments.table1_global import EPSILONS_TOTAL, _bootstrap
from privcore.train.ensure import (
    ensure_classifier,
    ensure_delta_p,
    ensure_embedder,
    ensure_obfuscator,
    select_cache_root,
)

__all__ = ["CANDIDATES", "COLUMNS", "CRITERION", "SCHEDULES", "run"]

COLUMNS = (
    "dataset",
    "choice",
    "candidate",
    "obfuscator",
    "classifier_epochs",
    "classifier_schedule",
    "split",
    "epsilon_total",
    "radius",
    "global_lipschitz",
    "global_lipschitz_how",
    "delta_p",
    "noise_scale",
    "accuracy",
    "low",
    "high",
    "release_rate",
    "n",
    "draws",
    "selected",
    "seed",
)
KEY = ("choice", "candidate", "split", "epsilon_total")
#: (A) obfuscator candidates: name → (checkpoint name, recipe overrides)
CANDIDATES: dict[str, tuple[str, dict[str, Any]]] = {
    "ARL-C-N": ("ARL-C-N", {}),
    "C-N": ("C-N", {}),
    "N": ("N", {}),
    "N-global,box": ("N-global", {"noise_box_samples": 512, "noise_epsilons": (2.0, 4.0),
                                  "noise_clean_fraction": 0.0}),
}
#: (B) release-classifier schedules, (epochs, lr schedule) (120/cosine is the shipped recipe's)
SCHEDULES = ((60, "cosine"), (120, "constant"), (120, "cosine"))
SELECT_EPSILONS = (2.0, 4.0)
CRITERION = (
    "highest validation accuracy at total epsilon = 2 under the global mechanism; ties: higher "
    "validation accuracy at total epsilon = 4, then the earlier candidate in grid order"
)


def _plan(ctx: RunContext) -> dict[str, Any]:
    tiny = ctx.mode == "tiny"
    return {
        "candidates": ctx.pick(full=tuple(CANDIDATES), quick=tuple(CANDIDATES),
                               tiny=("ARL-C-N", "N-global,box")),
        "schedules": ctx.pick(full=SCHEDULES, quick=((30, "cosine"),), tiny=((1, "constant"), (2, "cosine"))),
        "n_val": ctx.pick(full=None, quick=1000, tiny=8),
        "n_test": ctx.n_test(full=None, quick=1000, tiny=6),
        "draws": ctx.pick(full=3, quick=1, tiny=1),
        "delta_p_n": ctx.pick(full=300, quick=100, tiny=3),
        # seconds for G's exact search; past it, the certified upper bound (sound, looser)
        "global_time_limit": ctx.pick(full=60.0, quick=60.0, tiny=1.0),
        "embedder": {"epochs": 1, "batch_size": 512} if tiny else {},
        "obfuscator": {"warmup_epochs": 0, "epochs": 1, "classifier_refit_epochs": 1, "batch_size": 512}
        if tiny else {},
        "classifier": ctx.pick(full={}, quick={"epochs": 30}, tiny={"epochs": 2, "batch_size": 512}),
    }


def _score(ctx: RunContext, pipe: Any, x: Any, y: np.ndarray, *, epsilons: tuple[float, ...], draws: int,
           split: str, seed_key: str) -> list[dict[str, Any]]:
    """Global-mechanism rows of ``pipe`` on images ``x``: one per total ε (G certified here)."""
    import torch

    from privcore.mechanisms.global_mechanism import card_global_constant, global_release

    constant = card_global_constant(pipe.obfuscator, pipe.cards["obfuscator"])
    z = embed(pipe, x)
    rows = []
    for eps in epsilons:
        seed = row_seed(ctx.seed, "select-global", split, seed_key, eps)
        rng = np.random.default_rng(seed)
        scale = constant.value * pipe.radius / eps
        correct = np.zeros((draws, len(y)), dtype=bool)
        for d in range(draws):
            values = np.stack([global_release(pipe.obfuscator, zi, epsilon=eps, radius=pipe.radius,
                                              constant=constant, rng=rng).value for zi in z])
            logits = pipe.classify(torch.as_tensor(values, dtype=torch.float32), float(scale))
            correct[d] = logits.argmax(-1).cpu().numpy() == y
        per_image = correct.mean(axis=0)
        low, high = _bootstrap(per_image, seed)
        rows.append({
            "dataset": ctx.dataset, "split": split, "epsilon_total": eps, "radius": pipe.radius,
            "global_lipschitz": constant.value, "global_lipschitz_how": constant.how.value,
            "delta_p": pipe.proposed_delta_p, "noise_scale": scale, "accuracy": float(per_image.mean()),
            "low": low, "high": high, "release_rate": 1.0, "n": len(y), "draws": draws, "seed": seed,
        })
    return rows


def _pick(scored: list[tuple[Any, list[dict[str, Any]]]]) -> Any:
    """The candidate :data:`CRITERION` selects (``scored``: (candidate, rows) in grid order)."""
    def key(i: int) -> tuple[float, ...]:
        acc = {r["epsilon_total"]: r["accuracy"] for r in scored[i][1]}
        return (*(acc[e] for e in SELECT_EPSILONS), -i)

    return scored[max(range(len(scored)), key=key)][0]


def _add(table: Any, rows: list[dict[str, Any]], **fields: Any) -> None:
    select._add(table, rows, key=KEY, **fields)


def run(ctx: RunContext) -> Any:
    """Validation-only choice of obfuscator and classifier schedule for the global mechanism."""
    from privcore.data import load_dataset, validation_split
    from privcore.experiments.select import _with_classifier
    from privcore.models.pipeline import load_pipeline
    from privcore.nets.checkpoint import read_card
    from privcore.train.global_card import write_global_constant
    from privcore.train.recipes import embedder_recipe, obfuscator_recipe, release_classifier_recipe

    plan = _plan(ctx)
    ds = load_dataset(ctx.dataset)
    split = validation_split(ds, fraction=VALIDATION_FRACTION, seed=ctx.seed)
    rec = split.record()
    fit = split.dataset
    emb_recipe = embedder_recipe(ctx.dataset, **plan["embedder"])
    clf_default = release_classifier_recipe(ctx.dataset, **plan["classifier"])
    recipes = {c: obfuscator_recipe(ctx.dataset, CANDIDATES[c][0],
                                    **{**CANDIDATES[c][1], **plan["obfuscator"]})
               for c in plan["candidates"]}
    val_idx = test_indices(split.x_val.shape[0], plan["n_val"], ctx.seed)
    test_idx = test_indices(ds.x_test.shape[0], plan["n_test"], ctx.seed)
    config = {
        "validation_split": {k: v for k, v in rec.items() if k != "fit_fingerprint"},
        "candidates": {c: {"checkpoint": CANDIDATES[c][0], "recipe": recipes[c].to_json()} for c in recipes},
        "schedules": [list(s) for s in plan["schedules"]],
        "select_epsilons_total": list(SELECT_EPSILONS),
        "test_epsilons_total": list(EPSILONS_TOTAL),
        "criterion": CRITERION,
        "n_val": len(val_idx),
        "n_test": len(test_idx),
        "draws_test": plan["draws"],
        "recipes": {"embedder": emb_recipe.to_json(), "classifier": clf_default.to_json()},
    }
    table = ctx.table("select-global", columns=COLUMNS, key=KEY, config=config)
    tag = f"global-{ctx.mode}-seed{ctx.seed}-{rec['held_out_sha256'][:8]}"
    run_dir = select_cache_root() / ctx.dataset / tag
    base = f"python -m privcore experiment select-global --dataset {ctx.dataset}"
    train = {"seed": ctx.seed, "device": ctx.device, "progress": ctx.show_progress}
    emb_stem = run_dir / "embedder" / ctx.dataset / "embedder"
    x_val, y_val = split.x_val[val_idx], split.y_val[val_idx].numpy()
    notes: dict[str, Any] = {"cache_dir": str(run_dir), "candidates": {}}
    frame = table.frame() if table.n_rows else None

    def obf_stem(c: str) -> Path:
        return run_dir / c.replace(",", "-").replace("=", "") / ctx.dataset / f"obfuscator-{CANDIDATES[c][0]}"

    def build(c: str) -> Any:
        ensure_embedder(fit, emb_recipe, emb_stem, command=f"{base} (embedder on the fit part)", **train)
        stem = obf_stem(c)
        ensure_obfuscator(fit, recipes[c], embedder=emb_stem, stem=stem, command=f"{base} (candidate {c})",
                          **train)
        ensure_delta_p(stem, n=plan["delta_p_n"], seed=ctx.seed, workers=ctx.workers, executor=ctx.executor,
                       progress=ctx.show_progress, command=f"{base} (Δp of candidate {c})")
        if not read_card(stem).get("global_lipschitz"):
            # box from the fit embeddings; G computed here
            write_global_constant(stem, time_limit=plan["global_time_limit"])
        name = CANDIDATES[c][0]
        ensure_classifier(stem, clf_default, stem.with_name(f"classifier-{name}"),
                          command=f"{base} (classifier of candidate {c})", **train)
        card = read_card(stem)
        notes["candidates"][c] = {
            "obfuscator_sha256": card["weights"]["sha256"], "delta_p": card["delta_p"]["proposed"],
            "global_lipschitz": card["global_lipschitz"]["value"], "train_seconds": card.get("train_seconds"),
            "validation_accuracy_no_noise": card["metrics"]["test_accuracy"],
        }
        return load_pipeline(ctx.dataset, name, models_dir=stem.parent.parent, device=ctx.torch_device())

    def score(pipe: Any, key: str) -> list[dict[str, Any]]:
        return _score(ctx, pipe, x_val, y_val, epsilons=SELECT_EPSILONS, draws=1, split="validation",
                      seed_key=key)

    # (A) obfuscator, on validation
    chosen = _selected(frame, "obfuscator")
    if chosen is None:
        scored = [(c, score(build(c), c)) for c in plan["candidates"]]
        cand = _pick(scored)
        for c, rows in scored:
            _add(table, rows, choice="obfuscator", candidate=c, obfuscator=CANDIDATES[c][0],
                 classifier_epochs=clf_default.epochs, classifier_schedule=clf_default.lr_schedule,
                 selected=c == cand)
    else:
        cand = str(chosen["candidate"])
    pipe, stem = build(cand), obf_stem(cand)
    name = CANDIDATES[cand][0]

    # (B) release-classifier schedule for the selected obfuscator, same validation noise seeds
    def clf_stem(s: tuple[int, str]) -> tuple[Path, Any]:
        recipe = dataclasses.replace(clf_default, epochs=s[0], lr_schedule=s[1])
        cname = f"classifier-{name}" if recipe == clf_default else f"classifier-{name}-e{s[0]}-{s[1]}"
        return stem.with_name(cname), recipe

    chosen = _selected(frame, "classifier_schedule")
    if chosen is None:
        scored = []
        for s in plan["schedules"]:
            cstem, recipe = clf_stem(s)
            ensure_classifier(stem, recipe, cstem, command=f"{base} (schedule {s[0]},{s[1]})", **train)
            scored.append((s, score(_with_classifier(pipe, cstem), cand)))
        schedule = _pick(scored)
        for s, rows in scored:
            _add(table, rows, choice="classifier_schedule", candidate=f"epochs={s[0]},{s[1]}",
                 obfuscator=name, classifier_epochs=s[0], classifier_schedule=s[1], selected=s == schedule)
    else:
        schedule = (int(chosen["classifier_epochs"]), str(chosen["classifier_schedule"]))
    cstem, recipe = clf_stem(schedule)
    ensure_classifier(stem, recipe, cstem, command=f"{base} (schedule {schedule[0]},{schedule[1]})", **train)
    final = _with_classifier(pipe, cstem)

    # the one read of the test set
    final_name = f"{cand},epochs={schedule[0]},{schedule[1]}"
    if not table.done(choice="final", candidate=final_name, split="test", epsilon_total=EPSILONS_TOTAL[-1]):
        x_test, y_test = ds.x_test[test_idx], ds.y_test[test_idx].numpy()
        rows = _score(ctx, final, x_test, y_test, epsilons=EPSILONS_TOTAL, draws=plan["draws"], split="test",
                      seed_key="final")
        _add(table, rows, choice="final", candidate=final_name, obfuscator=name,
             classifier_epochs=schedule[0], classifier_schedule=schedule[1], selected=True)
    notes.update({
        "selected": {"candidate": cand, "classifier_epochs": schedule[0], "classifier_schedule": schedule[1]},
        "final_checkpoints": {"obfuscator": str(stem), "classifier": str(cstem)},
        "test_set": "read once, for the selected pair only (rows with split = test)",
    })
    out = table.frame()
    return table.finish(figures=save_figure(_figure(out, ctx.dataset), ctx.dataset_dir / "select-global"),
                        notes=notes)


def _figure(frame: Any, dataset: str) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    titles = ("A: obfuscator (validation)", "B: schedule (validation)", "selected (test)")
    fig = make_subplots(rows=1, cols=3, subplot_titles=titles, shared_yaxes=True)
    for col, choice in enumerate(("obfuscator", "classifier_schedule", "final"), start=1):
        for cand, part in frame[frame["choice"] == choice].groupby("candidate", sort=False):
            part = part.sort_values("epsilon_total")
            sel = str(part["selected"].iloc[0]) == "True"
            n = int(part["n"].iloc[0])
            fig.add_trace(go.Scatter(
                x=part["epsilon_total"], y=part["accuracy"], mode="lines+markers",
                name=f"{cand}{' *' if sel else ''} (n={n})", line={"width": 3 if sel else 1},
                error_y={"type": "data", "symmetric": False, "array": part["high"] - part["accuracy"],
                         "arrayminus": part["accuracy"] - part["low"]},
            ), row=1, col=col)
    fig.update_xaxes(title_text="total ε of the release, (ε, 0, R)", type="log")
    fig.update_yaxes(title_text="accuracy (95 % bootstrap interval)", row=1, col=1)
    fig.update_layout(title=f"Global mechanism, validation-only selection ({dataset}; * = selected)",
                      template="plotly_white", height=430, width=1300)
    return fig
