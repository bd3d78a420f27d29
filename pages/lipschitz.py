"""Lipschitz: the obfuscator's local Lipschitz constant around the current image against the radius
(certified upper and lower bounds, exact points, Δp, the solver that ran and its time), and the
posthoc Fig. 2 comparison over the ARL weight α. Widgets and layout only."""

from __future__ import annotations

import html
import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from privcore.errors import CertificationError
from privcore.lipschitz import as_network, global_upper_bound, max_pattern_norm
from privlens import charts, lipschitz_view, pipelines, ui
from privlens import mechanism_view as mv
from privlens.charts import hline_trace
from privlens.image import require_image
from privlens.memo import memo, shared_memo
from privlens.results import load_results
from privlens.settings import md_literal

s = ui.page_setup()
st.title("Lipschitz")
st.caption(
    "L(f, B(z, r)) = sup over the ℓ∞ ball of ‖J_f‖∞→1 — how much the obfuscator's output (ℓ1) can move "
    "per unit of embedding movement (ℓ∞) near your image. PTR releases only while it stays ≤ Δp over the "
    "R-ball. "
    "Exact values by LipMIP (mixed-integer programming, Gurobi or HiGHS); the interval and LP bounds are the "
    "cheap certified relaxations; the lower bound is the Jacobian norm at a verified point."
)

loaded = pipelines.pipeline(s)
if loaded is None:
    st.stop()
pipe = loaded.pipeline
image = require_image(loaded.dataset, pipe.image_shape)
z = mv.embedding(pipe, image)
R = s.radius
delta_p = pipe.proposed_delta_p
radii = lipschitz_view.radii_of(R)

net = as_network(pipe.obfuscator)


def _certify_radii() -> pd.DataFrame:
    """Exact, LP and interval bounds at every radius, with a progress bar (once per model, image, radii)."""
    bar = st.progress(0.0, text="certifying…")
    try:
        out = lipschitz_view.radius_table(net, z, radii, cache=mv.disk_cache(),
                                          progress=lambda f, text: bar.progress(f, text=text))
    except CertificationError as exc:
        st.error(f"Certification failed: {exc}")
        st.stop()
    bar.empty()
    return out


key = lipschitz_view.table_key(pipe, image.digest, radii)
# a shipped sample's table and the weights' bound are public: computed once per server, for every session
# (the warm-up certifies the default sample's: privlens.lipschitz_view.prepare_sample)
table = (shared_memo if image.source == "sample" else memo)(lipschitz_view.MEMO, key, _certify_radii)
glob = shared_memo(
    lipschitz_view.MEMO, ("global", net.digest), lambda: max_pattern_norm(net, max_nodes=2_000_000)
)

fig = go.Figure()
fig.add_trace(
    go.Scatter(
        x=table["radius"],
        y=table["exact_upper"],
        mode="lines+markers",
        name="upper bound (exact MIP)",
        marker={"symbol": ["circle" if e else "circle-open" for e in table["exact"]], "size": 10},
    )
)
fig.add_trace(
    go.Scatter(
        x=table["radius"],
        y=table["lower"],
        mode="lines+markers",
        name="lower bound (verified point)",
        line={"dash": "dot"},
    )
)
fig.add_trace(
    go.Scatter(
        x=table["radius"],
        y=table["lp_upper"],
        mode="lines",
        name="lp certifier's U (upper)",
        line={"dash": "dash"},
    )
)
fig.add_trace(
    go.Scatter(
        x=table["radius"],
        y=table["interval_upper"],
        mode="lines",
        name="interval certifier's U (upper)",
        line={"dash": "longdash"},
    )
)
if delta_p is not None:
    fig.add_hline(y=delta_p, line_color="crimson", annotation_text=f"Δp = {delta_p:.4g}")
if glob is not None and glob.complete:
    # in the legend, not an annotation: at the chart's top edge its label ran into the R marker's
    fig.add_trace(hline_trace(glob.upper, x=radii, name=f"G = {glob.upper:.4g} (over all patterns)",
                              dash="dot",
                              color="black"))
fig.add_vline(x=R, line_dash="dot", line_color="gray", annotation_text=f"R = {R:g}")
if s.spec.needs_certificate and delta_p is not None:
    ctx = mv.posthoc(s, loaded, image, quiet=True)
    phi = mv.known_certificate(ctx) if ctx is not None else None
    if phi is not None and phi.r_star is not None:
        fig.add_vline(
            x=phi.r_star, line_dash="dash", line_color="green", annotation_text=f"R* = {phi.r_star:.3g}"
        )
fig.update_layout(
    # plotly renders titles as HTML (links included): the file name is escaped
    title=f"Local Lipschitz constant around {html.escape(image.name[:80])} — {loaded.dataset}/{loaded.model}",
    xaxis_title="radius r of the ℓ∞ ball B(z, r) in the embedding",
    yaxis_title="L(f, B(z, r)) (ℓ1 output per ℓ∞ input)",
    legend_title_text="bound",
)
ui.chart(fig, name=f"lipschitz-{loaded.dataset}", data=table)
st.caption(
    "Filled markers: the exact value (closed form, pattern enumeration, the split search over neurons and "
    "sub-boxes closed to 1e-6, or the MIP solved to optimality; the solver column says which); open "
    "markers: a time-out, the tighter proven bound of the split search and of the MIP. The exact value "
    "lies between the lower and upper curves."
)
show = table[
    [
        "radius",
        "lower",
        "exact_upper",
        "exact",
        "solver",
        "status",
        "unstable",
        "solve_seconds",
        "lp_upper",
        "interval_upper",
    ]
].rename(columns={"exact_upper": "upper (exact)", "unstable": "unstable ReLUs", "solve_seconds": "seconds"})
st.dataframe(show, hide_index=True, width="stretch")
if delta_p is not None:
    st.caption(
        f"Δp = {delta_p:.4g} = μ + {pipe.delta_p.n_sigma:g}σ of L over {pipe.delta_p.n} training embeddings "
        f"at R = {pipe.delta_p.radius:g} (stored with the model; never from test data)."
    )
if glob is not None and glob.complete:
    verdict = (
        "so PTR's test at this Δp passes at every radius without a solve"
        if delta_p is not None and glob.upper <= delta_p
        else "however large the ball"
    )
    st.caption(
        f"Global bound: G = {glob.upper:.4g}, the largest ‖J_D‖∞→1 over all 2^{net.n_hidden} activation "
        f"patterns (branch and bound; product of the layers' norms: {global_upper_bound(net):.4g}): "
        f"L(f, B(z, r)) ≤ G at every radius, {verdict}."
    )

def _fig2_error_bars(g, *, extra: int) -> dict:
    """The 95 % bootstrap interval of each bar's mean when the results store it, else ± sd; ``extra``
    trailing bars (this model, one point) get none."""
    pad = [0.0] * extra
    if {"lipschitz_lo", "lipschitz_hi"} <= set(g.columns):
        return {
            "type": "data",
            "symmetric": False,
            "array": [*(g["lipschitz_hi"] - g["lipschitz_mean"]), *pad],
            "arrayminus": [*(g["lipschitz_mean"] - g["lipschitz_lo"]), *pad],
        }
    return {"type": "data", "array": [*g["lipschitz_std"], *pad]}


st.subheader("Role of adversarial training (posthoc Fig. 2)")
fig2 = load_results(loaded.dataset, "fig2")
if fig2 is None:
    ui.missing_results("fig2", loaded.dataset, "Fig. 2 results")
else:
    f2 = go.Figure()
    mine = f"{loaded.model} (this model, your image)"
    for r, grp in fig2.groupby("radius", sort=True):
        g = grp.sort_values("arl_alpha")
        # each bar is another obfuscator, trained for Fig. 2: named by that model and its ARL weight α
        names = [
            f"{o} (α = {a:g})" if isinstance(o, str) else f"model with α = {a:g}"
            for o, a in zip(g.get("obfuscator", [None] * len(g)), g["arl_alpha"], strict=True)
        ]
        own = table[(table["radius"] - float(r)).abs() <= 1e-9 * max(1.0, float(r))]
        n_r = sorted({int(v) for v in g["n_points"].dropna()}) if "n_points" in g else []
        n_label = f"n = {'/'.join(map(str, n_r))}" if n_r else "n not recorded"
        has_ci = {"lipschitz_lo", "lipschitz_hi"} <= set(g.columns)
        hover = [
            [
                f"[{lo:.4g}, {hi:.4g}] (95 % bootstrap interval)" if has_ci else f"± {sd:.4g} (s.d.)",
                f"mean over n = {int(n)} test points" if n == n else "n not recorded",
            ]
            for lo, hi, sd, n in zip(
                g["lipschitz_lo"] if has_ci else g["lipschitz_mean"],
                g["lipschitz_hi"] if has_ci else g["lipschitz_mean"],
                g.get("lipschitz_std", g["lipschitz_mean"] * math.nan),
                g.get("n_points", g["lipschitz_mean"] * math.nan),
                strict=True,
            )
        ]
        if not own.empty:
            hover.append(["certified upper bound (exact MIP)", "n = 1: your image"])
        f2.add_trace(
            go.Bar(
                x=[*names, *([mine] if not own.empty else [])],
                y=[*g["lipschitz_mean"], *own["exact_upper"].iloc[:1]],
                name=f"r = {r:g} ({n_label}" + ("; this model: your image" if not own.empty else "") + ")",
                error_y=_fig2_error_bars(g, extra=0 if own.empty else 1),
                customdata=hover,
                hovertemplate=f"%{{x}}, r = {r:g}<br>L = %{{y:.4g}} %{{customdata[0]}}<br>%{{customdata[1]}}"
                "<extra></extra>",
            )
        )
    n_points = sorted({int(v) for v in fig2["n_points"].dropna()}) if "n_points" in fig2 else []
    f2.update_layout(
        barmode="group",
        xaxis_title="obfuscator trained for Fig. 2 (ARL weight α); last: this model",
        yaxis_title="mean certified L(f, B(z, r)), "
        + ("95 % interval" if "lipschitz_lo" in fig2 else "± std"),
        legend_title_text="radius",
        xaxis_type="category",
    )
    # at 1000 px: the legend below the bars (beside them it squeezed them), slanted labels, wrapped title
    charts.narrow_bars(f2, title=f"Fig. 2 models (not {html.escape(loaded.model)}) vs ARL weight α — "
                       f"{loaded.dataset}", categories=len({x for bar in f2.data for x in bar.x}))
    ui.chart(f2, name=f"fig2-{loaded.dataset}", data=fig2)
    st.caption(
        f"These bars are **other obfuscators**, trained for posthoc Fig. 2 with different ARL weights α — "
        f"not {md_literal(loaded.model)} — each the mean over "
        f"{', '.join(map(str, n_points)) or 'several'} test points; their L is not this model's. The last "
        f"group, where the radius is on this page's grid, is {md_literal(loaded.model)} around your image "
        "(the chart above)."
    )
