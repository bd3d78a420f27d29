"""Pre-activation ranges over a box cut by half-spaces, by Lagrangian duality with one cut at a time.

A node of the split search (:mod:`privcore.lipschitz.splitting`) is a sub-box ``[lo, hi]`` with
some neurons split: each split of a layer that is affine on the node is a half-space ``g·x ≤ h``
on the input. An unstable neuron of the first layer not yet affine on the node has an affine
pre-activation ``a·x + p`` there, and its range over ``{x ∈ [lo, hi] : G x ≤ h}`` decides whether it
is still unstable. The exact range takes two LPs per neuron
(:func:`~privcore.lipschitz.regions.affine_range`); this module bounds it in closed form, batched
over every neuron and cut, at a small fraction of that cost (after the β-CROWN idea of Wang et al.,
NeurIPS 2021, of carrying split constraints into the bound by multipliers).

For one cut and any λ ≥ 0, weak duality gives

    max {a·x : x ∈ [lo, hi], g·x ≤ h} ≤ φ(λ) = λ·h + Σ_k max((a_k − λ g_k)·lo_k, (a_k − λ g_k)·hi_k),

a convex piecewise-linear function of λ whose minimum lies at 0 or at a breakpoint ``a_k/g_k``, so
evaluating φ there gives that cut's exact maximum (a continuous knapsack). Every evaluated φ is an
upper bound whatever its λ; the bound kept is the smallest over the cuts and the box alone (λ = 0).
The cut's right-hand side is relaxed by 1e-9·(1 + |h|) as for the region LPs, and the result is padded
outwards by ``PAD`` times the magnitude of its terms (above float64 rounding, as for OBBT).
"""

from __future__ import annotations

import numpy as np

__all__ = ["PAD", "halfspace_range"]

#: outward padding of every bound, relative to the sum of the magnitudes of its terms
PAD = 1e-9


def _upper(A: np.ndarray, G: np.ndarray, h: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max a_j·x over the box cut by any one row of G x ≤ h (the smallest bound over the rows and the
    box alone), padded outwards; -inf when a cut alone misses the box (then so does the set)."""
    # candidate multipliers per (objective j, cut i): 0 and the breakpoints a_jk / g_ik where positive
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = A[:, None, :] / G[None, :, :]  # (J, I, K)
    lam = np.where(np.isfinite(lam) & (lam > 0.0), lam, 0.0)
    lam = np.concatenate([np.zeros((*lam.shape[:2], 1)), lam], axis=2)  # (J, I, C)
    coef = A[:, None, None, :] - lam[..., None] * G[None, :, None, :]  # (J, I, C, K)
    terms = np.maximum(coef * lo, coef * hi)
    phi = lam * h[None, :, None] + terms.sum(axis=3)
    scale = np.abs(lam * h[None, :, None]) + np.abs(terms).sum(axis=3)
    bound = phi + PAD * (1.0 + scale)
    best = bound.min(axis=(1, 2))
    box = np.maximum(A * lo, A * hi)
    return np.minimum(best, box.sum(axis=1) + PAD * (1.0 + np.abs(box).sum(axis=1)))


def halfspace_range(G: np.ndarray, h: np.ndarray, lo: np.ndarray, hi: np.ndarray, P: np.ndarray,
                    p0: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Certified bounds ``low ≤ P_j x + p0_j ≤ up`` over ``{x ∈ [lo, hi] : G x ≤ h}`` (module docstring),
    each at least as tight as the box's interval bound; None when one cut alone misses the box (then the
    set is empty)."""
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    P = np.asarray(P, dtype=np.float64)
    if G.shape[0] == 0:
        G, h = np.zeros((1, lo.size)), np.zeros(1)
    relaxed = h + 1e-9 * (1.0 + np.abs(h))
    # a cut misses the box when even its smallest value over the box exceeds its right-hand side
    least = np.minimum(G * lo, G * hi)
    if bool(np.any(least.sum(axis=1) - 1e-9 * (1.0 + np.abs(least).sum(axis=1)) > relaxed)):
        return None
    best = _upper(np.vstack([P, -P]), G, relaxed, lo, hi)
    up, low = best[:P.shape[0]], -best[P.shape[0]:]
    return low + p0 - PAD * (1.0 + np.abs(p0)), up + p0 + PAD * (1.0 + np.abs(p0))
