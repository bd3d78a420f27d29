"""The scale-told reconstruction attacker of a posthoc model
(:class:`~privcore.nets.attacker.ScaleToldAttacker`, trained by ``python -m privcore train told-attacker``),
loaded and checked against the model it attacks.

``<models_dir>/<dataset>/attacker-told-<model>.{safetensors,json}``: the card's kind, dataset, the
obfuscator's and the embedder's SHA-256 must match the loaded pipeline's, and the weights their card's
(:func:`~privcore.nets.checkpoint.load_checkpoint`: safetensors, no pickle). An attacker only measures a
release (it decides nothing about privacy), but a mismatched one would measure another model.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from privcore.errors import CheckpointError
from privcore.models.catalogue import default_models_dir
from privcore.nets.checkpoint import card_path, load_checkpoint

__all__ = ["ToldAttacker", "load_told_attacker", "told_attacker_stem"]


@dataclass(frozen=True, eq=False)
class ToldAttacker:
    """A loaded scale-told attacker (``module``, eval mode) and its ``card``."""

    module: nn.Module
    card: Mapping[str, Any]


def told_attacker_stem(dataset: str, model: str, models_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where the attacker of ``dataset``/``model`` lives (without suffix)."""
    mdir = Path(models_dir) if models_dir is not None else default_models_dir()
    return mdir / dataset / f"attacker-told-{model}"


def load_told_attacker(pipe: Any, models_dir: str | os.PathLike[str] | None = None) -> ToldAttacker | None:
    """The attacker of pipeline ``pipe`` (None when none is shipped); CheckpointError when its card or
    weights do not match the pipeline (another obfuscator, embedder or dataset, a forged digest)."""
    stem = told_attacker_stem(str(pipe.dataset), str(pipe.obfuscator_name), models_dir)
    if not card_path(stem).is_file():
        return None
    ckpt = load_checkpoint(stem, kind="told-attacker", dataset=str(pipe.dataset), device="cpu")
    card = ckpt.card
    obf = pipe.cards["obfuscator"]
    if card["obfuscator"]["sha256"] != obf["weights"]["sha256"]:
        raise CheckpointError(f"{card_path(stem)} attacks another obfuscator than {pipe.dataset}/"
                              f"{pipe.obfuscator_name}'s; retrain it with `python -m privcore train "
                              f"told-attacker --dataset {pipe.dataset} --model {pipe.obfuscator_name}`")
    if (card.get("embedder") or {}).get("sha256") != obf["embedder"]["sha256"]:
        raise CheckpointError(f"{card_path(stem)} was trained on another embedder than {pipe.dataset}/"
                              f"{pipe.obfuscator_name}'s; retrain it")
    module = ckpt["attacker"]
    if type(module).__name__ != "ScaleToldAttacker":
        raise CheckpointError(f"{card_path(stem)}: architecture must be scale_told_attacker")
    return ToldAttacker(module=module, card=card)
