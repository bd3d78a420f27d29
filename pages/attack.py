"""Attack: what a trained decoder rebuilds from releases. First, live, the selected model's scale-told
attacker on the sidebar's mechanism and setting (SSIM, PSNR, ℓ1, ℓ2 with intervals, beside the no-release
baseline); then the committed heatmaps over (R, ε), measured for ARL-C-N under PTR (posthoc Tables 3–6);
then the same scale-told attacker on the current image, under the sidebar's mechanism at several total ε.
Widgets and layout only."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import streamlit as st
import torch

from privcore.attacks import ImageMetrics, image_metrics
from privcore.errors import CheckpointError, DatasetUnavailableError
from privcore.experiments import MEASURES
from privcore.inputs import encode_png
from privcore.mechanisms import registry
from privlens import attack_view, baselines, charts, live, pipelines, tables, ui
from privlens import mechanism_view as mv
from privlens.image import framed, require_image
from privlens.results import load_results
from privlens.settings import md_literal

METRICS = {
    "ssim": ("SSIM", "SSIM (1 = identical)", "higher = better reconstruction"),
    "psnr": ("PSNR", "PSNR in dB (data range 1)", "higher = better reconstruction"),
    "l1": ("ℓ1", "mean absolute pixel error", "lower = better reconstruction"),
    "l2": ("ℓ2", "mean squared pixel error", "lower = better reconstruction"),
}
#: the total ε of the simulated releases of your image (the sidebar's is added)
LIVE_EPSILONS = (1.0, 2.0, 5.0, 10.0, 20.0)
#: seconds the page waits for the live attack before it shows "computing…", and between two looks
FIRST_WAIT_S = 0.5
POLL_S = 1.0


def _baseline_of(dataset: str) -> tuple[ImageMetrics, np.ndarray]:
    with st.spinner("Computing the no-release baseline (once per dataset)…"):
        return baselines.no_release_baseline(dataset)


def _baseline(dataset: str) -> ImageMetrics | None:
    """The training-mean-image baseline over the test set, or None (with a note) without the data."""
    try:
        return _baseline_of(dataset)[0]
    except (DatasetUnavailableError, ValueError, OSError) as exc:
        st.caption(f"No no-release baseline for {dataset}: {pipelines.public_text(exc)}")
        return None


s = ui.page_setup()
ATTACKED = registry.get(MEASURES["attack"])  # the mechanism whose releases the attack experiment attacks
OWN_EPSILON = ATTACKED.mechanism_epsilon(s.epsilon)  # its own ε at the sidebar's total ε
st.title("Attack")
st.caption(
    "An attacker who sees the releases trains a decoder from noisy obfuscated vectors back to images. "
    "How much survives the noise? Reconstruction quality over the neighbourhood radius R and ε (posthoc "
    "Tables 3–6), then the selected model's attacker on your image."
)

models = pipelines.catalogue()
dataset = s.dataset if s.dataset in models else pipelines.DEFAULT_DATASET
st.subheader("At this setting")
SELECTED = s.spec
here = pipelines.pipeline(s) if SELECTED.family == "posthoc" else None
if SELECTED.family != "posthoc" or here is not None:
    st.markdown(f"**{SELECTED.label}** on **{dataset} / {s.model}** at total ε = {s.epsilon:g}"
                + (f", δ = {s.delta:g}" if SELECTED.uses_delta else "")
                + (f", R = {s.radius:g}" if "radius" in SELECTED.parameter_names else "") + ".")
    live_args = {"dataset": dataset if here is None else here.dataset,
                 "model": s.model if here is None else here.model}
    live_target = None if here is None else here.pipeline
    # simulated and decoded in the background (seconds): the page is drawn meanwhile, this part fills in
    _, LIVE_PENDING = attack_view.live_reading_soon(SELECTED, live_target, s, wait_s=FIRST_WAIT_S,
                                                    **live_args)

    @st.fragment(run_every=POLL_S if LIVE_PENDING else None)
    def _live_attack() -> None:
        reading, pending = attack_view.live_reading_soon(SELECTED, live_target, s, **live_args)
        if LIVE_PENDING and not pending:
            st.rerun()  # the reading is in: draw the page once more, without polling
        if pending:
            st.info("“computing…”: releases at this setting are being simulated and decoded by the model's "
                    "attacker (n test images × noise draws, in the background); the table fills in when it "
                    "is ready.", icon=":material/hourglass_top:")
        elif reading is None:
            st.info("The live attack could not be computed here (the server log says why).")
        elif reading.available:
            st.dataframe(attack_view.reading_table(reading), hide_index=True)
            st.caption(attack_view.reading_caption(reading))
        else:
            st.info(reading.reason.capitalize() + ".")

    _live_attack()

df = load_results(dataset, "attack")
has_models = df is not None and "obfuscator" in df
measured = sorted({str(v) for v in df["obfuscator"].dropna()}) if has_models else []
measured_text = ", ".join(measured) or "an unrecorded model"
st.subheader(f"Measured for {measured_text} under {ATTACKED.name} (committed grid, over R and ε)")
if df is None:
    ui.missing_results("attack", dataset, "attack results")
else:
    metric = st.selectbox("Metric", list(METRICS), format_func=lambda m: METRICS[m][0], key="atk_metric")
    if s.model not in measured:
        st.info(
            f"These tables were measured on {md_literal(measured_text)} (the paper's Tables 3–6), not on the "
            f"selected model {md_literal(s.model)}, whose attacker is not in them; "
            f"{md_literal(s.model)}'s own attacker runs on your image below."
        )
    name, axis_title, hint = METRICS[metric]
    grids = live.attack_grids(df, metric)  # the mean, its 95 % bootstrap interval and n per (R, ε)
    grid = grids["value"]
    cols = [("∞" if math.isinf(float(c)) else f"{float(c):g}") for c in grid.columns]
    rows = [f"{float(r):g}" for r in grid.index]
    values = grid.to_numpy(dtype=float)
    shape = values.shape
    low = grids["low"].to_numpy(dtype=float) if "low" in grids else np.full(shape, np.nan)
    high = grids["high"].to_numpy(dtype=float) if "high" in grids else np.full(shape, np.nan)
    n_eval = grids["n"].to_numpy(dtype=float) if "n" in grids else np.full(shape, np.nan)
    exp_delta = live.attack_delta(df)
    d_text = live.delta_text(exp_delta).removeprefix(", ")

    def _cell(v: float, lo: float, hi: float) -> str:
        """A cell's text: its value and, below it, its 95 % interval."""
        if math.isnan(v):
            return ""
        return f"{v:.3g}" + ("" if math.isnan(lo) or math.isnan(hi) else f"<br>[{lo:.3g}, {hi:.3g}]")

    def _hover(i: int, j: int) -> list[str]:
        ci = "" if math.isnan(low[i, j]) else f" [{low[i, j]:.4g}, {high[i, j]:.4g}] (95 % bootstrap)"
        n = "n not recorded" if math.isnan(n_eval[i, j]) else f"n = {int(n_eval[i, j])} released images"
        return [f"R = {rows[i]}, ε = {cols[j]}", ci, f"{n}, {ATTACKED.name}'s {d_text}"]

    # numeric axes (cell i at i, ticks named): a setting between measured cells gets a fractional place
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=list(range(len(cols))),
            y=list(range(len(rows))),
            colorscale="Viridis",
            colorbar={"title": name},
            text=[[_cell(values[i, j], low[i, j], high[i, j]) for j in range(shape[1])]
                  for i in range(shape[0])],
            texttemplate="%{text}",
            customdata=[[_hover(i, j) for j in range(shape[1])] for i in range(shape[0])],
            hovertemplate="%{customdata[0]}<br>" + name + " = %{z:.4g}%{customdata[1]}<br>%{customdata[2]}"
            "<extra></extra>",
            name=f"{name} (measured)",
        )
    )
    col_pos = charts.grid_position([float(c) for c in grid.columns], OWN_EPSILON, log=True)
    row_pos = charts.grid_position([float(r) for r in grid.index], s.radius, log=False)
    reading = live.attack_at(df, radius=s.radius, epsilon=OWN_EPSILON, metric=metric)
    if col_pos is not None and row_pos is not None and reading is not None:
        on_grid = col_pos.is_integer() and row_pos.is_integer()
        value = reading.value
        label = "current (R, ε)" if on_grid else "current (R, ε), interpolated"
        ci = "" if reading.low is None else f" {reading.interval_text}"
        hover = f"R = {s.radius:g}, ε = {OWN_EPSILON:g}<br>{name} ≈ {value:.4g}{ci}<br>{reading.how}"
        hover += "<extra></extra>"
        # an outline around the cell (or the cells the estimate is read between), never over a value: the
        # cell's own text stays readable
        c0, c1 = math.floor(col_pos) - 0.5, math.ceil(col_pos) + 0.5
        r0, r1 = math.floor(row_pos) - 0.5, math.ceil(row_pos) + 0.5
        box = {"color": "crimson", "width": 3 if on_grid else 2, "dash": "solid" if on_grid else "dash"}
        fig.add_trace(
            go.Scatter(
                x=[c0, c1, c1, c0, c0],
                y=[r0, r0, r1, r1, r0],
                mode="lines",
                line=box,
                fill="toself",
                fillcolor="rgba(0,0,0,0)",
                hoveron="fills",
                name=label if on_grid else "measured cells it is read between",
                hovertemplate=hover,
            )
        )
        if not on_grid:  # the setting itself: marks on the grid's lower and left edges, at its ε and R
            fig.add_trace(
                go.Scatter(
                    x=[col_pos, -0.5],
                    y=[-0.5, row_pos],
                    mode="markers",
                    name=label,
                    marker={"symbol": ["triangle-up", "triangle-right"], "size": 12, "color": "crimson"},
                    cliponaxis=False,
                    hovertemplate=hover,
                )
            )
        st.caption(
            f"At the current R = {s.radius:g} and {ATTACKED.name}'s ε = {OWN_EPSILON:g} (half the sidebar's "
            "total "
            f"ε = {s.epsilon:g}): {name} ≈ {value:.3g}, {reading.how}"
            + ("." if reading.low is None else f"; interval {reading.interval_text}.")
        )
    else:
        st.caption(
            f"The current (R = {s.radius:g}, {ATTACKED.name}'s ε = {OWN_EPSILON:g}) lies outside the "
            "experiment's grid "
            f"(R {rows[0]}–{rows[-1]}, ε {cols[0]}–{cols[-1]}): not marked."
        )
    fig.update_layout(
        xaxis={
            "title": f"{ATTACKED.name}'s ε, half the total of a sent release (∞ = no noise)",
            "tickvals": list(range(len(cols))),
            "ticktext": cols,
        },
        yaxis={
            "title": "R (ℓ∞ radius in the embedding)",
            "tickvals": list(range(len(rows))),
            "ticktext": rows,
        },
        legend_title_text="marker",
        showlegend=True,
    )
    # at 1000 px: the title wrapped, room for the y title, the legend below (room for every cell's interval)
    charts.narrow_heatmap(
        fig, title=f"Attacker's {name} — {dataset}/{measured_text} ({hint}); {ATTACKED.name} at {d_text}",
        rows=len(rows),
    )
    ui.chart(fig, name=f"attack-{metric}-{dataset}", data=grid.reset_index())
    baseline = _baseline(dataset)
    n_eval = sorted({int(v) for v in df["n_eval"].dropna()}) if "n_eval" in df else []
    n_text = (
        f"n = {', '.join(map(str, n_eval))} released test images per cell" if n_eval else "n not recorded"
    )
    if baseline is None:
        st.caption(f"Metrics average over released test images only ({n_text}).")
    else:
        ref = baseline.summary()
        st.markdown(
            f"**No-release baseline** (the training mean image as the guess for each of {baseline.n} test "
            f"images, computed from the data): SSIM {ref['ssim']:.3f}, PSNR {ref['psnr']:.1f} dB, "
            f"ℓ1 {ref['l1']:.3f}, ℓ2 {ref['l2']:.3f}. A cell no better than this has learned nothing about "
            f"the image from the release. The cells average over released test images only ({n_text})."
        )

st.subheader("On your image")
SELECTED_REASON = SELECTED.attack_unavailable()  # the sidebar's mechanism: why no attacker reads it, or ""
if SELECTED_REASON:
    st.info(f"No attacker runs on your image under {SELECTED.label}: {SELECTED_REASON}.")
    st.stop()
loaded = pipelines.pipeline(s)
if loaded is None:
    st.stop()
pipe = loaded.pipeline
image = require_image(loaded.dataset, pipe.image_shape)
ctx = mv.posthoc(s, loaded, image)  # the sidebar's mechanism on its model
if ctx is None:
    st.stop()
try:
    best = attack_view.noise_free(ctx)  # ε = ∞: the attacker's best case, and whether one is shipped
except CheckpointError as exc:  # a card or weights that do not match this model
    st.error(f"The attacker of {loaded.dataset}/{loaded.model} cannot be used: {pipelines.public_text(exc)}")
    st.stop()
if best is None:
    st.info(
        f"No scale-told attacker is shipped for {loaded.dataset}/{loaded.model}: train it with "
        f"`.venv/bin/python -m privcore train told-attacker --dataset {loaded.dataset} "
        f"--model {loaded.model}`."
    )
    st.stop()
phi = mv.certify(ctx) if SELECTED.needs_certificate else None
if SELECTED.needs_certificate and phi is None:
    st.stop()
st.caption(
    f"Simulated {SELECTED.name} releases of your image on {loaded.dataset}/{loaded.model} at several total ε "
    f"(the sidebar's ε = {s.epsilon:g} among them){f', δ = {s.delta:g}' if SELECTED.uses_delta else ''}"
    f"{f', R = {ctx.radius:g}' if 'radius' in SELECTED.parameter_names else ''}; fresh secure noise each, "
    "shown here only, not recorded in the ledger. Each is decoded by the model's scale-told attacker, told "
    "the release's public noise scale b, as for a sent release on the Release page. ε = ∞ is the released "
    "vector without noise (told b = 0): the attacker's best case. One image and one draw each: no interval."
)
x = image.tensor
scale = max(1, 120 // pipe.image_shape[2])
live = tuple(sorted({*LIVE_EPSILONS, float(s.epsilon)}))  # total ε, the sidebar's among them
# a wrapping row of fixed-width tiles: on a narrow screen they move to the next line instead of overlapping
tile_row = st.container(horizontal=True, gap="small")
tiles = [tile_row.container(width=128) for _ in range(len(live) + 3)]
tiles[0].image(framed(encode_png(x, scale=scale)), caption="your image", width=120)
rows = []
try:
    mean_image = torch.from_numpy(_baseline_of(loaded.dataset)[1])
except (DatasetUnavailableError, ValueError, OSError):
    mean_image = None
if mean_image is not None:  # what an attacker outputs with no release at all
    m0 = image_metrics(x[None], mean_image[None])
    ssim0, psnr0 = float(m0.ssim[0]), float(m0.psnr[0])
    tiles[1].image(
        framed(encode_png(mean_image, scale=scale)),
        caption=f"no release (training mean): SSIM {ssim0:.2f}, PSNR {psnr0:.1f} dB",
        width=120,
    )
    rows.append({"epsilon": "no release (baseline)", "released": False, "ssim": ssim0, "psnr": psnr0,
                 "l1": float(m0.l1[0]), "l2": float(m0.l2[0])})
for col, eps in zip(tiles[2:], (*live, math.inf), strict=True):
    if math.isinf(eps):
        told = best
    else:
        res = mv.simulate(ctx, s, phi, epsilon=eps, label="Attack page")
        told = attack_view.sent_attack(SELECTED, pipe, res, x) if res.released else None
    mine = " (sidebar)" if eps == s.epsilon else ""
    label = "ε = ∞" if math.isinf(eps) else f"ε = {eps:g}{mine}"
    if told is None:
        col.markdown(f"**{label}**\n\n### ⊥\nnothing released")
        rows.append({"epsilon": eps, "released": False, "ssim": None, "psnr": None, "l1": None, "l2": None})
        continue
    m = told.metrics
    col.image(
        framed(encode_png(told.reconstruction, scale=scale)),
        caption=f"{label}: SSIM {m['ssim']:.2f}, PSNR {m['psnr']:.1f} dB (told b = {told.told_scale:.3g})",
        width=120,
    )
    rows.append({"epsilon": eps, "released": True, **m})
if st.button("Draw new noise", key="atk_resample", icon=":material/casino:"):
    mv.resample("Attack page")
    st.rerun()
# ⊥ rows show "–" with a legend, never a raw None
st.dataframe(tables.attack_table(rows), hide_index=True)
st.caption(tables.ATTACK_LEGEND)
