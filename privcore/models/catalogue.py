"""The shipped models as their cards describe them, without loading a weight or importing torch:
:func:`list_models` and :func:`default_models_dir` (:mod:`privcore.models.pipeline` loads them), and the
embedded default that the API, the CLI and the dashboard share: :data:`DEFAULT_DATASET` and
:func:`default_model`."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privcore.defaults import DEFAULT_DATASET, default_model
from privcore.errors import CheckpointError
from privcore.nets.cards import CARD_FORMAT, read_card, weights_path

__all__ = ["DEFAULT_DATASET", "ModelInfo", "default_model", "default_models_dir", "list_models"]



def default_models_dir() -> Path:
    """``$PRIVCORE_MODELS_DIR`` if set, else the checkout's ``models/``, else the installed
    package's models (:func:`privcore._paths.models_dir`)."""
    from privcore._paths import models_dir

    return models_dir()


@dataclass(frozen=True)
class ModelInfo:
    """One checkpoint as its card describes it (no weights loaded).

    Obfuscators come in two roles: release models (the Table-1 variants, their paper-recipe twins
    ``<variant>-paper`` and any other obfuscator trained by name), shipped with Δp, a release
    classifier and an attacker and offered for releases; and study models (:attr:`study_only`), never
    offered and shipped without an attacker: the α-sweep members ``ARL-alpha<α>`` (:attr:`fig2_only`),
    which Fig. 2 reads, and the Table-1 variants at the authors' weights that ``experiment
    table1-weights`` reads (``ARL-alpha0.9`` among them, with a Δp and a release classifier)."""

    dataset: str
    kind: str
    name: str
    path: Path
    metrics: Mapping[str, Any]
    card: Mapping[str, Any]

    @property
    def study_only(self) -> bool:
        """True for an obfuscator kept for a comparison, never offered for releases: an α-sweep member
        (:attr:`fig2_only`) or a Table-1 variant at other loss weights than App. E's, named
        ``<variant>-alpha<α>`` or ``<variant>-paper-sigma<σ>`` (``experiment table1-weights``)."""
        return self.fig2_only or (self.kind == "obfuscator"
                                  and re.search(r"-(alpha|sigma)[0-9.e+-]+$", self.name) is not None)

    @property
    def fig2_only(self) -> bool:
        """True for an α-sweep obfuscator (its recipe's ``sweep``): Fig. 2 only, never released."""
        return self.kind == "obfuscator" and bool((self.card.get("recipe") or {}).get("sweep"))


def list_models(models_dir: str | os.PathLike[str] | None = None) -> list[ModelInfo]:
    """Every privcore checkpoint card under ``models_dir`` (``<dataset>/<name>.json``), sorted by
    dataset, kind and name. Other JSON files are ignored; a card that fails validation
    (:func:`~privcore.nets.checkpoint.read_card`) is skipped with a warning naming it and the field;
    weights are not read."""
    import warnings

    mdir = Path(models_dir) if models_dir is not None else default_models_dir()
    out: list[ModelInfo] = []
    for p in sorted(mdir.glob("*/*.json")):
        try:
            card = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(card, dict) or card.get("format") != CARD_FORMAT:
            continue
        try:
            card = read_card(p.with_suffix(""))
        except CheckpointError as exc:
            warnings.warn(f"model card skipped: {exc}", RuntimeWarning, stacklevel=2)
            continue
        metrics = {k: v for k, v in (card.get("metrics") or {}).items() if k != "history"}
        out.append(
            ModelInfo(
                dataset=str(card["dataset"]["name"]),
                kind=str(card["kind"]),
                name=str(card["name"]),
                path=weights_path(p),
                metrics=metrics,
                card=card,
            )
        )
    return sorted(out, key=lambda m: (m.dataset, m.kind, m.name))
