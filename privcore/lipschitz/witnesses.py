"""Searches for float64-verified witnesses ‖J(x)‖ > τ over activation regions (heuristics).

None of these is needed for soundness and none can make an answer wrong: each returns only points
whose Jacobian norm was re-evaluated in float64 strictly inside their region and deflated by 1e-12
(the witness rule of :func:`~privcore.lipschitz.regions.verified_lower_bound`), so a value it
returns is a certified lower bound on L over every ball containing the point. They make fails
cheaper and move the evidence for PTR's bisection (:func:`~privcore.mechanisms.phi.compute_phi`)
towards the boundary it looks for:

* :func:`ascend_witness` — a larger norm: hill climbing over realised patterns in a box;
* :func:`nearest_region_point` — the same norm closer to a centre: the witness's region's point
  nearest it (one LP);
* :func:`descend_violation` — a norm still above τ closer to a centre: from region to adjacent
  region (single-neuron flips whose ‖J_D‖ > τ), while one is nearer, so that "L > τ from radius ρ
  on" holds for a smaller ρ.
"""

from __future__ import annotations

import numpy as np

from privcore.errors import CertificationError
from privcore.lipschitz.bounds import box_around, jacobian_norms
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.regions import _distance_lp, _region_rows, polytope_in_box

__all__ = ["ascend_witness", "descend_violation", "nearest_region_point"]


def _pattern_at(net: ReluNetwork, x: np.ndarray) -> np.ndarray:
    """The 0/1 activation pattern at ``x`` (1 where the pre-activation is > 0)."""
    return np.concatenate([(z[0] > 0) for z in net.preactivations(x[None])]).astype(np.float64)


def _single_flips(net: ReluNetwork, pattern: np.ndarray, norms: Norms) -> tuple[np.ndarray, np.ndarray]:
    """Every pattern one neuron away from ``pattern`` (row k flips neuron k) and its ‖J_D‖."""
    n = net.n_hidden
    cand = np.where(np.eye(n, dtype=bool), 1.0 - pattern, pattern)
    jac = net.jacobians(np.zeros((n, net.in_dim)), net.split_pattern(cand))
    return cand, np.atleast_1d(norms.of(jac))


def ascend_witness(
    net: ReluNetwork,
    lo: np.ndarray,
    hi: np.ndarray,
    starts: np.ndarray,
    norms: Norms,
    *,
    max_steps: int = 64,
    tries: int = 6,
) -> tuple[float, np.ndarray | None]:
    """A lower bound on L over the box ``[lo, hi]`` by hill climbing over realised patterns.

    From each start's pattern, the single-neuron flips are ranked by ``‖J_D‖`` (one batch of
    Jacobians); the best ``tries`` that improve are tested in order, each by the LP of
    :func:`polytope_in_box` on its whole region, and the climb moves to the first whose LP point is
    strictly inside its region with a larger float64 Jacobian norm. Returns the best verified norm
    (deflated by 1e-12, as every witness) and its point, or ``(-inf, None)``. A heuristic for
    witnesses: every value it returns is verified, none is needed for soundness."""
    best, arg = -np.inf, None
    for x in np.atleast_2d(starts):
        vals, ok = jacobian_norms(net, x[None], norms)
        if not ok[0]:
            continue
        here, point = float(vals[0]), x
        pattern = _pattern_at(net, x)
        for _ in range(max_steps):
            cand, flipped = _single_flips(net, pattern, norms)
            moved = False
            for k in np.argsort(-flipped)[:tries]:
                if flipped[k] <= here:
                    break
                meets, p = polytope_in_box(*_region_rows(net, cand[k]), lo, hi)
                if not meets or p is None:
                    continue
                v, good = jacobian_norms(net, p[None], norms)
                if good[0] and v[0] > here:
                    here, point, pattern, moved = float(v[0]), p, cand[k], True
                    break
            if not moved:
                break
        if here * (1.0 - 1e-12) > best:
            best, arg = here * (1.0 - 1e-12), point
    return best, arg


#: how far along the segment from a witness to its region's LP optimum the verified point may sit
_PUSH_STEPS = (1.0 - 1e-9, 1.0 - 1e-6, 1.0 - 1e-3, 0.9, 0.5)


def nearest_region_point(
    net: ReluNetwork, center: np.ndarray, point: np.ndarray, norms: Norms
) -> tuple[float, float, np.ndarray] | None:
    """A verified witness as close to ``center`` as its activation region allows.

    ``point`` must be strictly inside its region (:func:`jacobian_norms`' mask); the region is a
    convex polytope on which the Jacobian is the constant ``J_D``, so every point of the segment
    from ``point`` to the region's point nearest ``center`` (one LP, :func:`region_distance`) has
    the same Jacobian. The point returned is the one nearest that optimum whose float64
    re-evaluation is strictly inside the same region, so it is a witness by the usual rule:
    ``(distance from center, norm deflated by 1e-12, point)``, with distance ≤ ``point``'s. None
    when ``point`` is not strictly inside a region. A heuristic that only moves evidence closer:
    L(f, B(center, r)) ≥ norm for every r ≥ the distance returned."""
    center = np.asarray(center, dtype=np.float64)
    point = np.asarray(point, dtype=np.float64)
    vals, ok = jacobian_norms(net, point[None], norms)
    if not ok[0]:
        return None
    pattern = _pattern_at(net, point)
    dist = float(np.max(np.abs(point - center)))
    best = (dist, float(vals[0]) * (1.0 - 1e-12), point)
    try:
        hit = _distance_lp(*_region_rows(net, pattern), center, dist)
    except CertificationError:  # an LP that ends oddly only means no better point
        return best
    if hit is None or hit[0] >= dist:
        return best
    seg = point + np.array(_PUSH_STEPS)[:, None] * (hit[1] - point)
    v, good = jacobian_norms(net, seg, norms)
    signs = np.concatenate([(z > 0) for z in net.preactivations(seg)], axis=1)
    same = np.all(signs == (pattern > 0.5), axis=1)
    for k in np.flatnonzero(good & same):
        d_k = float(np.max(np.abs(seg[k] - center)))
        if d_k < dist:
            return d_k, float(v[k]) * (1.0 - 1e-12), seg[k]
    return best


def descend_violation(
    net: ReluNetwork,
    center: np.ndarray,
    witness: tuple[float, float, np.ndarray],
    threshold: float,
    norms: Norms,
    *,
    max_lps: int = 4096,
) -> tuple[float, float, np.ndarray]:
    """A verified witness above ``threshold`` nearer ``center``: ``witness`` is ``(distance, norm,
    point)`` as :func:`nearest_region_point` returns it, with norm > threshold.

    From the witness's region, the adjacent patterns (one neuron flipped) whose ``‖J_D‖`` exceeds
    the threshold are tried in order of that norm: one LP for the flipped region's distance from
    ``center`` (:func:`~privcore.lipschitz.regions.region_distance`'s), and when it is nearer, the
    point of that region (inside the current ball) with the largest row margin
    (:func:`~privcore.lipschitz.regions.polytope_in_box`), verified in float64 and moved to its
    region's nearest point (:func:`nearest_region_point`). The first nearer verified witness above
    the threshold is taken, until no flip is nearer or ``max_lps`` LPs are spent. Local: the
    distance returned is an upper bound on the distance to the nearest violating region, no more."""
    center = np.asarray(center, dtype=np.float64)
    dist, value, point = witness
    lps = 0
    while lps < max_lps:
        cand, flipped = _single_flips(net, _pattern_at(net, point), norms)
        nearer = None
        for k in np.argsort(-flipped):
            if flipped[k] <= threshold or lps >= max_lps:
                break
            G, h = _region_rows(net, cand[k])
            lps += 1
            try:
                hit = _distance_lp(G, h, center, dist)
            except CertificationError:  # an LP that ends oddly only means no nearer point here
                continue
            if hit is None or hit[0] >= dist * (1.0 - 1e-9):
                continue
            lps += 1
            meets, x = polytope_in_box(G, h, *box_around(center, dist))
            if not meets or x is None:
                continue
            near = nearest_region_point(net, center, x, norms)
            if near is not None and near[0] < dist and near[1] > threshold:
                nearer = near
                break
        if nearer is None:
            break
        dist, value, point = nearer
    return dist, value, point
