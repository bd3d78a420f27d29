"""Release: upload an image (or pick a sample) and see exactly what posthoc PTR would let out.

The image as the model sees it, its VAE reconstruction, and the outcome of extended
Propose-Test-Release (posthoc paper, Algorithm 1, Theorem 4.4): the released noisy vector and the
attacker's reconstruction from it, or ⊥ with the reason. Widgets and layout only.
"""

from __future__ import annotations

import streamlit as st

from privcore.errors import PrivcoreError
from privcore.images import encode_png
from privlens import budget, checks, live, pipelines, ptr, report, ui, upload
from privlens.session import (
    ledger_totals,
    load_results,
    outcome_summary,
    plain_guarantee,
    release_document,
    release_probability,
)

s = ui.page_setup()
st.title("Release")
st.caption(
    "What would leave your device. The image is embedded (β-VAE mean z = g(x)), the obfuscator's local "
    "Lipschitz constant around z is certified, and extended Propose-Test-Release either releases "
    "f(z) + Laplace noise or refuses (⊥). Posthoc paper, Algorithm 1 and Theorem 4.4."
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
draw = ptr.draw_key(ctx, epsilon=s.epsilon, delta=s.delta)
try:
    result = ptr.release(ctx, phi, epsilon=s.epsilon, delta=s.delta)
except (ValueError, PrivcoreError) as exc:  # e.g. parameters the exact sampler cannot honour
    st.error(f"**Nothing was released:** {exc}")
    st.stop()
text = outcome_summary(result)

# ------------------------------------------------------------------------------ pictures
st.subheader("2 · What happens to it")
scale = max(1, 160 // shape[2])
x = image.tensor
views = ptr.image_views(ctx, scale=scale)  # ε-independent: computed once per image
cols = st.columns(3)
cols[0].image(views.input_png, caption="As the model sees it (x)", width=160)
cols[1].image(views.reconstruction_png, caption="VAE reconstruction g⁻¹(g(x))", width=160)
attack_png = None
if result.released:
    rec = pipe.reconstruct(ptr.as_tensor(result.value))[0] if pipe.attacker is not None else None
    if rec is not None:
        attack_png = encode_png(rec, scale=scale)
        cols[2].image(attack_png, caption="Attacker's reconstruction from this draw", width=160)
    else:
        cols[2].info("No attacker is shipped for this model.")
else:
    cols[2].markdown("### ⊥\nNothing released: the attacker gets nothing but ⊥.")

# ------------------------------------------------------------------------------ outcome
st.subheader("3 · Preview of the outcome")
already_sent = ptr.sent(draw)
if already_sent:
    st.caption("This draw has been sent (it is in the ledger); showing it again costs nothing.")
else:
    st.caption(
        ":material/lock: **Preview: nothing has left your device.** This draw costs nothing until you "
        "send it (section 4)."
    )
state = "sent" if already_sent else "preview, not sent"
if result.released:
    st.success(f"**{text.headline}** ({state}). {text.detail}")
else:
    st.error(f"**{text.headline}** ({state}). {text.detail}")
st.markdown(f"Test: {text.test}")
m = st.columns(5)
m[0].metric("φ (private, yours only)", f"{result.phi:.4g}")
m[1].metric("φ̂ = φ + Lap", f"{result.phi_noisy:.4g}", help="The noisy test value; ε-DP.")
m[2].metric("threshold ln(1/δ)·b", f"{result.threshold:.4g}")
m[3].metric("Δp", f"{ctx.delta_p:.4g}", help="Proposed sensitivity μ + 3σ from training embeddings.")
m[4].metric(
    "noise scale Δp·R/ε",
    f"{result.noise_scale:.4g}",
    help=f"Laplace scale per coordinate; the exact sampler draws {result.noise_scale_effective:.6g}.",
)
if result.released:
    noisy_class = int(pipe.classify(ptr.as_tensor(result.value), result.noise_scale_effective).argmax(-1)[0])
    clean_class = views.clean_class
    names = pipe.class_names
    st.markdown(
        f"Released vector ({len(result.value)} numbers): `{', '.join(f'{v:.3f}' for v in result.value)}`  \n"
        f"The server's classifier reads it as **{names[noisy_class]}** (without noise: {names[clean_class]})"
        + (
            f"; it is told the public noise scale {result.noise_scale_effective:.4g}, which costs no privacy."
            if pipe.classifier_source == "release-classifier"
            else "."
        )
    )
st.markdown("**At this setting** (follows the sliders):")
lv = st.columns(3)
p_release = release_probability(phi.phi, epsilon=s.epsilon, delta=s.delta, radius=ctx.radius, zeta=phi.zeta)
lv[0].metric(
    "P[this image is released]",
    f"{100 * p_release:.1f} %",
    help="P[φ + Lap((R+ζ)/ε) > ln(1/δ)·(R+ζ)/ε] from this image's certified φ (posthoc Alg. 1).",
)
acc = live.accuracy_at(
    load_results(loaded.dataset, "table1"), model=loaded.model, certifier=ctx.certifier, epsilon=s.epsilon
)
if acc is None:
    lv[1].metric("model accuracy at this ε", "—", help="Not measured at this ε (Trade-offs page).")
else:
    ci = "" if acc.low is None else f" [{acc.low:.3f}, {acc.high:.3f}]"
    lv[1].metric("model accuracy at this ε", f"{acc.value:.3f}{ci}", help=f"Test accuracy, {acc.how}.")
ssim = live.attack_at(load_results(loaded.dataset, "attack"), radius=ctx.radius, epsilon=s.epsilon)
if ssim is None:
    lv[2].metric("attacker's SSIM at (R, ε)", "—", help="Not measured at this (R, ε) (Attack page).")
else:
    lv[2].metric("attacker's SSIM at (R, ε)", f"{ssim.value:.3f}", help=f"Mean over test images, {ssim.how}.")
r_star = "—" if phi.r_star is None else f"{phi.r_star:.4g}"
st.caption(
    f"φ = max(R*/2, R* − R) with R* = {r_star}, the largest certified radius whose local Lipschitz "
    f"constant stays ≤ Δp (searched up to R_max = {ctx.r_max:.3g} on a grid of spacing ζ = {phi.zeta:.3g}; "
    f"the test noise is Lap((R + ζ)/ε)). Certifier: {ctx.certifier}. Moving ε or δ reuses φ: no new solve."
)

# ------------------------------------------------------------------------------ send
st.subheader("4 · Send")
g = result.guarantee
st.info(
    f"**Sending this draw spends (2ε, δ/2, R) = ({g.epsilon:g}, {g.delta:g}, {ctx.radius:g})** (posthoc "
    f"Theorem 4.4, PTR run at ε = {s.epsilon:g}, δ = {s.delta:g}). {plain_guarantee(g)}"
)
for warning in budget.extreme_warnings(g, n=pipelines.dataset_size(pipe)):
    st.warning(warning, icon=":material/warning:")


def _send(how: str) -> None:
    ptr.send(ctx, result, draw, how=how)


a = st.columns(4)
a[0].button(
    "Sent" if already_sent else ("Send this release" if result.released else "Send ⊥"),
    key="send",
    type="primary",
    icon=":material/send:",
    disabled=already_sent,
    on_click=_send,
    args=("sent",),
    help="What leaves your device: the ledger is charged once for this draw.",
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
with a[1]:
    ui.download_json(
        "Release (JSON)" + ("" if already_sent else ": sends it"),
        doc,
        file_name="release.json",
        key="dl_release",
        on_click=_send,
        args=("downloaded",),
        help="The file you would send: downloading it charges the ledger for this draw (once).",
    )
if a[2].button(
    "New draw",
    key="resample",
    icon=":material/casino:",
    help="Fresh noise: a new preview, free until you send it — a sent new draw costs again.",
):
    ptr.resample()
    st.rerun()
a[3].download_button(
    "Input (PNG)",
    views.input_png,
    icon=":material/download:",
    file_name="input.png",
    mime="image/png",
    key="dl_input",
    on_click="ignore",
)
if attack_png is not None:
    a[3].download_button(
        "Reconstruction (PNG)",
        attack_png,
        icon=":material/download:",
        file_name="attacker.png",
        mime="image/png",
        key="dl_attack",
        on_click="ignore",
    )


ledger_now = list(ui.ledger_rows())  # read here: the download runs outside this script's session


def _report() -> str:
    """The session report, built when the user downloads it (Streamlit calls this lazily, outside the
    script run: it uses only what this run captured)."""
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
        release=doc if already_sent else None,
        attacker_png=attack_png if already_sent else None,
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
    help="Settings, guarantee, the sent release and the attacker's view of it, the curve at this ε and the "
    "ledger, in one file. A preview that was not sent is left out.",
)
if already_sent:
    st.success(
        f"Sent: this draw is in the session ledger, charged ({g.epsilon:g}, {g.delta:g}, {ctx.radius:g}) "
        "once. A new draw that you send is charged again."
    )
st.caption(
    "Picking among several previews before sending weakens the sent one's guarantee: look at the one "
    "draw you mean to send."
)

with st.sidebar:
    st.markdown("---")
    st.markdown(
        f"**This image:** φ = {result.phi:.3g}, Δp = {ctx.delta_p:.3g}, noise b = {result.noise_scale:.3g} → "
        f"**{'released' if result.released else '⊥'}**"
    )
    st.caption(("Sent. " if already_sent else "Preview, not sent. ") + plain_guarantee(result.guarantee))
