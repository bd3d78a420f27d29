"""Torch modules used by privcore (embedder, obfuscator, classifier, adversary, Lipschitz layers)
and their checkpoints (safetensors weights + verified JSON cards).

* :mod:`privcore.nets.embedder` — β-VAE embedder (posthoc-PTR App. E).
* :mod:`privcore.nets.models` — obfuscator/classifier MLPs, proxy adversaries, IP classifiers.
* :mod:`privcore.nets.lipschitz_layers` — ℓ1 column-norm and spectral Lipschitz layers.
* :mod:`privcore.nets.checkpoint` — save/load with hash, architecture and code checks.
"""

from privcore.nets.blocks import ImageDecoder, ImageEncoder, relu_mlp
from privcore.nets.checkpoint import (
    Architecture,
    Checkpoint,
    build_module,
    load_checkpoint,
    read_card,
    save_checkpoint,
)
from privcore.nets.embedder import BetaVAE, beta_vae_loss

__all__ = [
    "Architecture",
    "BetaVAE",
    "Checkpoint",
    "ImageDecoder",
    "ImageEncoder",
    "beta_vae_loss",
    "build_module",
    "load_checkpoint",
    "read_card",
    "relu_mlp",
    "save_checkpoint",
]
