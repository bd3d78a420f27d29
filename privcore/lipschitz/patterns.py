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

For a decision "L ≤ τ?" on a network too wide for the full table (the shipped 8→10→10→8
obfuscators), the table lists the patterns with norm > τ (branch and bound over layers, once per
model and τ = Δp). Most of those patterns are never realised (their region is empty in ℝ^d); the
others get a bounding box of their region. Both facts are resolved on demand, the first time a
search reaches a pattern, and memoised (:class:`RegionMemo`, :func:`realised_pattern_table`); after
a few searches each further one resolves a batch more, until the table is complete
(:func:`nonempty_threshold_table` is the eager form). The table and what is resolved so far live
in the Lipschitz disk cache, and a complete table can ship with the models
(``python -m privcore.lipschitz.patterns --models models`` writes ``models/pattern-tables/``), so
a later process, or a fresh clone, loads it in milliseconds; a stored table that fails any check
is rebuilt, never trusted.
Before any LP, a search drops every candidate that provably misses the ball: by a row bound, by
its box, or by interval constraint propagation from ball ∩ box (:func:`_screen`); all three are
proofs, so only candidates that may meet the ball get an LP, in increasing order of their
distance bound. With more hidden neurons the enumeration runs over the box's *unstable* neurons
only, when there are few of them; otherwise the callers fall back to the MILP. The answers are the MILP's
(closed regions, so a region touching the box counts, as LipMIP's free binaries at a zero
pre-activation do); LP feasibility is decided with HiGHS's tolerances (1e-7).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from privcore._atomic import atomic_write_text
from privcore.errors import CertificationError
from privcore.lipschitz.bounds import ForwardBounds, box_around, operator_norm
from privcore.lipschitz.codes import (
    code_dtype,
    codes_from_b64,
    codes_from_bits,
    codes_to_b64,
    consistent_mask,
    join_codes,
    layer_codes,
    to_bits,
)
from privcore.lipschitz.network import ReluNetwork

__all__ = [
    "MAX_GLOBAL_NEURONS",
    "MAX_PATTERNS",
    "RESOLVE_AFTER",
    "RESOLVE_STEP",
    "TABLE_DOMAIN",
    "NearestViolation",
    "PatternResult",
    "PatternTable",
    "RegionMemo",
    "box_pattern_table",
    "clear_pattern_tables",
    "global_pattern_table",
    "in_table_domain",
    "nonempty_threshold_table",
    "pattern_decide",
    "pattern_nearest_violation",
    "pattern_table_key",
    "pattern_upper_bound",
    "pattern_value",
    "precompute_pattern_tables",
    "realised_pattern_table",
    "region_distance",
    "region_nonempty",
    "resolve_regions",
    "shipped_obfuscators",
    "shipped_table_path",
    "table_from_dict",
    "table_to_dict",
    "threshold_pattern_table",
    "write_shipped_table",
]

#: networks with at most this many hidden neurons get a global pattern table
MAX_GLOBAL_NEURONS = 16
#: realised-pattern tables are only used for boxes inside [−TABLE_DOMAIN, TABLE_DOMAIN]^d. An EMPTY
#: label comes from a floating-point LP over ℝ^d; a region that exists only as a degenerate sliver
#: millions of units away (seen: one at |x| ≈ 6e6, on its boundary to 1e-11) may get it. Latent
#: balls live within a few units of the origin, so inside this domain the label is a proof
#: (tests/test_lipschitz_patterns.py checks shipped labels against a reference LP on this box);
#: a box outside it falls back to the per-box enumeration / MILP, which use no such label.
TABLE_DOMAIN = 1e3
#: largest per-box enumeration (patterns of the unstable neurons)
MAX_PATTERNS = 1 << 14
_CHUNK = 4096


class RegionMemo:
    """What is known of the region of each pattern of one threshold table, filled on demand.

    Per pattern (position in the table): unknown, empty in all of ℝ^d, or contained in a padded
    bounding box (:func:`_region_box`, 2d + 1 small LPs). Only the patterns a search actually
    reaches are resolved, once per process (and on disk, :func:`realised_pattern_table`); every
    entry is a proof (an empty region meets no ball, a region lies in its box), so a partly
    resolved memo prunes less but never decides differently. Thread-safe; entries only go from
    unknown to known."""

    UNKNOWN, EMPTY, BOXED = 0, -1, 1

    def __init__(self, n: int, d: int, *, key: tuple | None = None) -> None:
        self.state = np.zeros(n, dtype=np.int8)
        self.lower = np.full((n, d), -np.inf)
        self.upper = np.full((n, d), np.inf)
        self.key = key
        self.lock = threading.Lock()
        #: entries resolved since the table was last written to disk, and when that was
        self.unsaved = 0
        self.saved_at = 0.0
        #: searches served so far, and whether a full resolution has been started
        self.searches = 0
        self.completing = False

    def resolve(self, pos: int, G: np.ndarray, h: np.ndarray) -> bool:
        """Resolve pattern ``pos`` (region ``G x ≤ h``) if unknown; True when it is not empty."""
        with self.lock:
            state = int(self.state[pos])
        if state == self.UNKNOWN:
            box = _region_box(G, h)
            with self.lock:
                if self.state[pos] == self.UNKNOWN:
                    if box is None:
                        self.state[pos] = self.EMPTY
                    else:
                        self.lower[pos], self.upper[pos] = box
                        self.state[pos] = self.BOXED
                    self.unsaved += 1
                state = int(self.state[pos])
        return state != self.EMPTY


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
    #: what is known of each pattern's region (threshold tables only), shared with every subset
    regions: RegionMemo | None = None
    #: positions of these patterns in ``regions`` (None: 0, 1, 2, …)
    index: np.ndarray | None = None

    @property
    def positions(self) -> np.ndarray:
        """Positions of the patterns in :attr:`regions`."""
        return np.arange(self.codes.shape[0]) if self.index is None else self.index

    @property
    def box_lower(self) -> np.ndarray | None:
        """Per pattern, the lower corner of a box containing its region (−inf where unknown)."""
        return None if self.regions is None else self.regions.lower[self.positions]

    @property
    def box_upper(self) -> np.ndarray | None:
        """Per pattern, the upper corner of a box containing its region (+inf where unknown)."""
        return None if self.regions is None else self.regions.upper[self.positions]

    @property
    def state(self) -> np.ndarray | None:
        """Per pattern, :class:`RegionMemo`'s UNKNOWN / EMPTY / BOXED."""
        return None if self.regions is None else self.regions.state[self.positions]

    def subset(self, idx: np.ndarray) -> PatternTable:
        """The patterns ``idx`` (in that order), sharing the region memo."""
        return PatternTable(codes=self.codes[idx], norms=self.norms[idx], n_hidden=self.n_hidden,
                            floor=self.floor, regions=self.regions, index=self.positions[idx])

    @property
    def rest(self) -> float:
        """A bound on the norms of the patterns the table does not list."""
        return float(self.floor) if np.isfinite(self.floor) else 0.0

    def consistent(self, must_on: np.ndarray, must_off: np.ndarray) -> np.ndarray:
        """Boolean mask of the patterns agreeing with the fixed neurons (and not known to be empty)."""
        mask = consistent_mask(self.codes, must_on, must_off)
        if self.regions is not None:
            mask &= self.state != RegionMemo.EMPTY
        return mask


def _norms(jac: np.ndarray, input_norm: str, output_norm: str) -> np.ndarray:
    out = np.empty(jac.shape[0])
    for s in range(0, jac.shape[0], _CHUNK):
        block = jac[s : s + _CHUNK]
        out[s : s + _CHUNK] = operator_norm(block, input_norm=input_norm, output_norm=output_norm)
    return out


def _jacobians_of_codes(net: ReluNetwork, codes: np.ndarray) -> np.ndarray:
    pats = net.split_pattern(to_bits(codes, net.n_hidden))
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
#: most floating-point operations a threshold table's bounds may cost (a few seconds): beyond it the
#: build is not started and the caller goes on without a table, instead of paying minutes for it
MAX_THRESHOLD_FLOPS = 2e10


def _bound_flops(net: ReluNetwork, layer: int, groups: int, input_norm: str, output_norm: str) -> float:
    """Cost estimate of :func:`_completion_bound` on ``groups`` matrices at hidden layer ``layer``."""
    d, m = net.in_dim, net.out_dim
    if layer == len(net.weights) - 2:  # the exact last layer: two products per (output, input) vertex pair
        k_s = 2.0 ** (d - 1) if input_norm == "linf" else d
        k_c = 2.0**m if output_norm == "l1" else 2 * m
        return 4.0 * groups * k_c * k_s * net.hidden_widths[layer]
    widths = net.hidden_widths
    return 4.0 * groups * d * sum(widths[j] * widths[j + 1] for j in range(layer, len(widths) - 1))


def threshold_pattern_table(
    net: ReluNetwork, threshold: float, *, input_norm: str, output_norm: str
) -> PatternTable | None:
    """Every activation pattern with ``‖J_D‖ > threshold``, for networks too wide for the full table.

    Branch and bound over the hidden layers: the patterns of the first layers are expanded, and a
    group is dropped as soon as a bound on every completion (interval arithmetic; the last layer
    exactly) is ≤ threshold. Memoised per model, norms and threshold (PTR asks with one Δp for
    every image). None when more than ``MAX_THRESHOLD_WORK`` patterns would need evaluating or the
    bounds would cost more than ``MAX_THRESHOLD_FLOPS`` (estimated before each layer is expanded)."""
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
    n = net.n_hidden
    codes = np.zeros(1, dtype=code_dtype(n))
    M = net.weights[0][None, :, :]  # pre-activation Jacobian of hidden layer 0, no pattern fixed yet
    keep = _completion_bound(net, 0, M, input_norm, output_norm) > threshold
    codes, M = codes[keep], M[keep]
    norms = np.empty(0)
    for i, width in enumerate(widths):
        bits = to_bits(np.arange(1 << width, dtype=np.int64), width)
        pcodes = layer_codes(width, net.hidden_offsets[i], n)
        if codes.size * bits.shape[0] > MAX_THRESHOLD_WORK:
            return None
        last = i == len(widths) - 1
        if not last and _bound_flops(net, i + 1, codes.size * bits.shape[0], input_norm, output_norm) > (
            MAX_THRESHOLD_FLOPS
        ):
            return None
        new_codes, new_M, new_vals = [], [], []
        step = max(1, _CHUNK * 8 // bits.shape[0])
        for s0 in range(0, codes.size, step):
            Mc = M[s0 : s0 + step]
            DM = bits[None, :, :, None] * Mc[:, None, :, :]  # (c, P, n_i, d)
            nxt = np.matmul(net.weights[i + 1], DM).reshape(-1, net.weights[i + 1].shape[0], Mc.shape[2])
            cc = join_codes(codes[s0 : s0 + step], pcodes, n)
            if last:
                # Σ|J_ij| bounds each of the four operator norms: only the patterns it does not
                # already put ≤ threshold (with a margin far above rounding) get the exact norm
                vals = np.full(nxt.shape[0], -np.inf)
                maybe = np.abs(nxt).sum(axis=(1, 2)) * (1.0 + 1e-9) > threshold
                vals[maybe] = _norms(nxt[maybe], input_norm, output_norm)
            else:
                vals = _completion_bound(net, i + 1, nxt, input_norm, output_norm)
            sel = vals > threshold
            new_codes.append(cc[sel])
            new_vals.append(vals[sel])
            if not last:
                new_M.append(nxt[sel])
        codes = np.concatenate(new_codes) if new_codes else np.zeros(0, dtype=code_dtype(n))
        norms = np.concatenate(new_vals) if new_vals else np.zeros(0)
        if not last:
            M = np.concatenate(new_M) if new_M else np.zeros((0, widths[i + 1], net.in_dim))
        if codes.size == 0:
            norms = np.zeros(0)
            break
    order = np.argsort(-norms, kind="stable")
    return PatternTable(codes=codes[order], norms=norms[order], n_hidden=net.n_hidden,
                        floor=float(threshold))


def stable_masks(fwd: ForwardBounds) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks over all hidden neurons: stably active and stably inactive on the box."""
    on = np.concatenate([fwd.active(i) for i in range(len(fwd.lower))])
    off = np.concatenate([fwd.inactive(i) for i in range(len(fwd.lower))])
    return on, off


def box_pattern_table(
    net: ReluNetwork, fwd: ForwardBounds, *, input_norm: str, output_norm: str
) -> PatternTable | None:
    """The patterns consistent with the box's stable neurons, when there are at most MAX_PATTERNS."""
    on, off = stable_masks(fwd)
    free = np.flatnonzero(~(on | off))
    if (1 << free.size) > MAX_PATTERNS:
        return None
    bits = np.repeat(on[None, :].astype(np.float64), 1 << free.size, axis=0)
    bits[:, free] = to_bits(np.arange(1 << free.size, dtype=np.int64), free.size)
    return _table(net, codes_from_bits(bits), input_norm, output_norm)


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


def _region_rows_batch(net: ReluNetwork, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_region_rows` for many patterns at once: ``G`` (N, n_hidden, d) and ``h`` (N, n_hidden)."""
    bits = to_bits(codes, net.n_hidden)
    k = codes.shape[0]
    A = np.broadcast_to(np.eye(net.in_dim), (k, net.in_dim, net.in_dim))
    a = np.zeros((k, net.in_dim))
    G, h = [], []
    start = 0
    for w, b in zip(net.weights[:-1], net.biases[:-1], strict=True):
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


@dataclass(frozen=True)
class _Screened:
    """Candidates that survived :func:`_screen`: positions in the screened table, rows, bounds;
    with a region memo, their memo positions and which of them are still unresolved."""

    idx: np.ndarray
    G: np.ndarray
    h: np.ndarray
    lower: np.ndarray
    box_lower: np.ndarray | None
    box_upper: np.ndarray | None
    pos: np.ndarray | None = None
    pending: np.ndarray | None = None

    def take(self, sel: np.ndarray) -> _Screened:
        boxed = self.box_lower is not None and self.box_upper is not None
        return _Screened(idx=self.idx[sel], G=self.G[sel], h=self.h[sel], lower=self.lower[sel],
                         box_lower=self.box_lower[sel] if boxed else None,
                         box_upper=self.box_upper[sel] if boxed else None,
                         pos=None if self.pos is None else self.pos[sel],
                         pending=None if self.pending is None else self.pending[sel])

    def refuted(self, sel: np.ndarray, center: np.ndarray, radius: float) -> np.ndarray:
        boxed = self.box_lower is not None and self.box_upper is not None
        return _box_refutes(self.G[sel], self.h[sel], center, radius,
                            self.box_lower[sel] if boxed else None, self.box_upper[sel] if boxed else None)

    def settle(self, k: int, memo: RegionMemo | None, center: np.ndarray, radius: float) -> bool:
        """Before candidate ``k``'s LP: resolve its region in the memo if still unknown (lazy box);
        False when that proves it misses ``B(center, radius)`` (empty region, box too far, or
        refuted by propagation inside the box), so the LP can be skipped."""
        if memo is None or self.pending is None or not self.pending[k]:
            return True
        self.pending[k] = False
        p = int(self.pos[k])
        if not memo.resolve(p, self.G[k], self.h[k]):
            return False
        lo, hi = memo.lower[p], memo.upper[p]
        self.box_lower[k], self.box_upper[k] = lo, hi
        self.lower[k] = max(float(self.lower[k]), float(_box_distance_bounds(lo[None], hi[None], center)[0]))
        if self.lower[k] > radius:
            return False
        return not bool(self.refuted(np.array([k]), center, radius)[0])


def _screen(net: ReluNetwork, table: PatternTable, center: np.ndarray, radius: float) -> _Screened:
    """The patterns of ``table`` whose region may meet ``B(center, radius)``, in table order, with
    their region rows and distance lower bounds (the larger of the row bound
    :func:`_row_distance_bounds` and the bounding-box bound). A pattern is dropped when its bound
    exceeds ``radius`` or propagation refutes it (:func:`_box_refutes`); both are proofs, so the
    LPs only see patterns that could meet the ball. Patterns whose region is not resolved yet are
    screened without a box (``pending``; :meth:`_Screened.settle` resolves them before an LP)."""
    parts = []
    memo = table.regions
    boxed = memo is not None
    positions = table.positions
    for s0 in range(0, table.codes.shape[0], _CHUNK):
        sl = slice(s0, s0 + _CHUNK)
        G, h = _region_rows_batch(net, table.codes[sl])
        lbs = _row_distance_bounds(G, h, center)
        bl = bu = pos = pending = None
        if boxed:
            pos = positions[sl]
            with memo.lock:
                bl, bu, pending = memo.lower[pos], memo.upper[pos], memo.state[pos] == RegionMemo.UNKNOWN
            lbs = np.maximum(lbs, _box_distance_bounds(bl, bu, center))
        chunk = _Screened(idx=np.arange(s0, s0 + G.shape[0]), G=G, h=h, lower=lbs, box_lower=bl, box_upper=bu,
                          pos=pos, pending=pending)
        chunk = chunk.take(np.flatnonzero(lbs <= radius))
        parts.append(chunk.take(~chunk.refuted(np.arange(chunk.idx.size), center, radius)))
    if not parts:
        d, k = net.in_dim, net.n_hidden
        return _Screened(idx=np.zeros(0, dtype=np.int64), G=np.zeros((0, k, d)), h=np.zeros((0, k)),
                         lower=np.zeros(0), box_lower=None, box_upper=None)

    def cat(name: str) -> np.ndarray | None:
        return np.concatenate([getattr(p, name) for p in parts]) if boxed else None

    return _Screened(
        idx=np.concatenate([p.idx for p in parts]),
        G=np.concatenate([p.G for p in parts]),
        h=np.concatenate([p.h for p in parts]),
        lower=np.concatenate([p.lower for p in parts]),
        box_lower=cat("box_lower"),
        box_upper=cat("box_upper"),
        pos=cat("pos"),
        pending=cat("pending"),
    )


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


def _candidates(table: PatternTable, fwd: ForwardBounds) -> PatternTable:
    """The patterns of ``table`` agreeing with the box's stable neurons (in decreasing norm)."""
    on, off = stable_masks(fwd)
    return table.subset(np.flatnonzero(table.consistent(on, off)))


def region_nonempty(net: ReluNetwork, pattern: np.ndarray, *, layers: int | None = None) -> bool:
    """Does the closed region of ``pattern`` (only its first ``layers`` hidden layers when given)
    contain any point of ℝ^d? One feasibility LP on ``G x ≤ h + 1e-9·(1 + |h|)``: the slack only
    keeps more patterns (a region declared empty is empty even after relaxing it, so it meets no
    box and no LP of :func:`region_distance` would count it either)."""
    import highspy

    G, h = _region_rows(net, pattern, layers)
    solver = _relaxed_region_lp(G, h)
    solver.run()
    # only a proven infeasibility drops a pattern (an unclear status keeps it)
    return solver.getModelStatus() != highspy.HighsModelStatus.kInfeasible


def _relaxed_region_lp(G: np.ndarray, h: np.ndarray):
    """HiGHS holding ``G x ≤ h + 1e-9·(1 + |h|)`` with x free (objective set by the caller)."""
    import highspy

    d = G.shape[1]
    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = d, G.shape[0]
    lp.col_cost_ = np.zeros(d)
    lp.col_lower_ = np.full(d, -inf)
    lp.col_upper_ = np.full(d, inf)
    lp.row_lower_ = np.full(G.shape[0], -inf)
    lp.row_upper_ = h + 1e-9 * (1.0 + np.abs(h))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.arange(0, G.size + 1, d, dtype=np.int32)
    lp.a_matrix_.index_ = np.tile(np.arange(d, dtype=np.int32), G.shape[0])
    lp.a_matrix_.value_ = np.ascontiguousarray(G, dtype=np.float64).ravel()
    solver = _highs()
    solver.clearModel()
    solver.passModel(lp)
    return solver


#: outward padding of a region's bounding box (relative), above the LPs' 1e-7 tolerances
_BOX_PAD = 1e-6


def _region_box(G: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """A box containing the region ``{x : G x ≤ h}`` (2d LPs min/max x_k on the relaxed region,
    padded outwards by ``_BOX_PAD``; ±inf where unbounded or unclear), or None when the relaxed
    region is empty (then so is the region)."""
    import highspy

    d = G.shape[1]
    solver = _relaxed_region_lp(G, h)
    lo, hi = np.full(d, -np.inf), np.full(d, np.inf)
    optimal, infeasible = highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kInfeasible
    for k in range(d):
        if k:
            solver.changeColCost(k - 1, 0.0)
        for sign in (1.0, -1.0):  # HiGHS minimises: x_k, then −x_k (warm-started from the last basis)
            solver.changeColCost(k, sign)
            solver.run()
            status = solver.getModelStatus()
            if status == infeasible and k == 0 and sign > 0:
                return None
            if status == optimal:
                v = sign * float(solver.getInfo().objective_function_value)
                pad = _BOX_PAD * (1.0 + abs(v))
                if sign > 0:
                    lo[k] = v - pad
                else:
                    hi[k] = v + pad
    return lo, hi


#: version of the stored pattern-table format and of the enumeration behind it: bump it whenever
#: either changes, so older stored tables become stale and are rebuilt
TABLE_FORMAT = 1
#: version mixed into a shipped table file's checksum. Shipped tables are part of the repository, like
#: the weights they describe, so they carry their own version rather than the disk cache's
#: CACHE_VERSION: a change to the cache's format must not invalidate (or re-sign) the model files
SHIPPED_TABLE_VERSION = 2
#: a lazily grown region memo is written back to disk at most this often (seconds), once it holds
#: new entries
_SAVE_EVERY_S = 5.0
_REALISED: OrderedDict[tuple, PatternTable | None] = OrderedDict()
_STORES: dict[str, object] = {}


def _table_store():
    """The on-disk store of pattern tables: the Lipschitz cache's default directory
    (:func:`privcore.lipschitz.cache.default_cache_dir`), or None when ``$PRIVLENS_PATTERN_TABLES``
    is ``off``."""
    from privcore.lipschitz.cache import LipschitzCache, default_cache_dir

    if os.environ.get("PRIVLENS_PATTERN_TABLES", "").lower() in ("off", "0", "no"):
        return None
    directory = str(default_cache_dir())
    with _LOCK:
        store = _STORES.get(directory)
        if store is None:
            store = _STORES[directory] = LipschitzCache(directory)
    return store


def pattern_table_key(net: ReluNetwork, threshold: float, *, input_norm: str, output_norm: str) -> dict:
    """Disk-cache key of a realised-pattern table: network digest, threshold, norms, format."""
    return {"model": net.digest, "threshold": float(threshold), "input_norm": input_norm,
            "output_norm": output_norm, "format": TABLE_FORMAT}


def _b64(a: np.ndarray, dtype: str) -> str:
    import base64

    return base64.b64encode(np.ascontiguousarray(a, dtype=dtype).tobytes()).decode("ascii")


def _unb64(text: str, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    import base64

    raw = base64.b64decode(text.encode("ascii"), validate=True)
    a = np.frombuffer(raw, dtype=dtype)
    if a.size != int(np.prod(shape)):
        raise ValueError("array of the wrong size")
    return a.reshape(shape).astype(dtype.lstrip("<"), copy=True)


def table_to_dict(table: PatternTable, *, in_dim: int) -> dict:
    """A JSON-able form of a threshold table and of its region memo (what is resolved so far)."""
    memo = table.regions
    if memo is None or table.index is not None:
        raise ValueError("only a whole threshold table with its region memo is stored")
    with memo.lock:
        state = memo.state.copy()
        boxed = state == RegionMemo.BOXED
        lower, upper = memo.lower[boxed], memo.upper[boxed]
    return {"format": TABLE_FORMAT, "n_hidden": int(table.n_hidden), "in_dim": int(in_dim),
            "floor": float(table.floor), "count": int(table.codes.size),
            "codes": codes_to_b64(table.codes, table.n_hidden), "norms": _b64(table.norms, "<f8"),
            "state": _b64(state, "i1"),
            "box_lower": _b64(lower, "<f8"), "box_upper": _b64(upper, "<f8")}


def table_from_dict(d: dict, net: ReluNetwork, threshold: float, *, key: tuple | None = None) -> PatternTable:
    """Inverse of :func:`table_to_dict`, checked against ``net`` and ``threshold``: raises
    ValueError on anything inconsistent (format, sizes, code range, duplicate codes, norms not
    sorted or not above the threshold, non-finite or inverted boxes)."""
    if d.get("format") != TABLE_FORMAT or d.get("n_hidden") != net.n_hidden or d.get("in_dim") != net.in_dim:
        raise ValueError("stored table of another format or network shape")
    if d.get("floor") != float(threshold):
        raise ValueError("stored table of another threshold")
    n, dim = int(d["count"]), net.in_dim
    codes = codes_from_b64(d["codes"], n, net.n_hidden)
    norms = _unb64(d["norms"], "<f8", (n,))
    state = _unb64(d["state"], "i1", (n,))
    if not np.all(np.isfinite(norms)) or np.any(norms <= threshold) or np.any(np.diff(norms) > 0):
        raise ValueError("stored norms not finite, not above the threshold or not sorted")
    if not np.all(np.isin(state, (RegionMemo.UNKNOWN, RegionMemo.EMPTY, RegionMemo.BOXED))):
        raise ValueError("stored region states invalid")
    boxed = state == RegionMemo.BOXED
    lower = _unb64(d["box_lower"], "<f8", (int(boxed.sum()), dim))
    upper = _unb64(d["box_upper"], "<f8", (int(boxed.sum()), dim))
    if np.isnan(lower).any() or np.isnan(upper).any() or np.any(lower > upper):
        raise ValueError("stored region boxes invalid")
    memo = RegionMemo(n, dim, key=key)
    memo.state[:] = state
    memo.lower[boxed], memo.upper[boxed] = lower, upper
    return PatternTable(codes=codes, norms=norms, n_hidden=net.n_hidden, floor=float(threshold), regions=memo)


def _save_table(net: ReluNetwork, table: PatternTable, *, input_norm: str, output_norm: str,
                force: bool = False) -> None:
    """Write the table and its region memo to the disk store when it holds new entries (throttled
    to every ``_SAVE_EVERY_S`` unless ``force``). Best effort: the store is an accelerator."""
    import time

    memo = table.regions
    store = _table_store()
    if memo is None or store is None:
        return
    now = time.monotonic()
    with memo.lock:
        if not force and (memo.unsaved == 0 or now - memo.saved_at < _SAVE_EVERY_S):
            return
        memo.unsaved, memo.saved_at = 0, now
    key = pattern_table_key(net, table.floor, input_norm=input_norm, output_norm=output_norm)
    store.put("pattern_table", key, table_to_dict(table, in_dim=net.in_dim))


def realised_pattern_table(
    net: ReluNetwork, threshold: float, *, input_norm: str, output_norm: str
) -> PatternTable | None:
    """:func:`threshold_pattern_table` with a region memo (:class:`RegionMemo`) that the searches
    fill on demand: a pattern's region is tested for emptiness and boxed only when a search first
    reaches it, so the first φ costs the enumeration above the threshold and the LPs of the
    patterns near its own embedding, not an LP sweep of every pattern.

    Looked up in memory (per model, norms and threshold), then in the disk cache
    (:func:`_table_store`: a later process loads the table, with everything resolved so far, in
    milliseconds), then among the tables shipped with the models (:func:`shipped_table_path`,
    written by :func:`write_shipped_table`), else built. A stored or shipped table that fails its
    checks (checksum, format, network digest, threshold, or :func:`table_from_dict`'s consistency
    checks) is ignored, and the table rebuilt: never trusted."""
    key = (net.digest, input_norm, output_norm, float(threshold))
    with _LOCK:
        if key in _REALISED:
            _REALISED.move_to_end(key)
            return _REALISED[key]
    store = _table_store()
    disk_key = pattern_table_key(net, threshold, input_norm=input_norm, output_norm=output_norm)
    table = None
    if store is not None:
        hit = store.get("pattern_table", disk_key)
        if hit is not None:
            try:
                table = table_from_dict(hit, net, threshold, key=key)
            except (ValueError, KeyError, TypeError):
                store.delete("pattern_table", disk_key)
                store.rejected += 1
    if table is None:
        table = _shipped_table(net, threshold, disk_key, key)
        if table is not None:
            _save_table(net, table, input_norm=input_norm, output_norm=output_norm, force=True)
    if table is None:
        above = threshold_pattern_table(net, threshold, input_norm=input_norm, output_norm=output_norm)
        if above is not None:
            table = PatternTable(codes=above.codes, norms=above.norms, n_hidden=above.n_hidden,
                                 floor=above.floor, regions=RegionMemo(above.codes.size, net.in_dim, key=key))
            _save_table(net, table, input_norm=input_norm, output_norm=output_norm, force=True)
    with _LOCK:
        table = _REALISED.setdefault(key, table)
        while len(_REALISED) > 64:
            _REALISED.popitem(last=False)
    return table


def shipped_table_path(key: dict, models_dir: str | os.PathLike | None = None) -> Path:
    """Where a table shipped with the models lives: ``<models>/pattern-tables/<sha256(key)[:32]>.json``
    (``models`` = :func:`privcore._paths.models_dir`, as :mod:`privcore.pipeline`)."""
    from privcore.lipschitz.cache import _canonical

    if models_dir is None:
        from privcore._paths import models_dir as default_models_dir

        models_dir = default_models_dir()
    name = hashlib.sha256(_canonical(key).encode()).hexdigest()[:32]
    return Path(models_dir) / "pattern-tables" / f"{name}.json"


def _shipped_table(net: ReluNetwork, threshold: float, disk_key: dict, key: tuple) -> PatternTable | None:
    """The shipped table for ``disk_key`` if one exists and passes every check, else None (with a
    warning when a file exists but fails: it is ignored and the table rebuilt)."""
    import json
    import warnings

    from privcore.lipschitz.cache import _canonical, _checksum

    path = shipped_table_path(disk_key)
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
        key_json, value_json = _canonical(doc["key"]), _canonical(doc["value"])
        expected = _checksum(key_json, value_json, SHIPPED_TABLE_VERSION)
        if doc["key"] != disk_key or doc.get("checksum") != expected:
            raise ValueError("key or checksum mismatch")
        return table_from_dict(doc["value"], net, threshold, key=key)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        warnings.warn(f"shipped pattern table {path} ignored ({exc}); rebuilding it", RuntimeWarning,
                      stacklevel=3)
        return None


def write_shipped_table(
    net: ReluNetwork, threshold: float, *, input_norm: str = "linf", output_norm: str = "l1",
    models_dir: str | os.PathLike | None = None,
) -> Path:
    """Build the complete realised-pattern table of ``net`` at ``threshold`` (every region
    resolved) and write it next to the models (:func:`shipped_table_path`), checksummed, for
    :func:`realised_pattern_table` to load on a fresh clone. Returns the path written."""
    import json

    from privcore.lipschitz.cache import _canonical, _checksum

    table = realised_pattern_table(net, threshold, input_norm=input_norm, output_norm=output_norm)
    if table is None:
        raise ValueError(f"{net.describe()} has no threshold pattern table (too wide)")
    resolve_regions(net, table, input_norm=input_norm, output_norm=output_norm)
    key = pattern_table_key(net, threshold, input_norm=input_norm, output_norm=output_norm)
    value = table_to_dict(table, in_dim=net.in_dim)
    doc = {"key": key, "value": value,
           "checksum": _checksum(_canonical(key), _canonical(value), SHIPPED_TABLE_VERSION)}
    path = shipped_table_path(key, models_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(doc, sort_keys=True, separators=(",", ":")))
    return path


def shipped_obfuscators(models_dir: str | os.PathLike | None = None) -> list[tuple[str, ReluNetwork, float]]:
    """``(name, network, Δp)`` of every shipped obfuscator whose card has a proposed Δp, the
    dashboard's default variant (ARL-C-N) of each dataset first."""
    import warnings

    from privcore.lipschitz.network import as_network
    from privcore.nets.checkpoint import load_checkpoint

    if models_dir is None:
        from privcore._paths import models_dir as default_models_dir

        models_dir = default_models_dir()
    cards = sorted(Path(models_dir).glob("*/obfuscator-*.json"),
                   key=lambda p: (not p.stem.endswith("-ARL-C-N"), p.parent.name, p.stem))
    out = []
    for card in cards:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obf = load_checkpoint(card.with_suffix(""), kind="obfuscator")
        dp = (obf.card.get("delta_p") or {}).get("proposed")
        if dp is not None:
            out.append((f"{card.parent.name}/{card.stem.removeprefix('obfuscator-')}",
                        as_network(obf["obfuscator"]), float(dp)))
    return out


def precompute_pattern_tables(
    models_dir: str | os.PathLike | None = None, *, resolve: bool = False, input_norm: str = "linf",
    output_norm: str = "l1",
) -> list[str]:
    """Make the realised-pattern table of every shipped obfuscator (at its card's Δp) ready in this
    process: loaded when stored or shipped, else enumerated (seconds) and stored; with ``resolve``
    every region is resolved as well (tens of seconds per retrained model when nothing is stored).
    For a background warm-up thread: the searches share the tables in memory. Returns the models
    done."""
    done = []
    for name, net, dp in shipped_obfuscators(models_dir):
        table = realised_pattern_table(net, dp, input_norm=input_norm, output_norm=output_norm)
        if table is not None:
            if resolve:
                resolve_regions(net, table, input_norm=input_norm, output_norm=output_norm)
            done.append(name)
    return done


def clear_pattern_tables() -> None:
    """Forget every pattern table held in memory (the disk cache and shipped tables stay)."""
    with _LOCK:
        _GLOBAL.clear()
        _THRESHOLD.clear()
        _REALISED.clear()


def resolve_regions(net: ReluNetwork, table: PatternTable, *, input_norm: str, output_norm: str) -> None:
    """Resolve every still-unknown region of ``table`` (emptiness and bounding box; about 2d + 1
    LPs each) and store the result: what :func:`realised_pattern_table` otherwise does on demand."""
    memo = table.regions
    if memo is None:
        return
    todo = np.flatnonzero(table.state == RegionMemo.UNKNOWN)
    if todo.size == 0:
        return
    for s0 in range(0, todo.size, _CHUNK):
        sel = todo[s0 : s0 + _CHUNK]
        G, h = _region_rows_batch(net, table.codes[sel])
        for k, p in enumerate(table.positions[sel]):
            memo.resolve(int(p), G[k], h[k])
    _save_table(net, table, input_norm=input_norm, output_norm=output_norm, force=True)


def nonempty_threshold_table(
    net: ReluNetwork, threshold: float, *, input_norm: str, output_norm: str
) -> PatternTable | None:
    """:func:`threshold_pattern_table` without the patterns whose region is empty in all of ℝ^d,
    with a bounding box of each remaining region: :func:`realised_pattern_table` with every
    region resolved up front (:func:`resolve_regions`).

    Most activation patterns of a trained network are never realised (an 8→10→10→8 obfuscator has
    a few hundred to a few thousand non-empty regions among tens of thousands of patterns above
    Δp); an empty region meets no ball, so dropping it changes no decision and no bound. The
    searches do not need this eager form (they resolve what they reach); it serves tests, the
    benchmark and :func:`precompute_pattern_table`."""
    table = realised_pattern_table(net, threshold, input_norm=input_norm, output_norm=output_norm)
    if table is None:
        return None
    resolve_regions(net, table, input_norm=input_norm, output_norm=output_norm)
    return table.subset(np.flatnonzero(table.state != RegionMemo.EMPTY))


#: after this many searches on a partly resolved table, every further search first resolves up to
#: ``RESOLVE_STEP`` more regions (in table order) until none is left: a lazy search screens every
#: unresolved pattern (most of them empty) without a box, so batch work (an experiment, the
#: dashboard's later images) is faster with the complete table, while the first φ of a process
#: only pays for the regions it reaches and no single later image pays for the whole table
RESOLVE_AFTER = 8
RESOLVE_STEP = 512


def _searched(net: ReluNetwork, table: PatternTable, input_norm: str, output_norm: str) -> None:
    """Count a search on ``table``'s region memo and, from the ``RESOLVE_AFTER``-th on, resolve the
    next ``RESOLVE_STEP`` unknown regions (one thread at a time; the others go on lazily)."""
    memo = table.regions
    if memo is None:
        return
    with memo.lock:
        memo.searches += 1
        go = memo.searches >= RESOLVE_AFTER and not memo.completing and bool(np.any(memo.state == 0))
        if go:
            memo.completing = True
    if not go:
        return
    try:
        root = table if table.index is None else None
        if root is None:
            return
        todo = np.flatnonzero(root.state == RegionMemo.UNKNOWN)[:RESOLVE_STEP]
        G, h = _region_rows_batch(net, root.codes[todo])
        for k, p in enumerate(todo):
            memo.resolve(int(p), G[k], h[k])
    finally:
        with memo.lock:
            memo.completing = False


def in_table_domain(center: np.ndarray, radius: float) -> bool:
    """Does the ℓ∞ ball ``B(center, radius)`` lie inside ``[−TABLE_DOMAIN, TABLE_DOMAIN]^d``, where
    a realised-pattern table's region labels are proofs (:data:`TABLE_DOMAIN`)?"""
    return bool(np.max(np.abs(np.asarray(center, dtype=float))) + radius <= TABLE_DOMAIN)


def _table_for(
    net: ReluNetwork, fwd: ForwardBounds, input_norm: str, output_norm: str, threshold: float | None = None,
    realised: bool = True,
) -> PatternTable | None:
    """The global table (small networks); for a decision at ``threshold`` the patterns above it,
    with their lazily resolved regions (computed once per model and threshold, then shared by every
    box; only when ``realised``, i.e. the box is inside :data:`TABLE_DOMAIN`); else the table of the
    box's unstable neurons."""
    table = global_pattern_table(net, input_norm=input_norm, output_norm=output_norm)
    if table is None and threshold is not None and realised and len(net.weights) > 2:
        table = realised_pattern_table(net, threshold, input_norm=input_norm, output_norm=output_norm)
    if table is None:
        table = box_pattern_table(net, fwd, input_norm=input_norm, output_norm=output_norm)
    return table


def pattern_upper_bound(
    net: ReluNetwork,
    fwd: ForwardBounds,
    *,
    input_norm: str,
    output_norm: str,
    threshold: float | None = None,
    realised: bool = True,
) -> float | None:
    """``max ‖J_D‖`` over the patterns consistent with the box's stable neurons: a certified upper
    bound on L over the box, monotone under inclusion, without any LP (None if not enumerable).
    With a partial table for ``threshold``, a value ≤ threshold is only known to be ≤ its floor.
    ``realised=False`` (a box outside :data:`TABLE_DOMAIN`) keeps realised-pattern tables out."""
    table = _table_for(net, fwd, input_norm, output_norm, threshold, realised)
    if table is None:
        return None
    norms = _candidates(table, fwd).norms
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
    table = _table_for(net, fwd, input_norm, output_norm, threshold, in_table_domain(center, radius))
    if table is None:
        return None
    _searched(net, table, input_norm, output_norm)
    cand = _candidates(table, fwd)
    codes, norms = cand.codes, cand.norms
    above = int(np.searchsorted(-norms, -threshold, side="left"))  # norms[:above] > threshold
    top = float(norms[0]) if norms.size else table.rest
    if above == 0:
        return PatternResult(passed=True, value=None, upper=top, lower=0.0, lower_radius=0.0, n_lps=0)
    scr = _screen(net, cand.subset(np.arange(above)), center, radius)
    if scr.idx.size > max_lps:
        return None
    count = 0
    try:
        for pos in range(scr.idx.size):
            if not scr.settle(pos, table.regions, center, radius):
                continue
            count += 1
            hit = _distance_lp(scr.G[pos], scr.h[pos], center, radius)
            if hit is not None:
                k = int(scr.idx[pos])
                pattern = to_bits(codes[k : k + 1], table.n_hidden)[0]
                return PatternResult(passed=False, value=None, upper=top, lower=float(norms[k]),
                                     lower_radius=hit[0], n_lps=count, pattern=pattern, point=hit[1])
    finally:
        _save_table(net, table, input_norm=input_norm, output_norm=output_norm)
    upper = float(norms[above]) if above < norms.size else table.rest
    return PatternResult(passed=True, value=None, upper=upper, lower=0.0, lower_radius=0.0, n_lps=count)


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
    cand = _candidates(table, fwd)
    codes, norms = cand.codes, cand.norms
    n_lps = 0
    for start in range(0, codes.size, 1024):
        scr = _screen(net, cand.subset(np.arange(start, min(codes.size, start + 1024))), center, radius)
        for k, Gk, hk in zip(scr.idx + start, scr.G, scr.h, strict=True):
            if n_lps >= max_lps:
                return None
            n_lps += 1
            hit = _distance_lp(Gk, hk, center, radius)
            if hit is not None:
                v = float(norms[k])
                pattern = to_bits(codes[k : k + 1], table.n_hidden)[0]
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
    table = _table_for(net, fwd, input_norm, output_norm, threshold, in_table_domain(center, radius))
    if table is None:
        return None
    _searched(net, table, input_norm, output_norm)
    cand = _candidates(table, fwd)
    codes, norms = cand.codes, cand.norms
    above = int(np.searchsorted(-norms, -threshold, side="left"))
    upper_below = float(norms[above]) if above < norms.size else table.rest
    if above == 0:
        return NearestViolation(distance=np.inf, norm=0.0, pattern=None, point=None, upper_below=upper_below,
                                n_lps=0)
    best = radius if hint is None else min(radius, hint)
    scr = _screen(net, cand.subset(np.arange(above)), center, best)
    scr = scr.take(np.argsort(scr.lower, kind="stable"))
    alive = np.ones(scr.idx.size, dtype=bool)
    found: tuple[float, float, np.ndarray, np.ndarray] | None = None
    n_lps = 0
    # Best-first: candidates in increasing order of a distance lower bound, each settled by its LP
    # on B(center, best); every time a closer region is found, the rest are screened again by
    # propagation on the smaller ball, and the scan stops once the bound exceeds the best distance.
    # A candidate whose region is not resolved yet is resolved first (:meth:`_Screened.settle`):
    # its box only raises its distance bound, so the scan order stays valid.
    try:
        for pos in range(scr.idx.size):
            if scr.lower[pos] > best:
                break
            if not alive[pos] or not scr.settle(pos, table.regions, center, best):
                continue
            if n_lps >= max_lps:
                return None
            n_lps += 1
            hit = _distance_lp(scr.G[pos], scr.h[pos], center, best)
            if hit is not None and (found is None or hit[0] < found[0]):
                k = int(scr.idx[pos])
                found = (hit[0], float(norms[k]), to_bits(codes[k : k + 1], table.n_hidden)[0], hit[1])
                best = hit[0]
                rest = np.flatnonzero(alive[pos + 1 :] & (scr.lower[pos + 1 :] <= best)) + pos + 1
                alive[rest] = ~scr.refuted(rest, center, best)
    finally:
        _save_table(net, table, input_norm=input_norm, output_norm=output_norm)
    if found is None:
        if hint is not None and hint < radius:
            return None  # the hint was wrong (no region within it): let the caller retry without it
        return NearestViolation(distance=np.inf, norm=0.0, pattern=None, point=None, upper_below=upper_below,
                                n_lps=n_lps)
    return NearestViolation(distance=found[0], norm=found[1], pattern=found[2], point=found[3],
                            upper_below=upper_below, n_lps=n_lps)


def main(argv: list[str] | None = None) -> None:
    """``python -m privcore.lipschitz.patterns [--models DIR]``: write the complete realised-pattern
    table of every shipped obfuscator (card Δp, ℓ∞→ℓ1) to ``<models>/pattern-tables/``."""
    import argparse
    import time

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--models", default=None,
                        help="models directory (default: $PRIVCORE_MODELS_DIR or models/)")
    args = parser.parse_args(argv)
    for name, net, dp in shipped_obfuscators(args.models):
        start = time.perf_counter()
        path = write_shipped_table(net, dp, models_dir=args.models)
        print(f"{name}: Δp = {dp:.6g} -> {path} ({time.perf_counter() - start:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
