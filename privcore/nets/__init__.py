"""Torch modules used by privcore (embedder, obfuscator, classifier, adversary, Lipschitz layers)
and their checkpoints (safetensors weights + verified JSON cards).

* :mod:`privcore.nets.embedder` — β-VAE embedder (posthoc-PTR App. E).
* :mod:`privcore.nets.models` — obfuscator/classifier MLPs, proxy adversaries, IP classifiers.
* :mod:`privcore.nets.lipschitz_layers` — ℓ1 column-norm and spectral Lipschitz layers.
* :mod:`privcore.nets.attacker` — the reconstruction attacker (posthoc paper Sec. 6).
* :mod:`privcore.nets.checkpoint` — save/load with hash, architecture and code checks.
* :mod:`privcore.nets.cards` — the cards alone (no torch).

Names are exported lazily (:mod:`privcore._lazy`): reading a card never imports torch.
"""

from privcore._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "Architecture": "checkpoint",
        "BetaVAE": "embedder",
        "Checkpoint": "checkpoint",
        "ImageDecoder": "blocks",
        "ImageEncoder": "blocks",
        "beta_vae_loss": "embedder",
        "build_module": "checkpoint",
        "load_checkpoint": "checkpoint",
        "read_card": "cards",
        "relu_mlp": "blocks",
        "save_checkpoint": "checkpoint",
    },
)
