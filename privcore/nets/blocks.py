"""Building blocks shared by the networks: plain ReLU MLPs and convolutional image
encoders/decoders sized from the image shape (posthoc-PTR paper, App. E: "deep CNN based β-VAE")."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from torch import nn

from privcore.validation import check_choice, check_int

__all__ = ["ImageDecoder", "ImageEncoder", "ResNet18", "relu_mlp", "spatial_plan"]


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


class _BasicBlock(nn.Module):
    """ResNet's two-3×3-convolution residual block (He et al. 2016), torchvision's parameter names."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    """ResNet-18 (He et al. 2016) with the CIFAR stem (3×3 convolution, no max-pool).

    Same layers, parameter names and initialisation as torchvision's ``resnet18`` with
    ``conv1``/``maxpool`` replaced as usual for 32×32 inputs, so state dicts are interchangeable;
    written out here because torchvision's wheels do not load beside a CPU-only torch from PyPI.
    """

    def __init__(self, *, num_classes: int = 10, in_channels: int = 3) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.Identity()
        widths = (64, 128, 256, 512)
        cin = 64
        for i, w in enumerate(widths, start=1):
            stride = 1 if i == 1 else 2
            setattr(self, f"layer{i}", nn.Sequential(_BasicBlock(cin, w, stride), _BasicBlock(w, w, 1)))
            cin = w
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for i in range(1, 5):
            x = getattr(self, f"layer{i}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))
