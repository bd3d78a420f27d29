"""Inference privacy: Gauss-Input, Gauss-Output and Lap-Output (Tian et al., Defs 3–5) on the IP
classifiers — the prediction for the current image with and without noise, accuracy curves from the
``ip`` experiment, and what the guarantee becomes at other radii (chaining). Widgets and layout only."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import torch

from privcore.accounting import chaining, chaining_hops
from privcore.errors import CheckpointError, DatasetUnavailableError
from privcore.mechanisms import GaussInput, GaussOutput, LapOutput
from privlens import budget, charts, ui
from privlens.session import (
    ALPHA_GRID,
    IP_MECHANISMS,
    LEDGER_EXPLANATION,
    ledger_totals,
    load_results,
    plain_guarantee,
)

NONCE = "privlens_ip_nonce"
SENT = "privlens_ip_sent"

s = ui.page_setup()
st.title("Inference privacy")
st.caption(
    "{(ε, δ), α} inference privacy (Tian et al., Def. 2): any two inputs within distance α give almost "
    "the same output distribution. Gauss-Input adds Gaussian noise to the pixels; Gauss-Output and "
    "Lap-Output add noise to the outputs of a classifier whose global Lipschitz constant μ is certified "
    "by construction."
)
if s.is_ptr:
    st.info(
        "The sidebar's mechanism is PTR; this page shows the three inference-privacy mechanisms with the "
        "sidebar's ε and δ and the α below (pick one of them in the sidebar to highlight it)."
    )
    ui.bound_widget(
        "select_slider",
        "alpha",
        "α (radius on the input)",
        options=ALPHA_GRID,
        format_func=ui.fmt_num,
        suffix="_ip",
    )
    s = ui.settings()
if s.delta > 1e-3:
    st.warning(
        f"δ = {s.delta:g} is large for inference privacy (the paper uses δ = 1e-5): the Gaussian "
        "mechanisms' guarantee fails with probability up to δ per query."
    )

models = ui.catalogue()
dataset = s.dataset if s.dataset in models else ui.DEFAULT_DATASET


@st.cache_resource(show_spinner="Loading the IP classifiers (once per server process)…", max_entries=4)
def _ip_models(name: str, directory: str):
    from privcore.pipeline import load_ip_models

    return load_ip_models(name, models_dir=directory)


try:
    ip = _ip_models(dataset, ui.models_dir())
except (CheckpointError, DatasetUnavailableError, FileNotFoundError) as exc:
    st.warning(f"No inference-privacy classifiers for {dataset}: {exc}")
    st.info(f"Train them with `.venv/bin/python -m privcore train all --dataset {dataset}` (or `train ip`).")
    ip = None

if ip is not None:
    image = ui.require_image(dataset, ip.image_shape)
    x = image.tensor[None]
    names = ip.class_names

    def pick(*candidates: str):
        return next((ip.models[c] for c in candidates if c in ip.models), None)

    plan = {
        "Gauss-Input": pick("ip-cnn-gauss-input", "ip-cnn", "ip-lipschitz-l2"),
        "Gauss-Output": pick("ip-lipschitz-l2"),
        "Lap-Output": pick("ip-lipschitz-l1"),
    }
    nonce = int(st.session_state.get(NONCE, 0))
    draws = st.session_state.setdefault("privlens_ip_draws", {})
    rows = []
    guarantees = {}
    pending: dict[str, tuple] = {}  # mechanism -> (draw key, guarantee, ledger label)
    sent = st.session_state.setdefault(SENT, set())
    for mech_name in IP_MECHANISMS:
        model = plan[mech_name]
        if model is None:
            rows.append({"mechanism": mech_name, "model": "—", "noise": "no model shipped"})
            continue
        try:
            if mech_name == "Gauss-Input":
                mech = GaussInput(epsilon=s.epsilon, delta=s.delta, alpha=s.alpha)
                noise = f"σ = {mech.sigma:.4g} on pixels"
            elif mech_name == "Gauss-Output":
                mech = GaussOutput(
                    epsilon=s.epsilon,
                    delta=s.delta,
                    alpha=s.alpha,
                    lipschitz=model.lipschitz["l2"],
                    rounding=model.rounding["l2"],
                )
                noise = (
                    f"σ = {mech.sigma:.4g} on logits (μ₂ = {model.lipschitz['l2']:.3g}, "
                    f"float64 rounding η = {model.rounding['l2']:.2g})"
                )
            else:
                mech = LapOutput(
                    epsilon=s.epsilon,
                    alpha=s.alpha,
                    lipschitz=model.lipschitz["l1"],
                    rounding=model.rounding["l1"],
                )
                noise = (
                    f"b = {mech.scale:.4g} on logits (μ₁ = {model.lipschitz['l1']:.3g}, "
                    f"float64 rounding η = {model.rounding['l1']:.2g})"
                )
        except ValueError as exc:
            rows.append({"mechanism": mech_name, "model": model.name, "noise": f"refused: {exc}"})
            continue
        guarantees[mech_name] = mech.guarantee
        clean = model(x) if mech_name == "Gauss-Input" else model.scores(x)  # scores: within η of C(x)
        key = (image.digest, mech_name, model.name, s.epsilon, s.delta, s.alpha, nonce)
        if key not in draws:  # a preview: it stays on this device and costs nothing until sent
            if len(draws) > 96:
                draws.pop(next(iter(draws)))
            noisy = model(mech(x)) if mech_name == "Gauss-Input" else mech(clean)
            draws[key] = noisy
        noisy = draws[key]
        pending[mech_name] = (
            key,
            mech.guarantee,
            f"IP page: {mech_name} ε={s.epsilon:g}, δ={mech.guarantee.delta:g}, α={s.alpha:g}, "
            f"draw {nonce + 1}",
        )
        p_clean = torch.softmax(clean, -1)[0]
        p_noisy = torch.softmax(torch.as_tensor(noisy), -1)[0]
        rows.append(
            {
                "mechanism": mech_name + (" ◀" if mech_name == s.mechanism else ""),
                "model": model.name,
                "noise": noise,
                "prediction without noise": f"{names[int(p_clean.argmax())]} ({float(p_clean.max()):.2f})",
                "noisy prediction (preview)": f"{names[int(p_noisy.argmax())]} ({float(p_noisy.max()):.2f})",
                "sent": "yes" if key in sent else "no (nothing has left your device)",
                "guarantee": f"(ε = {mech.guarantee.epsilon:g}, δ = {mech.guarantee.delta:g}) "
                f"at α = {s.alpha:g}, {mech.guarantee.metric}",
            }
        )
    st.subheader("Your image, with and without noise")
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.caption(
        ":material/lock: **Preview: nothing has left your device.** A noisy prediction costs its guarantee "
        "when you send it; showing it again costs nothing."
    )
    shown: list[str] = []
    for _, guarantee, _ in pending.values():
        shown += [w for w in budget.extreme_warnings(guarantee) if w not in shown]
    for warning in shown:
        st.warning(warning, icon=":material/warning:")

    def _send(mech_name: str) -> None:
        key, guarantee, label = pending[mech_name]
        if key not in sent:  # once per draw: the same output again is post-processing
            sent.add(key)
            ui.record_release(image=image, guarantee=guarantee, label=f"{label} (sent)")

    buttons = st.columns(len(IP_MECHANISMS) + 1)
    for col, mech_name in zip(buttons, IP_MECHANISMS, strict=False):
        if mech_name in pending:
            done = pending[mech_name][0] in sent
            col.button(
                f"{mech_name}: sent" if done else f"Send {mech_name}",
                key=f"ip_send_{mech_name}",
                icon=":material/send:",
                disabled=done,
                on_click=_send,
                args=(mech_name,),
                help="Charges the session ledger for this draw (once).",
            )
    if buttons[-1].button(
        "New draw",
        key="ip_resample",
        icon=":material/casino:",
        help="Fresh noise for all three: new previews, free until sent; a sent new draw costs again.",
    ):
        st.session_state[NONCE] = nonce + 1
        st.rerun()
    st.caption(
        "Each sent draw is recorded in the session ledger (Accountant page). Softmax of the noisy logits is "
        "post-processing and costs nothing."
    )
    if guarantees:
        st.markdown(
            "**What sending one draw of all three costs.** Gauss-Input and Gauss-Output are both stated for "
            "pairs within ℓ2 distance α on the model input (the same pixels), Lap-Output for pairs within "
            "ℓ1 distance α. "
            "A pair within ℓ1 distance α is also within ℓ2 distance α, so all three releases apply to it."
        )
        draw = [
            {"image": image.name, "image_key": "draw", "label": name, "guarantee": g}
            for name, g in guarantees.items()
        ]
        per_draw = pd.DataFrame(ledger_totals(draw)).drop(columns="image")
        st.dataframe(per_draw, hide_index=True, width="stretch")
        try:
            so_far = ledger_totals([r for r in ui.ledger_rows() if r["image_key"] == image.digest[:12]])
        except ValueError as exc:
            st.error(f"This image's ledger cannot be composed ({exc}); see the Accountant page.")
        else:
            worst = next((r for r in so_far if r["total"] == "worst case"), None)
            if worst is not None:
                st.warning(
                    "All sent releases of this image in this session (here and on the Release page): "
                    f"worst case ε = {worst['total ε = Σεᵢ']:.4g}, "
                    f"δ = {worst['total δ = Σδᵢ']:.3g} for {worst['pairs']} "
                    f"({worst['releases counted']} releases). Per relation on the Accountant page."
                )
        st.caption(LEDGER_EXPLANATION)

    focus = s.mechanism if s.mechanism in guarantees else next(iter(guarantees), None)
    if focus is not None:
        st.subheader(f"Chaining: {focus} at other radii")
        g = guarantees[focus]
        st.markdown(plain_guarantee(g))
        betas = [float(f"{s.alpha * k:.12g}") for k in (1, 2, 3, 5, 10, 20)]
        chain = []
        for b in betas:
            c = chaining(g, b)
            chain.append(
                {
                    "β": f"{b:.4g}",
                    "hops h = ⌈β/α⌉": chaining_hops(g.radius, b),
                    "ε": f"{c.epsilon:.4g}",
                    "δ": f"{c.delta:.3g}",
                    "meaningful": "yes" if c.delta < 1 and c.epsilon < 20 else "no",
                }
            )
        st.dataframe(pd.DataFrame(chain), hide_index=True)
        st.caption(
            "Chaining (IP paper Prop. 4, Appendix D): (ε, δ) at α gives (h·ε, δ·(e^{hε} − 1)/(e^ε − 1)) at "
            "β with h = ⌈β/α⌉ (the main text's h·δ is a misprint)."
        )

st.subheader("Accuracy curves (ip experiment)")
df = load_results(dataset, "ip")
if df is None:
    ui.missing_results("ip", dataset, "inference-privacy results")
else:
    clean = df[df["sweep"] == "clean"]
    for sweep, xcol, symbol, title, current in (
        ("alpha", "alpha", "α", "accuracy vs α (ε = 1)", s.alpha),
        ("epsilon", "epsilon", "ε", "accuracy vs ε (α = 0.1)", s.epsilon),
    ):
        part = df[df["sweep"] == sweep]
        if part.empty:
            continue
        fig = go.Figure()
        span = [float(part[xcol].min()), float(part[xcol].max())]
        for row in clean[clean["model"].isin(set(part["model"]))].itertuples():
            fig.add_trace(
                go.Scatter(
                    x=span,
                    y=[row.accuracy_mean] * 2,
                    mode="lines",
                    name=f"no noise ({row.model})",
                    line={"dash": "dot", "width": 1, "color": "gray"},
                )
            )
        for (mech_name, model_name), grp in part.groupby(["mechanism", "model"], sort=True):
            g = grp.sort_values(xcol)
            g = g[g[xcol].apply(lambda v: math.isfinite(float(v)))]
            fig.add_trace(
                go.Scatter(
                    x=g[xcol],
                    y=g["accuracy_mean"],
                    mode="lines+markers",
                    name=f"{mech_name} ({model_name})",
                    error_y={"type": "data", "array": g["accuracy_std"]},
                    line={"width": 4 if mech_name == s.mechanism else 1.5},
                )
            )
        charts.mark_x(fig, current, f"current {symbol} = {current:g}", log=True)
        unit = "ℓ2 pixels for Gauss-*, ℓ1 for Lap-Output; " if sweep == "alpha" else ""
        fig.update_layout(
            title=f"{dataset}: {title}",
            xaxis_title=f"{symbol} ({unit}log scale)",
            yaxis_title="test accuracy (mean ± std over noise draws)",
            legend_title_text="mechanism",
            yaxis_range=[0, 1],
        )
        charts.log_axis(fig, [*span, current])
        ui.chart(fig, name=f"ip-{sweep}-{dataset}", data=part)
