"""The release-aware "N" regulariser (privcore.train.release_aware): its Jacobians and exact ∞→1
norms agree with autograd and the Lipschitz engine, a point's norm never exceeds the exact local
constant of a ball containing it, Δ̂ follows the Δp rule, the noise has the release's law, and a
few training steps shrink the release noise relative to the class separation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import stats

from privcore.lipschitz import local_lipschitz
from privcore.lipschitz.norms import operator_norm
from privcore.nets.blocks import relu_mlp
from privcore.train.delta_p import delta_p_statistics
from privcore.train.recipes import obfuscator_recipe
from privcore.train.release_aware import (
    ball_jacobian_norms,
    box_jacobian_norms,
    delta_hat,
    layer_bound,
    linf_to_l1_norms,
    release_noise,
    relu_mlp_jacobians,
    spread_penalty,
    standard_laplace,
)


def _net(seed: int, widths: tuple[int, ...] = (8, 10, 10, 8)) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return relu_mlp(widths).double()


def test_jacobians_match_autograd() -> None:
    f = _net(0)
    z = torch.randn(16, 8, dtype=torch.float64)
    ours = relu_mlp_jacobians(f, z)
    ref = torch.func.vmap(torch.func.jacrev(f))(z)
    assert torch.allclose(ours, ref, atol=1e-12)


@pytest.mark.parametrize("shape", [(8, 8), (3, 8), (8, 5), (1, 1)])
def test_linf_to_l1_norm_is_exact_by_brute_force(shape: tuple[int, int]) -> None:
    g = torch.Generator().manual_seed(1)
    a = torch.randn(5, *shape, generator=g, dtype=torch.float64)
    ours = linf_to_l1_norms(a)
    for i in range(5):  # brute force over every s ∈ {±1}^d
        d = shape[1]
        brute = max(float((a[i] @ torch.tensor(s, dtype=torch.float64)).abs().sum())
                    for s in itertools.product((-1.0, 1.0), repeat=d))
        assert float(ours[i]) == pytest.approx(brute, rel=1e-12)
        assert float(ours[i]) == pytest.approx(float(operator_norm(a[i].numpy())), rel=1e-12)


def test_point_norm_is_a_lower_bound_of_the_exact_local_constant() -> None:
    f = _net(2)
    g = torch.Generator().manual_seed(3)
    z = torch.randn(6, 8, generator=g, dtype=torch.float64)
    radius = 0.3
    with torch.no_grad():
        at_centre = linf_to_l1_norms(relu_mlp_jacobians(f, z))
    with torch.no_grad():
        over_ball = ball_jacobian_norms(f, z, radius, n_ball=16, generator=g)
    assert torch.all(over_ball >= at_centre)
    for i in range(z.shape[0]):
        cert = local_lipschitz(f, z[i].numpy(), radius, certifier="exact")
        assert cert.exact
        # a Jacobian attained inside the ball cannot exceed the sup over the ball
        assert float(over_ball[i]) <= cert.upper * (1 + 1e-9) + 1e-12
        # and the engine's radius-0 limit at the centre is the same point norm
        tiny = local_lipschitz(f, z[i].numpy(), 1e-9, certifier="exact")
        assert float(at_centre[i]) == pytest.approx(tiny.upper, rel=1e-6)


def test_box_norms_lie_in_the_box_and_below_its_certified_constant() -> None:
    from privcore.lipschitz.global_box import ClipBox, compute_global_constant

    f = _net(4, (3, 6, 6, 2))
    lower = torch.tensor([-1.0, 0.0, -0.5], dtype=torch.float64)
    upper = torch.tensor([1.0, 0.5, 0.5], dtype=torch.float64)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        norms = box_jacobian_norms(f, lower, upper, n=64, generator=g)
    assert norms.shape == (64,)
    box = ClipBox(lower=lower.numpy(), upper=upper.numpy())
    exact = compute_global_constant(f, box, time_limit=30.0)
    # each sampled Jacobian is attained in the box, so none exceeds the box's certified G
    assert float(norms.max()) <= exact.value * (1 + 1e-9)
    # 64 points of a 3-d box find the box's worst region of this small net
    assert float(norms.max()) >= 0.9 * exact.value
    with pytest.raises(ValueError, match="n"):
        box_jacobian_norms(f, lower, upper, n=0)


def test_box_samples_need_the_global_mode() -> None:
    r = obfuscator_recipe("digits", "ARL-C-N-global", noise_box_samples=16)
    assert r.to_json()["noise_box_samples"] == 16 and "public box" in r.loss_terms()["noise"]
    with pytest.raises(ValueError, match="noise_box_samples = 16 needs noise_mode 'global'"):
        obfuscator_recipe("digits", "ARL-C-N", noise_box_samples=16)


def test_the_layer_bound_is_above_the_certified_constant_of_any_box() -> None:
    from privcore.lipschitz.global_box import ClipBox, compute_global_constant

    f = _net(6, (3, 6, 6, 2))
    bound = layer_bound(f)
    assert bound.shape == (1,) and bound.requires_grad
    bound = bound.detach()
    box = ClipBox(lower=np.full(3, -1.0), upper=np.full(3, 1.0))
    assert compute_global_constant(f, box, time_limit=30.0).value <= float(bound) * (1 + 1e-9)
    z = torch.randn(2000, 3, dtype=torch.float64) * 50  # and every point, however far out
    assert float(linf_to_l1_norms(relu_mlp_jacobians(f, z)).max()) <= float(bound) * (1 + 1e-9)
    # a net with non-negative weights whose ReLUs are all active attains the bound
    lin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).double()
    with torch.no_grad():
        lin[0].bias.fill_(100.0)
        lin[0].weight.abs_(), lin[2].weight.abs_()
    z = torch.zeros(1, 3, dtype=torch.float64)
    attained = float(linf_to_l1_norms(relu_mlp_jacobians(lin, z))[0])
    assert attained == pytest.approx(float(layer_bound(lin).detach()))


def test_the_layer_bound_needs_the_global_mode() -> None:
    r = obfuscator_recipe("digits", "N-global", noise_bound="layers")
    assert "layer_bound" in r.loss_terms()["noise"]
    with pytest.raises(ValueError, match="noise_bound = 'layers' needs an N variant with noise_mode"):
        obfuscator_recipe("digits", "C-N", noise_bound="layers")
    with pytest.raises(ValueError, match="noise_bound"):
        obfuscator_recipe("digits", "N-global", noise_bound="exact")


def test_delta_hat_is_the_delta_p_rule() -> None:
    v = torch.tensor([1.0, 2.0, 4.0, 7.0], dtype=torch.float64)
    s = delta_p_statistics(v.numpy(), n_sigma=3.0)
    assert float(delta_hat(v, n_sigma=3.0)) == pytest.approx(s["proposed"], rel=1e-12)
    assert float(spread_penalty(v)) == pytest.approx(s["sigma"] / s["mu"], rel=1e-12)


def test_release_noise_has_the_release_law_and_a_gradient_in_delta() -> None:
    g = torch.Generator().manual_seed(4)
    zt = torch.zeros(20000, 2, dtype=torch.float64)
    delta = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    out = release_noise(zt, delta, 0.2, epsilons=(2.0,), clean_fraction=0.0, generator=g)
    scaled = (out / (3.0 * 0.2 / 2.0)).detach().numpy().ravel()
    # KS test against Laplace(0, 1): false-alarm rate 1e-3 (the seed is fixed, so it is deterministic)
    assert stats.kstest(scaled, stats.laplace.cdf).pvalue > 1e-3
    (out.abs().sum()).backward()  # reparameterised: d/dΔ̂ Σ|Δ̂·c·L| = Σ|c·L|
    assert float(delta.grad) == pytest.approx(float(np.abs(scaled).sum() * 0.2 / 2.0), rel=1e-9)
    clean = release_noise(zt, delta, 0.2, epsilons=(1.0,), clean_fraction=1.0, generator=g)
    assert torch.equal(clean, zt)
    with pytest.raises(ValueError, match="clean_fraction"):
        release_noise(zt, delta, 0.2, epsilons=(1.0,), clean_fraction=1.5)


def test_a_few_steps_shrink_release_noise_relative_to_class_separation() -> None:
    """Two Gaussian classes in 8-d separated along one axis, f initialised at random: training the
    classifier on z̃ + Δ̂·R/ε·Lap(1) lowers Δ̂·R / (distance of the class means of z̃, ℓ1)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    n = 512
    y = torch.arange(n) % 2
    z = torch.randn(n, 8, generator=g) * 0.5
    z[:, 0] += 1.5 * (2 * y - 1).float()
    f, h = relu_mlp([8, 10, 10, 8]), relu_mlp([8, 32, 2])
    opt = torch.optim.Adam([*f.parameters(), *h.parameters()], lr=1e-2)

    def ratio() -> float:
        with torch.no_grad():
            zt = f(z)
            sep = (zt[y == 1].mean(0) - zt[y == 0].mean(0)).abs().sum()
            return float(delta_hat(ball_jacobian_norms(f, z, 0.2, n_ball=8, generator=g)) * 0.2 / sep)

    before = ratio()
    for _ in range(150):
        norms = ball_jacobian_norms(f, z, 0.2, n_ball=2, generator=g)
        noisy = release_noise(
            f(z), delta_hat(norms), 0.2, epsilons=(1.0, 2.0), clean_fraction=0.0, generator=g
        )
        loss = F.cross_entropy(h(noisy), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = ratio()
    assert after < 0.5 * before, (before, after)


def test_recipe_records_the_noise_mode_and_keeps_the_papers() -> None:
    r = obfuscator_recipe("digits", "ARL-C-N")
    assert r.noise and r.noise_mode == "release" and r.to_json()["noise_epsilons"] == [1.0, 2.0, 5.0, 10.0]
    p = obfuscator_recipe("digits", "ARL-C-N", noise_mode="paper")
    assert p.noise_mode == "paper" and p.sigma == 0.01
    with pytest.raises(ValueError, match="noise_mode"):
        obfuscator_recipe("digits", "N", noise_mode="gauss")


def test_training_laplace_is_finite_when_rand_returns_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    # torch.rand can return exactly 0; inverse-CDF sampling from rand − 0.5 then gave −inf, and a
    # clean sample's 0·inf turned a whole classifier into NaN. The sampler must stay finite there.
    from privcore.train import release_aware

    real_rand = torch.rand
    monkeypatch.setattr(release_aware.torch, "rand", lambda *a, **k: torch.zeros_like(real_rand(*a, **k)))
    lap = release_aware.standard_laplace((64, 8), generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(lap).all()
    noisy = release_aware.release_noise(
        torch.zeros(64, 8), torch.tensor(1.0), 0.2, epsilons=(1.0,), clean_fraction=0.5,
        generator=torch.Generator().manual_seed(0),
    )
    assert torch.isfinite(noisy).all()


def test_standard_laplace_matches_laplace_one() -> None:
    # KS against Laplace(0, 1); false-alarm rate 1e-3 at this fixed seed.
    lap = standard_laplace((20000,), generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert stats.kstest(lap.numpy(), "laplace").pvalue > 1e-3
