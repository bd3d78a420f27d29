"""Local-DP baselines of the posthoc paper's Table 2: LDP-Image and LDP-Embedding (pure ε, all pairs).

Both are the Laplace mechanism (Dwork & Roth 2014, Thm 3.6) with the ℓ1 sensitivity of a record
whose every value lies in a known interval, so the guarantee covers *every* pair of inputs
(ε-local DP; a stronger and different notion than (ε, δ, R)-neighbourhood privacy, which is why
the paper reports it only as a baseline).

* LDP-Image: clip each pixel to [0, 1]; two images of d values differ by at most d in ℓ1, so the
  scale is d/ε.
* LDP-Embedding: clip each coordinate to [−B, B]; two k-dimensional embeddings differ by at most
  2Bk in ℓ1, so the scale is 2Bk/ε.

Clipping happens *before* the noise, so the sensitivity bound holds whatever the input was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from privcore.mechanisms._arrays import as_float64
from privcore.mechanisms.guarantee import ANY_METRIC, Guarantee
from privcore.mechanisms.sampling import (
    MAX_NUMEL,
    NoisePlan,
    RngLike,
    add_noise,
    check_sampler_epsilon,
    plan_laplace,
)
from privcore.validation import check_int, check_positive

__all__ = ["LDPEmbedding", "LDPImage"]


def _check_count(name: str, value: int) -> int:
    """An integer in [1, MAX_NUMEL]: no record can hold more values than the samplers cover."""
    v = check_int(name, value, minimum=1)
    if v > MAX_NUMEL:
        raise ValueError(f"{name} must be in [1, 2^28 = {MAX_NUMEL}], got {value!r}")
    return v


def _finite_scale(scale: float, what: str) -> float:
    if not math.isfinite(scale):
        raise ValueError(f"the Laplace scale {what} overflows float64; nothing released")
    return scale


def _ldp_guarantee(epsilon: float, mechanism: str) -> Guarantee:
    return Guarantee(
        epsilon=epsilon,
        delta=0.0,
        radius=math.inf,
        metric=ANY_METRIC,
        mechanism=mechanism,
        definition="ε-local differential privacy",
        calibration="Laplace",
    )


@dataclass(frozen=True, kw_only=True)
class LDPImage:
    """LDP-Image (posthoc paper, Table 2): clip pixels to [0, 1], add i.i.d. Lap(d/ε), d = values per image.

    Input: a batch (N, ...) whose first axis indexes images (pass one image as ``x[None]``).
    ``values_per_image`` is optional; when given, the batch layout is checked against it and
    :attr:`scale` is available before any call. A 1-D input is accepted only with
    ``values_per_image`` equal to its length (one flattened image), so a single H×W image can never
    be mistaken for H images of W pixels (which would under-noise it H-fold).
    """

    epsilon: float
    values_per_image: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_sampler_epsilon(self.epsilon))
        if self.values_per_image is not None:
            object.__setattr__(
                self, "values_per_image", _check_count("values_per_image", self.values_per_image)
            )

    def scale_for(self, values_per_image: int) -> float:
        """Laplace scale d/ε for images of d pixel values."""
        return _check_count("values_per_image", values_per_image) / self.epsilon

    @property
    def scale(self) -> float:
        """d/ε; needs ``values_per_image`` (else use :meth:`scale_for`)."""
        if self.values_per_image is None:
            raise ValueError("LDPImage.scale needs values_per_image; use scale_for(d) or set it")
        return self.scale_for(self.values_per_image)

    @property
    def guarantee(self) -> Guarantee:
        """ε-LDP: every pair of images."""
        return _ldp_guarantee(self.epsilon, "LDP-Image")

    def _values_per_image(self, shape: tuple[int, ...]) -> int:
        if len(shape) >= 2:
            d = int(np.prod(shape[1:]))
        elif len(shape) == 1 and self.values_per_image is not None:
            d = shape[0]
        else:
            raise ValueError(
                f"x must be a batch of images with shape (N, ...), got shape {shape}; "
                "pass one image as x[None] (or a flat image with values_per_image set)"
            )
        if d == 0:
            raise ValueError(f"x must hold at least one value per image, got shape {shape}")
        if self.values_per_image is not None and d != self.values_per_image:
            raise ValueError(
                f"x has {d} values per image but values_per_image is {self.values_per_image} (shape {shape})"
            )
        return d

    def noise_plan(self, values_per_image: int, numel: int) -> NoisePlan:
        """What the exact sampler draws (scale_eff ≥ d/ε) for ``numel`` values in all."""
        return plan_laplace(sensitivity=float(values_per_image), epsilon=self.epsilon, numel=numel)

    def __call__(self, x: Any, *, rng: RngLike = None) -> Any:
        """Clip to [0, 1] and add Lap(d/ε) to every value; same type, shape and dtype."""
        arr, restore = as_float64("x", x)
        d = self._values_per_image(arr.shape)
        clipped = np.clip(arr, 0.0, 1.0)
        return restore(add_noise(clipped, self.noise_plan(d, max(1, arr.size)), rng))

    apply = __call__


@dataclass(frozen=True, kw_only=True)
class LDPEmbedding:
    """LDP-Embedding (posthoc paper, Table 2): clip to [−B, B]^k, add i.i.d. Lap(2Bk/ε).

    Input: one embedding (k,) or a batch (N, k).
    """

    epsilon: float
    bound: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_sampler_epsilon(self.epsilon))
        object.__setattr__(self, "bound", check_positive("bound", self.bound))

    def scale_for(self, dim: int) -> float:
        """Laplace scale 2Bk/ε for k-dimensional embeddings."""
        k = _check_count("dim", dim)
        return _finite_scale(
            2.0 * self.bound * k / self.epsilon, f"2·bound·dim/epsilon (bound={self.bound!r}, dim={k})"
        )

    @property
    def guarantee(self) -> Guarantee:
        """ε-LDP: every pair of embeddings."""
        return _ldp_guarantee(self.epsilon, "LDP-Embedding")

    def noise_plan(self, dim: int, numel: int) -> NoisePlan:
        """What the exact sampler draws (scale_eff ≥ 2Bk/ε) for ``numel`` values in all."""
        k = _check_count("dim", dim)
        sensitivity = _finite_scale(
            math.nextafter(2.0 * self.bound * k, math.inf),
            f"sensitivity 2·bound·dim (bound={self.bound!r}, dim={k})",
        )
        return plan_laplace(sensitivity=sensitivity, epsilon=self.epsilon, numel=numel)

    def __call__(self, z: Any, *, rng: RngLike = None) -> Any:
        """Clip to [−B, B] and add Lap(2Bk/ε) to every coordinate; same type, shape and dtype."""
        arr, restore = as_float64("z", z)
        if arr.ndim not in (1, 2) or arr.shape[-1] == 0:
            raise ValueError(f"z must have shape (k,) or (N, k) with k ≥ 1, got {arr.shape}")
        clipped = np.clip(arr, -self.bound, self.bound)
        return restore(add_noise(clipped, self.noise_plan(arr.shape[-1], max(1, arr.size)), rng))

    apply = __call__
