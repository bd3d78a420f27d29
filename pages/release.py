"""Release: upload an image (or pick a sample), see what a release of it would be, compare the
mechanisms, and send it.

Two mechanisms release the obfuscated embedding (privcore.mechanisms.registry, family "posthoc"): the
certified global mechanism, f(clip z) + Lap(G·R/ε) with G certified over the model's public box —
(ε, 0, R), never ⊥ (docs/DESIGN.md, "Beyond the papers"; the default) — and extended
Propose-Test-Release (posthoc paper, Algorithm 1, Theorem 4.4), run at ε/2 so that its statement
(2·ε/2, δ/2, R) spends the sidebar's total ε. Before Send the page shows what the release would be in
distribution (the guarantee, the noise scale, the probability that it is released at all) and no draw,
and compares the mechanisms (privlens.compare_panel); Send draws once and charges the ledger
(privlens.sending), then the page shows the sent release — the noisy vector and the attacker's
reconstruction from it, or ⊥ with the reason — and its downloads. Widgets and layout only.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from privcore.errors import PrivcoreError
from privcore.inputs import note_text
from privcore.inputs.images import encode_png
from privlens import (
    budget,
    checks,
    compare_panel,
    globalmech,
    live,
    pipelines,
    ptr,
    report,
    sending,
    ui,
    upload,
)
from privlens.ledger import ledger_totals
from privlens.outcome import outcome_summary, plain_guarantee
from privlens.results import load_results, reading

s = ui.page_setup()
st.title("Release")
st.caption(
    "What a release of your image would be, and sending it. The image is embedded (β-VAE mean z = g(x)) "
    "and an obfuscator f maps z to the vector that is released with Laplace noise: by the certified global "
    "mechanism (f(clip z) + Lap(G·R/ε), G certified over a public box: (ε, 0, R), never ⊥) or by extended "
    "Propose-Test-Release (z's local Lipschitz constant certified, then f(z) + noise or a refusal ⊥; posthoc "
    "Algorithm 1, Theorem 4.4). The sidebar's ε is the total of a sent release's guarantee for both."
)

if not s.is_posthoc:
    st.info(
        f"The sidebar's mechanism is **{s.mechanism}**, an inference-privacy mechanism: its release (a noisy "
        "prediction) is on the Inference privacy page. This page releases the obfuscated embedding with the "
        "certified global mechanism or PTR."
    )
    st.page_link(
        ui.page_path("inference_privacy"), label="Open the Inference privacy page", icon=":material/shield:"
    )
    b = st.columns(2)
    for col, name, key in ((b[0], "Global", "use_global"), (b[1], "PTR", "use_ptr")):
        if col.button(f"Use {ui.mechanism_label(name)} here", key=key):
            ui.update_settings(mechanism=name)
            st.rerun()
    st.stop()

loaded = pipelines.pipeline(s)
if loaded is None:
    st.stop()
pipe = loaded.pipeline
shape = tuple(pipe.image_shape)
names = pipe.class_names

# ----------------------------------------------------------------------------------- input
st.subheader("1 · Your image")
image = upload.pick_image(loaded.dataset, shape, key="release")
for note in image.decoded.notes:
    st.warning(note_text(note))
checks.confirm(loaded.dataset, image, key="release")  # blank or out of domain: stop until confirmed

# ---------------------------------------------------------------- the mechanism's context (no draw)
eps_m = s.mechanism_epsilon  # the ε the mechanism runs at: PTR ε/2, Global ε
ptr.disk_cache()  # a misconfigured deployment (PRIVLENS_DEPLOYMENT) stops here: nothing is released
ctx = gctx = phi = look = glook = None
try:
    if s.is_ptr:
        ctx = ptr.context(s, loaded, image)
        phi = None if ctx is None else ptr.certify(ctx)
        if phi is None:
            st.stop()
        look = ptr.outlook(ctx, phi, epsilon=eps_m, delta=s.delta)
        sent, g = ptr.latest(ctx, epsilon=eps_m, delta=s.delta), look.guarantee
    else:
        gctx = globalmech.context(s.radius, loaded, image)
        if gctx is None:
            st.stop()
        glook = globalmech.outlook(gctx, epsilon=eps_m)
        sent, g = globalmech.latest(gctx, epsilon=eps_m), glook.guarantee
except (ValueError, PrivcoreError) as exc:  # e.g. parameters the exact sampler cannot honour
    st.error(f"**Nothing can be sent at these settings:** {exc}")
    st.stop()
here = ctx if ctx is not None else gctx
result = None if sent is None else sent.outcome  # a privcore.api.Release, drawn through the API
released = result is not None and result.released

# ------------------------------------------------------------------------------ pictures
st.subheader("2 · What happens to it")
scale = max(1, 160 // shape[2])
views = ptr.image_views(here, scale=scale)  # ε-independent: computed once per image
clean_class = views.clean_class if glook is None else glook.clean_class
cols = st.columns(3)
cols[0].image(views.input_png, caption="As the model sees it (x)", width=160)
cols[1].image(views.reconstruction_png, caption="VAE reconstruction g⁻¹(g(x))", width=160)
attack_png = None
if result is None:
    cols[2].info("The attacker's reconstruction is computed from the sent release: it appears once you send.")
elif released:
    rec = pipe.reconstruct(ptr.as_tensor(result.value))[0] if pipe.attacker is not None else None
    if rec is not None:
        attack_png = encode_png(rec, scale=scale)
        cols[2].image(
            attack_png, caption=f"Attacker's reconstruction from sent release #{sent.id}", width=160
        )
    else:
        cols[2].info("No attacker is shipped for this model.")
else:
    cols[2].markdown(f"### ⊥\nSent release #{sent.id} is ⊥: the attacker gets nothing but ⊥.")

# ------------------------------------------------------------------------------ before sending
st.subheader("3 · What the release would be")
st.caption(sending.custody())
if look is not None:  # PTR
    st.info(budget.ptr_epsilon_note(s), icon=":material/call_split:")
    # a wrapping row, each metric as wide as its text: five columns cut values to "0.8…" at 1000 px
    m = st.container(horizontal=True, gap="medium")
    m.metric("φ (private, yours only)", f"{phi.phi:.4g}", width="content")
    m.metric(
        "P[this image is released]",
        f"{100 * look.probability:.1f} %",
        help="P[φ + Lap((R+ζ)/ε) > ln(1/δ)·(R+ζ)/ε] at PTR's ε = total/2, from this image's certified φ "
        "(posthoc Alg. 1).",
        width="content",
    )
    m.metric(
        "threshold ln(1/δ)·b",
        f"{look.threshold:.4g}",
        help="b = (R + ζ)/ε, the test's Laplace scale.",
        width="content",
    )
    m.metric("Δp", f"{ctx.delta_p:.4g}", help="Proposed sensitivity μ + 3σ from training embeddings.",
             width="content")
    m.metric(
        "noise scale Δp·R/ε",
        f"{look.noise_scale:.4g}",
        help="Laplace scale per coordinate of a released vector at PTR's ε = total/2 (the exact sampler's "
        "grid adds a little).",
        width="content",
    )
    noise, chance = (
        look.noise_scale,
        f"with probability {100 * look.probability:.1f} % the noisy test passes and ",
    )
    otherwise = "; otherwise it is ⊥"
else:  # Global
    m = st.container(horizontal=True, gap="medium")  # wraps, as PTR's row: each metric as wide as its text
    m.metric(
        "G (certified)",
        f"{glook.global_lipschitz:.4g}",
        help=f"sup of ‖J_f‖ (ℓ∞→ℓ1) over the public box: {globalmech.certified_how(glook)}.",
        width="content",
    )
    m.metric("P[this image is released]", "100 %", help="The global mechanism never refuses (no ⊥).",
             width="content")
    m.metric(
        "noise scale G·R/ε",
        f"{glook.noise_scale:.4g}",
        help="Laplace scale per coordinate of a released vector (the exact sampler draws "
        f"{glook.noise_scale_effective:.6g}: its grid and f's float64 rounding add a little).",
        width="content",
    )
    m.metric("δ", "0", help="A pure guarantee: (ε, 0, R).", width="content")
    st.markdown(
        f"**G = {glook.global_lipschitz:.7g}** — {globalmech.certified_how(glook)}. Before f is applied, "
        "z is clipped to the model's **public box** (from its training embeddings, fixed before any image; "
        "clipping keeps neighbours within R of each other, so one G covers every image):"
    )
    box = pd.DataFrame(
        [glook.lower, glook.upper],
        index=["lower", "upper"],
        columns=[f"z{i + 1}" for i in range(len(glook.lower))],
    )
    st.dataframe(box.style.format("{:.3g}"), width="content")
    st.caption(
        "Your embedding lies inside the box: clipping leaves it unchanged."
        if glook.inside
        else "Your embedding lies partly outside the box: the release is of its clipped point (shown to "
        "you only)."
    )
    noise, chance, otherwise = glook.noise_scale, "", ""
st.markdown(
    f"**If you send**, {s.mechanism} draws once: {chance}the release is the obfuscated vector plus Laplace "
    f"noise of scale {noise:.4g} on each coordinate (on average {noise:.4g} away from the noise-free vector)"
    f"{otherwise}. Without noise the classifier would read it as **{names[clean_class]}** (shown to you "
    "only: the noise-free vector itself is never released). Nothing is drawn before you send, so there is "
    "no draw to look at, keep or discard."
)
st.markdown("**At this setting** (follows the sliders):")
lv = st.columns(2)
run_delta = s.delta if s.is_ptr else 0.0  # the δ this mechanism runs at (Global: none)
if s.is_ptr:
    acc = reading(
        loaded.dataset,
        "table1",
        live.accuracy_at,
        model=loaded.model,
        certifier=s.certifier,
        epsilon=eps_m,
        delta=run_delta,
    )
else:
    acc = reading(
        loaded.dataset, "table1-global", live.global_accuracy_at, model=loaded.model, epsilon=eps_m,
        radius=s.radius,
    )
# every reading says its n, interval and δ (under the value: a metric too narrow for them would cut them)
if acc is None:
    lv[0].metric("model accuracy at this ε", "—", help="Not measured at this ε (Trade-offs page).")
else:
    lv[0].metric(
        f"model accuracy at this ε{live.delta_text(acc.delta)}",
        f"{acc.value:.3f}",
        help=f"Test accuracy, {acc.how}.",
    )
    ci = "" if acc.low is None else f"interval {acc.interval_text}, "
    lv[0].caption(f"{ci}{acc.how}")
    if acc.other_delta(run_delta):
        lv[0].warning(
            f"Measured at δ = {acc.delta:g}, not at the sidebar's δ = {run_delta:g} (no experiment ran at "
            f"that δ). PTR's test threshold ln(1/δ)·b is {'higher' if run_delta < acc.delta else 'lower'} "
            f"at δ = {run_delta:g}, so it releases {'less' if run_delta < acc.delta else 'more'} often and "
            f"the accuracy there is {'lower' if run_delta < acc.delta else 'higher'} than this.",
            icon=":material/warning:",
        )
if s.is_ptr:  # the attack experiment attacks PTR releases, at PTR's own ε
    ssim = reading(loaded.dataset, "attack", live.attack_at, radius=s.radius, epsilon=eps_m)
    if ssim is None:
        lv[1].metric("attacker's SSIM at (R, ε)", "—", help="Not measured at this (R, ε) (Attack page).")
    else:
        lv[1].metric(
            f"attacker's SSIM at (R, ε){live.delta_text(ssim.delta)}",
            f"{ssim.value:.3f}",
            help=f"Mean over released test images at PTR's ε = {eps_m:g}, {ssim.how}.",
        )
        ci = "" if ssim.low is None else f"interval {ssim.interval_text}, "
        lv[1].caption(f"{ci}{ssim.how}")
    r_star = "—" if phi.r_star is None else f"{phi.r_star:.4g}"
    st.caption(
        f"φ = max(R*/2, R* − R) with R* = {r_star}, the largest certified radius whose local Lipschitz "
        f"constant stays ≤ Δp (searched up to R_max = {ctx.r_max:.3g} on a grid of spacing "
        f"ζ = {phi.zeta:.3g}; the test noise is Lap((R + ζ)/ε)). Certifier: {ctx.certifier}. Moving ε or δ "
        "reuses φ: no new solve."
    )

st.subheader("4 · Which mechanism")
compare_panel.panel(s, loaded, image, constant=None if gctx is None else gctx.constant, phi=phi, ptr_ctx=ctx)

# ------------------------------------------------------------------------------ send
st.subheader("5 · Send")
if s.is_ptr:
    spends = (
        f"(ε, δ/2, R) = ({g.epsilon:g}, {g.delta:g}, {s.radius:g})** (posthoc Theorem 4.4, PTR run at ε/2 "
    )
    spends += f"= {eps_m:g}, δ = {s.delta:g})."
    on_send, args, kwargs = ptr.send, (ctx, phi), {"epsilon": eps_m, "delta": s.delta}
else:
    spends = (
        f"(ε, 0, R) = ({g.epsilon:g}, 0, {s.radius:g})** (the certified global mechanism: no δ, never ⊥)."
    )
    on_send, args, kwargs = globalmech.send, (gctx,), {"epsilon": eps_m}
st.info(f"**Sending spends {spends} {plain_guarantee(g)}")
if (note := pipelines.embedder_note(pipe)) is not None:
    st.caption(note)
for warning in budget.extreme_warnings(g, n=pipelines.dataset_size(pipe)):
    st.warning(warning, icon=":material/warning:")
failed = sending.failure(ptr.PAGE)
if failed is not None:
    st.error(f"**Nothing was sent:** {failed}")
a = st.columns(2)
a[0].button(
    "Send this release" if sent is None else "Send another release",
    key="send",
    type="primary",
    icon=":material/send:",
    on_click=on_send,
    args=args,
    kwargs=kwargs,
    help="Draws the noise now, once, and charges the session ledger for it; you see the outcome after it "
    "has been sent. Another send is a new draw, charged again.",
)
a[1].download_button(
    "Input (PNG)",
    views.input_png,
    icon=":material/download:",
    file_name="input.png",
    mime="image/png",
    key="dl_input",
    on_click="ignore",
)

doc = None
if sent is not None:
    st.subheader("6 · The sent release")
    state = f"sent as release #{sent.id}"
    if s.is_ptr:
        ran = result.mechanism_result  # PTR's own result: φ and φ̂ are yours, never in the file
        text = outcome_summary(ran)
        (st.success if result.released else st.error)(f"**{text.headline}** ({state}). {text.detail}")
        st.markdown(f"Test: {text.test}")
        o = st.columns(2)
        o[0].metric(
            "φ̂ = φ + Lap",
            f"{ran.phi_noisy:.4g}",
            help="The noisy test value (ε-DP): yours, not in the file.",
        )
    else:
        st.success(
            f"**Released** ({state}). The output is the obfuscated vector of the clipped embedding plus "
            f"Laplace noise of scale {result.noise_scale_effective:.4g} per coordinate."
        )
        o = st.columns(2)
        g_value, how = result.public["global_lipschitz"], result.public["global_lipschitz_how"]
        o[0].metric("G", f"{g_value:.6g}", help=f"Certified ({how}) by this server.")
    o[1].metric(
        "noise drawn at scale",
        f"{result.noise_scale_effective:.6g}",
        help="What the exact sampler drew per coordinate (the noise scale on its grid).",
    )
    doc = result.document()  # the API's public JSON (privcore.api.Release.document), as privcore.release
    if released:
        b_eff = result.noise_scale_effective
        noisy_class = int(pipe.classify(ptr.as_tensor(result.value), b_eff).argmax(-1)[0])
        vector = ", ".join(f"{v:.3f}" for v in result.value)
        told = (
            f"; it is told the public noise scale {b_eff:.4g}, which costs no privacy."
            if pipe.classifier_source == "release-classifier"
            else "."
        )
        st.markdown(
            f"Released vector ({len(result.value)} numbers): `{vector}`  \n"
            f"The server's classifier reads it as **{names[noisy_class]}** (without noise: "
            f"{names[clean_class]}){told}"
        )
    d = st.columns(2)
    with d[0]:
        ui.download_json(
            "Release (JSON)",
            doc,
            file_name="release.json",
            key="dl_release",
            help=f"Sent release #{sent.id} as a file: it is already in the ledger, so this costs nothing.",
        )
    if attack_png is not None:
        d[1].download_button(
            "Reconstruction (PNG)",
            attack_png,
            icon=":material/download:",
            file_name="attacker.png",
            mime="image/png",
            key="dl_attack",
            on_click="ignore",
        )
    st.success(
        f"Sent: release #{sent.id} is in the session ledger, charged ({g.epsilon:g}, {g.delta:g}, "
        f"{s.radius:g}) once. Sending another draws new noise and is charged again."
    )


ledger_now = list(ui.ledger_rows())  # read here: the download runs outside this script's session


def _report() -> str:
    """The session report, built when the user downloads it (Streamlit calls this lazily, outside the
    script run: it uses only what this run captured — at most the release already sent)."""
    if s.is_ptr:
        curve = report.accuracy_figure(
            load_results(loaded.dataset, "table1"),
            model=loaded.model,
            epsilon=eps_m,
            label="PTR's ε = total/2",
            delta=s.delta,
        )
    else:
        curve = report.accuracy_figure(
            load_results(loaded.dataset, "table1-global"),
            model=loaded.model,
            epsilon=eps_m,
            column="epsilon_total",
            mechanism="Global",
        )
    try:
        totals = ledger_totals(ledger_now)
    except ValueError:
        totals = []
    return report.session_report(
        settings=s,
        guarantee_text=budget.spent_text(s) + " " + plain_guarantee(g),
        image_name=image.name,
        input_png=views.input_png,
        release=doc,
        attacker_png=attack_png,
        figures=[] if curve is None else [curve],
        ledger=ledger_now,
        totals=totals,
        warnings=budget.extreme_warnings(g, n=pipelines.dataset_size(pipe)),
    )


st.download_button(
    "Session report (HTML)",
    _report,
    icon=":material/summarize:",
    file_name="privlens-session-report.html",
    mime="text/html",
    key="dl_report",
    on_click="ignore",
    help="Settings, guarantee, the release sent at these settings and the attacker's view of it, the curve "
    "at this ε and the ledger, in one file. Nothing that was not sent is in it.",
)

with st.sidebar:
    st.markdown("---")
    outcome = "" if result is None else f"; sent #{sent.id}: **{'released' if released else '⊥'}**"
    if s.is_ptr:
        mine = f"φ = {phi.phi:.3g}, Δp = {ctx.delta_p:.3g}, noise b = {look.noise_scale:.3g}, "
        mine += f"P[released] = {100 * look.probability:.1f} %"
    else:
        mine = f"G = {glook.global_lipschitz:.4g}, noise b = {glook.noise_scale:.3g}, P[released] = 100 %"
    st.markdown(f"**This image ({s.mechanism}):** {mine}{outcome}")
    st.caption(("Sent. " if sent is not None else "Nothing drawn or sent yet. ") + plain_guarantee(g))
