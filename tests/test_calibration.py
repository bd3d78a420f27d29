"""Gaussian calibration: classic closed form, analytic (Balle & Wang 2018) and the discrete floor (CKS20).

The analytic and zCDP conditions are re-evaluated independently with mpmath at 50 digits.
"""

from __future__ import annotations

import math

import mpmath
import pytest
from scipy.stats import norm

from privcore.mechanisms import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    cks_zcdp_delta,
    classic_gaussian_sigma,
    discrete_gaussian_sigma_floor,
    gaussian_sigma,
)

mpmath.mp.dps = 50

EPSILONS = [1e-3, 0.01, 0.1, 0.5, 0.99, 1.0, 2.0, 5.0, 20.0, 100.0]
DELTAS = [1e-12, 1e-5, 0.05, 0.5]


def mp_analytic_delta(eps: float, sigma: float, sens: float) -> mpmath.mpf:
    """Balle & Wang's δ(σ) in 50-digit arithmetic, via erfc (a different route from log_ndtr)."""
    e, s, d = mpmath.mpf(eps), mpmath.mpf(sigma), mpmath.mpf(sens)

    def phi(x: mpmath.mpf) -> mpmath.mpf:
        return mpmath.erfc(-x / mpmath.sqrt(2)) / 2

    return phi(d / (2 * s) - e * s / d) - mpmath.exp(e) * phi(-d / (2 * s) - e * s / d)


@pytest.mark.parametrize("eps", [0.01, 0.1, 0.5, 0.9])
@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("sens", [1.0, 0.37, 12.5])
def test_classic_sigma_is_the_closed_form(eps: float, delta: float, sens: float) -> None:
    assert classic_gaussian_sigma(epsilon=eps, delta=delta, sensitivity=sens) == pytest.approx(
        math.sqrt(2 * math.log(1.25 / delta)) * sens / eps, rel=1e-15
    )


@pytest.mark.parametrize("eps", [1.0, 1.5, 10.0])
def test_classic_refuses_epsilon_at_least_one_and_points_to_analytic(eps: float) -> None:
    with pytest.raises(ValueError, match=r"epsilon.*\(0, 1\).*calibration=\"analytic\""):
        classic_gaussian_sigma(epsilon=eps, delta=1e-5, sensitivity=1.0)


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("delta", DELTAS)
def test_analytic_sigma_holds_and_is_tight(eps: float, delta: float) -> None:
    """The condition holds at σ and fails at σ(1 − 1e-6): σ is within 1e-6 of the smallest valid one."""
    sens = 0.7
    sigma = analytic_gaussian_sigma(epsilon=eps, delta=delta, sensitivity=sens)
    assert mp_analytic_delta(eps, sigma, sens) <= delta
    assert mp_analytic_delta(eps, sigma * (1 - 1e-6), sens) > delta


@pytest.mark.parametrize("eps", [0.01, 0.1, 0.5, 0.9])
@pytest.mark.parametrize("delta", DELTAS)
def test_analytic_never_exceeds_classic(eps: float, delta: float) -> None:
    assert analytic_gaussian_sigma(epsilon=eps, delta=delta, sensitivity=1.0) <= classic_gaussian_sigma(
        epsilon=eps, delta=delta, sensitivity=1.0
    )


def test_analytic_sigma_is_linear_in_sensitivity() -> None:
    one = analytic_gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    eight = analytic_gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=8.0)
    assert eight == pytest.approx(8 * one, rel=1e-9)


@pytest.mark.parametrize("eps,sigma", [(0.1, 30.0), (1.0, 3.7), (5.0, 0.9), (50.0, 0.15)])
def test_analytic_delta_matches_scipy_norm(eps: float, sigma: float) -> None:
    expected = norm.cdf(0.5 / sigma - eps * sigma) - math.exp(eps) * norm.cdf(-0.5 / sigma - eps * sigma)
    assert analytic_gaussian_delta(epsilon=eps, sigma=sigma, sensitivity=1.0) == pytest.approx(
        expected, rel=1e-9, abs=1e-300
    )


def test_gaussian_sigma_dispatches_and_rejects_unknown_calibration() -> None:
    assert gaussian_sigma(epsilon=0.5, delta=1e-5, sensitivity=1.0, calibration="classic") == (
        classic_gaussian_sigma(epsilon=0.5, delta=1e-5, sensitivity=1.0)
    )
    with pytest.raises(ValueError, match="calibration"):
        gaussian_sigma(epsilon=0.5, delta=1e-5, sensitivity=1.0, calibration="optimal")


def mp_cks_log_delta(rho: float, eps: float, alpha: float) -> mpmath.mpf:
    r, e, a = mpmath.mpf(rho), mpmath.mpf(eps), mpmath.mpf(alpha)
    return (a - 1) * (a * r - e) + a * mpmath.log(1 - 1 / a) - mpmath.log(a - 1)


def mp_min_cks_log_delta(rho: float, eps: float) -> mpmath.mpf:
    """min over Rényi orders a > 1: coarse log-grid over a − 1, then 50-digit golden-section search."""

    def f(x: mpmath.mpf) -> mpmath.mpf:
        return mp_cks_log_delta(rho, eps, 1 + mpmath.exp(x))

    grid = [mpmath.mpf(k) / 20 for k in range(-400, 200)]
    x0 = min(grid, key=f)
    lo, hi = x0 - mpmath.mpf(1) / 20, x0 + mpmath.mpf(1) / 20
    ratio = (mpmath.sqrt(5) - 1) / 2
    for _ in range(120):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if f(a) < f(b):
            hi = b
        else:
            lo = a
    return min(f(lo), f(hi), f(x0))


@pytest.mark.parametrize("eps", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("delta", [1e-5, 0.05])
def test_discrete_floor_is_certified_by_the_zcdp_conversion(eps: float, delta: float) -> None:
    """At the floor some Rényi order certifies δ (mpmath); at σ(1 − 1e-6) the best order does not."""
    sigma = discrete_gaussian_sigma_floor(epsilon=eps, delta=delta, sensitivity=1.0)
    rho = 0.5 / sigma**2
    assert mp_min_cks_log_delta(rho, eps) <= math.log(delta)
    rho_low = 0.5 / (sigma * (1 - 1e-6)) ** 2
    assert mp_min_cks_log_delta(rho_low, eps) > math.log(delta)
    # the proven discrete route is never better than the exact continuous analytic calibration
    assert sigma >= analytic_gaussian_sigma(epsilon=eps, delta=delta, sensitivity=1.0)
    assert cks_zcdp_delta(rho=rho, epsilon=eps) <= delta


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"epsilon": 0.0, "delta": 1e-5, "sensitivity": 1.0}, ValueError, "epsilon.*0"),
        ({"epsilon": math.nan, "delta": 1e-5, "sensitivity": 1.0}, ValueError, "epsilon"),
        ({"epsilon": math.inf, "delta": 1e-5, "sensitivity": 1.0}, ValueError, "epsilon"),
        ({"epsilon": 1.0, "delta": 0.0, "sensitivity": 1.0}, ValueError, r"delta must be in \(0, 1\)"),
        ({"epsilon": 1.0, "delta": 1.0, "sensitivity": 1.0}, ValueError, "delta"),
        ({"epsilon": 1.0, "delta": 1e-5, "sensitivity": -1.0}, ValueError, "sensitivity"),
        ({"epsilon": "1", "delta": 1e-5, "sensitivity": 1.0}, TypeError, "epsilon"),
        ({"epsilon": True, "delta": 1e-5, "sensitivity": 1.0}, TypeError, "epsilon"),
    ],
)
def test_bad_parameters_name_themselves(kwargs: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        analytic_gaussian_sigma(**kwargs)


def test_classic_sigma_is_never_below_its_formula_in_exact_arithmetic() -> None:
    """σ = √(2 ln(1.25/δ))·Δ/ε computed in float64 rounds to nearest; the released σ must be at least
    the exact value (checked at 200-bit precision), and at most a few ulp above it."""
    import numpy as np
    from mpmath import log, mp, mpf, sqrt

    from privcore.mechanisms.gaussian_calibration import classic_gaussian_sigma

    mp.prec = 200
    for eps in np.linspace(0.01, 0.99, 60):
        for delta in (1e-6, 1e-5, 0.05):
            for sens in (0.1, 0.37, 1.0, 2.5, 51.88):
                got = classic_gaussian_sigma(epsilon=float(eps), delta=delta, sensitivity=sens)
                exact = sqrt(2 * log(mpf(1.25) / mpf(delta))) / mpf(float(eps)) * mpf(sens)
                assert exact <= mpf(got) <= exact * (1 + mpf(2) ** -48), (eps, delta, sens)
