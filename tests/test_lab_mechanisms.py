"""Mechanism lab: noise calibration, privacy soundness, baselines, closed-form ERLs.

Statistical tests use fixed seeds and state their false-alarm rate (α = 1e-3 each, for a
correct implementation; with fixed seeds the outcome is deterministic).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy import stats

from privcore.errors import CertificationError
from privcore.lab.data import DataDomain, TruncatedGaussianMixture
from privcore.lab.mechanisms import (
    DataBlindMechanism,
    DiscreteOutput,
    ExpertLaplaceMechanism,
    LaplaceOutput,
    LearnedExponentialMechanism,
    LearnedLaplaceMechanism,
    QuantileExponentialMechanism,
    expected_response_loss,
    fit_data_blind,
    prepare_data,
)
from privcore.lab.models import LaplaceNet, UtilityNet
from privcore.lab.queries import laplace_erl, loss_matrix, query_spec, query_values

ALPHA = 1e-3


def _saturate(module: torch.nn.Module, seed: int, scale: float = 30.0) -> None:
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "weight" in name:
                p.normal_().mul_(scale)
            else:
                p.normal_()


def _laplace_mech(k: float, seed: int, domain: DataDomain, epsilon: float = 1.0) -> LearnedLaplaceMechanism:
    net = LaplaceNet(k=k, domain=domain, hidden=16)
    _saturate(net, seed)
    baked = net.bake()
    return LearnedLaplaceMechanism(query="mean", epsilon=epsilon, k=k, domain=domain,
                                   weights=(baked["w0"], baked["w1"]), biases=(baked["b0"], baked["b1"]))


def _exp_mech(k: float, seed: int, domain: DataDomain, epsilon: float = 1.0) -> LearnedExponentialMechanism:
    grid = np.linspace(domain.low, domain.high, 12)
    net = UtilityNet(k=k, responses=grid, domain=domain, hidden=16, latent=6)
    _saturate(net, seed)
    return LearnedExponentialMechanism(query="median", epsilon=epsilon, k=k, domain=domain, arrays=net.bake())


def _neighbours(x: np.ndarray, domain: DataDomain, rng: np.random.Generator) -> list[np.ndarray]:
    """Neighbours of x: one record moved to each end of the domain and to a random value."""
    out = []
    for i in rng.choice(len(x), size=3, replace=False):
        for v in (domain.low, domain.high, rng.uniform(domain.low, domain.high)):
            y = x.copy()
            y[i] = v
            out.append(y)
    return out


# ------------------------------------------------------------------------------ calibration
def test_learned_laplace_noise_is_k_c_over_epsilon() -> None:
    dom = DataDomain(n=7, low=-1.0, high=3.0)
    mech = _laplace_mech(0.37, seed=0, domain=dom, epsilon=0.8)
    assert mech.sensitivity == pytest.approx(0.37 * 4.0, rel=1e-15)
    assert mech.noise_scale == pytest.approx(0.37 * 4.0 / 0.8, rel=1e-15)
    plan = mech.noise_plan()
    assert plan.nominal == pytest.approx(mech.noise_scale, rel=1e-15)
    assert mech.noise_scale <= plan.effective <= mech.noise_scale * (1 + 1e-6)
    out = mech.output(np.zeros((2, 7)))
    assert isinstance(out, LaplaceOutput) and out.scale == mech.noise_scale


def test_learned_laplace_releases_follow_the_stated_law() -> None:
    """KS test of 3000 seeded releases against f(x) + Lap(k·c/ε) (false alarm α = 1e-3)."""
    dom = DataDomain(n=7)
    mech = _laplace_mech(0.05, seed=1, domain=dom, epsilon=0.5)
    x = np.linspace(0, 10, 7)
    gen = np.random.default_rng(123)
    draws = np.array([mech.release(x, rng=gen) for _ in range(3000)])
    centre = float(mech.predict(x)[0])
    p = stats.kstest(draws, stats.laplace(loc=centre, scale=mech.noise_scale).cdf).pvalue
    assert p > ALPHA


def test_learned_exponential_probabilities_use_2kc_over_epsilon() -> None:
    dom = DataDomain(n=6)
    mech = _exp_mech(0.3, seed=2, domain=dom, epsilon=0.7)
    x = np.random.default_rng(0).uniform(0, 10, (5, 6))
    u = mech.utilities(x)
    logits = 0.7 * u / (2 * 0.3 * 10.0)
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    out = mech.output(x)
    assert isinstance(out, DiscreteOutput)
    np.testing.assert_allclose(out.probs, expected, rtol=1e-12, atol=0)
    assert mech.temperature == pytest.approx(2 * 0.3 * 10.0 / 0.7)


def test_exponential_releases_follow_the_stated_law() -> None:
    """χ² test of 4000 seeded draws against the printed probabilities (α = 1e-3)."""
    dom = DataDomain(n=6)
    mech = _exp_mech(2.0, seed=3, domain=dom, epsilon=3.0)
    x = np.array([1.0, 2.0, 2.5, 6.0, 7.0, 9.0])
    probs = mech.output(x).probs[0]
    gen = np.random.default_rng(7)
    draws = np.array([mech.release(x, rng=gen) for _ in range(4000)])
    idx = np.searchsorted(mech.responses, draws)
    assert np.allclose(mech.responses[idx], draws)  # releases are grid points
    counts = np.bincount(idx, minlength=len(probs))
    keep = probs * 4000 >= 5  # pool cells with small expectations
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(probs[keep], probs[~keep].sum()) * 4000
    obs, exp = obs[exp > 0], exp[exp > 0]
    assert stats.chisquare(obs, exp).pvalue > ALPHA


# ------------------------------------------------------------------------------ privacy soundness
@pytest.mark.parametrize("seed", range(4))
def test_learned_mechanisms_are_epsilon_dp_on_sampled_neighbours(seed: int) -> None:
    """For saturated random networks, the privacy loss between neighbouring datasets never
    exceeds ε: |f(x) − f(x')| ≤ k·c (Laplace) and max_r |log P(r|x) − log P(r|x')| ≤ ε."""
    dom = DataDomain(n=8)
    eps, k = 1.3, [0.02, 0.5, 3.0, 40.0][seed]
    lap = _laplace_mech(k, seed=10 + seed, domain=dom, epsilon=eps)
    ex = _exp_mech(k, seed=20 + seed, domain=dom, epsilon=eps)
    rng = np.random.default_rng(seed)
    worst_f, worst_loss = 0.0, 0.0
    for _ in range(40):
        x = rng.uniform(0, 10, 8)
        nbrs = _neighbours(x, dom, rng)
        fx = lap.predict(x)[0]
        lx = ex.log_probabilities(x)[0]
        for y in nbrs:
            worst_f = max(worst_f, abs(lap.predict(y)[0] - fx))
            worst_loss = max(worst_loss, float(np.max(np.abs(ex.log_probabilities(y)[0] - lx))))
    assert worst_f / lap.noise_scale <= eps * (1 + 1e-9)
    assert worst_loss <= eps * (1 + 1e-9)
    assert worst_loss > 1e-3 * eps and worst_f > 0  # the networks do depend on the data


def test_laplace_privacy_loss_reaches_epsilon_for_a_tight_network() -> None:
    """A positive saturated net f = k·x_(j) + const: one record moved from low to high moves
    f by exactly k·c, so the calibrated privacy loss is exactly ε (no slack wasted)."""
    dom = DataDomain(n=4)
    k = 0.8
    w0 = np.zeros((2, 4), dtype=np.float32)
    w0[0, 3] = np.sqrt(k)
    w1 = np.array([[np.sqrt(k), 0.0]], dtype=np.float32)
    mech = LearnedLaplaceMechanism(query="mean", epsilon=0.9, k=k, domain=dom, weights=(w0, w1),
                                   biases=(np.ones(2), np.zeros(1)))
    x = np.array([0.0, 0.0, 0.0, 0.0])
    y = np.array([0.0, 0.0, 0.0, 10.0])
    loss = abs(mech.predict(y)[0] - mech.predict(x)[0]) / mech.noise_scale
    assert loss == pytest.approx(0.9, rel=1e-6) and loss <= 0.9 * (1 + 1e-9)


def test_records_outside_the_domain_are_clipped_and_order_does_not_matter() -> None:
    dom = DataDomain(n=5)
    mech = _laplace_mech(0.5, seed=4, domain=dom)
    x = np.array([-100.0, 3.0, 50.0, 2.0, 7.0])
    clipped = np.array([0.0, 3.0, 10.0, 2.0, 7.0])
    assert mech.predict(x)[0] == mech.predict(clipped)[0] == mech.predict(clipped[::-1])[0]
    np.testing.assert_array_equal(prepare_data(x, dom, sort=True)[0], np.sort(clipped))


def test_sorting_is_non_expansive_in_l1() -> None:
    """The mechanisms' proof uses ‖sort x − sort y‖₁ ≤ ‖x − y‖₁ (rearrangement inequality)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, (2000, 9))
    y = x.copy()
    y[np.arange(2000), rng.integers(0, 9, 2000)] = rng.uniform(0, 10, 2000)
    lhs = np.abs(np.sort(x, 1) - np.sort(y, 1)).sum(1)
    assert np.all(lhs <= np.abs(x - y).sum(1) + 1e-12)


def test_a_network_above_k_is_refused() -> None:
    dom = DataDomain(n=4)
    w0 = np.full((3, 4), 1.0, dtype=np.float32)  # column sums 3
    w1 = np.full((1, 3), 1.0, dtype=np.float32)
    with pytest.raises(CertificationError, match="not k-Lipschitz"):
        LearnedLaplaceMechanism(query="mean", epsilon=1.0, k=2.9, domain=dom, weights=(w0, w1),
                                biases=(np.zeros(3), np.zeros(1)))
    ok = LearnedLaplaceMechanism(query="mean", epsilon=1.0, k=3.0, domain=dom, weights=(w0, w1),
                                 biases=(np.zeros(3), np.zeros(1)))
    # The certified weights are a private read-only copy: neither the caller's array nor the
    # mechanism's can change them after the check.
    w0[:] = 100.0
    assert float(ok.weights[0].max()) == 1.0
    with pytest.raises(ValueError, match="read-only"):
        ok.weights[0][0, 0] = 100.0


def test_bad_inputs_release_nothing() -> None:
    dom = DataDomain(n=5)
    mech = _laplace_mech(0.5, seed=5, domain=dom)
    with pytest.raises(ValueError, match="n=5"):
        mech.release(np.zeros(6))
    with pytest.raises(ValueError, match="finite"):
        mech.release(np.array([1.0, np.nan, 2, 3, 4]))
    with pytest.raises(ValueError, match="one dataset"):
        mech.release(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="epsilon"):
        mech.with_epsilon(0.0)


# ------------------------------------------------------------------------------ baselines
def test_variance_sensitivity_is_exact_by_brute_force() -> None:
    """GS of the population variance on [0, c]^n is (n − 1)c²/n² (tiny n, fine grid)."""
    n, c = 3, 2.0
    grid = np.linspace(0, c, 21)
    xs = np.array(list(itertools.product(grid, repeat=n)))  # every dataset on the grid
    worst = 0.0
    for v_new in grid:  # move record 0 (the variance is symmetric in the records)
        ys = xs.copy()
        ys[:, 0] = v_new
        worst = max(worst, float(np.abs(ys.var(axis=1) - xs.var(axis=1)).max()))
    mech = ExpertLaplaceMechanism(query="variance", epsilon=1.0, domain=DataDomain(n=n, high=c))
    assert worst == pytest.approx(mech.sensitivity, rel=1e-12)
    assert ExpertLaplaceMechanism(query="mean", epsilon=2.0).output(np.ones(100)).scale == pytest.approx(0.05)


def test_quantile_exponential_mechanism() -> None:
    dom = DataDomain(n=4)
    grid = np.array([0.0, 2.5, 5.0, 7.5, 10.0])
    mech = QuantileExponentialMechanism(query="median", epsilon=2.0, responses=grid, domain=dom)
    x = np.array([1.0, 3.0, 6.0, 8.0])
    u = mech.utilities(x)[0]
    np.testing.assert_array_equal(u, [-2, -1, 0, -1, -2])  # −|#{x_i < r} − 2|
    p = np.exp(u)  # ε/2 = 1
    np.testing.assert_allclose(mech.output(x).probs[0], p / p.sum(), rtol=1e-12)
    # ε-DP: the count changes by ≤ 1 per record, so the log-ratio is ≤ ε on neighbours.
    rng = np.random.default_rng(1)
    for _ in range(200):
        a = rng.uniform(0, 10, 4)
        b = a.copy()
        b[rng.integers(4)] = rng.uniform(0, 10)
        lr = np.abs(mech.log_probabilities(a)[0] - mech.log_probabilities(b)[0])
        assert lr.max() <= 2.0 * (1 + 1e-12)


def test_data_blind_picks_the_best_constant() -> None:
    data = TruncatedGaussianMixture().sample(300, seed=4)
    truth = query_values("mean", data)
    blind = fit_data_blind("mean", "squared", data, candidates=np.linspace(0, 10, 11))
    assert blind.value == pytest.approx(truth.mean())  # the mean is a candidate and optimal
    grid = query_spec("median").grid(50)
    blind_q = fit_data_blind("median", "quantile", data, candidates=grid)
    losses = [DataBlindMechanism(query="median", value=v).expected_loss(data, "quantile").mean()
              for v in grid]
    assert blind_q.expected_loss(data, "quantile").mean() == pytest.approx(min(losses))
    assert blind_q.release(data[0]) == blind_q.value


# ------------------------------------------------------------------------------ losses and ERLs
def test_quantile_loss_counts_points_strictly_between() -> None:
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0]])
    q = torch.tensor([3.0])
    r = torch.tensor([0.0, 2.0, 3.0, 3.5, 4.0, 9.0])
    np.testing.assert_array_equal(loss_matrix("quantile", x, q, r).numpy()[0], [2, 0, 0, 0, 0, 2])
    np.testing.assert_array_equal(loss_matrix("squared", x, q, r).numpy()[0], [9, 1, 0, 0.25, 1, 36])
    # Brute force on random data.
    gen = torch.Generator().manual_seed(0)
    xb = torch.rand(20, 30, generator=gen, dtype=torch.float64) * 10
    qb = torch.rand(20, generator=gen, dtype=torch.float64) * 10
    rb = torch.linspace(0, 10, 17, dtype=torch.float64)
    brute = torch.zeros(20, 17, dtype=torch.float64)
    for b in range(20):
        for j in range(17):
            lo, hi = min(qb[b], rb[j]), max(qb[b], rb[j])
            brute[b, j] = ((xb[b] > lo) & (xb[b] < hi)).sum()
    assert torch.equal(loss_matrix("quantile", xb, qb, rb), brute)


@pytest.mark.parametrize("loss", ["squared", "quantile"])
def test_laplace_erl_matches_monte_carlo(loss: str) -> None:
    """Closed-form ERL vs 200 000 Monte-Carlo draws (5 standard errors: false alarm < 1e-6)."""
    x = torch.tensor([[0.5, 1.0, 2.0, 2.2, 3.0, 4.5, 6.0, 8.0, 9.5, 9.9]], dtype=torch.float64)
    q = torch.tensor([3.1], dtype=torch.float64)
    loc = torch.tensor([2.6], dtype=torch.float64)
    scale = 1.7
    closed = float(laplace_erl(loss, x, q, loc, scale)[0])
    gen = np.random.default_rng(0)
    r = torch.as_tensor(2.6 + gen.laplace(0.0, scale, 200_000))
    samples = loss_matrix(loss, x, q, r)[0].numpy()
    se = samples.std() / np.sqrt(samples.size)
    assert abs(samples.mean() - closed) < 5 * se
    if loss == "squared":
        assert closed == pytest.approx(0.5**2 + 2 * scale**2, rel=1e-12)


def test_discrete_erl_is_the_probability_weighted_loss() -> None:
    x = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]])
    out = DiscreteOutput(support=np.array([2.5, 4.5]), probs=np.array([[0.25, 0.75]]))
    # q = 3: quantile losses 0 (2.5: nothing strictly between) and 1 (4.5: the 4).
    assert expected_response_loss(out, x, np.array([3.0]), "quantile")[0] == pytest.approx(0.75)
    assert expected_response_loss(out, x, np.array([3.0]), "squared")[0] == pytest.approx(
        0.25 * 0.25 + 0.75 * 2.25)


def test_queries_match_numpy() -> None:
    data = TruncatedGaussianMixture(n_components=2).sample(50, seed=1)
    np.testing.assert_allclose(query_values("mean", data), data.mean(1), rtol=1e-12)
    np.testing.assert_allclose(query_values("median", data), np.median(data, 1), rtol=1e-12)
    np.testing.assert_allclose(query_values("variance", data), data.var(1), rtol=1e-12)
    np.testing.assert_allclose(query_values("percentile10", data), np.percentile(data, 10, 1), rtol=1e-12)
    assert query_spec("variance").high == 25.0


def test_dataset_distribution() -> None:
    a = TruncatedGaussianMixture().sample(200, seed=3)
    b = TruncatedGaussianMixture().sample(200, seed=3)
    assert a.shape == (200, 100) and np.array_equal(a, b)
    assert TruncatedGaussianMixture().sample(1, seed=3).shape == (1, 100)
    assert a.min() >= 0.0 and a.max() <= 10.0
    two = TruncatedGaussianMixture(n_components=2).sample(200, seed=3)
    assert not np.array_equal(a, two)
    # Datasets differ from each other (parameters drawn per dataset).
    assert np.std(a.mean(1)) > 0.5
