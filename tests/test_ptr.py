"""Extended PTR (posthoc Alg. 1 / Thm 4.4 per docs/DESIGN.md) and the exact affine ℓ∞→ℓ1 oracle.

Statistical tests use fixed seeds and a false-alarm level of 1e-3.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from privcore.errors import CertificationError
from privcore.mechanisms import (
    DecidingSensitivityOracle,
    PhiResult,
    SensitivityOracle,
    compute_phi,
    propose_delta_p,
    propose_test_release,
    ptr_scales,
)
from privcore.mechanisms.ptr import model_digest, oracle_identity
from tests._affine import AffineLipschitz, affine_linf_to_l1_norm

ALPHA = 1e-3


class SlopeOracle:
    """U(c, r) = base + slope·r: monotone in r (and ball-independent otherwise). Counts its calls."""

    def __init__(self, slope: float = 1.0, base: float = 0.0) -> None:
        self.slope, self.base, self.calls = slope, base, 0

    def __call__(self, f: object, center: np.ndarray, radius: float) -> float:
        self.calls += 1
        return self.base + self.slope * radius


class DecidingOracle(SlopeOracle):
    """Same U, but with a ``decide`` method; __call__ must then never be used by compute_phi."""

    def __init__(self) -> None:
        super().__init__()
        self.decisions = 0

    def decide(self, f: object, center: np.ndarray, radius: float, threshold: float) -> bool:
        self.decisions += 1
        return self.base + self.slope * radius <= threshold


def identity(z: torch.Tensor) -> torch.Tensor:
    return z


def linear(out_dim: int, in_dim: int, seed: int, scale: float = 1.0) -> torch.nn.Linear:
    torch.manual_seed(seed)
    layer = torch.nn.Linear(in_dim, out_dim).double()
    with torch.no_grad():
        layer.weight.mul_(scale)
    return layer


# ----------------------------------------------------------------------------- affine ℓ∞→ℓ1 norm


def brute_force_norm(W: np.ndarray) -> float:
    return max(
        float(np.abs(W @ np.array(s)).sum()) for s in itertools.product((-1.0, 1.0), repeat=W.shape[1])
    )


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (6, 4), (10, 9), (2, 12)])
def test_affine_norm_equals_brute_force_and_is_an_upper_bound(shape: tuple[int, int]) -> None:
    W = np.random.default_rng(sum(shape)).standard_normal(shape)
    exact = brute_force_norm(W)
    got = affine_linf_to_l1_norm(W)
    assert exact <= got <= exact * (1 + 1e-12)
    assert affine_linf_to_l1_norm(W.T) == pytest.approx(got, rel=1e-12)  # ‖W‖∞→1 = ‖Wᵀ‖∞→1


def test_affine_norm_enumerates_the_smaller_side_and_refuses_big_ones() -> None:
    wide = np.random.default_rng(0).standard_normal((3, 40))
    assert affine_linf_to_l1_norm(wide) == pytest.approx(brute_force_norm(wide.T), rel=1e-12)
    with pytest.raises(ValueError, match="NP-hard"):
        affine_linf_to_l1_norm(np.ones((23, 23)))
    with pytest.raises(ValueError, match="finite"):
        affine_linf_to_l1_norm(np.array([[np.nan]]))


def test_affine_oracle_composes_linear_layers_and_refuses_nonlinear_nets() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Identity(), torch.nn.Linear(6, 3))
    composed = (net[2].weight.double() @ net[0].weight.double()).detach().numpy()
    oracle = AffineLipschitz()
    assert isinstance(oracle, SensitivityOracle)
    value = oracle(net, np.zeros(4), 0.5)
    assert brute_force_norm(composed) <= value <= brute_force_norm(composed) * (1 + 1e-9)
    assert oracle(net, np.ones(4), 7.0) == value  # the same bound for every ball
    with pytest.raises(TypeError, match="affine"):
        oracle(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), np.zeros(4), 0.5)
    with pytest.raises(TypeError, match=r"nn\.Linear"):
        oracle(identity, np.zeros(4), 0.5)


# ----------------------------------------------------------------------------- φ by bisection


def grid_points(radius: float, r_max: float, tol: float) -> tuple[np.ndarray, float]:
    """The fixed dyadic grid, computed independently of compute_phi."""
    m = 0
    while (r_max - radius) / 2**m > tol:
        m += 1
    zeta = (r_max - radius) / 2**m
    return radius + zeta * np.arange(2**m + 1), zeta


@pytest.mark.parametrize("threshold", [0.1, 0.5, 0.5 + 3 * 0.5 / 64, 0.77, 1.3, 2.0 - 1e-9, 2.0, 3.5])
def test_bisection_returns_the_largest_passing_grid_point(threshold: float) -> None:
    """U(z, r) = r ≤ Δp ⇔ r ≤ threshold: R* is the largest grid point ≤ threshold, never above it."""
    radius, r_max, tol = 0.5, 2.0, 0.02
    oracle = SlopeOracle()
    res = compute_phi(
        identity, np.zeros(3), radius=radius, delta_p=threshold, r_max=r_max, tol=tol, lipschitz=oracle
    )
    grid, zeta = grid_points(radius, r_max, tol)
    assert res.zeta == pytest.approx(zeta) and res.zeta <= tol
    passing = grid[grid <= threshold]
    if threshold < radius:
        assert res.r_star is None and res.phi == 0.0 and res.n_decisions == 1
        return
    assert res.r_star == pytest.approx(passing.max(), abs=1e-12)
    assert res.r_star <= threshold
    assert res.phi == pytest.approx(max(res.r_star / 2, res.r_star - radius))
    assert res.n_decisions == oracle.calls <= math.ceil(math.log2((r_max - radius) / zeta)) + 2
    assert [r for r, _ in res.evaluations][:2] == [radius, r_max]


def test_decide_is_used_when_the_oracle_has_it() -> None:
    oracle = DecidingOracle()
    assert isinstance(oracle, DecidingSensitivityOracle)
    res = compute_phi(identity, np.zeros(2), radius=0.5, delta_p=1.1, r_max=2.0, tol=0.01, lipschitz=oracle)
    assert oracle.calls == 0 and oracle.decisions == res.n_decisions > 2
    assert res.r_star is not None and res.r_star <= 1.1


class HintingOracle(DecidingOracle):
    """U(c, r) = r with a ``fail_radius`` hint ``hint(threshold)`` (true, wrong or malformed)."""

    def __init__(self, hint) -> None:
        super().__init__()
        self.hint = hint

    def fail_radius(self, f: object, center: np.ndarray, threshold: float):
        return self.hint(threshold)


@pytest.mark.parametrize("threshold", [0.5, 0.5 + 3 * 0.5 / 64, 0.77, 1.3, 1.999])
@pytest.mark.parametrize(
    "hint",
    [
        lambda t: None,
        lambda t: t + 1e-9,  # true and tight: U(r) = r > t from just above t
        lambda t: t + 0.3,  # true, loose
        lambda t: 5.0,  # true, beyond R_max
        lambda t: t - 0.2,  # wrong: U(t - 0.2) ≤ t
        lambda t: 0.1,  # wrong, below R
        lambda t: float("nan"),
        lambda t: -1.0,
        lambda t: "0.7",
        lambda t: True,
    ],
)
def test_a_fail_radius_hint_changes_which_questions_are_asked_never_phi(threshold: float, hint) -> None:
    """The oracle's fail radius only orders the questions: R* and φ are the plain bisection's for
    true, wrong and malformed hints, every decision is the oracle's answer, the count stays within
    :func:`bisection_decisions`, and a true tight hint settles the boundary in at most 4 questions
    after R and R_max."""
    from privcore.mechanisms import bisection_decisions

    radius, r_max, tol = 0.5, 2.0, 0.002
    kw = dict(radius=radius, delta_p=threshold, r_max=r_max, tol=tol)
    plain = compute_phi(identity, np.zeros(2), lipschitz=DecidingOracle(), **kw)
    oracle = HintingOracle(hint)
    res = compute_phi(identity, np.zeros(2), lipschitz=oracle, **kw)
    assert (res.r_star, res.phi) == (plain.r_star, plain.phi)
    assert all(ok == (r <= threshold) for r, ok in res.evaluations)
    assert oracle.decisions == res.n_decisions <= bisection_decisions(radius, r_max, tol)
    rho = hint(threshold)
    if isinstance(rho, float) and threshold < rho <= threshold + 1e-6 and rho < r_max:
        assert res.n_decisions <= 4 < plain.n_decisions


def test_r_max_passing_gives_the_closed_form() -> None:
    res = compute_phi(
        identity, np.zeros(2), radius=0.5, delta_p=10.0, r_max=3.0, tol=0.01, lipschitz=SlopeOracle()
    )
    assert res.r_star == 3.0 and res.phi == 2.5 and res.n_decisions == 2
    tight = compute_phi(
        identity, np.zeros(2), radius=0.5, delta_p=10.0, r_max=0.5, tol=0.01, lipschitz=SlopeOracle()
    )
    assert tight.r_star == 0.5 and tight.phi == 0.25 and tight.zeta == 0.0


class BallMaxOracle:
    """Exact U(c, r) = max over the ℓ∞ ball of s(x) = 1 + ‖x‖∞, i.e. 1 + ‖c‖∞ + r (inclusion-monotone)."""

    def __call__(self, f: object, center: np.ndarray, radius: float) -> float:
        return 1.0 + float(np.max(np.abs(center))) + radius


@pytest.mark.parametrize("dim", [1, 2])
def test_phi_has_sensitivity_r_plus_zeta_and_vanishes_where_delta_p_breaks(dim: int) -> None:
    """Property (a): |φ(z) − φ(z')| ≤ R + ζ for ‖z − z'‖∞ ≤ R, on 400 random pairs, and (b)."""
    radius, delta_p, r_max, tol = 0.5, 3.0, 4.0, 0.01
    rng = np.random.default_rng(dim)
    oracle = BallMaxOracle()

    def phi(z: np.ndarray) -> PhiResult:
        return compute_phi(
            identity, z, radius=radius, delta_p=delta_p, r_max=r_max, tol=tol, lipschitz=oracle
        )

    for _ in range(400):
        z = rng.uniform(-2.5, 2.5, size=dim)
        z2 = z + rng.uniform(-radius, radius, size=dim)
        a, b = phi(z), phi(z2)
        assert abs(a.phi - b.phi) <= radius + a.zeta + 1e-12
        for res, point in ((a, z), (b, z2)):
            if oracle(None, point, radius) > delta_p:  # local sensitivity above Δp ⇒ φ = 0
                assert res.phi == 0.0


def test_certification_error_propagates_and_nothing_is_released() -> None:
    class TimesOut(SlopeOracle):
        def __call__(self, f: object, center: np.ndarray, radius: float) -> float:
            if self.calls >= 2:
                raise CertificationError("MIP time limit reached before optimality")
            return super().__call__(f, center, radius)

    with pytest.raises(CertificationError, match="time limit"):
        propose_test_release(
            identity, np.zeros(2), epsilon=1.0, delta=0.05, radius=0.5, delta_p=1.0, r_max=2.0, tol=0.01,
            lipschitz=TimesOut(), rng=0,
        )  # fmt: skip

    class NaNOracle(SlopeOracle):
        def __call__(self, f: object, center: np.ndarray, radius: float) -> float:
            return math.nan

    with pytest.raises(CertificationError, match="not a certificate"):
        compute_phi(
            identity, np.zeros(2), radius=0.5, delta_p=1.0, r_max=2.0, tol=0.01, lipschitz=NaNOracle()
        )


def test_phi_is_reused_across_epsilon_and_delta_without_oracle_calls() -> None:
    oracle = SlopeOracle()
    kw = {"radius": 0.5, "delta_p": 1.7, "r_max": 3.0, "tol": 0.01}
    phi = compute_phi(identity, np.ones(3), lipschitz=oracle, **kw)
    calls = oracle.calls
    for eps, delta in [(0.5, 0.05), (1.0, 1e-3), (5.0, 0.2)]:
        res = propose_test_release(
            identity, np.ones(3), epsilon=eps, delta=delta, lipschitz=oracle, rng=1, phi=phi, **kw
        )
        assert res.phi == phi.phi and res.phi_result is phi
    assert oracle.calls == calls
    with pytest.raises(ValueError, match="different"):
        propose_test_release(identity, np.zeros(3), epsilon=1.0, delta=0.05, lipschitz=oracle, phi=phi, **kw)
    with pytest.raises(ValueError, match="different"):
        propose_test_release(
            identity, np.ones(3), epsilon=1.0, delta=0.05, lipschitz=oracle, phi=phi, **{**kw, "radius": 0.6}
        )


# ----------------------------------------------------------------------------- φ bound to its model


def test_a_phi_certified_for_another_model_is_refused() -> None:
    """Issue 18: the φ of a net whose last layer was divided by 100 (which passes every test) was
    accepted for the original net (which fails at R) and released 200/200. It names what differs."""
    f = torch.nn.Sequential(linear(4, 3, seed=3), linear(3, 4, seed=4)).double()
    g = copy.deepcopy(f)
    with torch.no_grad():
        g[1].weight.div_(100)
        g[1].bias.div_(100)
    oracle = AffineLipschitz()
    z = np.array([0.2, -0.4, 0.1])
    delta_p = 0.5 * oracle(f, z, 1.0)  # f's sensitivity is above Δp, g's far below
    kw = {"radius": 0.5, "delta_p": delta_p, "r_max": 20.0, "tol": 0.05}
    honest, forged = compute_phi(f, z, lipschitz=oracle, **kw), compute_phi(g, z, lipschitz=oracle, **kw)
    assert honest.phi == 0.0 and forged.phi == 19.5
    assert honest.model_digest == model_digest(f) != forged.model_digest == model_digest(g)
    with pytest.raises(ValueError, match=r"different query.*model digest"):
        propose_test_release(f, z, epsilon=1.0, delta=0.05, lipschitz=oracle, rng=0, phi=forged, **kw)
    common = {"epsilon": 1.0, "delta": 0.05, "lipschitz": oracle, **kw}
    released = sum(propose_test_release(f, z, rng=seed, phi=honest, **common).released for seed in range(200))
    assert released <= 20  # honest PTR: P[release] ≤ δ/2 = 2.5 % (binomial tail at 20: < 1e-4)
    assert propose_test_release(g, z, rng=0, phi=forged, **common).released  # g's own φ serves g


def test_a_phi_from_another_certifier_norms_or_grid_is_refused() -> None:
    from privcore.lipschitz import Certifier

    oracle = SlopeOracle()
    z = np.ones(3)
    kw = {"radius": 0.5, "delta_p": 1.7, "r_max": 3.0, "tol": 0.01}
    phi = compute_phi(identity, z, lipschitz=oracle, **kw)
    assert (phi.certifier, phi.input_norm, phi.output_norm) == (f"{__name__}.SlopeOracle", "linf", "l1")
    assert phi.model_digest == f"callable:{__name__}.identity"
    assert oracle_identity(lambda *_: 1.0) == oracle_identity(identity) == ("function", "linf", "l1")
    cases = [
        ({"lipschitz": DecidingOracle()}, "certifier"),
        ({"tol": 0.02}, "tol.*zeta"),
        ({"delta_p": 1.8}, "delta_p"),
        ({"f": linear(3, 3, seed=0)}, "model digest"),
    ]
    for change, what in cases:
        args = {"f": identity, "lipschitz": oracle, **kw, **change}
        with pytest.raises(ValueError, match=f"differs in: .*{what}"):
            propose_test_release(args.pop("f"), z, epsilon=1.0, delta=0.05, rng=0, phi=phi, **args)
    with pytest.raises(ValueError, match=r"ℓ∞ → ℓ1.*input_norm='l1'"):
        compute_phi(identity, z, lipschitz=Certifier(input_norm="l1"), **kw)
    with pytest.raises(ValueError, match=r"ℓ∞ → ℓ1.*output_norm='linf'"):
        propose_test_release(identity, z, epsilon=1.0, delta=0.05, rng=0, phi=phi,
                             lipschitz=Certifier(output_norm="linf"), **kw)


def test_a_phi_that_contradicts_its_own_evaluations_cannot_be_built() -> None:
    kw = {"radius": 0.5, "delta_p": 1.7, "r_max": 3.0, "tol": 0.01}
    phi = compute_phi(identity, np.ones(2), lipschitz=SlopeOracle(), **kw)
    for change in ({"phi": 99.0}, {"r_star": 3.0}, {"zeta": 0.001}, {"n_decisions": 1}, {"certifier": ""},
                   {"evaluations": ((0.5, True), (3.0, True))}):
        with pytest.raises((ValueError, TypeError), match="PhiResult"):
            dataclasses.replace(phi, **change)


# ----------------------------------------------------------------------------- PTR on an affine map


def test_release_probability_is_at_most_half_delta_when_the_proposal_is_wrong() -> None:
    """‖W‖∞→1 > Δp ⇒ φ = 0 and P[release] ≤ δ/2. Binomial test at 1e-3 (one-sided), plus a two-sided
    check that it is not far below δ/2 (the threshold is not needlessly high)."""
    layer = linear(3, 4, seed=0)
    oracle = AffineLipschitz()
    delta_p = 0.5 * oracle(layer, np.zeros(4), 1.0)
    kw = {"radius": 0.5, "delta_p": delta_p, "r_max": 2.0, "tol": 0.01}
    phi = compute_phi(layer, np.zeros(4), lipschitz=oracle, **kw)
    assert phi.phi == 0.0 and phi.r_star is None
    eps, delta, trials = 1.0, 0.2, 3000
    gen = np.random.default_rng(42)
    releases = sum(
        propose_test_release(
            layer, np.zeros(4), epsilon=eps, delta=delta, lipschitz=oracle, rng=gen, phi=phi, **kw
        ).released
        for _ in range(trials)
    )
    assert stats.binomtest(releases, trials, delta / 2, alternative="greater").pvalue > ALPHA
    assert stats.binomtest(releases, trials, delta / 2).pvalue > ALPHA


def test_release_noise_has_scale_delta_p_r_over_epsilon() -> None:
    """‖W‖∞→1 ≤ Δp ⇒ R* = R_max, φ = R_max − R; the release is f(z) + Lap(Δp·R/ε): KS at 1e-3."""
    layer = linear(400, 3, seed=1, scale=0.2)
    oracle = AffineLipschitz()
    delta_p = 1.05 * oracle(layer, np.zeros(3), 1.0)
    eps, radius, r_max = 2.0, 0.3, 40.0
    kw = {"radius": radius, "delta_p": delta_p, "r_max": r_max, "tol": 0.05}
    z = np.array([0.3, -1.2, 0.7])
    phi = compute_phi(layer, z, lipschitz=oracle, **kw)
    assert phi.r_star == r_max and phi.phi == pytest.approx(max(r_max / 2, r_max - radius))
    clean = layer(torch.as_tensor(z)).detach().numpy()
    noise = []
    gen = np.random.default_rng(7)
    for _ in range(10):
        res = propose_test_release(
            layer, z, epsilon=eps, delta=0.05, lipschitz=oracle, rng=gen, phi=phi, **kw
        )
        assert res.released and res.value is not None and res.value.shape == clean.shape
        noise.append(res.value - clean)
    assert res.noise_scale == pytest.approx(delta_p * radius / eps)
    assert 1 <= res.noise_scale_effective / res.noise_scale < 1 + 1e-6
    assert (
        stats.kstest(np.concatenate(noise), stats.laplace(scale=res.noise_scale_effective).cdf).pvalue > ALPHA
    )
    g = res.guarantee
    assert (g.epsilon, g.delta, g.radius) == (2 * eps, 0.05 / 2, radius) and "ℓ∞" in g.metric


def test_test_noise_and_threshold_follow_the_formulas() -> None:
    kw = {"radius": 0.5, "delta_p": 10.0, "r_max": 2.0, "tol": 0.01}
    res = propose_test_release(
        identity, np.zeros(2), epsilon=0.5, delta=0.05, lipschitz=SlopeOracle(), rng=3, **kw
    )
    zeta = res.phi_result.zeta
    assert res.test_scale == pytest.approx((0.5 + zeta) / 0.5)
    nominal_threshold = math.log(1 / 0.05) * res.test_scale
    assert nominal_threshold <= res.threshold <= nominal_threshold * (1 + 1e-6)
    scales = ptr_scales(epsilon=0.5, delta=0.05, radius=0.5, delta_p=10.0, zeta=zeta)
    assert scales.test_scale == pytest.approx(res.test_scale) and scales.release_scale == pytest.approx(10.0)
    assert scales.threshold == pytest.approx(nominal_threshold)


@pytest.mark.parametrize(
    "change,exc,match",
    [
        ({"epsilon": 0.0}, ValueError, "epsilon"),
        ({"epsilon": math.inf}, ValueError, "epsilon"),
        ({"delta": 1.0}, ValueError, "delta"),
        ({"radius": -0.1}, ValueError, "radius"),
        ({"r_max": 0.2}, ValueError, r"r_max must be in \[radius"),
        ({"tol": 0.0}, ValueError, "tol"),
        ({"tol": 1e-300}, ValueError, "tol"),
        ({"tol": 0.5}, ValueError, r"tol must be in \[.*, 0\.5\), got 0\.5"),  # tol ≥ radius
        ({"tol": 3.0}, ValueError, r"tol must be in .*got 3\.0"),
        ({"r_max": 0.6, "tol": 0.2}, ValueError, r"tol must be in \[.*, 0\.1\], got 0\.2"),  # > r_max − R
        ({"r_max": 0.5, "tol": 0.5}, ValueError, r"tol must be in \(0, radius\) = \(0, 0\.5\)"),
        ({"delta_p": 0.0}, ValueError, "delta_p"),
        ({"z": np.array([0.0, np.nan])}, ValueError, "NaN"),
        ({"z": np.zeros((2, 2))}, ValueError, "1-D"),
        ({"rng": "x"}, TypeError, "rng"),
        ({"phi": 0.3}, TypeError, "PhiResult"),
    ],
)
def test_bad_parameters_fail_before_any_oracle_call(change: dict, exc: type, match: str) -> None:
    oracle = SlopeOracle()
    kw = {"epsilon": 1.0, "delta": 0.05, "radius": 0.5, "delta_p": 1.0, "r_max": 2.0, "tol": 0.01, "rng": 0}
    kw.update(change)
    z = kw.pop("z", np.zeros(2))
    with pytest.raises(exc, match=match):
        propose_test_release(identity, z, lipschitz=oracle, **kw)
    assert oracle.calls == 0


def test_propose_delta_p_is_mean_plus_n_sigma() -> None:
    values = np.array([1.0, 2.0, 4.0, 7.0])
    assert propose_delta_p(values) == pytest.approx(values.mean() + 3 * values.std(ddof=1))
    assert propose_delta_p(values, n_sigma=0) == pytest.approx(3.5)
    with pytest.raises(ValueError, match="at least 2"):
        propose_delta_p([1.0])
    with pytest.raises(ValueError, match="≥ 0"):
        propose_delta_p([1.0, -2.0])
    with pytest.raises(ValueError, match="NaN"):
        propose_delta_p([1.0, math.nan])


def test_epsilon_below_the_sampler_minimum_fails_before_any_oracle_call() -> None:
    oracle = SlopeOracle()
    with pytest.raises(ValueError, match="epsilon must be in"):
        propose_test_release(
            identity, np.zeros(2), epsilon=1e-9, delta=0.05, radius=0.5, delta_p=1.0, r_max=2.0, tol=0.01,
            lipschitz=oracle, rng=0,
        )  # fmt: skip
    assert oracle.calls == 0


def test_modules_are_released_in_eval_mode_and_their_mode_is_restored() -> None:
    """Dropout would make f(z) a random function the certificate does not cover."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(3, 200), torch.nn.Dropout(p=0.5), torch.nn.Linear(200, 2)
    ).double()
    net.train()
    z = np.array([0.1, 0.2, 0.3])
    kw = {"radius": 0.5, "delta_p": 0.1, "r_max": 50.0, "tol": 0.25}  # U = 1e-3·r passes up to R_max
    res = propose_test_release(
        net, z, epsilon=50.0, delta=0.05, lipschitz=SlopeOracle(slope=1e-3), rng=0, **kw
    )
    assert net.training
    tolerance = 20 * res.noise_scale_effective  # 0.02; Laplace exceeds 20 scales w.p. 2e-9
    with torch.no_grad():
        net.eval()
        clean = net(torch.as_tensor(z)).numpy()
        net.train()
        noisy_forward = [net(torch.as_tensor(z)).numpy() for _ in range(5)]
    assert all(np.abs(o - clean).max() > tolerance for o in noisy_forward)  # train mode would be visible
    assert res.released and np.abs(res.value - clean).max() < tolerance
