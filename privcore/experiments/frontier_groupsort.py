"""``experiment frontier-groupsort``: GroupSort obfuscators for the certified global mechanism at total
ε = 2, a candidate family beside ``select-frontier``'s grid, chosen on the same validation split.

The global release f(clip z) + Lap(G·R/ε) pays G, the ∞→1 constant of f over the public box. GroupSort
(MaxMin) networks keep gradient norms where ReLU halves them and, with ∞-norm-bounded weights, approximate
every ℓ∞-Lipschitz scalar function (Anil, Lucas & Grosse 2019, Thm. 3): Lipschitz by construction in the
mechanism's input norm. Stated before any candidate is trained (``FAMILIES``, :data:`BAR`):

1. The split, the embedder (``select_frontier.EMBEDDERS``, in the same cache folder) and every other
   step of ``select-frontier`` (:func:`~privcore.experiments.select_frontier.build_candidate`): Δp
   (the release classifier's scale unit here, not a privacy parameter; 30 s per point, so the
   Certifier runs its portfolio, and a point that runs out keeps its certified upper bound, counted
   on the card), the box, G certified by this process from the baked ReLU form, the default release
   classifier.
2. The family (``groupsort_family.FAMILIES``), all at training ε (2, 4) and output dimension 2, the
   recipe of the selected ``N-global-e2o2`` otherwise: MaxMin in place of ReLU with hidden widths (16, 16) or
   (32, 32), trained against the sampled Ĝ; and (16, 16) with ∞-normalised weights, trained against
   the construction's certified bound Π‖Ŵ_l‖∞→∞·‖Ŵ_L‖∞→1 = 1 instead of a sample
   (:mod:`privcore.nets.groupsort`).
3. Scored on the validation images at ``select_frontier.VALIDATION_EPSILONS``, 3 draws per image; the
   family's best by ``select_frontier.CRITERION``.
4. The test set is read once, for that candidate, only if its validation accuracy at total ε = 2
   exceeds :data:`BAR`: the validation accuracy of the candidate ``select-frontier`` selected, read
   from its committed table (a science threshold, never a privacy decision).
"""

from __future__ import annotations

from typing import Any

from privcore.experiments.groupsort_family import FAMILIES, family
from privcore.experiments.ptr_common import test_indices
from privcore.experiments.runner import RunContext
from privcore.experiments.select import VALIDATION_FRACTION
from privcore.experiments.select_frontier import (
    COLUMNS,
    CRITERION,
    EMBEDDERS,
    KEY,
    TEST_EPSILONS,
    VALIDATION_DRAWS,
    VALIDATION_EPSILONS,
    build_candidate,
    obfuscator_stem,
)
from privcore.experiments.select_global import _add as _add_rows
from privcore.experiments.select_global import _score
from privcore.train.ensure import select_cache_root

__all__ = ["BAR", "FAMILIES", "bar", "family", "run"]

BAR = ("the validation accuracy at total epsilon = 2 of the candidate select-frontier selected "
       "(select-frontier.csv, choice obfuscator, selected); the test set is read only above it")


def bar(frame: Any) -> tuple[str, float] | None:
    """(candidate, validation accuracy at total ε = 2) of ``select-frontier``'s selection in its table
    ``frame``; None when the table has no selection."""
    if frame is None or frame.empty:
        return None
    part = frame[(frame["choice"] == "obfuscator") & (frame["selected"].astype(str) == "True")
                 & (frame["split"] == "validation") & (frame["epsilon_total"].astype(float) == 2.0)]
    return None if part.empty else (str(part["candidate"].iloc[0]), float(part["accuracy"].iloc[0]))


def _pick(scored: list[tuple[str, list[dict[str, Any]]]]) -> str:
    def key(i: int) -> tuple[float, ...]:
        acc = {r["epsilon_total"]: r["accuracy"] for r in scored[i][1]}
        return (acc[2.0], acc[4.0], -i)

    return scored[max(range(len(scored)), key=key)][0]


def _plan(ctx: RunContext) -> dict[str, Any]:
    names = tuple(family(ctx.dataset))
    tiny = ctx.mode == "tiny"
    return {
        "candidates": ctx.pick(full=names, quick=names, tiny=(names[-1],)),
        "n_val": ctx.pick(full=None, quick=1000, tiny=8),
        "n_test": ctx.n_test(full=None, quick=1000, tiny=6),
        "draws": ctx.pick(full=VALIDATION_DRAWS, quick=1, tiny=1),
        "delta_p_n": ctx.pick(full=100, quick=100, tiny=3),
        # per point: with a limit the Certifier runs its portfolio (the plain exact search took minutes
        # at single points of the (32, 32) MaxMin net)
        "delta_p_time_limit": 30.0,
        "global_time_limit": ctx.pick(full=60.0, quick=60.0, tiny=1.0),
        "short": {"epochs": 1, "batch_size": 512} if tiny else {},
        "obfuscator": {"warmup_epochs": 0, "epochs": 1, "classifier_refit_epochs": 1, "batch_size": 512}
        if tiny else {},
    }


def run(ctx: RunContext) -> Any:
    """Validation scores of the GroupSort family; one test read only for a candidate above :data:`BAR`."""
    import pandas as pd

    from privcore.data import load_dataset, validation_split
    from privcore.train.recipes import embedder_recipe, global_obfuscator_recipe, release_classifier_recipe

    plan = _plan(ctx)
    ds = load_dataset(ctx.dataset)
    split = validation_split(ds, fraction=VALIDATION_FRACTION, seed=ctx.seed)
    rec = split.record()
    fam = family(ctx.dataset)
    emb_name, emb_over = EMBEDDERS.get(ctx.dataset, ("embedder", {}))
    short = plan["short"]
    emb_recipe = embedder_recipe(ctx.dataset, **emb_over,
                                 **({**short, "kl_warmup_epochs": 0} if short else {}))
    recipes = {c: global_obfuscator_recipe(ctx.dataset, c, target_epsilon=fam[c][0], out_dim=fam[c][1],
                                           **{**fam[c][2], **plan["obfuscator"]}) for c in plan["candidates"]}
    clf_recipe = release_classifier_recipe(ctx.dataset, **short)
    frontier_csv = ctx.dataset_dir / "select-frontier.csv"
    reference = bar(pd.read_csv(frontier_csv)) if frontier_csv.is_file() else None
    config = {
        "validation_split": {k: v for k, v in rec.items() if k != "fit_fingerprint"},
        "candidates": {c: {"target_epsilon": fam[c][0], "out_dim": fam[c][1], "recipe": recipes[c].to_json()}
                       for c in recipes},
        "validation_epsilons_total": list(VALIDATION_EPSILONS), "test_epsilons_total": list(TEST_EPSILONS),
        "criterion": CRITERION, "bar": BAR, "n_val": plan["n_val"], "n_test": plan["n_test"],
        "draws": plan["draws"],
        "recipes": {"embedder": emb_recipe.to_json(), "classifier": clf_recipe.to_json()},
    }
    table = ctx.table("frontier-groupsort", columns=COLUMNS, key=KEY, config=config)
    tag = f"frontier-{ctx.mode}-seed{ctx.seed}-{rec['held_out_sha256'][:8]}"  # select-frontier's folder
    run_dir = select_cache_root() / ctx.dataset / tag
    base = f"python -m privcore experiment frontier-groupsort --dataset {ctx.dataset}"
    train = {"seed": ctx.seed, "device": ctx.device, "progress": ctx.show_progress}
    notes: dict[str, Any] = {"cache_dir": str(run_dir), "candidates": {}, "bar": reference}

    def build(c: str) -> Any:
        return build_candidate(ctx, plan, fit=split.dataset, emb_recipe=emb_recipe,
                               emb_stem=run_dir / "embedder" / ctx.dataset / emb_name, recipe=recipes[c],
                               clf_recipe=clf_recipe, stem=obfuscator_stem(run_dir, ctx.dataset, c),
                               base=base, notes=notes["candidates"], train=train)

    val_idx = test_indices(split.x_val.shape[0], plan["n_val"], ctx.seed)
    x_val, y_val = split.x_val[val_idx], split.y_val[val_idx].numpy()
    scored = []
    for c in plan["candidates"]:
        last = VALIDATION_EPSILONS[-1]
        if not table.done(choice="family", candidate=c, split="validation", epsilon_total=last):
            rows = _score(ctx, build(c), x_val, y_val, epsilons=VALIDATION_EPSILONS, draws=plan["draws"],
                          split="validation", seed_key=c)
            _add_rows(table, rows, choice="family", candidate=c, target_epsilon=fam[c][0], out_dim=fam[c][1],
                      selected=False)
        part = table.frame()
        part = part[(part["choice"] == "family") & (part["candidate"] == c)]
        scored.append((c, part.to_dict("records")))
    cand = _pick(scored)
    best = {r["epsilon_total"]: r["accuracy"] for r in dict(scored)[cand]}[2.0]
    notes.update({"best": cand, "best_validation_accuracy_e2": best})
    if reference is not None and best > reference[1]:
        test_idx = test_indices(ds.x_test.shape[0], plan["n_test"], ctx.seed)
        if not table.done(choice="final", candidate=cand, split="test", epsilon_total=TEST_EPSILONS[-1]):
            rows = _score(ctx, build(cand), ds.x_test[test_idx], ds.y_test[test_idx].numpy(),
                          epsilons=TEST_EPSILONS, draws=plan["draws"], split="test", seed_key="final")
            _add_rows(table, rows, choice="final", candidate=cand, target_epsilon=fam[cand][0],
                      out_dim=fam[cand][1], selected=True)
        notes["test_set"] = f"read once, for {cand} (above the bar {reference[1]:.3f} of {reference[0]})"
    else:
        notes["test_set"] = (f"not read: the family's best {cand} ({best:.3f} on validation at total ε = 2) "
                             f"is not above the bar {reference}")
    return table.finish(notes=notes)
