"""privlens home page: what the product is, the mechanisms it implements, and their noise, live.

Layout and widgets only: every number comes from privcore (no maths in this file). ε and δ are
the sidebar's; α (inference privacy) and R (posthoc) are the sidebar's too, each shown here. Each
registered mechanism's noise is its outlook on the sidebar's dataset/model (privlens.noise_table): the
numbers the Release page shows, never a constant of this page's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from privcore.mechanisms import LDPEmbedding, LDPImage, registry
from privlens import glossary, noise_table, pipelines, ui
from privlens.settings import ALPHA_GRID, RADIUS_GRID

EMBEDDING_BOUND = 3.0
#: how long the page waits for the noise table before drawing it (pending rows then fill in), and how often
#: the table looks again while one is pending
FIRST_WAIT_S = 1.0
POLL_S = 2.0

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
        "R (posthoc radius, ℓ∞ on the embedding)",
        options=RADIUS_GRID,
        format_func=ui.fmt_num,
        suffix="_home",
    )
s = ui.settings()
# LDP's sizes are the sidebar's dataset's: its images (from its model card) and its embedding
SHAPE = pipelines.image_shape(s.dataset)
try:
    from privcore.data import get_spec

    EMBEDDING_DIM: int | None = int(get_spec(s.dataset).latent_dim)
except (ImportError, ValueError):
    EMBEDDING_DIM = None

# every registered mechanism at the sidebar's settings, on the sidebar's model (posthoc) or its dataset's
# IP classifiers: the numbers the Release and Inference-privacy pages show. Computed in the background: a
# constant still being certified (a model's first use on this server) is a "computing…" row that the
# fragment below fills in when it is ready, so the page never waits for it.
LOADED = pipelines.pipeline(s)
_, PENDING = noise_table.noise_rows_soon(s, LOADED, wait_s=FIRST_WAIT_S)
ROWS: list[dict[str, Any]] = []


def _row(name: str, paper: str, formula: str, build: Callable[[], tuple[str, float, str]]) -> None:
    """One local-DP baseline (no model): its noise through privcore, or why it is refused."""
    try:
        label, value, guarantee = build()
    except ValueError as exc:
        st.info(f"**{name} refused at these settings.** {exc}")
        ROWS.append({"mechanism": name, "model": "—", "paper": paper, "noise": formula, "now": "refused",
                     "guarantee": ""})
        return
    ROWS.append({"mechanism": name, "model": "— (baseline)", "paper": paper, "noise": formula,
                 "now": f"{label} = {value:.4g}", "guarantee": guarantee})


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




@st.fragment(run_every=POLL_S if PENDING else None)
def _mechanisms() -> None:
    """The noise of every mechanism: the registry's rows (pending ones say so) and the LDP baselines."""
    rows, pending = noise_table.noise_rows_soon(s, LOADED, wait_s=0.0)
    if PENDING and not pending:
        st.rerun()  # every row is in: draw the page once more, without polling
    ROWS.clear()
    for r in rows:
        if r.refused:
            st.info(f"**{r.label}: {r.now} at these settings.** {r.refused}")
        ROWS.append({"mechanism": r.label, "model": r.model, "paper": r.source, "noise": r.noise or "—",
                     "now": r.now, "guarantee": r.guarantee})
    if pending:
        st.caption("“computing…”: that mechanism's constants are being computed from the model's weights "
                   "on this server (a model's first use, seconds); its row fills in when it is ready.")
    _row(f"LDP-Image ({s.dataset}: {_image_size()})", "posthoc Table 2", "clip to [0,1], Lap(d/ε)",
         _ldp_image)
    _row(
        f"LDP-Embedding (k = {EMBEDDING_DIM or '?'}, B = {EMBEDDING_BOUND:g})",
        "posthoc Table 2",
        "clip to [−B,B], Lap(2Bk/ε)",
        _ldp_embedding,
    )
    # a row that wraps: each metric as wide as its label and value, never cut to "σ = 0.3…"
    with st.container(horizontal=True, gap="medium"):
        for r in rows:
            st.metric(r.label, r.now, width="content", help=r.noise or r.refused or None)
    st.subheader("Mechanisms")
    # a static table: its text wraps at any width (a data grid cuts its columns off on a laptop screen)
    st.table(
        [{k: r[k] for k in ("mechanism", "model", "paper", "noise", "now")} for r in ROWS],
        hide_index=True,
    )
    with st.expander("Guarantees in plain words"):
        for row in ROWS:
            if row["guarantee"]:
                st.markdown(f"- {row['guarantee']}")
    st.caption(
        "σ and b are each mechanism's noise scale at the sidebar's settings on the model named in its row "
        "(the Release and Inference privacy pages show the same numbers; PTR's applies when its per-image "
        "test passes). The exact grid samplers draw at least this much noise; for the discrete Gaussian the "
        "proven bound can add a few per cent (see privcore.mechanisms.sampling)."
    )


_mechanisms()

st.subheader("Glossary")
st.caption("The symbols and model names the pages use; each is also explained where the Release page first "
           "shows it (hover the ⓘ).")
st.markdown("\n".join(f"- **{term}** — {text}" for term, text in glossary.GLOSSARY.items()))
