"""Release: upload an image (or pick a sample), see what posthoc PTR would let out, and send it.

The image as the model sees it and its VAE reconstruction; before Send, what the release would be
in distribution (the guarantee, the noise scales, the probability that extended Propose-Test-Release
releases at all; posthoc paper, Algorithm 1, Theorem 4.4) and no draw; Send draws once and charges
the ledger (privlens.sending), then the page shows the sent release — the noisy vector and the
attacker's reconstruction from it, or ⊥ with the reason — and its downloads. Widgets and layout only.
"""

from __future__ import annotations

import streamlit as st

from privcore.errors import PrivcoreError
from privcore.images import encode_png
from privlens import budget, checks, live, pipelines, ptr, report, sending, ui, upload
from privlens.session import (
    ledger_totals,
    load_results,
    outcome_summary,
    plain_guarantee,
    release_document,
)

s = ui.page_setup()
st.title("Release")
st.caption(
    "What a release of your image would be, and sending it. The image is embedded (β-VAE mean "
    "z = g(x)), the obfuscator's local Lipschitz constant around z is certified, and extended "
    "Propose-Test-Release either releases f(z) + Laplace noise or refuses (⊥). Posthoc paper, "
    "Algorithm 1 and Theorem 4.4."
)

if not s.is_ptr:
    st.info(
        f"The sidebar's mechanism is **{s.mechanism}**, an inference-privacy mechanism: its release (a noisy "
        "prediction) is on the Inference privacy page. This page runs posthoc PTR."
    )
    st.page_link(
        ui.page_path("inference_privacy"), label="Open the Inference privacy page", icon=":material/shield:"
    )
    if st.button("Use PTR here", key="use_ptr"):
        ui.update_settings(mechanism="PTR")
        st.rerun()
    st.stop()

loaded = pipelines.pipeline(s)
if loaded is None:
    st.stop()
pipe = loaded.pipeline
shape = tuple(pipe.image_shape)

# ----------------------------------------------------------------------------------- input
st.subheader("1 · Your image")
image = upload.pick_image(loaded.dataset, shape, key="release")
for note in image.decoded.notes:
    st.warning(f"Note: {note}")
checks.confirm(loaded.dataset, image, key="release")  # blank or out of domain: stop until confirmed

# ------------------------------------------------------------------------------ certification
ctx = ptr.context(s, loaded, image)
if ctx is None:
    st.stop()
phi = ptr.certify(ctx)
if phi is None:
    st.stop()
try:
    look = ptr.outlook(ctx, phi, epsilon=s.epsilon, delta=s.delta)
except (ValueError, PrivcoreError) as exc:  # e.g. parameters the exact sampler cannot honour
    st.error(f"**Nothing can be sent at these settings:** {exc}")
    st.stop()
sent = ptr.latest(ctx, epsilon=s.epsilon, delta=s.delta)  # the release sent at these settings, if any
result = None if sent is None else sent.outcome
g = look.guarantee
names = pipe.class_names

# ------------------------------------------------------------------------------ pictures
st.subheader("2 · What happens to it")
scale = max(1, 160 // shape[2])
views = ptr.image_views(ctx, scale=scale)  # ε-independent: computed once per image
cols = st.columns(3)
cols[0].image(views.input_png, caption="As the model sees it (x)", width=160)
cols[1].image(views.reconstruction_png, caption="VAE reconstruction g⁻¹(g(x))", width=160)
attack_png = None
if result is None:
    cols[2].info("The attacker's reconstruction is computed from the sent release: it appears once you send.")
elif result.released:
    rec = pipe.reconstruct(ptr.as_tensor(result.value))[0] if pipe.attacker is not None else None
    if rec is not None:
        attack_png = encode_png(rec, scale=scale)
        caption = f"Attacker's reconstruction from sent release #{sent.id}"
        cols[2].image(attack_png, caption=caption, width=160)
    else:
        cols[2].info("No attacker is shipped for this model.")
else:
    cols[2].markdown(f"### ⊥\nSent release #{sent.id} is ⊥: the attacker gets nothing but ⊥.")

# ------------------------------------------------------------------------------ before sending
st.subheader("3 · What the release would be")
st.caption(sending.custody())
m = st.columns(5)
m[0].metric("φ (private, yours only)", f"{phi.phi:.4g}")
m[1].metric(
    "P[this image is released]",
    f"{100 * look.probability:.1f} %",
    help="P[φ + Lap((R+ζ)/ε) > ln(1/δ)·(R+ζ)/ε] from this image's certified φ (posthoc Alg. 1).",
)
m[2].metric("threshold ln(1/δ)·b", f"{look.threshold:.4g}", help="b = (R + ζ)/ε, the test's Laplace scale.")
m[3].metric("Δp", f"{ctx.delta_p:.4g}", help="Proposed sensitivity μ + 3σ from training embeddings.")
m[4].metric(
    "noise scale Δp·R/ε",
    f"{look.noise_scale:.4g}",
    help="Laplace scale per coordinate of a released vector (the exact sampler's grid adds a little).",
)
st.markdown(
    f"**If you send**, PTR draws once: with probability {100 * look.probability:.1f} % the noisy test "
    f"passes and the release is the obfuscated vector f(z) plus Laplace noise of scale "
    f"{look.noise_scale:.4g} on each coordinate (on average {look.noise_scale:.4g} away from f(z)); "
    f"otherwise it is ⊥. Without noise the classifier would read f(z) as **{names[views.clean_class]}** "
    "(shown to you only: f(z) itself is never released). Nothing is drawn before you send, so there is "
    "no draw to look at, keep or discard."
)
st.markdown("**At this setting** (follows the sliders):")
lv = st.columns(2)
acc = live.accuracy_at(
    load_results(loaded.dataset, "table1"), model=loaded.model, certifier=ctx.certifier, epsilon=s.epsilon
)
if acc is None:
    lv[0].metric("model accuracy at this ε", "—", help="Not measured at this ε (Trade-offs page).")
else:
    ci = "" if acc.low is None else f" [{acc.low:.3f}, {acc.high:.3f}]"
    lv[0].metric("model accuracy at this ε", f"{acc.value:.3f}{ci}", help=f"Test accuracy, {acc.how}.")
ssim = live.attack_at(load_results(loaded.dataset, "attack"), radius=ctx.radius, epsilon=s.epsilon)
if ssim is None:
    lv[1].metric("attacker's SSIM at (R, ε)", "—", help="Not measured at this (R, ε) (Attack page).")
else:
    lv[1].metric("attacker's SSIM at (R, ε)", f"{ssim.value:.3f}", help=f"Mean over test images, {ssim.how}.")
r_star = "—" if phi.r_star is None else f"{phi.r_star:.4g}"
st.caption(
    f"φ = max(R*/2, R* − R) with R* = {r_star}, the largest certified radius whose local Lipschitz "
    f"constant stays ≤ Δp (searched up to R_max = {ctx.r_max:.3g} on a grid of spacing ζ = {phi.zeta:.3g}; "
    f"the test noise is Lap((R + ζ)/ε)). Certifier: {ctx.certifier}. Moving ε or δ reuses φ: no new solve."
)

# ------------------------------------------------------------------------------ send
st.subheader("4 · Send")
st.info(
    f"**Sending spends (2ε, δ/2, R) = ({g.epsilon:g}, {g.delta:g}, {ctx.radius:g})** (posthoc "
    f"Theorem 4.4, PTR run at ε = {s.epsilon:g}, δ = {s.delta:g}). {plain_guarantee(g)}"
)
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
    on_click=ptr.send,
    args=(ctx, phi),
    kwargs={"epsilon": s.epsilon, "delta": s.delta},
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
    st.subheader("5 · The sent release")
    text = outcome_summary(result)
    state = f"sent as release #{sent.id}"
    if result.released:
        st.success(f"**{text.headline}** ({state}). {text.detail}")
    else:
        st.error(f"**{text.headline}** ({state}). {text.detail}")
    st.markdown(f"Test: {text.test}")
    o = st.columns(2)
    o[0].metric(
        "φ̂ = φ + Lap", f"{result.phi_noisy:.4g}", help="The noisy test value (ε-DP): yours, not in the file."
    )
    o[1].metric(
        "noise drawn at scale",
        f"{result.noise_scale_effective:.6g}",
        help="What the exact sampler drew per coordinate (Δp·R/ε on its grid).",
    )
    if result.released:
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
            f"{names[views.clean_class]}){told}"
        )
    doc = release_document(
        result,
        dataset=loaded.dataset,
        model=loaded.model,
        model_digest=ctx.model_digest,
        epsilon=s.epsilon,
        delta=s.delta,
        certifier=ctx.certifier,
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
        f"{ctx.radius:g}) once. Sending another draws new noise and is charged again."
    )


ledger_now = list(ui.ledger_rows())  # read here: the download runs outside this script's session


def _report() -> str:
    """The session report, built when the user downloads it (Streamlit calls this lazily, outside the
    script run: it uses only what this run captured — at most the release already sent)."""
    table1 = load_results(loaded.dataset, "table1")
    curve = report.accuracy_figure(table1, model=loaded.model, epsilon=s.epsilon)
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
    outcome = "" if result is None else f"; sent #{sent.id}: **{'released' if result.released else '⊥'}**"
    st.markdown(
        f"**This image:** φ = {phi.phi:.3g}, Δp = {ctx.delta_p:.3g}, noise b = {look.noise_scale:.3g}, "
        f"P[released] = {100 * look.probability:.1f} %{outcome}"
    )
    st.caption(("Sent. " if sent is not None else "Nothing drawn or sent yet. ") + plain_guarantee(g))
