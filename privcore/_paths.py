"""Where privcore finds its shipped files and writes its caches, from a checkout or an install.

From a source checkout (``pyproject.toml`` and ``models/`` beside the ``privcore`` package) the
repository's folders are used, as before; from an installed wheel the models are package data
(``privcore/_models``, located with :mod:`importlib.resources`), caches go to the user's cache
folder and results to ``./data/results``. Environment variables override every default.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

__all__ = ["cache_dir", "checkout_root", "models_dir", "results_dir"]


def checkout_root() -> Path | None:
    """The repository root when privcore runs from a source checkout (or an editable install)."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() and (root / "models").is_dir() else None


def models_dir() -> Path:
    """``$PRIVCORE_MODELS_DIR``, else the checkout's ``models/``, else the installed package data."""
    env = os.environ.get("PRIVCORE_MODELS_DIR")
    if env:
        return Path(env).expanduser()
    root = checkout_root()
    if root is not None:
        return root / "models"
    return Path(str(resources.files("privcore").joinpath("_models")))


def cache_subdir(name: str, env: str) -> Path:
    """``$<env>``, else ``<checkout>/.cache/<name>`` (git-ignored), else ``$XDG_CACHE_HOME/privlens/<name>``
    (``~/.cache`` when unset): where each of privcore's caches lives."""
    value = os.environ.get(env)
    if value:
        return Path(value).expanduser()
    root = checkout_root()
    if root is not None:
        return root / ".cache" / name
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "privlens" / name


def cache_dir() -> Path:
    """The Lipschitz cache: ``$PRIVLENS_CACHE_DIR``, else ``.cache/lipschitz`` (:func:`cache_subdir`)."""
    return cache_subdir("lipschitz", "PRIVLENS_CACHE_DIR")


def results_dir() -> Path:
    """Where experiments write by default: ``<checkout>/data/results``, else ``./data/results``."""
    root = checkout_root()
    return (root if root is not None else Path.cwd()) / "data" / "results"


def quick_results_dir() -> Path:
    """Where ``--quick``/``--tiny`` experiments write unless told otherwise, so they never overwrite
    the committed full results: ``$PRIVCORE_QUICK_RESULTS_DIR``, else ``.cache/results-quick``
    (:func:`cache_subdir`)."""
    return cache_subdir("results-quick", "PRIVCORE_QUICK_RESULTS_DIR")
