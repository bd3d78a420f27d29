"""Inference-privacy mechanisms (Tian et al.): exact formulas, validation, types, and an empirical DP audit.

The audit compares the output distributions on a worst-case neighbouring pair over a family of
sets S (histogram bins for Laplace, half-lines for Gaussians, which contain the worst set) and
flags S when the 1 − α/(4m) Clopper–Pearson lower bound of P[M(x_a) ∈ S] exceeds
e^ε × the upper bound of P[M(x_b) ∈ S] + δ, in both directions (Bonferroni over m sets): a
correct mechanism is flagged with probability ≤ α = 1e-3. Each audit also runs a negative control
(the same mechanism with too little noise) which the audit must catch, so the test has power.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from scipy.stats import beta

from privcore.mechanisms import (
    GaussInput,
    GaussOutput,
    LapOutput,
    analytic_gaussian_sigma,
    discrete_gaussian_sigma_floor,
)

ALPHA = 1e-3
N = 200_000


def dp_violations(
    a: np.ndarray, b: np.ndarray, sets: list[tuple[float, float]], epsilon: float, delta: float
) -> list[tuple[float, float]]:
    """Sets [lo, hi) on which the samples prove P_a > e^ε P_b + δ or P_b > e^ε P_a + δ (level ALPHA)."""
    level = ALPHA / (4 * len(sets))
    bad = []
    for lo, hi in sets:
        for x, y in ((a, b), (b, a)):
            kx = int(np.count_nonzero((x >= lo) & (x < hi)))
            ky = int(np.count_nonzero((y >= lo) & (y < hi)))
            lower_x = beta.ppf(level, kx, x.size - kx + 1) if kx > 0 else 0.0
            upper_y = beta.ppf(1 - level, ky + 1, y.size - ky) if ky < y.size else 1.0
            if lower_x > math.exp(epsilon) * upper_y + delta:
                bad.append((lo, hi))
    return bad


def half_lines(points: np.ndarray) -> list[tuple[float, float]]:
    return [(-math.inf, float(t)) for t in points] + [(float(t), math.inf) for t in points]


def bins(lo: float, hi: float, width: float) -> list[tuple[float, float]]:
    edges = np.arange(lo, hi + width / 2, width)
    inner = zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True)
    return [(-math.inf, float(edges[0])), *inner]


# ----------------------------------------------------------------------------- exact formulas


@pytest.mark.parametrize("eps,delta,alpha", [(0.1, 1e-5, 0.01), (0.5, 1e-8, 0.2), (0.99, 0.05, 1.0)])
def test_gauss_input_classic_sigma_is_the_paper_formula(eps: float, delta: float, alpha: float) -> None:
    mech = GaussInput(epsilon=eps, delta=delta, alpha=alpha, calibration="classic")
    assert mech.sigma == pytest.approx(math.sqrt(2 * math.log(1.25 / delta)) * alpha / eps, rel=1e-15)


@pytest.mark.parametrize("eps,delta,alpha,mu", [(0.1, 1e-5, 0.01, 3.0), (0.5, 1e-5, 0.2, 0.5)])
def test_gauss_output_classic_sigma_is_the_paper_formula(
    eps: float, delta: float, alpha: float, mu: float
) -> None:
    mech = GaussOutput(epsilon=eps, delta=delta, alpha=alpha, lipschitz=mu, calibration="classic")
    assert mech.sigma == pytest.approx(math.sqrt(2 * math.log(1.25 / delta)) * alpha * mu / eps, rel=1e-15)


@pytest.mark.parametrize("eps,alpha,mu", [(0.1, 0.01, 3.0), (10.0, 0.2, 0.5), (1.0, 1.0, 1.0)])
def test_lap_output_scale_is_mu_alpha_over_epsilon(eps: float, alpha: float, mu: float) -> None:
    mech = LapOutput(epsilon=eps, alpha=alpha, lipschitz=mu)
    assert mech.scale == pytest.approx(mu * alpha / eps, rel=1e-15)
    assert mech.guarantee.delta == 0.0 and mech.guarantee.radius == alpha
    assert "ℓ1" in mech.guarantee.metric


def test_analytic_is_the_default_and_matches_balle_wang() -> None:
    gi = GaussInput(epsilon=2.0, delta=1e-5, alpha=0.1)
    go = GaussOutput(epsilon=2.0, delta=1e-5, alpha=0.1, lipschitz=4.0)
    assert gi.calibration == go.calibration == "analytic"
    assert gi.sigma == analytic_gaussian_sigma(epsilon=2.0, delta=1e-5, sensitivity=0.1)
    # σ is calibrated to α·μ₂ rounded up by one ulp, so the sensitivity it uses is an upper bound.
    assert go.sensitivity == math.nextafter(0.1 * 4.0, math.inf)
    assert go.sigma == analytic_gaussian_sigma(epsilon=2.0, delta=1e-5, sensitivity=go.sensitivity)
    assert go.sigma >= analytic_gaussian_sigma(epsilon=2.0, delta=1e-5, sensitivity=0.1 * 4.0)
    assert "analytic" in gi.guarantee.calibration and "ℓ2" in gi.guarantee.metric


@pytest.mark.parametrize("cls", [GaussInput, GaussOutput])
def test_classic_refuses_epsilon_one_and_names_analytic(cls: type) -> None:
    extra = {"lipschitz": 1.0} if cls is GaussOutput else {}
    with pytest.raises(ValueError, match='calibration="analytic"'):
        cls(epsilon=1.0, delta=1e-5, alpha=0.1, calibration="classic", **extra)


def test_noise_plans_are_visible_and_never_below_the_formula() -> None:
    lap = LapOutput(epsilon=0.5, alpha=0.1, lipschitz=2.0).noise_plan(10)
    assert lap.nominal == pytest.approx(0.4) and 1 <= lap.inflation < 1 + 1e-6
    classic = GaussInput(epsilon=0.5, delta=1e-5, alpha=0.1, calibration="classic")
    assert classic.noise_plan(784).effective == classic.sigma  # classic already exceeds the discrete floor
    analytic = GaussInput(epsilon=1.0, delta=1e-5, alpha=0.1)
    plan = analytic.noise_plan(784)
    assert plan.effective >= discrete_gaussian_sigma_floor(epsilon=1.0, delta=1e-5, sensitivity=0.1)
    assert 1.0 < plan.inflation < 1.15


# ----------------------------------------------------------------------------- validation and types


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"epsilon": 0.0}, ValueError, r"epsilon must be in \(0, ∞\)"),
        ({"epsilon": -1.0}, ValueError, "epsilon"),
        ({"epsilon": math.nan}, ValueError, "epsilon"),
        ({"epsilon": math.inf}, ValueError, "epsilon"),
        ({"delta": 0.0}, ValueError, r"delta must be in \(0, 1\)"),
        ({"delta": 1.5}, ValueError, "delta"),
        ({"alpha": 0.0}, ValueError, "alpha"),
        ({"lipschitz": -2.0}, ValueError, "lipschitz must be in"),
        ({"lipschitz": math.nan}, ValueError, "lipschitz"),
        ({"calibration": "tight"}, ValueError, "calibration"),
        ({"epsilon": "1"}, TypeError, "epsilon"),
        ({"alpha": None}, TypeError, "alpha"),
    ],
)
def test_bad_parameters_raise_naming_parameter(kwargs: dict, exc: type, match: str) -> None:
    base = {"epsilon": 0.5, "delta": 1e-5, "alpha": 0.1, "lipschitz": 1.0, "calibration": "analytic"}
    with pytest.raises(exc, match=match):
        GaussOutput(**{**base, **kwargs})


def test_mechanisms_are_frozen_and_keyword_only() -> None:
    mech = LapOutput(epsilon=1.0, alpha=0.1, lipschitz=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        mech.epsilon = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        LapOutput(1.0, 0.1, 1.0)  # type: ignore[misc]
    assert dataclasses.replace(mech, epsilon=2.0).scale == pytest.approx(0.05)


def test_inputs_with_nan_or_bad_types_are_refused() -> None:
    mech = GaussOutput(epsilon=1.0, delta=1e-5, alpha=0.1, lipschitz=1.0)
    with pytest.raises(ValueError, match="1 entries are NaN"):
        mech(np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match="NaN or infinite"):
        mech(torch.tensor([math.inf]))
    with pytest.raises(TypeError, match="real"):
        mech(torch.tensor([True, False]))
    with pytest.raises(TypeError, match="real"):
        mech(np.array(["a"]))


def test_gauss_input_refuses_values_outside_pixel_range() -> None:
    mech = GaussInput(epsilon=1.0, delta=1e-5, alpha=0.1)
    with pytest.raises(ValueError, match=r"pixel values in \[0, 1\]"):
        mech(np.array([[0.5, 1.7]]))
    with pytest.raises(ValueError, match="pixel"):
        mech(torch.full((1, 3), -0.1))


def test_type_shape_and_dtype_are_preserved() -> None:
    mech = GaussInput(epsilon=1.0, delta=1e-5, alpha=0.05)
    xt = torch.rand(3, 1, 4, 4)
    yt = mech(xt, rng=0)
    assert isinstance(yt, torch.Tensor) and yt.dtype == torch.float32 and yt.shape == xt.shape
    assert yt.device == xt.device
    xd = torch.rand(2, 5, dtype=torch.float64)
    assert mech(xd, rng=0).dtype == torch.float64
    xn = np.random.default_rng(0).random((2, 3)).astype(np.float32)
    yn = mech(xn, rng=0)
    assert isinstance(yn, np.ndarray) and yn.dtype == np.float32 and yn.shape == (2, 3)
    assert isinstance(mech([0.1, 0.2], rng=0), np.ndarray)
    lap = LapOutput(epsilon=1.0, alpha=0.1, lipschitz=1.0)
    assert lap.apply(np.zeros(4), rng=1).shape == (4,)
    assert not np.array_equal(yn, xn)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_tensors_come_back_on_their_device() -> None:
    mech = GaussInput(epsilon=1.0, delta=1e-5, alpha=0.05)
    x = torch.rand(2, 8, device="cuda")
    assert mech(x, rng=0).device == x.device


# ----------------------------------------------------------------------------- empirical DP audits


def test_lap_output_satisfies_the_dp_inequality_on_neighbours() -> None:
    """‖C(x_a) − C(x_b)‖₁ = α·μ (worst case): histogram ratios stay within e^ε (false alarm 1e-3)."""
    eps, alpha, mu = 1.0, 0.5, 2.0
    mech = LapOutput(epsilon=eps, alpha=alpha, lipschitz=mu)
    a = mech(np.zeros(N), rng=101)
    b = mech(np.full(N, alpha * mu), rng=102)
    sets = bins(-8.0, 9.0, 0.5)
    assert dp_violations(a, b, sets, eps, 0.0) == []
    weak = LapOutput(epsilon=2 * eps, alpha=alpha, lipschitz=mu)  # half the noise: must be caught
    assert dp_violations(weak(np.zeros(N), rng=103), weak(np.full(N, alpha * mu), rng=104), sets, eps, 0.0)


@pytest.mark.parametrize("calibration,eps", [("analytic", 1.0), ("classic", 0.9)])
def test_gauss_output_satisfies_the_dp_inequality_on_neighbours(calibration: str, eps: float) -> None:
    """‖C(x_a) − C(x_b)‖₂ = α·μ₂: half-line probabilities obey e^ε·P + δ (false alarm 1e-3)."""
    delta, alpha, mu = 1e-3, 0.2, 3.0
    mech = GaussOutput(epsilon=eps, delta=delta, alpha=alpha, lipschitz=mu, calibration=calibration)
    a = mech(np.zeros(N), rng=201)
    b = mech(np.full(N, alpha * mu), rng=202)
    sets = half_lines(np.linspace(-4, 5, 46) * mech.sigma)
    assert dp_violations(a, b, sets, eps, delta) == []
    weak = GaussOutput(epsilon=eps, delta=delta, alpha=alpha / 2, lipschitz=mu, calibration=calibration)
    caught = dp_violations(
        weak(np.zeros(N), rng=203), weak(np.full(N, alpha * mu), rng=204), sets, eps, delta
    )
    assert caught


def test_gauss_input_satisfies_the_dp_inequality_on_neighbours() -> None:
    """Pixels x_a, x_b at ℓ2 distance α: x + Z obeys the (ε, δ) inequality on half-lines (1e-3)."""
    eps, delta, alpha = 2.0, 1e-3, 0.1
    mech = GaussInput(epsilon=eps, delta=delta, alpha=alpha)
    a = mech(np.full(N, 0.3), rng=301)
    b = mech(np.full(N, 0.3 + alpha), rng=302)
    sets = half_lines(0.3 + np.linspace(-4, 5, 46) * mech.sigma)
    assert dp_violations(a, b, sets, eps, delta) == []
    weak = GaussInput(epsilon=eps, delta=delta, alpha=alpha / 2)
    assert dp_violations(
        weak(np.full(N, 0.3), rng=303), weak(np.full(N, 0.3 + alpha), rng=304), sets, eps, delta
    )


def test_epsilon_below_the_sampler_minimum_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="exact samplers"):
        LapOutput(epsilon=1e-9, alpha=0.1, lipschitz=1.0)
