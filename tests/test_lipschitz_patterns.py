"""The pattern search's pruning: never-realised patterns, region boxes, propagation, nearest violation.

Every pruning step must be a proof: the checks compare with an independent LP (scipy's
``linprog`` on the region rows of :mod:`privcore.lipschitz.reference`), with points sampled from
the network itself, and with the plain LipMIP optimum.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from privcore.lipschitz import Certifier, ReluNetwork, build_milp
from privcore.lipschitz.backends import solve
from privcore.lipschitz.bounds import box_around, forward_bounds, jacobian_norms
from privcore.lipschitz.patterns import (
    _bits,
    _box_refutes,
    _region_rows_batch,
    nonempty_threshold_table,
    pattern_nearest_violation,
    threshold_pattern_table,
)
from privcore.lipschitz.reference import _region_rows, pattern_region_feasible
from privcore.mechanisms.ptr import compute_phi


def random_net(seed: int, dims: tuple[int, ...], bias: float = 0.3) -> ReluNetwork:
    rng = np.random.default_rng(seed)
    ws = [rng.standard_normal((dims[i + 1], dims[i])) * np.sqrt(2.0 / dims[i]) for i in range(len(dims) - 1)]
    bs = [rng.standard_normal(dims[i + 1]) * bias for i in range(len(dims) - 1)]
    return ReluNetwork.from_arrays(ws, bs)


def split(net: ReluNetwork, code: int) -> list[np.ndarray]:
    bits = _bits(np.array([code], dtype=np.int64), net.n_hidden)[0]
    return np.split(bits, np.cumsum(net.hidden_widths)[:-1])


def reference_distance(net: ReluNetwork, code: int, center: np.ndarray) -> float:
    """ℓ∞ distance from ``center`` to the closed region of a pattern (scipy LP; inf if empty)."""
    G, h = _region_rows(net, split(net, code))
    d = net.in_dim
    eye = np.eye(d)
    A = np.block([[G, np.zeros((G.shape[0], 1))], [eye, -np.ones((d, 1))], [-eye, -np.ones((d, 1))]])
    res = linprog(np.r_[np.zeros(d), 1.0], A_ub=A, b_ub=np.r_[h, center, -center],
                  bounds=[(None, None)] * d + [(0, None)], method="highs")
    return float(res.fun) if res.status == 0 else np.inf


def test_nonempty_table_keeps_exactly_the_realised_patterns_and_boxes_hold_them() -> None:
    """The filtered table lists the patterns above τ whose region is non-empty (scipy LP on a wide
    box), and every point sampled from the network whose pattern is above τ lies in its box."""
    rng = np.random.default_rng(0)
    for seed, dims in enumerate([(3, 5, 4, 2), (2, 4, 4, 3), (4, 6, 5, 2)]):
        net = random_net(10 + seed, dims)
        full = threshold_pattern_table(net, 0.0, input_norm="linf", output_norm="l1")
        tau = float(np.quantile(full.norms, 0.5))
        above = threshold_pattern_table(net, tau, input_norm="linf", output_norm="l1")
        table = nonempty_threshold_table(net, tau, input_norm="linf", output_norm="l1")
        wide = np.full(dims[0], 1e4)
        realised = {int(c) for c in above.codes
                    if pattern_region_feasible(net, -wide, wide, split(net, int(c)))}
        assert set(table.codes.tolist()) == realised
        assert 0 < len(realised) < above.codes.size  # the filter is exercised
        assert np.all(np.diff(table.norms) <= 0) and table.floor == tau
        x = rng.standard_normal((20000, dims[0])) * 3.0
        pre = net.preactivations(x)
        strict = np.all(np.hstack([np.abs(p) > 1e-9 for p in pre]), axis=1)
        bits = np.hstack([(p > 0) for p in pre]).astype(np.int64)
        codes = (bits << np.arange(net.n_hidden, dtype=np.int64)).sum(axis=1)
        position = {int(c): i for i, c in enumerate(table.codes)}
        norms, _ = jacobian_norms(net, x)
        hits = 0
        for xi, code, ok, v in zip(x, codes, strict, norms, strict=True):
            if not ok or v <= tau * (1 + 1e-9):
                continue
            i = position[int(code)]  # a realised pattern above τ is always listed
            assert np.all(table.box_lower[i] <= xi) and np.all(xi <= table.box_upper[i])
            hits += 1
        assert hits > 100


def test_propagation_only_refutes_regions_that_miss_the_ball() -> None:
    """``_box_refutes`` is a proof: whenever it says a region misses B(z, r), the scipy LP agrees,
    with and without a bounding box; and it does refute a good share of the far regions."""
    rng = np.random.default_rng(1)
    net = random_net(20, (3, 6, 5, 2))
    codes = np.arange(1 << net.n_hidden, dtype=np.int64)
    G, h = _region_rows_batch(net, codes)
    refuted = missed = 0
    for _ in range(4):
        center = rng.standard_normal(3)
        radius = float(rng.uniform(0.05, 0.6))
        dead = _box_refutes(G, h, center, radius)
        lo, hi = box_around(center, radius)
        for code in codes[::7]:
            meets = pattern_region_feasible(net, lo, hi, split(net, int(code)), slack=0.0)
            refuted += bool(dead[code])
            missed += not meets
            assert not (dead[code] and meets), (center, radius, code)
        box_lo, box_hi = lo - 1.0, hi + 1.0  # any box containing the ball gives the same answer
        again = _box_refutes(G, h, center, radius, np.broadcast_to(box_lo, (codes.size, 3)),
                             np.broadcast_to(box_hi, (codes.size, 3)))
        assert np.array_equal(again, dead)
    assert refuted > 0.3 * missed > 0


def test_nearest_violation_through_the_filtered_table_is_the_true_distance() -> None:
    """18 hidden neurons (no full table: the filtered threshold table is used): the distance found
    equals the smallest scipy-LP distance over the table's patterns (that the table keeps every
    realised pattern is the first test's business), and the plain MILP passes 1e-4 before it and
    fails 1e-4 beyond it."""
    net = random_net(21, (3, 9, 9, 2))
    centers = np.random.default_rng(5).standard_normal((3, 3))
    values = [solve(build_milp(net, c, 0.2), solver="gurobi", mip_gap=1e-9).upper for c in centers]
    tau = 1.1 * max(values)  # one τ, as PTR uses one Δp for every image
    table = nonempty_threshold_table(net, tau, input_norm="linf", output_norm="l1")
    for center in centers:
        fwd = forward_bounds(net, *box_around(center, 3.0))
        nv = pattern_nearest_violation(net, center, 3.0, tau, fwd, input_norm="linf", output_norm="l1",
                                       max_lps=4096)
        assert nv is not None and np.isfinite(nv.distance)
        truth = min(reference_distance(net, int(c), center) for c in table.codes)
        assert abs(nv.distance - truth) <= 1e-7 * (1 + truth)
        for factor, passes in ((1 - 1e-4, True), (1 + 1e-4, False)):
            r = nv.distance * factor
            value = solve(build_milp(net, center, r), solver="gurobi", mip_gap=1e-9).upper
            assert (value <= tau) == passes


def test_phi_through_the_filtered_table_equals_straightforward_bisection() -> None:
    """φ on an 18-neuron net: the engine's decisions equal a fresh full MILP per bisection step."""
    net = random_net(22, (3, 9, 9, 2))
    rng = np.random.default_rng(6)

    def straightforward(f: ReluNetwork, c: np.ndarray, r: float) -> float:
        res = solve(build_milp(f, c, r), solver="gurobi", mip_gap=1e-9)
        assert res.status == "optimal"
        return res.upper

    for _ in range(2):
        z = rng.standard_normal(3)
        delta_p = 1.1 * straightforward(net, z, 0.1)
        kw = dict(radius=0.1, delta_p=delta_p, r_max=1.0, tol=0.01)
        cert = Certifier(kind="exact", solver="gurobi")
        fast = compute_phi(net, z, lipschitz=cert, **kw)
        slow = compute_phi(net, z, lipschitz=straightforward, **kw)
        assert fast.evaluations == slow.evaluations and fast.phi == slow.phi
        assert set(cert.stats) <= {"enumeration", "interval", "sampled", "memo"}
