"""What a sent release costs, and when a setting deserves a warning: pure Python, no Streamlit.

* :func:`spent_guarantee` — the guarantee one sent release at the sidebar's settings spends, from
  the mechanism itself (:meth:`~privcore.mechanisms.protocol.Mechanism.spent`). The sidebar's ε is
  the total of that guarantee for every mechanism: Global spends (ε, 0, R) on the embedding; PTR runs
  at ε/2 and spends (2·ε/2, δ/2, R) = (ε, δ/2, R) (posthoc Thm 4.4); the IP mechanisms spend (ε, δ)
  or (ε, 0) at α on the input (IP paper Defs 3–5);
* :func:`extreme_warnings` — plain-words warnings for a guarantee that protects little: e^ε past
  e^10, δ ≥ 1e-3, δ ≥ 1/n for a dataset of n images (the DP Wizard's thresholds and the usual
  "δ ≪ 1/n" rule: with δ ≥ 1/n a mechanism may publish one record outright and still qualify);
* :func:`meaningful` — whether an (ε, δ) is still a meaningful guarantee by the same two thresholds
  (:data:`MEANINGFUL_RULE`), for tables such as the Inference-privacy page's chaining;
* :func:`composition_warnings` — the Accountant's totals past a threshold the user sets;
* :func:`worst_case_status` — each image's worst case with how loudly to say it: over the threshold or
  vacuous (δ ≥ 1) an error, from :data:`NEAR_SHARE` of it a warning, below that plain text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from privcore.mechanisms import Guarantee, Norm
from privlens.settings import Settings

__all__ = [
    "DELTA_WARN",
    "EPSILON_WARN",
    "NEAR_SHARE",
    "composition_warnings",
    "extreme_warnings",
    "meaningful",
    "meaningful_rule",
    "spent_guarantee",
    "spent_text",
    "worst_case_status",
]

#: A guarantee whose factor e^ε exceeds e^10 ≈ 22 000 is flagged (the DP Wizard's bound).
EPSILON_WARN = 10.0
#: δ at or above this is flagged: a failure probability of one in a thousand per release.
DELTA_WARN = 1e-3


def spent_guarantee(s: Settings) -> Guarantee:
    """The guarantee one sent release spends at the settings ``s``: the mechanism's own
    :meth:`~privcore.mechanisms.protocol.Mechanism.spent`, no model needed."""
    mech = s.spec
    names = mech.parameter_names
    return mech.spent(mech.setting(epsilon=s.epsilon, delta=s.delta, radius=s.radius if "radius" in names
                                   else None, alpha=s.alpha if "alpha" in names else None))


def spent_text(s: Settings) -> str:
    """One line for beside the ε slider: what a sent release spends, in numbers."""
    from privlens.mechanism_text import epsilon_note

    mech, g = s.spec, spent_guarantee(s)
    free = "Previews cost nothing: they hold no draw, the noise is drawn when you send."
    if g.all_pairs:
        return (f"Each sent release spends (ε, δ) = ({g.epsilon:g}, {g.delta:g}) over every pair of inputs "
                f"({g.definition or 'local DP'}; {mech.label}, never ⊥). {free}")
    if mech.family == "posthoc":
        note = epsilon_note(mech, s) or (
            f"({mech.label}{'' if mech.uses_delta else ': no δ'}"
            f"{', never ⊥' if not mech.needs_certificate else ''}).")
        spent = f"{mech.guarantee} = ({g.epsilon:g}, {g.delta:g}, {g.radius:g})"
        return f"Each sent release spends {spent} on the embedding: {note} {free}"
    return (
        f"Each sent release spends (ε, δ) = ({g.epsilon:g}, {g.delta:g}) at α = {g.radius:g} "
        f"({'ℓ1' if g.norm is Norm.L1 else 'ℓ2'} on the input). {free}"
    )


def extreme_warnings(g: Guarantee, *, n: int | None = None) -> list[str]:
    """Warnings (plain words, Markdown) for a guarantee that protects little; ``n`` is the dataset's
    number of images when known (for the δ ≥ 1/n rule)."""
    out: list[str] = []
    if g.epsilon > EPSILON_WARN:
        factor = f"{math.exp(g.epsilon):.2g}" if g.epsilon < 700 else "∞"
        out.append(
            f"**ε = {g.epsilon:g} is very large**: an outcome may become e^{g.epsilon:g} ≈ {factor} "
            f"times more likely for this image than for a neighbour — hardly a guarantee "
            f"(past e^{EPSILON_WARN:g}). Lower ε in the sidebar."
        )
    if g.delta >= DELTA_WARN:
        out.append(
            f"**δ = {g.delta:g} is large**: with probability up to δ the guarantee does not hold at all, "
            f"for every release (flagged from δ = {DELTA_WARN:g})."
        )
    if n is not None and n > 0 and g.delta >= 1.0 / n:
        out.append(
            f"**δ = {g.delta:g} ≥ 1/n = {1.0 / n:.2g}** for this dataset's n = {n} images: a mechanism that "
            "publishes one image in n outright would still meet (ε, δ). Pick δ well below 1/n."
        )
    return out


def delta_limit(n: int | None = None) -> float:
    """The δ from which a guarantee is flagged: :data:`DELTA_WARN`, or 1/n when that is smaller for a
    dataset of ``n`` images."""
    return min(DELTA_WARN, 1.0 / n) if n is not None and n > 0 else DELTA_WARN


def meaningful(epsilon: float, delta: float, *, n: int | None = None) -> str:
    """"yes" when (ε, δ) passes :func:`meaningful_rule` — ε ≤ :data:`EPSILON_WARN` and δ below
    :func:`delta_limit` (the thresholds of :func:`extreme_warnings`) — else "no: " and the part that
    fails, e.g. "no: δ = 0.186 ≥ 0.00056"."""
    limit = delta_limit(n)
    fails = []
    if epsilon > EPSILON_WARN:
        fails.append(f"ε = {epsilon:.4g} > {EPSILON_WARN:g}")
    if delta >= limit:
        fails.append(f"δ = {delta:.3g} ≥ {limit:.2g}")
    return "no: " + ", ".join(fails) if fails else "yes"


def meaningful_rule(n: int | None = None) -> str:
    """The rule :func:`meaningful` applies, in words (Markdown), with its sources."""
    limit = delta_limit(n)
    why_n = (
        f" and 1/n = {1.0 / n:.2g} for the dataset's n = {n} images" if n is not None and n > 0 else ""
    )
    return (
        f"**Meaningful** here means ε ≤ {EPSILON_WARN:g} (an outcome at most e^{EPSILON_WARN:g} ≈ 22 000 "
        f"times likelier) and δ < {limit:.2g}, the smaller of {DELTA_WARN:g}{why_n}: with δ ≥ 1/n a "
        "mechanism may publish one image in n outright and still meet (ε, δ), so δ must stay well below "
        "1/n (Dwork & Roth, *The Algorithmic Foundations of Differential Privacy*, 2014, §2.3). These are "
        "the thresholds of the dashboard's warnings (docs/USER-GUIDE.md, *Warnings*)."
    )


def composition_warnings(totals: Sequence[Mapping[str, Any]], *, threshold: float) -> list[tuple[str, str]]:
    """(image name, warning) for each image whose worst-case total ε (a row of
    :func:`privlens.ledger.ledger_totals`) exceeds ``threshold``; the name is user text (show it
    with :func:`privlens.settings.md_literal`)."""
    out: list[tuple[str, str]] = []
    for row in totals:
        eps = float(row["total ε = Σεᵢ"])
        if row["total"] == "worst case" and eps > threshold:
            out.append(
                (
                    str(row["image"]),
                    f"worst case ε = {eps:.4g} > your threshold {threshold:g} "
                    f"(δ = {float(row['total δ = Σδᵢ']):.3g}, {row['releases counted']} releases)",
                )
            )
    return out


#: an image's worst-case total from this share of the user's threshold on is flagged as near it
NEAR_SHARE = 0.8


def worst_case_status(totals: Sequence[Mapping[str, Any]], *, threshold: float) -> list[tuple[str, str, str]]:
    """(level, image name, text) for each image's worst case (the ``worst case`` rows of
    :func:`privlens.ledger.ledger_totals`): level "error" when δ ≥ 1 (vacuous), "over" when ε is over
    ``threshold`` (:func:`composition_warnings` says so), "warning" from :data:`NEAR_SHARE` of it, "ok"
    otherwise — far below the budget a total is a status, not an alarm. The name is user text (show it
    with ``md_literal``)."""
    out: list[tuple[str, str, str]] = []
    for row in totals:
        if row["total"] != "worst case":
            continue
        eps, delta = float(row["total ε = Σεᵢ"]), float(row["total δ = Σδᵢ"])
        text = f"ε = {eps:.4g}, δ = {delta:.3g} for {row['pairs']}"
        if delta >= 1.0:
            level = "error"
        elif eps > threshold:
            level = "over"
        elif eps >= NEAR_SHARE * threshold:
            level = "warning"
            text += f" — {eps / threshold:.0%} of your threshold {threshold:g}"
        else:
            level = "ok"
        out.append((level, str(row["image"]), text))
    return out
