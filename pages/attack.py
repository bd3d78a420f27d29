"""Attack: how well a trained decoder rebuilds images from PTR releases — heatmaps over (R, ε) from
the attack experiment (posthoc Tables 3–6) and, live, the shipped attacker on the current image at
several ε. Widgets and layout only."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import torch

from privcore.attacks.metrics import image_metrics
from privcore.images import encode_png
from privlens import ptr, ui
from privlens.session import load_results

METRICS = {
    "ssim": ("SSIM", "SSIM (1 = identical)", "higher = better reconstruction"),
    "psnr": ("PSNR", "PSNR in dB (data range 1)", "higher = better reconstruction"),
    "l1": ("ℓ1", "mean absolute pixel error", "lower = better reconstruction"),
    "l2": ("ℓ2", "mean squared pixel error", "lower = better reconstruction"),
}
LIVE_EPSILONS = (1.0, 2.0, 5.0, 10.0)

s = ui.page_setup()
st.title("Attack")
st.caption(
    "An attacker who sees the releases trains a decoder from noisy obfuscated vectors back to images. "
    "How much survives the noise? Reconstruction quality over the neighbourhood radius R and ε (posthoc "
    "Tables 3–6), then the shipped attacker on your image."
)

models = ui.catalogue()
dataset = s.dataset if s.dataset in models else ui.DEFAULT_DATASET
st.subheader("Over (R, ε)")
df = load_results(dataset, "attack")
if df is None:
    ui.missing_results("attack", dataset, "attack results")
else:
    metric = st.selectbox("Metric", list(METRICS), format_func=lambda m: METRICS[m][0], key="atk_metric")
    name, axis_title, hint = METRICS[metric]
    grid = df.pivot_table(index="radius", columns="epsilon", values=metric, aggfunc="mean").sort_index()
    cols = [("∞" if math.isinf(float(c)) else f"{float(c):g}") for c in grid.columns]
    rows = [f"{float(r):g}" for r in grid.index]
    values = grid.to_numpy(dtype=float)
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=cols,
            y=rows,
            colorscale="Viridis",
            colorbar={"title": name},
            text=np.vectorize(lambda v: "" if math.isnan(v) else f"{v:.3g}")(values),
            texttemplate="%{text}",
            hovertemplate="R = %{y}<br>ε = %{x}<br>" + name + " = %{z:.4g}<extra></extra>",
        )
    )
    cur_x, cur_y = f"{s.epsilon:g}", f"{s.radius:g}"
    if cur_x in cols and cur_y in rows:
        fig.add_trace(
            go.Scatter(
                x=[cur_x],
                y=[cur_y],
                mode="markers",
                name="current (R, ε)",
                marker={"symbol": "square-open", "size": 40, "color": "crimson", "line": {"width": 3}},
            )
        )
    else:
        st.caption(f"The current (R = {s.radius:g}, ε = {s.epsilon:g}) is not on the experiment's grid.")
    fig.update_layout(
        title=f"Attacker's {name} — {dataset} ({hint})",
        xaxis_title="ε (∞ = no noise)",
        yaxis_title="R (ℓ∞ radius in the embedding)",
        xaxis_type="category",
        yaxis_type="category",
        legend_title_text="marker",
    )
    ui.chart(fig, name=f"attack-{metric}-{dataset}", data=grid.reset_index())
    if "release_rate" in df:
        st.caption(
            "Metrics average over released test images only; the release rate at each cell is in the CSV."
        )

st.subheader("On your image")
if not s.is_ptr:
    st.info("Pick the PTR mechanism in the sidebar to run the attacker on your image.")
    st.stop()
loaded = ui.pipeline(s)
if loaded is None:
    st.stop()
pipe = loaded.pipeline
if pipe.attacker is None:
    st.info(
        f"No attacker is shipped for {loaded.dataset}/{loaded.model}: train it with "
        f"`.venv/bin/python -m privcore train attacker --dataset {loaded.dataset} --variant {loaded.model}`."
    )
    st.stop()
image = ui.require_image(loaded.dataset, pipe.image_shape)
ctx = ptr.context(s, loaded, image)
if ctx is None:
    st.stop()
phi = ptr.certify(ctx)
if phi is None:
    st.stop()
st.caption(
    f"Simulated releases at R = {ctx.radius:g}, δ = {s.delta:g} (fresh secure noise each; shown here only, "
    "not recorded in the ledger). ε = ∞ is the obfuscated vector without noise: the attacker's best case."
)
x = image.tensor
scale = max(1, 120 // pipe.image_shape[2])
tiles = st.columns(len(LIVE_EPSILONS) + 2)
tiles[0].image(encode_png(x, scale=scale), caption="your image", width=120)
rows = []
for col, eps in zip(tiles[1:], (*LIVE_EPSILONS, math.inf), strict=True):
    if math.isinf(eps):
        released, vec = True, pipe.obfuscate(torch.from_numpy(ctx.z.astype(np.float32))[None])
    else:
        res = ptr.release(ctx, phi, epsilon=eps, delta=s.delta, label="Attack page")
        released, vec = res.released, (ptr.as_tensor(res.value) if res.released else None)
    label = "ε = ∞" if math.isinf(eps) else f"ε = {eps:g}"
    if not released:
        col.markdown(f"**{label}**\n\n### ⊥\nnothing released")
        rows.append({"epsilon": eps, "released": False, "ssim": None, "psnr": None})
        continue
    rec = pipe.reconstruct(vec)
    m = image_metrics(x[None], rec)
    ssim, psnr = float(m.ssim[0]), float(m.psnr[0])
    col.image(
        encode_png(rec[0], scale=scale), caption=f"{label}: SSIM {ssim:.2f}, PSNR {psnr:.1f} dB", width=120
    )
    rows.append({"epsilon": eps, "released": True, "ssim": ssim, "psnr": psnr})
if st.button("Draw new noise", key="atk_resample", icon=":material/casino:"):
    ptr.resample("Attack page")
    st.rerun()
table = pd.DataFrame(rows)
table["epsilon"] = ["∞" if math.isinf(e) else f"{e:g}" for e in table["epsilon"]]
table["released"] = ["yes" if r else "⊥" for r in table["released"]]
st.dataframe(table.rename(columns={"epsilon": "ε", "ssim": "SSIM", "psnr": "PSNR (dB)"}), hide_index=True)
