"""Checkpoints: safetensors weights + a JSON card, verified on every load.

A checkpoint ``<stem>.safetensors`` holds one or more named modules (keys ``<module>.<param>``);
``<stem>.json`` is its card: dataset (name, fingerprint), recipe, hyperparameters, metrics, Δp
statistics (posthoc-PTR paper, Sec. 6 "How to propose Δ"), the SHA-256 of the weights file, the
architecture of every module (registry type + constructor arguments), a code fingerprint of the
source that defines each architecture, and the command that regenerates it.

Loading re-hashes the weights, rebuilds every module from the card and loads the tensors
strictly (every key present, no extra key, same shapes); any mismatch raises
:class:`privcore.errors.CheckpointError` saying what is wrong and how to fix it.

A card is validated like any parameter before anything is built from it
(:func:`~privcore.nets.card_schema.check_card`): a bad card is a CheckpointError naming the card
file and the field, never a TypeError or a NaN further on.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from torch import nn

from privcore._atomic import atomic_write_bytes
from privcore.errors import CheckpointError
from privcore.nets.card_schema import check_card
from privcore.nets.cards import CARD_FORMAT, card_path, file_sha256, read_card, weights_path
from privcore.nets.registry import architecture_factory, code_fingerprint, register_architecture

__all__ = [
    "CARD_FORMAT",
    "Architecture",
    "Checkpoint",
    "CheckpointWarning",
    "build_module",
    "card_path",
    "check_card",
    "code_fingerprint",
    "file_sha256",
    "load_checkpoint",
    "read_card",
    "register_architecture",
    "save_checkpoint",
    "update_card",
    "weights_path",
]

class CheckpointWarning(UserWarning):
    """The code that defines an architecture changed since the checkpoint was written."""


@dataclass(frozen=True)
class Architecture:
    """A registered architecture type and the keyword arguments that build it (JSON-able)."""

    type: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain-dict form stored in the card."""
        return {"type": self.type, "kwargs": _jsonable(dict(self.kwargs))}


def build_module(arch: Architecture) -> nn.Module:
    """Instantiate a registered architecture (CheckpointError for an unknown type or bad kwargs)."""
    factory = architecture_factory(arch.type)
    try:
        return factory(**dict(arch.kwargs))
    except (TypeError, ValueError) as exc:
        raise CheckpointError(
            f"cannot build architecture {arch.type!r} from {dict(arch.kwargs)}: {exc}"
        ) from exc


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item") and getattr(obj, "ndim", None) == 0:
        return obj.item()
    if isinstance(obj, float) and obj != obj:  # NaN is not JSON
        return None
    return obj


def _atomic_write(path: Path, data: bytes) -> None:
    atomic_write_bytes(path, data)  # temporary file, fsync, rename, fsync of the directory


def _card_bytes(card: Mapping[str, Any]) -> bytes:
    return (json.dumps(_jsonable(card), indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()


@dataclass(frozen=True, eq=False)
class Checkpoint:
    """A loaded checkpoint: its modules (eval mode, no gradients) and its card."""

    path: Path
    card: Mapping[str, Any]
    modules: Mapping[str, nn.Module]

    def __getitem__(self, name: str) -> nn.Module:
        return self.modules[name]


def save_checkpoint(
    stem: str | os.PathLike[str],
    *,
    modules: Mapping[str, tuple[Architecture, nn.Module]],
    card: Mapping[str, Any],
) -> dict[str, Any]:
    """Write ``<stem>.safetensors`` and ``<stem>.json``; returns the card as written.

    ``card`` carries the caller's fields (kind, dataset, recipe, hyperparameters, metrics,
    command, …); this function adds the architecture, parameter counts, code fingerprints,
    the weights' SHA-256 and the creation time. The weights are written first, the card last,
    each atomically, so a crash never leaves a card describing other weights.
    """
    from safetensors.torch import save as st_save

    if not modules:
        raise ValueError("a checkpoint needs at least one module")
    tensors: dict[str, torch.Tensor] = {}
    arch_json: dict[str, Any] = {}
    for name, (arch, mod) in modules.items():
        if "." in name:
            raise ValueError(f"module names may not contain '.', got {name!r}")
        build_module(arch)  # fail now, not at load time, if the card could not rebuild it
        for k, v in mod.state_dict().items():
            tensors[f"{name}.{k}"] = v.detach().to("cpu").contiguous().clone()
        arch_json[name] = {**arch.to_json(), "n_params": int(sum(p.numel() for p in mod.parameters()))}
    blob = st_save(tensors, metadata={"format": CARD_FORMAT})
    wpath, cpath = weights_path(stem), card_path(stem)
    _atomic_write(wpath, blob)
    full = {
        "format": CARD_FORMAT,
        **dict(card),
        "architecture": arch_json,
        "code_fingerprint": {a["type"]: code_fingerprint(a["type"]) for a in arch_json.values()},
        "weights": {"file": wpath.name, "sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob)},
        "created_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "versions": {"privcore": _privcore_version(), "torch": torch.__version__.split("+")[0]},
    }
    _atomic_write(cpath, _card_bytes(full))
    return json.loads(_card_bytes(full))


def _privcore_version() -> str:
    from privcore import __version__

    return __version__


def update_card(stem: str | os.PathLike[str], updates: Mapping[str, Any]) -> dict[str, Any]:
    """Merge top-level ``updates`` into an existing card (weights untouched; their hash is
    re-checked first so a card is never attached to weights it does not describe; the merged card is
    validated before it is written)."""
    card = read_card(stem)
    _check_weights(stem, card)
    card.update(_jsonable(dict(updates)))
    card["updated_utc"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    check_card(card, where=str(card_path(stem)))  # an invalid update is refused, never written
    _atomic_write(card_path(stem), _card_bytes(card))
    return card


def _check_weights(stem: str | os.PathLike[str], card: Mapping[str, Any]) -> Path:
    wpath = card_path(stem).with_name(card["weights"]["file"])
    if not wpath.is_file():
        raise CheckpointError(f"weights file {wpath} named by card {card_path(stem)} does not exist")
    digest = file_sha256(wpath)
    if digest != card["weights"]["sha256"]:
        raise CheckpointError(
            f"weights file {wpath} is corrupt or does not belong to its card: sha256 {digest[:16]}… "
            f"!= card's {card['weights']['sha256'][:16]}…; regenerate the checkpoint (see the card's "
            f"'command')"
        )
    return wpath


def load_checkpoint(
    stem: str | os.PathLike[str],
    *,
    kind: str | None = None,
    dataset: str | None = None,
    device: str | torch.device | None = None,
    strict_code: bool = False,
) -> Checkpoint:
    """Load and verify a checkpoint; every module comes back in eval mode without gradients.

    Raises CheckpointError when the card is missing or malformed, the weights' SHA-256 differs
    from the card's, a tensor is missing, extra or of the wrong shape, or ``kind``/``dataset``
    differ from the card's. A changed code fingerprint warns (:class:`CheckpointWarning`), or
    raises when ``strict_code``.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    card = read_card(stem)
    if kind is not None and card["kind"] != kind:
        raise CheckpointError(f"{card_path(stem)} is a {card['kind']!r} checkpoint, expected {kind!r}")
    if dataset is not None and card["dataset"].get("name") != dataset:
        raise CheckpointError(
            f"{card_path(stem)} was trained on {card['dataset'].get('name')!r}, expected {dataset!r}"
        )
    wpath = _check_weights(stem, card)
    try:
        tensors = load_file(str(wpath), device="cpu")
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"cannot read weights {wpath}: {exc}") from exc
    modules: dict[str, nn.Module] = {}
    used: set[str] = set()
    for name, spec in card["architecture"].items():
        arch = Architecture(spec["type"], spec.get("kwargs", {}))
        now = code_fingerprint(arch.type)
        if card["code_fingerprint"].get(arch.type) != now:
            msg = (
                f"{card_path(stem)}: the code defining architecture {arch.type!r} changed since this "
                f"checkpoint was written; its metrics and Δp statistics may be stale (regenerate with "
                f"the card's 'command')"
            )
            if strict_code:
                raise CheckpointError(msg)
            warnings.warn(msg, CheckpointWarning, stacklevel=2)
        # shapes first, from a module without storage: a card whose sizes disagree with the weights is
        # refused before anything of the card's size is allocated
        with torch.device("meta"):
            skeleton = build_module(arch)
        sd: dict[str, torch.Tensor] = {}
        for k, v in skeleton.state_dict().items():
            key = f"{name}.{k}"
            if key not in tensors:
                raise CheckpointError(f"{wpath} lacks tensor {key!r} that architecture {arch.type!r} needs")
            if tuple(tensors[key].shape) != tuple(v.shape):
                raise CheckpointError(
                    f"{wpath}: tensor {key!r} has shape {tuple(tensors[key].shape)}, architecture "
                    f"{arch.type!r} expects {tuple(v.shape)}"
                )
            sd[k] = tensors[key]
            used.add(key)
        del skeleton
        mod = build_module(arch)
        mod.load_state_dict(sd, strict=True)
        mod.eval()
        for p in mod.parameters():
            p.requires_grad_(False)
        modules[name] = mod.to(device) if device is not None else mod
    extra = sorted(set(tensors) - used)
    if extra:
        raise CheckpointError(f"{wpath} holds tensors its card does not describe: {', '.join(extra[:5])}")
    return Checkpoint(path=weights_path(stem), card=card, modules=modules)
