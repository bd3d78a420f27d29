"""Trade-offs: accuracy against the total ε for every mechanism and model (live where the mechanism
simulates its noise), the release rate, and the smallest ε that reaches a target. Widgets and layout
only: the curves and the solver are privlens.tradeoff_view's."""

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
from privlens import tradeoff_view as tv
from privlens.image import current_image
from privlens.outcome import release_probability
from privlens.results import load_results

#: seconds the page waits for the solver's answer before it shows "computing…", and between two looks
SOLVE_WAIT_S = 0.3
POLL_S = 1.0

s = ui.page_setup()
st.title("Trade-offs")
st.caption(
    "Test accuracy against the **total ε** of one sent release, for every mechanism of the registry on every "
    "shipped model of the dataset. A mechanism that needs no per-image certificate is computed live: its "
    "noise simulated on the test split at each ε (n test images × noise draws, 95 % bootstrap intervals "
    "over images, at the sidebar's δ, R and α). A mechanism that needs one (PTR) is read from the committed "
    'table that measures it, labelled "measured (table)", at the δ it was measured at. Each curve is '
    "computed once per setting on this server. The LDP baselines (posthoc Table 2) are ε-LDP, a guarantee "
    "for every pair of images: a stronger notion, so compare with that in mind."
)

models = pipelines.catalogue()
loaded = pipelines.pipeline(s)
dataset = (
    loaded.dataset
    if loaded is not None
    else (s.dataset if s.dataset in models else pipelines.DEFAULT_DATASET)
)
mech = s.spec
all_pairs = tv.pairs(dataset)
mine = [
    p
    for p in all_pairs
    if p[0] == mech.name and (mech.family != "posthoc" or loaded is None or p[1] == loaded.model)
]
selected = mine[0] if mine else None


def _name(ln: tv.Line) -> str:
    """'Global on N-global (live, n = 1000 × 3 draws, δ = 0)': the pair, how it was read, n and δ."""
    pts = ln.curve.points if ln.curve is not None else ()
    ns = sorted({p.n for p in pts if p.n is not None})
    n = "n not recorded" if not ns else f"n = {ns[0]}" if len(ns) == 1 else f"n = {ns[0]}–{ns[-1]}"
    draws = {p.draws for p in pts if p.draws is not None}
    n += f" × {draws.pop()} draws" if len(draws) == 1 else ""
    delta = "" if ln.delta is None else f", δ = {ln.delta:g}"
    return f"{html.escape(ln.mechanism)} on {html.escape(ln.model)} ({ln.source}, {n}{delta})"


def _trace(ln: tv.Line, *, current: bool) -> go.Scatter:
    pts = ln.curve.points  # type: ignore[union-attr]
    ok = [math.isfinite(p.low) and math.isfinite(p.high) for p in pts]
    bars = {
        "type": "data",
        "symmetric": False,
        "thickness": 1,
        "array": [p.high - p.value if k else 0 for p, k in zip(pts, ok, strict=True)],
        "arrayminus": [p.value - p.low if k else 0 for p, k in zip(pts, ok, strict=True)],
    }
    custom = [
        [
            f" [{p.low:.3f}, {p.high:.3f}]" if k else "",
            "n not recorded"
            if p.n is None
            else f"n = {p.n}" + ("" if p.draws is None else f" × {p.draws} draws"),
        ]
        for p, k in zip(pts, ok, strict=True)
    ]
    return go.Scatter(
        x=[p.epsilon for p in pts],
        y=[p.value for p in pts],
        error_y=bars,
        mode="lines+markers",
        name=_name(ln),
        line={"width": 4 if current else 1.5, "dash": "solid" if ln.is_live else "dashdot"},
        opacity=1.0 if current else 0.35,
        customdata=custom,
        hovertemplate="total ε = %{x:g}<br>%{y:.3f}%{customdata[0]} (95 % interval)<br>%{customdata[1]}"
        "<extra>%{fullData.name}</extra>",
    )


def _ldp_traces(fig: go.Figure) -> list[pd.DataFrame]:
    """The LDP baselines of Table 2 not in the registry (dashed, muted): measured, with Hoeffding bars."""
    t2 = load_results(dataset, "table2")
    if t2 is None:
        return []
    out = []
    known = set(registry.names())
    for method, grp in t2[~t2["method"].isin(["Adversarial", *known])].groupby("method", sort=True):
        g = grp[[math.isfinite(float(e)) for e in grp["epsilon"]]].sort_values("epsilon")
        n = sorted({int(v) for v in g["n_test"].dropna()}) if "n_test" in g else []
        bars = (
            {"type": "data", "array": [hoeffding_halfwidth(v) for v in g["n_test"]], "thickness": 1}
            if n
            else None
        )
        fig.add_trace(
            go.Scatter(
                x=g["epsilon"],
                y=g["accuracy"],
                error_y=bars,
                mode="lines+markers",
                line={"dash": "dash"},
                opacity=0.35,
                name=f"{html.escape(str(method))} (measured (table2), ε-LDP"
                + (f", n = {n[0]}" if len(n) == 1 else "")
                + ", δ = 0)",
            )
        )
        out.append(g.assign(mechanism=str(method), model="", source="measured (table2)"))
    return out


st.subheader("Accuracy against total ε")
names = list(dict.fromkeys(p[0] for p in all_pairs))
obfuscators = list(dict.fromkeys(p[1] for p in all_pairs if registry.get(p[0]).family == "posthoc"))
c1, c2 = st.columns(2)
want_mechs = c1.multiselect(
    "Mechanisms",
    names,
    default=[n for n in names if selected and n == selected[0]],
    key="to_mechs",
    help="Each curve is computed live the first time on this server (a mechanism with a certified constant "
    "certifies it once per model: up to a few seconds each), then cached per setting.",
)
want_models = c2.multiselect(
    "Models (posthoc mechanisms)",
    obfuscators,
    key="to_models",
    default=[m for m in obfuscators if selected and m == selected[1]],
    help="The shipped obfuscators of this dataset. An inference-privacy mechanism runs on its own "
    "classifier.",
)
shown = [
    p
    for p in all_pairs
    if p == selected
    or (p[0] in want_mechs and (registry.get(p[0]).family != "posthoc" or p[1] in want_models))
]
lines: list[tv.Line] = []
progress = st.progress(0.0, text="Computing the curves…") if len(shown) > 1 else None
for i, (name, model) in enumerate(shown):
    m = registry.get(name)
    with st.spinner(f"{name} on {model}: accuracy at {len(tv.GRID)} values of ε…"):
        lines.append(tv.line(m, model, mv.setting(m, s), dataset=dataset))
    if progress is not None:
        progress.progress((i + 1) / len(shown), text=f"{i + 1} of {len(shown)} curves")
if progress is not None:
    progress.empty()
fig = go.Figure()
data = _ldp_traces(fig)
drawn = [ln for ln in lines if ln.curve is not None]
for ln in sorted(drawn, key=lambda ln: (ln.mechanism, ln.model) == selected):  # the selected one on top
    fig.add_trace(_trace(ln, current=(ln.mechanism, ln.model) == selected))
    data.append(tv.frame(ln))
xs = [float(x) for t in fig.data for x in (() if t.x is None else t.x) if x is not None]
charts.mark_x(fig, s.epsilon, f"total ε = {s.epsilon:g}", log=True, color="gray")
charts.log_axis(fig, [*xs, s.epsilon])
fig.update_layout(
    title=f"Test accuracy vs total ε — {dataset}",
    xaxis_title="total ε of one sent release (log scale)",
    yaxis_title="test accuracy (fraction)",
    legend_title_text="mechanism on model",
    legend={"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0},
    height=640,
    xaxis_type="log",
    yaxis_range=[0, 1],
)
ui.chart(
    fig,
    name=f"accuracy-vs-total-epsilon-{dataset}",
    data=pd.concat(data, ignore_index=True) if data else None,
)
st.caption(
    "Bold: the sidebar's mechanism and model; the others muted. Solid: live; dash-dot: measured (the "
    "committed table, its ε turned into the total); dashed: the LDP baselines. Error bars: 95 % intervals "
    "(live: bootstrap over the test images; measured: Wilson over its n test images; LDP: Hoeffding)."
)
for ln in lines:
    if ln.curve is None and (ln.mechanism, ln.model) == selected:
        st.info(f"No curve for {ln.mechanism} on {ln.model}: {ln.note}.")
st.caption(
    f"{len(shown)} of the {len(all_pairs)} mechanism–model pairs of {dataset} shown: add mechanisms "
    "and models above."
)

st.subheader("Release rate against total ε")
MEASURED = registry.get(MEASURES["table1"])  # the mechanism that can refuse (⊥), measured by Table 1
fig = go.Figure()
rate_data = []
t1 = load_results(dataset, "table1")
model_now = loaded.model if loaded is not None else None
if t1 is not None and "release_rate" in t1:
    rows = t1[(t1["obfuscator"].astype(str) == model_now) & t1["epsilon"].astype(float).apply(math.isfinite)]
    if not rows.empty:
        rows = rows.sort_values("epsilon")
        n = sorted({int(v) for v in rows["n_test"].dropna()}) if "n_test" in rows else []
        deltas = sorted({float(d) for d in rows["delta"].dropna()}) if "delta" in rows else []
        series = (
            f"{MEASURED.name} on {html.escape(str(model_now))}: test set (measured (table1)"
            + (f", n = {n[0]}" if len(n) == 1 else "")
            + "".join(f", δ = {d:g}" for d in deltas)
            + ")"
        )
        totals = [float(e) / MEASURED.epsilon_share for e in rows["epsilon"]]
        bars = (
            {"type": "data", "array": [hoeffding_halfwidth(v) for v in rows["n_test"]], "thickness": 1}
            if n
            else None
        )
        fig.add_trace(
            go.Scatter(x=totals, y=rows["release_rate"], error_y=bars, mode="lines+markers", name=series)
        )
        rate_data.append(
            pd.DataFrame({"epsilon": totals, "release_rate": list(rows["release_rate"]), "series": series})
        )
phi = None
if loaded is not None and s.is_posthoc:
    image = current_image(loaded.dataset, loaded.pipeline.image_shape)
    ctx = mv.posthoc(s, loaded, image, MEASURED, quiet=True) if image is not None else None
    phi = mv.known_certificate(ctx) if ctx is not None else None
    if phi is None and ctx is not None and st.session_state.get("to_add_image"):
        phi = mv.certify(ctx)  # progress + cancel, once per (model, image, R, Δp, certifier)
    if phi is not None:
        totals = [t for t in tv.GRID if t <= max(30.0, 1.5 * s.epsilon)]
        probs = [
            release_probability(
                phi.phi,
                epsilon=MEASURED.mechanism_epsilon(t),
                delta=s.delta,
                radius=ctx.radius,
                zeta=phi.zeta,
            )
            for t in totals
        ]
        name = f"your image under {MEASURED.name} ({html.escape(image.name[:80])}), δ = {s.delta:g}"
        fig.add_trace(
            go.Scatter(x=totals, y=probs, mode="lines", name=name, line={"color": "black", "dash": "dot"})
        )
        rate_data.append(
            pd.DataFrame(
                {"epsilon": totals, "release_rate": probs, "series": f"current image, delta={s.delta:g}"}
            )
        )
if fig.data:
    xs = [float(x) for t in fig.data for x in (() if t.x is None else t.x) if x is not None]
    charts.mark_x(fig, s.epsilon, f"total ε = {s.epsilon:g}", log=True, color="gray")
    charts.log_axis(fig, [*xs, s.epsilon])
    fig.update_layout(
        title=f"Fraction released (not ⊥) vs total ε — {dataset}",
        xaxis_title=f"total ε of one sent release ({MEASURED.name} runs at "
        f"ε/{1 / MEASURED.epsilon_share:g}; log scale)",
        yaxis_title="release probability / rate",
        legend_title_text="series",
        legend={"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0},
        height=520,
        xaxis_type="log",
        yaxis_range=[0, 1.02],
    )
    ui.chart(fig, name=f"release-rate-{dataset}", data=pd.concat(rate_data, ignore_index=True))
    st.caption("The other mechanisms always release (rate 1).")
if phi is None:
    st.caption(
        "Your current image's own release probability can be added to this chart: it needs its φ "
        "(certified once; every ε and δ then reuses it)."
    )
    if loaded is not None and s.is_posthoc:
        st.button("Add the current image", key="to_add_image")  # read above, at the next run
else:
    st.caption(
        "The current image's curve is P[φ + Lap((R+ζ)/ε′) > ln(1/δ)·(R+ζ)/ε′] from its certified φ, "
        f"at ε′ = ε·{MEASURED.epsilon_share:g}."
    )

st.subheader("Smallest ε for a target")
if not all_pairs:
    st.info("No mechanism has a model shipped for this dataset.")
else:
    c1, c2, c3 = st.columns([2, 1, 1])
    pair = c1.selectbox(
        "Mechanism and model",
        all_pairs,
        key="to_pair",
        index=all_pairs.index(selected) if selected in all_pairs else 0,
        format_func=lambda p: f"{p[0]} on {p[1]}",
    )
    metric = c2.selectbox("Metric", list(tv.METRICS), key="to_metric")
    spec = tv.METRICS[metric]
    bound = c3.number_input(
        f"Target ({'at least' if spec.at_least else 'at most'})",
        value=spec.default,
        step=0.01,
        key="to_target",
    )
    m = registry.get(pair[0])
    question = {"dataset": dataset, "metric": metric, "bound": float(bound)}
    # a search of tens of readings (seconds on a first visit): in the background, the page drawn meanwhile
    _, SOLVING = tv.solve_soon(m, pair[1], mv.setting(m, s), wait_s=SOLVE_WAIT_S, **question)

    @st.fragment(run_every=POLL_S if SOLVING else None)
    def _solution() -> None:
        sol, pending = tv.solve_soon(m, pair[1], mv.setting(m, s), **question)
        if SOLVING and not pending:
            st.rerun()  # the answer is in: draw the page once more, without polling
        if pending:
            st.info(f"“computing…”: searching ε ∈ [{tv.SOLVER_RANGE[0]:g}, {tv.SOLVER_RANGE[1]:g}] for "
                    f"{m.name} on {pair[1]} (live readings in the background); the answer appears here when "
                    "it is in.", icon=":material/hourglass_top:")
            return
        if sol is None:
            st.info("The search could not be completed here (the server log says why).")
            return
        (st.success if sol.epsilon is not None else st.warning)(sol.text)
        if sol.crossing is not None:
            st.caption(
                f"Live: a scan and bisection in log ε over {len(sol.crossing.readings)} readings at the "
                "sidebar's δ, R and α (each n test images × draws). The interval runs from the smallest ε "
                "whose reading's 95 % interval reaches the target to the smallest whose whole interval does "
                "(pointwise, not simultaneous). The search takes the metric to move one way with ε and "
                "checks it on its readings."
            )
        if (
            sol.epsilon is not None
            and sol.epsilon != s.epsilon
            and st.button(f"Use total ε = {sol.epsilon:.3g} in the sidebar", key="use_eps")
        ):
            ui.update_settings(epsilon=float(f"{sol.epsilon:.3g}"))
            st.rerun()

    _solution()
