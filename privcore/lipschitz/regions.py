"""Activation regions as polytopes of the input box, and float64 witnesses inside them.

A pattern D of a ReLU network fixes the sign of every hidden neuron; its region is the set of box
points where the network computes with D (LipMIP, Jordan & Dimakis 2020, §3). A MILP incumbent or a
sampled point claims ‖J_D‖ > τ only after :func:`verified_lower_bound` re-evaluates the Jacobian in
float64 at a point strictly inside a region (the soundness rule of DESIGN.md: every fail comes from
a verified point).
"""

from __future__ import annotations

import numpy as np

from privcore.lipschitz.bounds import box_around, jacobian_norms
from privcore.lipschitz.network import ReluNetwork

__all__ = ["strict_point_for_pattern", "verified_lower_bound"]


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
    *,
    input_norm: str,
    output_norm: str,
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
        vals, ok = jacobian_norms(net, np.array(pts), input_norm=input_norm, output_norm=output_norm)
        for v, good, p in zip(vals, ok, pts, strict=True):
            inside = bool(np.all(p >= lo) and np.all(p <= hi))
            if good and inside and v * (1 - 1e-12) > best:
                best, arg = float(v * (1 - 1e-12)), p
    return best, arg
