"""Training (``python -m privcore train ...``): recipes with the papers' hyperparameters for the
β-VAE embedder, the eight obfuscators of Table 1 and the α sweep of Fig. 2, the reconstruction
attacker, the inference-privacy classifiers, and the Δp statistics step. Runs on CUDA when
present and on the CPU otherwise; runs resume after an interruption."""

from privcore.train.common import resolve_device
from privcore.train.delta_p import compute_delta_p, delta_p_statistics
from privcore.train.embedder import dataset_card, dataset_from_card, train_embedder
from privcore.train.ip import train_ip_classifier
from privcore.train.obfuscator import train_obfuscator
from privcore.train.recipes import (
    ALPHA_SWEEP,
    VARIANTS,
    AttackerRecipe,
    EmbedderRecipe,
    IPRecipe,
    ObfuscatorRecipe,
    attacker_recipe,
    embedder_recipe,
    ip_recipe,
    obfuscator_recipe,
)

__all__ = [
    "ALPHA_SWEEP",
    "VARIANTS",
    "AttackerRecipe",
    "EmbedderRecipe",
    "IPRecipe",
    "ObfuscatorRecipe",
    "attacker_recipe",
    "compute_delta_p",
    "dataset_card",
    "dataset_from_card",
    "delta_p_statistics",
    "embedder_recipe",
    "ip_recipe",
    "obfuscator_recipe",
    "resolve_device",
    "train_embedder",
    "train_ip_classifier",
    "train_obfuscator",
]
