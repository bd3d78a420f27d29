"""Activation regions as polytopes, the LPs that answer questions about them, and float64 witnesses.

A pattern D of a ReLU network fixes the sign of every hidden neuron; its region is the set of
points where the network computes with D (LipMIP, Jordan & Dimakis 2020, §3), the polytope
``G x ≤ h`` of :func:`_region_rows`. :func:`region_distance` is the ℓ∞ distance from a centre to a
region (one LP), :func:`region_nonempty` and :func:`_region_box` its emptiness and bounding box,
and :func:`_box_refutes` proves by interval constraint propagation that a region misses a box.
LP feasibility is decided with HiGHS's tolerances (1e-7); regions are closed, so a region touching
the box counts, as LipMIP's free binaries at a zero pre-activation do. A MILP incumbent or a
sampled point claims ‖J_D‖ > τ only after :func:`verified_lower_bound` re-evaluates the Jacobian in
float64 at a point strictly inside a region (the soundness rule of docs/DESIGN.md: every fail comes from
a verified point).
"""

from __future__ import annotations

import threading

import numpy as np

from privcore.errors import CertificationError
from privcore.lipschitz.bounds import box_around, jacobian_norms
from privcore.lipschitz.codes import to_bits
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms

__all__ = [
    "polytope_in_box",
    "region_distance",
    "region_nonempty",
    "strict_point_for_pattern",
    "verified_lower_bound",
]


def strict_point_for_pattern(
    net: ReluNetwork, lo: np.ndarray, hi: np.ndarray, pattern: list[np.ndarray]
) -> np.ndarray | None:
    """A point of the box where every neuron strictly has the sign of ``pattern``, if one exists
    (LP: maximise the smallest signed pre-activation margin), else None."""
    from scipy.optimize import linprog

    d = net.in_dim
    if len(net.weights) == 1:  # affine: every point is interior to the single region
        return (np.asarray(lo) + hi) / 2.0
    rows, rhs = [], []
    A = np.eye(d)
    a = np.zeros(d)
    for w, b, p in zip(net.weights[:-1], net.biases[:-1], pattern, strict=True):
        P, p0 = w @ A, w @ a + b
        s = np.where(p > 0.5, 1.0, -1.0)
        # s·(P x + p0) ≥ η  ⇔  −s·P x + η ≤ s·p0
        rows.append(np.hstack([-(s[:, None] * P), np.ones((len(s), 1))]))
        rhs.append(s * p0)
        A, a = p[:, None] * P, p * p0
    scale = 1.0 + max(float(np.abs(r).max()) for r in rhs)
    res = linprog(
        c=np.r_[np.zeros(d), -1.0],
        A_ub=np.vstack(rows),
        b_ub=np.concatenate(rhs),
        bounds=[*zip(lo, hi, strict=True), (None, scale)],
        method="highs",
    )
    if res.status != 0 or -res.fun <= 1e-9 * scale:
        return None
    return np.clip(res.x[:d], lo, hi)


def verified_lower_bound(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    candidates: list[tuple[np.ndarray, list[np.ndarray] | None]],
    norms: Norms,
) -> tuple[float, np.ndarray | None]:
    """Largest certified Jacobian norm among candidate (point, pattern) pairs of the box.

    A candidate counts only after a float64 re-evaluation at a point of the box where the network
    is affine nearby (a MILP incumbent often sits on a boundary between regions; then the LP of
    :func:`strict_point_for_pattern` moves it into the interior of its pattern's region)."""
    lo, hi = box_around(center, radius)
    best, arg = 0.0, None
    for x, pattern in candidates:
        pts = [np.clip(x, lo, hi)]
        if pattern is not None:
            strict = strict_point_for_pattern(net, lo, hi, pattern)
            if strict is not None:
                pts.append(strict)
        vals, ok = jacobian_norms(net, np.array(pts), norms)
        for v, good, p in zip(vals, ok, pts, strict=True):
            inside = bool(np.all(p >= lo) and np.all(p <= hi))
            if good and inside and v * (1 - 1e-12) > best:
                best, arg = float(v * (1 - 1e-12)), p
    return best, arg


def _region_rows(
    net: ReluNetwork, pattern: np.ndarray, layers: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``G x ≤ h``: the closed region where the network has activation pattern ``pattern`` (only
    the constraints of the first ``layers`` hidden layers when given: a superset region)."""
    d = net.in_dim
    A, a = np.eye(d), np.zeros(d)
    G, h = [], []
    start = 0
    n = len(net.weights) - 1 if layers is None else layers
    for w, b in zip(net.weights[:n], net.biases[:n], strict=True):
        p = pattern[start : start + w.shape[0]]
        start += w.shape[0]
        P, p0 = w @ A, w @ a + b
        s = np.where(p > 0.5, 1.0, -1.0)
        G.append(-(s[:, None] * P))
        h.append(s * p0)
        A, a = p[:, None] * P, p * p0
    return np.vstack(G), np.concatenate(h)


_LP = threading.local()


def _highs():
    """One silent HiGHS instance per thread, reused for the many tiny LPs of a search."""
    import highspy

    h = getattr(_LP, "highs", None)
    if h is None:
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("presolve", "off")
        _LP.highs = h
    return h


def region_distance(
    net: ReluNetwork, pattern: np.ndarray, center: np.ndarray, radius: float, *, layers: int | None = None
) -> tuple[float, np.ndarray] | None:
    """``(min ‖x − center‖∞, argmin x)`` over the closed region of ``pattern`` within
    ``B(center, radius)`` (one LP), or None when the region does not meet the box. With ``layers``
    only the first hidden layers' constraints count (a lower bound for every completion)."""
    G, h = _region_rows(net, pattern, layers)
    return _distance_lp(G, h, np.asarray(center, dtype=np.float64), radius)


def _distance_lp(
    G: np.ndarray, h: np.ndarray, center: np.ndarray, radius: float
) -> tuple[float, np.ndarray] | None:
    """The LP of :func:`region_distance` for the region ``G x ≤ h`` (HiGHS simplex, no presolve:
    on these 9-variable LPs presolve costs more than it saves)."""
    import highspy

    d = center.shape[0]
    k = G.shape[0]
    # variables (x, ρ): G x ≤ h;  x − ρ ≤ z;  −x − ρ ≤ −z;  x ∈ B(z, r), 0 ≤ ρ ≤ r
    A = np.zeros((k + 2 * d, d + 1))
    A[:k, :d] = G
    A[k : k + d, :d] = np.eye(d)
    A[k + d :, :d] = -np.eye(d)
    A[k:, d] = -1.0
    rhs = np.concatenate([h, center, -center])
    lo, hi = box_around(center, radius)
    solver = _dense_lp(A, rhs, np.r_[np.zeros(d), 1.0], np.r_[lo, 0.0], np.r_[hi, radius])
    solver.run()
    status = solver.getModelStatus()
    if status == highspy.HighsModelStatus.kInfeasible:
        return None
    if status != highspy.HighsModelStatus.kOptimal:
        raise CertificationError(f"region LP ended with status {solver.modelStatusToString(status)}")
    sol = np.array(solver.getSolution().col_value)
    return min(max(float(sol[d]), 0.0), radius), np.clip(sol[:d], lo, hi)


def _region_rows_batch(net: ReluNetwork, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_region_rows` for many patterns at once: ``G`` (N, n_hidden, d) and ``h`` (N, n_hidden)."""
    return region_rows(net, to_bits(codes, net.n_hidden))


def region_rows(
    net: ReluNetwork, bits: np.ndarray, layers: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``G x ≤ h`` (shapes (N, k, d) and (N, k)) of the closed regions of the patterns ``bits`` (N,
    n_hidden), 0/1: row ``s·(P x + p₀) ≥ 0`` per hidden neuron with ``P x + p₀`` its pre-activation under
    the pattern and ``s = ±1`` its side. With ``layers``, only the first ``layers`` hidden layers' rows
    (a superset of the region)."""
    n = bits.shape[0]
    A = np.broadcast_to(np.eye(net.in_dim), (n, net.in_dim, net.in_dim))
    a = np.zeros((n, net.in_dim))
    G, h = [], []
    start = 0
    count = len(net.weights) - 1 if layers is None else layers
    for w, b in zip(net.weights[:count], net.biases[:count], strict=True):
        P = np.matmul(w, A)
        p0 = a @ w.T + b
        p = bits[:, start : start + w.shape[0]]
        start += w.shape[0]
        s = np.where(p > 0.5, 1.0, -1.0)
        G.append(-(s[:, :, None] * P))
        h.append(s * p0)
        A, a = p[:, :, None] * P, p * p0
    return np.concatenate(G, axis=1), np.concatenate(h, axis=1)


def _row_distance_bounds(G: np.ndarray, h: np.ndarray, center: np.ndarray) -> np.ndarray:
    """Per pattern, a lower bound on the ℓ∞ distance from ``center`` to ``{x : G x ≤ h}``: on
    ``B(center, ρ)`` the smallest value of row ``j`` is ``G_j·center − ρ‖G_j‖₁``, so the region
    needs ``ρ ≥ (G_j·center − h_j)/‖G_j‖₁`` for every row (with a 1e-9 relative allowance for
    rounding); the largest such value bounds the distance."""
    viol = np.einsum("nkd,d->nk", G, center) - h
    viol = viol - 1e-9 * (1.0 + np.abs(viol))
    norm1 = np.abs(G).sum(axis=2)
    need = np.where(viol <= 0, 0.0, np.where(norm1 > 0, viol / np.where(norm1 > 0, norm1, 1.0), np.inf))
    return need.max(axis=1, initial=0.0)


#: rounds of interval constraint propagation in :func:`_box_refutes`
_PROPAGATION_ROUNDS = 4
#: relative slack by which :func:`_box_refutes` relaxes rows and box before refuting (≥ the LP's
#: 1e-7 feasibility tolerance, so nothing the LP would call feasible is refuted)
_REFUTE_SLACK = 1e-7


def _box_refutes(
    G: np.ndarray,
    h: np.ndarray,
    center: np.ndarray,
    radius: float,
    box_lower: np.ndarray | None = None,
    box_upper: np.ndarray | None = None,
) -> np.ndarray:
    """Mask of the patterns whose region ``{x : G x ≤ h}`` provably misses ``B(center, radius)``.

    Interval constraint propagation (bound tightening as in MIP presolve), started from the ball
    intersected with the region's bounding box when known: each row ``Σ_k G_jk x_k ≤ h_j`` bounds
    every ``x_k`` given the others' box, the box shrinks, and an empty box (or a row whose minimum
    over the box exceeds ``h_j``) refutes the region. Every step only removes points that violate
    a row, so a refuted region truly misses the ball; it runs on the rows relaxed by
    ``_REFUTE_SLACK·(1 + |h_j| + Σ_k |G_jk|·(|center_k| + radius))`` and the ball widened likewise,
    far above float64 rounding, so a region the distance LP would accept within its tolerances is
    never refuted. Vectorised over patterns; an LP settles the rest."""
    n = G.shape[0]
    if n == 0:
        return np.zeros(0, dtype=bool)
    scale = np.abs(G) @ (np.abs(center) + radius)
    hh = h + _REFUTE_SLACK * (1.0 + np.abs(h) + scale)
    widen = _REFUTE_SLACK * (1.0 + np.abs(center) + radius)
    lo = np.broadcast_to(center - radius - widen, (n, center.shape[0])).copy()
    hi = np.broadcast_to(center + radius + widen, (n, center.shape[0])).copy()
    if box_lower is not None and box_upper is not None:
        lo, hi = np.maximum(lo, box_lower), np.minimum(hi, box_upper)
    gp, gn = np.maximum(G, 0.0), np.minimum(G, 0.0)
    pos, neg = G > 0, G < 0
    safe = np.where(G != 0, G, 1.0)
    dead = np.any(lo > hi, axis=1)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for _ in range(_PROPAGATION_ROUNDS):
            term = gp * lo[:, None, :] + gn * hi[:, None, :]  # min over the box of G_jk x_k
            rowmin = term.sum(axis=2)
            dead |= np.any(rowmin > hh, axis=1)
            room = (hh - rowmin)[:, :, None] + term  # what row j leaves for G_jk x_k
            bound = room / safe
            hi = np.minimum(hi, np.where(pos, bound, np.inf).min(axis=1))
            lo = np.maximum(lo, np.where(neg, bound, -np.inf).max(axis=1))
            dead |= np.any(lo > hi, axis=1)
    return dead


def _box_distance_bounds(box_lower: np.ndarray, box_upper: np.ndarray, center: np.ndarray) -> np.ndarray:
    """ℓ∞ distance from ``center`` to each box: a lower bound on the distance to the region inside."""
    gap = np.maximum(np.maximum(box_lower - center, center - box_upper), 0.0)
    return gap.max(axis=1, initial=0.0)


def region_nonempty(net: ReluNetwork, pattern: np.ndarray, *, layers: int | None = None) -> bool:
    """Does the closed region of ``pattern`` (only its first ``layers`` hidden layers when given)
    contain any point of ℝ^d? One feasibility LP on ``G x ≤ h + 1e-9·(1 + |h|)``: the slack only
    keeps more patterns (a region declared empty is empty even after relaxing it, so it meets no
    box and no LP of :func:`region_distance` would count it either)."""
    return rows_nonempty(*_region_rows(net, pattern, layers))


def rows_nonempty(G: np.ndarray, h: np.ndarray) -> bool:
    """:func:`region_nonempty` for the rows ``G x ≤ h`` of a region (one feasibility LP)."""
    import highspy

    solver = _relaxed_region_lp(G, h)
    solver.run()
    # only a proven infeasibility drops a pattern (an unclear status keeps it)
    return solver.getModelStatus() != highspy.HighsModelStatus.kInfeasible


def _relaxed_region_lp(G: np.ndarray, h: np.ndarray):
    """HiGHS holding ``G x ≤ h + 1e-9·(1 + |h|)`` with x free (objective set by the caller)."""
    import highspy

    d = G.shape[1]
    inf = highspy.kHighsInf
    return _dense_lp(G, h + 1e-9 * (1.0 + np.abs(h)), np.zeros(d), np.full(d, -inf), np.full(d, inf))


def _dense_lp(A: np.ndarray, row_upper: np.ndarray, cost: np.ndarray, col_lower: np.ndarray,
              col_upper: np.ndarray):
    """The thread's HiGHS holding ``min costᵀx : A x ≤ row_upper, col_lower ≤ x ≤ col_upper`` (dense
    rows), ready to run."""
    import highspy

    n_rows, n_cols = A.shape
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n_cols, n_rows
    lp.col_cost_ = np.asarray(cost, dtype=np.float64)
    lp.col_lower_ = np.asarray(col_lower, dtype=np.float64)
    lp.col_upper_ = np.asarray(col_upper, dtype=np.float64)
    lp.row_lower_ = np.full(n_rows, -highspy.kHighsInf)
    lp.row_upper_ = np.asarray(row_upper, dtype=np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.arange(0, A.size + 1, n_cols, dtype=np.int32)
    lp.a_matrix_.index_ = np.tile(np.arange(n_cols, dtype=np.int32), n_rows)
    lp.a_matrix_.value_ = np.ascontiguousarray(A, dtype=np.float64).ravel()
    solver = _highs()
    solver.clearModel()
    solver.passModel(lp)
    return solver


def polytope_in_box(
    G: np.ndarray, h: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[bool, np.ndarray | None]:
    """Does ``{x ∈ [lo, hi] : G x ≤ h}`` meet the box? ``(False, None)`` only when HiGHS proves the
    rows relaxed by ``1e-9·(1 + |h|)`` infeasible on the box (then the closed set is empty); else
    ``(True, x)`` with ``x`` the box point maximising the smallest row margin normalised by the row's
    ℓ1 norm (None when the LP was not solved: nothing is proven)."""
    import highspy

    d = G.shape[1]
    if G.shape[0] == 0:
        return True, (np.asarray(lo) + hi) / 2.0
    norms = np.abs(G).sum(axis=1) + 1e-300
    A = np.hstack([G, norms[:, None]])  # G x + η‖G_i‖₁ ≤ h, 0 ≤ η ≤ 1: maximise η
    relaxed = h + 1e-9 * (1.0 + np.abs(h))
    solver = _dense_lp(A, relaxed, np.r_[np.zeros(d), -1.0], np.r_[lo, 0.0], np.r_[hi, 1.0])
    solver.run()
    status = solver.getModelStatus()
    if status == highspy.HighsModelStatus.kInfeasible:
        return False, None
    if status != highspy.HighsModelStatus.kOptimal:
        return True, None
    x = np.asarray(solver.getSolution().col_value[:d], dtype=np.float64)
    return True, np.clip(x, lo, hi)


def affine_range(G: np.ndarray, h: np.ndarray, lo: np.ndarray, hi: np.ndarray, P: np.ndarray, p0: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray] | None:
    """Bounds on each ``P_j x + p0_j`` over ``{x ∈ [lo, hi] : G x ≤ h}`` (rows relaxed by 1e-9): two LPs
    per row, warm-started, each optimum padded outwards by ``_BOX_PAD·(1 + |v|)``; ±inf where unbounded
    or unsolved. None when HiGHS proves the relaxed set empty (then so is the set)."""
    import highspy

    d = G.shape[1]
    solver = _dense_lp(G, h + 1e-9 * (1.0 + np.abs(h)), np.zeros(d), lo, hi)
    low, up = np.full(P.shape[0], -np.inf), np.full(P.shape[0], np.inf)
    idx = np.arange(d, dtype=np.int32)
    for j in range(P.shape[0]):
        for sign in (1.0, -1.0):  # HiGHS minimises: P_j x, then −P_j x (warm-started from the last basis)
            solver.changeColsCost(d, idx, sign * P[j])
            solver.run()
            status = solver.getModelStatus()
            if status == highspy.HighsModelStatus.kInfeasible:
                return None
            if status != highspy.HighsModelStatus.kOptimal:
                continue
            v = sign * float(solver.getInfo().objective_function_value) + p0[j]
            pad = _BOX_PAD * (1.0 + abs(v))
            if sign > 0:
                low[j] = v - pad
            else:
                up[j] = v + pad
    return low, up


#: outward padding of a region's bounding box (relative), above the LPs' 1e-7 tolerances
_BOX_PAD = 1e-6


def _region_box(G: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """A box containing the region ``{x : G x ≤ h}`` (2d LPs min/max x_k on the relaxed region,
    :func:`affine_range` with the identity, padded outwards by ``_BOX_PAD``; ±inf where unbounded or
    unclear), or None when the relaxed region is empty (then so is the region)."""
    d = G.shape[1]
    return affine_range(G, h, np.full(d, -np.inf), np.full(d, np.inf), np.eye(d), np.zeros(d))
