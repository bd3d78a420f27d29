"""Architecture registry: the names checkpoint cards use to rebuild their modules.

Each entry lists the classes/functions whose source defines the architecture; their AST
(without docstrings) is the code fingerprint stored in every card (:mod:`privcore.nets.checkpoint`).
The architectures are registered at the end of this module, so a lookup always sees them.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from privcore.errors import CheckpointError
from privcore.nets import lipschitz_layers as ll
from privcore.nets.attacker import ReconstructionAttacker, ScaleToldAttacker
from privcore.nets.blocks import ImageDecoder, ImageEncoder, relu_mlp, spatial_plan
from privcore.nets.embedder import BetaVAE
from privcore.nets.models import (
    LatentAdversary,
    LipschitzClassifier,
    NoiseAwareClassifier,
    ProxyImageAdversary,
    SmallCNN,
    ToldScale,
    _Normalize,
    cifar_resnet18,
    latent_mlp,
)

__all__ = ["architecture_factory", "code_fingerprint", "register_architecture"]


@dataclass(frozen=True)
class _ArchEntry:
    factory: Callable[..., nn.Module]
    sources: tuple[Any, ...]


_ARCHITECTURES: dict[str, _ArchEntry] = {}


def register_architecture(
    name: str, factory: Callable[..., nn.Module], *, sources: tuple[Any, ...] = ()
) -> None:
    """Register ``factory`` under ``name``; ``sources`` (classes/functions) define the architecture
    and feed its code fingerprint (the factory itself is always included)."""
    _ARCHITECTURES[name] = _ArchEntry(factory, (factory, *sources))
    _FINGERPRINTS.pop(name, None)


def architecture_factory(type_name: str) -> Callable[..., nn.Module]:
    """The factory registered as ``type_name`` (CheckpointError for an unknown type)."""
    entry = _ARCHITECTURES.get(type_name)
    if entry is None:
        raise CheckpointError(
            f"unknown architecture type {type_name!r}; known: {', '.join(sorted(_ARCHITECTURES))}"
        )
    return entry.factory


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(getattr(body[0], "value", None), ast.Constant)
            ):
                if isinstance(body[0].value.value, str):
                    node.body = body[1:] or [ast.Pass()]
        # Python 3.12 added ``type_params`` (PEP 695) to definitions; an empty one is the same code as
        # on 3.11, so it is dropped and the fingerprint is the same on both versions
        if getattr(node, "type_params", None) == []:
            del node.type_params
    return tree


_FINGERPRINTS: dict[str, str] = {}
_FINGERPRINT_LOCK = threading.Lock()


def code_fingerprint(type_name: str) -> str:
    """SHA-256 of the source that defines architecture ``type_name`` (AST without docstrings and
    comments, so editing documentation does not invalidate checkpoints, changing code does).
    Computed once per process (the running code cannot change)."""
    entry = _ARCHITECTURES.get(type_name)
    if entry is None:
        raise CheckpointError(f"unknown architecture type {type_name!r}")
    with _FINGERPRINT_LOCK:
        if type_name not in _FINGERPRINTS:
            _FINGERPRINTS[type_name] = _fingerprint(entry)
        return _FINGERPRINTS[type_name]


def _fingerprint(entry: _ArchEntry, attempts: int = 3) -> str:
    for attempt in range(attempts):
        try:
            h = hashlib.sha256()
            for obj in entry.sources:
                src = textwrap.dedent(inspect.getsource(obj))
                h.update(ast.dump(_strip_docstrings(ast.parse(src)), include_attributes=False).encode())
            return h.hexdigest()
        except SystemError:
            # CPython 3.11's AST constructor keeps its recursion depth in shared state, so an ast.parse
            # racing one in another thread (the dashboard's warm-up imports) can fail spuriously with
            # "AST constructor recursion depth mismatch" (python/cpython#106905): parse again
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


_IMAGE = (ImageEncoder, ImageDecoder, relu_mlp, spatial_plan)

register_architecture("beta_vae", BetaVAE, sources=_IMAGE)
register_architecture("relu_mlp", latent_mlp, sources=(relu_mlp,))
register_architecture("proxy_image_adversary", ProxyImageAdversary, sources=_IMAGE)
register_architecture("noise_aware_classifier", NoiseAwareClassifier, sources=(ToldScale, relu_mlp))
register_architecture("latent_adversary", LatentAdversary, sources=(relu_mlp,))
register_architecture("reconstruction_attacker", ReconstructionAttacker, sources=_IMAGE)
register_architecture("scale_told_attacker", ScaleToldAttacker, sources=(*_IMAGE, ScaleToldAttacker))
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
