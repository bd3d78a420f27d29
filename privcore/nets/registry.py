"""Architecture registry: the names checkpoint cards use to rebuild their modules.

Each entry lists the classes/functions whose source defines the architecture; their AST
(without docstrings) is the code fingerprint stored in every card (:mod:`privcore.nets.checkpoint`).
"""

from __future__ import annotations

from privcore.attacks.reconstruction import ReconstructionAttacker
from privcore.nets import lipschitz_layers as ll
from privcore.nets.blocks import ImageDecoder, ImageEncoder, relu_mlp, spatial_plan
from privcore.nets.checkpoint import register_architecture
from privcore.nets.embedder import BetaVAE
from privcore.nets.models import (
    LatentAdversary,
    LipschitzClassifier,
    NoiseAwareClassifier,
    ProxyImageAdversary,
    SmallCNN,
    _Normalize,
    cifar_resnet18,
    latent_mlp,
)

_IMAGE = (ImageEncoder, ImageDecoder, relu_mlp, spatial_plan)

register_architecture("beta_vae", BetaVAE, sources=_IMAGE)
register_architecture("relu_mlp", latent_mlp, sources=(relu_mlp,))
register_architecture("proxy_image_adversary", ProxyImageAdversary, sources=_IMAGE)
register_architecture("noise_aware_classifier", NoiseAwareClassifier, sources=(relu_mlp,))
register_architecture("latent_adversary", LatentAdversary, sources=(relu_mlp,))
register_architecture("reconstruction_attacker", ReconstructionAttacker, sources=_IMAGE)
register_architecture("small_cnn", SmallCNN)
register_architecture("cifar_resnet18", cifar_resnet18, sources=(_Normalize,))
register_architecture(
    "lipschitz_classifier",
    LipschitzClassifier,
    sources=(
        ll.LipschitzMLP,
        ll._ConstrainedLinear,
        ll.L1LipschitzLinear,
        ll.SpectralLipschitzLinear,
        ll.split_bound,
        ll.operator_norm,
    ),
)
