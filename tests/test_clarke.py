"""Bounds on the Clarke Jacobian per vertex pair (clarke) and the split search built on them.

Soundness against brute force over every activation pattern whose closed region meets the box
(tiny nets, every norm pair, depths 1–3), CROWN pre-activation bounds against sampled points,
exactness where no neuron is unstable, and split decisions against the brute-force value."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from privcore.lipschitz.bounds import box_around
from privcore.lipschitz.clarke import clarke_bounds, single_threaded
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms, operator_norm
from privcore.lipschitz.splitting import split_decide, split_value
from tests._reference import brute_force_lipschitz, pattern_region_feasible

NORMS = (("linf", "l1"), ("l1", "l1"), ("linf", "linf"), ("l1", "linf"))


def random_net(rng: np.random.Generator, dims: list[int]) -> ReluNetwork:
    ws = [rng.standard_normal((dims[i + 1], dims[i])) / math.sqrt(dims[i]) for i in range(len(dims) - 1)]
    bs = [0.3 * rng.standard_normal(dims[i + 1]) for i in range(len(dims) - 1)]
    return ReluNetwork.from_arrays(ws, bs)


def realised_jacobians(net: ReluNetwork, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Jacobians of every pattern whose closed region meets the box (brute force, LP each)."""
    jacs = []
    for bits in itertools.product((0.0, 1.0), repeat=net.n_hidden):
        layers = net.split_pattern(np.array(bits))
        if pattern_region_feasible(net, lo, hi, layers):
            jacs.append(net.jacobians(np.zeros((1, net.in_dim)), layers)[0])
    return np.stack(jacs)


def vertices(net: ReluNetwork, input_norm: str, output_norm: str) -> tuple[np.ndarray, np.ndarray]:
    """The vertex pairs in the order of the bounds' pair ids."""
    return Norms(input=input_norm, output=output_norm).dual_vertices(net.in_dim, net.out_dim)


@pytest.mark.parametrize(
    "seed", [s if s not in (4, 5) else pytest.param(s, marks=pytest.mark.slow) for s in range(8)]
)
def test_pair_bounds_cover_every_realised_pattern(seed: int) -> None:
    """Per pair (c, s) the bound is ≥ cᵀ J_D s for every pattern D realised in the box, so their max
    is ≥ the brute-force L; pre-activation bounds contain sampled pre-activations."""
    rng = np.random.default_rng(seed)
    depth = 1 + seed % 3
    hidden = [int(w) for w in rng.integers(2, 5 if depth < 3 else 4, size=depth)]  # ≤ 9 neurons at depth 3
    dims = [int(rng.integers(2, 5)), *hidden, int(rng.integers(1, 4))]
    net = random_net(rng, dims)
    center = rng.standard_normal(dims[0])
    radius = float(rng.choice([0.1, 0.5, 1.5]))
    lo, hi = box_around(center, radius)
    jacs = realised_jacobians(net, lo, hi)
    pts = lo + (hi - lo) * rng.random((2000, dims[0]))
    pre = net.preactivations(pts)
    for input_norm, output_norm in NORMS:
        cb = clarke_bounds(net, Norms(input=input_norm, output=output_norm), device="cpu")
        box = (torch.tensor(lo[None]), torch.tensor(hi[None]))
        lows, ups = cb.preactivation_bounds(*box)
        for z, low, up in zip(pre, lows, ups, strict=True):
            assert np.all(z >= low.numpy()[0]) and np.all(z <= up.numpy()[0])
        pairs = torch.arange(cb.n_pairs)
        S, C = vertices(net, input_norm, output_norm)
        n_s = S.shape[0]
        ids = np.arange(cb.n_pairs)
        for threshold in (-math.inf, math.inf):  # the linear bound where it applies; the interval bound alone
            bound = cb.pair_bounds(lows, ups, torch.zeros_like(pairs), pairs, threshold).numpy()
            values = np.einsum("pm,jmd,pd->pj", C[ids // n_s], jacs, S[ids % n_s])
            assert np.all(values.max(axis=1) <= bound + 1e-12), (dims, input_norm, output_norm)
        truth = brute_force_lipschitz(net, center, radius, input_norm=input_norm, output_norm=output_norm)
        assert bound.max() >= truth - 1e-12
        # a half of the box, its bounds intersected with the whole box's (as the split search does)
        child_hi = hi.copy()
        child_hi[0] = (lo[0] + hi[0]) / 2.0
        c_lows, c_ups = cb.preactivation_bounds(torch.tensor(lo[None]), torch.tensor(child_hi[None]),
                                                ([x for x in lows], [x for x in ups]))
        child_jacs = realised_jacobians(net, lo, child_hi)
        child = cb.pair_bounds(c_lows, c_ups, torch.zeros_like(pairs), pairs).numpy()
        child_values = np.einsum("pm,jmd,pd->pj", C[ids // n_s], child_jacs, S[ids % n_s])
        assert np.all(child_values.max(axis=1) <= child + 1e-12)


@pytest.mark.parametrize("input_norm,output_norm", NORMS)
def test_exact_where_every_neuron_is_stable(input_norm: str, output_norm: str) -> None:
    """With no unstable neuron the bound is the constant Jacobian's norm (up to the 1e-9 margin)."""
    rng = np.random.default_rng(7)
    net = random_net(rng, [3, 5, 5, 2])
    center = rng.standard_normal(3)
    lo, hi = box_around(center, 1e-6)
    cb = clarke_bounds(net, Norms(input=input_norm, output=output_norm), device="cpu")
    lows, ups = cb.preactivation_bounds(torch.tensor(lo[None]), torch.tensor(hi[None]))
    assert all(bool(((lw > 0) | (up < 0)).all()) for lw, up in zip(lows, ups, strict=True))
    pairs = torch.arange(cb.n_pairs)
    bound = float(cb.pair_bounds(lows, ups, torch.zeros_like(pairs), pairs).max())
    jac = net.jacobians(center[None])[0]
    value = float(operator_norm(jac, input_norm=input_norm, output_norm=output_norm))
    assert value <= bound <= value + 1e-6


def _depth3_case(seed: int) -> tuple[ReluNetwork, np.ndarray, float, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(300 + seed)
    net = random_net(rng, [3, 4, 4, 4, 2])
    center = rng.standard_normal(3)
    radius = float(rng.choice([0.4, 1.2]))
    return net, center, radius, *box_around(center, radius)


@pytest.mark.parametrize("seed", [pytest.param(0, marks=pytest.mark.slow), 1, 2, 3])
def test_split_decisions_match_brute_force(seed: int) -> None:
    """split_decide on both sides of the brute-force L (depth 3, ℓ∞→ℓ∞ and ℓ∞→ℓ1): a pass is ≤ τ,
    a fail a verified point of the box above τ."""
    net, center, radius, lo, hi = _depth3_case(seed)
    for output_norm in ("linf", "l1"):
        truth = brute_force_lipschitz(net, center, radius, output_norm=output_norm)
        for tau in (truth * (1 - 1e-6), truth * (1 + 1e-6)):
            res = split_decide(net, center, radius, tau, norms=Norms(output=output_norm), max_seconds=60.0,
                               device="cpu")
            assert res is not None and res.passed == (truth <= tau)
            if res.passed:
                assert res.upper <= tau
            else:
                assert np.all(res.point >= lo) and np.all(res.point <= hi) and res.lower > tau


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_split_value_brackets_the_brute_force_constant(seed: int) -> None:
    """split_value maximising: complete means lower ≤ L ≤ upper ≤ lower·(1 + rtol) with a verified
    witness in the box; a search stopped early still brackets L (upper certified, lower verified)."""
    net, center, radius, lo, hi = _depth3_case(seed)
    for output_norm in ("linf", "l1"):
        truth = brute_force_lipschitz(net, center, radius, output_norm=output_norm)
        res = split_value(net, center, radius, norms=Norms(output=output_norm), rtol=1e-6, max_seconds=60.0,
                          device="cpu")
        assert res is not None and res.complete
        assert res.lower <= truth <= res.upper <= res.lower * (1 + 1e-6) + res.slack
        assert np.all(res.point >= lo) and np.all(res.point <= hi)
        short = split_value(net, center, radius, norms=Norms(output=output_norm), max_boxes=3, device="cpu")
        assert short is not None and short.lower <= truth <= short.upper
        assert short.complete == (short.upper <= short.lower * (1 + 1e-6) + short.slack)


def _all_pattern_max(net: ReluNetwork, output_norm: str) -> float:
    """max ‖J_D‖ over every 0/1 pattern, realised or not."""
    bits = itertools.product((0.0, 1.0), repeat=net.n_hidden)
    layers = [net.split_pattern(np.array(b)) for b in bits]
    jacs = np.stack([net.jacobians(np.zeros((1, net.in_dim)), p)[0] for p in layers])
    return float(np.max(operator_norm(jacs, input_norm="linf", output_norm=output_norm)))


@pytest.mark.parametrize("seed", [2, 4, 13])  # L / all-pattern max: 0.74, 0.59, 0.54
def test_split_value_exact_where_unrealised_patterns_dominate(seed: int) -> None:
    """Where the largest-norm patterns are not realised in the ball (L well below the all-pattern
    maximum), the neuron splits and their region LPs must exclude them: the bracket closes on the
    brute-force L, far below what any bound blind to realisability could prove."""
    net, center, radius, *_ = _depth3_case(seed)
    truth = brute_force_lipschitz(net, center, radius, output_norm="l1")
    assert 0.0 < truth <= 0.8 * _all_pattern_max(net, "l1")
    res = split_value(net, center, radius, rtol=1e-6, max_seconds=60.0, device="cpu")
    assert res is not None and res.complete
    assert res.lower <= truth <= res.upper <= res.lower * (1 + 1e-6) + res.slack


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ascend_witness_is_a_lower_bound_and_climbs(seed: int) -> None:
    """The pattern hill climb returns a float64-verified norm at a point of the box: never above the
    brute-force L, never below its start's."""
    from privcore.lipschitz.bounds import jacobian_norms
    from privcore.lipschitz.witnesses import ascend_witness

    net, center, radius, lo, hi = _depth3_case(seed)
    for output_norm in ("linf", "l1"):
        truth = brute_force_lipschitz(net, center, radius, output_norm=output_norm)
        start = np.random.default_rng(seed).uniform(lo, hi, size=(2, 3))
        value, point = ascend_witness(net, lo, hi, start, Norms(output=output_norm))
        first, ok = jacobian_norms(net, start, Norms(output=output_norm))
        assert value <= truth
        assert value >= float(np.max(np.where(ok, first, -np.inf))) * (1 - 1e-9)
        assert np.all(point >= lo) and np.all(point <= hi)
        again, good = jacobian_norms(net, point[None], Norms(output=output_norm))
        assert good[0] and value <= again[0]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_nearest_region_point_keeps_the_witness_and_reaches_the_region_distance(seed: int) -> None:
    """A witness moved towards the centre stays strictly inside its own region (same pattern, same
    float64 norm), is never farther than the witness, never nearer than the region's exact ℓ∞
    distance (scipy's LP on the reference rows), and usually within 1e-3 of it."""
    from scipy.optimize import linprog

    from privcore.lipschitz.bounds import jacobian_norms
    from privcore.lipschitz.witnesses import nearest_region_point
    from tests._reference import _region_rows

    net, center, _, lo, hi = _depth3_case(seed)
    norms = Norms()
    pts = np.random.default_rng(seed).uniform(lo, hi, size=(40, 3))
    vals, ok = jacobian_norms(net, pts, norms)
    close = checked = 0
    for p, v in zip(pts[ok], vals[ok], strict=True):
        dist, value, q = nearest_region_point(net, center, p, norms)
        pattern = [z[0] > 0 for z in net.preactivations(p[None])]
        again, good = jacobian_norms(net, q[None], norms)
        signs = [a[0] > 0 for a in net.preactivations(q[None])]
        assert good[0] and all(np.array_equal(a, b) for a, b in zip(signs, pattern, strict=True))
        assert value == pytest.approx(v, rel=1e-9) and value <= again[0]
        assert dist == np.max(np.abs(q - center)) <= np.max(np.abs(p - center))
        G, h = _region_rows(net, [b.astype(float) for b in pattern])
        d = center.size  # min ρ s.t. G x ≤ h, |x − c| ≤ ρ
        ones = np.ones((d, 1))
        A = np.block([[G, np.zeros((G.shape[0], 1))], [np.eye(d), -ones], [-np.eye(d), -ones]])
        ref = linprog(np.r_[np.zeros(d), 1.0], A_ub=A, b_ub=np.r_[h, center, -center],
                      bounds=[(None, None)] * d + [(0, None)], method="highs")
        assert ref.status == 0 and dist >= ref.fun - 1e-7
        close += dist <= ref.fun + 1e-3 * (1.0 + np.max(np.abs(p - center)))
        checked += 1
    assert checked >= 20 and close >= 0.9 * checked


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_descend_violation_moves_nearer_but_never_past_the_nearest_violation(seed: int) -> None:
    """From witnesses above τ, descend_violation returns witnesses above τ by the float64 rule
    (strictly inside a region, the norm re-evaluated there), never farther than where they
    started, never nearer than the exact distance to the nearest region with ‖J_D‖ > τ (brute force:
    scipy's LP on every such pattern's region), and on some witnesses strictly nearer."""
    from scipy.optimize import linprog

    from privcore.lipschitz.bounds import jacobian_norms
    from privcore.lipschitz.codes import to_bits
    from privcore.lipschitz.witnesses import descend_violation, nearest_region_point
    from tests._reference import _region_rows

    net, center, *_ = _depth3_case(seed)
    norms = Norms()
    bits = to_bits(np.arange(1 << net.n_hidden, dtype=np.int64), net.n_hidden)
    every = norms.of(net.jacobians(np.zeros((bits.shape[0], net.in_dim)), net.split_pattern(bits)))
    tau = float(np.quantile(every, 0.9))
    d = center.size
    ones = np.ones((d, 1))
    nearest = np.inf  # min over patterns above τ of the ℓ∞ distance from the centre to the region
    for b in bits[every > tau]:
        G, h = _region_rows(net, np.split(b, np.cumsum(net.hidden_widths)[:-1]))
        A = np.block([[G, np.zeros((G.shape[0], 1))], [np.eye(d), -ones], [-np.eye(d), -ones]])
        ref = linprog(np.r_[np.zeros(d), 1.0], A_ub=A, b_ub=np.r_[h, center, -center],
                      bounds=[(None, None)] * d + [(0, None)], method="highs")
        if ref.status == 0:
            nearest = min(nearest, ref.fun)
    pts = np.random.default_rng(seed).uniform(center - 3.0, center + 3.0, size=(600, d))
    vals, ok = jacobian_norms(net, pts, norms)
    moved = checked = 0
    for p in pts[ok & (vals > tau)][:15]:
        start = nearest_region_point(net, center, p, norms)
        dist, value, q = descend_violation(net, center, start, tau, norms)
        again, good = jacobian_norms(net, q[None], norms)
        assert good[0] and tau < value <= again[0]
        assert dist == np.max(np.abs(q - center)) <= start[0]
        assert dist >= nearest - 1e-7
        moved += dist < start[0] * (1.0 - 1e-6)
        checked += 1
    assert checked >= 10 and moved >= 1


def test_affine_range_contains_every_feasible_point() -> None:
    """affine_range bounds P x + p0 over the polytope in the box: every grid point of the polytope lies
    inside the bounds, and they are scipy's LP optima up to the padding (tight)."""
    from scipy.optimize import linprog

    from privcore.lipschitz.regions import affine_range

    rng = np.random.default_rng(11)
    lo, hi = -np.ones(2), np.ones(2)
    grid = np.stack(np.meshgrid(*[np.linspace(-1, 1, 201)] * 2), axis=-1).reshape(-1, 2)
    checked = 0
    for _ in range(30):
        G, h = rng.standard_normal((2, 2)), rng.standard_normal(2) * 0.5 + 0.3
        inside = grid[np.all(grid @ G.T <= h, axis=1)]
        if inside.shape[0] < 10:
            continue
        P, p0 = rng.standard_normal((3, 2)), rng.standard_normal(3)
        low, up = affine_range(G, h, lo, hi, P, p0)
        vals = inside @ P.T + p0
        assert np.all(vals >= low[None]) and np.all(vals <= up[None])
        for j in range(3):
            best = [linprog(sign * P[j], A_ub=G, b_ub=h, bounds=list(zip(lo, hi, strict=True))).fun
                    for sign in (1.0, -1.0)]
            assert abs(low[j] - (best[0] + p0[j])) <= 1e-5 and abs(up[j] - (p0[j] - best[1])) <= 1e-5
        checked += 1
    assert checked >= 10


def test_polytope_in_box_against_sampling() -> None:
    """polytope_in_box: known empty and touching cases, and on random polytopes its answer agrees with
    a dense grid (a proven-empty polytope has no grid point; a returned point is in the box and the
    polytope, up to 1e-9)."""
    from privcore.lipschitz.regions import polytope_in_box

    lo, hi = -np.ones(2), np.ones(2)
    empty = polytope_in_box(np.array([[-1.0, 0.0], [1.0, 0.0]]), np.array([-0.5, 0.4]), lo, hi)
    assert empty == (False, None)
    assert not polytope_in_box(np.array([[-1.0, -1.0]]), np.array([-2.001]), lo, hi)[0]
    meets, point = polytope_in_box(np.array([[-1.0, -1.0]]), np.array([-2.0]), lo, hi)  # one corner
    assert meets and np.allclose(point, [1.0, 1.0])
    rng = np.random.default_rng(7)
    grid = np.stack(np.meshgrid(*[np.linspace(-1, 1, 81)] * 2), axis=-1).reshape(-1, 2)
    outcomes = set()
    for _ in range(60):
        G, h = rng.standard_normal((3, 2)), rng.standard_normal(3) * 0.8
        meets, point = polytope_in_box(G, h, lo, hi)
        inside = np.all(grid @ G.T <= h, axis=1)
        outcomes.add(meets)
        if not meets:
            assert not inside.any()
        else:
            assert point is not None and np.all(point >= lo) and np.all(point <= hi)
            assert np.all(G @ point <= h + 1e-9 * (1 + np.abs(h)))
    assert outcomes == {True, False}


def test_single_threaded_restores_torch_threads() -> None:
    before = torch.get_num_threads()
    with single_threaded(torch.device("cpu")):
        assert torch.get_num_threads() == 1
        with single_threaded(torch.device("cpu")):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_too_many_pairs_is_refused() -> None:
    net = random_net(np.random.default_rng(0), [20, 4, 20])
    assert clarke_bounds(net, Norms(), device="cpu") is None
    assert split_decide(net, np.zeros(20), 0.1, 1.0) is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu() -> None:
    rng = np.random.default_rng(3)
    net = random_net(rng, [4, 6, 6, 3])
    lo, hi = box_around(rng.standard_normal(4), 0.7)
    out = []
    for dev in ("cpu", "cuda"):
        cb = clarke_bounds(net, Norms(), device=dev)
        box = (torch.tensor(lo[None], device=cb.device), torch.tensor(hi[None], device=cb.device))
        lows, ups = cb.preactivation_bounds(*box)
        pairs = torch.arange(cb.n_pairs, device=cb.device)
        out.append(cb.pair_bounds(lows, ups, torch.zeros_like(pairs), pairs).cpu().numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_pair_interval_bound_is_monotone_under_inclusion(seed: int) -> None:
    """The lp/interval certifiers' interval term never increases from a ball to a ball inside it —
    including sub-balls that share a face with it (where rounding used to flip a neuron) — and is ≥ L."""
    from privcore.lipschitz.pair_interval import pair_interval_bound

    rng = np.random.default_rng(500 + seed)
    net = random_net(rng, [3, 5, 5, 2] if seed % 2 else [4, 5, 5, 5, 3])
    for input_norm, output_norm in NORMS:
        kw = dict(input_norm=input_norm, output_norm=output_norm)
        center = rng.standard_normal(net.in_dim)
        radius = float(rng.uniform(0.2, 2.0))
        outer = pair_interval_bound(net, center, radius, **kw)
        lo, hi = box_around(center, radius)
        for _ in range(8):
            inner_r = radius * float(rng.uniform(0.05, 1.0))
            face = rng.choice([-1.0, 0.0, 1.0], size=net.in_dim)  # flush against a face, or anywhere
            free = rng.uniform(-1, 1, net.in_dim)
            shift = np.where(face != 0, face, free) * (radius - inner_r)
            inner_c = center + shift
            if not (np.all(inner_c - inner_r >= lo) and np.all(inner_c + inner_r <= hi)):
                continue
            assert pair_interval_bound(net, inner_c, inner_r, **kw) <= outer
        if net.n_hidden <= 14:
            assert outer >= brute_force_lipschitz(net, center, radius, **kw) - 1e-12


def test_pair_interval_bound_monotone_where_rounding_flipped_a_neuron() -> None:
    """A review's counterexample: with midpoint-radius propagation the ball inside flipped a neuron to
    unstable and its bound jumped from 1 to 2; endpoint arithmetic keeps it at 1."""
    from privcore.lipschitz.pair_interval import pair_interval_bound

    net = ReluNetwork.from_arrays(
        [np.array([[1.0, 0], [1, 0], [0, 1], [0, 1]]), np.array([[-1.0, 1, 1, 0], [0, 0, -1, 1]])],
        [np.array([1.4065751235826989, 10, 0, 10]), np.zeros(2)])
    outer = pair_interval_bound(net, np.array([-0.5172250370120439, 0.0]), 0.8893500789443546,
                                input_norm="linf", output_norm="l1")
    inner = pair_interval_bound(net, np.array([-1.1799427594596046, 0.0]), 0.2266323564967939,
                                input_norm="linf", output_norm="l1")
    assert inner <= outer < 1.0 + 1e-6


def test_relaxed_certifiers_pinned_and_versioned() -> None:
    """The lp/interval certifiers' U on a fixed net, pinned: if this changes, U changed, and
    RELAXATION_VERSION (part of every lp/interval cache key) must be bumped with it."""
    from privcore.lipschitz.certifier import certificate_key
    from privcore.lipschitz.engine import RELAXATION_VERSION, relaxed_upper_bound

    net = random_net(np.random.default_rng(42), [4, 6, 6, 3])
    z = np.linspace(-0.5, 0.5, 4)
    got = (relaxed_upper_bound(net, z, 0.3, kind="interval"), relaxed_upper_bound(net, z, 0.3, kind="lp"))
    assert RELAXATION_VERSION == 2, "update the pinned values below with the new version"
    assert got == pytest.approx(PINNED, rel=1e-12), f"U changed to {got!r}: bump RELAXATION_VERSION"
    norms = Norms()
    for kind in ("lp", "interval"):
        assert certificate_key(net.digest, z, 0.3, kind=kind, norms=norms)["relaxation"] == 2
    assert "relaxation" not in certificate_key(net.digest, z, 0.3, kind="exact", norms=norms)


PINNED = (1.2066271030443403, 1.2066271030443403)
