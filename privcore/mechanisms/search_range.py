"""The bisection range of posthoc PTR's φ, chosen by the library (docs/DESIGN.md, "certifier choice").

R_max and tol must be public and fixed before the input is seen; they may depend on the smallest
ε and δ that will be asked for. The dashboard offers a total ε ≥ 0.1, which PTR spends as
(2·ε/2, δ/2, R), so it runs PTR at ε ≥ 0.05, and δ ≥ 1e-10: those are the defaults here, so a φ
computed through :func:`privcore.certify` or the CLI is the one the dashboard caches.
"""

from __future__ import annotations

import math

from privcore.validation import check_delta, check_epsilon, check_in_range, check_positive

__all__ = ["DEFAULT_DELTA_MIN", "DEFAULT_EPSILON_MIN", "ptr_search_range"]

#: The smallest ε and δ the range is sized for unless a smaller one is asked for.
DEFAULT_EPSILON_MIN = 0.05
DEFAULT_DELTA_MIN = 1e-10


def ptr_search_range(
    radius: float,
    *,
    epsilon_min: float = DEFAULT_EPSILON_MIN,
    delta_min: float = DEFAULT_DELTA_MIN,
    miss: float = 1e-3,
    tol_fraction: float = 1 / 16,
) -> tuple[float, float]:
    """(R_max, tol) for φ's bisection, fixed before any ε/δ is chosen (posthoc Alg. 1; docs/DESIGN.md).

    With test noise Lap(b), b = R/ε, and threshold ln(1/δ)·b, a φ of b·(ln(1/δ) + ln(1/(2·miss)))
    passes with probability ≥ 1 − ``miss`` (Laplace tail ½e^{−t/b}); φ = R* − R once R* ≥ 2R, so
    bisecting beyond R_max = R + that φ at the smallest ε and δ offered buys nothing but MIP
    time. ``tol`` = ``tol_fraction``·R bounds the grid spacing ζ, which adds at most that fraction
    to the test noise (R + ζ)/ε.
    """
    r = check_positive("radius", radius)
    eps = check_epsilon(epsilon_min, "epsilon_min")
    dlt = check_delta(delta_min, "delta_min")
    b = r / eps
    r_max = r + b * (math.log(1.0 / dlt) + math.log(1.0 / (2.0 * miss)))
    r_max = max(r_max, 2.0 * r)
    frac = check_in_range("tol_fraction", tol_fraction, 0.0, 1.0)  # PTR needs tol < R
    return float(r_max), float(frac * r)
