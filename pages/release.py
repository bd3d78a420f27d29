"""Release: upload an image (or pick a sample), see what a release of it would be, compare the
mechanisms, and send it.

Every posthoc mechanism of the registry (privcore.mechanisms.registry, family "posthoc") releases the
obfuscated embedding here, through one adapter (privlens.mechanism_view): the page reads the sidebar's
mechanism's own properties and its outlook, never its name. Before Send the page shows what the release
would be in distribution (the guarantee, the noise scale, the probability that it is released at all —
from the image's certification for a mechanism that needs one) and no draw, and compares the mechanisms
(privlens.compare_panel); Send draws once and charges the ledger (privlens.sending), then the page shows
the sent release — the noisy vector and the attacker's reconstruction from it, or ⊥ with the reason —
and its downloads. Widgets and layout only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
import torch

from privcore.errors import PrivcoreError
from privcore.inputs import encode_png
from privcore.mechanisms import card_clip_box, registry
from privlens import (
    attack_view,
    audit_claim,
    budget,
    checks,
    compare_panel,
    evaluation_view,
    glossary,
    live,
    pipelines,
    report,
    sending,
    ui,
    upload,
)
from privlens import mechanism_text as mt
from privlens import mechanism_view as mv
from privlens.image import framed
from privlens.ledger import ledger_totals
from privlens.outcome import outcome_summary, plain_guarantee
from privlens.results import load_results

s = ui.page_setup()
mech = s.spec
POSTHOC = [m for m in registry.MECHANISMS if m.family == "posthoc"]
st.title("Release")
st.caption(
    "What a release of your image would be, and sending it. The image is embedded (β-VAE mean z = g(x)) "
    "and an obfuscator f maps z to the vector that is released with noise, by one of: "
    + "; ".join(f"**{m.label}** — {m.description}, {m.guarantee}" for m in POSTHOC)
    + ". The sidebar's ε is the total of a sent release's guarantee for each.",
    help=glossary.help_for("β-VAE", "R"),
)

if mech.family != "posthoc":
    st.info(
        f"The sidebar's mechanism is **{s.mechanism}**, an inference-privacy mechanism: its release (a noisy "
        "prediction) is on the Inference privacy page. This page releases the obfuscated embedding with "
        + ", ".join(m.label for m in POSTHOC) + "."
    )
    st.page_link(
        ui.page_path("inference_privacy"), label="Open the Inference privacy page", icon=":material/shield:"
    )
    b = st.columns(len(POSTHOC))
    for col, m in zip(b, POSTHOC, strict=True):
        if col.button(f"Use {m.label} here", key=f"use_{m.name.lower().replace('-', '_')}"):
            ui.update_settings(mechanism=m.name)
            st.rerun()
    st.stop()

loaded = pipelines.pipeline(s)
if loaded is None:
    st.stop()
pipe = loaded.pipeline
st.caption(f"Model: **{loaded.dataset} / {loaded.model}**", help=glossary.model_help(loaded.model) or None)
shape = tuple(pipe.image_shape)
names = pipe.class_names

# ----------------------------------------------------------------------------------- input
st.subheader("1 · Your image")
image = upload.pick_image(loaded.dataset, shape, key="release")
upload.show_notes(image.decoded.notes)  # material changes as warnings, the rest as a caption
checks.confirm(loaded.dataset, image, key="release")  # blank or out of domain: stop until confirmed

# ---------------------------------------------------------------- the mechanism's outlook (no draw)
eps_m = s.mechanism_epsilon  # the ε the mechanism's own formulas run at
mv.disk_cache()  # a misconfigured deployment (PRIVLENS_DEPLOYMENT) stops here: nothing is released
view = mv.posthoc(s, loaded, image)
if view is None:
    st.stop()
cert = None
try:
    if mech.needs_certificate:
        cert = mv.certify(view)
        if cert is None:
            st.stop()
    look = mv.outlook(view, s, cert)
    sent = mv.latest(view, s)
except (ValueError, PrivcoreError) as exc:  # e.g. parameters the exact sampler cannot honour
    st.error(f"**Nothing can be sent at these settings:** {exc}")
    st.stop()
g = look.guarantee
const = mt.constant_of(look.public)
box = card_clip_box(pipe.cards["obfuscator"]) if "clip_box" in look.public else None
result = None if sent is None else sent.outcome  # a privcore.api.Release, drawn through the mechanism
released = result is not None and result.released

# ------------------------------------------------------------------------------ pictures
st.subheader("2 · What happens to it")
scale = max(1, 160 // shape[2])
views = mv.image_views(view, scale=scale)  # ε-independent: computed once per image
clean_class = views.clean_class
if box is not None:  # the class of f(clip z): what the mechanism releases from, without noise
    clipped = torch.from_numpy(box.clip(view.x).astype(np.float32))[None]
    clean_class = int(pipe.classify(pipe.obfuscate(clipped)).argmax(-1)[0])
cols = st.columns(2)
# framed: a blank white input would be invisible on the white page (downloads keep the plain PNGs)
cols[0].image(framed(views.input_png), caption="As the model sees it (x)", width=160)
cols[1].image(framed(views.reconstruction_png), caption="VAE reconstruction g⁻¹(g(x))", width=160)
st.caption("The attacker's reconstruction is computed from the sent release: it appears under Send once you "
           "send.")

# ------------------------------------------------------------------------------ before sending
st.subheader("3 · What the release would be")
st.caption(sending.custody())
if (note := mt.epsilon_note(mech, s)):
    st.info(note, icon=":material/call_split:")
p = look.release_probability
p_text = "100 %" if p == 1.0 else f"{100 * p:.1f} %"
own_eps = "ε" if mech.epsilon_share == 1 else f"{mech.name}'s ε = total/{1 / mech.epsilon_share:g}"
formula = mt.noise_formula(mech, const, total=False)
# a wrapping row, each metric as wide as its text: five columns cut values to "0.8…" at 1000 px
m = st.container(horizontal=True, gap="medium")
if cert is not None:
    m.metric("φ (private, yours only)", f"{cert.phi:.4g}", width="content", help=glossary.help_for("φ"))
m.metric(
    "P[this image is released]",
    p_text,
    help="It never refuses (no ⊥)." if p == 1.0 else f"P[φ + Lap((R+ζ)/ε) > ln(1/δ)·(R+ζ)/ε] at {own_eps}, "
    "from this image's certified φ (posthoc Alg. 1).",
    width="content",
)
if "threshold" in look.public:
    m.metric("threshold ln(1/δ)·b", f"{look.public['threshold']:.4g}", help="b = (R + ζ)/ε, the test's "
             "Laplace scale.", width="content")
if const is not None:
    how = look.public.get(const.how_key, "")
    m.metric(const.label, f"{look.public[const.key]:.4g}", help=const.what + (f" ({how})." if how else ".")
             + ("\n\n" + glossary.help_for(const.symbol) if const.symbol in glossary.GLOSSARY else ""),
             width="content")
m.metric(
    f"noise scale {formula}".strip(),
    f"{look.noise_scale:.4g}",
    help=f"{look.noise} at {own_eps} (the exact sampler draws {look.noise_scale_effective:.6g}: its grid and "
    "f's float64 rounding add a little).",
    width="content",
)
if not mech.uses_delta:
    m.metric("δ", "0", help=f"A pure guarantee: {mech.guarantee}.", width="content")
if box is not None and const is not None:
    st.markdown(
        f"**{const.symbol} = {look.public[const.key]:.7g}** ({look.public.get(const.how_key, '')}) — "
        f"{const.what}, on first use of this model (the same for every image). Before f is applied, z is "
        "clipped to the model's **public box** (from its training embeddings, fixed before any image; "
        f"clipping keeps neighbours within R of each other, so one {const.symbol} covers every image):"
    )
    frame = pd.DataFrame([box.lower, box.upper], index=["lower", "upper"],
                         columns=[f"z{i + 1}" for i in range(len(box.lower))])
    with st.expander("The public box"):
        st.dataframe(frame.style.format("{:.3g}"), width="content")
    st.caption(
        "Your embedding lies inside the box: clipping leaves it unchanged."
        if box.contains(view.x)
        else "Your embedding lies partly outside the box: the release is of its clipped point (shown to "
        "you only)."
    )
chance = "" if p == 1.0 else f"with probability {p_text} the noisy test passes and "
otherwise = "" if p == 1.0 else "; otherwise it is ⊥"
noise = look.noise_scale
st.markdown(
    f"**If you send**, {s.mechanism} draws once: {chance}the release is the obfuscated vector with "
    f"{look.noise}{otherwise}. Without noise the "
    f"classifier would read it as **{names[clean_class]}** (shown to you only: the noise-free vector itself "
    "is never released). Nothing is drawn before you send, so there is no draw to look at, keep or discard."
)
st.markdown("**At this setting** (follows the sliders):")
lv = st.columns(2)
run_delta = s.delta if mech.uses_delta else 0.0  # the δ this mechanism runs at
now = mt.live_accuracy(mech, view.target, s, dataset=loaded.dataset, model=loaded.model)
acc = (now.reading if now is not None and now.reading is not None
       else mt.accuracy(mech, s, dataset=loaded.dataset, model=loaded.model, delta=run_delta))
if now is not None and now.reading is not None and now.near_chance:
    st.warning(
        f"**At this ε the model's answers are close to guessing.** Its accuracy here is "
        f"{acc.value:.0%} (interval {acc.interval_text}), where guessing gets {now.chance:.0%}: a release "
        "at this setting tells its recipient little about your image, and little to the model too. "
        "Move ε to the right for a more useful release (at a weaker guarantee).",
        icon=":material/info:",
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
with lv[0]:
    evaluation_view.progress(now)
if acc is not None and acc.other_delta(run_delta):
    lower = run_delta < acc.delta
    effect = (f"{mech.name} releases {'less' if lower else 'more'} often" if cert is not None
              else f"{mech.name} adds {'more' if lower else 'less'} noise")
    lv[0].warning(
        f"Measured at δ = {acc.delta:g}, not at the sidebar's δ = {run_delta:g} (no experiment ran at "
        f"that δ). At δ = {run_delta:g} {effect}, so the accuracy there is "
        f"{'lower' if lower else 'higher'} than this.",
        icon=":material/warning:",
    )
if mt.attacked(mech):  # the attack experiment attacks this mechanism's releases, at its own ε
    ssim = mt.attack_reading(loaded.dataset, radius=s.radius, epsilon=eps_m)
    if ssim is None:
        lv[1].metric("attacker's SSIM at (R, ε)", "—", help="Not measured at this (R, ε) (Attack page).")
    else:
        lv[1].metric(
            f"attacker's SSIM at (R, ε){live.delta_text(ssim.delta)}",
            f"{ssim.value:.3f}",
            help=f"Mean over released test images at {own_eps} = {eps_m:g}, {ssim.how}.",
        )
        ci = "" if ssim.low is None else f"interval {ssim.interval_text}, "
        lv[1].caption(f"{ci}{ssim.how}")
if cert is not None:
    r_star = "—" if cert.r_star is None else f"{cert.r_star:.4g}"
    st.caption(
        f"φ = max(R*/2, R* − R) with R* = {r_star}, the largest certified radius whose local Lipschitz "
        f"constant stays ≤ Δp (searched up to R_max = {cert.r_max:.3g} on a grid of spacing "
        f"ζ = {cert.zeta:.3g}; the test noise is Lap((R + ζ)/ε)). Certifier: {cert.certifier}. Moving ε or δ "
        "reuses φ: no new solve.",
        help=glossary.help_for("R*", "φ", "Δp", "LipMIP"),
    )

# ------------------------------------------------------------------------------ send
st.subheader("4 · Send")
spent = f"{mech.guarantee} = ({g.epsilon:g}, {g.delta:g}, {g.radius:g})"
how_run = (f" ({mech.source}, {mech.name} run at ε/{1 / mech.epsilon_share:g} = {eps_m:g}, δ = {s.delta:g})."
           if mech.epsilon_share != 1 else f" ({mech.label}{'' if mech.uses_delta else ': no δ'}"
           f"{', never ⊥' if p == 1.0 else ''}).")
st.info(f"**Sending spends {spent}**{how_run} {plain_guarantee(g)}")
claim = audit_claim.evidence(loaded.dataset, mech.name, epsilon=s.epsilon, model=loaded.model)
st.markdown(
    f"**The claim beside the evidence.** Stated: ε = {g.epsilon:g} (total). The privacy audit (many releases "
    "of two neighbouring inputs; a bound above the stated ε would refute the implementation, a bound below "
    "it cannot prove the claim):"
)
for row in claim.rows:
    st.markdown(f"- {row.text()}")
if claim.missing:
    st.caption(claim.missing)
if (note := pipelines.embedder_note(pipe)) is not None:
    st.caption(note)
for warning in budget.extreme_warnings(g, n=pipelines.dataset_size(pipe)):
    st.warning(warning, icon=":material/warning:")
failed = sending.failure(mv.page_of(mech))
if failed is not None:
    st.error(f"**Nothing was sent:** {failed}")
a = st.columns(2)
a[0].button(
    "Send this release" if sent is None else "Send another release",
    key="send",
    type="primary",
    icon=":material/send:",
    on_click=mv.send,
    args=(view, s, cert),
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



def _reconstruction(sent_release: object, number: int) -> bytes | None:
    """Show the attacker's reconstruction from the sent release (⊥: nothing to reconstruct) and return
    its PNG; None without one."""
    rec_col = st.columns(2)[0]
    if not sent_release.released:
        rec_col.markdown(f"### ⊥\nSent release #{number} is ⊥: the attacker gets nothing but ⊥.")
        return None
    told = attack_view.sent_attack(mech, pipe, sent_release, image.tensor)  # told the release's noise scale
    rec = told.reconstruction if told is not None else (
        pipe.reconstruct(mv.as_tensor(sent_release.value))[0] if pipe.attacker is not None else None)
    if rec is None:
        rec_col.info("No attacker is shipped for this model.")
        return None
    png = encode_png(rec, scale=scale)
    rec_col.image(framed(png), caption=f"Attacker's reconstruction from sent release #{number}", width=160)
    if told is not None:
        rec_col.caption(attack_view.sent_caption(told))
    return png


doc = None
attack_png = None
if sent is not None:
    st.subheader("5 · The sent release")
    state = f"sent as release #{sent.id}"
    o = st.columns(2)
    if result.certification is not None:  # the test it ran: φ and φ̂ are yours, never in the file
        ran = result.mechanism_result
        text = outcome_summary(ran)
        (st.success if result.released else st.error)(f"**{text.headline}** ({state}). {text.detail}")
        st.markdown(f"Test: {text.test}")
        o = st.columns(2)
        o[0].metric("φ̂ = φ + Lap", f"{ran.phi_noisy:.4g}", help="The noisy test value (ε-DP): yours, not in "
                    "the file.")
    else:
        st.success(
            f"**Released** ({state}). The output is the obfuscated vector of the "
            f"{'clipped ' if box is not None else ''}embedding with {look.noise}; the exact sampler drew at "
            f"scale {result.noise_scale_effective:.4g}."
        )
        sent_const = mt.constant_of(result.public)
        if sent_const is not None:
            how = result.public.get(sent_const.how_key, "")
            o[0].metric(sent_const.symbol, f"{result.public[sent_const.key]:.6g}",
                        help=f"{sent_const.what} ({how}).")
    o[1].metric(
        "noise drawn at scale",
        f"{result.noise_scale_effective:.6g}",
        help="What the exact sampler drew per coordinate (the noise scale on its grid).",
    )
    attack_png = _reconstruction(result, sent.id)
    doc = result.document()  # the API's public JSON (privcore.api.Release.document), as privcore.release
    if released:
        noisy_class = result.predicted_class  # the release classifier, told the public noise scale
        told = float(result.noise_scale_effective)
        vector = ", ".join(f"{v:.3f}" for v in result.value)
        told_text = (
            f"; it is told the public noise scale {told:.4g}, which costs no privacy."
            if pipe.classifier_source == "release-classifier"
            else "."
        )
        st.markdown(
            f"Released vector ({len(result.value)} numbers): `{vector}`  \n"
            f"The server's classifier reads it as **{names[noisy_class]}** (without noise: "
            f"{names[clean_class]}){told_text}"
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
        f"{g.radius:g}) once. Sending another draws new noise and is charged again."
    )


st.subheader("6 · Which mechanism")
st.caption("Every mechanism at the sidebar's settings, for this image: choose one in the sidebar before you "
           "send.")
compare_panel.panel(s, loaded, image, view=view, certification=cert, outlook=look)

ledger_now = list(ui.ledger_rows())  # read here: the download runs outside this script's session


def _report() -> str:
    """The session report, built when the user downloads it (Streamlit calls this lazily, outside the
    script run: it uses only what this run captured — at most the release already sent)."""
    table = mt.measuring(mech)
    frame = None if table is None else load_results(loaded.dataset, table)
    total = frame is not None and "epsilon_total" in frame
    curve = report.accuracy_figure(
        frame,
        model=loaded.model,
        epsilon=s.epsilon if total else eps_m,
        column="epsilon_total" if total else "epsilon",
        label="ε" if total else own_eps,
        mechanism=mech.name,
        delta=s.delta if mech.uses_delta else None,
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
    mine = [] if cert is None else [f"φ = {cert.phi:.3g}"]
    if const is not None:
        mine.append(f"{const.symbol} = {look.public[const.key]:.4g}")
    mine += [f"noise {formula or 'scale'} = {look.noise_scale:.3g}", f"P[released] = {p_text}"]
    st.markdown(f"**This image ({s.mechanism}):** {', '.join(mine)}{outcome}")
    st.caption(("Sent. " if sent is not None else "Nothing drawn or sent yet. ") + plain_guarantee(g))
