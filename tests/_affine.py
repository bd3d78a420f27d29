"""Exact ℓ∞ → ℓ1 operator norm of a matrix, and a sensitivity oracle for affine networks.

For an affine map f(z) = Wz + b the local Lipschitz constant over any ℓ∞ ball, with ℓ1 output,
is the same everywhere: ‖W‖∞→1 = max_{‖s‖∞ ≤ 1} ‖Ws‖₁ = max_{s ∈ {±1}^n} ‖Ws‖₁ (a convex function
is maximised at a vertex of the cube). Computing it is NP-hard in general (it is the cut norm
problem up to constants; Rohn 2000), so :func:`affine_linf_to_l1_norm` enumerates sign vectors
and refuses matrices whose smaller side exceeds 22. By duality
‖W‖∞→1 = max_{c ∈ {±1}^m, s ∈ {±1}^n} cᵀWs = ‖Wᵀ‖∞→1, so the enumeration runs over the smaller
side, and s and −s give the same value, so half the vectors suffice.

Results are certified upper bounds: float64 rounding in the sums is bounded a priori and added.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np

__all__ = ["MAX_ENUMERATION_DIM", "AffineLipschitz", "affine_linf_to_l1_norm"]

#: Largest dimension enumerated exactly (2^21 sign vectors).
MAX_ENUMERATION_DIM = 22
_BLOCK = 1 << 14
_U = 2.0**-53  # unit round-off of float64


def _as_matrix(W: Any) -> np.ndarray:
    if hasattr(W, "detach"):
        W = W.detach().cpu().double().numpy()
    arr = np.asarray(W)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "fiu":
        raise TypeError(f"W must be a real matrix, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != 2 or 0 in arr.shape:
        raise ValueError(f"W must be a non-empty 2-D matrix, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("W must contain only finite numbers")
    return arr


def affine_linf_to_l1_norm(W: Any) -> float:
    """max over s ∈ {±1}^n of ‖W s‖₁ = ‖W‖∞→1, exactly (certified upper bound), for W of shape (m, n).

    Enumerates the 2^(k−1) sign vectors of the smaller side k = min(m, n) in vectorised blocks;
    refuses k > 22 (exponential time; the problem is NP-hard). The float64 rounding error of the
    maximising sum is at most (k + max(m, n))·u·Σ|W_ij| (u = 2⁻⁵³), which is added so the returned
    value is never below the true norm.
    """
    A = _as_matrix(W)
    if A.shape[0] < A.shape[1]:
        A = A.T  # ‖W‖∞→1 = ‖Wᵀ‖∞→1: enumerate the smaller side
    rows, k = A.shape
    if k > MAX_ENUMERATION_DIM:
        raise ValueError(
            f"W has smaller dimension {k} > {MAX_ENUMERATION_DIM}: the exact ℓ∞→ℓ1 norm needs 2^{k - 1} "
            "sign vectors (NP-hard); use a MIP or relaxation certifier from privcore.lipschitz instead"
        )
    first = A[:, :1]  # fix s_0 = +1 (s and −s give the same norm)
    rest = A[:, 1:]
    n_rest = k - 1
    count = 1 << n_rest
    best = 0.0
    powers = np.arange(n_rest, dtype=np.int64)
    for start in range(0, count, _BLOCK):
        codes = np.arange(start, min(count, start + _BLOCK), dtype=np.int64)
        signs = 1.0 - 2.0 * ((codes[:, None] >> powers) & 1).astype(np.float64)  # (block, k-1)
        images = signs @ rest.T + first.T  # (block, rows): W s for each sign vector
        best = max(best, float(np.abs(images).sum(axis=1).max()))
    slack = (k + rows + 2) * _U * float(np.abs(A).sum())
    return math.nextafter(best + slack, math.inf)


def _linear_layers(f: Any) -> list[Any]:
    import torch.nn as nn

    if isinstance(f, nn.Linear):
        return [f]
    if isinstance(f, nn.Sequential):
        layers = []
        for child in f:
            if isinstance(child, nn.Linear):
                layers.append(child)
            elif isinstance(child, nn.Identity):
                continue
            else:
                raise TypeError(
                    f"AffineLipschitz certifies only affine networks (nn.Linear layers, nn.Identity); "
                    f"found {type(child).__name__} — use a MIP/relaxation certifier for nonlinear nets"
                )
        if not layers:
            raise TypeError("AffineLipschitz needs at least one nn.Linear layer")
        return layers
    raise TypeError(
        f"AffineLipschitz certifies nn.Linear or an nn.Sequential of nn.Linear layers, got {type(f).__name__}"
    )


def _composed_weight(f: Any) -> tuple[np.ndarray, np.ndarray]:
    """(W, E): the float64 product W_L···W_1 and an entrywise bound E on its rounding error."""
    layers = _linear_layers(f)
    W = layers[0].weight.detach().cpu().double().numpy()
    err = np.zeros_like(W)
    for layer in layers[1:]:
        V = layer.weight.detach().cpu().double().numpy()
        inner = V.shape[1]
        # |fl(VW) − V·W_exact| ≤ |V|·err + γ_inner·|V||W|, with γ_n = n·u/(1 − n·u)
        gamma = inner * _U / (1.0 - inner * _U)
        err = np.abs(V) @ err + gamma * (np.abs(V) @ np.abs(W)) * (1.0 + 1e-12)
        W = V @ W
    return W, err


class AffineLipschitz:
    """Sensitivity oracle for affine nets: U(center, radius) = ‖W_L···W_1‖∞→1, for every ball.

    Usable as ``lipschitz=`` in :func:`privcore.mechanisms.compute_phi`. Accepts ``nn.Linear`` or an
    ``nn.Sequential`` of ``nn.Linear`` (and ``nn.Identity``) and refuses anything else. The value
    does not depend on the ball, so it is trivially monotone under inclusion; the composed
    product's rounding error is bounded and added. Results are cached per weight content.
    """

    def __init__(self) -> None:
        self._cache: dict[str, float] = {}
        self.calls = 0

    def bound(self, f: Any) -> float:
        """The certified ‖W‖∞→1 of the affine network ``f``."""
        W, err = _composed_weight(f)
        key = hashlib.sha256(W.tobytes() + err.tobytes() + repr(W.shape).encode()).hexdigest()
        if key not in self._cache:
            norm = affine_linf_to_l1_norm(W)
            self._cache[key] = math.nextafter(norm + float(err.sum()), math.inf)
        return self._cache[key]

    def __call__(self, f: Any, center: np.ndarray, radius: float, /) -> float:
        """U(center, radius): the same certified bound for every ball."""
        self.calls += 1
        if not (isinstance(radius, int | float) and radius > 0 and math.isfinite(radius)):
            raise ValueError(f"radius must be in (0, ∞), got {radius!r}")
        return self.bound(f)
