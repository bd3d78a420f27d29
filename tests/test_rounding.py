"""Certified rounding-error bounds (privcore.lipschitz.rounding) checked against exact arithmetic.

The bound must cover ‖f̂(x) − f(x)‖ for the float64 evaluation f̂ (numpy's, and torch's with its own
summation order) and the real-number network f with the same weights, evaluated exactly here with
Fractions; on adversarial inputs (cancellation, huge magnitudes, underflow) too. PTR's release then
has sensitivity Δp·R + 2η: searched for violating pairs at radii down to 1e-7 on the shipped
obfuscator, where the former float32 evaluation does violate Δp·R.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from privcore.lipschitz.rounding import (
    CertifiedNet,
    gamma,
    rounding_allowance,
    sensitivity_with_rounding,
)
from privcore.mechanisms import ptr
from privcore.nets.models import LipschitzClassifier

P_NORMS = (1, 2, math.inf)


def exact_errors(net: CertifiedNet, x: np.ndarray, y: np.ndarray) -> list[Fraction]:
    """|y_i − f_i(x)| exactly."""
    return [abs(Fraction(float(a)) - b) for a, b in zip(y, net.exact(x), strict=True)]


def norm(errors: list[Fraction], p: float) -> float:
    if p == 1:
        return float(sum(errors, Fraction(0)))
    if p == 2:
        return math.sqrt(float(sum((e * e for e in errors), Fraction(0))))
    return float(max(errors))


def random_module(sizes: tuple[int, ...], seed: int) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        if i:
            layers.append(torch.nn.ReLU())
        layers.append(torch.nn.Linear(a, b))
    return torch.nn.Sequential(*layers)  # float32 weights, as shipped


# ----------------------------------------------------------------------------- the bounds


def test_gamma_is_the_higham_constant_rounded_up() -> None:
    for n in (1, 2, 65, 785, 10**6):
        exact = Fraction(n, 2**53) / (1 - Fraction(n, 2**53))
        assert exact <= Fraction(gamma(n)) <= exact * (1 + Fraction(1, 2**50))
    assert gamma(0) == 0.0
    with pytest.raises(ValueError, match="n must be in"):
        gamma(-1)


@pytest.mark.parametrize("sizes,seed", [((5, 7, 6, 3), 0), ((12, 20, 4), 1), ((3, 30, 30, 8), 2)])
def test_a_priori_bound_covers_the_exact_error_on_the_whole_box(sizes: tuple[int, ...], seed: int) -> None:
    module = random_module(sizes, seed)
    net = CertifiedNet.from_module(module)
    rng = np.random.default_rng(seed)
    corners = rng.choice([-1.0, 1.0], size=(20, sizes[0]))  # the largest |x| the box allows
    inside = rng.uniform(-1.0, 1.0, size=(40, sizes[0]))
    torch64 = module.double()
    worst = dict.fromkeys(P_NORMS, 0.0)
    for x in np.vstack([corners, inside]):
        ours = net(x)
        with torch.no_grad():
            theirs = torch64(torch.as_tensor(x)).numpy()  # torch's own summation order
        _, running = net.running_error(x)
        for y in (ours, theirs):
            errors = exact_errors(net, x, y)
            assert all(float(e) <= r for e, r in zip(errors, running, strict=True))
            for p in P_NORMS:
                worst[p] = max(worst[p], norm(errors, p))
    for p in P_NORMS:
        eta = net.error_bound(p=p, input_bound=1.0)
        assert worst[p] <= eta < 1e-12, (p, worst[p], eta)


def test_running_bound_covers_adversarial_inputs_and_the_exact_path_rounds_once() -> None:
    """Catastrophic cancellation: fl(1e17 + 1 − 1e17) = 0 while f = 1."""
    net = CertifiedNet.from_layers([(np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]]), np.zeros(2))])
    x = np.array([1e17, 1.0, -1e17])
    y, running = net.running_error(x)
    errors = exact_errors(net, x, y)
    assert errors[0] == 1 and running[0] >= 1.0
    out = net.within(x, eta=1e-3, p=1)
    assert out.exact and out.value.tolist() == [1.0, 1e17]
    fast = net.within(np.array([0.5, 0.25, 0.125]), eta=1e-3, p=1)
    assert not fast.exact and fast.value.tolist() == [0.875, 0.5] and fast.bound <= 1e-3


@pytest.mark.parametrize("scale", [1e150, 1e-150, 1e-300, 3e-320])
def test_running_bound_covers_huge_tiny_and_subnormal_values(scale: float) -> None:
    """Products overflow the usual range or underflow into subnormals: the absolute term must cover them."""
    rng = np.random.default_rng(7)
    layers = [
        (rng.standard_normal((6, 5)), rng.standard_normal(6) * scale),
        None,
        (rng.standard_normal((3, 6)) * 1e-5, rng.standard_normal(3) * scale),
    ]
    net = CertifiedNet.from_layers(layers)
    for _ in range(20):
        x = rng.standard_normal(5) * scale
        y, running = net.running_error(x)
        errors = exact_errors(net, x, y)
        assert all(float(e) <= r for e, r in zip(errors, running, strict=True))
        out = net.within(x, eta=float(running.sum()) / 4 or 1e-300, p=1)
        assert norm(exact_errors(net, x, out.value), 1) <= out.bound


def test_within_refuses_when_no_float64_is_close_enough() -> None:
    net = CertifiedNet.from_layers([(np.array([[1.0, 1.0]]), np.zeros(1))])
    with pytest.raises(ValueError, match="nothing released"):
        net.within(np.array([2.0**60, 1.0]), eta=0.5, p=1)  # f = 2^60 + 1 is not a float64
    assert net.within(np.array([2.0**60, 1.0]), eta=1.0, p=1).value.tolist() == [2.0**60]


def test_error_bound_refuses_a_domain_that_overflows() -> None:
    big = np.full((2, 2), 1e200)
    net = CertifiedNet.from_layers([(big, np.zeros(2)), None, (big[:1], [0.0])])
    with pytest.raises(ValueError, match="too large"):
        net.error_bound(p=1, input_bound=1e10)
    with pytest.raises(ValueError, match="p must be"):
        net.error_bound(p=3)


def test_sensitivity_with_rounding_is_l_alpha_plus_two_eta_rounded_up() -> None:
    got = sensitivity_with_rounding(lipschitz=3.0, radius=0.1, rounding=1e-12)
    assert got == math.nextafter(math.nextafter(0.1 * 3.0, math.inf) + 2e-12, math.inf)
    assert Fraction(got) >= Fraction(3) * Fraction(0.1) + 2 * Fraction(1e-12)
    exact_f = sensitivity_with_rounding(lipschitz=3.0, radius=0.1, rounding=0.0)
    assert exact_f == math.nextafter(0.1 * 3.0, math.inf)
    assert rounding_allowance(3.0) == 3.0 * 2.0**-24
    with pytest.raises(ValueError, match="rounding must be in"):
        sensitivity_with_rounding(lipschitz=1.0, radius=1.0, rounding=-1.0)
    with pytest.raises(ValueError, match="must be finite"):
        sensitivity_with_rounding(lipschitz=1e308, radius=10.0, rounding=0.0)


# ----------------------------------------------------------------------------- parsing


class Doubling(torch.nn.Sequential):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2 * super().forward(x)


@pytest.mark.parametrize(
    "module",
    [
        torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh()),
        torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.LeakyReLU()),
        torch.nn.Sequential(torch.nn.Conv1d(1, 1, 3)),
        torch.nn.Sequential(torch.nn.Flatten(0), torch.nn.Linear(3, 3)),
        Doubling(torch.nn.Linear(3, 3)),
    ],
)
def test_unsupported_layers_raise(module: torch.nn.Module) -> None:
    with pytest.raises(TypeError, match=r"only|Flatten"):
        CertifiedNet.from_module(module)


def test_hooks_are_refused_and_dropout_identity_flatten_are_exact() -> None:
    lin = torch.nn.Linear(3, 2)
    lin.register_forward_hook(lambda m, i, o: o * 2)
    with pytest.raises(TypeError, match="hooks"):
        CertifiedNet.from_module(torch.nn.Sequential(lin))
    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(4, 5), torch.nn.Dropout(0.5), torch.nn.ReLU(),
        torch.nn.Identity(), torch.nn.Linear(5, 2),
    ).double().eval()  # fmt: skip
    net = CertifiedNet.from_module(module)
    x = np.random.default_rng(0).standard_normal((3, 4))
    with torch.no_grad():
        assert np.allclose(net(x), module(torch.as_tensor(x)).numpy(), rtol=0, atol=1e-14)


def test_lipschitz_classifier_is_parsed_with_its_baked_float32_weights() -> None:
    torch.manual_seed(1)
    model = LipschitzClassifier(image_shape=(1, 3, 3), num_classes=4, norm="l1", hidden=(6,), bound=1.0)
    model.eval()
    net = CertifiedNet.from_module(model)
    x = torch.rand(5, 1, 3, 3)
    with torch.no_grad():
        ref = model(x).double().numpy()
    assert net.in_dim == 9 and net.out_dim == 4
    assert np.allclose(net(x.double().reshape(5, -1).numpy()), ref, rtol=0, atol=1e-6)
    baked = model.mlp.to_sequential()
    assert np.array_equal(net.layers[0][0], baked[0].weight.detach().double().numpy())


# ----------------------------------------------------------------------------- PTR on the shipped obfuscator


@pytest.fixture(scope="module")
def obfuscator() -> tuple[torch.nn.Sequential, np.ndarray]:
    from privcore.data import load_dataset
    from privcore.errors import PrivcoreError
    from privcore.models.pipeline import load_pipeline

    try:
        pipe = load_pipeline("digits", "ARL-C-N", device="cpu")
        ds = load_dataset("digits")
    except (PrivcoreError, OSError) as exc:
        pytest.skip(f"shipped digits pipeline unavailable: {exc}")
    z = pipe.embed(ds.x_test[:40]).double().numpy()
    return pipe.obfuscator, z


def test_ptr_release_has_sensitivity_delta_p_r_plus_two_eta_at_tiny_radii(obfuscator) -> None:
    """Pairs z, z' within ℓ∞ distance R: ‖v(z) − v(z')‖₁ ≤ Δp·R + 2η with Δp the certified local bound.

    The old evaluation (float32 weights and z rounded to float32) breaks Δp·R at R = 1e-7: the
    search has the power to find a violation.
    """
    from privcore.lipschitz.engine import local_lipschitz

    f, zs = obfuscator
    net = CertifiedNet.from_module(f)
    rng = np.random.default_rng(0)
    old_worst = 0.0
    for radius in (1e-3, 1e-5, 1e-7):
        for z in zs[:10]:
            delta_p = local_lipschitz(f, z, radius, certifier="interval").upper
            eta = rounding_allowance(delta_p * radius)
            sensitivity = sensitivity_with_rounding(lipschitz=delta_p, radius=radius, rounding=eta)
            v = net.within(z, eta=eta, p=1).value
            assert np.array_equal(v, ptr._evaluate(f, z, eta))  # what PTR releases
            with torch.no_grad():
                old = f(torch.as_tensor(z, dtype=torch.float32)).double().numpy()
            for _ in range(6):
                step = rng.choice([-1.0, 1.0], size=z.size) * radius * rng.uniform(0.5, 1.0, size=z.size)
                z2 = z + step
                assert np.abs(z2 - z).max() <= radius
                v2 = net.within(z2, eta=eta, p=1).value
                assert np.abs(v2 - v).sum() <= sensitivity
                with torch.no_grad():
                    old2 = f(torch.as_tensor(z2, dtype=torch.float32)).double().numpy()
                old_worst = max(old_worst, np.abs(old2 - old).sum() / (delta_p * radius))
    assert old_worst > 1.0  # float32 (what PTR released before) exceeds Δp·R


def test_ptr_calibration_adds_two_eta(obfuscator) -> None:
    from privcore.mechanisms import plan_laplace, propose_test_release

    f, zs = obfuscator
    kw = {"radius": 0.05, "delta_p": 40.0, "r_max": 5.0, "tol": 0.01}  # φ ≈ 4.95 ≫ the threshold

    def oracle(*_: object) -> float:
        return 1.0

    res = propose_test_release(f, zs[0], epsilon=2.0, delta=0.05, lipschitz=oracle, rng=0, **kw)
    assert res.released and res.value is not None
    base = math.nextafter(40.0 * 0.05, math.inf)
    eta = math.ldexp(40.0 * 0.05, -24)
    want = plan_laplace(
        sensitivity=math.nextafter(base + 2 * eta, math.inf), epsilon=2.0, numel=res.value.size
    ).effective
    assert res.noise_scale_effective == want
    assert "Δp·R + 2η" in res.guarantee.calibration and f"{eta:.3g}" in res.guarantee.calibration
