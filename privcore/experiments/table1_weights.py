"""``experiment table1-weights``: Table 1's rows at the authors' loss weights, under PTR.

The posthoc paper's App. E gives α = 0.99 and σ = 0.01; the authors' configs use α = 0.9 for ARL
and for Fashion-MNIST's ARL-C, and σ = 0.1 for N (github.com/tremblerz/posthoc_privacy,
``experiment_automation.py`` at 66a8d35: lines 41, 43, 49, 51, 75). This experiment runs
:func:`privcore.experiments.table1.ptr_accuracy_rows`, the same PTR and the same classifier reading as
``table1``, for the shipped obfuscators trained at those weights (:data:`WEIGHTED`: ``ARL-alpha0.9``
is the Fig. 2 sweep member, whose recipe is Table 1's ARL at α = 0.9; ``ARL-C-alpha0.9`` and
``N-paper-sigma0.1`` are ``train obfuscator --alpha 0.9`` / ``--sigma 0.1``), each with Δp and a
release classifier. Its own table, so that a test subsample (``--n-test``) never mixes with
``table1.csv``'s rows; no classifier refit (``accuracy_refit`` empty). ``--obfuscators`` restricts it.
"""

from __future__ import annotations

from typing import Any

from privcore.experiments.ptr_common import test_indices
from privcore.experiments.runner import RunContext
from privcore.experiments.table1 import COLUMNS, EPSILONS, KEY, PARTS, ptr_accuracy_rows

__all__ = ["WEIGHTED", "run"]

#: The Table-1 variants at the authors' weights, by checkpoint name.
WEIGHTED: tuple[str, ...] = ("ARL-alpha0.9", "ARL-C-alpha0.9", "N-paper-sigma0.1")


def _chosen(ctx: RunContext, shipped: set[str]) -> list[str]:
    names = [v for v in WEIGHTED if v in shipped]
    if ctx.options.get("obfuscators"):
        wanted = [v.strip() for v in str(ctx.options["obfuscators"]).split(",") if v.strip()]
        unknown = [v for v in wanted if v not in names]
        if unknown:
            raise ValueError(f"obfuscators {unknown} are not shipped for {ctx.dataset}; have {names}")
        names = [v for v in names if v in wanted]
    return names


def run(ctx: RunContext) -> Any:
    """PTR accuracy of the :data:`WEIGHTED` obfuscators; write ``table1-weights.csv``."""
    from privcore.data import load_dataset

    infos = {m.name: m for m in ctx.model_infos() if m.kind == "obfuscator"}
    variants = _chosen(ctx, set(infos))
    if not variants:
        raise FileNotFoundError(
            f"none of {list(WEIGHTED)} is shipped for {ctx.dataset}: train them with `python -m privcore "
            "train obfuscator --variant ARL-C --alpha 0.9` (and --variant N-paper --sigma 0.1)"
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
        "refit": "none",
    }
    table = ctx.table("table1-weights", columns=COLUMNS, key=KEY, config=config, parts=PARTS)
    x, y = ds.x_test[idx], ds.y_test[idx].numpy()
    for v in variants:
        ptr_accuracy_rows(ctx, ctx.pipeline(v), epsilons=epsilons, x=x, y=y, table=table,
                          key_extra={"obfuscator": v}, seed_key=("table1", v))
    return table.finish()
