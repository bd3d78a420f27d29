"""Is an input like the data the model was built for? Blank and out-of-domain checks before a release.

A release's guarantee holds for any input, but its usefulness does not: a blank image (a drawing on
a transparent background that decoded to one colour) or a photo fed to a digits model is released
as confidently as a real one. :class:`DomainProfile` summarises held-out data — the 99.9th
percentile of the VAE's reconstruction error ‖x − g⁻¹(g(x))‖² / d and of the embedding's
standardised ℓ∞ distance max_k |z_k − m_k| / s_k from the training embeddings' mean m and standard
deviation s — and :meth:`DomainProfile.check` names what an input exceeds. A near-constant image
(pixel standard deviation below ``BLANK_STD``) is flagged without any model.

These are usability checks, not privacy mechanisms: they read the user's own input on the user's
device and release nothing; their thresholds come from public (training and test) data only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from privcore.validation import check_in_range

__all__ = ["BLANK_STD", "DomainProfile", "blank_reason"]

#: Pixel standard deviation (values in [0, 1]) under which an image counts as blank.
BLANK_STD = 0.02


def blank_reason(x: Any, *, min_std: float = BLANK_STD) -> str | None:
    """Why ``x`` (pixels in [0, 1]) looks blank, or None: its pixels barely vary."""
    arr = np.asarray(x.detach().cpu() if hasattr(x, "detach") else x, dtype=np.float64)
    std = float(arr.std()) if arr.size else 0.0
    if std < min_std:
        return (
            f"the image is nearly uniform (pixel standard deviation {std:.3g} < {min_std:g}, mean "
            f"{float(arr.mean()) if arr.size else 0.0:.3g}): it may have decoded blank, e.g. a drawing on a "
            "transparent background"
        )
    return None


@dataclass(frozen=True, kw_only=True)
class DomainProfile:
    """Thresholds at the ``quantile`` of held-out data, and the embedding statistics they use."""

    recon_threshold: float
    embed_threshold: float
    z_mean: tuple[float, ...]
    z_std: tuple[float, ...]
    quantile: float
    n: int

    @classmethod
    def from_data(
        cls,
        *,
        train: torch.Tensor,
        held_out: torch.Tensor,
        embed: Callable[[torch.Tensor], torch.Tensor],
        decode: Callable[[torch.Tensor], torch.Tensor],
        quantile: float = 0.999,
        batch_size: int = 512,
    ) -> DomainProfile:
        """The profile of ``held_out`` images (e.g. the test split) under the embedder/decoder pair, with
        the embedding standardised by the ``train`` embeddings' mean and standard deviation."""
        q = check_in_range("quantile", quantile, 0.5, 1.0, low_open=False)
        z_train = _batched(embed, train, batch_size)
        mean, std = z_train.mean(0), z_train.std(0).clamp_min(1e-12)
        errors, dists = [], []
        for start in range(0, held_out.shape[0], batch_size):
            x = held_out[start : start + batch_size]
            z = embed(x).double()
            errors.append(_recon_error(x, decode(z.float())))
            dists.append(((z - mean).abs() / std).amax(dim=1))
        err, dist = torch.cat(errors), torch.cat(dists)
        return cls(
            recon_threshold=float(torch.quantile(err, q)),
            embed_threshold=float(torch.quantile(dist, q)),
            z_mean=tuple(float(v) for v in mean),
            z_std=tuple(float(v) for v in std),
            quantile=q,
            n=int(held_out.shape[0]),
        )

    def scores(self, x: torch.Tensor, z: torch.Tensor, reconstruction: torch.Tensor) -> tuple[float, float]:
        """(reconstruction error, standardised embedding distance) of one image ``x`` with embedding
        ``z`` and VAE reconstruction ``reconstruction``."""
        mean = torch.tensor(self.z_mean, dtype=torch.float64)
        std = torch.tensor(self.z_std, dtype=torch.float64)
        zz = torch.as_tensor(z, dtype=torch.float64).reshape(-1)
        err = _recon_error(x.reshape(1, *x.shape[-3:]), reconstruction.reshape(1, *x.shape[-3:]))
        return float(err[0]), float(((zz - mean).abs() / std).max())

    def check(self, x: torch.Tensor, z: torch.Tensor, reconstruction: torch.Tensor) -> list[str]:
        """What ``x`` exceeds, in words (empty when it looks like the held-out data); see :meth:`scores`."""
        err, dist = self.scores(x, z, reconstruction)
        pct = f"{100 * self.quantile:g}th percentile"
        out = []
        if err > self.recon_threshold:
            out.append(
                f"the VAE reconstructs it poorly (error {err:.3g} > {self.recon_threshold:.3g}, the {pct} of "
                f"{self.n} test images)"
            )
        if dist > self.embed_threshold:
            out.append(
                f"its embedding is far from the training data ({dist:.3g} standard deviations > "
                f"{self.embed_threshold:.3g}, the {pct} of {self.n} test images)"
            )
        return out


def _recon_error(x: torch.Tensor, reconstruction: torch.Tensor) -> torch.Tensor:
    a = x.double().flatten(1)
    b = reconstruction.double().reshape(a.shape)
    return ((a - b) ** 2).mean(dim=1)


def _batched(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, batch_size: int) -> torch.Tensor:
    return torch.cat([f(x[i : i + batch_size]).double() for i in range(0, x.shape[0], batch_size)])
