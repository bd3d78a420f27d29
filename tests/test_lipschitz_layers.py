"""Lipschitz-constrained layers: the certified bound is never exceeded, and is tight.

Operator norms are recomputed here independently of the module under test, in float64
numpy: ‖W‖_{1→1} = max column abs-sum, ‖W‖₂ = largest singular value (closed forms).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from privcore.nets.lipschitz_layers import (
    L1LipschitzLinear,
    LipschitzMLP,
    SpectralLipschitzLinear,
    operator_norm,
    sequential_lipschitz_bound,
    split_bound,
)


def _l11(w: torch.Tensor) -> float:
    return float(np.abs(w.detach().double().numpy()).sum(axis=0).max())


def _l22(w: torch.Tensor) -> float:
    return float(np.linalg.svd(w.detach().double().numpy(), compute_uv=False)[0])


EXACT = {"l1": _l11, "l2": _l22}
P = {"l1": 1, "l2": 2}


def _saturated_mlp(norm: str, sizes: tuple[int, ...], bound: float, seed: int, scale: float) -> LipschitzMLP:
    torch.manual_seed(seed)
    net = LipschitzMLP(sizes, bound=bound, norm=norm)  # type: ignore[arg-type]
    with torch.no_grad():
        for layer in net.layers:
            layer.weight.mul_(scale)  # push most columns / the spectrum past the bound
    return net


@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("seed", range(6))
def test_baked_layers_never_exceed_their_bound(norm: str, seed: int) -> None:
    """Exact operator norm of every baked float32 layer ≤ its stated bound (no tolerance)."""
    sizes = (7, 13, 5, 3)
    bound = [0.37, 1.0, 2.5, 10.0, 0.01, 3.3][seed]
    net = _saturated_mlp(norm, sizes, bound, seed, scale=[0.5, 1, 10, 100, 1000, 3][seed])
    seq = net.to_sequential()
    linears = [m for m in seq if isinstance(m, nn.Linear)]
    assert len(linears) == len(net.layers) == 3
    product = 1.0
    for lin, layer in zip(linears, net.layers, strict=True):
        exact = EXACT[norm](lin.weight)
        assert exact <= layer.lipschitz_bound(), (exact, layer.lipschitz_bound())
        assert layer.lipschitz_bound() == layer.bound
        product *= exact
    assert product <= net.lipschitz_bound() <= bound
    # The certified product bound from the baked net agrees (it is ≥ the exact product).
    assert product <= sequential_lipschitz_bound(seq, P[norm]) <= bound * (1 + 1e-9)


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_exported_sequential_computes_the_same_function(norm: str) -> None:
    net = _saturated_mlp(norm, (6, 9, 4), 2.0, seed=0, scale=20.0)
    x = torch.randn(50, 6)
    assert torch.equal(net(x), net.to_sequential()(x))


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_sampled_jacobians_and_difference_quotients_respect_the_bound(norm: str) -> None:
    """‖J(x)‖_{p→p} and ‖f(x)−f(y)‖_p/‖x−y‖_p never exceed the model bound (float64 eval)."""
    p = P[norm]
    bound = 1.7
    net = _saturated_mlp(norm, (5, 16, 16, 4), bound, seed=1, scale=50.0)
    seq = net.to_sequential().double()
    gen = torch.Generator().manual_seed(2)
    xs = torch.randn(200, 5, generator=gen, dtype=torch.float64) * 3
    ys = xs + torch.randn(200, 5, generator=gen, dtype=torch.float64) * torch.rand(200, 1, generator=gen,
                                                                                     dtype=torch.float64)
    worst_jac = 0.0
    for x in xs[:60]:
        jac = torch.autograd.functional.jacobian(seq, x)
        val = EXACT[norm](jac)
        worst_jac = max(worst_jac, val)
    diff_out = torch.linalg.vector_norm(seq(xs) - seq(ys), ord=p, dim=1)
    diff_in = torch.linalg.vector_norm(xs - ys, ord=p, dim=1)
    worst_ratio = float((diff_out / diff_in).max().detach())
    assert worst_jac <= bound * (1 + 1e-12)
    assert worst_ratio <= bound * (1 + 1e-12)
    assert worst_jac > 0.0  # the check looked at a non-trivial function


def test_l1_bound_is_reached_when_a_column_saturates() -> None:
    """A saturated column absolute-sums to the bound (within the 4u safety margin)."""
    layer = L1LipschitzLinear(4, 3, bound=2.5)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[3.0, 0.1, -1, 0], [-4.0, 0.1, 0, 0], [5.0, 0.1, 0, 0]]))
    w = layer.to_linear().weight
    col = np.abs(w.detach().double().numpy()).sum(axis=0)
    assert col[0] <= 2.5 and col[0] >= 2.5 * (1 - 1e-6)
    # Unsaturated columns are left untouched (the reparameterisation only squeezes).
    assert torch.equal(w[:, 1:], layer.weight[:, 1:])
    # Direction of the saturated column is kept: W'[:,0] ∝ W[:,0].
    expected = np.array([3.0, -4.0, 5.0]) * 2.5 / 12.0
    np.testing.assert_allclose(w[:, 0].detach().double().numpy(), expected, rtol=1e-6)


def test_l1_mlp_bound_is_tight_for_a_positive_saturated_net() -> None:
    """With nonnegative saturated weights and all ReLUs active, ‖J‖_{1→1} = k₁k₂ = bound."""
    net = LipschitzMLP((3, 4, 1), bound=0.64, norm="l1")
    with torch.no_grad():
        net.layers[0].weight.fill_(1.0)
        net.layers[1].weight.fill_(1.0)
        net.layers[0].bias.fill_(1.0)
    seq = net.to_sequential().double()
    jac = torch.autograd.functional.jacobian(seq, torch.ones(3, dtype=torch.float64))
    assert _l11(jac) == pytest.approx(0.64, rel=1e-6)
    assert _l11(jac) <= 0.64


def test_spectral_bound_is_reached_and_direction_kept() -> None:
    layer = SpectralLipschitzLinear(5, 4, bound=0.9)
    with torch.no_grad():
        layer.weight.mul_(100.0)
    w = layer.to_linear().weight
    assert 0.9 * (1 - 1e-5) <= _l22(w) <= 0.9
    ratio = (w.double() / layer.weight.double()).flatten().detach()
    np.testing.assert_allclose(ratio.numpy(), ratio[0].item(), rtol=1e-6)


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_training_with_a_large_step_cannot_break_the_bound(norm: str) -> None:
    torch.manual_seed(0)
    net = LipschitzMLP((8, 16, 2), bound=0.5, norm=norm)  # type: ignore[arg-type]
    opt = torch.optim.Adam(net.parameters(), lr=1.0)
    x = torch.randn(64, 8)
    target = 100 * torch.randn(64, 2)
    first = None
    for _ in range(30):
        loss = (net(x) - target).pow(2).mean()
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < first  # gradients flow through the reparameterisation
    for layer in net.layers:
        assert EXACT[norm](layer.to_linear().weight) <= layer.bound


def test_split_bound_product_never_exceeds_the_total() -> None:
    for bound in [1e-3, 0.01, 0.3, 1.0, 2.0, 10.0, 123.456]:
        for n in range(1, 6):
            parts = split_bound(bound, n)
            assert len(parts) == n and len(set(parts)) == 1
            assert math.prod(parts) <= bound
            assert math.prod(parts) >= bound * (1 - 1e-12)


def test_other_norms_use_the_baked_weights() -> None:
    net = _saturated_mlp("l1", (4, 6, 3), 1.0, seed=3, scale=10.0)
    seq = net.to_sequential()
    lins = [m for m in seq if isinstance(m, nn.Linear)]
    rows = [np.abs(m.weight.detach().double().numpy()).sum(axis=1).max() for m in lins]
    expected_inf = math.prod(float(r) for r in rows)
    assert net.lipschitz_bound("linf") == pytest.approx(expected_inf, rel=1e-9)
    assert net.lipschitz_bound("linf") >= expected_inf
    assert net.lipschitz_bound(2) >= math.prod(_l22(m.weight) for m in lins)
    assert operator_norm(torch.zeros(0, 3), 1) == 0.0


def test_bad_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="bound"):
        L1LipschitzLinear(3, 2, bound=0.0)
    with pytest.raises(ValueError, match="norm"):
        LipschitzMLP((3, 2), bound=1.0, norm="l3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="layer_bounds"):
        LipschitzMLP((3, 4, 2), bound=1.0, layer_bounds=(2.0, 1.0))
    with pytest.raises(ValueError, match="p must be"):
        L1LipschitzLinear(3, 2).lipschitz_bound(3)
    with pytest.raises(TypeError, match=r"Linear and nn\.ReLU"):
        sequential_lipschitz_bound(nn.Sequential(nn.Linear(2, 2), nn.Tanh()), 1)
