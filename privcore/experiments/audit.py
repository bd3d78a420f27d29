"""``experiment audit``: empirical lower bounds on ε for every mechanism (Jagielski et al. 2020 style).

For each mechanism we pick the pair of inputs its proof treats as worst case, draw many seeded
releases of each, and bound ε from below at 95 % confidence with threshold tests
(:mod:`privcore.attacks.audit`). A bound above the claimed ε would refute the implementation;
deliberately mis-calibrated controls (half the noise) show that the audit has the power to.
The pairs, worst case and through the shipped models, are :mod:`privcore.experiments.audit_pairs`'.
"""

from __future__ import annotations

import math
from typing import Any

from privcore.attacks.audit import AuditResult, audit_pair
from privcore.defaults import OPENING_EPSILON
from privcore.experiments.audit_pairs import model_audits, worst_case_audits
from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.seeds import row_seed

__all__ = ["COLUMNS", "run"]

COLUMNS = (
    "dataset",
    "mechanism",
    "pair",
    "epsilon_claimed",
    "delta_claimed",
    "distance",
    "n_releases",
    "epsilon_lb",
    "epsilon_lb_point",
    "threshold",
    "fpr",
    "fnr",
    "confidence",
    "passed",
    "control",
    "seed",
)
KEY = ("mechanism", "pair", "epsilon_claimed")

def _figure(frame: Any, dataset: str) -> Any:
    import plotly.graph_objects as go

    labels = [
        f"{m} ε={e:g}" + (" (model)" if p == "model" else "")
        for m, e, p in zip(frame["mechanism"], frame["epsilon_claimed"], frame["pair"], strict=True)
    ]
    colours = ["#d62728" if c else "#1f77b4" for c in frame["control"]]
    fig = go.Figure()
    fig.add_bar(x=labels, y=frame["epsilon_lb"], marker_color=colours, name="ε lower bound (95 %)")
    fig.add_scatter(
        x=labels,
        y=frame["epsilon_claimed"],
        mode="markers",
        marker_symbol="line-ew-open",
        marker_size=28,
        marker_line_width=3,
        marker_color="black",
        name="claimed ε",
    )
    fig.update_layout(
        title=f"Empirical privacy audit ({dataset}): ε lower bounds vs claims (red: half-noise controls)",
        yaxis_title="ε",
        xaxis_tickangle=-40,
        template="plotly_white",
        height=520,
    )
    return fig


def _dataset_shape(dataset: str) -> tuple[tuple[int, ...], int, int, float]:
    """(image shape, classes, latent dimension, PTR radius) from the registry, without loading data."""
    from privcore.data import get_spec, load_dataset

    spec = get_spec(dataset)
    ds = load_dataset(dataset)
    return tuple(ds.image_shape), ds.num_classes, int(spec.latent_dim), float(spec.radius)


def run(ctx: RunContext) -> Any:
    """Audit every mechanism at its worst-case pair (module docstring); write ``audit.csv`` + figure."""
    image_shape, n_classes, latent_dim, radius = _dataset_shape(ctx.dataset)
    # the full grid reaches the total ε the dashboard opens at, so the opening view has a row at its own ε
    epsilons = ctx.pick(full=tuple(sorted({0.5, 1.0, 2.0, OPENING_EPSILON})), quick=(1.0, 2.0), tiny=(1.0,))
    n_fast = ctx.pick(full=100_000, quick=50_000, tiny=4_000)
    n_ptr = ctx.pick(full=100_000, quick=10_000, tiny=1_000)
    confidence = 0.95
    config = {
        "epsilons": list(epsilons),
        "n_fast": n_fast,
        "n_ptr": n_ptr,
        "confidence": confidence,
        "image_shape": list(image_shape),
        "radius": radius,
    }
    if ctx.mode != "tiny":
        config["model_weights"] = sorted(
            m.card["weights"]["sha256"]
            for m in ctx.model_infos()
            if m.name.startswith("ip-") or m.name == "ARL-C-N"
        )
    table = ctx.table("audit", columns=COLUMNS, key=KEY, config=config)
    cases = worst_case_audits(
        epsilons=epsilons,
        n_fast=n_fast,
        n_ptr=n_ptr,
        image_shape=image_shape,
        n_classes=n_classes,
        latent_dim=latent_dim,
        radius=radius,
    )
    skipped = ""
    if ctx.mode != "tiny":
        model_cases, skipped = model_audits(ctx, epsilon=1.0, n_fast=n_fast, n_ptr=n_ptr)
        cases += model_cases
    with ctx.progress("audit") as progress:
        for i, case in enumerate(cases):
            progress(i, len(cases), case.mechanism)
            if table.done(mechanism=case.mechanism, pair=case.pair, epsilon_claimed=case.epsilon_claimed):
                continue
            seed = row_seed(ctx.seed, "audit", case.mechanism, case.pair, case.epsilon_claimed)
            res: AuditResult = audit_pair(
                case.draw_a,
                case.draw_b,
                statistic=case.statistic,
                n_releases=case.n_releases,
                delta=case.delta_claimed,
                confidence=confidence,
                seed=seed,
            )
            table.add(
                {
                    "dataset": ctx.dataset,
                    "mechanism": case.mechanism,
                    "pair": case.pair,
                    "epsilon_claimed": case.epsilon_claimed,
                    "delta_claimed": case.delta_claimed,
                    "distance": case.distance,
                    "n_releases": res.n_releases,
                    "epsilon_lb": res.epsilon_lb,
                    "epsilon_lb_point": res.epsilon_lb_point,
                    "threshold": res.threshold,
                    "fpr": res.fpr,
                    "fnr": res.fnr,
                    "confidence": confidence,
                    "passed": res.passes(case.epsilon_claimed),
                    "control": case.control,
                    "seed": seed,
                }
            )
        progress(len(cases), len(cases), "done")
    frame = table.frame()
    figures = save_figure(_figure(frame, ctx.dataset), ctx.dataset_dir / "audit")
    bad = frame[(~frame["control"]) & (~frame["passed"])]
    notes = {
        "refuted_claims": bad["mechanism"].tolist(),
        "controls_caught": int((~frame[frame["control"]]["passed"]).sum()),
    }
    if skipped:
        notes["model_pairs"] = skipped
    if not math.isfinite(float(frame["epsilon_lb"].max())):
        notes["warning"] = "an infinite lower bound: check the statistic"
    return table.finish(figures=figures, notes=notes)
