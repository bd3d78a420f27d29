"""The global release's per-process plan and its fast parts: the scalar exact Laplace sampler, the
a-priori rounding bound over the box, the memoised card constant and the release classifier's one-row
logits (bit for bit those of its forward).

Statistical tests use fixed seeds and reject at p < 1e-3 (stated per test)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from scipy import stats

from privcore.lipschitz.global_box import ClipBox, certified_global_constant
from privcore.mechanisms import (
    RandomBits,
    card_global_constant,
    card_plan,
    discrete_laplace_integers,
    global_plan,
)
from privcore.mechanisms.sampling import SCALAR_MAX
from privcore.nets.models import NoiseAwareClassifier, ToldScale, logits_one, read_told_scale
from tests._nets import random_net

ALPHA = 1e-3


def _small_calls(t: int, n: int, seed: int) -> np.ndarray:
    """n draws of discrete_laplace_integers(t, ·) in calls of SCALAR_MAX (the scalar sampler's size)."""
    bits = RandomBits(seed)
    return np.concatenate([discrete_laplace_integers(t, SCALAR_MAX, bits) for _ in range(n // SCALAR_MAX)])


@pytest.mark.parametrize("t", [1, 3, 10])
def test_the_scalar_sampler_matches_the_discrete_laplace_pmf(t: int) -> None:
    """P(N = k) ∝ exp(−|k|/t) for draws made SCALAR_MAX at a time; chi-square, false alarm 1e-3."""
    samples = _small_calls(t, 64_000, seed=30 + t)
    ks = range(-60 * t, 60 * t + 1)
    weights = {k: math.exp(-abs(k) / t) for k in ks}
    total = sum(weights.values())
    keys = [k for k in ks if weights[k] / total * samples.size >= 20]
    observed = np.array([np.count_nonzero(samples == k) for k in keys], dtype=float)
    expected = np.array([weights[k] / total * samples.size for k in keys])
    observed = np.append(observed, samples.size - observed.sum())
    expected = np.append(expected, samples.size - expected.sum())
    assert stats.chisquare(observed, expected).pvalue > ALPHA


def test_the_scalar_sampler_has_the_laplace_scale_at_release_sized_t() -> None:
    """At t ≈ 2³³ (a release's grid scale) N/t is Laplace(1): E|X| = 1 (sd 1) and E X = 0 (sd √2); each
    checked at 4.5 standard errors (false alarm < 1e-5 together)."""
    t = 2**33 + 12_345
    x = _small_calls(t, 64_000, seed=4).astype(np.float64) / t
    se = 1.0 / math.sqrt(x.size)
    assert abs(np.mean(np.abs(x)) - 1.0) < 4.5 * se
    assert abs(np.mean(x)) < 4.5 * math.sqrt(2.0) * se


def _box(d: int) -> ClipBox:
    return ClipBox(np.full(d, -2.0), np.linspace(0.5, 3.0, d))


def test_a_priori_bound_holds_over_the_box_and_the_plan_is_made_once() -> None:
    """‖f̂(x) − f(x)‖₁ ≤ a_priori ≤ η at points of the box, against f evaluated exactly; a second call
    returns the same plan, another ε another plan."""
    net = random_net(2, (4, 7, 6, 3))
    box = _box(4)
    g = certified_global_constant(net, box)
    plan = global_plan(net, epsilon=1.0, radius=0.3, constant=g)
    assert plan.a_priori <= plan.rounding
    assert global_plan(net, epsilon=1.0, radius=0.3, constant=g) is plan
    assert global_plan(net, epsilon=0.5, radius=0.3, constant=g) is not plan
    cnet = plan.cnet
    rng = np.random.default_rng(0)
    for x in rng.uniform(box.lower, box.upper, size=(50, 4)):
        exact = cnet.exact(x)
        err = sum(abs(Fraction(float(v)) - e) for v, e in zip(plan.evaluate(x), exact, strict=True))
        assert err <= Fraction(plan.a_priori)


def test_without_an_a_priori_bound_each_release_checks_its_own() -> None:
    """On a box so wide that the a-priori bound exceeds η, a point near 0 is evaluated by the running-error
    path (:meth:`CertifiedNet.within`); with η below every bound the release raises before any noise."""
    net = random_net(3, (3, 5, 2))
    g = certified_global_constant(net, ClipBox(np.full(3, -1e10), np.full(3, 1e10)))
    plan = global_plan(net, epsilon=1.0, radius=0.5, constant=g)
    assert plan.a_priori > plan.rounding
    x = np.array([0.1, -0.3, 0.2])
    assert np.array_equal(plan.evaluate(x), plan.cnet.within(x, eta=plan.rounding, p=1).value)
    tiny = global_plan(net, epsilon=1.0, radius=1e-200, constant=g)
    with pytest.raises(ValueError, match="could not be certified within the rounding budget"):
        tiny.release(x, rng=0)


def test_the_card_constant_follows_the_card_and_the_release_its_box() -> None:
    net = random_net(1, (3, 5, 4, 2))
    box = _box(3)
    card = {"global_lipschitz": {"clip_box": box.to_dict()}}
    first = card_global_constant(net, card)
    assert card_global_constant(net, card) is first
    plan = card_plan(net, card, epsilon=1.0, radius=0.2, where="test")
    assert plan.constant is first
    card["global_lipschitz"]["clip_box"]["upper"] = [0.0, 0.0, 0.0]  # a smaller box: another G
    other = card_plan(net, card, epsilon=1.0, radius=0.2, where="test")
    assert other.constant is not first and list(other.constant.box.upper) == [0.0, 0.0, 0.0]
    out = other.release(np.array([5.0, 5.0, 5.0]), rng=0)
    assert np.array_equal(out.box.upper, [0.0, 0.0, 0.0])
    card["global_lipschitz"]["clip_box"]["upper"] = ["x", 0.0, 0.0]
    with pytest.raises(Exception, match="test: "):
        card_plan(net, card, epsilon=1.0, radius=0.2, where="test")


def _classifier(seed: int) -> NoiseAwareClassifier:
    torch.manual_seed(seed)
    told = ToldScale(min_scale=0.05, max_scale=3.0, clean_below=0.01, raised=((0.2, 0.4), (1.0, 1.5)))
    c = NoiseAwareClassifier(in_dim=6, num_classes=5, hidden=(16, 12), told_scale=told).eval()
    with torch.no_grad():
        c.mean.copy_(torch.randn(6))
        c.std.copy_(torch.rand(6) + 0.05)
    return c


SCALES = [0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.7, 1.2, 1.5, 3.0, 3.0000001, 50.0]


def test_told_scale_is_read_the_same_in_python() -> None:
    told = _classifier(0).told_scale
    grid = np.concatenate([SCALES, np.random.default_rng(1).uniform(0, 4, 500)])
    want = told(torch.as_tensor(grid, dtype=torch.float64)).numpy()
    assert [read_told_scale(told, b) for b in grid] == want.tolist()
    assert read_told_scale(None, 0.25) == 0.25


@pytest.mark.parametrize("seed", [0, 1])
def test_one_row_logits_are_the_forward_bit_for_bit(seed: int) -> None:
    c = _classifier(seed)
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for b in SCALES:
            for v in rng.normal(0, 2, size=(20, 6)):
                value = tuple(float(x) for x in v)
                assert torch.equal(logits_one(c, value, b), c(torch.tensor([value], dtype=torch.float32), b))
        hooked = c.net[0].register_forward_hook(lambda m, i, o: o * 0)  # not a plain chain: the forward
        try:
            value = (0.1,) * 6
            assert torch.equal(logits_one(c, value, 0.3), c(torch.tensor([value]), 0.3))
        finally:
            hooked.remove()
    with pytest.raises(ValueError, match="scale"):
        logits_one(c, (0.0,) * 6, -1.0)
