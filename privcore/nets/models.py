"""The networks of the posthoc-PTR pipeline (Sec. 4, Fig. 1) and of the inference-privacy
experiments (Sec. V): obfuscator, task classifier, proxy adversary, IP classifiers.

* Obfuscator f: z ↦ z̃, a ReLU MLP in latent space made only of ``nn.Linear``/``nn.ReLU`` in
  one ``nn.Sequential`` (the authors used 8–10 units per layer), so the exact LipMIP engine
  certifies it in well under a second per point.
* Classifier on z̃ and proxy adversary (z̃ ↦ image or z̃ ↦ z) of the ARL min-max game.
* IP classifiers: a standard CNN (ResNet-18 for CIFAR-10) for Gauss-Input, and Lipschitz MLPs
  (ℓ1 column-norm / exact spectral layers from :mod:`privcore.nets.lipschitz_layers`) whose
  certified global constant calibrates Lap-Output / Gauss-Output. Every classifier takes
  pixels in [0, 1] as the user sees them: no normalisation layer sits outside the bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from privcore.nets.blocks import ImageDecoder, relu_mlp
from privcore.nets.lipschitz_layers import LipschitzMLP
from privcore.validation import check_choice, check_int, check_positive

__all__ = [
    "LatentAdversary",
    "LipschitzClassifier",
    "NoiseAwareClassifier",
    "ProxyImageAdversary",
    "SmallCNN",
    "ToldScale",
    "cifar_resnet18",
    "classify",
    "latent_mlp",
    "logits_one",
    "read_told_scale",
]


def latent_mlp(*, widths: Sequence[int]) -> nn.Sequential:
    """A ReLU MLP on vectors (obfuscator, classifier on z̃): :func:`relu_mlp` of ``widths``."""
    return relu_mlp(widths)


class ProxyImageAdversary(nn.Module):
    """Proxy adversary of ARL training: obfuscated vector z̃ ↦ reconstructed image in [0, 1]."""

    def __init__(
        self,
        *,
        in_dim: int,
        image_shape: Sequence[int],
        arch: str = "mlp",
        width: int = 32,
        hidden: int = 256,
    ) -> None:
        super().__init__()
        self.decoder = ImageDecoder(
            in_dim=in_dim, image_shape=image_shape, arch=arch, width=width, hidden=hidden
        )

    def forward(self, z_tilde: torch.Tensor) -> torch.Tensor:
        """Reconstruct images from obfuscated vectors."""
        return torch.sigmoid(self.decoder(z_tilde))


class LatentAdversary(nn.Module):
    """Proxy adversary that rebuilds the latent z from z̃ (cheaper than images, the same
    information since z decodes almost losslessly; App. E)."""

    def __init__(self, *, in_dim: int, out_dim: int, hidden: int = 64) -> None:
        super().__init__()
        self.net = relu_mlp([in_dim, hidden, hidden, out_dim])

    def forward(self, z_tilde: torch.Tensor) -> torch.Tensor:
        """Predict z from z̃."""
        return self.net(z_tilde)


@dataclass(frozen=True)
class ToldScale:
    """How a :class:`NoiseAwareClassifier` reads the Laplace scale b it is told (docs/RESULTS.md,
    "The scale the classifier is told"). The classifier was trained on b = 0 and on b in
    [``min_scale``, ``max_scale``]; its features at any other b are out of distribution, and within
    that range its accuracy on noise-free releases can rise with b (most where its predictions
    collapse onto a few classes, near chance). The map:

    * b = 0 stays 0 (the noise-free classifier, whose test accuracy the card records);
    * 0 < b < ``min_scale``: 0 when b ≤ ``clean_below`` (Laplace noise whose standard deviation
      √2·b is a small fraction of the smallest spread σ_j: the features are those of a noise-free
      release), else ``min_scale`` (the nearest scale trained on);
    * b > ``max_scale``: ``max_scale`` (no extrapolation);
    * b in an open interval (a, c) of ``raised``: c, the next scale at which the noise-free
      training accuracy is not significantly below any larger one (:func:`privcore.train.
      release_classifier.calibrate_told_scale`; an interval may start at ``clean_below`` when
      ``min_scale`` itself is raised); any other b is used as told.

    Every read scale is ≥ the told one inside the trained range: the classifier may assume more
    noise than it is told there, never less.
    """

    min_scale: float
    max_scale: float
    clean_below: float = 0.0
    raised: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        lo, hi = check_positive("min_scale", self.min_scale), check_positive("max_scale", self.max_scale)
        if not hi >= lo:
            raise ValueError(f"max_scale must be ≥ min_scale, got {hi!r} < {lo!r}")
        if not (0.0 <= self.clean_below <= lo):
            raise ValueError(f"clean_below must lie in [0, min_scale], got {self.clean_below!r}")
        raised = tuple((float(a), float(c)) for a, c in self.raised)
        prev = self.clean_below
        for a, c in raised:
            if not (prev <= a < c <= hi and c >= lo):
                raise ValueError(
                    "raised intervals must be increasing, disjoint, within [clean_below, max_scale] "
                    f"and end at or above min_scale: {raised!r}"
                )
            prev = c
        object.__setattr__(self, "raised", raised)

    #: relative slack of the trained range's ends: Δp·R/ε and Δp·R·(1/ε) may differ in the last bit
    RANGE_SLACK = 1e-9

    def __call__(self, scale: torch.Tensor) -> torch.Tensor:
        """The scales read for told scales ``scale`` (≥ 0, any shape; float64 keeps the bounds exact)."""
        b = torch.as_tensor(scale)
        lo, hi = self.min_scale * (1.0 - self.RANGE_SLACK), self.max_scale * (1.0 + self.RANGE_SLACK)
        out = torch.where(b > hi, torch.full_like(b, self.max_scale), b)
        gap = torch.where(b <= self.clean_below, torch.zeros_like(b), torch.full_like(b, self.min_scale))
        out = torch.where((b > 0) & (b < lo), gap, out)
        for a, c in self.raised:
            out = torch.where((b > a) & (b < c), torch.full_like(b, c), out)
        return out

    def to_json(self) -> dict[str, Any]:
        """The form recorded in the card (architecture kwargs ``told_scale``)."""
        return {
            "min_scale": self.min_scale,
            "max_scale": self.max_scale,
            "clean_below": self.clean_below,
            "raised": [[a, c] for a, c in self.raised],
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ToldScale:
        """Read :meth:`to_json`'s form."""
        return cls(
            min_scale=float(d["min_scale"]),
            max_scale=float(d["max_scale"]),
            clean_below=float(d.get("clean_below", 0.0)),
            raised=tuple((float(a), float(c)) for a, c in d.get("raised", ())),
        )


class NoiseAwareClassifier(nn.Module):
    """Task classifier on a posthoc-PTR release v = f(z) + Lap(b) that is also told the public
    Laplace scale b per coordinate (b = Δp·R/ε; b = 0 for the noise-free f(z), i.e. ε = ∞).

    Features per coordinate j, with μ_j, σ_j the mean and standard deviation of the noise-free
    f(z) on training data (buffers, fixed at fit time):
    u_j = (v_j − μ_j)/√(σ_j² + 2b²) (standardised by the release's total spread; Lap(b) has
    variance 2b²) and s_j = σ_j/√(σ_j² + 2b²) ∈ (0, 1] (how much of coordinate j is signal).
    At b = 0 this is plain standardisation, so even coordinates that f compresses to a tiny
    spread are usable; at large b they are down-weighted. b is public (it is fixed by Δp, R and
    ε before the query), so using it is post-processing of the release: no privacy cost. This goes
    beyond the posthoc paper, whose classifier is trained on one noise level ("N" variants).

    ``told_scale`` (a :class:`ToldScale` or its JSON form; recorded in the card's architecture)
    maps the told b to the scale the features use (:meth:`effective_scale`): scales the classifier
    was never trained on are read as trained ones, and stretches where its noise-free training
    accuracy rose with b are read as the next scale that does not, so that its accuracy on
    noise-free releases does not rise with the noise it is told (docs/RESULTS.md, "The scale the
    classifier is told"). Without one the told b is used as it is. The map is applied in
    :meth:`forward`; training calls :meth:`logits` with the raw scale.
    """

    def __init__(
        self,
        *,
        in_dim: int,
        num_classes: int,
        hidden: Sequence[int] = (256, 256),
        told_scale: ToldScale | Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        in_dim = check_int("in_dim", in_dim, minimum=1)
        self.register_buffer("mean", torch.zeros(in_dim))
        self.register_buffer("std", torch.ones(in_dim))
        self.net = relu_mlp([2 * in_dim, *hidden, check_int("num_classes", num_classes, minimum=2)])
        self.told_scale = (
            told_scale if told_scale is None or isinstance(told_scale, ToldScale)
            else ToldScale.from_json(told_scale)
        )

    @torch.no_grad()
    def fit_normalisation(self, z_tilde: torch.Tensor) -> None:
        """Set μ, σ from noise-free training outputs f(z) (σ floored at 1e-6 for dead outputs)."""
        self.mean.copy_(z_tilde.mean(0))
        self.std.copy_(z_tilde.std(0).clamp_min(1e-6))

    @staticmethod
    def _checked(scale: torch.Tensor | float, **kw: Any) -> torch.Tensor:
        b = torch.as_tensor(scale, **kw)  # a float, or one scale per row
        if bool((b < 0).any()) or not bool(torch.isfinite(b).all()):
            raise ValueError("scale (the release's Laplace scale) must be finite and ≥ 0")
        return b

    def effective_scale(self, scale: torch.Tensor | float) -> torch.Tensor:
        """The scale the features use when the classifier is told ``scale`` (its
        :class:`ToldScale`; the told scale itself when it has none), in float64 on the CPU."""
        b = scale.detach().to("cpu", torch.float64) if torch.is_tensor(scale) else scale
        b = self._checked(b, dtype=torch.float64)  # a Python float stays exact
        return b if self.told_scale is None else self.told_scale(b)

    def logits(self, v: torch.Tensor, scale: torch.Tensor | float = 0.0) -> torch.Tensor:
        """Logits with the features of scale ``scale`` as given, without the :class:`ToldScale`
        map: what training fits and what calibrating the map measures."""
        b = self._checked(scale, dtype=v.dtype, device=v.device)
        if b.ndim == 1:
            b = b[:, None]
        total = torch.sqrt(self.std**2 + 2.0 * b**2)
        u = (v - self.mean) / total
        s = (self.std / total).expand_as(u)
        return self.net(torch.cat([u, s], dim=-1))

    def forward(self, v: torch.Tensor, scale: torch.Tensor | float = 0.0) -> torch.Tensor:
        """Logits of releases ``v`` (N, d) told Laplace scale ``scale`` (a float, or one per row),
        read through the classifier's :class:`ToldScale`."""
        return self.logits(v, self.effective_scale(scale))


def read_told_scale(told: ToldScale | None, scale: float) -> float:
    """``told(scale)`` (:meth:`ToldScale.__call__`; the scale itself when ``told`` is None) for one
    scale ≥ 0 given as a Python float: the same comparisons in float64."""
    b = float(scale)
    if told is None:
        return b
    lo, hi = told.min_scale * (1.0 - told.RANGE_SLACK), told.max_scale * (1.0 + told.RANGE_SLACK)
    out = told.max_scale if b > hi else b
    if 0.0 < b < lo:
        out = 0.0 if b <= told.clean_below else told.min_scale
    for a, c in told.raised:
        if a < b < c:
            out = c
    return out


def logits_one(classifier: NoiseAwareClassifier, value: Sequence[float], scale: float) -> torch.Tensor:
    """``classifier(torch.tensor([value]), scale)`` for one release told a float ``scale``: the same
    float32 logits at a fraction of the cost (the features by the same float32 operations, the
    correctly rounded ones in numpy; the read scale by :func:`read_told_scale`; the layers of a plain chain by
    their functional forms). Buffers off the CPU or not float32: the classifier's own forward."""
    c = classifier
    if any(t.device.type != "cpu" or t.dtype != torch.float32 for t in (c.mean, c.std)):
        return c(torch.tensor([list(value)], dtype=torch.float32), float(scale))
    b = float(scale)
    if not (math.isfinite(b) and b >= 0.0):
        raise ValueError("scale (the release's Laplace scale) must be finite and ≥ 0")
    b32 = np.float32(read_told_scale(c.told_scale, b))
    std = c.std.detach().numpy()
    # torch's float32 sqrt is not always correctly rounded: take it from torch, as forward does
    total = torch.sqrt(torch.from_numpy(std * std + np.float32(2.0) * (b32 * b32))).numpy()
    u = (np.asarray(value, dtype=np.float32) - c.mean.detach().numpy()) / total
    h = torch.from_numpy(np.concatenate([u, std / total])[None])
    layers = _plain_chain(c.net)
    if layers is None:
        return c.net(h)
    for layer in layers:  # what each layer's forward calls, without the module-call machinery
        h = torch.relu(h) if type(layer) is nn.ReLU else F.linear(h, layer.weight, layer.bias)
    return h


def _plain_chain(seq: nn.Module) -> list[nn.Module] | None:
    """The layers of ``seq`` when it is an exact ``nn.Sequential`` of exact ``nn.Linear`` and ``nn.ReLU``
    layers with no hooks and no forward set on an instance (and no global hooks), whose call computes
    exactly their functional forms in order; else None."""
    from torch.nn.modules import module as torch_module

    if (type(seq) is not nn.Sequential or torch_module._global_forward_hooks
            or torch_module._global_forward_pre_hooks):
        return None
    layers = list(seq._modules.values())
    for m in (seq, *layers):
        if (type(m) not in _PLAIN or m._forward_hooks or m._forward_pre_hooks or "forward" in vars(m)
                or (m is not seq and type(m) is nn.Sequential)):
            return None
    return layers


_PLAIN = (nn.Sequential, nn.Linear, nn.ReLU)


def classify(module: nn.Module, v: torch.Tensor, scale: torch.Tensor | float = 0.0) -> torch.Tensor:
    """Logits of a classifier on obfuscated vectors ``v`` released with Laplace scale ``scale``:
    a :class:`NoiseAwareClassifier` is told the scale, any other classifier sees ``v`` alone."""
    return module(v, scale) if isinstance(module, NoiseAwareClassifier) else module(v)


class SmallCNN(nn.Module):
    """A standard small CNN classifier for 8×8 to 64×64 images (two conv blocks, max-pooling,
    a dense head): the "standard CNN" of the IP experiments on digits and Fashion-MNIST."""

    def __init__(
        self, *, image_shape: Sequence[int], num_classes: int, width: int = 32, hidden: int = 128
    ) -> None:
        super().__init__()
        c, h, w = (int(v) for v in image_shape)
        check_int("num_classes", num_classes, minimum=2)
        pool = 2 if min(h, w) >= 16 else 1
        self.features = nn.Sequential(
            nn.Conv2d(c, width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(pool),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        # padded 3×3 convolutions keep the size; each max-pool floors it
        n = 2 * width * (h // pool // 2) * (w // pool // 2)
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(n, hidden), nn.ReLU(), nn.Linear(hidden, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits of a batch of images (pixels in [0, 1])."""
        return self.head(self.features(x))


class _Normalize(nn.Module):
    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


def cifar_resnet18(*, num_classes: int = 10, in_channels: int = 3) -> nn.Sequential:
    """torchvision's ResNet-18 adapted to 32×32 inputs (3×3 stem, no max-pool), with the
    CIFAR-10 normalisation inside the model so that it takes pixels in [0, 1] (the IP paper's
    α is measured on the input as the user sees it)."""
    from torchvision.models import resnet18

    net = resnet18(num_classes=check_int("num_classes", num_classes, minimum=2))
    net.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    net.maxpool = nn.Identity()
    mean, std = (
        ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)) if in_channels == 3 else ((0.5,), (0.25,))
    )
    return nn.Sequential(_Normalize(mean, std), net)


class LipschitzClassifier(nn.Module):
    """Flatten → :class:`LipschitzMLP`: a classifier on raw pixels whose global ℓp→ℓp Lipschitz
    constant (``norm="l1"`` for Lap-Output, ``"l2"`` for Gauss-Output) is at most ``bound`` by
    construction, every layer (the last one included) covered."""

    def __init__(
        self,
        *,
        image_shape: Sequence[int],
        num_classes: int,
        norm: str = "l2",
        hidden: Sequence[int] = (256, 128),
        bound: float = 1.0,
    ) -> None:
        super().__init__()
        c, h, w = (int(v) for v in image_shape)
        check_choice("norm", norm, ("l1", "l2"))
        self.flatten = nn.Flatten()
        self.mlp = LipschitzMLP(
            [c * h * w, *[int(v) for v in hidden], num_classes],
            bound=check_positive("bound", bound),
            norm=norm,
        )  # type: ignore[arg-type]
        self.norm = norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class scores of a batch of images (pixels in [0, 1])."""
        return self.mlp(self.flatten(x))

    def lipschitz_bound(self, p: float | str | None = None) -> float:
        """Certified global ℓp→ℓp bound (flattening is an isometry for every ℓp)."""
        return self.mlp.lipschitz_bound(p)
