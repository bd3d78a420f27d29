"""Saving and loading lab mechanisms: safetensors weights + a JSON card.

The card records what the mechanism is (kind, query, ε, k, domain), how it was trained
(the :class:`~privcore.lab.train.LabConfig`, the data distribution, the command that
regenerates it), its metrics and its Lipschitz verification, and the SHA-256 of the
weights file. Loading checks the hash and rebuilds the mechanism, which re-certifies the
layer-norm product ≤ k; any mismatch is a :class:`~privcore.errors.CheckpointError`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from privcore._atomic import atomic_path, atomic_write_text
from privcore.errors import CertificationError, CheckpointError
from privcore.lab.data import DataDomain
from privcore.lab.mechanisms import LearnedExponentialMechanism, LearnedLaplaceMechanism

__all__ = ["card_file", "list_cards", "load_mechanism", "save_mechanism"]

LabMechanism = LearnedLaplaceMechanism | LearnedExponentialMechanism
CARD_VERSION = 1


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def save_mechanism(mechanism: LabMechanism, stem: str | Path, *, card: dict[str, object]) -> Path:
    """Write ``stem.safetensors`` and ``stem.json``; return the card's path."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(mechanism, LearnedLaplaceMechanism):
        kind = "laplace"
        tensors = {f"w{i}": w for i, w in enumerate(mechanism.weights)}
        tensors |= {f"b{i}": b for i, b in enumerate(mechanism.biases)}
    elif isinstance(mechanism, LearnedExponentialMechanism):
        kind = "exponential"
        tensors = dict(mechanism.arrays)
    else:
        raise TypeError(f"mechanism must be a learned lab mechanism, got {type(mechanism).__name__}")
    weights = stem.with_name(stem.name + ".safetensors")  # not with_suffix: stems contain "k0.01"
    with atomic_path(weights) as tmp:
        save_file({key: np.ascontiguousarray(v) for key, v in tensors.items()}, str(tmp))
    full = {
        "card_version": CARD_VERSION,
        "kind": kind,
        "query": mechanism.query,
        "epsilon": mechanism.epsilon,
        "k": mechanism.k,
        "domain": {"low": mechanism.domain.low, "high": mechanism.domain.high, "n": mechanism.domain.n},
        "sort_input": mechanism.sort_input,
        "certified_layer_product": mechanism.certified_bound,
        "weights_file": weights.name,
        "sha256": _sha256(weights),
        **card,
    }
    path = stem.with_name(stem.name + ".json")
    atomic_write_text(path, json.dumps(full, indent=2, sort_keys=True, default=str) + "\n")
    return path


def card_file(path: str | Path) -> Path:
    """The card of a model given as its card, its stem or its weights file."""
    p = Path(path)
    if p.name.endswith(".json"):
        return p
    if p.name.endswith(".safetensors"):
        return p.with_name(p.name[: -len(".safetensors")] + ".json")
    return p.with_name(p.name + ".json")


def load_mechanism(card_path: str | Path) -> tuple[LabMechanism, dict[str, object]]:
    """Load a mechanism and its card; the hash and the Lipschitz certificate are re-checked."""
    path = card_file(card_path)
    try:
        card = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"cannot read the model card {path}: {exc}") from exc
    weights = path.with_name(str(card.get("weights_file", "")))
    if not weights.is_file():
        raise CheckpointError(f"weights file {weights} named by {path} is missing")
    if _sha256(weights) != card.get("sha256"):
        raise CheckpointError(f"{weights} does not match the SHA-256 recorded in {path}")
    arrays = load_file(str(weights))
    dom = DataDomain(**card["domain"])
    common = {"query": card["query"], "epsilon": float(card["epsilon"]), "k": float(card["k"]), "domain": dom,
              "sort_input": bool(card["sort_input"])}
    try:
        if card["kind"] == "laplace":
            n = len([key for key in arrays if key.startswith("w")])
            mech: LabMechanism = LearnedLaplaceMechanism(
                weights=tuple(arrays[f"w{i}"] for i in range(n)),
                biases=tuple(arrays[f"b{i}"] for i in range(n)), **common)
        elif card["kind"] == "exponential":
            mech = LearnedExponentialMechanism(arrays=arrays, **common)
        else:
            raise CheckpointError(f"unknown mechanism kind {card['kind']!r} in {path}")
    except (CertificationError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{path}: the stored network is not a valid k-Lipschitz mechanism: {exc}") \
            from exc
    return mech, card


def list_cards(directory: str | Path) -> list[tuple[Path, dict[str, object]]]:
    """Every lab model card in ``directory`` (sorted by kind, query, k), without loading weights."""
    out = []
    for p in sorted(Path(directory).glob("*.json")):
        try:
            card = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if card.get("card_version") == CARD_VERSION and card.get("kind") in ("laplace", "exponential"):
            out.append((p, card))
    return sorted(out, key=lambda pc: (str(pc[1]["kind"]), str(pc[1]["query"]), float(pc[1]["k"])))  # type: ignore[arg-type]
