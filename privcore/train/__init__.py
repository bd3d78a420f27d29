"""Training (``python -m privcore train ...``): recipes with the papers' hyperparameters for the
β-VAE embedder, the eight obfuscators of Table 1 and the α sweep of Fig. 2, the reconstruction
attacker, the inference-privacy classifiers, and the Δp statistics step. Runs on CUDA when
present and on the CPU otherwise; runs resume after an interruption.

Exports are loaded lazily (PEP 562), so that ``python -m privcore --help`` does not import torch.
"""

from __future__ import annotations

from privcore._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "ALPHA_SWEEP": "recipes",
    "AttackerRecipe": "recipes",
    "EmbedderRecipe": "recipes",
    "IPRecipe": "recipes",
    "ObfuscatorRecipe": "recipes",
    "VARIANTS": "recipes",
    "attacker_recipe": "recipes",
    "compute_delta_p": "delta_p",
    "dataset_card": "embedder",
    "dataset_from_card": "embedder",
    "delta_p_statistics": "delta_p",
    "embedder_recipe": "recipes",
    "ip_recipe": "recipes",
    "laplace_release_noise": "release_aware",
    "obfuscator_recipe": "recipes",
    "resolve_device": "common",
    "train_embedder": "embedder",
    "train_ip_classifier": "ip",
    "train_reconstruction_attacker": "attacker",
    "train_obfuscator": "obfuscator",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
