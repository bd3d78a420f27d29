"""Inference privacy: Gauss-Input, Gauss-Output and Lap-Output (Tian et al., Defs 3–5) on the IP
classifiers — for the current image, each mechanism's noise, guarantee and noise-free prediction
before Send with the audit's empirical ε beside the stated one, and the noisy release once sent (drawn
at Send, privlens.sending); accuracy curves from the ``ip`` experiment, and what the guarantee becomes
at other radii (chaining). Widgets and layout only."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from privcore.inputs import encode_png
from privcore.mechanisms import chaining, chaining_hops
from privlens import audit_claim, budget, charts, checks, compare_panel, pipelines, sending, ui, upload
from privlens import mechanism_view as mv
from privlens.image import framed
from privlens.ledger import LEDGER_EXPLANATION, ledger_totals
from privlens.outcome import plain_guarantee
from privlens.results import load_results
from privlens.settings import ALPHA_GRID, IP_MECHANISMS

PAGE = mv.PAGES["inference_privacy"]
AUDIT_NOTE = (
    "Audit: the privacy audit's empirical ε, a 95 % lower bound from many releases of two neighbouring "
    "inputs (`python -m privcore experiment audit`), at this ε or the nearest audited one as labelled. A "
    "bound above the stated ε would refute the implementation; one below it cannot prove the claim. Hover "
    "for the pair, its distance and the test."
)


def _pairs(g) -> str:
    """The pairs a guarantee covers, after its (ε, δ)."""
    return "over every pair of inputs" if g.all_pairs else f"at α = {g.radius:g}, {g.metric}"


s = ui.page_setup()
st.title("Inference privacy")
st.caption(
    "{(ε, δ), α} inference privacy (Tian et al., Def. 2): any two inputs within distance α give almost "
    "the same output distribution. Gauss-Input adds Gaussian noise to the pixels; Gauss-Output and "
    "Lap-Output add noise to the outputs of a classifier whose global Lipschitz constant μ is certified "
    "by construction."
)
if "alpha" not in s.spec.parameter_names:  # the sidebar shows no α: this page does
    st.info(
        f"The sidebar's mechanism is {ui.mechanism_label(s.mechanism)}; this page shows the mechanisms "
        "that release a classifier's scores with the sidebar's ε and δ and the α below (pick one of them in "
        "the sidebar to highlight it)."
    )
    ui.bound_widget(
        "select_slider",
        "alpha",
        "α (radius on the input)",
        options=ALPHA_GRID,
        format_func=ui.fmt_num,
        suffix="_ip",
    )
    s = ui.settings()
if s.delta > 1e-3:
    st.warning(
        f"δ = {s.delta:g} is large for inference privacy (the paper uses δ = 1e-5): the Gaussian "
        "mechanisms' guarantee fails with probability up to δ per query."
    )

models = pipelines.catalogue()
dataset = s.dataset if s.dataset in models else pipelines.DEFAULT_DATASET


ip = mv.ip_models(dataset)
if ip is not None:
    st.subheader("Your image")
    image = upload.pick_image(dataset, ip.image_shape, key="ip")
    upload.show_notes(image.decoded.notes)  # material changes as warnings, the rest as a caption
    checks.confirm(dataset, image, key="ip")  # blank or out of domain: stop until confirmed
    names = ip.class_names
    plans = mv.inference_views(s, dataset, image)
    ready = {n: p for n, p in plans.items() if isinstance(p, mv.View)}
    looks = {n: mv.outlook(v, s) for n, v in ready.items()}  # nothing drawn
    guarantees = {n: o.guarantee for n, o in looks.items()}

    st.subheader("What each mechanism would release")
    st.caption(sending.custody())
    failed = sending.failure(PAGE)
    if failed is not None:
        st.error(f"**Nothing was sent:** {failed}")
    scale = max(1, 120 // int(ip.image_shape[-1]))
    cols = st.columns(len(IP_MECHANISMS))
    rows = []
    for col, mech_name in zip(cols, IP_MECHANISMS, strict=True):
        here = "◀ " if mech_name == s.mechanism else ""
        col.markdown(f"**{here}{mech_name}**")
        if mech_name not in ready:
            col.info(f"Not available: {plans[mech_name]}")
            rows.append({"mechanism": mech_name, "model": "—", "noise": str(plans[mech_name])})
            continue
        plan, look = ready[mech_name], looks[mech_name]
        g = look.guarantee
        sent = mv.latest(plan, s)
        p_clean = mv.class_distribution(mv.clean_scores(plan))
        bars = [go.Bar(x=list(names), y=p_clean, name="without noise (yours, not released)", opacity=0.5)]
        if sent is None:
            col.caption(f"Noise if sent: {look.noise}. It is drawn when you send; nothing is drawn yet.")
        else:
            d = sent.outcome
            col.caption(f"Sent as release #{sent.id}:")
            if d.noisy_input is not None:  # Gauss-Input releases a noisy image (then classified)
                col.image(
                    framed(encode_png(d.noisy_input[0].clamp(0, 1), scale=scale)),
                    caption="the noisy image it released (shown clipped to [0, 1])",
                    width=120,
                )
            else:
                col.code(
                    "noisy scores: " + ", ".join(f"{float(v):.2f}" for v in d.noisy.reshape(-1)),
                    wrap_lines=True,
                )
            p_sent = mv.class_distribution(d.noisy)
            bars.append(go.Bar(x=list(names), y=p_sent, name="from the sent release"))
            with col:  # the API's public JSON of the sent release, as privcore.release writes it
                ui.download_json("Release (JSON)", d.release.document(), file_name=f"release-{sent.id}.json",
                                 key=f"dl_ip_{mech_name}",
                                 help=f"Sent release #{sent.id}: in the ledger already, so this costs "
                                 "nothing.")
        fig = go.Figure(bars)
        fig.update_layout(
            height=260,
            margin={"l": 10, "r": 10, "t": 30, "b": 10},
            barmode="group",
            yaxis={"range": [0, 1], "title": "class probability"},
            xaxis={"type": "category"},
            legend={"orientation": "h", "y": -0.25},
            title={"text": "class distribution", "font": {"size": 12}},
        )
        col.plotly_chart(fig, key=f"ip_dist_{mech_name}", config=ui.PLOTLY_CONFIG)
        col.caption(f"Guarantee if sent: (ε = {g.epsilon:g}, δ = {g.delta:g}) {_pairs(g)}")
        claim = audit_claim.evidence(dataset, mech_name, epsilon=s.epsilon, model=plan.model, delta=g.delta)
        for audited in claim.rows:  # the audit's empirical ε beside the stated one
            col.markdown(f"Audit, {audited.short()}", help=audited.text())
        if claim.missing:
            col.caption(claim.missing)
        col.button(
            f"Send {mech_name}" if sent is None else f"Send another {mech_name}",
            key=f"ip_send_{mech_name}",
            icon=":material/send:",
            on_click=mv.send,
            args=(plan, s),
            help="Draws the noise now, once, and charges the session ledger for it; you see the release "
            "after it has been sent. Another send is a new draw, charged again.",
        )
        top_clean = max(range(len(p_clean)), key=p_clean.__getitem__)
        row = {
            "mechanism": mech_name + (" ◀" if here else ""),
            "model": plan.model,
            "noise": look.noise,
            "prediction without noise": f"{names[top_clean]} ({p_clean[top_clean]:.2f})",
            "sent": "no (nothing drawn)" if sent is None else f"yes, release #{sent.id}",
            "guarantee": f"(ε = {g.epsilon:g}, δ = {g.delta:g}) {_pairs(g)}",
        }
        if sent is not None:
            p_noisy = mv.class_distribution(sent.outcome.noisy)
            top_noisy = max(range(len(p_noisy)), key=p_noisy.__getitem__)
            row["sent noisy prediction"] = f"{names[top_noisy]} ({p_noisy[top_noisy]:.2f})"
        rows.append(row)
    st.caption(AUDIT_NOTE)
    n_images = mv.dataset_size(ip)
    shown: list[str] = []
    for guarantee in guarantees.values():
        shown += [w for w in budget.extreme_warnings(guarantee, n=n_images) if w not in shown]
    for warning in shown:
        st.warning(warning, icon=":material/warning:")
    # static tables: their text wraps (a data grid of these columns is cut off at 1400 px)
    st.table(pd.DataFrame(rows), hide_index=True)
    st.caption(
        "Each sent release is recorded in the session ledger (Accountant page). Softmax of the noisy logits "
        "is post-processing and costs nothing."
    )
    if guarantees:
        st.markdown(
            "**What sending one release of each costs.** Gauss-Input and Gauss-Output are "
            "both stated for pairs within ℓ2 distance α on the model input (the same pixels), Lap-Output "
            "for pairs within ℓ1 distance α. "
            "A pair within ℓ1 distance α is also within ℓ2 distance α, so all three releases apply to it; a "
            "local-DP release applies to every pair of inputs."
        )
        one_each = [
            {"image": image.name, "image_key": "one of each", "label": name, "guarantee": g}
            for name, g in guarantees.items()
        ]
        per_draw = pd.DataFrame(ledger_totals(one_each)).drop(columns="image")
        for column, digits in (("total ε = Σεᵢ", 4), ("total δ = Σδᵢ", 3)):
            per_draw[column] = [f"{float(v):.{digits}g}" for v in per_draw[column]]  # short, as a table
        st.table(per_draw, hide_index=True)
        try:
            so_far = ledger_totals([r for r in ui.ledger_rows() if r["image_key"] == image.digest[:12]])
        except ValueError as exc:
            st.error(f"This image's ledger cannot be composed ({exc}); see the Accountant page.")
        else:
            worst = next((r for r in so_far if r["total"] == "worst case"), None)
            if worst is not None:
                st.warning(
                    "All sent releases of this image in this session (here and on the Release page): "
                    f"worst case ε = {worst['total ε = Σεᵢ']:.4g}, "
                    f"δ = {worst['total δ = Σδᵢ']:.3g} for {worst['pairs']} "
                    f"({worst['releases counted']} releases). Per relation on the Accountant page."
                )
        st.caption(LEDGER_EXPLANATION)

    # chaining widens a radius: a guarantee over every pair of inputs has none to widen
    radii = [n for n, g in guarantees.items() if not g.all_pairs]
    focus = s.mechanism if s.mechanism in radii else next(iter(radii), None)
    if focus is not None:
        st.subheader(f"Chaining: {focus} at other radii")
        g = guarantees[focus]
        st.markdown(plain_guarantee(g))
        betas = [float(f"{s.alpha * k:.12g}") for k in (1, 2, 3, 5, 10, 20)]
        chain = []
        for b in betas:
            c = chaining(g, b)
            chain.append(
                {
                    "β": f"{b:.4g}",
                    "hops h = ⌈β/α⌉": chaining_hops(g.radius, b),
                    "ε": f"{c.epsilon:.4g}",
                    "δ": f"{c.delta:.3g}",
                    "meaningful": budget.meaningful(c.epsilon, c.delta, n=n_images),
                }
            )
        st.table(pd.DataFrame(chain), hide_index=True)
        st.caption(
            "Chaining (IP paper Prop. 4, Appendix D): (ε, δ) at α gives (h·ε, δ·(e^{hε} − 1)/(e^ε − 1)) at "
            "β with h = ⌈β/α⌉ (the main text's h·δ is a misprint). " + budget.meaningful_rule(n_images)
        )

    st.subheader("All mechanisms at this ε")
    posthoc = pipelines.pipeline(s) if s.dataset == dataset else None
    if posthoc is not None:  # the posthoc mechanisms on the sidebar's model, beside these
        compare_panel.panel(s, posthoc, None, allow_certify=False)

st.subheader("Accuracy curves (ip experiment)")
df = load_results(dataset, "ip")
if df is None:
    ui.missing_results("ip", dataset, "inference-privacy results")
else:
    clean = df[df["sweep"] == "clean"]

    def _fixed(part: pd.DataFrame, col: str) -> str:
        """The value(s) a sweep holds fixed, e.g. "0.1" (from its rows, not assumed)."""
        values = sorted({float(v) for v in part[col].dropna()}) if col in part else []
        return "/".join(f"{v:g}" for v in values) or "?"

    def _n_text(g: pd.DataFrame) -> str:
        """"n = 360 × 15 draws": test images times noise draws per point (the CSV's n_test, n_draws)."""
        tests = sorted({int(v) for v in g["n_test"].dropna()}) if "n_test" in g else []
        draws = sorted({int(v) for v in g["n_draws"].dropna()}) if "n_draws" in g else []
        if not tests:
            return "n not recorded"
        return f"n = {'/'.join(map(str, tests))}" + (f" × {'/'.join(map(str, draws))} draws" if draws else "")

    gaussian_delta = sorted({float(d) for d in df["delta"].dropna()}) if "delta" in df else []
    how: set[str] = set()  # how the curves' intervals were made
    for sweep, xcol, symbol, fixed, current in (
        ("alpha", "alpha", "α", "epsilon", s.alpha),
        ("epsilon", "epsilon", "ε", "alpha", s.epsilon),
    ):
        part = df[df["sweep"] == sweep]
        if part.empty:
            continue
        deltas = "/".join(f"{d:g}" for d in gaussian_delta) or "?"
        title = (
            f"accuracy vs {symbol} ({'ε' if fixed == 'epsilon' else 'α'} = {_fixed(part, fixed)}, "
            f"δ = {deltas} for the Gaussian ones)"
        )
        fig = go.Figure()
        span = [float(part[xcol].min()), float(part[xcol].max())]
        for row in clean[clean["model"].isin(set(part["model"]))].itertuples():
            fig.add_trace(
                go.Scatter(
                    x=span,
                    y=[row.accuracy_mean] * 2,
                    mode="lines",
                    name=f"no noise ({row.model}, n = {int(row.n_test)})"
                    if "n_test" in clean and row.n_test == row.n_test
                    else f"no noise ({row.model})",
                    line={"dash": "dot", "width": 1, "color": "gray"},
                )
            )
        if "calibration" not in part:
            part = part.assign(calibration=None)
        keys = ["mechanism", "model", "calibration"]
        for (mech_name, model_name, cal), grp in part.groupby(keys, sort=True, dropna=False):
            g = grp.sort_values(xcol)
            g = g[g[xcol].apply(lambda v: math.isfinite(float(v)))]
            classic = cal == "classic"  # the paper's formula, shown only where it is valid (ε < 1)
            n_text = _n_text(g)
            d = sorted({float(v) for v in g["delta"].dropna()}) if "delta" in g else []
            d_text = "δ = " + ("/".join(f"{v:g}" for v in d) if d else "0")  # Lap-Output: pure
            ci = charts.interval_bars(g["accuracy_mean"], low=g.get("accuracy_lo"), high=g.get("accuracy_hi"),
                                      n=g.get("n_test"))
            how.add(ci.how)
            fig.add_trace(
                go.Scatter(
                    x=g[xcol],
                    y=g["accuracy_mean"],
                    mode="lines+markers",
                    name=f"{mech_name} ({model_name}, {n_text}, {d_text})"
                    + (", classic σ" if classic else ""),
                    error_y=ci.bars,
                    customdata=[[text] for text in ci.text],
                    hovertemplate=f"{symbol} = %{{x:g}}<br>accuracy %{{y:.3f}}%{{customdata[0]}} "
                    f"({ci.how})<br>{n_text}, {d_text}<extra>%{{fullData.name}}</extra>",
                    line={"width": 4 if mech_name == s.mechanism and not classic else 1.5,
                          "dash": "dash" if classic else "solid"},
                )
            )
        charts.mark_x(fig, current, f"current {symbol} = {current:g}", log=True)
        unit = "ℓ2 pixels for Gauss-*, ℓ1 for Lap-Output; " if sweep == "alpha" else ""
        fig.update_layout(
            title=f"{dataset}: {title}",
            xaxis_title=f"{symbol} ({unit}log scale)",
            yaxis_title="test accuracy (mean, 95 % interval)",
            legend_title_text="mechanism",
            # below the plot: the names carry n and δ, and beside it they would squeeze it
            legend={"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0},
            height=600,
            yaxis_range=[0, 1],
        )
        charts.log_axis(fig, [*span, current])
        ui.chart(fig, name=f"ip-{sweep}-{dataset}", data=part)
    st.caption(
        "Each point: the mean test accuracy over the n test images and noise draws its legend names; the bar "
        f"is its {' or '.join(sorted(how)) or '95 % interval'} (as on the Trade-offs page: how far another "
        "sample of test images could move it). The Gaussian mechanisms were run at the δ named (Lap-Output "
        "is pure, δ = 0)."
        + (
            f" The sidebar's δ = {s.delta:g} is not that δ: at a smaller δ the Gaussian mechanisms add more "
            "noise, so their accuracy there is lower (at a larger δ, higher)."
            if gaussian_delta and s.delta not in gaussian_delta
            else ""
        )
    )
