"""Parsing torch modules into Linear/ReLU chains (refusing everything else), model hashing, and
the cheap bounds' basic guarantees."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from torch import nn

from privcore.lipschitz import (
    ReluNetwork,
    UnsupportedNetworkError,
    as_network,
    global_upper_bound,
    interval_upper_bound,
    model_hash,
    operator_norm,
    sampled_lower_bound,
)
from privcore.lipschitz.bounds import box_around, forward_bounds
from privcore.lipschitz.norms import Norms


class Functional(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(3, 5)
        self.fc2 = nn.Linear(5, 4)
        self.fc3 = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.nn.functional.relu(self.fc2(torch.relu(self.fc1(x)))))


class Skip(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.fc(x))


def _outputs_match(module: nn.Module, net: ReluNetwork) -> bool:
    x = np.random.default_rng(0).standard_normal((32, net.in_dim))
    with torch.no_grad():
        y = module(torch.as_tensor(x, dtype=torch.float32)).double().numpy()
    return bool(np.allclose(y, net.forward(x), atol=1e-5))


@pytest.mark.parametrize(
    "build",
    [
        lambda: nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2)),
        lambda: Functional(),
        lambda: nn.Linear(3, 2),
        lambda: nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2)),  # composed
        lambda: nn.Sequential(
            nn.Sequential(nn.Linear(3, 4), nn.ReLU()), nn.Identity(), nn.Linear(4, 2), nn.ReLU()
        ),
        lambda: nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.ReLU(), nn.Linear(4, 2)),
    ],
)
def test_accepted_modules_parse_to_an_equivalent_chain(build) -> None:
    torch.manual_seed(0)
    module = build()
    net = as_network(module)
    assert _outputs_match(module, net)
    assert all(w.dtype == np.float64 for w in net.weights)
    assert not net.weights[0].flags.writeable


@pytest.mark.parametrize(
    ("module", "match"),
    [
        (nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)), "Tanh"),
        (nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 2)), "Dropout"),
        (nn.Sequential(nn.Conv1d(1, 1, 3)), "Conv1d"),
        (nn.Sequential(nn.ReLU(), nn.Linear(3, 2)), "before the first Linear"),
        (Skip(), "single Linear/ReLU chain"),
        (nn.Sequential(nn.Linear(3, 4), nn.LeakyReLU(), nn.Linear(4, 2)), "LeakyReLU"),
    ],
)
def test_anything_else_is_refused_with_a_clear_message(module: nn.Module, match: str) -> None:
    with pytest.raises(UnsupportedNetworkError, match=match):
        as_network(module)


def test_refuses_non_modules() -> None:
    with pytest.raises(UnsupportedNetworkError, match=r"torch\.nn\.Module"):
        as_network(lambda x: x)


def test_model_hash_is_stable_and_tracks_parameters_and_structure() -> None:
    torch.manual_seed(1)
    a = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    b = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    b.load_state_dict(a.state_dict())
    assert model_hash(a) == model_hash(b) == as_network(a).digest
    c = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    c.load_state_dict(a.state_dict())
    assert model_hash(c) != model_hash(a)  # same state_dict, different architecture
    first = as_network(a)
    with torch.no_grad():
        a[0].weight[0, 0] += 1e-3  # in-place training step: the memo must not serve stale weights
    second = as_network(a)
    assert second.digest != first.digest
    assert second.weights[0][0, 0] == pytest.approx(first.weights[0][0, 0] + 1e-3, abs=1e-6)


def _fresh_chain(seed: int = 2) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 3))


def test_an_unchanged_module_is_served_from_the_memo_without_hashing(monkeypatch) -> None:
    import privcore.lipschitz.network as network

    module = _fresh_chain()
    first = as_network(module)
    calls: list[object] = []
    real = network.model_hash
    monkeypatch.setattr(network, "model_hash", lambda m: calls.append(m) or real(m))
    assert as_network(module) is first and as_network(module) is first
    assert calls == []  # hashed once per state, not once per call
    module.eval()  # the same values: hashed again (a plain layer's flag), the parse reused
    assert as_network(module) is first


def _scale_in_place(module: nn.Sequential) -> None:
    with torch.no_grad():
        module[2].weight.mul_(2.0)


def _scale_through_data(module: nn.Sequential) -> None:
    module[2].weight.data.mul_(2.0)  # leaves the tensor's version counter as it was


def _scale_through_numpy(module: nn.Sequential) -> None:
    module[2].weight.detach().numpy()[...] *= 2.0  # so does a write through a numpy view


def _transpose_through_data(module: nn.Sequential) -> None:
    module[0].weight.data = module[0].weight.data.t()  # same memory and shape, other strides


def _new_parameter(module: nn.Sequential) -> None:
    module[2].weight = nn.Parameter(module[2].weight.detach() * 2.0)


def _new_layer(module: nn.Sequential) -> None:
    module[1] = nn.Identity()


def _restored_state(module: nn.Sequential) -> None:
    state = {k: v * 2.0 for k, v in module.state_dict().items()}
    module.load_state_dict(state)


@pytest.mark.parametrize("change", [_scale_in_place, _scale_through_data, _scale_through_numpy,
                                    _transpose_through_data, _new_parameter, _new_layer, _restored_state])
def test_any_change_of_a_module_is_seen_by_the_next_call(change) -> None:
    """However the weights or the layers change (through ``.data`` or a numpy view too, which leave the
    version counters alone), the next call hashes and parses the module as it now is."""
    module = _fresh_chain()
    before = as_network(module)
    versions = [p._version for p in module.parameters()]
    change(module)
    after = as_network(module)
    assert after.digest == model_hash(module) != before.digest
    assert _outputs_match(module, after) and not _outputs_match(module, before)
    if change in (_scale_through_data, _scale_through_numpy):
        assert [p._version for p in module.parameters()] == versions  # a version check would miss it


def test_the_memo_keeps_no_module_alive() -> None:
    import gc
    import weakref

    module = _fresh_chain()
    as_network(module)
    ref = weakref.ref(module)
    del module
    gc.collect()
    assert ref() is None


def test_operator_norms_match_brute_force() -> None:
    rng = np.random.default_rng(0)
    for m, n in [(2, 3), (5, 4), (1, 6), (7, 7)]:
        a = rng.standard_normal((m, n))
        vertices = [np.array(s) for s in itertools.product((-1.0, 1.0), repeat=n)]
        assert operator_norm(a) == pytest.approx(max(np.abs(a @ s).sum() for s in vertices))
        linf = max(np.abs(a @ s).max() for s in vertices)
        assert operator_norm(a, output_norm="linf") == pytest.approx(linf)
        units = [e * sign for e in np.eye(n) for sign in (-1, 1)]
        assert operator_norm(a, input_norm="l1") == pytest.approx(max(np.abs(a @ u).sum() for u in units))
        assert operator_norm(a, input_norm="l1", output_norm="linf") == pytest.approx(
            max(np.abs(a @ u).max() for u in units)
        )


def test_forward_bounds_contain_sampled_preactivations_and_bounds_are_ordered() -> None:
    """IBP encloses every sampled pre-activation; sampled lower ≤ interval ≤ global; the sampled
    lower bound is a Jacobian norm at a point of the box."""
    rng = np.random.default_rng(4)
    for seed, dims in enumerate([(4, 8, 6), (8, 10, 8, 8), (3, 5, 5, 5, 2)]):
        ws = [rng.standard_normal((dims[i + 1], dims[i])) for i in range(len(dims) - 1)]
        bs = [rng.standard_normal(dims[i + 1]) for i in range(len(dims) - 1)]
        net = ReluNetwork.from_arrays(ws, bs)
        z, r = rng.standard_normal(dims[0]), 0.3 + seed * 0.2
        lo, hi = box_around(z, r)
        fwd = forward_bounds(net, lo, hi)
        pts = rng.uniform(lo, hi, size=(500, dims[0]))
        for pre, low, up in zip(net.preactivations(pts), fwd.lower, fwd.upper, strict=True):
            assert np.all(pre >= low - 1e-12) and np.all(pre <= up + 1e-12)
        lb = sampled_lower_bound(net, z, r)
        itv = interval_upper_bound(net, z, r)
        assert 0 < lb.value <= itv <= global_upper_bound(net) * (1 + 1e-12)
        assert np.all(np.abs(lb.point - z) <= r + 1e-12)
        assert lb.value <= operator_norm(net.jacobians(lb.point[None])[0])


def test_sampled_witness_is_a_verified_violation_in_the_ball() -> None:
    """nearest_sampled_violation returns a point of the ball whose Jacobian norm really exceeds τ
    (recomputed here), and nothing when τ is above the global bound."""
    from privcore.lipschitz.bounds import nearest_sampled_violation

    rng = np.random.default_rng(9)
    found = 0
    for seed in range(6):
        ws = [rng.standard_normal((8, 4)), rng.standard_normal((6, 8)), rng.standard_normal((3, 6))]
        bs = [rng.standard_normal(8), rng.standard_normal(6), rng.standard_normal(3)]
        net = ReluNetwork.from_arrays(ws, bs)
        z, r = rng.standard_normal(4), 1.0
        tau = 0.9 * sampled_lower_bound(net, z, r, seed=seed).value
        w = nearest_sampled_violation(net, z, r, tau, Norms())
        if w is not None:
            found += 1
            assert w.norm > tau and np.max(np.abs(w.point - z)) <= w.distance + 1e-12 <= r + 1e-12
            assert operator_norm(net.jacobians(w.point[None])[0]) >= w.norm
        assert nearest_sampled_violation(net, z, r, 1.01 * global_upper_bound(net), Norms()) is None
    assert found >= 4
