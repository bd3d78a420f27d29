"""Exact local Lipschitz constants of small ReLU networks by activation-pattern enumeration.

The value LipMIP computes (Jordan & Dimakis 2020, Thm. 3.2; :mod:`privcore.lipschitz.reference`)
is ``L(f, B) = max { ‖J_D‖ : D an activation pattern whose closed region meets B }`` with
``J_D = W_L D_{L−1} W_{L−1} … D_1 W_1``. For the paper's obfuscators (latent 8, one or two hidden
layers of 8–10 neurons) there are few enough patterns to enumerate them all:

1. the norms ``‖J_D‖`` of every pattern are computed once per network (vectorised; a pattern
   table sorted by norm, cached in memory per model hash and norms);
2. for a box, interval bounds fix the stable neurons; patterns contradicting them cannot meet
   the box, so ``max {‖J_D‖ : D consistent with the stable neurons}`` is already a certified
   upper bound (monotone under inclusion: a smaller box has more stable neurons);
3. the consistent patterns are visited in decreasing norm, each with one LP ("does the region
   meet the box, and how close to the centre?"): the first one that does is L exactly, and a
   decision "L ≤ τ?" only needs the patterns with norm > τ.

With more hidden neurons the enumeration runs over the box's *unstable* neurons only, when
there are few of them; otherwise the callers fall back to the MILP. The answers are the MILP's
(closed regions, so a region touching the box counts, as LipMIP's free binaries at a zero
pre-activation do); LP feasibility is decided with HiGHS's tolerances (1e-7).
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from privcore.errors import CertificationError
from privcore.lipschitz.bounds import ForwardBounds, box_around, operator_norm
from privcore.lipschitz.network import ReluNetwork

__all__ = [
    "MAX_GLOBAL_NEURONS",
    "MAX_PATTERNS",
    "NearestViolation",
    "PatternResult",
    "PatternTable",
    "box_pattern_table",
    "global_pattern_table",
    "pattern_decide",
    "pattern_nearest_violation",
    "pattern_upper_bound",
    "pattern_value",
    "region_distance",
    "threshold_pattern_table",
]

#: networks with at most this many hidden neurons get a global pattern table
MAX_GLOBAL_NEURONS = 16
#: largest per-box enumeration (patterns of the unstable neurons)
MAX_PATTERNS = 1 << 14
_CHUNK = 4096


@dataclass(frozen=True, eq=False)
class PatternTable:
    """Activation patterns (bit ``j`` = hidden neuron ``j`` in layer order is on) sorted by
    decreasing Jacobian norm."""

    codes: np.ndarray
    norms: np.ndarray
    n_hidden: int
    #: the table lists every pattern with norm > floor (−inf: every pattern); a partial table only
    #: answers decisions with a threshold ≥ floor
    floor: float = -np.inf

    @property
    def rest(self) -> float:
        """A bound on the norms of the patterns the table does not list."""
        return float(self.floor) if np.isfinite(self.floor) else 0.0

    def consistent(self, must_on: np.ndarray, must_off: np.ndarray) -> np.ndarray:
        """Boolean mask of the patterns agreeing with the fixed neurons."""
        on, off = _pack(must_on), _pack(must_off)
        return ((self.codes & on) == on) & ((self.codes & off) == 0)


def _pack(mask: np.ndarray) -> np.int64:
    return np.int64(sum(1 << int(j) for j in np.flatnonzero(np.asarray(mask, dtype=bool))))


def _bits(codes: np.ndarray, n: int) -> np.ndarray:
    return ((codes[:, None] >> np.arange(n, dtype=np.int64)) & 1).astype(np.float64)


def _norms(jac: np.ndarray, input_norm: str, output_norm: str) -> np.ndarray:
    out = np.empty(jac.shape[0])
    for s in range(0, jac.shape[0], _CHUNK):
        block = jac[s : s + _CHUNK]
        out[s : s + _CHUNK] = operator_norm(block, input_norm=input_norm, output_norm=output_norm)
    return out


def _jacobians_of_codes(net: ReluNetwork, codes: np.ndarray) -> np.ndarray:
    widths = net.hidden_widths
    bits = _bits(codes, sum(widths))
    pats = np.split(bits, np.cumsum(widths)[:-1], axis=1)
    return net.jacobians(np.zeros((codes.shape[0], net.in_dim)), pats)


def _table(net: ReluNetwork, codes: np.ndarray, input_norm: str, output_norm: str) -> PatternTable:
    norms = np.empty(codes.shape[0])
    for s in range(0, codes.shape[0], _CHUNK):
        jac = _jacobians_of_codes(net, codes[s : s + _CHUNK])
        norms[s : s + _CHUNK] = _norms(jac, input_norm, output_norm)
    order = np.argsort(-norms, kind="stable")
    return PatternTable(codes=codes[order], norms=norms[order], n_hidden=net.n_hidden)


_LOCK = threading.Lock()
_GLOBAL: OrderedDict[tuple, PatternTable] = OrderedDict()


def global_pattern_table(net: ReluNetwork, *, input_norm: str, output_norm: str) -> PatternTable | None:
    """All 2^n patterns of a network with n ≤ MAX_GLOBAL_NEURONS hidden neurons (memoised per model
    hash and norms), else None. Its first norm bounds L over every box (and all of ℝ^d)."""
    if net.n_hidden > MAX_GLOBAL_NEURONS or len(net.weights) == 1:
        return None
    key = (net.digest, input_norm, output_norm)
    with _LOCK:
        hit = _GLOBAL.get(key)
        if hit is not None:
            _GLOBAL.move_to_end(key)
            return hit
    table = _table(net, np.arange(1 << net.n_hidden, dtype=np.int64), input_norm, output_norm)
    with _LOCK:
        _GLOBAL[key] = table
        while len(_GLOBAL) > 16:
            _GLOBAL.popitem(last=False)
    return table


def _dual_vertices(norm: str, k: int, *, half: bool) -> np.ndarray:
    """Vertices of the unit ball of ℓ∞ ({±1}^k, first sign fixed when ``half``) or ℓ1 (±e_j)."""
    if norm == "linf":
        from privcore.lipschitz.bounds import _sign_vectors

        signs = np.array(_sign_vectors(k))
        return signs if half else np.vstack([signs, -signs])
    eye = np.eye(k)
    return eye if half else np.vstack([eye, -eye])


def _last_layer_max(w_last: np.ndarray, M: np.ndarray, input_norm: str, output_norm: str) -> np.ndarray:
    """``max over D ∈ {0,1}^n of ‖W_last D M_f‖`` for each ``M_f`` of the stack ``M`` (N, n, d), exactly.

    ‖J‖_{p→q} = max over vertices s of the input ball and c of the dual output ball of cᵀJs, and
    cᵀ W D M s = Σ_j D_j a_j(c) b_j(s), maximised over D by keeping the positive terms. As
    max(0, a·b) = max(0, a)·max(0, b) + max(0, −a)·max(0, −b), the table over all (c, s) is two
    matrix products: A⁺B⁺ + A⁻B⁻."""
    S = _dual_vertices(input_norm, M.shape[2], half=True)  # (k_s, d); (c, s) ↦ (−c, −s) halves
    C = _dual_vertices("linf" if output_norm == "l1" else "l1", w_last.shape[0], half=False)
    A = C @ w_last  # (k_c, n)
    a_pos, a_neg = np.maximum(A, 0.0), np.maximum(-A, 0.0)
    out = np.empty(M.shape[0])
    step = max(1, (1 << 21) // max(1, A.shape[0] * S.shape[0]))
    for s0 in range(0, M.shape[0], step):
        B = M[s0 : s0 + step] @ S.T  # (c, n, k_s)
        vals = np.matmul(a_pos, np.maximum(B, 0.0)) + np.matmul(a_neg, np.maximum(-B, 0.0))
        out[s0 : s0 + step] = vals.max(axis=(1, 2))
    return out


def _completion_bound(
    net: ReluNetwork, layer: int, M: np.ndarray, input_norm: str, output_norm: str
) -> np.ndarray:
    """Upper bound on ‖J‖ over every completion of patterns fixed up to hidden layer ``layer − 1``,
    ``M`` (N, n_layer, d) being the pre-activation Jacobian of hidden layer ``layer``: the last
    free layer exactly (:func:`_last_layer_max`), earlier ones in interval arithmetic."""
    n_hidden = len(net.weights) - 1
    if layer == n_hidden - 1:
        return _last_layer_max(net.weights[-1], M, input_norm, output_norm)
    mid, rad = M, np.zeros_like(M)
    for j in range(layer, n_hidden):
        lo, hi = np.minimum(mid - rad, 0.0), np.maximum(mid + rad, 0.0)
        w = net.weights[j + 1]
        mid, rad = np.matmul(w, (lo + hi) / 2.0), np.matmul(np.abs(w), (hi - lo) / 2.0)
    absmax = np.abs(mid) + rad
    if input_norm == "linf" and output_norm == "l1":
        return operator_norm(mid, input_norm="linf", output_norm="l1") + rad.sum(axis=(1, 2))
    if input_norm == "linf":
        return absmax.sum(axis=2).max(axis=1)
    if output_norm == "l1":
        return absmax.sum(axis=1).max(axis=1)
    return absmax.max(axis=(1, 2))


_THRESHOLD: OrderedDict[tuple, PatternTable | None] = OrderedDict()
#: most patterns whose exact norm a threshold table may evaluate
MAX_THRESHOLD_WORK = 1 << 20
#: widest hidden layer a threshold table expands (2^width patterns per group)
MAX_THRESHOLD_LAYER_WIDTH = 12


def threshold_pattern_table(
    net: ReluNetwork, threshold: float, *, input_norm: str, output_norm: str
) -> PatternTable | None:
    """Every activation pattern with ``‖J_D‖ > threshold``, for networks too wide for the full table.

    Branch and bound over the hidden layers: the patterns of the first layers are expanded, and a
    group is dropped as soon as a bound on every completion (interval arithmetic; the last layer
    exactly) is ≤ threshold. Memoised per model, norms and threshold (PTR asks with one Δp for
    every image). None when more than ``MAX_THRESHOLD_WORK`` patterns would need evaluating."""
    key = (net.digest, input_norm, output_norm, float(threshold))
    with _LOCK:
        if key in _THRESHOLD:
            _THRESHOLD.move_to_end(key)
            return _THRESHOLD[key]
    table = _threshold_table(net, threshold, input_norm, output_norm)
    with _LOCK:  # a failure is remembered too: it would fail again for every box
        _THRESHOLD[key] = table
        while len(_THRESHOLD) > 64:
            _THRESHOLD.popitem(last=False)
    return table


def _threshold_table(
    net: ReluNetwork, threshold: float, input_norm: str, output_norm: str
) -> PatternTable | None:
    widths = net.hidden_widths
    if max(widths) > MAX_THRESHOLD_LAYER_WIDTH:
        return None
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    codes = np.zeros(1, dtype=np.int64)
    M = net.weights[0][None, :, :]  # pre-activation Jacobian of hidden layer 0, no pattern fixed yet
    keep = _completion_bound(net, 0, M, input_norm, output_norm) > threshold
    codes, M = codes[keep], M[keep]
    norms = np.empty(0)
    for i, width in enumerate(widths):
        bits = _bits(np.arange(1 << width, dtype=np.int64), width)
        pcodes = np.arange(1 << width, dtype=np.int64) << offsets[i]
        if codes.size * bits.shape[0] > MAX_THRESHOLD_WORK:
            return None
        last = i == len(widths) - 1
        new_codes, new_M, new_vals = [], [], []
        step = max(1, _CHUNK * 8 // bits.shape[0])
        for s0 in range(0, codes.size, step):
            Mc = M[s0 : s0 + step]
            DM = bits[None, :, :, None] * Mc[:, None, :, :]  # (c, P, n_i, d)
            nxt = np.matmul(net.weights[i + 1], DM).reshape(-1, net.weights[i + 1].shape[0], Mc.shape[2])
            cc = (codes[s0 : s0 + step, None] | pcodes[None, :]).reshape(-1)
            if last:
                vals = _norms(nxt, input_norm, output_norm)
            else:
                vals = _completion_bound(net, i + 1, nxt, input_norm, output_norm)
            sel = vals > threshold
            new_codes.append(cc[sel])
            new_vals.append(vals[sel])
            if not last:
                new_M.append(nxt[sel])
        codes = np.concatenate(new_codes) if new_codes else np.zeros(0, dtype=np.int64)
        norms = np.concatenate(new_vals) if new_vals else np.zeros(0)
        if not last:
            M = np.concatenate(new_M) if new_M else np.zeros((0, widths[i + 1], net.in_dim))
        if codes.size == 0:
            norms = np.zeros(0)
            break
    order = np.argsort(-norms, kind="stable")
    return PatternTable(codes=codes[order], norms=norms[order], n_hidden=net.n_hidden,
                        floor=float(threshold))


def _stable_masks(fwd: ForwardBounds) -> tuple[np.ndarray, np.ndarray]:
    on = np.concatenate([fwd.active(i) for i in range(len(fwd.lower))])
    off = np.concatenate([fwd.inactive(i) for i in range(len(fwd.lower))])
    return on, off


def box_pattern_table(
    net: ReluNetwork, fwd: ForwardBounds, *, input_norm: str, output_norm: str
) -> PatternTable | None:
    """The patterns consistent with the box's stable neurons, when there are at most MAX_PATTERNS."""
    on, off = _stable_masks(fwd)
    free = np.flatnonzero(~(on | off))
    if free.size > 62 or (1 << free.size) > MAX_PATTERNS:
        return None
    sub = np.arange(1 << free.size, dtype=np.int64)
    codes = np.full(sub.shape, _pack(on), dtype=np.int64)
    for k, j in enumerate(free):
        codes |= ((sub >> k) & 1) << np.int64(j)
    return _table(net, codes, input_norm, output_norm)


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
        _LP.highs = h
    return h


def region_distance(
    net: ReluNetwork, pattern: np.ndarray, center: np.ndarray, radius: float, *, layers: int | None = None
) -> tuple[float, np.ndarray] | None:
    """``(min ‖x − center‖∞, argmin x)`` over the closed region of ``pattern`` within
    ``B(center, radius)`` (one LP), or None when the region does not meet the box. With ``layers``
    only the first hidden layers' constraints count (a lower bound for every completion)."""
    import highspy

    d = net.in_dim
    G, h = _region_rows(net, pattern, layers)
    k = G.shape[0]
    # variables (x, ρ): G x ≤ h;  x − ρ ≤ z;  −x − ρ ≤ −z;  x ∈ B(z, r), 0 ≤ ρ ≤ r
    A = np.zeros((k + 2 * d, d + 1))
    A[:k, :d] = G
    A[k : k + d, :d] = np.eye(d)
    A[k + d :, :d] = -np.eye(d)
    A[k:, d] = -1.0
    rhs = np.concatenate([h, center, -center])
    lo, hi = box_around(center, radius)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = d + 1, A.shape[0]
    lp.col_cost_ = np.r_[np.zeros(d), 1.0]
    lp.col_lower_ = np.r_[lo, 0.0]
    lp.col_upper_ = np.r_[hi, radius]
    lp.row_lower_ = np.full(A.shape[0], -highspy.kHighsInf)
    lp.row_upper_ = rhs
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.arange(0, A.size + 1, d + 1, dtype=np.int32)
    lp.a_matrix_.index_ = np.tile(np.arange(d + 1, dtype=np.int32), A.shape[0])
    lp.a_matrix_.value_ = A.ravel()
    solver = _highs()
    solver.clearModel()
    solver.passModel(lp)
    solver.run()
    status = solver.getModelStatus()
    if status == highspy.HighsModelStatus.kInfeasible:
        return None
    if status != highspy.HighsModelStatus.kOptimal:
        raise CertificationError(f"region LP ended with status {solver.modelStatusToString(status)}")
    sol = np.array(solver.getSolution().col_value)
    return min(max(float(sol[d]), 0.0), radius), np.clip(sol[:d], lo, hi)


@dataclass(frozen=True)
class PatternResult:
    """Outcome of a pattern search: ``value`` is L (for :func:`pattern_value`) or ``passed`` the
    decision; ``upper`` a certified upper bound on L found on the way; ``lower``/``lower_radius``
    a pattern norm whose region meets ``B(center, lower_radius)``; ``n_lps`` LPs solved."""

    passed: bool | None
    value: float | None
    upper: float
    lower: float
    lower_radius: float
    n_lps: int
    pattern: np.ndarray | None = None
    point: np.ndarray | None = None


def _candidates(table: PatternTable, fwd: ForwardBounds) -> tuple[np.ndarray, np.ndarray]:
    on, off = _stable_masks(fwd)
    idx = np.flatnonzero(table.consistent(on, off))
    return table.codes[idx], table.norms[idx]


def _distance_lower_bounds(net: ReluNetwork, codes: np.ndarray, center: np.ndarray) -> np.ndarray:
    """For many patterns at once, a lower bound on ``min ‖x − center‖∞`` over the pattern's region.

    Along a pattern every pre-activation is affine, ``g(x) = a·x + c``, and the region needs
    ``s·g(x) ≥ 0`` (s = ±1 from the pattern); on ``B(center, ρ)`` the largest ``s·g`` is
    ``s·g(center) + ρ‖a‖₁``, so ``ρ ≥ −s·g(center)/‖a‖₁`` for every neuron — the largest such
    value bounds the region's distance (with a 1e-9 relative allowance for rounding)."""
    n = net.n_hidden
    out = np.zeros(codes.shape[0])
    for s0 in range(0, codes.shape[0], _CHUNK):
        chunk = codes[s0 : s0 + _CHUNK]
        bits = _bits(chunk, n)
        k = chunk.shape[0]
        A = np.broadcast_to(np.eye(net.in_dim), (k, net.in_dim, net.in_dim))
        a = np.zeros((k, net.in_dim))
        start = 0
        lb = np.zeros(k)
        for w, b in zip(net.weights[:-1], net.biases[:-1], strict=True):
            A = np.matmul(w, A)
            a = a @ w.T + b
            g = np.einsum("nij,j->ni", A, center) + a
            norm1 = np.abs(A).sum(axis=2)
            p = bits[:, start : start + w.shape[0]]
            start += w.shape[0]
            sg = np.where(p > 0.5, g, -g) + 1e-9 * (1.0 + np.abs(g))
            need = np.where(sg >= 0, 0.0, np.where(norm1 > 0, -sg / np.where(norm1 > 0, norm1, 1.0), np.inf))
            lb = np.maximum(lb, need.max(axis=1, initial=0.0))
            A = p[:, :, None] * A
            a = p * a
        out[s0 : s0 + _CHUNK] = lb
    return out


def _table_for(
    net: ReluNetwork, fwd: ForwardBounds, input_norm: str, output_norm: str, threshold: float | None = None
) -> PatternTable | None:
    """The global table (small networks); for a decision at ``threshold`` the patterns above it
    (computed once per model and threshold, then shared by every box); else the table of the
    box's unstable neurons."""
    table = global_pattern_table(net, input_norm=input_norm, output_norm=output_norm)
    if table is None and threshold is not None and len(net.weights) > 2:
        table = threshold_pattern_table(net, threshold, input_norm=input_norm, output_norm=output_norm)
    if table is None:
        table = box_pattern_table(net, fwd, input_norm=input_norm, output_norm=output_norm)
    return table


def pattern_upper_bound(
    net: ReluNetwork, fwd: ForwardBounds, *, input_norm: str, output_norm: str, threshold: float | None = None
) -> float | None:
    """``max ‖J_D‖`` over the patterns consistent with the box's stable neurons: a certified upper
    bound on L over the box, monotone under inclusion, without any LP (None if not enumerable).
    With a partial table for ``threshold``, a value ≤ threshold is only known to be ≤ its floor."""
    table = _table_for(net, fwd, input_norm, output_norm, threshold)
    if table is None:
        return None
    _, norms = _candidates(table, fwd)
    return float(norms[0]) if norms.size else table.rest


def pattern_decide(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    threshold: float,
    fwd: ForwardBounds,
    *,
    input_norm: str,
    output_norm: str,
    max_lps: int = 256,
) -> PatternResult | None:
    """Exactly decide ``L(f, B(center, radius)) ≤ threshold`` by enumeration (module docstring),
    or None when the network/box is too large or more than ``max_lps`` LPs would be needed."""
    table = _table_for(net, fwd, input_norm, output_norm, threshold)
    if table is None:
        return None
    codes, norms = _candidates(table, fwd)
    above = int(np.searchsorted(-norms, -threshold, side="left"))  # norms[:above] > threshold
    top = float(norms[0]) if norms.size else table.rest
    if above == 0:
        return PatternResult(passed=True, value=None, upper=top, lower=0.0, lower_radius=0.0, n_lps=0)
    survivors = np.flatnonzero(_distance_lower_bounds(net, codes[:above], center) <= radius)
    if survivors.size > max_lps:
        return None
    n = table.n_hidden
    for count, k in enumerate(survivors, start=1):
        pattern = _bits(codes[k : k + 1], n)[0]
        hit = region_distance(net, pattern, center, radius)
        if hit is not None:
            return PatternResult(passed=False, value=None, upper=top, lower=float(norms[k]),
                                 lower_radius=hit[0], n_lps=count, pattern=pattern, point=hit[1])
    upper = float(norms[above]) if above < norms.size else table.rest
    return PatternResult(passed=True, value=None, upper=upper, lower=0.0, lower_radius=0.0,
                         n_lps=int(survivors.size))


def pattern_value(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    fwd: ForwardBounds,
    *,
    input_norm: str,
    output_norm: str,
    max_lps: int = 512,
) -> PatternResult | None:
    """Exact ``L(f, B(center, radius))``: the first consistent pattern, in decreasing norm, whose
    region meets the box; None if the enumeration does not apply or needs over ``max_lps`` LPs."""
    table = _table_for(net, fwd, input_norm, output_norm)
    if table is None:
        return None
    codes, norms = _candidates(table, fwd)
    n = table.n_hidden
    n_lps = 0
    for start in range(0, codes.size, 1024):
        lbs = _distance_lower_bounds(net, codes[start : start + 1024], center)
        block = np.flatnonzero(lbs <= radius) + start
        for k in block:
            if n_lps >= max_lps:
                return None
            n_lps += 1
            pattern = _bits(codes[k : k + 1], n)[0]
            hit = region_distance(net, pattern, center, radius)
            if hit is not None:
                v = float(norms[k])
                return PatternResult(passed=None, value=v, upper=v, lower=v, lower_radius=hit[0], n_lps=n_lps,
                                     pattern=pattern, point=hit[1])
    return None


@dataclass(frozen=True)
class NearestViolation:
    """``distance`` = min ‖x − center‖∞ over the regions (within ``B(center, radius)``) of patterns
    with norm > threshold — ``inf`` when none meets the box; ``norm``/``pattern``/``point`` describe
    the nearest one. Then L(f, B(center, r)) > threshold exactly when ``r ≥ distance`` (r ≤ radius),
    and ``upper_below`` bounds L on every smaller ball (the largest norm ≤ threshold)."""

    distance: float
    norm: float
    pattern: np.ndarray | None
    point: np.ndarray | None
    upper_below: float
    n_lps: int


def pattern_nearest_violation(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    threshold: float,
    fwd: ForwardBounds,
    *,
    input_norm: str,
    output_norm: str,
    max_lps: int = 256,
    hint: float | None = None,
) -> NearestViolation | None:
    """Distance from ``center`` to the nearest point whose Jacobian norm exceeds ``threshold``,
    within ``B(center, radius)``: LPs over the candidate patterns in order of a distance lower
    bound, pruning every candidate whose bound exceeds the best distance found (``hint``: a
    known upper bound on it). None when enumeration does not apply or the budget is exceeded.
    This settles every decision "L(B(center, r)) ≤ threshold?" for r ≤ radius at once (one
    certified search instead of a MILP per bisection step)."""
    table = _table_for(net, fwd, input_norm, output_norm, threshold)
    if table is None:
        return None
    codes, norms = _candidates(table, fwd)
    above = int(np.searchsorted(-norms, -threshold, side="left"))
    upper_below = float(norms[above]) if above < norms.size else table.rest
    if above == 0:
        return NearestViolation(distance=np.inf, norm=0.0, pattern=None, point=None, upper_below=upper_below,
                                n_lps=0)
    lbs = _distance_lower_bounds(net, codes[:above], center)
    best = radius if hint is None else min(radius, hint)
    order = np.argsort(lbs, kind="stable")
    order = order[lbs[order] <= best]
    n = table.n_hidden
    found: tuple[float, float, np.ndarray, np.ndarray] | None = None
    n_lps = 0
    # Best-first search (A*-like): a candidate's key is a lower bound on its region's distance.
    # Patterns sharing their first hidden layers share that part of the region, so one LP on the
    # prefix (cached per prefix) raises the key of the whole group; a candidate gets its full LP
    # only when it is the most promising one left, and everything whose key exceeds the best
    # distance found is pruned.
    widths = net.hidden_widths
    prefix_masks = [np.int64((1 << int(sum(widths[: ell + 1]))) - 1) for ell in range(len(widths) - 1)]
    prefix_dist: dict[tuple[int, int], float] = {}
    heap = [(float(lbs[k]), int(k), 0) for k in order]
    heapq.heapify(heap)
    while heap:
        key, k, level = heapq.heappop(heap)
        if key > best:
            break
        if n_lps >= max_lps:
            return None
        if level < len(prefix_masks):
            pkey = (level, int(codes[k] & prefix_masks[level]))
            if pkey not in prefix_dist:
                n_lps += 1
                pattern = _bits(codes[k : k + 1], n)[0]
                hit = region_distance(net, pattern, center, radius, layers=level + 1)
                prefix_dist[pkey] = np.inf if hit is None else hit[0]
            pd = prefix_dist[pkey]
            if pd <= best:
                heapq.heappush(heap, (max(key, pd), k, level + 1))
            continue
        n_lps += 1
        pattern = _bits(codes[k : k + 1], n)[0]
        hit = region_distance(net, pattern, center, best)
        if hit is not None and (found is None or hit[0] < found[0]):
            found = (hit[0], float(norms[k]), pattern, hit[1])
            best = hit[0]
    if found is None:
        if hint is not None and hint < radius:
            return None  # the hint was wrong (no region within it): let the caller retry without it
        return NearestViolation(distance=np.inf, norm=0.0, pattern=None, point=None, upper_below=upper_below,
                                n_lps=n_lps)
    return NearestViolation(distance=found[0], norm=found[1], pattern=found[2], point=found[3],
                            upper_below=upper_below, n_lps=n_lps)
