"""Reconstruction attacker (posthoc-PTR paper, Sec. 6 and Tables 3–6): a decoder that rebuilds the
input image from a privatized release. Its training is
:func:`privcore.train.attacker.train_reconstruction_attacker`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from privcore.nets.blocks import ImageDecoder

__all__ = ["ReconstructionAttacker", "ScaleToldAttacker"]


class ReconstructionAttacker(nn.Module):
    """Released vector (obfuscated z̃ plus noise) ↦ image in [0, 1]."""

    def __init__(
        self,
        *,
        in_dim: int,
        image_shape: Sequence[int],
        arch: str = "mlp",
        width: int = 16,
        hidden: int = 256,
    ) -> None:
        super().__init__()
        self.decoder = ImageDecoder(
            in_dim=in_dim, image_shape=image_shape, arch=arch, width=width, hidden=hidden
        )

    def forward(self, release: torch.Tensor) -> torch.Tensor:
        """Reconstruct a batch of images from a batch of releases."""
        return torch.sigmoid(self.decoder(release))


class ScaleToldAttacker(nn.Module):
    """Released vector v = f(z) + noise, told the public noise scale, ↦ image in [0, 1].

    The scale is told as the Laplace scale b of the same variance (2b² per coordinate; a Gaussian σ is
    told as b = σ/√2, as the release classifier is told it) with a flag for Gaussian noise. The features
    are the release classifier's (:class:`privcore.nets.models.NoiseAwareClassifier`): per coordinate
    u_j = (v_j − μ_j)/√(σ_j² + 2b²) and s_j = σ_j/√(σ_j² + 2b²), μ_j, σ_j the noise-free outputs'
    training mean and spread, plus the flag. The scale is public (fixed by the setting before the
    query), so telling it is what a real attacker can do. Told scales above ``max_scale`` (the largest
    trained) are read as ``max_scale``.
    """

    def __init__(
        self,
        *,
        in_dim: int,
        image_shape: Sequence[int],
        max_scale: float,
        arch: str = "mlp",
        width: int = 16,
        hidden: int = 256,
    ) -> None:
        super().__init__()
        if not max_scale > 0.0:
            raise ValueError(f"max_scale must be > 0, got {max_scale!r}")
        self.max_scale = float(max_scale)
        self.register_buffer("mean", torch.zeros(int(in_dim)))
        self.register_buffer("std", torch.ones(int(in_dim)))
        self.decoder = ImageDecoder(
            in_dim=2 * int(in_dim) + 1, image_shape=image_shape, arch=arch, width=width, hidden=hidden
        )

    @torch.no_grad()
    def fit_normalisation(self, outputs: torch.Tensor) -> None:
        """μ, σ from noise-free training outputs f(z) (σ floored at 1e-6 for dead outputs)."""
        self.mean.copy_(outputs.mean(0))
        self.std.copy_(outputs.std(0).clamp_min(1e-6))

    def forward(
        self, release: torch.Tensor, scale: torch.Tensor | float = 0.0, gaussian: torch.Tensor | float = 0.0
    ) -> torch.Tensor:
        """Reconstruct a batch of releases (N, d) told scale ``scale`` and Gaussian flag ``gaussian``
        (each a float or one per row)."""
        n = release.shape[0]
        b = torch.as_tensor(scale, dtype=release.dtype, device=release.device).clamp(0.0, self.max_scale)
        g = torch.as_tensor(gaussian, dtype=release.dtype, device=release.device)
        b = b.reshape(-1, 1).expand(n, 1) if b.numel() == 1 else b.reshape(n, 1)
        g = g.reshape(-1, 1).expand(n, 1) if g.numel() == 1 else g.reshape(n, 1)
        total = torch.sqrt(self.std**2 + 2.0 * b**2)
        u = (release - self.mean) / total
        s = (self.std / total).expand_as(u)
        return torch.sigmoid(self.decoder(torch.cat([u, s, g], dim=-1)))
