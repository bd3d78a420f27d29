"""Candidate pipelines of ``experiment select``, trained on the training set minus the validation
split and kept in a git-ignored cache (never in ``models/``).

Each step reuses a checkpoint already in the cache when its card describes the same recipe, data
(fingerprint), seed and parents (embedder / obfuscator SHA-256); otherwise it trains, resuming an
interrupted run from its ``*.resume.safetensors`` state. So an interrupted selection continues where it
stopped, and nothing is trained twice.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

from privcore.errors import CheckpointError
from privcore.nets.checkpoint import card_path, read_card, weights_path

__all__ = [
    "ensure_classifier",
    "ensure_delta_p",
    "ensure_embedder",
    "ensure_obfuscator",
    "select_cache_root",
]


def select_cache_root() -> Path:
    """``$PRIVCORE_SELECT_DIR``, else ``.cache/select`` (:func:`privcore._paths.cache_subdir`)."""
    from privcore._paths import cache_subdir

    return cache_subdir("select", "PRIVCORE_SELECT_DIR")


def _card(stem: Path) -> dict[str, Any] | None:
    if not card_path(stem).is_file():
        return None
    try:
        return read_card(stem)
    except CheckpointError:
        return None


def _same(card: dict[str, Any] | None, **expected: Any) -> bool:
    """True when ``card`` exists and each dotted field equals its expected value."""
    if card is None:
        return False
    for dotted, want in expected.items():
        v: Any = card
        for part in dotted.split("__"):
            v = v.get(part) if isinstance(v, dict) else None
        if v != want:
            return False
    return True


def _recipe_json(card: dict[str, Any] | None, recipe: Any) -> dict[str, Any] | None:
    """The card's recipe with every field the card predates at its default, as ``recipe.to_json()``
    would write it: a recipe option added later (with a default that keeps the old behaviour) does
    not make a cached model look different."""
    if card is None or not isinstance(card.get("recipe"), dict):
        return None
    defaults = type(recipe)(**{f.name: getattr(recipe, f.name) for f in dataclasses.fields(recipe)
                               if f.default is dataclasses.MISSING
                               and f.default_factory is dataclasses.MISSING}).to_json()
    return {**defaults, **card["recipe"]}


def _same_recipe(card: dict[str, Any] | None, recipe: Any) -> bool:
    return _recipe_json(card, recipe) == recipe.to_json()


def ensure_embedder(ds: Any, recipe: Any, stem: Path, *, seed: int, device: Any, progress: bool,
                    command: str) -> dict[str, Any]:
    """The β-VAE embedder of ``ds`` (the split's fit part) at ``stem``: reused or trained."""
    from privcore.train.embedder import train_embedder

    card = _card(stem)
    if _same_recipe(card, recipe) and _same(card, seed=seed, dataset__fingerprint=ds.fingerprint):
        return card  # type: ignore[return-value]
    stem.parent.mkdir(parents=True, exist_ok=True)
    return train_embedder(ds, recipe, out=stem, device=device, seed=seed, progress=progress, command=command)


def ensure_obfuscator(ds: Any, recipe: Any, *, embedder: Path, stem: Path, seed: int, device: Any,
                      progress: bool, command: str) -> dict[str, Any]:
    """The obfuscator of ``recipe`` at ``stem`` with a copy of ``embedder`` beside it (Δp and the
    release classifier find the embedder there): reused or trained."""
    from privcore.train.obfuscator import train_obfuscator

    stem.parent.mkdir(parents=True, exist_ok=True)
    emb_card = read_card(embedder)
    here = stem.with_name(embedder.name)
    if not _same(_card(here), weights__sha256=emb_card["weights"]["sha256"]):
        for src in (weights_path(embedder), card_path(embedder)):  # the card last
            shutil.copy2(src, here.parent / src.name)
    card = _card(stem)
    if _same_recipe(card, recipe) and _same(card, seed=seed, dataset__fingerprint=ds.fingerprint,
             embedder__sha256=emb_card["weights"]["sha256"]):
        return card  # type: ignore[return-value]
    return train_obfuscator(ds, recipe, embedder=here, out=stem, device=device, seed=seed,
                            progress=progress, command=command)


def ensure_delta_p(stem: Path, *, n: int, seed: int, workers: int, executor: Any, progress: bool,
                   command: str, time_limit: float | None = None) -> dict[str, Any]:
    """Δp = μ + 3σ of exact L(f, N(z_i, R)) over ``n`` of the obfuscator's own training embeddings
    (the fit part of the split), as for the shipped cards: reused when the card has it. ``time_limit``
    (seconds per point): where the exact search runs out, its certified upper bound (the card counts
    them, ``n_inexact``)."""
    from privcore.train.delta_p import compute_delta_p

    card = read_card(stem)
    dp = card.get("delta_p") or {}
    if dp.get("n") == n and dp.get("certifier") == "exact" and dp.get("n_sigma") == 3.0:
        return card
    return compute_delta_p(stem, n=n, n_sigma=3.0, certifier="exact", workers=workers, seed=seed,
                           progress=progress, command=command, executor=executor, time_limit=time_limit)


def ensure_classifier(obfuscator: Path, recipe: Any, stem: Path, *, seed: int, device: Any, progress: bool,
                      command: str) -> dict[str, Any]:
    """The noise-aware release classifier of ``recipe`` on the frozen ``obfuscator`` (its Δp):
    reused when the card names the same obfuscator weights, Δp, recipe and seed, else trained."""
    from privcore.train.release_classifier import train_release_classifier

    obf = read_card(obfuscator)
    card = _card(stem)
    if _same_recipe(card, recipe) and _same(card, seed=seed, obfuscator__sha256=obf["weights"]["sha256"],
             release_noise__delta_p=obf["delta_p"]["proposed"]):
        return card  # type: ignore[return-value]
    return train_release_classifier(obfuscator, out=stem, recipe=recipe, device=device, seed=seed,
                                    progress=progress, command=command)
