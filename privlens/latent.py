"""Pictures of the neighbourhood R protects (posthoc Fig. 3): pure Python and NumPy, no Streamlit.

:func:`latent_walk` steps along latent axes inside the ℓ∞ ball B(z, R), :func:`rank_axes` picks the
axes along which the decoded picture changes most, and :func:`tile_images` lays the decoded walk out
as one RGB picture with the centre column framed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from privcore.validation import check_positive

__all__ = ["latent_walk", "rank_axes", "tile_images"]


def latent_walk(z: Any, *, axes: Sequence[int], offsets: Sequence[float]) -> np.ndarray:
    """Points z + t·e_k for every axis k and offset t, shape (len(axes), len(offsets), d) (posthoc Fig. 3).

    With offsets in [−R, R] every point lies in the ℓ∞ ball B(z, R), the neighbourhood the
    guarantee protects; decode them to see what R means in pictures.
    """
    center = np.asarray(z, dtype=np.float64).reshape(-1)
    d = center.size
    ks = [int(k) for k in axes]
    if any(k < 0 or k >= d for k in ks):
        raise ValueError(f"axes must be in [0, {d - 1}], got {ks}")
    ts = np.asarray(offsets, dtype=np.float64)
    out = np.repeat(np.repeat(center[None, None, :], len(ks), axis=0), ts.size, axis=1)
    for i, k in enumerate(ks):
        out[i, :, k] += ts
    return out


def rank_axes(decode: Any, z: Any, *, radius: float, top: int) -> tuple[int, ...]:
    """The ``top`` latent axes along which the decoded picture changes most over [−R, R].

    ``decode`` maps a (n, d) array of latent points to images; the score of axis k is the mean
    absolute pixel difference between decode(z + R·e_k) and decode(z − R·e_k).
    """
    center = np.asarray(z, dtype=np.float64).reshape(-1)
    r = check_positive("radius", radius)
    d = center.size
    pts = latent_walk(center, axes=range(d), offsets=(-r, r)).reshape(2 * d, d)
    imgs = np.asarray(decode(pts), dtype=np.float64).reshape(d, 2, -1)
    score = np.abs(imgs[:, 1] - imgs[:, 0]).mean(axis=1)
    order = np.argsort(-score, kind="stable")
    return tuple(int(k) for k in order[: max(1, min(int(top), d))])


def tile_images(
    images: Any, *, pad: int = 1, pad_value: float = 1.0, highlight_col: int | None = None
) -> np.ndarray:
    """A (rows, cols, C, H, W) stack in [0, 1] as one RGB picture (3, H', W') with ``pad`` pixels
    between tiles; the tiles of ``highlight_col`` get a red frame (the centre of posthoc Fig. 3)."""
    arr = np.clip(np.asarray(images, dtype=np.float64), 0.0, 1.0)
    if arr.ndim != 5 or arr.shape[2] not in (1, 3):
        raise ValueError(f"images must have shape (rows, cols, 1 or 3, H, W), got {arr.shape}")
    rows, cols, ch, h, w = arr.shape
    if ch == 1:
        arr = np.repeat(arr, 3, axis=2)
    p = int(pad)
    out = np.full((rows * (h + p) + p, cols * (w + p) + p, 3), float(pad_value))
    for i in range(rows):
        for j in range(cols):
            top, left = p + i * (h + p), p + j * (w + p)
            out[top : top + h, left : left + w] = arr[i, j].transpose(1, 2, 0)
            if highlight_col is not None and j == highlight_col and p > 0:
                red = np.array([0.85, 0.1, 0.1])
                out[top - p : top, left - p : left + w + p] = red
                out[top + h : top + h + p, left - p : left + w + p] = red
                out[top - p : top + h + p, left - p : left] = red
                out[top - p : top + h + p, left + w : left + w + p] = red
    return out.transpose(2, 0, 1)
