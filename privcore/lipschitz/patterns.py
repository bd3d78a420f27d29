"""Activation-pattern tables of small ReLU networks: which patterns exist and their Jacobian norms.

The value LipMIP computes (Jordan & Dimakis 2020, Thm. 3.2; brute force in tests/_reference.py) is
``L(f, B) = max { ‖J_D‖ : D an activation pattern whose closed region meets B }`` with
``J_D = W_L D_{L−1} W_{L−1} … D_1 W_1``. For the paper's obfuscators (latent 8, one or two hidden
layers of 8–10 neurons) there are few enough patterns to list them, sorted by norm:

* :func:`global_pattern_table` — all 2^n patterns (n ≤ :data:`MAX_GLOBAL_NEURONS`), once per model
  (for a ball, once its own tables have cost as much);
* :func:`threshold_pattern_table` — for a decision "L ≤ τ?" on a net too wide for that, only the
  patterns with norm > τ (branch and bound over layers, once per model and τ, within a flop budget);
* :func:`box_pattern_table` — the patterns of a box's unstable neurons (≤ :data:`MAX_PATTERNS`).

For a box, interval bounds fix the stable neurons; patterns contradicting them cannot meet the box,
so ``max {‖J_D‖ : D consistent with the stable neurons}`` is already a certified upper bound
(monotone under inclusion). Whether a listed pattern's region is empty in ℝ^d, and its bounding
box, are resolved on demand and memoised in :class:`RegionMemo`. The geometry (region LPs) is in
:mod:`privcore.lipschitz.regions`, persistence in :mod:`privcore.lipschitz.pattern_store`, and
the searches that use the tables in :mod:`privcore.lipschitz.pattern_search`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from privcore.lipschitz.bounds import ForwardBounds
from privcore.lipschitz.codes import (
    code_dtype,
    codes_from_bits,
    consistent_mask,
    join_codes,
    layer_codes,
    to_bits,
)
from privcore.lipschitz.deadline import check_deadline
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.regions import _region_box, rows_nonempty

__all__ = [
    "MAX_GLOBAL_NEURONS",
    "MAX_PATTERNS",
    "TABLE_DOMAIN",
    "PatternTable",
    "RegionMemo",
    "box_pattern_table",
    "global_pattern_table",
    "global_table_applies",
    "stable_masks",
    "threshold_pattern_table",
]

#: networks with at most this many hidden neurons get a global pattern table
MAX_GLOBAL_NEURONS = 16
#: realised-pattern tables are only used for boxes inside [−TABLE_DOMAIN, TABLE_DOMAIN]^d. An EMPTY
#: label comes from a floating-point LP over ℝ^d; a region that exists only as a degenerate sliver
#: millions of units away (seen: one at |x| ≈ 6e6, on its boundary to 1e-11) may get it. Latent
#: balls live within a few units of the origin, so inside this domain the label is a proof
#: (tests/test_lipschitz_patterns.py checks the labels against a reference LP on this box);
#: a box outside it falls back to the per-box enumeration / MILP, which use no such label. Labels
#: loaded from stored certificates (:mod:`privcore.lipschitz.region_certs`) are proven on this
#: domain only.
TABLE_DOMAIN = 1e3
#: largest per-box enumeration (patterns of the unstable neurons)
MAX_PATTERNS = 1 << 14
_CHUNK = 4096


class RegionMemo:
    """What is known of the region of each pattern of one threshold table, filled on demand.

    Per pattern (position in the table): unknown, empty (in all of ℝ^d when resolved here; on
    [−TABLE_DOMAIN, TABLE_DOMAIN]^d, the only place tables serve, when loaded from a verified
    certificate), or contained in a padded bounding box (:func:`_region_box`, 2d + 1 small LPs);
    in memory also "non-empty, box not yet computed" (:meth:`meets_space`, one LP). A search pays
    one LP for each region it reaches; boxes come later, in bulk
    (:func:`~privcore.lipschitz.pattern_search._searched`), once per process, or from certificates
    an earlier process stored, verified here (:mod:`~privcore.lipschitz.pattern_store`). Every
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
        #: searches served so far, and whether a full resolution has been started
        self.searches = 0
        self.completing = False
        #: regions proven non-empty whose box is not computed yet
        self.nonempty = np.zeros(n, dtype=bool)

    def meets_space(self, pos: int, G: np.ndarray, h: np.ndarray) -> bool:
        """Is pattern ``pos``'s region (``G x ≤ h``) non-empty? One feasibility LP the first time
        (:func:`~privcore.lipschitz.regions.rows_nonempty`); an empty region is recorded as
        :meth:`resolve` would, a non-empty one only in memory, its box left to :meth:`resolve`
        (2d more LPs that pay only when later searches reach it again)."""
        with self.lock:
            state, known = int(self.state[pos]), bool(self.nonempty[pos])
        if state != self.UNKNOWN or known:
            return state != self.EMPTY
        nonempty = rows_nonempty(G, h)
        with self.lock:
            if self.state[pos] == self.UNKNOWN:
                if nonempty:
                    self.nonempty[pos] = True
                else:
                    self.state[pos] = self.EMPTY
            return bool(self.state[pos] != self.EMPTY)

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
    #: per pattern, the lower end of its norm where an ∞→1 search stopped early and ``norms`` is only
    #: an upper bound (:meth:`~privcore.lipschitz.norms.Norms.bracket`); None: every norm is exact
    lower: np.ndarray | None = None

    def lower_norm(self, k: int) -> float:
        """A certified lower bound on pattern ``k``'s norm (the norm itself when exact): what a
        witness or a failed decision may use."""
        return float(self.norms[k] if self.lower is None else self.lower[k])

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
                            floor=self.floor, regions=self.regions, index=self.positions[idx],
                            lower=None if self.lower is None else self.lower[idx])

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


def _norm_values(jac: np.ndarray, norms: Norms) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` ends of each Jacobian's norm (:meth:`Norms.bracket`)."""
    low, up = np.empty(jac.shape[0]), np.empty(jac.shape[0])
    for s in range(0, jac.shape[0], _CHUNK):
        low[s : s + _CHUNK], up[s : s + _CHUNK] = norms.bracket(jac[s : s + _CHUNK])
    return low, up


def _lower_or_none(low: np.ndarray, up: np.ndarray) -> np.ndarray | None:
    return None if np.array_equal(low, up) else low


def _jacobians_of_codes(net: ReluNetwork, codes: np.ndarray) -> np.ndarray:
    pats = net.split_pattern(to_bits(codes, net.n_hidden))
    return net.jacobians(np.zeros((codes.shape[0], net.in_dim)), pats)


def _table(net: ReluNetwork, codes: np.ndarray, norms: Norms) -> PatternTable:
    values, low = np.empty(codes.shape[0]), np.empty(codes.shape[0])
    for s in range(0, codes.shape[0], _CHUNK):
        check_deadline("a pattern table")
        jac = _jacobians_of_codes(net, codes[s : s + _CHUNK])
        low[s : s + _CHUNK], values[s : s + _CHUNK] = _norm_values(jac, norms)
    order = np.argsort(-values, kind="stable")
    return PatternTable(codes=codes[order], norms=values[order], n_hidden=net.n_hidden,
                        lower=_lower_or_none(low[order], values[order]))


_LOCK = threading.Lock()
_GLOBAL: OrderedDict[tuple, PatternTable] = OrderedDict()


_BOX_WORK: OrderedDict[tuple, int] = OrderedDict()


def global_table_applies(net: ReluNetwork) -> bool:
    """Does :func:`global_pattern_table` list this network's patterns (≤ MAX_GLOBAL_NEURONS of them)?"""
    return net.n_hidden <= MAX_GLOBAL_NEURONS and len(net.weights) > 1


def global_pattern_table(
    net: ReluNetwork, norms: Norms, *, box_patterns: int | None = None
) -> PatternTable | None:
    """All 2^n patterns of a network with n ≤ MAX_GLOBAL_NEURONS hidden neurons (memoised per model
    hash and norms), else None. Its first norm bounds L over every box (and all of ℝ^d).

    ``box_patterns``: the size of the box's own table, which the caller uses instead when this
    returns None. Then the global table is built only once the box tables of this model add up to
    its 2^n patterns (and always when the box's table is too large to enumerate): one ball pays for
    its own patterns, a model queried often gets the shared table, and neither pays more than twice
    the cheaper choice (the ski-rental rule)."""
    if not global_table_applies(net):
        return None
    key = (net.digest, norms)
    with _LOCK:
        hit = _GLOBAL.get(key)
        if hit is not None:
            _GLOBAL.move_to_end(key)
            return hit
        if box_patterns is not None and box_patterns <= MAX_PATTERNS:
            work = _BOX_WORK.pop(key, 0) + box_patterns
            _BOX_WORK[key] = work
            while len(_BOX_WORK) > 1024:
                _BOX_WORK.popitem(last=False)
            if work < (1 << net.n_hidden):
                return None
    table = _table(net, np.arange(1 << net.n_hidden, dtype=np.int64), norms)
    with _LOCK:
        _GLOBAL[key] = table
        _BOX_WORK.pop(key, None)
        while len(_GLOBAL) > 16:
            _GLOBAL.popitem(last=False)
    return table


def _last_layer_max(w_last: np.ndarray, M: np.ndarray, norms: Norms) -> np.ndarray:
    """``max over D ∈ {0,1}^n of ‖W_last D M_f‖`` for each ``M_f`` of the stack ``M`` (N, n, d), exactly.

    ‖J‖_{p→q} = max over vertices s of the input ball and c of the dual output ball of cᵀJs, and
    cᵀ W D M s = Σ_j D_j a_j(c) b_j(s), maximised over D by keeping the positive terms. As
    max(0, a·b) = max(0, a)·max(0, b) + max(0, −a)·max(0, −b), the table over all (c, s) is two
    matrix products: A⁺B⁺ + A⁻B⁻."""
    S, C = norms.dual_vertices(M.shape[2], w_last.shape[0])  # (k_s, d), (k_c, m)
    A = C @ w_last  # (k_c, n)
    a_pos, a_neg = np.maximum(A, 0.0), np.maximum(-A, 0.0)
    out = np.empty(M.shape[0])
    step = max(1, (1 << 18) // max(1, A.shape[0] * S.shape[0]))  # scratch of a few MB: stays in cache
    for s0 in range(0, M.shape[0], step):
        B = M[s0 : s0 + step] @ S.T  # (c, n, k_s)
        vals = np.matmul(a_pos, np.maximum(B, 0.0)) + np.matmul(a_neg, np.maximum(-B, 0.0))
        out[s0 : s0 + step] = vals.max(axis=(1, 2))
    return out


def _completion_bound(net: ReluNetwork, layer: int, M: np.ndarray, norms: Norms) -> np.ndarray:
    """Upper bound on ‖J‖ over every completion of patterns fixed up to hidden layer ``layer − 1``,
    ``M`` (N, n_layer, d) being the pre-activation Jacobian of hidden layer ``layer``: the last
    free layer exactly (:func:`_last_layer_max`), earlier ones in interval arithmetic."""
    n_hidden = len(net.weights) - 1
    if layer == n_hidden - 1:
        return _last_layer_max(net.weights[-1], M, norms)
    mid, rad = M, np.zeros_like(M)
    for j in range(layer, n_hidden):
        lo, hi = np.minimum(mid - rad, 0.0), np.maximum(mid + rad, 0.0)
        w = net.weights[j + 1]
        mid, rad = np.matmul(w, (lo + hi) / 2.0), np.matmul(np.abs(w), (hi - lo) / 2.0)
    return np.atleast_1d(norms.of_interval(mid, rad))


#: a certified upper bound per matrix of a stack (n, m, d) → (n,) (:func:`threshold_pattern_table`)
Bound = Callable[[np.ndarray], np.ndarray]

_THRESHOLD: OrderedDict[tuple, PatternTable | None] = OrderedDict()
#: most patterns whose exact norm a threshold table may evaluate
MAX_THRESHOLD_WORK = 1 << 20
#: widest hidden layer a threshold table expands (2^width patterns per group)
MAX_THRESHOLD_LAYER_WIDTH = 12
#: most floating-point operations a threshold table's bounds may cost (a few seconds): beyond it the
#: build is not started and the caller goes on without a table, instead of paying minutes for it
MAX_THRESHOLD_FLOPS = 2e10


def _bound_flops(net: ReluNetwork, layer: int, groups: int, norms: Norms) -> float:
    """Cost estimate of :func:`_completion_bound` on ``groups`` matrices at hidden layer ``layer``."""
    d, m = net.in_dim, net.out_dim
    if layer == len(net.weights) - 2:  # the exact last layer: two products per (output, input) vertex pair
        k_s, k_c = norms.dual_sizes(d, m)
        return 4.0 * groups * float(k_c) * float(k_s) * net.hidden_widths[layer]
    widths = net.hidden_widths
    return 4.0 * groups * d * sum(widths[j] * widths[j + 1] for j in range(layer, len(widths) - 1))


def threshold_pattern_table(
    net: ReluNetwork, threshold: float, norms: Norms, *, last_bound: Bound | None = None
) -> PatternTable | None:
    """Every activation pattern with ``‖J_D‖ > threshold``, for networks too wide for the full table.

    Branch and bound over the hidden layers: the patterns of the first layers are expanded, and a
    group is dropped as soon as a bound on every completion (interval arithmetic; the last layer
    exactly) is ≤ threshold. Memoised per model, norms, threshold and ``last_bound`` (PTR asks with
    one Δp for every image). None when more than ``MAX_THRESHOLD_WORK`` patterns would need evaluating
    or the bounds would cost more than ``MAX_THRESHOLD_FLOPS`` (estimated before each layer is expanded).

    ``last_bound``: for a quantity that ``norms`` bounds from above (e.g. ‖J‖_{∞→2} ≤ ‖J‖_{∞→1}), a
    certified upper bound on it per Jacobian of a stack, used on the last layer in place of the exact
    norm: the table then holds every pattern whose bound exceeds ``threshold`` (a superset of those
    whose quantity does), with the bound (times 1 + 1e-9) as its value and 0 as its lower end."""
    key = (net.digest, norms, float(threshold), last_bound)
    with _LOCK:
        if key in _THRESHOLD:
            _THRESHOLD.move_to_end(key)
            return _THRESHOLD[key]
    table = _threshold_table(net, threshold, norms, last_bound)
    with _LOCK:  # a failure is remembered too: it would fail again for every box
        _THRESHOLD[key] = table
        while len(_THRESHOLD) > 64:
            _THRESHOLD.popitem(last=False)
    return table


def _threshold_table(net: ReluNetwork, threshold: float, norms: Norms,
                     last_bound: Bound | None = None) -> PatternTable | None:
    widths = net.hidden_widths
    if max(widths) > MAX_THRESHOLD_LAYER_WIDTH:
        return None
    n = net.n_hidden
    codes = np.zeros(1, dtype=code_dtype(n))
    M = net.weights[0][None, :, :]  # pre-activation Jacobian of hidden layer 0, no pattern fixed yet
    keep = _completion_bound(net, 0, M, norms) > threshold
    codes, M = codes[keep], M[keep]
    values, lows = np.empty(0), np.empty(0)
    for i, width in enumerate(widths):
        bits = to_bits(np.arange(1 << width, dtype=np.int64), width)
        pcodes = layer_codes(width, net.hidden_offsets[i], n)
        if codes.size * bits.shape[0] > MAX_THRESHOLD_WORK:
            return None
        last = i == len(widths) - 1
        if not last and _bound_flops(net, i + 1, codes.size * bits.shape[0], norms) > (
            MAX_THRESHOLD_FLOPS
        ):
            return None
        new_codes, new_M, new_vals, new_lows = [], [], [], []
        step = max(1, _CHUNK * 8 // bits.shape[0])
        for s0 in range(0, codes.size, step):
            check_deadline("a threshold pattern table")
            Mc = M[s0 : s0 + step]
            DM = bits[None, :, :, None] * Mc[:, None, :, :]  # (c, P, n_i, d)
            nxt = np.matmul(net.weights[i + 1], DM).reshape(-1, net.weights[i + 1].shape[0], Mc.shape[2])
            cc = join_codes(codes[s0 : s0 + step], pcodes, n)
            if last:
                # Σ|J_ij| bounds each of the four operator norms: only the patterns it does not
                # already put ≤ threshold (with a margin far above rounding) get the exact norm
                vals = np.full(nxt.shape[0], -np.inf)
                low = vals.copy()
                maybe = np.abs(nxt).sum(axis=(1, 2)) * (1.0 + 1e-9) > threshold
                if last_bound is None:
                    low[maybe], vals[maybe] = _norm_values(nxt[maybe], norms)
                else:
                    low[maybe], vals[maybe] = 0.0, np.asarray(last_bound(nxt[maybe])) * (1.0 + 1e-9)
            else:
                vals = low = _completion_bound(net, i + 1, nxt, norms)
            sel = vals > threshold
            new_codes.append(cc[sel])
            new_vals.append(vals[sel])
            new_lows.append(low[sel])
            if not last:
                new_M.append(nxt[sel])
        codes = np.concatenate(new_codes) if new_codes else np.zeros(0, dtype=code_dtype(n))
        values = np.concatenate(new_vals) if new_vals else np.zeros(0)
        lows = np.concatenate(new_lows) if new_lows else np.zeros(0)
        if not last:
            M = np.concatenate(new_M) if new_M else np.zeros((0, widths[i + 1], net.in_dim))
        if codes.size == 0:
            values = lows = np.zeros(0)
            break
    order = np.argsort(-values, kind="stable")
    return PatternTable(codes=codes[order], norms=values[order], n_hidden=net.n_hidden,
                        floor=float(threshold), lower=_lower_or_none(lows[order], values[order]))


def stable_masks(fwd: ForwardBounds) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks over all hidden neurons: stably active and stably inactive on the box."""
    on = np.concatenate([fwd.active(i) for i in range(len(fwd.lower))])
    off = np.concatenate([fwd.inactive(i) for i in range(len(fwd.lower))])
    return on, off


def box_pattern_table(net: ReluNetwork, fwd: ForwardBounds, norms: Norms) -> PatternTable | None:
    """The patterns consistent with the box's stable neurons, when there are at most MAX_PATTERNS."""
    on, off = stable_masks(fwd)
    free = np.flatnonzero(~(on | off))
    if (1 << free.size) > MAX_PATTERNS:
        return None
    bits = np.repeat(on[None, :].astype(np.float64), 1 << free.size, axis=0)
    bits[:, free] = to_bits(np.arange(1 << free.size, dtype=np.int64), free.size)
    return _table(net, codes_from_bits(bits), norms)
