"""Branch and bound over activation patterns (pattern_bnb) and the split search (splitting).

Exactness against brute force over every pattern (tiny nets), soundness against sampled Jacobian
norms, and the engine's decisions against LipMIP solved to optimality."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privcore.lipschitz import Certifier, build_milp, decide_exact
from privcore.lipschitz.backends import solve
from privcore.lipschitz.bounds import box_around, jacobian_norms
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms, operator_norm
from privcore.lipschitz.pattern_bnb import global_pattern_bound, max_pattern_norm, pattern_norm_floor
from privcore.lipschitz.patterns import global_pattern_table
from privcore.lipschitz.splitting import split_decide
from privcore.mechanisms.ptr import compute_phi

NORMS = (("linf", "l1"), ("l1", "l1"), ("linf", "linf"), ("l1", "linf"))


def random_net(rng: np.random.Generator, dims: list[int]) -> ReluNetwork:
    ws = [rng.standard_normal((dims[i + 1], dims[i])) / math.sqrt(dims[i]) for i in range(len(dims) - 1)]
    bs = [0.3 * rng.standard_normal(dims[i + 1]) for i in range(len(dims) - 1)]
    return ReluNetwork.from_arrays(ws, bs)


def pattern_norm(net: ReluNetwork, pattern: np.ndarray, norms: tuple[str, str]) -> float:
    layers = [d.astype(float) for d in net.split_pattern(pattern)]
    jac = net.jacobians(np.zeros((1, net.in_dim)), layers)[0]
    return float(operator_norm(jac, input_norm=norms[0], output_norm=norms[1]))


@pytest.mark.parametrize("seed", range(12))
def test_equals_brute_force_over_all_patterns(seed: int) -> None:
    """G (value mode) is the largest norm over all 2^n patterns, also with neurons fixed on/off; the
    decision flips exactly around it; the returned pattern has the returned norm."""
    rng = np.random.default_rng(seed)
    depth = 1 + seed % 3
    dims = [
        int(rng.integers(2, 6)),
        *(int(w) for w in rng.integers(2, 6, size=depth)),
        int(rng.integers(1, 5)),
    ]
    net = random_net(rng, dims)
    n = net.n_hidden
    for norms in NORMS:
        table = global_pattern_table(net, Norms(input=norms[0], output=norms[1]))
        bits = (table.codes[:, None] >> np.arange(n)) & 1
        on = rng.random(n) < 0.25
        off = (rng.random(n) < 0.25) & ~on
        for fix_on, fix_off in ((None, None), (on, off)):
            allowed = np.ones(len(table.codes), dtype=bool)
            if fix_on is not None:
                allowed = (bits[:, fix_on] == 1).all(axis=1) & (bits[:, fix_off] == 0).all(axis=1)
            truth = float(table.norms[allowed].max())
            kw = dict(on=fix_on, off=fix_off, input_norm=norms[0], output_norm=norms[1])
            res = max_pattern_norm(net, **kw)
            assert res.complete
            assert res.lower == pytest.approx(truth, rel=1e-12, abs=1e-12)
            assert truth <= res.upper <= truth + 1e-8 * (1 + truth)
            assert pattern_norm(net, res.pattern, norms) == pytest.approx(res.lower, rel=1e-9, abs=1e-12)
            if fix_on is not None:
                assert res.pattern[fix_on].all() and not res.pattern[fix_off].any()
            below, above = truth * (1 - 1e-6) - 1e-9, truth * (1 + 1e-6) + 1e-9
            assert max_pattern_norm(net, threshold=below, **kw).at_most(below) is False
            decided = max_pattern_norm(net, threshold=above, **kw)
            assert decided.at_most(above) is True and truth <= decided.upper <= above


@pytest.mark.parametrize("seed", range(6))
def test_the_pattern_floor_is_reached_by_an_allowed_pattern(seed: int) -> None:
    """The floor that schedules thresholds never exceeds the largest norm over the patterns the masks
    allow (brute force over all of them), and the ascent behind it finds most of that maximum."""
    rng = np.random.default_rng(100 + seed)
    net = random_net(rng, [int(rng.integers(2, 6)), *(int(w) for w in rng.integers(2, 6, size=2)), 3])
    n = net.n_hidden
    for norms in NORMS:
        nn = Norms(input=norms[0], output=norms[1])
        table = global_pattern_table(net, nn)
        bits = (table.codes[:, None] >> np.arange(n)) & 1
        on = rng.random(n) < 0.25
        off = (rng.random(n) < 0.25) & ~on
        allowed = (bits[:, on] == 1).all(axis=1) & (bits[:, off] == 0).all(axis=1)
        truth = float(table.norms[allowed].max())
        floor = pattern_norm_floor(net, on=on, off=off, norms=nn)
        assert 0.5 * truth <= floor <= truth * (1 + 1e-12) + 1e-12


def test_wide_net_bound_is_sound_and_far_below_the_product_of_norms() -> None:
    """On an 8→24→24→4 net (2^48 patterns) G bounds every sampled Jacobian norm, its pattern
    attains it, and it is far below the product of the layers' operator norms."""
    rng = np.random.default_rng(7)
    net = random_net(rng, [8, 24, 24, 4])
    res = max_pattern_norm(net)
    assert res.complete and res.upper == pytest.approx(res.lower, rel=1e-8)
    pts = 3.0 * rng.standard_normal((20000, 8))
    vals, _ = jacobian_norms(net, pts, Norms())
    assert vals.max() <= res.upper
    assert pattern_norm(net, res.pattern, ("linf", "l1")) == pytest.approx(res.lower, rel=1e-9)
    product = math.prod(
        float(operator_norm(w, input_norm="linf", output_norm="linf")) for w in net.weights[:-1]
    )
    product *= float(operator_norm(net.weights[-1], input_norm="linf", output_norm="l1"))
    assert res.upper < product / 3
    g = res.upper
    assert global_pattern_bound(net, g * 1.001).at_most(g * 1.001) is True
    assert global_pattern_bound(net, res.lower * 0.999).at_most(res.lower * 0.999) is False


@pytest.mark.parametrize("budget", [50, 500, 5_000, 50_000])
def test_out_of_nodes_the_bound_is_finite_and_still_above_every_pattern(budget: int) -> None:
    """Issue 31: a search that runs out of nodes returns the largest bound of a node still open, a
    finite certified bound ≥ the exact maximum (from the complete search) — never inf — and it
    tightens as the budget grows."""
    rng = np.random.default_rng(7)
    net = random_net(rng, [8, 24, 24, 4])
    exact = max_pattern_norm(net)
    assert exact.complete
    cut = max_pattern_norm(net, max_nodes=budget)
    assert not cut.complete and math.isfinite(cut.upper)
    assert exact.upper <= cut.upper * (1 + 1e-12) and cut.lower <= exact.upper
    assert cut.upper <= max_pattern_norm(net, max_nodes=max(1, budget // 10)).upper


def test_bad_masks_and_too_many_pairs() -> None:
    rng = np.random.default_rng(0)
    net = random_net(rng, [3, 4, 4, 2])
    with pytest.raises(ValueError, match="disjoint boolean masks over the 8 hidden neurons"):
        max_pattern_norm(net, on=np.ones(8, bool), off=np.ones(8, bool))
    with pytest.raises(ValueError, match="input_norm"):
        max_pattern_norm(net, input_norm="l2")
    with pytest.raises(ValueError, match="threshold must be a real number"):
        max_pattern_norm(net, threshold=float("nan"))
    with pytest.raises(ValueError, match="max_nodes"):
        max_pattern_norm(net, max_nodes=0)
    assert max_pattern_norm(random_net(rng, [20, 4, 4, 12])) is None  # 2^19 · 2^12 vertex pairs


def test_global_bound_decides_every_radius_of_a_wide_net() -> None:
    """Above G every decision passes at once (even at radius 50), and φ reaches R_max; below the
    norm sampled at the centre the decision fails."""
    rng = np.random.default_rng(3)
    net = random_net(rng, [8, 24, 24, 4])
    g = max_pattern_norm(net).upper
    z = rng.standard_normal(8)
    dec = decide_exact(net, z, 50.0, g * 1.01, time_limit=5.0)
    assert dec.passed and dec.how == "global-patterns" and dec.upper <= g * 1.01
    cert = Certifier(kind="exact", time_limit=5.0)
    phi = compute_phi(net, z, radius=0.2, delta_p=g * 1.01, r_max=2.0, tol=1e-3, lipschitz=cert)
    assert phi.r_star == pytest.approx(2.0, abs=1e-3)
    assert set(cert.stats) <= {"global-patterns", "memo", "interval"}
    at_center, ok = jacobian_norms(net, z[None], Norms())
    assert ok[0]
    dec = decide_exact(net, z, 0.01, at_center[0] * 0.9, time_limit=5.0)
    assert not dec.passed


@pytest.mark.parametrize("seed", range(6))
def test_split_decisions_match_lipmip(seed: int) -> None:
    """split_decide agrees with LipMIP solved to optimality (1e-9 tolerances) on both sides of L;
    a fail comes with a point of the box whose verified Jacobian norm exceeds τ."""
    rng = np.random.default_rng(100 + seed)
    net = random_net(rng, [3, 7, 7, 2])
    z = rng.standard_normal(3)
    radius = float(rng.choice([0.3, 0.8, 1.5]))
    exact = solve(build_milp(net, z, radius), solver="highs", strict=True, mip_gap=1e-9)
    assert exact.status == "optimal"
    lo, hi = box_around(z, radius)
    for tau in (exact.upper * 0.97, exact.upper * 1.03):
        res = split_decide(net, z, radius, tau, max_boxes=20000, max_seconds=60.0)
        assert res is not None
        assert res.passed == (exact.upper <= tau)
        if res.passed:
            assert res.upper <= tau
        else:
            assert np.all(res.point >= lo) and np.all(res.point <= hi)
            vals, ok = jacobian_norms(net, res.point[None], Norms())
            assert ok[0] and vals[0] == pytest.approx(res.lower) and res.lower > tau
