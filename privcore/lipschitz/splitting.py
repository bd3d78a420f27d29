"""Decide "L(f, B(z, r)) ≤ τ?" by splitting the box: branch and bound over the input.

The local Lipschitz constant over a box is the largest generalised-Jacobian norm over its points
(Jordan & Dimakis, NeurIPS 2020, Thm. 3.2), so over a union of closed sub-boxes it is the largest
of theirs. Each sub-box gets, cheapest first,

* a certified upper bound: interval propagation, then the largest ``‖J_D‖`` over the patterns its
  own stable neurons allow (:func:`~privcore.lipschitz.pattern_bnb.max_pattern_norm`; a smaller
  box fixes more neurons, so the bound falls as boxes shrink). ``≤ τ`` clears the sub-box;
* a witness: the best pattern that bound found, if its region has an interior point in the
  sub-box (one LP), and the Jacobian norms at sampled points of the sub-box, each re-evaluated in
  float64 at a point where the network is affine. One witness ``> τ`` fails the whole decision;
* otherwise it is halved along its most influential coordinate (width × ℓ1 norm of the first
  layer's column), the open sub-box with the largest bound first.

Every answer is exact (a pass is a cover of the box by cleared sub-boxes, a fail a point of the box
whose Jacobian norm exceeds τ); when the budget runs out the search returns None and the caller
goes on to the MILP. This is what decides wide networks (8→32→32→8), where LipMIP's bound stalls.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass

import numpy as np

from privcore.lipschitz.bounds import box_around, forward_bounds, interval_upper_bound, jacobian_norms
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.pattern_bnb import max_pattern_norm
from privcore.lipschitz.patterns import stable_masks
from privcore.lipschitz.regions import strict_point_for_pattern
from privcore.validation import check_finite_array, check_nonnegative, check_real

__all__ = ["SplitResult", "split_decide"]

#: nodes of the per-sub-box pattern branch and bound
_BOX_NODES = 200_000
#: random points sampled per sub-box for a witness
_SAMPLES = 16


@dataclass(frozen=True)
class SplitResult:
    """``passed``; ``upper`` (certified on the whole box when passed), ``lower``/``point`` (a
    verified Jacobian norm and where, when failed), and how many sub-boxes were examined."""

    passed: bool
    upper: float
    lower: float
    point: np.ndarray | None
    boxes: int


def _witness(
    net: ReluNetwork,
    lo: np.ndarray,
    hi: np.ndarray,
    pattern: np.ndarray | None,
    rng: np.random.Generator,
    input_norm: str,
    output_norm: str,
) -> tuple[float, np.ndarray | None]:
    pts = [(lo + hi) / 2.0, *(lo + (hi - lo) * rng.random((_SAMPLES, lo.size)))]
    if pattern is not None:
        layers = [d.astype(np.float64) for d in net.split_pattern(pattern)]
        strict = strict_point_for_pattern(net, lo, hi, layers)
        if strict is not None:
            pts.append(strict)
    pts = np.array(pts)
    vals, ok = jacobian_norms(net, pts, input_norm=input_norm, output_norm=output_norm)
    vals = np.where(ok, vals, -np.inf)
    i = int(np.argmax(vals))
    return float(vals[i]), pts[i]


def split_decide(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    threshold: float,
    *,
    input_norm: str = "linf",
    output_norm: str = "l1",
    max_boxes: int = 2000,
    max_seconds: float = 10.0,
    seed: int = 0,
) -> SplitResult | None:
    """Exactly decide ``L(f, B(center, radius)) ≤ threshold`` by input splitting (module docstring),
    or None when ``max_boxes`` sub-boxes or ``max_seconds`` did not settle it. ``seed`` drives only
    where witnesses are sampled, never a pass."""
    center = check_finite_array("center", center).reshape(-1)
    if center.shape[0] != net.in_dim:
        raise ValueError(f"center must have the input dimension {net.in_dim}, got {center.shape[0]}")
    radius = check_nonnegative("radius", radius)
    threshold = check_real("threshold", threshold)
    if max_seconds <= 0 or max_boxes <= 0:
        return None
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    norms = dict(input_norm=input_norm, output_norm=output_norm)
    reach = np.abs(net.weights[0]).sum(axis=0)
    lo, hi = box_around(center, radius)
    heap: list[tuple[float, int, np.ndarray, np.ndarray]] = [(-math.inf, 0, lo, hi)]
    cleared, count, tick = -math.inf, 0, 1
    while heap:
        if count >= max_boxes or time.perf_counter() - start > max_seconds:
            return None
        _, _, lo, hi = heapq.heappop(heap)
        count += 1
        fwd = forward_bounds(net, lo, hi)
        upper = interval_upper_bound(net, lo, 0.0, fwd=fwd, **norms)  # the sub-box's bounds, via fwd
        pattern = None
        if upper > threshold:
            on, off = stable_masks(fwd)
            res = max_pattern_norm(net, threshold=threshold, on=on, off=off, max_nodes=_BOX_NODES, **norms)
            if res is not None:
                upper = min(upper, res.upper)
                pattern = res.pattern if res.lower > threshold else None
        if upper <= threshold:
            cleared = max(cleared, upper)
            continue
        value, point = _witness(net, lo, hi, pattern, rng, **norms)
        if value > threshold:
            return SplitResult(passed=False, upper=math.inf, lower=value, point=point, boxes=count)
        j = int(np.argmax((hi - lo) * reach))
        mid = (lo[j] + hi[j]) / 2.0
        left_hi, right_lo = hi.copy(), lo.copy()
        left_hi[j], right_lo[j] = mid, mid
        priority = -upper if math.isfinite(upper) else -math.inf
        for box in ((lo, left_hi), (right_lo, hi)):
            heapq.heappush(heap, (priority, tick, *box))
            tick += 1
    return SplitResult(passed=True, upper=cleared, lower=0.0, point=None, boxes=count)
