"""``experiment fig2``: posthoc paper Fig. 2 — local Lipschitz constant against the ARL weight α.

For every shipped obfuscator with a known ARL weight (the α-sweep checkpoints ``ARL-alpha<α>``,
plus ``Encoder`` as α = 0 and ``ARL`` as α = 0.99 when the sweep lacks those values), certify
L(f, B∞(z, r)) (ℓ∞ → ℓ1; the certifier chosen with ``--certifier``, exact LipMIP by default) at
test embeddings for five radii r = R·{¼, ½, 1, 2, 4} around the dataset's R. The paper's claim:
higher α → smaller constants and less growth with r. Each cell stores the mean over the
``n_points`` test embeddings with a 95 % percentile-bootstrap interval (``lipschitz_lo``,
``lipschitz_hi``; the same points for every model and radius). Certificates go through the
persistent cache (:func:`privcore.lipschitz.certify_batch`).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from privcore.experiments.ptr_common import embed, test_indices
from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.seeds import row_seed

__all__ = ["COLUMNS", "RADIUS_FACTORS", "run", "sweep_members"]

COLUMNS = (
    "dataset",
    "obfuscator",
    "arl_alpha",
    "radius",
    "lipschitz_mean",
    "lipschitz_std",
    "lipschitz_lo",
    "lipschitz_hi",
    "lipschitz_lower_mean",
    "n_points",
    "n_inexact",
    "certifier",
)
KEY = ("obfuscator", "radius")
RADIUS_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)


def sweep_members(infos: list[Any]) -> list[tuple[str, float]]:
    """(checkpoint name, α) of the obfuscators that belong on Fig. 2's α axis, sorted by α."""
    members: dict[float, str] = {}
    obf = [m for m in infos if m.kind == "obfuscator"]
    for m in obf:
        recipe = m.card.get("recipe", {})
        if recipe.get("sweep"):
            members[float(recipe["alpha"])] = m.name
    for m in obf:
        recipe = m.card.get("recipe", {})
        if m.name in ("Encoder", "ARL") and not recipe.get("sweep"):
            members.setdefault(float(recipe.get("alpha", 0.0)), m.name)
    return sorted(((name, a) for a, name in members.items()), key=lambda t: t[1])


def _figure(frame: Any, dataset: str) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    labels = [f"α = {a:g}" for a in sorted(frame["arl_alpha"].unique())]
    for r, part in frame.groupby("radius"):
        part = part.sort_values("arl_alpha")
        fig.add_bar(
            x=[f"α = {a:g}" for a in part["arl_alpha"]],
            y=part["lipschitz_mean"],
            name=f"r = {r:g}",
            error_y=(
                {
                    "type": "data",
                    "symmetric": False,
                    "array": part["lipschitz_hi"] - part["lipschitz_mean"],
                    "arrayminus": part["lipschitz_mean"] - part["lipschitz_lo"],
                }
                if "lipschitz_lo" in part
                else {"type": "data", "array": part["lipschitz_std"]}
            ),
        )
    fig.update_layout(
        barmode="group",
        title=f"Fig. 2 ({dataset}): local Lipschitz constant vs ARL weight",
        xaxis={"categoryorder": "array", "categoryarray": labels},
        yaxis_title="L(f, B∞(z, r)), ℓ∞→ℓ1 (mean over test points, 95 % bootstrap interval)",
        template="plotly_white",
        height=430,
    )
    return fig


def run(ctx: RunContext) -> Any:
    """Fig. 2 for one dataset; write ``fig2.csv`` + figure."""
    from privcore.data import get_spec, load_dataset
    from privcore.experiments.attack import bootstrap_interval
    from privcore.lipschitz import Certifier, certify_batch

    members = sweep_members(ctx.model_infos())
    if not members:
        raise FileNotFoundError(
            f"no ARL α-sweep obfuscator for {ctx.dataset}: train them with "
            f"`python -m privcore train alpha-sweep --dataset {ctx.dataset}`"
        )
    if ctx.mode == "tiny":
        members = list(dict.fromkeys([members[0], members[-1]]))  # the two extremes of α
    base_r = float(get_spec(ctx.dataset).radius)
    factors = ctx.pick(full=RADIUS_FACTORS, quick=(0.5, 1.0, 2.0), tiny=(0.5, 1.0))
    radii = [base_r * k for k in factors]
    n = ctx.pick(full=100, quick=10, tiny=2)
    ds = load_dataset(ctx.dataset)
    idx = test_indices(ds.x_test.shape[0], n, ctx.seed)
    infos = {m.name: m for m in ctx.model_infos()}
    config = {
        "members": members,
        "radii": radii,
        "n_points": len(idx),
        "certifier": ctx.certifier,
        "weights": {name: infos[name].card["weights"]["sha256"] for name, _ in members},
    }
    table = ctx.table("fig2", columns=COLUMNS, key=KEY, config=config)
    steps = [(name, a, r) for name, a in members for r in radii]
    with ctx.progress("fig2 local Lipschitz") as progress:
        pipe, current = None, None
        for i, (name, alpha, r) in enumerate(steps):
            progress(i, len(steps), f"{name} r={r:g}")
            if table.done(obfuscator=name, radius=r):
                continue
            if current != name:
                pipe, current = ctx.pipeline(name), name
                z = embed(pipe, ds.x_test[idx])
            certs = certify_batch(
                copy.deepcopy(pipe.obfuscator).cpu(),
                z,
                r,
                Certifier(kind=ctx.certifier, time_limit=None, cache=True),
                workers=ctx.workers if len(z) > 32 else 1,
                progress=False,
                executor=ctx.executor,
            )
            upper = np.array([c.upper for c in certs])
            lower = np.array([c.lower for c in certs])
            lo, hi = bootstrap_interval(upper, seed=row_seed(ctx.seed, "fig2", name, r))
            table.add(
                {
                    "dataset": ctx.dataset,
                    "obfuscator": name,
                    "arl_alpha": alpha,
                    "radius": r,
                    "lipschitz_mean": float(upper.mean()),
                    "lipschitz_std": float(upper.std(ddof=1)) if len(upper) > 1 else 0.0,
                    "lipschitz_lo": lo,
                    "lipschitz_hi": hi,
                    "lipschitz_lower_mean": float(lower.mean()),
                    "n_points": len(certs),
                    "n_inexact": sum(not c.exact for c in certs),
                    "certifier": ctx.certifier,
                }
            )
        progress(len(steps), len(steps), "done")
    frame = table.frame()
    return table.finish(figures=save_figure(_figure(frame, ctx.dataset), ctx.dataset_dir / "fig2"))
