"""Decide "L(f, B(z, r)) ≤ τ?" by splitting the box: a batched branch and bound over the input.

The local Lipschitz constant over a box is the largest generalised-Jacobian norm over its points
(Jordan & Dimakis, NeurIPS 2020, Thm. 3.2), so over a union of closed sub-boxes it is the largest
of theirs, and ``‖J‖ = max cᵀ J s`` over vertex pairs (c, s). A sub-box keeps the pairs it has not
cleared yet; a batch of the open sub-boxes gets, cheapest first,

* certified bounds per open pair (:mod:`~privcore.lipschitz.clarke`: CROWN pre-activation bounds,
  then the interval and linear bounds on ``cᵀ J s``). A pair whose bound is ``≤ τ`` is cleared for
  the sub-box and everything inside it, so children inherit only the open pairs (and their parent's
  pre-activation bounds, which they tighten). A sub-box with no open pair is cleared;
* with few unstable neurons left, the largest ``‖J_D‖`` over the patterns its stable neurons allow
  (:func:`~privcore.lipschitz.pattern_bnb.max_pattern_norm`, exact over them); ``≤ τ`` clears it;
* a witness: Jacobian norms at its centre and at sampled points (and at an interior point of the
  best pattern found, by one LP), each re-evaluated in float64 where the network is affine, at a
  point of the ball itself, and deflated by 1e-12. One witness ``> τ`` fails the whole decision;
* otherwise it is halved along its most influential coordinate (width × ℓ1 norm of the first
  layer's column over its unstable neurons), the open sub-boxes with the largest bounds first.

Every answer is exact (a pass is a cover of the box by cleared sub-boxes, a fail a point of the box
whose Jacobian norm exceeds τ); when the budget runs out the search returns None and the caller
goes on to the MILP.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from privcore.lipschitz.bounds import box_around, jacobian_norms
from privcore.lipschitz.clarke import ClarkeBounds, clarke_bounds, single_threaded
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.pattern_bnb import max_pattern_norm
from privcore.lipschitz.regions import strict_point_for_pattern
from privcore.validation import check_finite_array, check_nonnegative, check_real

__all__ = ["SplitResult", "ValueResult", "split_decide", "split_value"]

#: nodes of the per-sub-box pattern branch and bound
_BOX_NODES = 200_000
#: a sub-box with at most this many unstable neurons also gets the exact pattern bound
_PATTERN_UNSTABLE = 12
#: random points sampled per sub-box for a witness
_SAMPLES = 4
#: (sub-box, pair) bounds computed together
_BATCH_PAIRS = 1 << 17
#: sub-boxes processed together
_BATCH_BOXES = 64


@dataclass(frozen=True)
class SplitResult:
    """``passed``; ``upper`` (certified on the whole box when passed), ``lower``/``point`` (a
    verified Jacobian norm and where, when failed), and how many sub-boxes were examined."""

    passed: bool
    upper: float
    lower: float
    point: np.ndarray | None
    boxes: int


@dataclass(frozen=True)
class ValueResult:
    """``lower ≤ L ≤ upper``: ``lower`` a Jacobian norm verified in float64 at ``point`` (None: no
    witness), ``upper`` certified; ``complete`` when ``upper ≤ lower · (1 + rtol)`` was proven."""

    upper: float
    lower: float
    point: np.ndarray | None
    boxes: int
    complete: bool


@dataclass(eq=False)
class _Box:
    lo: np.ndarray
    hi: np.ndarray
    parent: tuple[list[torch.Tensor], list[torch.Tensor]] | None  # its enclosing box's bounds, (1, n_l) each
    pairs: torch.Tensor | None  # open pairs (None: all)


def _pattern_witness(net: ReluNetwork, box: _Box, pattern: np.ndarray | None) -> list[np.ndarray]:
    if pattern is None:
        return []
    layers = [d.astype(np.float64) for d in net.split_pattern(pattern)]
    strict = strict_point_for_pattern(net, box.lo, box.hi, layers)
    return [] if strict is None else [strict]


class _OutOfTime(Exception):
    """The budget ran out inside a batch (never a decision)."""


class _Search:
    def __init__(self, net: ReluNetwork, cb: ClarkeBounds, tau: float, norms: dict, rng: np.random.Generator,
                 *, center: np.ndarray, radius: float, deadline: float, rtol: float | None = None):
        self.net, self.cb, self.tau, self.norms, self.rng = net, cb, tau, norms, rng
        self.center, self.radius, self.deadline = center, radius, deadline
        # maximising (rtol set): τ follows the best verified witness, τ = lower · (1 + rtol)
        self.rtol, self.lower, self.point = rtol, -math.inf, None
        self.witness: tuple[float, np.ndarray] | None = None  # deciding: the point that failed τ
        paths, acc = [], np.eye(net.in_dim)
        for w in net.weights[:-1]:
            acc = np.abs(w) @ acc
            paths.append(acc)
        self.reach = np.vstack(paths)  # |W_l|…|W_1|: how far each input moves each hidden neuron
        self.cleared = -math.inf

    def bounds(self, boxes: list[_Box]) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor],
                                                 list[torch.Tensor]]:
        """Pre-activation bounds of a batch, and per box its open pairs and their bounds."""
        dev = self.cb.device
        lo = torch.tensor(np.array([b.lo for b in boxes]), dtype=torch.float64, device=dev)
        hi = torch.tensor(np.array([b.hi for b in boxes]), dtype=torch.float64, device=dev)
        parent = None
        if all(b.parent is not None for b in boxes):
            n_layers = len(boxes[0].parent[0])
            parent = ([torch.cat([b.parent[0][k] for b in boxes]) for k in range(n_layers)],
                      [torch.cat([b.parent[1][k] for b in boxes]) for k in range(n_layers)])
        lows, ups = self.cb.preactivation_bounds(lo, hi, parent)
        all_pairs = torch.arange(self.cb.n_pairs, device=dev, dtype=torch.int32)
        pairs = [all_pairs if b.pairs is None else b.pairs for b in boxes]
        node = torch.cat([torch.full((p.numel(),), i, device=dev, dtype=torch.long)
                          for i, p in enumerate(pairs)])
        flat = torch.cat(pairs).long()
        values = torch.cat([self.cb.pair_bounds(lows, ups, node[s:s + _BATCH_PAIRS], flat[s:s + _BATCH_PAIRS],
                                                    self.tau)
                            for s in range(0, flat.numel(), _BATCH_PAIRS)]) if flat.numel() else flat.double()
        sizes = [p.numel() for p in pairs]
        return lows, ups, list(torch.split(flat.int(), sizes)), list(torch.split(values, sizes))

    def step(self, boxes: list[_Box]) -> tuple[list[tuple[float, _Box]], tuple[float, np.ndarray] | None]:
        """Process a batch: the children to push (with priorities), or a witness above τ."""
        lows, ups, pairs, values = self.bounds(boxes)
        children: list[tuple[float, _Box]] = []
        open_boxes = []
        for i, box in enumerate(boxes):
            keep = ~(values[i] <= self.tau)  # a NaN bound never clears a pair
            settled = values[i][~keep]
            if settled.numel():
                self.cleared = max(self.cleared, float(settled.max()))
            if not bool(keep.any()):
                continue
            if time.perf_counter() > self.deadline:
                raise _OutOfTime
            upper = float(values[i][keep].max())
            states = [(lows[k][i] > 0, ups[k][i] < 0) for k in range(len(lows))]
            n_unstable = sum(int((~(a | b)).sum()) for a, b in states)
            pattern = None
            if n_unstable <= _PATTERN_UNSTABLE:
                on = np.concatenate([a.cpu().numpy() for a, _ in states])
                off = np.concatenate([b.cpu().numpy() for _, b in states])
                res = max_pattern_norm(self.net, threshold=self.tau, on=on, off=off, max_nodes=_BOX_NODES,
                                       **self.norms)
                if res is not None:
                    if res.upper <= self.tau:
                        self.cleared = max(self.cleared, res.upper)
                        continue
                    pattern = res.pattern if res.lower > self.tau else None
            open_boxes.append((i, box, upper, pattern, pairs[i][keep], states))
        if not open_boxes:
            return [], None
        pts = []
        for _, box, _, pattern, _, _ in open_boxes:
            sampled = box.lo + (box.hi - box.lo) * self.rng.random((_SAMPLES, box.lo.size))
            pts += [(box.lo + box.hi) / 2.0, *sampled, *_pattern_witness(self.net, box, pattern)]
        pts = np.array(pts)
        vals, ok = jacobian_norms(self.net, pts, **self.norms)
        inside = np.max(np.abs(pts - self.center), axis=1) <= self.radius  # the ball, not only fl(z ± r)
        vals = np.where(ok & inside, vals * (1.0 - 1e-12), -np.inf)  # a lower bound that survives rounding
        k = int(np.argmax(vals))
        if vals[k] > self.tau:
            if self.rtol is None:
                return [], (float(vals[k]), pts[k])
            self.raise_lower(float(vals[k]), pts[k])
        for i, box, upper, _, open_pairs, states in open_boxes:
            if upper <= self.tau:  # maximising: cleared by a witness found since its bounds
                self.cleared = max(self.cleared, upper)
                continue
            unstable = np.concatenate([(~(a | b)).cpu().numpy() for a, b in states])
            reach = self.reach[unstable].sum(axis=0)
            j = int(np.argmax((box.hi - box.lo) * (reach + 1e-12)))
            mid = (box.lo[j] + box.hi[j]) / 2.0
            left_hi, right_lo = box.hi.copy(), box.lo.copy()
            left_hi[j], right_lo[j] = mid, mid
            parent = ([x[i:i + 1] for x in lows], [x[i:i + 1] for x in ups])
            for lo, hi in ((box.lo, left_hi), (right_lo, box.hi)):
                children.append((upper, _Box(lo=lo, hi=hi, parent=parent, pairs=open_pairs)))
        return children, None

    def raise_lower(self, value: float, point: np.ndarray | None) -> None:
        """Maximising: a verified witness ``value`` at ``point``; τ moves up to ``value · (1 + rtol)``."""
        if value > self.lower:
            self.lower, self.point = value, point
            self.tau = max(self.tau, value * (1.0 + self.rtol))


def split_decide(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    threshold: float,
    *,
    input_norm: str = "linf",
    output_norm: str = "l1",
    max_boxes: int = 200_000,
    max_seconds: float = 10.0,
    seed: int = 0,
    device: str | None = None,
) -> SplitResult | None:
    """Exactly decide ``L(f, B(center, radius)) ≤ threshold`` by input splitting (module docstring),
    or None when ``max_boxes`` sub-boxes or ``max_seconds`` did not settle it, or the norm has too
    many vertex pairs (:data:`~privcore.lipschitz.clarke.MAX_PAIRS`). ``seed`` drives only where
    witnesses are sampled, never a pass; ``device`` is where the bounds run (None: CUDA when present)."""
    threshold = check_real("threshold", threshold)
    center, radius, norms, cb = _prepare(net, center, radius, input_norm, output_norm, max_boxes, max_seconds,
                                         device)
    if cb is None:
        return None
    with single_threaded(cb.device):
        return _split(net, cb, center, radius, threshold, norms, max_boxes, max_seconds, seed)


def split_value(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    *,
    input_norm: str = "linf",
    output_norm: str = "l1",
    rtol: float = 1e-6,
    lower: float = -math.inf,
    point: np.ndarray | None = None,
    max_boxes: int = 200_000,
    max_seconds: float = 10.0,
    seed: int = 0,
    device: str | None = None,
) -> ValueResult | None:
    """``L(f, B(center, radius))`` by the same search maximising: the decision of
    :func:`split_decide` at a moving threshold ``τ = lower · (1 + rtol)``, where ``lower`` is the
    best float64-verified witness so far (start: ``lower`` at ``point``, a verified value the
    caller has). A witness above τ raises it instead of ending the search; a pair cleared at an
    earlier τ stays cleared (τ only grows). ``complete`` when every sub-box is cleared:
    then ``lower ≤ L ≤ upper ≤ lower · (1 + rtol)``. Otherwise ``upper`` is still certified (the
    largest bound of the sub-boxes left). None where :func:`split_decide` returns None for the
    norm or net."""
    rtol = check_nonnegative("rtol", rtol)
    lower = check_real("lower", lower)
    center, radius, norms, cb = _prepare(net, center, radius, input_norm, output_norm, max_boxes, max_seconds,
                                         device)
    if cb is None:
        return None
    start = time.perf_counter()
    search = _Search(net, cb, -math.inf, norms, np.random.default_rng(seed), center=center, radius=radius,
                     deadline=start + max_seconds, rtol=rtol)
    if math.isfinite(lower):
        search.raise_lower(float(lower), point)
    with single_threaded(cb.device):
        left, count = _run(search, center, radius, max_boxes, max_seconds, start)
    upper = max(search.cleared, left)
    return ValueResult(upper=max(upper, search.lower), lower=search.lower, point=search.point, boxes=count,
                       complete=left == -math.inf)


def _prepare(net: ReluNetwork, center: np.ndarray, radius: float, input_norm: str, output_norm: str,
             max_boxes: int, max_seconds: float, device: str | None
             ) -> tuple[np.ndarray, float, dict, ClarkeBounds | None]:
    """Validated centre and radius, the norms, and the bound tensors (None: no budget, no hidden layer,
    or too many vertex pairs)."""
    center = check_finite_array("center", center).reshape(-1)
    if center.shape[0] != net.in_dim:
        raise ValueError(f"center must have the input dimension {net.in_dim}, got {center.shape[0]}")
    radius = check_nonnegative("radius", radius)
    norms = dict(input_norm=input_norm, output_norm=output_norm)
    if max_seconds <= 0 or max_boxes <= 0 or len(net.weights) < 2:
        return center, radius, norms, None
    return center, radius, norms, clarke_bounds(net, device=device, **norms)


def _run(search: _Search, center: np.ndarray, radius: float, max_boxes: int, max_seconds: float,
         start: float) -> tuple[float, int]:
    """Best first over sub-boxes (largest bound first) until none is open, the budget runs out, or (deciding)
    a witness fails τ. Returns the largest bound of the sub-boxes left open (+inf for the unexamined root,
    -inf when none is) and the number examined; a failing witness is left in ``search.witness``."""
    lo, hi = box_around(center, radius)
    heap: list[tuple[float, int, _Box]] = [(-math.inf, 0, _Box(lo=lo, hi=hi, parent=None, pairs=None))]
    count, tick = 0, 1
    while heap:
        if count >= max_boxes or time.perf_counter() - start > max_seconds:
            return -heap[0][0], count
        batch, n_pairs, left = [], 0, -math.inf
        while heap and len(batch) < _BATCH_BOXES and n_pairs < _BATCH_PAIRS:
            prio, _, box = heapq.heappop(heap)
            if -prio <= search.tau:  # maximising: every pair of it is below a τ reached since
                search.cleared = max(search.cleared, -prio)
                continue
            left = max(left, -prio)
            batch.append(box)
            n_pairs += search.cb.n_pairs if box.pairs is None else box.pairs.numel()
        if not batch:
            continue
        count += len(batch)
        try:
            children, witness = search.step(batch)
        except _OutOfTime:
            return max(left, -heap[0][0] if heap else -math.inf), count
        if witness is not None:
            search.witness = witness
            return math.inf, count
        for upper, child in children:
            heapq.heappush(heap, (-upper, tick, child))
            tick += 1
    return -math.inf, count


def _split(net: ReluNetwork, cb: ClarkeBounds, center: np.ndarray, radius: float, threshold: float,
           norms: dict, max_boxes: int, max_seconds: float, seed: int) -> SplitResult | None:
    start = time.perf_counter()
    search = _Search(net, cb, threshold, norms, np.random.default_rng(seed), center=center, radius=radius,
                     deadline=start + max_seconds)
    left, count = _run(search, center, radius, max_boxes, max_seconds, start)
    if search.witness is not None:
        value, point = search.witness
        return SplitResult(passed=False, upper=math.inf, lower=value, point=point, boxes=count)
    if left != -math.inf:
        return None
    return SplitResult(passed=True, upper=search.cleared, lower=0.0, point=None, boxes=count)
