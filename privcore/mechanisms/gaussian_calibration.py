"""Noise calibration for the Gaussian mechanism: classic, analytic, and the discrete-Gaussian floor.

* Classic (Dwork & Roth 2014, Theorem A.1; the formula of the IP paper, Definitions 4–5):
  σ = √(2 ln(1.25/δ)) · Δ / ε, proven only for ε < 1.
* Analytic (Balle & Wang 2018, Theorem 8 / Algorithm 1): the smallest σ with
  Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) ≤ δ. Exact for the continuous Gaussian, valid for every
  ε > 0 and never larger than the classic σ where both apply.
* Discrete-Gaussian floor (Canonne, Kamath & Steinke 2020, "The discrete Gaussian for
  differential privacy"): the multivariate discrete Gaussian N_ℤ(0, σ²)^d with integer shifts of
  ℓ2 norm ≤ Δ is ρ-zCDP with ρ = Δ²/(2σ²), exactly as the continuous one (per-coordinate Rényi
  bound, additive over independent coordinates), and ρ-zCDP implies (ε, δ)-DP with
  δ = inf_{a>1} exp((a−1)(aρ−ε)) · (1 − 1/a)^a / (a − 1) (their conversion, Corollary 13 in
  arXiv v3+). :func:`discrete_gaussian_sigma_floor` is the smallest σ that this proven route
  certifies. See :mod:`privcore.mechanisms.sampling` for why the samplers use it.

All σ returned here err on the private side: bisections return the upper end of their bracket
and re-check the condition at the value actually returned.
"""

from __future__ import annotations

import functools
import math
import sys

from scipy.special import log_ndtr

from privcore.validation import (
    check_delta,
    check_epsilon,
    check_in_range,
    check_nonnegative,
    check_positive,
)

__all__ = [
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "cks_zcdp_delta",
    "classic_gaussian_sigma",
    "discrete_gaussian_sigma_floor",
    "gaussian_sigma",
]

CALIBRATIONS = ("analytic", "classic")


def _sigma(ratio: float, sens: float, params: str, *, round_up: bool = False) -> float:
    """σ = ratio·Δ (one ulp up with ``round_up``), refused (ValueError naming the parameters) unless a
    positive normal finite float64."""
    sigma = math.nextafter(ratio * sens, math.inf) if round_up else ratio * sens
    if not (sys.float_info.min <= sigma < math.inf):
        raise ValueError(
            f"the Gaussian σ for {params} is {ratio:.3g}·sensitivity = {sigma!r}, outside float64's "
            "positive normal range: no noise level can be calibrated for these values"
        )
    return sigma


def classic_gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float) -> float:
    """σ = √(2 ln(1.25/δ)) · Δ/ε (Dwork & Roth 2014, Thm A.1; IP paper Defs. 4–5). Requires ε < 1.

    The classic proof only covers ε < 1; for larger ε use :func:`analytic_gaussian_sigma`
    (``calibration="analytic"``), which is valid for every ε and tighter.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    sens = check_positive("sensitivity", sensitivity)
    if eps >= 1.0:
        raise ValueError(
            f"epsilon must be in (0, 1) for the classic Gaussian calibration (its proof needs ε < 1), "
            f'got {epsilon!r}; use calibration="analytic" (Balle & Wang 2018), valid for every ε > 0'
        )
    params = f"epsilon={epsilon!r}, delta={delta!r}, sensitivity={sensitivity!r}"
    # 1.25/δ, log, sqrt and /ε each round to nearest (relative error ≤ 2⁻⁵³; log and sqrt damp the
    # error they inherit): widen by 2·2⁻⁵² ≥ 4·2⁻⁵³ and round the product up, so that σ is never below
    # √(2 ln(1.25/δ))·Δ/ε (what the theorem needs)
    ratio = math.sqrt(2.0 * math.log(1.25 / dlt)) / eps
    return _sigma(ratio * (1.0 + 2.0 * sys.float_info.epsilon), sens, params, round_up=True)


def _log_analytic_delta(ratio: float, eps: float) -> float:
    """log δ(σ) for σ/Δ = ``ratio``: log[Φ(1/2r − εr) − e^ε Φ(−1/2r − εr)], computed in log space.

    ``ratio`` 0 (σ/Δ underflowed) gives the limit δ = 1, ∞ the limit δ = 0."""
    if ratio == 0.0:
        return 0.0
    a = 0.5 / ratio - eps * ratio
    b = -0.5 / ratio - eps * ratio
    log_a = float(log_ndtr(a))
    log_b = eps + float(log_ndtr(b))
    if log_b >= log_a:  # only through rounding: the true difference is positive
        return -math.inf
    return log_a + math.log(-math.expm1(log_b - log_a))


def analytic_gaussian_delta(*, epsilon: float, sigma: float, sensitivity: float) -> float:
    """The exact δ(ε) of the Gaussian mechanism N(0, σ²) at ℓ2 sensitivity Δ (Balle & Wang 2018, Thm 8)."""
    eps = check_epsilon(epsilon)
    sig = check_positive("sigma", sigma)
    sens = check_positive("sensitivity", sensitivity)
    return min(1.0, math.exp(_log_analytic_delta(sig / sens, eps)))


def _bisect_ratio(holds, *, rtol: float) -> float:
    """Smallest r > 0 with ``holds(r)`` (monotone: False below, True above), upper end of bracket."""
    hi = 1.0
    while not holds(hi):
        hi *= 2.0
        if hi > 1e300:
            raise ValueError("no noise level satisfies the condition for these epsilon and delta")
    lo = hi / 2.0
    while holds(lo):
        hi = lo
        lo /= 2.0
        if lo < 1e-300:
            return hi
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if holds(mid):
            hi = mid
        else:
            lo = mid
    return hi


@functools.lru_cache(maxsize=4096)
def _analytic_ratio(eps: float, dlt: float, rtol: float) -> float:
    log_delta = math.log(dlt)
    return _bisect_ratio(lambda r: _log_analytic_delta(r, eps) <= log_delta, rtol=rtol)


def analytic_gaussian_sigma(
    *, epsilon: float, delta: float, sensitivity: float, rtol: float = 1e-10
) -> float:
    """Smallest σ with Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) ≤ δ (Balle & Wang 2018, Alg. 1 / Thm 8).

    Solved by bisection on σ/Δ (the left side is decreasing in σ) until the bracket's relative
    width is ≤ ``rtol``; the upper end is returned, so the condition holds at the returned σ
    (checked again after multiplying by Δ, nudged up by one ulp at a time if rounding broke it).
    Stable for every ε > 0: both terms are evaluated as logarithms (``scipy.special.log_ndtr``),
    so neither e^ε nor the tiny normal tails overflow or underflow.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    sens = check_positive("sensitivity", sensitivity)
    tol = check_in_range("rtol", rtol, 0.0, 0.01, high_open=False)
    params = f"epsilon={epsilon!r}, delta={delta!r}, sensitivity={sensitivity!r}"
    sigma = _sigma(_analytic_ratio(eps, dlt, tol), sens, params)
    log_delta = math.log(dlt)
    while _log_analytic_delta(sigma / sens, eps) > log_delta:
        sigma = math.nextafter(sigma, math.inf)
    if math.isinf(sigma):
        raise ValueError(f"the Gaussian σ for {params} overflows float64")
    return sigma


def gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float, calibration: str) -> float:
    """σ under the named calibration: ``"analytic"`` (Balle & Wang 2018) or ``"classic"`` (ε < 1 only)."""
    if calibration == "analytic":
        return analytic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    if calibration == "classic":
        return classic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    raise ValueError(f"calibration must be one of 'analytic', 'classic', got {calibration!r}")


def _log_cks_delta_at(alpha: float, rho: float, eps: float) -> float:
    """log of CKS20's zCDP→(ε,δ) bound at one Rényi order a: valid for every a > 1."""
    return (alpha - 1.0) * (alpha * rho - eps) + alpha * math.log1p(-1.0 / alpha) - math.log(alpha - 1.0)


def _log_cks_delta(rho: float, eps: float) -> float:
    """min over a > 1 of :func:`_log_cks_delta_at` (numerically; any a gives a valid bound).

    ρ = 0 (no privacy loss) gives −∞; the search range for a is capped at 1e300."""
    if rho == 0.0:
        return -math.inf
    a_max = min(1e300, max(4.0, (eps + 1.0) / (2.0 * rho) + 2.0))
    from scipy.optimize import minimize_scalar  # ~0.3 s to import: only where a bound is computed

    # search over x = log(a - 1) so that orders close to 1 are reachable
    res = minimize_scalar(
        lambda x: _log_cks_delta_at(1.0 + math.exp(x), rho, eps),
        bounds=(-30.0, math.log(a_max - 1.0)),
        method="bounded",
        options={"xatol": 1e-10},
    )
    best = float(res.fun)
    for a in (1.0 + math.exp(-30.0), a_max):  # the bounded search never looks at its end points
        best = min(best, _log_cks_delta_at(a, rho, eps))
    return best


def cks_zcdp_delta(*, rho: float, epsilon: float) -> float:
    """δ such that ρ-zCDP implies (ε, δ)-DP (Canonne, Kamath & Steinke 2020, Cor. 13), capped at 1."""
    r = check_positive("rho", rho)
    eps = check_nonnegative("epsilon", epsilon)
    return math.exp(min(0.0, _log_cks_delta(r, eps)))


#: Margin on log δ when certifying through a numerically evaluated bound (absorbs rounding).
_LOG_MARGIN = 1e-9


@functools.lru_cache(maxsize=4096)
def _cks_ratio(eps: float, dlt: float, rtol: float) -> float:
    target = math.log(dlt) - _LOG_MARGIN

    def rho(r: float) -> float:  # Δ²/(2σ²) at σ/Δ = r; r² underflowing to 0 means ρ = ∞
        r2 = r * r
        return 0.5 / r2 if r2 > 0.0 else math.inf

    return _bisect_ratio(lambda r: _log_cks_delta(rho(r), eps) <= target, rtol=rtol)


def discrete_gaussian_sigma_floor(
    *, epsilon: float, delta: float, sensitivity: float, rtol: float = 1e-9
) -> float:
    """Smallest σ for which the discrete Gaussian N_ℤ(0, σ²)^d is provably (ε, δ)-DP at ℓ2 sensitivity Δ.

    Route (Canonne, Kamath & Steinke 2020): ρ = Δ²/(2σ²)-zCDP for integer shifts of ℓ2 norm ≤ Δ,
    then their zCDP → (ε, δ) conversion (Cor. 13). Upper end of a bisection on σ/Δ, with a 1e-9
    margin on log δ for rounding. Costs ≈ 6–13 % more σ than the continuous analytic Gaussian at
    δ = 1e-5 (more at large δ).
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    sens = check_positive("sensitivity", sensitivity)
    tol = check_in_range("rtol", rtol, 0.0, 0.01, high_open=False)
    params = f"epsilon={epsilon!r}, delta={delta!r}, sensitivity={sensitivity!r}"
    return _sigma(_cks_ratio(eps, dlt, tol), sens, params, round_up=True)
