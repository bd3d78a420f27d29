"""The outcome of a release and its guarantee in plain words: pure Python, no Streamlit, no privacy maths.

* :class:`OutcomeText`, :func:`outcome_summary` — what the Release page prints for a PTR result
  (posthoc Alg. 1): released or ⊥, why, and the noisy test in numbers;
* :func:`plain_guarantee` — the guarantee of a release, the (2ε, δ/2, R) of posthoc Thm 4.4 or the
  {(ε, δ), α} of the IP paper's Def. 2, as one sentence;
* :func:`release_probability` — P[PTR releases] for a given φ, for the dashboard's curves (never for
  calibration).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from privcore.mechanisms import release_probability  # re-exported: the dashboard's curves

__all__ = ["OutcomeText", "outcome_summary", "plain_guarantee", "release_probability"]


@dataclass(frozen=True, kw_only=True)
class OutcomeText:
    """What the Release page prints: a headline, one explanatory sentence and the test in numbers."""

    released: bool
    headline: str
    detail: str
    test: str


def outcome_summary(result: Any) -> OutcomeText:
    """Plain-words reading of a :class:`privcore.mechanisms.PTRResult` (posthoc Alg. 1)."""
    phi = float(result.phi)
    phi_hat = float(result.phi_noisy)
    thr = float(result.threshold)
    test = f"φ̂ = {phi_hat:.4g} {'>' if result.released else '≤'} threshold {thr:.4g} (φ = {phi:.4g})"
    if result.released:
        return OutcomeText(
            released=True,
            headline="Released",
            detail=(
                f"The noisy test passed: the output is the obfuscated vector plus Laplace noise of "
                f"scale {result.noise_scale_effective:.4g} per coordinate."
            ),
            test=test,
        )
    if phi == 0.0:
        why = (
            "φ = 0: the certified local Lipschitz constant of the obfuscator over the R-ball already exceeds "
            "Δp, so this image is too sensitive to be released at this R."
        )
    else:
        why = (
            "φ > 0 (the image is at least φ from any point whose R-neighbourhood breaks Δp) but the noisy "
            "test fell at or below the threshold ln(1/δ)·b; a larger ε or δ makes it pass more often."
        )
    return OutcomeText(released=False, headline="⊥ (nothing released)", detail=why, test=test)


def plain_guarantee(guarantee: Any) -> str:
    """The guarantee of a release as one sentence (posthoc Def. 1 / Thm 4.4; IP paper Def. 2)."""
    eps, dlt, r = float(guarantee.epsilon), float(guarantee.delta), float(guarantee.radius)
    if dlt >= 1.0:
        return f"No protection: δ = 1 (ε = {eps:.4g}); this statement holds for every mechanism."
    factor = math.exp(eps) if eps < 700 else math.inf
    if math.isinf(r):
        who = "Any other image"
    elif getattr(guarantee, "space", None) is not None and guarantee.space.value == "embedding":
        who = f"Any image whose embedding lies within ℓ∞ distance R = {r:.4g} of this one's"
    else:
        who = f"Any input within distance α = {r:.4g} of this one ({guarantee.metric})"
    return (
        f"{who} would have produced this output with almost the same probability: "
        f"ε = {eps:.4g}, δ = {dlt:.3g} (no outcome becomes more than e^ε ≈ {factor:.3g} times "
        f"more likely, except with probability δ)."
    )
