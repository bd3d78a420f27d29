"""Reconstruction attacker (posthoc-PTR paper, Sec. 6 and Tables 3–6): a decoder that rebuilds the
input image from a privatized release. Its training is
:func:`privcore.train.attacker.train_reconstruction_attacker`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from privcore.nets.blocks import ImageDecoder

__all__ = ["ReconstructionAttacker"]


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
