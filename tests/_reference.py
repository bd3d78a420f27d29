"""Brute-force reference for the local Lipschitz constant of tiny ReLU networks (for tests).

Jordan & Dimakis (2020, Thm. 3.2) show that for ReLU networks L(f, B) is the largest operator
norm of a generalized Jacobian over the box. Every generalized Jacobian at a point is a convex
combination of the pattern Jacobians ``J_D = W_L D_{L−1} … D_1 W_1`` of the activation patterns
D consistent with the point (pre-activation ≥ 0 where D = 1, ≤ 0 where D = 0, pre-activations
computed along D), and a norm is convex, so

    L(f, B) = max { ‖J_D‖ : D an activation pattern whose closed region meets B },

which is what LipMIP's optimum is. Here every pattern is enumerated and its region tested for a
point of the box by one LP: exponential, only for a handful of neurons, but independent of any
MILP encoding, big-M constant or bound — which is why the tests compare against it.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import linprog

from privcore.lipschitz.bounds import box_around
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import operator_norm

__all__ = ["MAX_BRUTE_FORCE_NEURONS", "brute_force_lipschitz", "pattern_region_feasible"]

MAX_BRUTE_FORCE_NEURONS = 14


def _region_rows(net: ReluNetwork, pattern: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``G x ≤ h`` of the closed region of an activation pattern."""
    d = net.in_dim
    A, a = np.eye(d), np.zeros(d)
    G, h = [], []
    for w, b, p in zip(net.weights[:-1], net.biases[:-1], pattern, strict=True):
        P, p0 = w @ A, w @ a + b
        s = np.where(p > 0.5, 1.0, -1.0)  # s·(P x + p0) ≥ 0  ⇔  −s·P x ≤ s·p0
        G.append(-(s[:, None] * P))
        h.append(s * p0)
        A, a = p[:, None] * P, p * p0
    return np.vstack(G), np.concatenate(h)


def pattern_region_feasible(
    net: ReluNetwork, lo: np.ndarray, hi: np.ndarray, pattern: list[np.ndarray], *, slack: float = 1e-9
) -> bool:
    """Does the closed region of ``pattern`` meet the box ``[lo, hi]``? (LP feasibility)"""
    G, h = _region_rows(net, pattern)
    res = linprog(np.zeros(net.in_dim), A_ub=G, b_ub=h + slack * (1 + np.abs(h)),
                  bounds=list(zip(lo, hi, strict=True)), method="highs")
    return res.status == 0


def brute_force_lipschitz(
    net: ReluNetwork, center: np.ndarray, radius: float, *, input_norm: str = "linf", output_norm: str = "l1"
) -> float:
    """L(f, B(center, radius)) by enumerating all activation patterns (≤ 14 hidden neurons)."""
    widths = net.hidden_widths
    if sum(widths) > MAX_BRUTE_FORCE_NEURONS:
        raise ValueError(f"brute force needs ≤ {MAX_BRUTE_FORCE_NEURONS} hidden neurons, got {sum(widths)}")
    lo, hi = box_around(center, radius)
    best = 0.0
    corners = itertools.product((0.0, 1.0), repeat=sum(widths))
    patterns = [net.split_pattern(np.array(bits)) for bits in corners]
    jacs = np.stack([net.jacobians(np.zeros((1, net.in_dim)), p)[0] for p in patterns])
    norms = np.atleast_1d(operator_norm(jacs, input_norm=input_norm, output_norm=output_norm))
    for k in np.argsort(-norms):  # the first feasible pattern in decreasing norm is the answer
        if norms[k] <= best:
            break
        if pattern_region_feasible(net, lo, hi, patterns[k]):
            best = float(norms[k])
            break
    return best
