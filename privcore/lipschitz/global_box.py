"""A certified Lipschitz constant of the obfuscator over a public clipping box.

Why. PTR (posthoc paper, Alg. 1) spends half its budget on a test, may return ⊥, needs δ and a
certification per image. If instead G ≥ sup over a public box B of ‖J_f‖_{∞→1} is certified, then
f(clip_B z) + Lap(G·R/ε) is (ε, 0, R)-private for every pair within ℓ∞ distance R (docs/DESIGN.md, "Beyond
the papers"; :mod:`privcore.mechanisms.global_mechanism` is the release). This module holds the box
(:class:`ClipBox`) and computes G over it (:func:`compute_global_constant`), verifies a stored G
(:func:`verify_global_constant`), and combines both with an in-memory memo
(:func:`certified_global_constant`).

The box. Public and fixed before any private input: the training embeddings' per-coordinate range plus
a margin (:meth:`ClipBox.from_points`; the models' cards record it). A box read from a card is a
parameter, like R: clipping to *any* box is 1-Lipschitz in ℓ∞, so any box gives the guarantee once G is
certified for it here.

G, by a chain of certified upper bounds on L(f, B) = sup over B of the generalised Jacobian's norm
(LipMIP's value, Jordan & Dimakis 2020, Thm. 3.2); the smallest one wins and :class:`How` names it:

* ``exact``: the activation patterns above a verified witness, each region tested against the box
  itself (:mod:`privcore.lipschitz.box_patterns`; networks whose hidden layers are ≤ 12 wide: every
  shipped obfuscator, in seconds). ``enumeration-bound`` when its deadline came first;
* ``all-patterns``: a bound on the largest ‖J_D‖ over every pattern the box's interval bounds allow
  (the box's stable neurons fixed). Two hidden layers: decisions "≤ τ?" of
  :func:`~privcore.lipschitz.pattern_bilinear.bilinear_pattern_decide` (branch and bound on both
  layers, chord relaxations), the first at 1.25 × the larger of twice the verified witness and 4/3
  of a value some allowed pattern reaches (the floor), then lower after each pass (higher after one
  that runs out of its share of the time before any pass), within three quarters of the time left;
  the smallest τ passed is the bound. Other depths:
  :func:`~privcore.lipschitz.pattern_bnb.max_pattern_norm` (node budget ``max_nodes``, 2 M by default);
* ``cube-exact`` / ``split-bound``: the engine's split branch and bound
  (:func:`~privcore.lipschitz.splitting.split_value`: CROWN-style Clarke bounds over sub-boxes and
  neuron splits) on the smallest ℓ∞ cube containing the box (a superset, so an upper bound), with the
  time left: its exact value, or the largest bound of the sub-boxes still open at the deadline.
  ``milp-bound``: LipMIP (:func:`~privcore.lipschitz.engine.local_lipschitz`) where the split search
  does not apply;
* ``interval``: the smallest of the interval-Jacobian bound on the box, the per-vertex-pair interval
  bound on the covering cube and the product of the layers' norms. Always finite (the network's weight
  product is capped, :data:`~privcore.lipschitz.network.MAX_WEIGHT_PRODUCT`), so G never reads ``inf``.

Floating point: every step's bound already carries that step's own safety margin; the published G is
the winner inflated by 1e-9·(1 + G) (far above the rounding of the float64 sums behind it) and rounded
up to 7 significant digits, so a card's G and a fresh computation read the same. A hint h passes
verification when the engine proves L ≤ τ for the τ with τ + 1e-9·(1 + τ) ≤ h: then h is used as is.

Trust (docs/TRUST.md): every G this module returns was computed or verified by this process from the
weights; a hint read from a card only saves time when it verifies, and a hint that does not verify is
ignored and G recomputed. The memo lives in memory only.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Context, Decimal
from enum import StrEnum
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from privcore._inflight import Memo
from privcore.errors import CertificationError, ParameterError
from privcore.lipschitz.bounds import backward_bounds, forward_bounds, global_upper_bound, jacobian_norms
from privcore.lipschitz.box_patterns import box_pattern_search
from privcore.lipschitz.network import ReluNetwork, as_network
from privcore.lipschitz.norms import DEFAULT_NORMS
from privcore.lipschitz.pair_interval import pair_interval_bound
from privcore.lipschitz.pattern_bilinear import bilinear_pattern_decide
from privcore.lipschitz.pattern_bnb import MAX_PAIRS, max_pattern_norm, pattern_norm_floor
from privcore.lipschitz.patterns import stable_masks
from privcore.lipschitz.witnesses import ascend_witness
from privcore.validation import check_finite_array, check_int, check_nonnegative, check_positive

__all__ = [
    "DEFAULT_TIME_LIMIT",
    "ClipBox",
    "GlobalConstant",
    "How",
    "box_witness",
    "certified_global_constant",
    "compute_global_constant",
    "is_certified",
    "publish_bound",
    "verify_global_constant",
]

#: seconds a computation (and, separately, a verification) may take by default
DEFAULT_TIME_LIMIT = 60.0
#: relative (and absolute) inflation of the winning bound before it is published
_SAFETY = 1e-9
#: significant digits of a published G (rounded up)
_DIGITS = 7
#: the engine step on the covering cube only runs with at least this many seconds left
_MIN_ENGINE_SECONDS = 1.0
#: seconds kept back from the engine step (its last batch of sub-boxes runs past its deadline)
_ENGINE_RESERVE = 3.0
#: the witness's evolutionary search: rounds, points per round, best points kept
_EVOLUTION_ROUNDS = 40
_POPULATION = 1024
_ELITES = 64
#: share of the time left that the two-hidden-layer all-pattern search may take (the engine gets the rest)
_PATTERN_SHARE = 0.75
#: the first all-pattern decision is at _FIRST_MARGIN × the larger of _FIRST_RATIO × the witness and
#: _FLOOR_MARGIN × the pattern floor (a value some allowed pattern reaches): a decision's cost grows
#: steeply as τ nears the largest pattern, so the first one starts far enough above to pass in seconds
_FIRST_RATIO = 2.0
_FLOOR_MARGIN = 4.0 / 3.0
_FIRST_MARGIN = 1.25
#: after a pass at τ the next decision is at τ × this (or halfway to the floor), × _LONG_STEP when the
#: pass took under _QUICK_SHARE of the time then left
_STEP_DOWN = 0.96
_LONG_STEP = 0.9
_QUICK_SHARE = 0.1
#: until a decision passes, each may take this share of the time left; one that runs out moves the
#: next threshold up by _STEP_UP, at most to _STEP_DOWN × the open nodes' bound (which stands as a
#: certified bound meanwhile)
_TRIAL_SHARE = 0.4
_STEP_UP = 1.25
#: the old all-pattern search's node budget when none is given (it has no deadline)
_DEFAULT_MAX_NODES = 2_000_000
_TOKEN = object()  # marks constants certified by this module in this process


class How(StrEnum):
    """Which certified bound gave G (module docstring)."""

    EXACT = "exact"
    ENUMERATION_BOUND = "enumeration-bound"
    CUBE_EXACT = "cube-exact"
    SPLIT_BOUND = "split-bound"
    MILP_BOUND = "milp-bound"
    ALL_PATTERNS = "all-patterns"
    INTERVAL = "interval"


#: ties go to the earlier (more informative) label
_PREFERENCE = tuple(How)


@dataclass(frozen=True, eq=False)
class ClipBox:
    """The public box ``[lower, upper]`` (one bound per embedding coordinate) that z is clipped to.

    Validated on construction: finite 1-D arrays of one length with ``lower ≤ upper`` everywhere
    (ParameterError naming the coordinate otherwise); stored read-only as float64."""

    lower: np.ndarray
    upper: np.ndarray

    def __post_init__(self) -> None:
        lo = np.array(check_finite_array("clip_box.lower", self.lower), dtype=np.float64).reshape(-1)
        hi = np.array(check_finite_array("clip_box.upper", self.upper), dtype=np.float64).reshape(-1)
        if lo.size == 0 or lo.shape != hi.shape:
            raise ParameterError(
                "clip_box.lower and clip_box.upper must be non-empty and of one length, got "
                f"{lo.size} and {hi.size}"
            )
        bad = np.flatnonzero(lo > hi)
        if bad.size:
            i = int(bad[0])
            raise ParameterError(
                f"clip_box.lower must be ≤ clip_box.upper in every coordinate; coordinate {i} has lower "
                f"{lo[i]!r} > upper {hi[i]!r} (allowed: lower[i] ≤ upper[i])"
            )
        lo.setflags(write=False)
        hi.setflags(write=False)
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)

    @classmethod
    def from_points(cls, points: Any, *, margin: float, decimals: int = 4) -> ClipBox:
        """Per-coordinate min/max of ``points`` (n, d) widened by ``margin``, rounded outwards to
        ``decimals`` decimals (readable cards; the box only grows)."""
        pts = check_finite_array("points", points)
        if pts.ndim != 2 or pts.shape[0] == 0:
            raise ParameterError(f"points must be a non-empty (n, d) array, got shape {pts.shape}")
        m = check_nonnegative("margin", margin)
        k = check_int("decimals", decimals, minimum=0)
        lo, hi = pts.min(axis=0) - m, pts.max(axis=0) + m
        scale = 10.0**k
        rlo, rhi = np.floor(lo * scale) / scale, np.ceil(hi * scale) / scale
        return cls(np.where(rlo <= lo, rlo, np.nextafter(lo, -np.inf)),
                   np.where(rhi >= hi, rhi, np.nextafter(hi, np.inf)))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClipBox:
        """From ``{"lower": [...], "upper": [...]}`` (a card's ``clip_box``)."""
        if not isinstance(data, Mapping) or "lower" not in data or "upper" not in data:
            raise ParameterError(f"clip_box must be a mapping with 'lower' and 'upper', got {data!r}")
        return cls(data["lower"], data["upper"])

    def to_dict(self) -> dict[str, list[float]]:
        """``{"lower": [...], "upper": [...]}`` (JSON: floats round-trip exactly)."""
        return {"lower": [float(v) for v in self.lower], "upper": [float(v) for v in self.upper]}

    @property
    def dim(self) -> int:
        """The number of coordinates."""
        return int(self.lower.size)

    @property
    def digest(self) -> str:
        """SHA-256 of the bounds' float64 bytes (memo key)."""
        h = hashlib.sha256(b"privcore.ClipBox.v1")
        h.update(self.lower.astype("<f8").tobytes())
        h.update(self.upper.astype("<f8").tobytes())
        return h.hexdigest()

    def check_point(self, z: Any, name: str = "z") -> np.ndarray:
        """``z`` as a finite float64 vector of the box's dimension (ParameterError otherwise)."""
        arr = check_finite_array(name, z)
        if arr.shape != (self.dim,):
            raise ParameterError(
                f"{name} must have shape ({self.dim},) (the clipping box's dimension), got {arr.shape}"
            )
        return arr

    def clip(self, z: Any) -> np.ndarray:
        """``min(max(z, lower), upper)`` per coordinate: exact in floating point (each output is one of
        its inputs) and 1-Lipschitz in every coordinate, hence in ℓ∞."""
        return np.minimum(np.maximum(self.check_point(z), self.lower), self.upper)

    def contains(self, z: Any) -> bool:
        """True when ``z`` lies in the box (clipping leaves it unchanged)."""
        arr = self.check_point(z)
        return bool(np.all(arr >= self.lower) and np.all(arr <= self.upper))

    def covering_cube(self) -> tuple[np.ndarray, float]:
        """``(center, radius)`` of an ℓ∞ cube containing the box (rounded outwards: the engine's cubes
        are ``[center − r, center + r]`` in float64)."""
        center = (self.lower + self.upper) / 2.0
        need = np.maximum(center - self.lower, self.upper - center)
        r = float(np.max(need))
        while np.any(center - r > self.lower) or np.any(center + r < self.upper):
            r = math.nextafter(r, math.inf)
        return center, r

    @property
    def is_cube(self) -> bool:
        """True when the box is an ℓ∞ cube (every coordinate equally wide)."""
        width = self.upper - self.lower
        return bool(np.all(width == width[0]))


@dataclass(frozen=True, kw_only=True, eq=False)
class GlobalConstant:
    """G, certified by this process: L(f, box) ≤ ``value`` for the network with ``model_digest``.

    ``how`` names the evidence (:class:`How`); ``source`` is ``"computed"`` or ``"verified-hint"`` (a
    stored G that this process verified, used as is); ``lower`` is a Jacobian norm verified in float64
    at a point of the box (0 when none was sought: verification does not look for one); ``bounds`` every
    certified bound the computation obtained, by :class:`How` value; ``seconds`` what it took."""

    value: float
    how: How
    lower: float
    box: ClipBox
    model_digest: str
    source: str
    seconds: float
    bounds: Mapping[str, float] = field(default_factory=dict)
    input_norm: str = "linf"
    output_norm: str = "l1"
    _token: object = field(default=None, repr=False)

    @property
    def exact(self) -> bool:
        """True when ``value`` is L over the box itself (up to the publication's rounding up)."""
        return self.how is How.EXACT and self.source == "computed"

    def describe(self) -> str:
        """One line: G, how, and the bracket."""
        low = f", verified witness {self.lower:.6g}" if self.lower > 0 else ""
        return f"G = {self.value:.7g} ({self.how.value}, {self.source}{low}; {self.seconds:.2f} s)"


def is_certified(constant: Any) -> bool:
    """True when ``constant`` is a :class:`GlobalConstant` that this module certified in this process
    (not one built from stored data)."""
    return isinstance(constant, GlobalConstant) and constant._token is _TOKEN


def publish_bound(value: float) -> float:
    """The published G for a certified bound: inflated by 1e-9·(1 + value), rounded up to 7 digits."""
    v = check_nonnegative("value", value)
    inflated = math.nextafter(v + _SAFETY * (1.0 + v), math.inf)
    up = float(Context(prec=_DIGITS, rounding=ROUND_CEILING).plus(Decimal(inflated)))
    return up if up >= inflated else math.nextafter(inflated, math.inf)


def _verification_threshold(hint: float) -> float:
    """The τ with τ + 1e-9·(1 + τ) ≤ ``hint``: L ≤ τ proven ⇒ ``hint`` is a certified G."""
    tau = (hint - _SAFETY) / (1.0 + _SAFETY)
    while tau > 0 and tau + _SAFETY * (1.0 + tau) > hint:
        tau = math.nextafter(tau, -math.inf)
    return math.nextafter(tau, -math.inf)


def _checked(net: Any, box: Any) -> tuple[ReluNetwork, ClipBox]:
    parsed = as_network(net)
    if not isinstance(box, ClipBox):
        raise TypeError(f"box must be a ClipBox, got {type(box).__name__}")
    if box.dim != parsed.in_dim:
        raise ParameterError(
            f"box has {box.dim} coordinates but the network's input has {parsed.in_dim} "
            f"(allowed: {parsed.in_dim})"
        )
    return parsed, box


def _interval_family(net: ReluNetwork, box: ClipBox) -> float:
    """min(interval Jacobian bound on the box, per-pair interval bound on the covering cube, product of
    the layers' norms): each a certified bound on L over the box; the last is always finite."""
    fwd = forward_bounds(net, box.lower, box.upper)
    bwd = backward_bounds(net, fwd)
    with np.errstate(over="ignore", invalid="ignore"):
        best = float(DEFAULT_NORMS.of_interval(bwd.mid[0].T, bwd.rad[0].T))
        center, radius = box.covering_cube()
        pair = pair_interval_bound(net, center, radius, **DEFAULT_NORMS.kwargs)
    candidates = [global_upper_bound(net, **DEFAULT_NORMS.kwargs), best, math.inf if pair is None else pair]
    return min(v for v in candidates if not math.isnan(v))


def box_witness(
    net: Any, box: ClipBox, *, n_samples: int = 4096, seed: int = 0
) -> tuple[float, np.ndarray | None]:
    """A lower bound on L over the box: Jacobian norms at sampled points (uniform, vertices, the centre),
    verified in float64 where the network is affine nearby, then an evolutionary search (mutations at
    shrinking scales and coordinate crossover around the best points of distinct norms, so one region
    does not take every slot), then a hill climb over realised patterns from the best eight
    (:func:`~privcore.lipschitz.witnesses.ascend_witness`). ``(-inf, None)`` when none verifies.
    Seeded: a witness is evidence of a lower bound, not a privacy parameter."""
    parsed, box = _checked(net, box)
    rng = np.random.default_rng(seed)
    lo, hi = box.lower, box.upper
    pts = np.vstack([(lo + hi)[None] / 2.0, rng.uniform(lo, hi, size=(n_samples, box.dim)),
                     np.where(rng.random((n_samples // 2, box.dim)) < 0.5, lo, hi)])
    vals, ok = jacobian_norms(parsed, pts, DEFAULT_NORMS)
    vals = np.where(ok, vals * (1.0 - 1e-12), -np.inf)
    for rnd in range(_EVOLUTION_ROUNDS):
        keep = _distinct_best(vals, _ELITES)
        pts, vals = pts[keep], vals[keep]
        parents = rng.integers(0, keep.size, _POPULATION)
        # Gaussian steps, most of them short (scale × U²), at a scale shrinking by 10 % a round
        steps = rng.standard_normal((_POPULATION, box.dim)) * (rng.random((_POPULATION, 1)) ** 2)
        cand = pts[parents] + steps * (hi - lo) * 0.25 * 0.9**rnd
        cross = rng.random(cand.shape) < 0.15  # some coordinates from another of the best points
        cand = np.where(cross, pts[rng.integers(0, keep.size, _POPULATION)], cand)
        cand = np.clip(cand, lo, hi)
        cv, cok = jacobian_norms(parsed, cand, DEFAULT_NORMS)
        pts = np.vstack([pts, cand])
        vals = np.concatenate([vals, np.where(cok, cv * (1.0 - 1e-12), -np.inf)])
    best = int(np.argmax(vals))
    value, point = float(vals[best]), (pts[best] if np.isfinite(vals[best]) else None)
    order = _distinct_best(vals, 8)
    top = pts[order][np.isfinite(vals[order])]
    if top.size:
        climbed, where = ascend_witness(parsed, lo, hi, top, DEFAULT_NORMS)
        if climbed > value:
            value, point = climbed, where
    return value, point


def _distinct_best(vals: np.ndarray, k: int) -> np.ndarray:
    """Indices of up to ``k`` largest values, one per distinct value (to 12 digits) first, then the
    remaining slots by value."""
    order = np.argsort(-vals, kind="stable")
    _, first = np.unique(np.round(vals[order], 12), return_index=True)
    distinct = order[np.sort(first)]
    distinct = distinct[np.argsort(-vals[distinct], kind="stable")][:k]
    if distinct.size < k:
        rest = order[~np.isin(order, distinct)][: k - distinct.size]
        distinct = np.concatenate([distinct, rest])
    return distinct


def _verified_at(net: ReluNetwork, box: ClipBox, pattern: np.ndarray | None) -> float:
    """‖J_D‖ verified in float64 at a point of the box strictly inside the region of ``pattern`` (an LP,
    :func:`~privcore.lipschitz.regions.strict_point_for_pattern`), deflated by 1e-12; −inf if none."""
    from privcore.lipschitz.regions import strict_point_for_pattern

    if pattern is None:
        return -math.inf
    point = strict_point_for_pattern(net, box.lower, box.upper, net.split_pattern(pattern))
    if point is None:
        return -math.inf
    vals, ok = jacobian_norms(net, point[None], DEFAULT_NORMS)
    return float(vals[0]) * (1.0 - 1e-12) if ok[0] else -math.inf


def _finish(net: ReluNetwork, box: ClipBox, bounds: dict[str, float], *, lower: float, source: str,
            start: float, value: float | None = None) -> GlobalConstant:
    finite = {k: v for k, v in bounds.items() if math.isfinite(v) and v >= 0}
    if not finite:
        raise CertificationError(f"no finite certified bound on L over the box: {bounds}; nothing released")
    best = min(finite.values())
    how = next(How(h) for h in _PREFERENCE if finite.get(h) == best)
    published = publish_bound(best) if value is None else value
    return GlobalConstant(value=published, how=how, lower=max(lower, 0.0), box=box, model_digest=net.digest,
                          source=source, seconds=time.perf_counter() - start, bounds=dict(bounds),
                          _token=_TOKEN)


def _engine_step(net: ReluNetwork, box: ClipBox, bounds: dict[str, float], lower: float,
                 point: np.ndarray | None, seconds: float, threads: int) -> float:
    """The engine on the covering cube for ``seconds``: the split branch and bound's value
    (:func:`~privcore.lipschitz.splitting.split_value`, certified also when it stops early), or LipMIP
    (:func:`~privcore.lipschitz.engine.local_lipschitz`) where the split search does not apply. Records
    its bound in ``bounds``; returns the (possibly raised) verified lower bound on the box."""
    center, radius = box.covering_cube()
    if radius <= 0:
        return lower
    from privcore.lipschitz.engine import MIP_GAP, local_lipschitz
    from privcore.lipschitz.splitting import split_value

    start = lower if point is not None and math.isfinite(lower) else -math.inf
    try:
        res = split_value(net, center, radius, norms=DEFAULT_NORMS, rtol=MIP_GAP, lower=start, point=point,
                          max_boxes=1 << 40, max_seconds=seconds)
        if res is not None:
            exact = How.EXACT if box.is_cube else How.CUBE_EXACT
            how = exact if res.complete else How.SPLIT_BOUND
            bounds[how.value] = float(res.upper)
            if res.point is not None and box.contains(np.asarray(res.point)):
                lower = max(lower, float(res.lower))  # verified in float64 in its region, in the box
            return lower
        cert = local_lipschitz(net, center, radius, time_limit=seconds, threads=threads,
                               **DEFAULT_NORMS.kwargs)
    except (ValueError, CertificationError):
        return lower  # the cube leaves the engine's range: the other bounds stand
    how = (How.EXACT if box.is_cube else How.CUBE_EXACT) if cert.exact else How.MILP_BOUND
    bounds[how.value] = float(cert.upper)
    if cert.argmax is not None and box.contains(np.asarray(cert.argmax)):
        lower = max(lower, float(cert.lower))
    return lower


def compute_global_constant(
    net: Any,
    box: ClipBox,
    *,
    time_limit: float = DEFAULT_TIME_LIMIT,
    max_nodes: int | None = None,
    threads: int = 1,
) -> GlobalConstant:
    """G over ``box`` by the chain of the module docstring, within about ``time_limit`` seconds (the
    enumeration stops at the deadline; the all-pattern search of two hidden layers takes up to three
    quarters of the time then left, other depths' is bounded by ``max_nodes``, 2 M by default, which
    also bounds each two-layer decision when given; the engine step gets what is left). Never ``inf``:
    the interval family is always there."""
    start = time.perf_counter()
    net, box = _checked(net, box)
    limit = check_positive("time_limit", time_limit)
    max_nodes = None if max_nodes is None else check_int("max_nodes", max_nodes, minimum=1)
    deadline = start + limit
    bounds: dict[str, float] = {How.INTERVAL.value: _interval_family(net, box)}
    lower, point = box_witness(net, box)
    if math.isfinite(lower) and lower > 0:
        tau = lower * (1.0 - 1e-9)  # the witness's own pattern is above τ whatever the rounding
        search = box_pattern_search(net, box.lower, box.upper, tau, DEFAULT_NORMS, deadline=deadline)
        if search is not None and search.passed is False:
            bounds[How.EXACT.value] = search.value
            lower = max(lower, _verified_at(net, box, search.pattern))
        elif search is not None and search.passed is None:
            bounds[How.ENUMERATION_BOUND.value] = search.value
        # passed True would contradict the witness's own region: a numerical failure, not used
    if How.EXACT.value not in bounds:
        on, off = stable_masks(forward_bounds(net, box.lower, box.upper))
        now = time.perf_counter()
        _all_pattern_step(net, on, off, bounds, lower, now + _PATTERN_SHARE * max(deadline - now, 0.0),
                          max_nodes, threads)
        left = deadline - time.perf_counter()
        left -= min(_ENGINE_RESERVE, 0.2 * left)  # its last batch of sub-boxes ends after its deadline
        if left >= _MIN_ENGINE_SECONDS:
            lower = _engine_step(net, box, bounds, lower, point, left, threads)
    return _finish(net, box, bounds, lower=lower, source="computed", start=start)


def _all_pattern_step(net: ReluNetwork, on: np.ndarray, off: np.ndarray, bounds: dict[str, float],
                      lower: float, deadline: float, max_nodes: int | None, threads: int) -> None:
    """The largest ‖J_D‖ over the patterns the box's interval bounds allow, as a certified bound in
    ``bounds`` (``all-patterns``). Two hidden layers: decisions of
    :func:`~privcore.lipschitz.pattern_bilinear.bilinear_pattern_decide` until ``deadline``, the first
    at 1.25 × the larger of twice the witness and 4/3 of the pattern floor
    (:func:`~privcore.lipschitz.pattern_bnb.pattern_norm_floor`, raised by any pattern found above a
    threshold), then lower after each pass (× 0.9 after a quick pass, else × 0.96, or halfway to the
    floor), until within 0.1 % of the floor; the smallest passed threshold (or an open bound below it)
    is the bound. Until one passes, each decision gets 40 % of the time left, and one that runs out
    moves the threshold up by 1.25, at most to 0.96 × its open nodes' bound (which stands meanwhile).
    Other depths: :func:`~privcore.lipschitz.pattern_bnb.max_pattern_norm` with ``max_nodes``
    (default 2 M)."""
    if len(net.weights) != 3 or DEFAULT_NORMS.pair_count(net.in_dim, net.out_dim) > MAX_PAIRS:
        ap = max_pattern_norm(net, on=on, off=off, max_nodes=max_nodes or _DEFAULT_MAX_NODES,
                              **DEFAULT_NORMS.kwargs)
        if ap is not None and math.isfinite(ap.upper):  # out of nodes: the open nodes' bound, still certified
            bounds[How.ALL_PATTERNS.value] = float(ap.upper)
        return
    best = min(v for v in bounds.values() if math.isfinite(v))
    # a pattern the box's stable neurons allow reaches this value: no threshold below it passes
    floor = pattern_norm_floor(net, on=on, off=off, norms=DEFAULT_NORMS)
    passed = math.inf
    start = max(_FIRST_RATIO * lower if math.isfinite(lower) else 0.0, _FLOOR_MARGIN * floor) * _FIRST_MARGIN
    tau = min(start, best * _STEP_DOWN) if start > 0 else best * _STEP_DOWN
    proven = False  # whether a decision has passed (not only left open nodes)
    with threadpool_limits(limits=threads, user_api="blas"):
        first = True  # the first decision runs even past the deadline: its root bounds are a bound
        while (first or time.perf_counter() < deadline) and tau > 0:
            first = False
            began = time.perf_counter()
            until = deadline if proven else began + _TRIAL_SHARE * max(deadline - began, 0.0)
            res = bilinear_pattern_decide(net, tau, DEFAULT_NORMS, on=on, off=off, deadline=until,
                                          max_nodes=max_nodes if max_nodes is not None else 1 << 62)
            now = time.perf_counter()
            quick = now - began < _QUICK_SHARE * max(deadline - now, 0.0)
            if res is None:
                return
            if res.upper <= tau:
                passed = min(passed, res.upper)
                proven = True
            elif res.complete:  # a pattern at or above τ (up to rounding): G over all patterns ≥ it
                floor = max(floor, res.lower, tau * (1.0 - 1e-9))
            else:  # out of time or nodes: the open nodes' bound, certified, may still be the best
                passed = min(passed, res.upper)
                # before any pass: a higher threshold, still below the open bound, may pass in the time left
                higher = min(tau * _STEP_UP, min(passed, best) * _STEP_DOWN)
                if proven or higher <= tau:
                    break
                tau = higher
                continue
            hi = min(passed, best)
            if hi <= floor * (1.0 + 1e-3):
                break
            if math.isfinite(passed):  # a pass that took little of the time left: a longer step
                tau = max(passed * (_LONG_STEP if quick else _STEP_DOWN), (floor + passed) / 2.0)
            else:  # no pass yet: up from the pattern found, at most halfway to the best bound so far
                tau = min(floor * 1.15, (floor + hi) / 2.0)
    if math.isfinite(passed):
        bounds[How.ALL_PATTERNS.value] = passed


def verify_global_constant(
    net: Any,
    box: ClipBox,
    hint: float,
    *,
    time_limit: float = DEFAULT_TIME_LIMIT,
    max_nodes: int | None = None,
    threads: int = 1,
) -> GlobalConstant | None:
    """``hint`` as a certified G when this process proves L(f, box) ≤ τ (τ just below ``hint``, module
    docstring), else None (refuted, or undecided within ``time_limit``). Cheapest evidence first: the
    interval family, the box's pattern enumeration, the all-pattern decision (two hidden layers:
    :func:`~privcore.lipschitz.pattern_bilinear.bilinear_pattern_decide`, stopped by the deadline;
    other depths: :func:`~privcore.lipschitz.pattern_bnb.max_pattern_norm`, ``max_nodes`` or 2 M), then
    the engine's exact decision (:func:`~privcore.lipschitz.decide.decide_exact`) on the covering cube."""
    start = time.perf_counter()
    net, box = _checked(net, box)
    h = check_positive("hint", hint)
    limit = check_positive("time_limit", time_limit)
    max_nodes = None if max_nodes is None else check_int("max_nodes", max_nodes, minimum=1)
    tau = _verification_threshold(h)
    if tau <= 0:
        return None

    def passed(how: How, bound: float) -> GlobalConstant:
        return _finish(net, box, {how.value: bound}, lower=0.0, source="verified-hint", start=start, value=h)

    interval = _interval_family(net, box)
    if interval <= tau:
        return passed(How.INTERVAL, interval)
    search = box_pattern_search(net, box.lower, box.upper, tau, DEFAULT_NORMS, deadline=start + limit)
    if search is not None:
        if search.passed:
            return passed(How.EXACT, tau)
        if search.passed is False:
            return None  # a pattern above τ meets the box: the hint is too small
    on, off = stable_masks(forward_bounds(net, box.lower, box.upper))
    if len(net.weights) == 3:
        with threadpool_limits(limits=threads, user_api="blas"):
            ap = bilinear_pattern_decide(net, tau, DEFAULT_NORMS, on=on, off=off, deadline=start + limit,
                                         max_nodes=max_nodes if max_nodes is not None else 1 << 62)
    else:
        ap = max_pattern_norm(net, threshold=tau, on=on, off=off, max_nodes=max_nodes or _DEFAULT_MAX_NODES,
                              **DEFAULT_NORMS.kwargs)
    if ap is not None and ap.upper <= tau:
        return passed(How.ALL_PATTERNS, float(ap.upper))
    left = start + limit - time.perf_counter()
    center, radius = box.covering_cube()
    if left < _MIN_ENGINE_SECONDS or radius <= 0:
        return None
    from privcore.lipschitz.decide import decide_exact

    try:
        dec = decide_exact(net, center, radius, tau, time_limit=left, threads=threads, **DEFAULT_NORMS.kwargs)
    except (ValueError, CertificationError):
        return None
    return passed(How.EXACT if box.is_cube else How.CUBE_EXACT, tau) if dec.passed else None


_MEMO = Memo(64)  # per (model digest, box, hint); a second caller of a key being computed waits for it


def certified_global_constant(
    net: Any,
    box: ClipBox,
    *,
    hint: float | None = None,
    time_limit: float = DEFAULT_TIME_LIMIT,
    max_nodes: int | None = None,
    threads: int = 1,
) -> GlobalConstant:
    """The G a release may use: ``hint`` (e.g. a card's stored G) when this process verifies it
    (:func:`verify_global_constant`), else computed here (:func:`compute_global_constant`). Memoised in
    memory per (model digest, box, hint), so only a process's first release pays for it; a call made while
    the same key is being computed (another thread) waits for that result."""
    parsed, box = _checked(net, box)
    h = None if hint is None else check_positive("hint", hint)
    key = (parsed.digest, box.digest, h)

    def compute() -> GlobalConstant:
        opts = dict(time_limit=time_limit, max_nodes=max_nodes, threads=threads)
        result = None if h is None else verify_global_constant(parsed, box, h, **opts)
        return compute_global_constant(parsed, box, **opts) if result is None else result

    return _MEMO.get(key, compute)
