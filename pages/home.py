"""privlens home page: what the product is, the mechanisms it implements, and their noise, live.

Layout and widgets only: every number comes from privcore (no maths in this file). ε and δ are
the sidebar's; α (inference privacy) and R (posthoc) are the sidebar's too, each shown here. Each
registered mechanism's noise is its outlook on the sidebar's dataset/model (privlens.noise_table): the
numbers the Release page shows, never a constant of this page's own.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from privcore.mechanisms import registry
from privlens import glossary, noise_table, pipelines, ui
from privlens.settings import ALPHA_GRID, RADIUS_GRID

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
# every registered mechanism at the sidebar's settings, on the sidebar's model (posthoc) or its dataset's
# IP classifiers: the numbers the Release and Inference-privacy pages show. Computed in the background: a
# constant still being certified (a model's first use on this server) is a "computing…" row that the
# fragment below fills in when it is ready, so the page never waits for it.
LOADED = pipelines.pipeline(s)
_, PENDING = noise_table.noise_rows_soon(s, LOADED, wait_s=FIRST_WAIT_S)
ROWS: list[dict[str, Any]] = []


@st.fragment(run_every=POLL_S if PENDING else None)
def _mechanisms() -> None:
    """The noise of every mechanism of the registry (pending rows say so)."""
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
