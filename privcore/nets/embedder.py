"""β-VAE embedder (Higgins et al. 2017) as used by the posthoc-PTR paper (Sec. 4, App. E):
z = g(x) is the encoder mean, distances in z (ℓ∞) define the semantic neighbourhood, and the
decoder turns latent points back into pictures (reconstructions, neighbourhood walks)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from privcore.nets.blocks import ImageDecoder, ImageEncoder
from privcore.validation import check_int, check_nonnegative

__all__ = ["BetaVAE", "LatentDecoder", "MeanEncoder", "beta_vae_loss"]


class BetaVAE(nn.Module):
    """Gaussian encoder q(z|x) = N(μ(x), diag σ²(x)), Bernoulli decoder p(x|z), prior N(0, I)."""

    def __init__(
        self,
        *,
        image_shape: Sequence[int],
        latent_dim: int,
        arch: str = "conv",
        width: int = 32,
        hidden: int = 256,
    ) -> None:
        super().__init__()
        self.image_shape = tuple(int(v) for v in image_shape)
        self.latent_dim = check_int("latent_dim", latent_dim, minimum=1)
        self.encoder = ImageEncoder(
            image_shape=image_shape, out_dim=2 * latent_dim, arch=arch, width=width, hidden=hidden
        )
        self.decoder = ImageDecoder(
            in_dim=latent_dim, image_shape=image_shape, arch=arch, width=width, hidden=hidden
        )

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(μ, log σ²) of q(z|x)."""
        h = self.encoder(x)
        mu, logvar = h.chunk(2, dim=1)
        return mu, logvar.clamp(-30.0, 20.0)

    def decode_logits(self, z: torch.Tensor) -> torch.Tensor:
        """Bernoulli logits of p(x|z)."""
        return self.decoder(z)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Mean image of p(x|z), pixels in [0, 1]."""
        return torch.sigmoid(self.decoder(z))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Reparameterised pass: (reconstruction logits, μ, log σ²)."""
        mu, logvar = self.encode(x)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar) if self.training else mu
        return self.decode_logits(z), mu, logvar


def beta_vae_loss(
    logits: torch.Tensor, x: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor, *, beta: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Negative β-ELBO per image: Bernoulli reconstruction (BCE summed over pixels) + β·KL(q‖N(0, I))
    summed over latent dimensions, averaged over the batch. Returns (loss, reconstruction, KL)."""
    beta = check_nonnegative("beta", beta)
    n = x.shape[0]
    rec = F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / n
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / n
    return rec + beta * kl, rec, kl


class MeanEncoder(nn.Module):
    """The embedder g: x ↦ μ(x), the encoder mean (shares the VAE's weights)."""

    def __init__(self, vae: BetaVAE) -> None:
        super().__init__()
        self.vae = vae

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed a batch of images."""
        return self.vae.encode(x)[0]


class LatentDecoder(nn.Module):
    """z ↦ decoded image in [0, 1] (shares the VAE's weights)."""

    def __init__(self, vae: BetaVAE) -> None:
        super().__init__()
        self.vae = vae

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Decode a batch of latent points."""
        return self.vae.decode(z)
