"""The clipped global Gaussian mechanism: G₂ against brute force on tiny nets, and its exact calibration."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privcore.lipschitz.global_box import ClipBox
from privcore.lipschitz.regions import polytope_in_box, region_rows
from privcore.mechanisms.global_gauss import certified_l2_constant, inf_to_two
from tests._nets import random_net


def _brute_l2(net, box: ClipBox) -> float:
    """max ‖J_D‖_{∞→2} over every activation pattern whose region meets the box (LP per pattern)."""
    best = 0.0
    n = net.n_hidden
    for bits in itertools.product((0, 1), repeat=n):
        b = np.array(bits, dtype=np.float64)[None]
        G, h = region_rows(net, b)
        meets, _ = polytope_in_box(G[0], h[0], box.lower, box.upper)
        if not meets:
            continue
        jac = np.broadcast_to(net.weights[0], (1, *net.weights[0].shape))
        start = 0
        for w, width in zip(net.weights[1:], net.hidden_widths, strict=True):
            jac = np.matmul(w, b[:, start:start + width, None] * jac)
            start += width
        signs = np.array(list(itertools.product((-1.0, 1.0), repeat=jac.shape[-1])))
        best = max(best, float(np.max(np.linalg.norm(jac[0] @ signs.T, axis=0))))
    return best


def test_inf_to_two_is_the_largest_image_of_a_sign_vector() -> None:
    rng = np.random.default_rng(0)
    for d in (1, 3, 6):
        a = rng.standard_normal((4, 5, d))
        signs = np.array(list(itertools.product((-1.0, 1.0), repeat=d)))
        brute = np.linalg.norm(a @ signs.T, axis=1).max(axis=-1)
        got, exact = inf_to_two(a)
        assert exact and np.allclose(got, brute, rtol=1e-12)
    big = rng.standard_normal((2, 3, 20))
    bound, exact = inf_to_two(big)  # past the enumeration: an upper bound, never below a sign vector
    signs = np.where(rng.random((2000, 20)) < 0.5, -1.0, 1.0)
    assert not exact and np.all(bound >= np.linalg.norm(big @ signs.T, axis=1).max(axis=-1))


@pytest.mark.parametrize("seed", range(6))
def test_g2_is_the_exact_value_over_the_box_by_brute_force(seed: int) -> None:
    net = random_net(seed, (3, 4, 4, 3))
    rng = np.random.default_rng(seed)
    lo = rng.uniform(-1.5, 0.0, 3)
    box = ClipBox(lower=lo, upper=lo + rng.uniform(0.3, 2.0, 3))
    c = certified_l2_constant(net, box, time_limit=30.0)
    truth = _brute_l2(net, box)
    assert c.value >= truth  # certified
    if c.how == "exact":
        assert c.value == pytest.approx(truth, rel=1e-6)
    # and it covers every pair of the box: ‖f(x) − f(x')‖₂ ≤ G₂·‖x − x'‖∞
    x = rng.uniform(box.lower, box.upper, (2000, 3))
    y = rng.uniform(box.lower, box.upper, (2000, 3))
    num = np.linalg.norm(net.forward(x) - net.forward(y), axis=1)
    assert np.all(num <= c.value * np.abs(x - y).max(axis=1) * (1 + 1e-9) + 1e-12)


def test_release_is_calibrated_to_the_analytic_gaussian_at_g2() -> None:
    from privcore.lipschitz.rounding import rounding_allowance, sensitivity_with_rounding
    from privcore.mechanisms import registry
    from privcore.mechanisms.gaussian_calibration import analytic_gaussian_sigma

    mech = registry.get("global-gauss")
    pipe = mech.load(dataset="digits", model=None, models_dir=None)
    setting = mech.setting(epsilon=2.0, delta=1e-5)
    out = mech.release(pipe, np.zeros(pipe.latent_dim), setting, None)
    g2 = out.public["global_lipschitz_l2"]
    r = out.public["radius"]
    sens = sensitivity_with_rounding(lipschitz=g2, radius=r, rounding=rounding_allowance(g2 * r))
    assert out.noise_scale == analytic_gaussian_sigma(epsilon=2.0, delta=1e-5, sensitivity=sens)
    assert out.noise_scale_effective >= out.noise_scale
    assert (out.guarantee.epsilon, out.guarantee.delta, out.guarantee.radius) == (2.0, 1e-5, r)
    # G₂ ≤ G (∞→2 ≤ ∞→1): the Gaussian's sensitivity is never the larger one
    g1 = registry.get("global").outlook(pipe, registry.get("global").setting(epsilon=2.0)).public
    assert g2 <= g1["global_lipschitz"]


@pytest.mark.parametrize("seed", range(4))
def test_the_l2_threshold_table_keeps_every_pattern_above_the_threshold(seed: int) -> None:
    from privcore.lipschitz.codes import codes_from_bits
    from privcore.lipschitz.norms import DEFAULT_NORMS
    from privcore.lipschitz.patterns import threshold_pattern_table
    from privcore.mechanisms.global_gauss import _pattern_jacobians, _row_bound

    net = random_net(seed, (4, 4, 4, 3))
    every = np.array(list(itertools.product((0.0, 1.0), repeat=net.n_hidden)))
    exact, _ = inf_to_two(_pattern_jacobians(net, every))
    tau = float(np.quantile(exact, 0.7))
    table = threshold_pattern_table(net, tau, DEFAULT_NORMS, last_bound=_row_bound)
    assert table is not None
    held = dict(zip(table.codes.tolist(), table.norms.tolist(), strict=True))
    for code, value in zip(codes_from_bits(every).tolist(), exact.tolist(), strict=True):
        if value > tau:  # every pattern above τ is there, with a value that bounds it
            assert code in held and held[code] >= value
