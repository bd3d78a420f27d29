"""Exact local Lipschitz values and decisions by searching activation-pattern tables.

The consistent patterns of a box (:mod:`privcore.lipschitz.patterns`) are visited in decreasing
norm, each with one LP ("does the region meet the box, and how close to the centre?"): the first
one that does is L exactly (:func:`pattern_value`), and a decision "L ≤ τ?" only needs the patterns
with norm > τ (:func:`pattern_decide`, :func:`pattern_nearest_violation`: the exact distance from
the centre to the nearest region with ‖J_D‖ > τ). Before any LP, a search drops every candidate that
provably misses the ball: by a row bound, by its box, or by interval constraint propagation from
ball ∩ box (:func:`_screen`); all three are proofs, so only candidates that may meet the ball get
an LP, in increasing order of their distance bound. With more hidden neurons the enumeration runs
over the box's *unstable* neurons only, when there are few of them; otherwise the callers fall
back to other steps (:mod:`privcore.lipschitz.decide`). The answers are the MILP's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privcore.lipschitz.bounds import ForwardBounds
from privcore.lipschitz.codes import to_bits
from privcore.lipschitz.deadline import check_deadline
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.pattern_store import (
    realised_pattern_table,
    resolve_regions,
    threshold_table_due,
)
from privcore.lipschitz.patterns import (
    _CHUNK,
    TABLE_DOMAIN,
    PatternTable,
    RegionMemo,
    box_pattern_table,
    global_pattern_table,
    global_table_applies,
    stable_masks,
)
from privcore.lipschitz.regions import (
    _box_distance_bounds,
    _box_refutes,
    _distance_lp,
    _region_rows_batch,
    _row_distance_bounds,
)

__all__ = [
    "RESOLVE_AFTER",
    "RESOLVE_STEP",
    "NearestViolation",
    "PatternResult",
    "in_table_domain",
    "nonempty_threshold_table",
    "pattern_decide",
    "pattern_nearest_violation",
    "pattern_upper_bound",
    "pattern_value",
]


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
        """Before candidate ``k``'s LP: if its region is still unknown, one feasibility LP
        (:meth:`RegionMemo.meets_space`; the box is computed later, when searches have reached the
        table often, :func:`_searched`); False when that proves it misses ``B(center, radius)`` (an
        empty region, or one whose box, if another search computed it meanwhile, is too far or
        refuted by propagation), so the distance LP can be skipped."""
        if memo is None or self.pending is None or not self.pending[k]:
            return True
        self.pending[k] = False
        p = int(self.pos[k])
        if not memo.meets_space(p, self.G[k], self.h[k]):
            return False
        with memo.lock:
            if memo.state[p] != RegionMemo.BOXED:
                return True
            lo, hi = memo.lower[p].copy(), memo.upper[p].copy()
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
        check_deadline("the screening of activation patterns")
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


def nonempty_threshold_table(net: ReluNetwork, threshold: float, norms: Norms) -> PatternTable | None:
    """:func:`threshold_pattern_table` without the patterns whose region is empty (on the table domain),
    with a bounding box of each remaining region: :func:`realised_pattern_table` with every
    region resolved up front (:func:`resolve_regions`).

    Most activation patterns of a trained network are never realised (an 8→10→10→8 obfuscator has
    a few hundred to a few thousand non-empty regions among tens of thousands of patterns above
    Δp); an empty region meets no ball, so dropping it changes no decision and no bound. The
    searches do not need this eager form (they resolve what they reach); it serves tests, the
    benchmark and :func:`precompute_pattern_table`."""
    table = realised_pattern_table(net, threshold, norms)
    if table is None:
        return None
    resolve_regions(net, table, norms)
    return table.subset(np.flatnonzero(table.state != RegionMemo.EMPTY))


#: after this many searches on a partly resolved table, every further search first resolves up to
#: ``RESOLVE_STEP`` more regions (in table order) until none is left: a lazy search screens every
#: unresolved pattern (most of them empty) without a box, so batch work (an experiment, the
#: dashboard's later images) is faster with the complete table, while the first φ of a process
#: only pays for the regions it reaches and no single later image pays for the whole table
RESOLVE_AFTER = 8
RESOLVE_STEP = 512


def _searched(net: ReluNetwork, table: PatternTable) -> None:
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
    net: ReluNetwork, fwd: ForwardBounds, norms: Norms, threshold: float | None = None, realised: bool = True
) -> PatternTable | None:
    """The global table (small networks, once their balls' own tables have cost as much:
    :func:`global_pattern_table`); for a decision at ``threshold`` the patterns above it,
    with their lazily resolved regions (computed once per model and threshold, then shared by every
    box; only when ``realised``, i.e. the box is inside :data:`TABLE_DOMAIN`); else the table of the
    box's unstable neurons.

    Budget: the threshold table costs up to seconds to build (every pattern above the threshold),
    the box's table milliseconds (at most ``MAX_PATTERNS`` of them), but only the threshold table
    is shared by later boxes. So it is built for a box too wide to enumerate, or once the threshold
    has come back often enough to pay for it (:func:`threshold_table_due`: PTR repeats Δp); until
    then a box that can be enumerated uses its own table, unless a threshold table is already in
    this process's memory. Both are certified (the box's table is a superset of what the box
    realises), so only the cost differs."""
    table = global_pattern_table(net, norms, box_patterns=1 << min(fwd.n_unstable, 62))
    shared = (table is None and not global_table_applies(net) and threshold is not None and realised
              and len(net.weights) > 2)
    if shared:
        due = threshold_table_due(net, threshold, norms)
        table = realised_pattern_table(net, threshold, norms, build=due)
    if table is None:
        table = box_pattern_table(net, fwd, norms)
    if table is None and shared:  # the box is too wide to enumerate: the shared table it is
        table = realised_pattern_table(net, threshold, norms)
    return table


def pattern_upper_bound(
    net: ReluNetwork,
    fwd: ForwardBounds,
    norms: Norms,
    *,
    threshold: float | None = None,
    realised: bool = True,
) -> float | None:
    """``max ‖J_D‖`` over the patterns consistent with the box's stable neurons: a certified upper
    bound on L over the box, monotone under inclusion, without any LP (None if not enumerable).
    With a partial table for ``threshold``, a value ≤ threshold is only known to be ≤ its floor.
    ``realised=False`` (a box outside :data:`TABLE_DOMAIN`) keeps realised-pattern tables out."""
    table = _table_for(net, fwd, norms, threshold, realised)
    if table is None:
        return None
    values = _candidates(table, fwd).norms
    return float(values[0]) if values.size else table.rest


def pattern_decide(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    threshold: float,
    fwd: ForwardBounds,
    norms: Norms,
    *,
    max_lps: int = 256,
) -> PatternResult | None:
    """Exactly decide ``L(f, B(center, radius)) ≤ threshold`` by enumeration (module docstring),
    or None when the network/box is too large or more than ``max_lps`` LPs would be needed."""
    table = _table_for(net, fwd, norms, threshold, in_table_domain(center, radius))
    if table is None:
        return None
    _searched(net, table)
    cand = _candidates(table, fwd)
    codes, values = cand.codes, cand.norms
    above = int(np.searchsorted(-values, -threshold, side="left"))  # values[:above] > threshold
    top = float(values[0]) if values.size else table.rest
    if above == 0:
        return PatternResult(passed=True, value=None, upper=top, lower=0.0, lower_radius=0.0, n_lps=0)
    scr = _screen(net, cand.subset(np.arange(above)), center, radius)
    if scr.idx.size > max_lps:
        return None
    count = 0
    for pos in range(scr.idx.size):
        check_deadline("the region LPs of a pattern search")
        if not scr.settle(pos, table.regions, center, radius):
            continue
        count += 1
        hit = _distance_lp(scr.G[pos], scr.h[pos], center, radius)
        if hit is not None:
            k = int(scr.idx[pos])
            if cand.lower_norm(k) <= threshold:  # only an upper bound is known above τ: undecided
                return None
            pattern = to_bits(codes[k : k + 1], table.n_hidden)[0]
            return PatternResult(passed=False, value=None, upper=top, lower=cand.lower_norm(k),
                                 lower_radius=hit[0], n_lps=count, pattern=pattern, point=hit[1])
    upper = float(values[above]) if above < values.size else table.rest
    return PatternResult(passed=True, value=None, upper=upper, lower=0.0, lower_radius=0.0, n_lps=count)


def pattern_value(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    fwd: ForwardBounds,
    norms: Norms,
    *,
    max_lps: int = 512,
) -> PatternResult | None:
    """Exact ``L(f, B(center, radius))``: the first consistent pattern, in decreasing norm, whose
    region meets the box; None if the enumeration does not apply or needs over ``max_lps`` LPs.
    ``lower`` < ``value`` only where that pattern's ∞→1 search stopped early (then not exact)."""
    table = _table_for(net, fwd, norms)
    if table is None:
        return None
    cand = _candidates(table, fwd)
    codes, values = cand.codes, cand.norms
    n_lps = 0
    for start in range(0, codes.size, 1024):
        scr = _screen(net, cand.subset(np.arange(start, min(codes.size, start + 1024))), center, radius)
        for k, Gk, hk in zip(scr.idx + start, scr.G, scr.h, strict=True):
            if n_lps >= max_lps:
                return None
            check_deadline("the region LPs of a pattern search")
            n_lps += 1
            hit = _distance_lp(Gk, hk, center, radius)
            if hit is not None:
                v = float(values[k])
                pattern = to_bits(codes[k : k + 1], table.n_hidden)[0]
                return PatternResult(passed=None, value=v, upper=v, lower=cand.lower_norm(k),
                                     lower_radius=hit[0], n_lps=n_lps, pattern=pattern, point=hit[1])
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
    norms: Norms,
    *,
    max_lps: int = 256,
    hint: float | None = None,
) -> NearestViolation | None:
    """Distance from ``center`` to the nearest point whose Jacobian norm exceeds ``threshold``,
    within ``B(center, radius)``: LPs over the candidate patterns in order of a distance lower
    bound, pruning every candidate whose bound exceeds the best distance found (``hint``: a
    known upper bound on it). None when enumeration does not apply or the budget is exceeded.
    This settles every decision "L(B(center, r)) ≤ threshold?" for r ≤ radius at once (one
    certified search instead of a MILP per bisection step)."""
    table = _table_for(net, fwd, norms, threshold, in_table_domain(center, radius))
    if table is None:
        return None
    _searched(net, table)
    cand = _candidates(table, fwd)
    codes, values = cand.codes, cand.norms
    above = int(np.searchsorted(-values, -threshold, side="left"))
    upper_below = float(values[above]) if above < values.size else table.rest
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
    for pos in range(scr.idx.size):
        if scr.lower[pos] > best:
            break
        if not alive[pos] or not scr.settle(pos, table.regions, center, best):
            continue
        if n_lps >= max_lps:
            return None
        check_deadline("the region LPs of a pattern search")
        n_lps += 1
        hit = _distance_lp(scr.G[pos], scr.h[pos], center, best)
        if hit is not None and (found is None or hit[0] < found[0]):
            k = int(scr.idx[pos])
            if cand.lower_norm(k) <= threshold:  # only an upper bound is known above τ: undecided
                return None
            found = (hit[0], cand.lower_norm(k), to_bits(codes[k : k + 1], table.n_hidden)[0], hit[1])
            best = hit[0]
            rest = np.flatnonzero(alive[pos + 1 :] & (scr.lower[pos + 1 :] <= best)) + pos + 1
            alive[rest] = ~scr.refuted(rest, center, best)
    if found is None:
        if hint is not None and hint < radius:
            return None  # the hint was wrong (no region within it): let the caller retry without it
        return NearestViolation(distance=np.inf, norm=0.0, pattern=None, point=None, upper_below=upper_below,
                                n_lps=n_lps)
    return NearestViolation(distance=found[0], norm=found[1], pattern=found[2], point=found[3],
                            upper_below=upper_below, n_lps=n_lps)
