"""The mechanism chooser on the Release and Inference-privacy pages: Streamlit
glue around :func:`privlens.chooser.compare`, which holds the logic (no maths here either).

It gathers what the comparison needs for the current model and image — G (certified by this
process, :mod:`privlens.globalmech`), Δp, this image's φ for PTR only when the session already has it
or the user asks for it (certifying costs time: a button, then the progress bar of
:func:`privlens.ptr.certify`), the IP mechanisms' calibrations (:mod:`privlens.ip`) and the measured
accuracies (:mod:`privlens.live`) — and shows the table, the recommended mechanism with the reason and
a button to use it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from privcore.mechanisms import registry
from privlens import chooser, globalmech, live, pipelines, ptr, ui
from privlens import ip as iplens
from privlens.image import CurrentImage
from privlens.results import load_results, reading
from privlens.settings import Settings

__all__ = ["panel"]

#: φ keys of the images whose PTR certification the user asked for on a page that is not PTR's
CERTIFY_KEY = "privlens_compare_certify"


def _ask_certify(key: tuple) -> None:
    st.session_state.setdefault(CERTIFY_KEY, set()).add(key)


def _ptr_probability(
    s: Settings,
    loaded: pipelines.Loaded,
    image: CurrentImage | None,
    *,
    phi: Any,
    ctx: Any,
    allow_certify: bool,
) -> tuple[float | None, Any]:
    """P[PTR releases this image] at (ε/2, δ): from ``phi`` (the PTR page's), else the session's φ,
    else — once the user asked — a certification with progress and cancel; None while unknown. Also
    the PTR context to offer a certification for (None: nothing to offer)."""
    if ctx is None and image is not None and loaded.pipeline.proposed_delta_p is not None:
        ctx = ptr.context(s, loaded, image)
    if ctx is None:
        return None, None
    if phi is None:
        phi = ptr.known_phi(ctx)
    if phi is None and allow_certify:
        if ctx.key not in st.session_state.get(CERTIFY_KEY, set()):
            return None, ctx
        phi = ptr.certify(ctx)
    if phi is None:
        return None, None
    try:
        half = registry.get("PTR").mechanism_epsilon(s.epsilon)
        return ptr.outlook(ctx, phi, epsilon=half, delta=s.delta).probability, None
    except ValueError:
        return None, None


def _offer_certification(ctx: Any) -> None:
    st.button(
        "Also certify for PTR",
        key="compare_certify_ptr",
        icon=":material/verified:",
        on_click=_ask_certify,
        args=(ctx.key,),
        help="PTR's P[released] for this image needs its φ (posthoc Alg. 1: a few seconds to a "
        "minute, once per image and R). Nothing is drawn or sent.",
    )


def _ip_rows(s: Settings, dataset: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per IP mechanism its (guarantee, noise in words) or why it cannot run, and its accuracy reading."""
    ip = iplens.models_if_shipped(dataset)
    if ip is None:
        return {}, {}
    noise: dict[str, Any] = {}
    accuracy: dict[str, Any] = {}
    for name, plan in iplens.plans(ip, s).items():
        if isinstance(plan, iplens.Plan):
            noise[name] = (plan.guarantee, plan.noise)
            accuracy[name] = reading(
                dataset,
                "ip",
                live.ip_accuracy_at,
                mechanism=name,
                model=plan.model.name,
                epsilon=s.epsilon,
                alpha=s.alpha,
                delta=plan.guarantee.delta,
            )
        else:
            noise[name] = plan
    return noise, accuracy


def _run_delta(name: str, s: Settings) -> float:
    """The δ mechanism ``name`` runs at under ``s`` (the experiment CSVs' δ column is that one): PTR and
    the Gaussian ones the sidebar's, Global and Lap-Output none."""
    return 0.0 if name in ("Global", "Lap-Output") else float(s.delta)


def panel(
    s: Settings,
    loaded: pipelines.Loaded,
    image: CurrentImage | None,
    *,
    constant: Any = None,
    phi: Any = None,
    ptr_ctx: Any = None,
    allow_certify: bool = True,
) -> chooser.Comparison:
    """Show the comparison for the settings, the loaded model and ``image`` and return it. ``constant``:
    the page's certified G (else certified here, once per model); ``phi``/``ptr_ctx``: the PTR page's."""
    pipe = loaded.pipeline
    if constant is None:
        constant = globalmech.certified_constant(loaded, quiet=True)
    delta_p = pipe.proposed_delta_p
    probability, offer = _ptr_probability(s, loaded, image, phi=phi, ctx=ptr_ctx, allow_certify=allow_certify)
    ip_noise, accuracy = _ip_rows(s, loaded.dataset)
    global_name = "table1-global"  # else its older name
    if load_results(loaded.dataset, global_name) is None:
        global_name = "table1_global"
    half = registry.get("PTR").mechanism_epsilon(s.epsilon)
    accuracy["Global"] = reading(
        loaded.dataset,
        global_name,
        live.global_accuracy_at,
        model=loaded.model,
        epsilon=s.epsilon,
        radius=s.radius,
    )
    accuracy["PTR"] = reading(
        loaded.dataset,
        "table1",
        live.accuracy_at,
        model=loaded.model,
        certifier=s.certifier,
        epsilon=half,
        delta=s.delta,
    )
    cmp = chooser.compare(
        epsilon=s.epsilon,
        delta=s.delta,
        radius=s.radius,
        alpha=s.alpha,
        global_lipschitz=None if constant is None else float(constant.value),
        global_how="" if constant is None else constant.how.value,
        delta_p=None if delta_p is None else float(delta_p),
        ptr_probability=probability,
        ip_noise=ip_noise,
        accuracy=accuracy,
        **({} if image is not None else {"unknown_probability": "per image: on the Release page"}),
    )
    st.caption(
        f"One sent release of each mechanism at the sidebar's **total ε = {s.epsilon:g}** (δ = {s.delta:g}, "
        f"R = {s.radius:g}; α = {s.alpha:g} for the inference-privacy mechanisms), for {loaded.dataset}/"
        f"{loaded.model}. Noise: the Laplace scale per coordinate of the released vector. Accuracy: the "
        "committed experiment results at this ε with their interval, n and the δ they were measured at "
        '(interpolated in log ε between measured points, else "not measured"). Nothing here is drawn.'
    )
    other = [
        f"{registry.get(c.name).label} at δ = {c.accuracy.delta:g}"
        for c in cmp.choices
        if c.accuracy is not None and c.accuracy.other_delta(_run_delta(c.name, s))
    ]
    if other:
        st.caption(
            f"Measured at another δ than these settings' δ = {s.delta:g}, where no experiment ran: "
            f"{', '.join(other)}. A smaller δ makes PTR refuse (⊥) more often and the Gaussian mechanisms "
            "add more noise (a larger δ the reverse), so the accuracy at these settings differs from the one "
            "shown."
        )
    # static tables (as the Inference privacy page's): drawn with the page, where a data grid redraws its
    # cells a few hundred ms after every ε or δ step
    st.table(pd.DataFrame(cmp.rows()), hide_index=True)
    notes = [f"{c.label}: {c.note}." for c in cmp.choices if c.note and c.comparable]
    st.caption(
        " ".join(notes) + (" " if notes else "") + "The inference-privacy mechanisms protect other pairs "
        "(inputs within α on the pixels, not embeddings within R): a different guarantee, not comparable, "
        "so they are shown and never ranked. Their noise is on pixels or logits, not on the embedding."
    )
    details = pd.DataFrame(cmp.details())
    if cmp.recommended is None:
        st.warning(cmp.reason)
    else:
        label = registry.get(cmp.recommended).label
        ratio = (
            ""
            if cmp.ratio is None
            else (
                f" At the same total ε, Global's noise is G/(2Δp) = **{cmp.ratio:.3f}×** PTR's, with δ = 0 "
                "and no per-image certification."
            )
        )
        st.success(f"**Recommended: {label}.** {cmp.reason}{ratio}", icon=":material/recommend:")
    with st.expander("Guarantees, calibrations and how each number was read"):
        st.table(details, hide_index=True)
    if offer is not None:
        _offer_certification(offer)
    if cmp.recommended is not None and cmp.recommended != s.mechanism and s.is_posthoc:
        st.button(
            f"Use {registry.get(cmp.recommended).label}",
            key="use_recommended",
            type="primary",
            on_click=ui.apply_settings,  # the sidebar's mechanism follows
            kwargs={"mechanism": cmp.recommended},
        )
    return cmp
