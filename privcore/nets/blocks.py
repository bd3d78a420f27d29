"""Building blocks shared by the networks: plain ReLU MLPs and convolutional image
encoders/decoders sized from the image shape (posthoc-PTR paper, App. E: "deep CNN based β-VAE")."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from torch import nn

from privcore.validation import check_choice, check_int

__all__ = ["ImageDecoder", "ImageEncoder", "relu_mlp", "spatial_plan"]


def relu_mlp(widths: Sequence[int]) -> nn.Sequential:
    """``Linear → ReLU → … → Linear`` through ``widths`` (no activation after the last layer).

    Built only from ``nn.Linear`` and ``nn.ReLU`` inside one ``nn.Sequential``, so exact
    Lipschitz certification by MIP (LipMIP, Jordan & Dimakis 2020) applies to it as it is.
    """
    widths = [check_int("width", int(w), minimum=1) for w in widths]
    if len(widths) < 2:
        raise ValueError(f"widths needs at least an input and an output size, got {widths}")
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        layers.append(nn.Linear(a, b))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def spatial_plan(size: int) -> list[int]:
    """Spatial sizes of a stride-2, kernel-3, padding-1 conv stack from ``size`` down to ≤ 4."""
    sizes = [check_int("image size", size, minimum=1)]
    while sizes[-1] > 4:
        sizes.append(math.floor((sizes[-1] - 1) / 2) + 1)
    return sizes


class ImageEncoder(nn.Module):
    """Image (C, H, W) → vector of ``out_dim``: strided 3×3 convolutions (``arch="conv"``) down
    to ≤ 4×4 then a hidden dense layer, or a plain MLP on the flattened pixels (``arch="mlp"``,
    for tiny images such as 8×8 digits)."""

    def __init__(
        self,
        *,
        image_shape: Sequence[int],
        out_dim: int,
        arch: str = "conv",
        width: int = 32,
        hidden: int = 256,
    ) -> None:
        super().__init__()
        c, h, w = (int(v) for v in image_shape)
        check_choice("arch", arch, ("conv", "mlp"))
        if arch == "conv" and h != w:
            raise ValueError(f"arch='conv' needs square images, got {h}×{w}")
        if arch == "mlp":
            self.net = nn.Sequential(nn.Flatten(), *relu_mlp([c * h * w, hidden, hidden // 2, out_dim]))
            return
        sizes = spatial_plan(h)
        layers: list[nn.Module] = []
        ch = c
        for i in range(len(sizes) - 1):
            nxt = width * (2**i)
            layers += [nn.Conv2d(ch, nxt, 3, stride=2, padding=1), nn.ReLU()]
            ch = nxt
        layers += [
            nn.Flatten(),
            nn.Linear(ch * sizes[-1] ** 2, hidden),
            nn.ReLU(),
            nn.Linear(hidden, out_dim),
        ]
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Encode a batch of images."""
        return self.net(x)


class ImageDecoder(nn.Module):
    """Vector of ``in_dim`` → image logits (C, H, W): the mirror of :class:`ImageEncoder`
    (dense layer, then stride-2 transposed convolutions whose output padding lands exactly on
    the encoder's sizes), or an MLP for ``arch="mlp"``. Apply a sigmoid for pixels in [0, 1]."""

    def __init__(
        self,
        *,
        in_dim: int,
        image_shape: Sequence[int],
        arch: str = "conv",
        width: int = 32,
        hidden: int = 256,
    ) -> None:
        super().__init__()
        c, h, w = (int(v) for v in image_shape)
        check_choice("arch", arch, ("conv", "mlp"))
        self.image_shape = (c, h, w)
        if arch == "mlp":
            self.net = nn.Sequential(
                *relu_mlp([in_dim, hidden // 2, hidden, c * h * w]), nn.Unflatten(1, (c, h, w))
            )
            return
        if h != w:
            raise ValueError(f"arch='conv' needs square images, got {h}×{w}")
        sizes = spatial_plan(h)
        n_up = len(sizes) - 1
        ch = width * (2 ** max(n_up - 1, 0))
        layers: list[nn.Module] = [
            nn.Linear(in_dim, hidden),
            nn.ReLU(),
            nn.Linear(hidden, ch * sizes[-1] ** 2),
            nn.ReLU(),
            nn.Unflatten(1, (ch, sizes[-1], sizes[-1])),
        ]
        for i in range(n_up):
            s_in, s_out = sizes[-1 - i], sizes[-2 - i]
            last = i == n_up - 1
            nxt = c if last else ch // 2
            layers.append(
                nn.ConvTranspose2d(ch, nxt, 3, stride=2, padding=1, output_padding=s_out - (2 * s_in - 1))
            )
            if not last:
                layers.append(nn.ReLU())
            ch = nxt
        if n_up == 0:
            layers.append(nn.Conv2d(ch, c, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Decode a batch of vectors to image logits."""
        return self.net(z)
