"""privlens home page: what the product is, the mechanisms it implements, and their noise, live.

Layout and widgets only: every number comes from privcore (no maths in this file). ε and δ are
the sidebar's; α (inference privacy) and R (PTR) are the sidebar's too, each shown here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from privcore.mechanisms import (
    PTR,
    GaussInput,
    GaussInputRelease,
    GaussOutput,
    GaussOutputRelease,
    GlobalLaplace,
    LapOutput,
    LapOutputRelease,
    LDPEmbedding,
    LDPImage,
    global_scales,
    ptr_scales,
    registry,
)
from privlens import pipelines, ui
from privlens.settings import ALPHA_GRID, RADIUS_GRID

LIPSCHITZ = [0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 50.0]
EMBEDDING_BOUND = 3.0

s = ui.page_setup()
st.title("privlens")
st.markdown(
    "**privlens** shows what actually leaves your device when an ML inference service is made private. "
    "Pick a mechanism and its privacy parameters and the dashboard computes, with the `privcore` "
    "library, the certified noise it adds, the privatized release (or the refusal ⊥), what an attacker "
    "could rebuild from it, and where it sits on the privacy–utility curves. It implements posthoc "
    "privacy by a certified global mechanism (one Lipschitz constant G certified over a public box: "
    "(ε, 0, R), never ⊥, the default) and by extended Propose-Test-Release over exact local Lipschitz "
    "constants, inference privacy "
    "(Lap-Output, Gauss-Output, Gauss-Input) with its accounting, and local-DP baselines; all noise is "
    "drawn by exact samplers on a fixed grid from the operating system's secure random source."
)
st.page_link(
    ui.page_path("release"),
    label="Upload an image and see what would be released →",
    icon=":material/upload:",
)

epsilon, delta = s.epsilon, s.delta
left, right = st.columns(2)
with left:
    st.markdown(
        f"ε = **{epsilon:g}**, δ = **{delta:g}** (from the sidebar; ε is the total of one sent release"
        + "".join(f", so {m.name} runs at ε/{1 / m.epsilon_share:g} = {m.mechanism_epsilon(epsilon):g}"
                  for m in registry.MECHANISMS if m.epsilon_share != 1) + ")"
    )
    ui.bound_widget(
        "select_slider",
        "alpha",
        "α (inference-privacy radius)",
        options=ALPHA_GRID,
        format_func=ui.fmt_num,
        suffix="_home",
    )
with right:
    ui.bound_widget(
        "select_slider",
        "radius",
        "R (PTR radius, ℓ∞ on the embedding)",
        options=RADIUS_GRID,
        format_func=ui.fmt_num,
        suffix="_home",
    )
    lipschitz = st.select_slider(
        "μ (global Lipschitz constant; G for Global, Δp for PTR)",
        options=LIPSCHITZ,
        value=1.0,
        key="home_lipschitz",
    )
s = ui.settings()
alpha, radius = s.alpha, s.radius
# LDP's sizes are the sidebar's dataset's: its images (from its model card) and its embedding
SHAPE = pipelines.image_shape(s.dataset)
try:
    from privcore.data import get_spec

    EMBEDDING_DIM: int | None = int(get_spec(s.dataset).latent_dim)
except (ImportError, ValueError):
    EMBEDDING_DIM = None

ROWS: list[dict[str, Any]] = []


def _row(
    name: str,
    paper: str,
    formula: str,
    build: Callable[[], tuple[str, float, str]],
    *,
    refused: str | None = None,
) -> None:
    """One mechanism: build it through privcore; show its noise or, in plain words (``refused``, else
    privcore's message), why it is refused."""
    try:
        label, value, guarantee = build()
    except ValueError as exc:
        st.info(f"**{name} refused at these settings.** {refused or exc}")
        ROWS.append({"mechanism": name, "paper": paper, "noise": formula, "now": "refused", "guarantee": ""})
        return
    ROWS.append(
        {
            "mechanism": name,
            "paper": paper,
            "noise": formula,
            "now": f"{label} = {value:.4g}",
            "guarantee": guarantee,
        }
    )


def _gauss_input(calibration: str) -> tuple[str, float, str]:
    mech = GaussInput(epsilon=epsilon, delta=delta, alpha=alpha, calibration=calibration)
    return "σ", mech.sigma, mech.guarantee.describe()


def _gauss_output() -> tuple[str, float, str]:
    mech = GaussOutput(epsilon=epsilon, delta=delta, alpha=alpha, lipschitz=lipschitz)
    return "σ", mech.sigma, mech.guarantee.describe()


def _lap_output() -> tuple[str, float, str]:
    mech = LapOutput(epsilon=epsilon, alpha=alpha, lipschitz=lipschitz)
    return "b", mech.scale, mech.guarantee.describe()


def _ptr() -> tuple[str, float, str]:  # at ε/2: its (2·ε/2, δ/2, R) spends the sidebar's total ε
    half = PTR().mechanism_epsilon(epsilon)
    scales = ptr_scales(epsilon=half, delta=delta, radius=radius, delta_p=lipschitz)
    return "b", scales.release_scale, scales.guarantee.describe()


def _global() -> tuple[str, float, str]:
    scales = global_scales(epsilon=epsilon, radius=radius, global_lipschitz=lipschitz)
    return "b", scales.noise_scale, scales.guarantee.describe()


def _ldp_image() -> tuple[str, float, str]:
    if SHAPE is None:
        raise ValueError(f"the image size of {s.dataset} is not known here (no shipped model card)")
    mech = LDPImage(epsilon=epsilon, values_per_image=SHAPE[0] * SHAPE[1] * SHAPE[2])
    return "b", mech.scale, mech.guarantee.describe()


def _ldp_embedding() -> tuple[str, float, str]:
    if EMBEDDING_DIM is None:
        raise ValueError(f"the embedding size of {s.dataset} is not known here")
    mech = LDPEmbedding(epsilon=epsilon, bound=EMBEDDING_BOUND)
    return "b", mech.scale_for(EMBEDDING_DIM), mech.guarantee.describe()


def _image_size() -> str:
    """"8×8, d = 64" (× 3 for colour) for the sidebar's dataset."""
    if SHAPE is None:
        return "d = its pixel values"
    c, h, w = SHAPE
    return f"{h}×{w}{'×3' if c == 3 else ''}, d = {c * h * w}"


_row(
    f"{GaussInputRelease.name} (analytic)",
    "Tian et al. Def. 5; Balle & Wang 2018",
    "C(x + N(0, σ²)), σ from α/ε, δ",
    lambda: _gauss_input("analytic"),
)
_row(
    f"{GaussInputRelease.name} (classic)",
    "Tian et al. Def. 5",
    "σ = √(2 ln(1.25/δ))·α/ε, ε < 1",
    lambda: _gauss_input("classic"),
    refused=(
        "The classic Gaussian formula is proven only for ε < 1. The analytic calibration in the row above "
        "(Balle & Wang 2018) holds for every ε and adds less noise: use that one."
    ),
)
_row(GaussOutputRelease.name, "Tian et al. Def. 4", "C(x) + N(0, σ²), σ from α·μ₂/ε, δ (analytic)",
     _gauss_output)
_row(LapOutputRelease.name, "Tian et al. Def. 3", "C(x) + Lap(μ₁·α/ε)", _lap_output)
_row(
    f"Extended {PTR.name} at ε/2 (release)",
    "posthoc Alg. 1, Thm 4.4",
    "test Lap(R/(ε/2)); release f(z) + Lap(Δp·R/(ε/2))",
    _ptr,
)
_row(GlobalLaplace.label, "docs/DESIGN.md, Beyond the papers", "f(clip z) + Lap(G·R/ε)", _global)
_row(f"LDP-Image ({s.dataset}: {_image_size()})", "posthoc Table 2", "clip to [0,1], Lap(d/ε)", _ldp_image)
_row(
    f"LDP-Embedding (k = {EMBEDDING_DIM or '?'}, B = {EMBEDDING_BOUND:g})",
    "posthoc Table 2",
    "clip to [−B,B], Lap(2Bk/ε)",
    _ldp_embedding,
)

# a row that wraps: each metric as wide as its label and value, never cut to "σ = 0.3…"
with st.container(horizontal=True, gap="medium"):
    for row in ROWS[:6]:
        st.metric(row["mechanism"], row["now"], width="content")

st.subheader("Mechanisms")
# a static table: its text wraps at any width (a data grid cuts its columns off on a laptop screen)
st.table(
    [{k: r[k] for k in ("mechanism", "paper", "noise", "now")} for r in ROWS],
    hide_index=True,
)
with st.expander("Guarantees in plain words"):
    for row in ROWS:
        if row["guarantee"]:
            st.markdown(f"- {row['guarantee']}")
st.caption(
    "σ and b are the papers' formulas. The exact grid samplers draw at least this much noise; for the "
    "discrete Gaussian the proven bound can add a few per cent (see privcore.mechanisms.sampling)."
)
