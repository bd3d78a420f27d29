"""Exact grid samplers: distributions, the Mironov grid property, randomness sources, plans, refusals.

Statistical tests use fixed seeds and reject at p < 1e-3 (stated per test); with the seeds fixed
the outcomes are deterministic, the level says how unlikely a false alarm was when they were chosen.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privcore.mechanisms import (
    NoisePlan,
    RandomBits,
    add_noise,
    discrete_gaussian_integers,
    discrete_gaussian_sigma_floor,
    discrete_laplace_integers,
    plan_gaussian,
    plan_laplace,
)
from privcore.mechanisms.sampling import _bernoulli

ALPHA = 1e-3  # false-alarm level of every statistical test in this file


def _chi_square_pvalue(samples: np.ndarray, pmf: dict[int, float]) -> float:
    """Chi-square goodness of fit on the support points with expected count ≥ 20, plus one tail cell."""
    n = samples.size
    keys = sorted(k for k, p in pmf.items() if p * n >= 20)
    observed = np.array([np.count_nonzero(samples == k) for k in keys], dtype=float)
    expected = np.array([pmf[k] * n for k in keys])
    observed = np.append(observed, n - observed.sum())
    expected = np.append(expected, n - expected.sum())
    return float(stats.chisquare(observed, expected).pvalue)


@pytest.mark.parametrize("t", [1, 3, 10])
def test_discrete_laplace_matches_its_pmf_exactly(t: int) -> None:
    """P(N = k) ∝ exp(−|k|/t) (CKS20 Alg. 2); chi-square, false alarm 1e-3."""
    samples = discrete_laplace_integers(t, 100_000, rng=11 + t)
    ks = range(-60 * t, 60 * t + 1)
    weights = {k: math.exp(-abs(k) / t) for k in ks}
    total = sum(weights.values())
    assert _chi_square_pvalue(samples, {k: w / total for k, w in weights.items()}) > ALPHA


@pytest.mark.parametrize("s", [0.8, 2.5, 7.0])
def test_discrete_gaussian_matches_its_pmf_exactly(s: float) -> None:
    """P(N = k) ∝ exp(−k²/(2s²)) (CKS20 Alg. 3); chi-square, false alarm 1e-3."""
    samples = discrete_gaussian_integers(s, 100_000, rng=21)
    ks = range(-int(20 * s) - 5, int(20 * s) + 6)
    weights = {k: math.exp(-(k * k) / (2 * s * s)) for k in ks}
    total = sum(weights.values())
    assert _chi_square_pvalue(samples, {k: w / total for k, w in weights.items()}) > ALPHA


def test_laplace_noise_has_the_planned_scale() -> None:
    """KS against Laplace(effective scale), false alarm 1e-3; effective is within 1e-6 of Δ/ε."""
    plan = plan_laplace(sensitivity=2.0, epsilon=0.5, numel=200_000)
    assert plan.nominal == 4.0 and 1.0 <= plan.inflation < 1 + 1e-6
    noise = add_noise(np.zeros(200_000), plan, rng=5)
    assert stats.kstest(noise, stats.laplace(scale=plan.effective).cdf).pvalue > ALPHA
    # variance 2b², with a 4.5-standard-error band (var of the sample variance of Laplace: 20 b⁴/n)
    assert abs(noise.var() - 2 * plan.effective**2) < 4.5 * math.sqrt(20 / noise.size) * plan.effective**2


@pytest.mark.parametrize("delta", [1e-5, 0.05])
def test_gaussian_noise_has_the_planned_sigma(delta: float) -> None:
    """KS against N(0, σ_eff²), false alarm 1e-3; σ_eff = max(paper σ, proven discrete floor)."""
    plan = plan_gaussian(sigma=1.0, sensitivity=0.3, epsilon=1.0, delta=delta, numel=100_000)
    floor = discrete_gaussian_sigma_floor(epsilon=1.0, delta=delta, sensitivity=0.3)
    assert plan.effective >= max(1.0, floor)
    assert plan.effective <= max(1.0, floor) * (1 + 1e-6)
    noise = add_noise(np.zeros(100_000), plan, rng=6)
    assert stats.kstest(noise, stats.norm(scale=plan.effective).cdf).pvalue > ALPHA


def test_outputs_lie_on_the_grid_whatever_the_low_order_bits() -> None:
    """Mironov 2012: every output is an integer multiple of the power-of-two grid g, and inputs that
    differ only below the grid give bit-identical outputs under the same randomness."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(5000) * 3.7 + np.pi  # full 53-bit mantissas
    for plan in (
        plan_laplace(sensitivity=1.0, epsilon=1.0, numel=x.size),
        plan_gaussian(sigma=1.0, sensitivity=1.0, epsilon=0.9, delta=1e-5, numel=x.size),
    ):
        assert math.log2(plan.grid) == round(math.log2(plan.grid))
        out = add_noise(x, plan, rng=1)
        multiples = out / plan.grid
        assert np.all(multiples == np.rint(multiples))
        # move every input by a quarter grid step towards its own grid point: same cell, same output
        lattice = np.rint(x / plan.grid) * plan.grid
        nudged = x + (lattice - x) * 0.5
        assert not np.array_equal(nudged, x)
        assert np.array_equal(add_noise(nudged, plan, rng=1), out)


def test_seeded_streams_reproduce_and_differ_by_seed() -> None:
    plan = plan_laplace(sensitivity=1.0, epsilon=1.0, numel=100)
    x = np.zeros(100)
    assert np.array_equal(add_noise(x, plan, rng=7), add_noise(x, plan, rng=7))
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    assert np.array_equal(add_noise(x, plan, rng=g1), add_noise(x, plan, rng=g2))
    assert not np.array_equal(add_noise(x, plan, rng=7), add_noise(x, plan, rng=8))


def test_secure_default_uses_the_os_and_differs_between_calls() -> None:
    assert RandomBits().secure and not RandomBits(0).secure
    plan = plan_gaussian(sigma=1.0, sensitivity=1.0, epsilon=1.0, delta=1e-5, numel=64)
    a, b = add_noise(np.zeros(64), plan), add_noise(np.zeros(64), plan)
    assert not np.array_equal(a, b)  # equal with probability ~2^-2000


@pytest.mark.parametrize("p,k", [(0.3, 4), (0.3, 32), (math.exp(-1), 3), (0.999, 8)])
def test_lazy_bernoulli_is_exact_including_ties(p: float, k: int) -> None:
    """k-bit head + 53-bit refinement on ties gives P[success] = p; binomial test, false alarm 1e-3."""
    bits = RandomBits(99)
    n = 200_000
    heads = bits.words(n) >> np.uint64(64 - k)
    successes = int(_bernoulli(np.full(n, p), heads, k, bits).sum())
    assert stats.binomtest(successes, n, p).pvalue > ALPHA


def test_laplace_plan_covers_the_rounding_slack_exactly() -> None:
    """b_eff = t·g ≥ (Δ + numel·g)/(ε − 2⁻³⁶): the stated ε holds for the rounded integer mechanism."""
    for sens, eps, numel in [(1.0, 1.0, 1), (784.0, 0.1, 7_840_000), (3.3, 7.0, 10), (1e-9, 2.0, 5)]:
        plan = plan_laplace(sensitivity=sens, epsilon=eps, numel=numel)
        assert plan.effective == plan.grid_scale * plan.grid and plan.grid_scale == int(plan.grid_scale)
        assert plan.effective >= (sens + numel * plan.grid) / (eps - 2.0**-36)
        assert plan.inflation < 1 + 1e-4


def test_gaussian_plan_never_goes_below_the_paper_sigma() -> None:
    classic_like = plan_gaussian(sigma=10.0, sensitivity=1.0, epsilon=0.5, delta=1e-5, numel=784)
    assert classic_like.effective == 10.0  # the proven discrete floor (≈7.7) is below it
    tight = plan_gaussian(sigma=3.73, sensitivity=1.0, epsilon=1.0, delta=1e-5, numel=784)
    assert tight.effective >= discrete_gaussian_sigma_floor(
        epsilon=1.0, delta=1e-5, sensitivity=1.0 + math.sqrt(784) * tight.grid
    )


def test_add_noise_refuses_bad_input_before_drawing() -> None:
    plan = plan_laplace(sensitivity=1.0, epsilon=1.0, numel=4)
    with pytest.raises(ValueError, match="finite"):
        add_noise(np.array([0.0, np.nan]), plan, rng=0)
    with pytest.raises(ValueError, match="at most 4"):
        add_noise(np.zeros(5), plan, rng=0)
    with pytest.raises(ValueError, match="too large for the noise grid"):
        add_noise(np.array([1e300]), plan, rng=0)
    with pytest.raises(TypeError, match="NoisePlan"):
        add_noise(np.zeros(2), {"kind": "laplace"}, rng=0)  # type: ignore[arg-type]
    assert isinstance(plan, NoisePlan)


@pytest.mark.parametrize(
    "rng,exc",
    [(-1, ValueError), (1.5, TypeError), ("seed", TypeError), (True, TypeError), (object(), TypeError)],
)
def test_bad_rng_is_refused(rng: object, exc: type) -> None:
    with pytest.raises(exc, match="rng"):
        RandomBits(rng)  # type: ignore[arg-type]


def test_plans_validate_their_parameters() -> None:
    with pytest.raises(ValueError, match="epsilon"):
        plan_laplace(sensitivity=1.0, epsilon=1e-9, numel=1)
    with pytest.raises(ValueError, match="sensitivity"):
        plan_laplace(sensitivity=0.0, epsilon=1.0, numel=1)
    with pytest.raises(ValueError, match="numel"):
        plan_gaussian(sigma=1.0, sensitivity=1.0, epsilon=1.0, delta=1e-5, numel=0)
    with pytest.raises(ValueError, match="delta"):
        plan_gaussian(sigma=1.0, sensitivity=1.0, epsilon=1.0, delta=1.0, numel=1)
