"""GroupSort (MaxMin) obfuscators in ReLU form: the same function as the GroupSort network on the box,
saved as a plain ReLU MLP, and the construction's ∞→1 bound above the certified G."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn


def _groupsort(net: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """The GroupSort network of the free weights, evaluated directly (MaxMin on pairs)."""
    lins = [m for m in net if isinstance(m, nn.Linear)]
    for i, m in enumerate(lins):
        x = x @ m.normalised().T + m.free_bias
        if i < len(lins) - 1:
            a, b = x[..., 0::2], x[..., 1::2]
            x = torch.stack([torch.maximum(a, b), torch.minimum(a, b)], -1).flatten(-2)
    return x


@pytest.mark.parametrize("linf", [False, True])
def test_the_relu_form_is_the_groupsort_network_and_bakes_to_a_plain_relu_mlp(linf: bool) -> None:
    from privcore.nets.blocks import relu_mlp
    from privcore.nets.groupsort import bake, maxmin_relu_mlp, relu_form_widths

    torch.manual_seed(0)
    widths = [3, 6, 4, 2]
    net = maxmin_relu_mlp(widths, linf=linf)
    x = torch.empty(500, 3).uniform_(-3.0, 3.0)
    torch.testing.assert_close(net(x), _groupsort(net, x), atol=1e-4, rtol=0)
    plain = relu_mlp(relu_form_widths(widths))
    assert relu_form_widths(widths) == [3, 9, 6, 2]
    plain.load_state_dict(bake(net).state_dict())
    torch.testing.assert_close(plain(x), net(x), atol=0, rtol=0)


def test_the_jacobian_of_the_relu_form_is_a_signed_permutation_product() -> None:
    """MaxMin's derivative permutes, so the Jacobian the release-aware noise reads equals the GroupSort
    network's autograd Jacobian at generic points."""
    from privcore.nets.groupsort import maxmin_relu_mlp
    from privcore.train.release_aware import relu_mlp_jacobians

    torch.manual_seed(1)
    net = maxmin_relu_mlp([3, 4, 4, 2])
    x = torch.randn(20, 3)
    jac = relu_mlp_jacobians(net, x).detach()
    auto = torch.stack([torch.autograd.functional.jacobian(lambda v: _groupsort(net, v[None])[0], xi)
                        for xi in x])
    torch.testing.assert_close(jac, auto, atol=1e-4, rtol=0)


def test_the_construction_bound_is_one_and_bounds_the_certified_g() -> None:
    from privcore.lipschitz.global_box import ClipBox, compute_global_constant
    from privcore.nets.groupsort import bake, construction_bound, maxmin_relu_mlp

    torch.manual_seed(2)
    net = maxmin_relu_mlp([3, 4, 4, 2], linf=True)
    assert float(construction_bound(net).detach()) == pytest.approx(1.0, rel=1e-5)
    box = ClipBox(lower=np.array([-2.0, -1.0, -1.5]), upper=np.array([1.0, 2.0, 1.5]))
    g = compute_global_constant(bake(net).double(), box, time_limit=20.0)
    assert 0.0 < g.value <= 1.0 + 1e-5
    free = maxmin_relu_mlp([3, 4, 4, 2])
    assert float(construction_bound(free).detach()) >= compute_global_constant(bake(free).double(), box,
                                                                      time_limit=20.0).lower


def test_the_recipe_checks_the_groupsort_options() -> None:
    from privcore.nets.groupsort import maxmin_relu_mlp
    from privcore.train.recipes import global_obfuscator_recipe

    ok = global_obfuscator_recipe("mnist", "N-global-e2o2gsl", target_epsilon=2.0, out_dim=2,
                                  obfuscator_activation="maxmin", obfuscator_hidden=(16, 16),
                                  noise_bound="construction")
    assert "GroupSort" in ok.loss_terms()["obfuscator"]
    with pytest.raises(ValueError, match="obfuscator_hidden"):
        global_obfuscator_recipe("mnist", "N-global-e2", target_epsilon=2.0, obfuscator_activation="maxmin",
                                 obfuscator_hidden=(10, 9))
    with pytest.raises(ValueError, match="obfuscator_activation"):
        global_obfuscator_recipe("mnist", "N-global-e2", target_epsilon=2.0, noise_bound="construction")
    with pytest.raises(ValueError, match="obfuscator_activation"):
        global_obfuscator_recipe("mnist", "N-global-e2", target_epsilon=2.0, obfuscator_activation="tanh")
    with pytest.raises(ValueError, match=r"widths\[1\]"):
        maxmin_relu_mlp([3, 5, 2])
