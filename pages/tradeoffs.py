"""Trade-offs: accuracy and release rate against ε (posthoc Tables 1–2), the current setting marked,
and the smallest ε that reaches a target accuracy. Widgets and layout only."""

from __future__ import annotations

import html
import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from privcore.experiments import MEASURES, hoeffding_halfwidth
from privcore.mechanisms import registry
from privlens import charts, pipelines, ui
from privlens import mechanism_view as mv
from privlens.image import current_image
from privlens.outcome import release_probability
from privlens.results import load_results, smallest_epsilon

s = ui.page_setup()
st.title("Trade-offs")
st.caption(
    "Test accuracy and release rate of posthoc PTR against ε for each obfuscator (posthoc Table 1) and the "
    "local-DP baselines (Table 2). A ⊥ counts as a uniform random guess, the paper's convention. The x axis "
    "is each mechanism's own ε: PTR at ε guarantees (2ε, δ/2, R) on the embedding, so the sidebar's total ε "
    "runs it at ε/2 (both are marked); LDP's ε is its total and holds for every pair of images — a "
    "stronger notion, so compare the curves with that in mind. The certified global mechanism's accuracy, "
    "at the total ε, is in the Release page's comparison (data/results/<dataset>/table1-global.csv)."
)

models = pipelines.catalogue()
dataset = s.dataset if s.dataset in models else pipelines.DEFAULT_DATASET
t1 = load_results(dataset, "table1")
t2 = load_results(dataset, "table2")


def _finite(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["epsilon"].apply(lambda e: math.isfinite(float(e)))].sort_values("epsilon")


def _delta_label(g: pd.DataFrame) -> str:
    """', δ = 0.05': the δ the curve's rows were measured at (the CSV's ``delta`` column; none is δ = 0, a
    pure guarantee such as ε-LDP's)."""
    deltas = sorted({float(d) for d in g["delta"].dropna()}) if "delta" in g else []
    if not deltas:
        return ", δ = 0"
    return ", δ = " + "/".join(f"{d:g}" for d in deltas)


def _n_and_bars(g: pd.DataFrame) -> tuple[str, dict | None]:
    """', n = …, δ = …' for the legend and 95 % Hoeffding error bars (⊥ scores a uniform guess)."""
    if "n_test" not in g or g["n_test"].isna().all():
        return _delta_label(g), None
    sizes = sorted({int(v) for v in g["n_test"].dropna()})
    label = f", n = {sizes[0]}" if len(sizes) == 1 else f", n = {sizes[0]}–{sizes[-1]}"
    bars = {"type": "data", "array": [hoeffding_halfwidth(v) for v in g["n_test"]], "thickness": 1}
    return label + _delta_label(g), bars


def _hover(g: pd.DataFrame, bars: dict | None, what: str) -> dict:
    """Hover text of each point: ε, the value with its 95 % interval, n and δ."""
    half = bars["array"] if bars is not None else [None] * len(g)
    n = g["n_test"] if "n_test" in g else [None] * len(g)
    delta = _delta_label(g).removeprefix(", ")
    custom = [
        [
            "" if h is None else f" [{max(0.0, float(y) - h):.3f}, {min(1.0, float(y) + h):.3f}]",
            "n not recorded" if k is None or k != k else f"n = {int(k)}",
        ]
        for y, h, k in zip(g[what], half, n, strict=True)
    ]
    return {
        "customdata": custom,
        "hovertemplate": "ε = %{x:g}<br>%{y:.3f}%{customdata[0]} (95 % interval)<br>"
        f"%{{customdata[1]}}, {delta}<extra>%{{fullData.name}}</extra>",
    }


MEASURED = registry.get(MEASURES["table1"])  # the mechanism Table 1 measures, at its own ε
PTR_EPSILON = MEASURED.mechanism_epsilon(s.epsilon)  # its own ε at the sidebar's total


def _mark_current(fig: go.Figure, *, total: bool = True) -> None:
    """The sidebar's total ε and PTR's ε/2 as named lines, and an x range showing them and every plotted
    point (``total`` False: PTR's only, for a chart of PTR alone)."""
    xs = [v for t in fig.data if t.x is not None for v in t.x if v is not None]
    charts.mark_x(fig, PTR_EPSILON, f"PTR's ε/2 = {PTR_EPSILON:g}", log=True)
    if total:
        charts.mark_x(fig, s.epsilon, f"total ε = {s.epsilon:g}", log=True, color="gray")
    charts.log_axis(fig, [*xs, PTR_EPSILON, *([s.epsilon] if total else [])])


curves: dict[str, pd.DataFrame] = {}
st.subheader("Accuracy against ε")
if t1 is None and t2 is None:
    ui.missing_results("table1", dataset, "Table 1 results")
    ui.missing_results("table2", dataset, "Table 2 results")
else:
    fig = go.Figure()
    if t1 is not None:
        if s.certifier in set(t1.get("certifier", pd.Series(dtype=str))):
            t1 = t1[t1["certifier"] == s.certifier]
        for name, grp in t1.groupby("obfuscator", sort=True):
            g = _finite(grp)
            curves[str(name)] = g
            current = name == s.model
            n_label, bars = _n_and_bars(g)
            fig.add_trace(
                go.Scatter(
                    x=g["epsilon"],
                    y=g["accuracy"],
                    error_y=bars,
                    mode="lines+markers",
                    name=f"{name} (PTR{n_label})",
                    line={"width": 4 if current else 1.5},
                    opacity=1.0 if current else 0.6,
                    **_hover(g, bars, "accuracy"),
                )
            )
    else:
        ui.missing_results("table1", dataset, "Table 1 results")
    if t2 is not None:
        for name, grp in t2[t2["method"] != "Adversarial"].groupby("method", sort=True):
            g = _finite(grp)
            curves[str(name)] = g
            n_label, bars = _n_and_bars(g)
            fig.add_trace(
                go.Scatter(
                    x=g["epsilon"],
                    y=g["accuracy"],
                    error_y=bars,
                    mode="lines+markers",
                    name=f"{name} (ε-LDP{n_label})",
                    line={"dash": "dash"},
                    **_hover(g, bars, "accuracy"),
                )
            )
    else:
        ui.missing_results("table2", dataset, "Table 2 results (LDP baselines)")
    _mark_current(fig)
    fig.update_layout(
        title=f"Test accuracy vs ε — {dataset}",
        xaxis_title="the mechanism's own ε (PTR: half the total; LDP: the total; log scale)",
        yaxis_title="test accuracy (fraction)",
        legend_title_text="method",
        # below the plot: the legends name n and δ, and beside it they would squeeze it on a laptop
        legend={"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0},
        height=640,
        xaxis_type="log",
        yaxis_range=[0, 1],
    )
    data = pd.concat([d.assign(method=k) for k, d in curves.items()], ignore_index=True) if curves else None
    ui.chart(fig, name=f"accuracy-vs-epsilon-{dataset}", data=data)
    st.caption(
        "Error bars: 95 % interval of each accuracy (Hoeffding, over the n test images named in the legend); "
        "each curve was measured at the δ its legend names (the CSV's δ column; ε-LDP is pure, δ = 0)."
    )
    measured = sorted({float(d) for d in t1["delta"].dropna()}) if t1 is not None and "delta" in t1 else []
    if measured and s.delta not in measured:
        fewer = s.delta < measured[0]
        st.warning(
            f"The PTR curves were measured at δ = {'/'.join(f'{d:g}' for d in measured)}, not at the "
            f"sidebar's δ = {s.delta:g} (no experiment ran at that δ). PTR's test threshold ln(1/δ)·b "
            f"depends on δ: at δ = {s.delta:g} it releases {'less' if fewer else 'more'} often, and its "
            f"accuracy is {'lower' if fewer else 'higher'} than these curves.",
            icon=":material/warning:",
        )
    if t1 is not None:
        informal = t1[~t1["epsilon"].apply(lambda e: math.isfinite(float(e)))]
        if not informal.empty:
            st.caption(
                "Without noise (ε = ∞, the paper's 'informal' column): "
                + ", ".join(f"{r.obfuscator} {r.accuracy:.3f}" for r in informal.itertuples())
            )

st.subheader("Release rate against ε")
fig = go.Figure()
rate_data = []
ptr_curves = {k: v for k, v in curves.items() if t1 is not None and k in set(t1["obfuscator"].astype(str))}
if t1 is not None and "release_rate" in t1:
    for name, g in ptr_curves.items():
        if g["release_rate"].notna().any():
            n_label, bars = _n_and_bars(g)
            series = f"{name}: test set{n_label}"
            fig.add_trace(
                go.Scatter(
                    x=g["epsilon"],
                    y=g["release_rate"],
                    error_y=bars,
                    mode="lines+markers",
                    name=series,
                    line={"width": 4 if name == s.model else 1.5},
                    **_hover(g, bars, "release_rate"),
                )
            )
            rate_data.append(g[["epsilon", "release_rate"]].assign(series=series))
loaded = pipelines.pipeline(s) if s.dataset == dataset else None
phi = None
if loaded is not None and s.is_posthoc:
    image = current_image(loaded.dataset, loaded.pipeline.image_shape)
    ctx = mv.posthoc(s, loaded, image, MEASURED, quiet=True) if image is not None else None
    phi = mv.known_certificate(ctx) if ctx is not None else None
    if phi is None and ctx is not None and st.session_state.get("to_add_image"):
        phi = mv.certify(ctx)  # progress + cancel, once per (model, image, R, Δp, certifier)
    if phi is not None:
        top = max(30.0, 1.5 * PTR_EPSILON)  # the curve reaches past the current ε
        eps_grid = [0.1 * 1.1**k for k in range(200) if 0.1 * 1.1**k <= top]
        probs = [
            release_probability(phi.phi, epsilon=e, delta=s.delta, radius=ctx.radius, zeta=phi.zeta)
            for e in eps_grid
        ]
        fig.add_trace(
            go.Scatter(
                x=eps_grid,
                y=probs,
                mode="lines",
                # plotly renders trace names as HTML (links included): the file name is escaped
                name=f"your image under PTR ({html.escape(image.name[:80])}), δ = {s.delta:g}",
                line={"color": "black", "dash": "dot"},
            )
        )
        rate_data.append(
            pd.DataFrame(
                {"epsilon": eps_grid, "release_rate": probs, "series": f"current image, delta={s.delta:g}"}
            )
        )
if fig.data:
    _mark_current(fig, total=False)
    fig.update_layout(
        title=f"Fraction released (not ⊥) vs ε — {dataset}",
        xaxis_title="PTR's ε (half the total of a sent release; log scale)",
        yaxis_title="release probability / rate",
        legend_title_text="series",
        # below the plot: the legends name n and δ, and beside it they would squeeze it on a laptop
        legend={"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0},
        height=640,
        xaxis_type="log",
        yaxis_range=[0, 1.02],
    )
    ui.chart(fig, name=f"release-rate-{dataset}", data=pd.concat(rate_data, ignore_index=True))
if phi is None:
    st.caption(
        "Your current image's own release probability can be added to this chart: it needs its φ "
        "(certified once; every ε and δ then reuses it)."
    )
    if loaded is not None and s.is_posthoc:
        st.button("Add the current image", key="to_add_image")  # read above, at the next run
else:
    st.caption("The current image's curve is P[φ + Lap((R+ζ)/ε) > ln(1/δ)·(R+ζ)/ε] from its certified φ.")

st.subheader("Smallest ε for a target accuracy")
if not curves:
    st.info("Needs the Table 1 / Table 2 results above.")
else:
    c1, c2 = st.columns(2)
    names = list(curves)
    method = c1.selectbox(
        "Method", names, index=names.index(s.model) if s.model in names else 0, key="to_method"
    )
    target = c2.number_input(
        "Target accuracy", min_value=0.0, max_value=1.0, value=0.5, step=0.01, key="to_target"
    )
    g = curves[method]
    sol = smallest_epsilon(g["epsilon"].tolist(), g["accuracy"].tolist(), target=float(target))
    measured_at = _delta_label(g).removeprefix(", ")
    (st.success if sol.reachable else st.warning)(f"{sol.note} (The curve was measured at {measured_at}.)")
    if sol.reachable and method in models.get(dataset, ()):
        eps = sol.measured if sol.interpolated is None else round(sol.interpolated, 3)
        total = None if eps is None else 2 * eps  # the curve's ε is PTR's: a sent release spends twice it
        if (
            total is not None
            and total != s.epsilon
            and st.button(f"Use total ε = {total:g} in the sidebar (PTR at ε/2 = {eps:g})", key="use_eps")
        ):
            ui.update_settings(epsilon=float(total))
            st.rerun()
