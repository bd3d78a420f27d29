"""Checkpoint cards without torch: where a checkpoint's files are, and its validated JSON card.

Listing the shipped models (:mod:`privcore.models.catalogue`) reads cards only, so a process that never loads
weights (the dashboard's first page, ``--help``) never imports torch; loading is
:mod:`privcore.nets.checkpoint`'s.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from privcore.errors import CheckpointError
from privcore.nets.card_schema import check_card

__all__ = ["CARD_FORMAT", "card_path", "file_sha256", "read_card", "weights_path"]

CARD_FORMAT = "privcore-checkpoint/1"


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
