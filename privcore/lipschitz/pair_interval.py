"""The largest per-vertex-pair interval bound on the Jacobian's norm over a ball, monotone under ball
inclusion also in floating point: the interval term of the ``lp``/``interval`` certifiers.

The bound is :mod:`~privcore.lipschitz.clarke`'s interval bound with interval-propagation (not CROWN)
pre-activation bounds, evaluated here in numpy, in endpoint form and a fixed order, so that every
rounded step is monotone (a review found midpoint–radius rounding flipping a neuron between a ball and
a ball inside it). No torch: the engine's relaxations import this module, not the batched one.
"""

from __future__ import annotations

import numpy as np

from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms

__all__ = ["MAX_PAIRS", "pair_interval_bound"]

#: most vertex pairs (input-ball vertices × dual output vertices) the bounds enumerate
MAX_PAIRS = 1 << 18
#: relative widening of every bound before it fixes a neuron's sign or clears a pair
_SAFETY = 1e-9


def _affine_endpoints(w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[Σ_j min(w_kj·lo_j, w_kj·hi_j), Σ_j max(…)]`` for the rows of ``lo``/``hi`` (``(…, n_in)``),
    summed term by term in a fixed order: every rounded step is monotone in ``lo`` and ``hi``."""
    low = np.zeros((*lo.shape[:-1], w.shape[0]))
    high = np.zeros_like(low)
    for j in range(w.shape[1]):
        col = w[:, j]
        a, b = col * lo[..., j : j + 1], col * hi[..., j : j + 1]
        low = low + np.minimum(a, b)
        high = high + np.maximum(a, b)
    return low, high


def pair_interval_bound(net: ReluNetwork, center: np.ndarray, radius: float, *, input_norm: str,
                        output_norm: str) -> float | None:
    """``max over vertex pairs`` of the interval bound on ``cᵀ J s`` over ``B(center, radius)``, with
    interval-propagation pre-activation bounds; None past :data:`MAX_PAIRS` pairs or without a hidden
    layer.

    Certified (:mod:`~privcore.lipschitz.clarke`'s docstring), and monotone under ball inclusion *in
    floating point*, so the ``lp`` and ``interval`` certifiers may use it (docs/DESIGN.md, "Certifier
    choice"). Every step is evaluated in endpoint form, float64 on the CPU, summed in a fixed order,
    so each rounded operation is monotone in its inputs: the box ``fl(z ± r)`` of a ball inside
    another is inside the other's; its pre-activation intervals, and the margins (which grow with
    ``max |x|`` over the box), are nested in the box's, so it fixes at least the same neurons with
    the same signs; a pair's bound depends on the box only through those signs, and every interval
    of its forward pass is then nested too."""
    norms = Norms(input=input_norm, output=output_norm)
    if len(net.weights) < 2 or norms.pair_count(net.in_dim, net.out_dim) > MAX_PAIRS:
        return None
    lo = np.asarray(center, dtype=np.float64).reshape(-1) - radius
    hi = np.asarray(center, dtype=np.float64).reshape(-1) + radius
    mag = np.maximum(np.abs(lo), np.abs(hi))
    states = []
    for layer, (w, b) in enumerate(zip(net.weights[:-1], net.biases[:-1], strict=True)):
        low, high = _affine_endpoints(w, lo, hi)
        low, high = low + b, high + b
        mag = _affine_endpoints(np.abs(w), mag, mag)[1] + np.abs(b)
        margin = _SAFETY * (layer + 2) * (1.0 + mag)
        low, high = low - margin, high + margin
        states.append((low > 0, high < 0))
        lo, hi = np.maximum(low, 0.0), np.maximum(high, 0.0)
    S, C = norms.dual_vertices(net.in_dim, net.out_dim)
    v = _affine_endpoints(net.weights[0], S, S)[0]  # W_1 s, the same for every box
    tlo = thi = v
    for layer, (act, ina) in enumerate(states):
        if layer:
            tlo, thi = _affine_endpoints(net.weights[layer], tlo, thi)
        tlo = np.where(act, tlo, np.where(ina, 0.0, np.minimum(tlo, 0.0)))
        thi = np.where(act, thi, np.where(ina, 0.0, np.maximum(thi, 0.0)))
    a = C @ net.weights[-1]  # W_Lᵀ c, the same for every box
    total = np.zeros((C.shape[0], S.shape[0]))
    for k in range(a.shape[1]):
        ak = a[:, k : k + 1]
        total = total + np.maximum(ak * tlo[None, :, k], ak * thi[None, :, k])
    return float(total.max()) + _SAFETY * (len(net.weights) + 2) * (1.0 + _path_scale(net))


def _path_scale(net: ReluNetwork) -> float:
    """``1ᵀ|W_L|…|W_1|1``: bounds the magnitude of every term of a pair's bound (|c|, |s| ≤ 1)."""
    path = np.ones(net.in_dim)
    for w in net.weights:
        path = np.abs(w) @ path
    return float(path.sum())
