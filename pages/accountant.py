"""Accountant: this session's releases composed per image and per neighbourhood relation, with the
worst case (basic composition, IP paper Prop. 2; ℓp balls compared by ‖·‖∞ ≤ ‖·‖₂ ≤ ‖·‖₁), and
calculators for chaining and group privacy, each with the formula used (IP paper Props 2–4; Vadhan
2017, Lemma 2.2). Widgets and layout only: every number comes from privcore.mechanisms.accounting."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from privcore.mechanisms import Guarantee, basic_composition, chaining, chaining_hops, group_privacy
from privlens import budget, ledger_panel, ui
from privlens.ledger import LEDGER_EXPLANATION, ledger_totals
from privlens.outcome import plain_guarantee
from privlens.settings import md_literal

s = ui.page_setup()
st.title("Accountant")
st.caption(
    "Every sent release of the same image spends privacy (its noise is drawn when you send; nothing is "
    "charged before). Releases sent in this "
    "session (Release and Inference privacy pages) are composed per image by basic composition — "
    "IP paper Prop. 2: (Σεᵢ, Σδᵢ) "
    "for the pairs of images every counted release covers — for each neighbourhood relation (space, norm, "
    "radius) and for the worst case, which adds every release. The ledger is kept on this server for this "
    "browser (a private key in a cookie, never in the link): a reload or a server restart keeps it."
)


#: short headers (a long one is cut off at 1000 px), the full meaning on hover
COMPOSED_COLUMNS = {
    "image": st.column_config.TextColumn("image", width="small"),
    "pairs": st.column_config.TextColumn("pairs", width="medium", help="The neighbouring pairs this total "
                                         "covers: space, norm and radius."),
    "releases counted": st.column_config.TextColumn("counted", help="Releases counted in this total, of all "
                                                    "releases of the image."),
    "total ε = Σεᵢ": st.column_config.NumberColumn("Σεᵢ", format="%.4g", help="Total ε: basic composition."),
    "total δ = Σδᵢ": st.column_config.NumberColumn("Σδᵢ", format="%.3g", help="Total δ: basic composition."),
    "releases that cover only some of these pairs": st.column_config.TextColumn(
        "partly covering", help="Releases that cover only some of these pairs: they cost those pairs "
        "their budget too."),
}
RELEASE_COLUMNS = {"metric": st.column_config.TextColumn("norm"),
                   "release": st.column_config.TextColumn("release", width="medium")}


def _fmt(g: Guarantee) -> str:
    radius = "all pairs" if math.isinf(g.radius) else f"{g.radius:.4g}"
    return f"(ε = {g.epsilon:.4g}, δ = {g.delta:.3g}, radius {radius})"


def _show(g: Guarantee) -> None:
    """A result: red when δ reached 1 (vacuous), amber with the reasons when it protects little
    (:func:`privlens.budget.extreme_warnings`), green otherwise."""
    warnings = budget.extreme_warnings(g)
    if g.vacuous:
        st.error(_fmt(g))
    elif warnings:
        st.warning(_fmt(g) + "\n\n" + "\n\n".join(warnings), icon=":material/warning:")
    else:
        st.success(_fmt(g))
    st.caption(plain_guarantee(g))


rows = ui.ledger_rows()
st.subheader("This session's releases")
ledger_panel.notice()
if not rows:
    st.info(
        "Nothing released yet in this session. Releases appear here as you make them on the Release and "
        "Inference privacy pages."
    )
else:
    table = pd.DataFrame(
        [
            {
                "#": i + 1,
                "image": r["image"],
                "release": r["label"],
                "ε": r["guarantee"].epsilon,
                "δ": r["guarantee"].delta,
                "radius": r["guarantee"].radius,
                "metric": r["guarantee"].metric,
            }
            for i, r in enumerate(rows)
        ]
    )
    st.dataframe(table, hide_index=True, width="stretch", column_config=RELEASE_COLUMNS)
    st.markdown("**Composed per image**, per neighbourhood relation and in the worst case:")
    try:
        composed = ledger_totals(rows)
    except ValueError as exc:
        st.error(
            f"The ledger cannot be composed: {exc}. Totals without that release would under-report, so "
            "none are shown; clear the ledger below to start again."
        )
    else:
        threshold = st.number_input(
            "Warn when an image's worst-case total ε exceeds",
            min_value=0.01,
            max_value=1000.0,
            value=budget.EPSILON_WARN,
            step=1.0,
            key="acc_threshold",
            help="Your privacy budget per image: the total of every sent release of it (basic composition).",
        )
        for image_name, text in budget.composition_warnings(composed, threshold=float(threshold)):
            st.error(f"**Over budget:** {md_literal(image_name)}: {text}.", icon=":material/warning:")
        st.dataframe(pd.DataFrame(composed), hide_index=True, width="stretch", column_config=COMPOSED_COLUMNS)
        # a box only where an image's total crosses or nears the threshold; below it a plain status line
        status = budget.worst_case_status(composed, threshold=float(threshold))
        for level, image_name, text in status:
            if level == "warning":
                st.warning(f"**Near your threshold:** worst case for {md_literal(image_name)}: {text}.",
                           icon=":material/warning:")
            elif level == "error":  # δ ≥ 1 (an image over the threshold is said above)
                st.error(f"Worst case for {md_literal(image_name)}: {text}.")
        calm = [f"- {md_literal(name)}: {text}" for level, name, text in status if level == "ok"]
        if calm:
            st.markdown(f"**Worst case per image**, below {budget.NEAR_SHARE:.0%} of your threshold "
                        f"{float(threshold):g}:\n" + "\n".join(calm))
        st.caption(LEDGER_EXPLANATION)
    # the formula alone (a LaTeX line does not wrap: with the words it ran off the page at 1000 px)
    st.markdown("**Basic composition**, over the releases that cover the pair:")
    st.latex(r"(\varepsilon, \delta) = \Big(\sum_i \varepsilon_i,\ \sum_i \delta_i\Big)")
ledger_panel.tools(rows)

st.subheader("Calculators")
st.caption("Start from the sidebar's mechanism and parameters, or enter any guarantee.")
base = budget.spent_guarantee(s)
mech = s.spec
at = f"α = {s.alpha:g}" if "alpha" in mech.parameter_names else f"R = {s.radius:g}"
if mech.epsilon_share != 1:
    k = f"{1 / mech.epsilon_share:g}"
    origin = (
        f"{mech.name} at ε/{k} = {s.mechanism_epsilon:g} (total ε = {s.epsilon:g}), δ = {s.delta:g}: "
        f"{mech.guarantee} by {mech.source}"
    )
else:
    delta = f", δ = {s.delta:g}" if mech.uses_delta else ""
    origin = f"{mech.label} at ε = {s.epsilon:g}{delta}, {at}: {mech.guarantee}"
c1, c2, c3 = st.columns(3)
eps = c1.number_input(
    "ε", min_value=0.0, value=float(base.epsilon), format="%.4g", key=f"acc_eps_{base.epsilon}"
)
dlt = c2.number_input(
    "δ", min_value=0.0, max_value=1.0, value=float(base.delta), format="%.3g", key=f"acc_delta_{base.delta}"
)
if base.all_pairs:  # local DP: no radius to enter
    rad = math.inf
    c3.markdown("radius: every pair of inputs")
else:
    rad = c3.number_input(
        "radius α (or R)",
        min_value=1e-9,
        value=float(base.radius),
        format="%.4g",
        key=f"acc_radius_{base.radius}",
    )
try:
    g = Guarantee(
        epsilon=eps, delta=dlt, radius=rad, space=base.space, norm=base.norm, mechanism=base.mechanism
    )
except ValueError as exc:
    st.error(str(exc))
    st.stop()
st.markdown(
    f"Starting guarantee {_fmt(g)} — from {origin}."
    if (eps, dlt, rad) == (base.epsilon, base.delta, base.radius)
    else f"Starting guarantee {_fmt(g)} (entered by hand)."
)

if g.all_pairs:
    st.caption("Chaining and group privacy widen a radius: a guarantee over every pair of inputs has "
               "none to widen, and stays as it is.")
else:
    left, right = st.columns(2)
    with left:
        st.markdown("**Chaining** — the guarantee at a larger radius β (IP paper Prop. 4, Appendix D)")
        beta = st.number_input("β", min_value=1e-9, value=float(4 * rad), format="%.4g",
                               key=f"acc_beta_{rad}")
        h = chaining_hops(g.radius, beta)
        c = chaining(g, beta)
        st.latex(
            r"h = \lceil \beta/\alpha \rceil = "
            + str(h)
            + r",\quad (h\varepsilon,\ \delta\,\frac{e^{h\varepsilon}-1}"
            r"{e^{\varepsilon}-1})"
        )
        _show(c)
    with right:
        st.markdown("**Group privacy** — k steps of the radius at once (Vadhan 2017, Lemma 2.2)")
        k = st.number_input("k", min_value=1, max_value=1000, value=3, step=1, key="acc_k")
        gp = group_privacy(g, int(k))
        st.latex(r"(k\varepsilon,\ k\,e^{(k-1)\varepsilon}\,\delta)\ \text{at radius } k\alpha")
        _show(gp)
        same = _fmt(chaining(g, int(k) * g.radius))
        st.caption(f"Chaining to the same radius k·α gives {same}, never worse.")

st.markdown("**Composing k identical releases** (basic composition)")
n = st.slider("number of releases", 1, 50, 5, key="acc_n")
total = basic_composition([g] * int(n))
st.latex(r"(n\varepsilon,\ n\delta)")
_show(total)
