"""Checkpoints: safetensors weights + a JSON card, verified on every load.

A checkpoint ``<stem>.safetensors`` holds one or more named modules (keys ``<module>.<param>``);
``<stem>.json`` is its card: dataset (name, fingerprint), recipe, hyperparameters, metrics, Δp
statistics (posthoc-PTR paper, Sec. 6 "How to propose Δ"), the SHA-256 of the weights file, the
architecture of every module (registry type + constructor arguments), a code fingerprint of the
source that defines each architecture, and the command that regenerates it.

Loading re-hashes the weights, rebuilds every module from the card and loads the tensors
strictly (every key present, no extra key, same shapes); any mismatch raises
:class:`privcore.errors.CheckpointError` saying what is wrong and how to fix it.

A card is validated like any parameter before anything is built from it (:func:`check_card`, with
:mod:`privcore.validation`): every number it carries is finite; Δp's statistics (posthoc-PTR Sec. 6),
the radius R, the Lipschitz constants, noise parameters and the recipe's β are in their ranges; the
sizes (image shape, architecture widths, parameter counts) are integers within bounds; file names
are plain names in the card's folder. A bad card is a CheckpointError naming the card file and the
field, never a TypeError or a NaN further on.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from torch import nn

from privcore._atomic import atomic_write_bytes
from privcore.errors import CheckpointError
from privcore.nets.registry import architecture_factory, code_fingerprint, register_architecture
from privcore.validation import (
    check_bool,
    check_in_range,
    check_int,
    check_nonnegative,
    check_positive,
)

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

CARD_FORMAT = "privcore-checkpoint/1"
#: Largest integer a card may give as a size (an architecture width, a channel count, an image side, a
#: parameter count is checked against the weights instead): 2**24, so a tampered card cannot make
#: :func:`build_module` allocate gigabytes before the weights' shapes are compared.
MAX_CARD_SIZE = 1 << 24


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


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def weights_path(stem: str | os.PathLike[str]) -> Path:
    """``<stem>.safetensors`` (``stem`` may already carry either extension)."""
    p = _stem(stem)
    return p.with_name(p.name + ".safetensors")  # append: names may contain dots (ARL-alpha0.9)


def card_path(stem: str | os.PathLike[str]) -> Path:
    """``<stem>.json``."""
    p = _stem(stem)
    return p.with_name(p.name + ".json")


def _stem(p: str | os.PathLike[str]) -> Path:
    p = Path(p)
    for ext in (".json", ".safetensors"):
        if p.name.endswith(ext):
            return p.with_name(p.name[: -len(ext)])
    return p


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


def read_card(stem: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a card (:func:`check_card`); CheckpointError when it is missing, unreadable,
    foreign or invalid, naming the card file and the field."""
    cpath = card_path(stem)
    if not cpath.is_file():
        raise CheckpointError(f"checkpoint card {cpath} does not exist")
    try:
        card = json.loads(cpath.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CheckpointError(
            f"checkpoint card {cpath} is not valid JSON ({exc}); regenerate the checkpoint"
        ) from exc
    if not isinstance(card, dict) or card.get("format") != CARD_FORMAT:
        raise CheckpointError(
            f"{cpath} is not a {CARD_FORMAT} card (format={card.get('format')!r})"
            if isinstance(card, dict)
            else f"{cpath} is not a checkpoint card"
        )
    for key in ("kind", "dataset", "architecture", "weights", "code_fingerprint"):
        if key not in card:
            raise CheckpointError(
                f"checkpoint card {cpath} lacks the field {key!r}; regenerate the checkpoint"
            )
    check_card(card, where=str(cpath))
    return card


# --------------------------------------------------------------------------------- card validation

_SHA256 = re.compile(r"[0-9a-f]{64}")


def _mapping(name: str, value: Any) -> None:
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be an object (a JSON mapping), got {type(value).__name__} {value!r}")


def _text(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{name} must be a non-empty string, got {type(value).__name__} {value!r}")


def _file_name(name: str, value: Any) -> None:
    _text(name, value)
    if value in (".", "..") or any(ch in value for ch in "/\\\0"):
        raise ValueError(f"{name} must be a plain file name in the card's folder, got {value!r}")


def _sha256(name: str, value: Any) -> None:
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise ValueError(f"{name} must be a SHA-256 (64 lowercase hex digits), got {value!r}")


def _count(name: str, value: Any) -> None:
    check_int(name, value, minimum=0)


def _size(name: str, value: Any) -> None:
    check_in_range(name, check_int(name, value, minimum=1), 1, MAX_CARD_SIZE, low_open=False, high_open=False)


def _positive(name: str, value: Any) -> None:
    check_positive(name, value)


def _nonnegative(name: str, value: Any) -> None:
    check_nonnegative(name, value)


def _fraction(name: str, value: Any) -> None:
    check_in_range(name, value, 0.0, 1.0, low_open=False, high_open=False)


def _probability(name: str, value: Any) -> None:
    check_in_range(name, value, 0.0, 1.0)


def _flag(name: str, value: Any) -> None:
    check_bool(name, value)


def _image_shape(name: str, value: Any) -> None:
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise ValueError(f"{name} must be [channels, height, width], got {value!r}")
    for axis, v in zip(("channels", "height", "width"), value, strict=True):
        _size(f"{name}.{axis}", v)


def _class_names(name: str, value: Any) -> None:
    if not isinstance(value, list | tuple) or not value:
        raise ValueError(f"{name} must be a non-empty list of names, got {value!r}")
    for i, v in enumerate(value):
        if not isinstance(v, str):
            raise TypeError(f"{name}[{i}] must be a string, got {type(v).__name__} {v!r}")


def _positive_list(name: str, value: Any) -> None:
    if not isinstance(value, list | tuple):
        raise TypeError(f"{name} must be a list of numbers, got {type(value).__name__} {value!r}")
    for i, v in enumerate(value):
        check_positive(f"{name}[{i}]", v)


def _architecture(name: str, value: Any) -> None:
    _mapping(name, value)
    if not value:
        raise ValueError(f"{name} must describe at least one module, got {{}}")
    for module, spec in value.items():
        where = f"{name}.{module}"
        _mapping(where, spec)
        if "type" not in spec:
            raise ValueError(f"{where}.type is missing")
        _text(f"{where}.type", spec["type"])
        if "n_params" in spec:
            _count(f"{where}.n_params", spec["n_params"])
        kwargs = spec.get("kwargs", {})
        _mapping(f"{where}.kwargs", kwargs)
        for path, v in _leaves(kwargs, f"{where}.kwargs"):
            if isinstance(v, bool):
                continue
            if isinstance(v, int):  # widths, channels, dimensions: sizes
                check_in_range(path, v, 0, MAX_CARD_SIZE, low_open=False, high_open=False)


def _fingerprints(name: str, value: Any) -> None:
    _mapping(name, value)
    for k, v in value.items():
        _sha256(f"{name}.{k}", v)


def _leaves(obj: Any, path: str) -> Any:
    """(dotted path, value) of every leaf of a JSON tree."""
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, obj


_Check = Callable[[str, Any], None]
#: (field, check, kinds that require it: "*" every card, or a tuple of kinds; () optional). A field of an
#: optional block is required once the block is there (``delta_p`` is absent before Δp is computed).
_CARD_FIELDS: tuple[tuple[str, _Check, Any], ...] = (
    ("kind", _text, "*"),
    ("name", _text, ()),
    ("dataset", _mapping, "*"),
    ("dataset.name", _text, "*"),
    ("dataset.image_shape", _image_shape, ("embedder", "ip-classifier")),
    ("dataset.class_names", _class_names, ("embedder", "ip-classifier")),
    ("dataset.n_train", _count, ()),
    ("dataset.n_test", _count, ()),
    ("dataset.fingerprint", _sha256, ()),
    ("architecture", _architecture, "*"),
    ("weights", _mapping, "*"),
    ("weights.file", _file_name, "*"),
    ("weights.sha256", _sha256, "*"),
    ("weights.bytes", _count, ()),
    ("code_fingerprint", _fingerprints, "*"),
    ("radius", _mapping, ("obfuscator",)),
    ("radius.value", _positive, "radius"),
    ("embedder", _mapping, ("obfuscator",)),
    ("embedder.file", _file_name, "embedder"),
    ("embedder.sha256", _sha256, "embedder"),
    ("obfuscator", _mapping, ("attacker", "release-classifier")),
    ("obfuscator.file", _file_name, ()),
    ("obfuscator.sha256", _sha256, "obfuscator"),
    ("delta_p", _mapping, ()),
    ("delta_p.mu", _nonnegative, "delta_p"),
    ("delta_p.sigma", _nonnegative, "delta_p"),
    ("delta_p.n_sigma", _nonnegative, "delta_p"),
    ("delta_p.proposed", _positive, "delta_p"),
    ("delta_p.n", _size, "delta_p"),
    ("delta_p.radius", _positive, "delta_p"),
    ("delta_p.all_exact", _flag, ()),
    ("delta_p.n_inexact", _count, ()),
    ("delta_p.min", _nonnegative, ()),
    ("delta_p.median", _nonnegative, ()),
    ("delta_p.q95", _nonnegative, ()),
    ("delta_p.max", _nonnegative, ()),
    ("delta_p.fraction_above_proposed", _fraction, ()),
    ("lipschitz", _mapping, ()),
    ("lipschitz.l1", _positive, "lipschitz"),
    ("lipschitz.l2", _positive, "lipschitz"),
    ("release_noise", _mapping, ()),
    ("release_noise.delta_p", _positive, ()),
    ("release_noise.radius", _positive, ()),
    ("release_noise.epsilons", _positive_list, ()),
    ("release_noise.clean_fraction", _fraction, ()),
    ("finetune", _mapping, ()),
    ("finetune.alpha", _positive, ()),
    ("finetune.epsilon", _positive, ()),
    ("finetune.delta", _probability, ()),
    ("finetune.sigma", _nonnegative, ()),
    ("recipe", _mapping, ()),
    ("recipe.beta", _nonnegative, ()),
    ("recipe.lr", _positive, ()),
    ("recipe.epochs", _count, ()),
    ("recipe.batch_size", _size, ()),
    ("recipe.latent_dim", _size, ()),
)


def check_card(card: Mapping[str, Any], *, where: str = "card") -> None:
    """Validate every field a card carries (CheckpointError naming ``where``, the card file, and the
    field): the fields the loaders use, in their ranges (:data:`_CARD_FIELDS`), and every number finite."""

    def bad(message: str) -> CheckpointError:
        return CheckpointError(
            f"checkpoint card {where} is invalid: {message}; regenerate the checkpoint (see its 'command')"
        )

    if not isinstance(card, Mapping):
        raise bad(f"it must be a JSON object, got {type(card).__name__}")
    kind = card.get("kind")
    for name, check, required in _CARD_FIELDS:
        block = card.get(required) if isinstance(required, str) and required != "*" else None
        needed = (
            required == "*"
            or (isinstance(required, tuple) and kind in required)
            or (isinstance(block, Mapping) and bool(block))
        )
        parts = name.split(".")
        node: Any = card
        present = True
        for depth, part in enumerate(parts):
            if depth and node is None:  # inside an optional block written as null
                present = False
                break
            if depth and not isinstance(node, Mapping):
                parent = ".".join(parts[:depth])
                raise bad(
                    f"field {parent!r} must be an object (a JSON mapping) with {part!r}, "
                    f"got {type(node).__name__} {node!r}"
                )
            if part not in node:
                present = False
                break
            node = node[part]
        if not present or (node is None and not needed):
            if needed:
                raise bad(f"field {name!r} is missing")
            continue
        try:
            check(name, node)
        except (TypeError, ValueError) as exc:
            raise bad(f"field {name!r}: {exc}") from exc
    for path, value in _leaves(card, ""):
        if isinstance(value, float) and not math.isfinite(value):
            raise bad(f"field {path!r} is {value!r}; every number in a card must be finite")


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
