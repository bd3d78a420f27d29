"""Mechanism lab: learned ε-DP mechanisms with Lipschitz networks (Shavit & Gjura 2019).

Layout and widgets only; every number comes from ``privcore.lab``. Runs standalone with
``streamlit run pages/mechanism_lab.py`` and works instantly from the shipped models in
``models/lab/`` and the precomputed Fig. 5 results in ``data/results/lab/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # standalone `streamlit run pages/...`

from privcore.lab import (
    QUERIES,
    available_models,
    compare,
    fig5_curves,
    fresh_dataset,
    load_model,
    query_label,
)
from privlens import charts, ui

EPSILONS = [0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0]
KINDS = {
    "laplace": "learned Laplace: f(x) + Lap(k·c/ε)",
    "exponential": "learned exponential: P ∝ exp(ε·u/(2kc))",
}

ui.page_setup()
st.title("Mechanism lab")
st.caption(
    "Learned differentially private mechanisms (Shavit & Gjura 2019): a network whose Lipschitz constant is "
    "bounded by construction (ℓ1 column-norm layers) turned into an ε-DP release for a summary statistic of "
    "n = 100 values in [0, 10]. One record changes the sorted, clipped input by at most c = 10 in ℓ1, so a "
    "k-Lipschitz network has sensitivity k·c."
)

models = available_models()
if models.empty:
    st.error("No lab models in models/lab/. Regenerate them with the command in data/results/lab/README.md.")
    st.stop()

# two rows of two: the mechanism's name and formula need the width (four columns cut it off at 1400 px)
c1, c2 = st.columns([1, 2])
with c1:
    query = st.selectbox("query", QUERIES, format_func=query_label, key="lab_query")
with c2:
    kinds = [k for k in KINDS if not models[(models["kind"] == k) & (models["query"] == query)].empty]
    kind = st.selectbox("mechanism", kinds, format_func=lambda k: KINDS[k], key="lab_kind")
c3, c4 = st.columns(2)
with c3:
    ks = sorted(models[(models["kind"] == kind) & (models["query"] == query)]["k"].tolist())
    k = st.select_slider("k (Lipschitz bound)", options=ks, value=ks[len(ks) // 2], key="lab_k")
with c4:  # the shared ε: moving it here moves the sidebar's, and the other way round
    epsilon = ui.bound_widget("select_slider", "epsilon", "ε (shared with the sidebar)", options=EPSILONS,
                              suffix="_lab", format_func=ui.fmt_num)

d1, d2 = st.columns(2)
with d1:
    seed = st.number_input("dataset seed", min_value=0, max_value=10**9, value=7, step=1, key="lab_seed")
with d2:
    components = st.radio("dataset distribution", [4, 2], horizontal=True, key="lab_components",
                          format_func=lambda c: f"{c}-Gaussian mixture ({'training' if c == 4 else 'test'})")

row = models[(models["kind"] == kind) & (models["query"] == query) & (models["k"] == k)].iloc[0]
mechanism = load_model(row["path"])
data = fresh_dataset(seed=int(seed), components=int(components))
cmp = compare(mechanism, data, epsilon=float(epsilon), loss=str(row["loss"]))

if kind == "exponential" and float(epsilon) != float(row["epsilon"]):
    st.info(f"This utility network was trained for ε = {row['epsilon']:g}; at ε = {epsilon:g} the release is "
            "still ε-DP (the calibration uses the ε you pick) but the network was not optimised for it.")

fig = go.Figure()
for label, grp in cmp.masses.groupby("mechanism", sort=False):
    fig.add_trace(go.Bar(x=grp["response"], y=grp["mass"], name=str(label), opacity=0.6))
fig.add_trace(go.Histogram(x=data, name="data (records)", yaxis="y2", opacity=0.25, marker_color="#e377c2",
                           xbins={"size": 0.2}))
charts.mark_x(fig, cmp.truth, f"true {query_label(query)} = {cmp.truth:.3g}", log=False, color="black",
              dash="solid")
fig.update_layout(barmode="overlay", xaxis_title=f"released {query_label(query)}", yaxis_title="probability",
                  yaxis2={"overlaying": "y", "side": "right", "title": "records", "showgrid": False},
                  legend={"orientation": "h", "y": -0.25}, height=430, margin={"t": 30})
st.plotly_chart(fig, width="stretch")
st.dataframe(cmp.summary, hide_index=True, width="stretch")

lm = cmp.mechanisms[next(iter(cmp.mechanisms))]
# a wrapping row: each metric as wide as its label and value, never cut off
metrics_row = st.container(horizontal=True, gap="large")
metrics_row.metric("certified Lipschitz bound (layer product)", f"{mechanism.certified_bound:.6g}",
                   f"k = {k:g}", delta_color="off", width="content")
engine = row["engine_upper"]
if engine is None or engine != engine:  # missing or NaN
    metrics_row.metric("exact engine bound", "not run", width="content")
else:
    metrics_row.metric("exact engine bound", f"{float(engine):.6g}",
                       "exact" if bool(row["engine_exact"]) else "certified upper bound", delta_color="off",
                       width="content")
if kind == "laplace":
    metrics_row.metric("Laplace scale k·c/ε", f"{lm.noise_scale:.4g}", width="content")  # type: ignore[attr-defined]
else:
    metrics_row.metric("temperature 2·k·c/ε", f"{lm.temperature:.4g}", width="content")  # type: ignore[attr-defined]

if st.button("Release once (OS randomness)", key="lab_release"):
    st.success(f"released {lm.release(data):.4g}  ·  true value {cmp.truth:.4g}")

st.subheader("Expected response loss against k (Fig. 5)")
curves = fig5_curves()
if curves.empty:
    st.warning("data/results/lab/fig5_summary.csv is missing; run `python -m privcore lab fig5` "
               "(the full sweep; `--quick` writes to the untracked quick-results directory).")
else:
    sub = curves[(curves["mechanism"] == kind) & (curves["query"] == query)]
    fig5 = go.Figure()
    colours = {"train": "#1f77b4", "test": "#ff7f0e"}
    learned = sub[sub["method"] == "learned"].sort_values("k")
    for split, grp in learned.groupby("split"):
        runs = int(grp["runs"].max())
        if "erl_ci_high" in grp:  # the 95 % t-interval over training seeds
            bars = {"type": "data", "array": (grp["erl_ci_high"] - grp["erl_mean"]).fillna(0).to_numpy(),
                    "arrayminus": (grp["erl_mean"] - grp["erl_ci_low"]).fillna(0).to_numpy()}
            label = f"learned, {split} (mean of n = {runs} runs, 95 % interval)"
        else:
            bars = {"type": "data", "array": grp["erl_std"].fillna(0).to_numpy()}
            label = f"learned, {split} (mean ± sd of n = {runs} runs)"
        fig5.add_trace(go.Scatter(x=grp["k"], y=grp["erl_mean"], mode="lines+markers",
                                  name=label, line_color=colours.get(str(split)), error_y=bars))
        best = grp[grp["best_k"]]
        fig5.add_trace(go.Scatter(x=best["k"], y=best["erl_mean"], mode="markers", name=f"best k ({split})",
                                  marker={"size": 16, "symbol": "circle-open",
                                          "color": colours.get(str(split))}))
    ks_all = learned["k"].dropna().tolist() or [float(k)]
    for method, dash in (("data-blind", "dot"), ("expert", "dash")):
        for split, grp in sub[sub["method"] == method].groupby("split"):
            # a trace, not add_hline: named in the legend, and right on the log y axis
            erl = float(grp["erl_mean"].iloc[0])
            fig5.add_trace(charts.hline_trace(erl, x=ks_all, name=f"{method} ({split})", dash=dash,
                                              color=colours.get(str(split))))
    fig5.update_xaxes(type="log", title="k")
    loss_name = str(sub["loss"].iloc[0]) if not sub.empty else ""
    fig5.update_yaxes(type="log", title=f"expected {loss_name} loss")
    fig5.update_layout(height=420, margin={"t": 30}, legend={"orientation": "h", "y": -0.25})
    st.plotly_chart(fig5, width="stretch")
    st.caption("Train = 4-Gaussian mixtures (the training distribution), test = 2-Gaussian mixtures; "
               "each point is the mean over training runs (seeds) with its 95 % t-interval (n in the "
               "legend; each run's ERL is exact, averaged over fresh datasets); the open circle marks "
               "the k with the best training ERL. Expert: the "
               "standard Laplace mechanism (mean, variance) or the exponential mechanism with quantile "
               "utility (median, 10th percentile). Data-blind: the best constant answer.")

with st.expander("How the privacy is calibrated"):
    st.markdown(
        "* Records are clipped to [0, 10] and sorted; sorting never increases ℓ1 distances, so neighbouring "
        "datasets stay within c = 10.\n"
        "* Laplace: |f(x) − f(x′)| ≤ k·c, noise Lap(k·c/ε), drawn by the project's exact discrete-Laplace "
        "sampler.\n"
        "* Exponential: u(·, r) is k-Lipschitz in x for every response r, so Δu = k·c and "
        "P(r) ∝ exp(ε·u/(2·k·c)) is ε-DP. The paper's exp(ε·u/(c·k)) (without the 2) is only 2ε-DP.\n"
        "* Every model's layer-norm product is re-certified (exactly, in rational arithmetic) when it loads; "
        "the exact Lipschitz engine's bound is shown where it was run."
    )
    st.code(str(row["command"]) or "(no command recorded)", language="bash")
