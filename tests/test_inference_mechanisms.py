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


# ----------------------------------------------------------------------------- float-safe sensitivity


def test_output_mechanisms_calibrate_to_mu_alpha_plus_two_eta_exactly() -> None:
    eta = 3.5e-12
    lap = LapOutput(epsilon=0.5, alpha=1e-6, lipschitz=1.0, rounding=eta)
    want = math.nextafter(math.nextafter(1e-6 * 1.0, math.inf) + 2 * eta, math.inf)
    assert lap.sensitivity == want and lap.scale == want / 0.5
    assert lap.noise_plan(10).sensitivity == want and lap.noise_plan(10).nominal == want / 0.5
    assert "μ₁·α + 2η" in lap.guarantee.calibration and "η = 3.5e-12" in lap.guarantee.calibration
    go = GaussOutput(epsilon=1.0, delta=1e-5, alpha=1e-6, lipschitz=2.0, rounding=eta)
    want2 = math.nextafter(math.nextafter(1e-6 * 2.0, math.inf) + 2 * eta, math.inf)
    assert go.sensitivity == want2
    assert go.sigma == analytic_gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=want2)
    assert "μ₂·α + 2η" in go.guarantee.calibration
    exact = LapOutput(epsilon=0.5, alpha=0.1, lipschitz=2.0)  # η = 0: outputs taken as exact
    assert exact.sensitivity == math.nextafter(0.1 * 2.0, math.inf) and "exact" in exact.guarantee.calibration
    with pytest.raises(ValueError, match="rounding must be in"):
        LapOutput(epsilon=0.5, alpha=0.1, lipschitz=2.0, rounding=-1e-9)
    with pytest.raises(ValueError, match="rounding"):
        GaussOutput(epsilon=0.5, delta=1e-5, alpha=0.1, lipschitz=2.0, rounding=math.inf)


@pytest.mark.parametrize("mu,alpha,eps", [(1e308, 10.0, 1.0), (1e300, 10.0, 0.5), (1e300, 1.0, 1e-5)])
def test_a_huge_lipschitz_constant_is_refused_not_as_inf(mu: float, alpha: float, eps: float) -> None:
    with pytest.raises(ValueError, match="lipschitz"):
        LapOutput(epsilon=eps, alpha=alpha, lipschitz=mu)
    with pytest.raises(ValueError, match="lipschitz"):
        GaussOutput(epsilon=eps, delta=1e-5, alpha=alpha, lipschitz=mu)


def test_a_noisy_output_that_overflows_raises() -> None:
    mech = LapOutput(epsilon=1.0, alpha=1.0, lipschitz=1e300)
    top = np.finfo(np.float64).max
    with pytest.raises(ValueError, match="overflowed"):
        mech(np.array([top, -top] * 32), rng=0)
    assert np.all(np.isfinite(mech(np.zeros(64), rng=0)))


@pytest.fixture(scope="module")
def digits_ip():
    from privcore.data import load_dataset
    from privcore.errors import PrivcoreError
    from privcore.models.pipeline import load_ip_models

    try:
        ip = load_ip_models("digits", device="cpu")
        x = load_dataset("digits").x_test[:120].numpy().astype(np.float64)
    except (PrivcoreError, OSError) as exc:
        pytest.skip(f"shipped digits IP models unavailable: {exc}")
    return ip, x


def _neighbours(x: np.ndarray, alpha: float, p: int, rng: np.random.Generator) -> np.ndarray:
    """x' in [0, 1] with ‖x' − x‖_p ≤ α per row: dense random directions and one-pixel moves."""
    n, d = x.shape
    if rng.random() < 0.5:
        step = rng.standard_normal((n, d))
        step *= alpha / np.linalg.norm(step, ord=p, axis=1, keepdims=True) * (1 - 1e-9)
    else:
        step = np.zeros((n, d))
        step[np.arange(n), rng.integers(0, d, n)] = alpha * rng.choice([-1.0, 1.0], n)
    out = np.where((x + step >= 0) & (x + step <= 1), x + step, x - step)
    ok = np.all((out >= 0) & (out <= 1), axis=1) & (np.linalg.norm(out - x, ord=p, axis=1) <= alpha)
    return out[ok], ok


@pytest.mark.parametrize("name,p", [("ip-lipschitz-l1", 1), ("ip-lipschitz-l2", 2)])
def test_no_released_pair_exceeds_the_calibrated_sensitivity(digits_ip, name: str, p: int) -> None:
    """Issue 18's search: pairs within α in the mechanism's norm, α down to 1e-7, on the shipped
    digits models. The certified float64 scores stay within the sensitivity μ·α + 2η; the float32
    forward (what was released before) exceeds μ·α, so the search can find a violation."""
    ip, x = digits_ip
    model = ip[name]
    key = "l1" if p == 1 else "l2"
    mu, eta = model.lipschitz[key], model.rounding[key]
    rng = np.random.default_rng(18)
    flat = x.reshape(len(x), -1)
    worst_old = 0.0
    for alpha in (1e-1, 1e-3, 1e-5, 1e-6, 1e-7):
        mech = (
            LapOutput(epsilon=1.0, alpha=alpha, lipschitz=mu, rounding=eta)
            if p == 1
            else GaussOutput(epsilon=1.0, delta=1e-5, alpha=alpha, lipschitz=mu, rounding=eta)
        )
        for _ in range(4):
            x2, ok = _neighbours(flat, alpha, p, rng)
            a = model.scores(torch.as_tensor(flat[ok].reshape(-1, *x.shape[1:]))).numpy()
            b = model.scores(torch.as_tensor(x2.reshape(-1, *x.shape[1:]))).numpy()
            assert np.linalg.norm(a - b, ord=p, axis=1).max() <= mech.sensitivity
            with torch.no_grad():
                a32 = model.model(torch.as_tensor(flat[ok].reshape(-1, *x.shape[1:]), dtype=torch.float32))
                b32 = model.model(torch.as_tensor(x2.reshape(-1, *x.shape[1:]), dtype=torch.float32))
            diff = np.linalg.norm((a32.double() - b32.double()).numpy(), ord=p, axis=1).max()
            worst_old = max(worst_old, diff / (mu * alpha))
    assert worst_old > 1.0


def test_ip_scores_refuse_inputs_outside_the_certified_domain(digits_ip) -> None:
    ip, x = digits_ip
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ip["ip-lipschitz-l1"].scores(torch.as_tensor(x[:2] * 2.0))
    assert ip["ip-lipschitz-l1"].rounding["l1"] < 1e-11


def test_a_cnn_scores_a_large_batch_in_chunks_as_in_one_pass(digits_ip) -> None:
    """More images than one chunk (:data:`privcore.models.pipeline.FORWARD_CHUNK`, ragged end): the scores
    of the whole batch at once, to float rounding, and the same classes."""
    import torch

    from privcore.models.pipeline import FORWARD_CHUNK

    ip, x = digits_ip
    cnn = next(m for m in ip.models.values() if m.certified is None)
    batch = torch.as_tensor(np.concatenate([x] * (2 * FORWARD_CHUNK // len(x) + 1)), dtype=torch.float32)
    batch = batch[: 2 * FORWARD_CHUNK + 7].reshape(-1, *ip.image_shape)
    with torch.no_grad():
        whole = cnn.model(batch)
    scores = cnn(batch)
    assert scores.shape == whole.shape and torch.allclose(scores, whole, atol=1e-5)
    assert torch.equal(scores.argmax(-1), whole.argmax(-1))
