"""``experiment select-frontier``: obfuscators for the certified global mechanism at a low total ε,
chosen on a validation split, then one read of the test set.

The global release is f(clip z) + Lap(G·R/ε) per output coordinate, G the certified ∞→1 constant of
f over the public box (:mod:`privcore.mechanisms.global_mechanism`). What the release keeps is the
class separation of f relative to G·R/ε; ``experiment ceiling`` bounds it for any f. Stated before
any candidate is trained (:data:`GRIDS`, :data:`CRITERION`):

1. The split of ``experiment select`` (:func:`privcore.data.validation_split`, the dataset's own
   fixed split where it has one). The embedder (:data:`EMBEDDERS`: the one ``train global-model``
   trains), each obfuscator, its Δp (exact, over 100 fit embeddings), its clipping box and G
   (certified by this process, :func:`privcore.train.global_card.write_global_constant`) and its
   release classifier are trained or computed on the fit part only.
2. One obfuscator per candidate (:data:`GRIDS`: name, target ε, output dimension, recipe overrides),
   each the recipe of ``train global-model --name NAME --target-epsilon T --out-dim K`` with those
   overrides: trained with the global mechanism's own noise Ĝ·R/ε, ε from (T, 2T), Ĝ sampled over the
   box or (``noise_bound="layers"``) the layer-wise upper bound on ‖J_f‖∞→1. The grid varies the
   training ε (the shipped ``N-global`` trains at 10), the output dimension (the ∞→1 norm pays for
   every output coordinate), the hidden widths, how Ĝ is obtained, and the ARL term. Every candidate
   gives the same formal guarantee (ε, 0, R).
3. Each is scored on the validation images by the global mechanism at every total ε of
   :data:`VALIDATION_EPSILONS` (1 is the dashboard's opening ε), :data:`VALIDATION_DRAWS` noise draws
   per image; :data:`CRITERION` picks one.
4. The selected candidate is evaluated once on the full test set at :data:`TEST_EPSILONS`.

Rows carry n, draws and a 95 % percentile-bootstrap interval over images (as ``table1-global``).
Checkpoints go to ``select_cache_root()/<dataset>/frontier-…``. Not part of ``all`` (it trains models).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from privcore.experiments.ptr_common import test_indices
from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.select import VALIDATION_FRACTION, _selected
from privcore.experiments.select_global import _add as _add_rows
from privcore.experiments.select_global import _score
from privcore.train.ensure import (
    ensure_classifier,
    ensure_delta_p,
    ensure_embedder,
    ensure_obfuscator,
    select_cache_root,
)

__all__ = ["CANDIDATES", "COLUMNS", "CRITERION", "EMBEDDERS", "GRIDS", "KEY", "TEST_EPSILONS",
           "VALIDATION_DRAWS", "VALIDATION_EPSILONS", "build_candidate", "grid", "obfuscator_stem", "run",
           "ship_command"]

COLUMNS = (
    "dataset",
    "choice",
    "candidate",
    "target_epsilon",
    "out_dim",
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
#: one candidate: (target total ε, output dimension, further recipe overrides)
Candidate = tuple[float, int, dict[str, Any]]
#: MNIST's candidates in grid order: checkpoint name → candidate; the first is the shipped default's
#: recipe, the others the training ε, output dimension and ARL term at a low ε
CANDIDATES: dict[str, Candidate] = {
    "N-global": (10.0, 8, {}),
    "N-global-e2": (2.0, 8, {}),
    "N-global-e2o4": (2.0, 4, {}),
    "N-global-e2o2": (2.0, 2, {}),
    "ARL-N-global-e2": (2.0, 8, {}),
    "N-global-e1": (1.0, 8, {}),
    "N-global-e1o4": (1.0, 4, {}),
}
_WIDE: dict[str, Any] = {"obfuscator_hidden": (32, 32)}
#: per dataset, its grid (:data:`CANDIDATES` where none is named). Fashion-MNIST: the recipe
#: ``select-global`` selected (sampled Ĝ over the box, training ε (2, 4)) as the baseline, and hidden
#: widths (32, 32) against (10, 10). Candidates that calibrate Ĝ to the layer-wise bound
#: (``noise_bound="layers"``) are not in it (docs/RESULTS.md, "The low-ε frontier on Fashion-MNIST")
GRIDS: dict[str, dict[str, Candidate]] = {
    "mnist": CANDIDATES,
    "fashion-mnist": {
        "N-global-e2": (2.0, 8, {}),
        "N-global-e2w": (2.0, 8, _WIDE),
    },
}
#: per dataset, (embedder checkpoint name, embedder recipe overrides): MNIST ``train global-model``'s
#: defaults; Fashion-MNIST the shipped unsupervised recipe, trained on the fit part (``embedder-fit``)
EMBEDDERS: dict[str, tuple[str, dict[str, Any]]] = {
    "mnist": ("embedder-label", {"arch": "conv", "width": 32, "hidden": 256, "augment_shift": 2,
                                 "label_weight": 10.0}),
    "fashion-mnist": ("embedder-fit", {}),
}
KEY = ("choice", "candidate", "split", "epsilon_total")
VALIDATION_EPSILONS = (1.0, 2.0, 4.0, 10.0)
VALIDATION_DRAWS = 3
TEST_EPSILONS = (1.0, 2.0, 4.0, 10.0, 20.0)
CRITERION = (
    "highest validation accuracy at total epsilon = 2 under the global mechanism; ties: higher "
    "validation accuracy at total epsilon = 4, then the earlier candidate in grid order"
)


def grid(dataset: str) -> dict[str, Candidate]:
    """The candidate grid of ``dataset`` (:data:`GRIDS`, else :data:`CANDIDATES`)."""
    return GRIDS.get(dataset, CANDIDATES)


def _plan(ctx: RunContext) -> dict[str, Any]:
    tiny = ctx.mode == "tiny"
    names = tuple(grid(ctx.dataset))
    return {
        "candidates": ctx.pick(full=names, quick=names[:3],
                               tiny=(names[0], names[3] if ctx.dataset not in GRIDS else names[-1])),
        "n_val": ctx.pick(full=None, quick=1000, tiny=8),
        "n_test": ctx.n_test(full=None, quick=1000, tiny=6),
        "draws": ctx.pick(full=VALIDATION_DRAWS, quick=1, tiny=1),
        "delta_p_n": ctx.pick(full=100, quick=100, tiny=3),
        "global_time_limit": ctx.pick(full=60.0, quick=60.0, tiny=1.0),
        "short": {"epochs": 1, "batch_size": 512} if tiny else {},
        "obfuscator": {"warmup_epochs": 0, "epochs": 1, "classifier_refit_epochs": 1, "batch_size": 512}
        if tiny else {},
    }


def _pick(scored: list[tuple[str, list[dict[str, Any]]]]) -> str:
    """The candidate :data:`CRITERION` selects (``scored``: (candidate, rows) in grid order)."""
    def key(i: int) -> tuple[float, ...]:
        acc = {r["epsilon_total"]: r["accuracy"] for r in scored[i][1]}
        return (acc[2.0], acc[4.0], -i)

    return scored[max(range(len(scored)), key=key)][0]


def _recipes(ctx: RunContext, plan: dict[str, Any]) -> tuple[str, Any, dict[str, Any], Any]:
    from privcore.train.recipes import embedder_recipe, global_obfuscator_recipe, release_classifier_recipe

    emb_name, emb_over = EMBEDDERS.get(ctx.dataset, ("embedder", {}))
    short = plan["short"]
    emb = embedder_recipe(ctx.dataset, **emb_over, **({**short, "kl_warmup_epochs": 0} if short else {}))
    cands = grid(ctx.dataset)
    obf = {c: global_obfuscator_recipe(ctx.dataset, c, target_epsilon=cands[c][0], out_dim=cands[c][1],
                                       **{**cands[c][2], **plan["obfuscator"]})
           for c in plan["candidates"]}
    return emb_name, emb, obf, release_classifier_recipe(ctx.dataset, **short)


def run(ctx: RunContext) -> Any:
    """Validation-only choice of a low-ε obfuscator for the global mechanism, then one test read."""
    from privcore.data import load_dataset, validation_split

    plan = _plan(ctx)
    ds = load_dataset(ctx.dataset)
    split = validation_split(ds, fraction=VALIDATION_FRACTION, seed=ctx.seed)
    rec = split.record()
    fit = split.dataset
    emb_name, emb_recipe, recipes, clf_recipe = _recipes(ctx, plan)
    cands = grid(ctx.dataset)
    val_idx = test_indices(split.x_val.shape[0], plan["n_val"], ctx.seed)
    test_idx = test_indices(ds.x_test.shape[0], plan["n_test"], ctx.seed)
    config = {
        "validation_split": {k: v for k, v in rec.items() if k != "fit_fingerprint"},
        "candidates": {c: {"target_epsilon": cands[c][0], "out_dim": cands[c][1],
                           "recipe": recipes[c].to_json()} for c in recipes},
        "validation_epsilons_total": list(VALIDATION_EPSILONS),
        "test_epsilons_total": list(TEST_EPSILONS),
        "criterion": CRITERION,
        "n_val": len(val_idx),
        "n_test": len(test_idx),
        "draws": plan["draws"],
        "recipes": {"embedder": emb_recipe.to_json(), "classifier": clf_recipe.to_json()},
    }
    table = ctx.table("select-frontier", columns=COLUMNS, key=KEY, config=config)
    tag = f"frontier-{ctx.mode}-seed{ctx.seed}-{rec['held_out_sha256'][:8]}"
    run_dir = select_cache_root() / ctx.dataset / tag
    base = f"python -m privcore experiment select-frontier --dataset {ctx.dataset}"
    train = {"seed": ctx.seed, "device": ctx.device, "progress": ctx.show_progress}
    emb_stem = run_dir / "embedder" / ctx.dataset / emb_name
    notes: dict[str, Any] = {"cache_dir": str(run_dir), "candidates": {}}

    def build(c: str) -> Any:
        stem = obfuscator_stem(run_dir, ctx.dataset, c)
        return build_candidate(ctx, plan, fit=fit, emb_recipe=emb_recipe, emb_stem=emb_stem,
                               recipe=recipes[c], clf_recipe=clf_recipe, stem=stem, base=base,
                               notes=notes["candidates"], train=train)

    frame = table.frame() if table.n_rows else None
    chosen = _selected(frame, "obfuscator")
    if chosen is None:
        x_val, y_val = split.x_val[val_idx], split.y_val[val_idx].numpy()
        scored = [(c, _score(ctx, build(c), x_val, y_val, epsilons=VALIDATION_EPSILONS, draws=plan["draws"],
                             split="validation", seed_key=c)) for c in plan["candidates"]]
        cand = _pick(scored)
        for c, rows in scored:
            _add_rows(table, rows, choice="obfuscator", candidate=c, target_epsilon=cands[c][0],
                      out_dim=cands[c][1], selected=c == cand)
    else:
        cand = str(chosen["candidate"])
    final = build(cand)
    if not table.done(choice="final", candidate=cand, split="test", epsilon_total=TEST_EPSILONS[-1]):
        x_test, y_test = ds.x_test[test_idx], ds.y_test[test_idx].numpy()
        rows = _score(ctx, final, x_test, y_test, epsilons=TEST_EPSILONS, draws=plan["draws"], split="test",
                      seed_key="final")
        _add_rows(table, rows, choice="final", candidate=cand, target_epsilon=cands[cand][0],
                  out_dim=cands[cand][1], selected=True)
    notes.update({
        "selected": cand,
        "ship": ship_command(ctx.dataset, cand),
        "final_checkpoint": str(obfuscator_stem(run_dir, ctx.dataset, cand)),
        "test_set": "read once, for the selected candidate only (rows with split = test)",
    })
    figures = save_figure(_figure(table.frame(), ctx.dataset), ctx.dataset_dir / "select-frontier")
    return table.finish(figures=figures, notes=notes)


def build_candidate(ctx: RunContext, plan: dict[str, Any], *, fit: Any, emb_recipe: Any, emb_stem: Path,
                    recipe: Any, clf_recipe: Any, stem: Path, base: str, notes: dict[str, Any],
                    train: dict[str, Any]) -> Any:
    """Candidate ``recipe``'s pipeline at ``stem``, trained on the fit part ``fit`` where the cache lacks
    it: the embedder, the obfuscator, its Δp, its G (certified by this process) and its release
    classifier; its summary goes to ``notes[name]``."""
    from privcore.models.pipeline import load_pipeline
    from privcore.nets.checkpoint import read_card
    from privcore.train.global_card import write_global_constant

    c = recipe.name
    ensure_embedder(fit, emb_recipe, emb_stem, command=f"{base} (embedder on the fit part)", **train)
    ensure_obfuscator(fit, recipe, embedder=emb_stem, stem=stem, command=f"{base} (candidate {c})", **train)
    ensure_delta_p(stem, n=plan["delta_p_n"], seed=ctx.seed, workers=ctx.workers, executor=ctx.executor,
                   progress=ctx.show_progress, command=f"{base} (Δp of candidate {c})",
                   time_limit=plan.get("delta_p_time_limit"))
    if not read_card(stem).get("global_lipschitz"):
        write_global_constant(stem, time_limit=plan["global_time_limit"])  # G computed here
    ensure_classifier(stem, clf_recipe, stem.with_name(f"classifier-{c}"),
                      command=f"{base} (classifier of candidate {c})", **train)
    card, clf = read_card(stem), read_card(stem.with_name(f"classifier-{c}"))
    notes[c] = {
        "obfuscator_sha256": card["weights"]["sha256"],
        "global_lipschitz": card["global_lipschitz"]["value"], "train_seconds": card.get("train_seconds"),
        "validation_accuracy_no_noise": clf["metrics"]["test_accuracy"],
    }
    return load_pipeline(ctx.dataset, c, models_dir=stem.parent.parent, device=ctx.torch_device())


def ship_command(dataset: str, candidate: str) -> str:
    """The ``train global-model`` command line that trains ``candidate``'s recipe on ``dataset``'s
    embedder of :data:`EMBEDDERS` (the run's own checkpoints when seed and inputs agree)."""
    target, out_dim, over = grid(dataset)[candidate]
    emb_name, emb_over = EMBEDDERS.get(dataset, ("embedder", {}))
    flags = [f"--embedder-name {emb_name}"]
    if not emb_over:  # the dataset's unsupervised recipe, not train global-model's label-aware one
        from privcore.train.recipes import embedder_recipe

        rec = embedder_recipe(dataset)
        flags.append(f"--label-weight {rec.label_weight:g} --augment-shift {rec.augment_shift} "
                     f"--arch {rec.arch} --width {rec.width} --hidden {rec.hidden}")
    if "obfuscator_hidden" in over:
        flags.append("--obfuscator-hidden " + ",".join(str(w) for w in over["obfuscator_hidden"]))
    if over.get("noise_bound", "sampled") != "sampled":
        flags.append(f"--noise-bound {over['noise_bound']}")
    return (f"python -m privcore train global-model --dataset {dataset} --name {candidate} "
            f"{' '.join(flags)} --target-epsilon {target:g} --out-dim {out_dim} --device cpu --threads 1")


def obfuscator_stem(run_dir: Path, dataset: str, candidate: str) -> Path:
    """Where candidate ``candidate``'s obfuscator lives in the run's cache (its own folder, with the
    embedder copied beside it)."""
    return run_dir / candidate / dataset / f"obfuscator-{candidate}"


def _figure(frame: Any, dataset: str) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("candidates (validation)", "selected (test)"),
                        shared_yaxes=True)
    for col, choice in enumerate(("obfuscator", "final"), start=1):
        for cand, part in frame[frame["choice"] == choice].groupby("candidate", sort=False):
            part = part.sort_values("epsilon_total")
            sel = str(part["selected"].iloc[0]) == "True"
            fig.add_trace(go.Scatter(
                x=part["epsilon_total"], y=part["accuracy"], mode="lines+markers",
                name=f"{cand}{' *' if sel else ''} (n={int(part['n'].iloc[0])})",
                line={"width": 3 if sel else 1},
                error_y={"type": "data", "symmetric": False, "array": part["high"] - part["accuracy"],
                         "arrayminus": part["accuracy"] - part["low"]},
            ), row=1, col=col)
    fig.update_xaxes(title_text="total ε of the release, (ε, 0, R)", type="log")
    fig.update_yaxes(title_text="accuracy (95 % bootstrap interval)", row=1, col=1)
    fig.update_layout(title=f"Global mechanism at low ε, validation-only selection ({dataset}; * = selected)",
                      template="plotly_white", height=430, width=1100)
    return fig
