"""The models behind the pages, loaded once per server process (widgets only where a load fails).

* :func:`catalogue`: obfuscators per dataset from the shipped model cards;
* :func:`pipeline`: the pipeline of the sidebar's settings (``st.cache_resource``, eval mode,
  inference only), or the embedded default (real MNIST) with the reason when a dataset or checkpoint
  is missing;
* :func:`image_shape`: a dataset's image size from its embedder's card (no weights loaded);
* :func:`public_text`: a server message for the browser, without server paths.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from privcore.defaults import DEFAULT_DATASET, default_model
from privcore.errors import CheckpointError, DatasetUnavailableError, PrivcoreError
from privlens.settings import Settings, md_literal

LOG = logging.getLogger("privlens")


def catalogue() -> dict[str, tuple[str, ...]]:
    """Obfuscator names per dataset from the shipped model cards (``models/<dataset>/``), the α-sweep
    members of Fig. 2 left out; the embedded default always, and each dataset's default model first."""
    return _catalogue(models_dir())


@st.cache_data(show_spinner=False, ttl=60)
def _catalogue(directory: str) -> dict[str, tuple[str, ...]]:
    models: dict[str, list[str]] = {}
    try:
        from privcore.models import list_models

        infos = list_models(directory)
    except (ImportError, PrivcoreError, OSError, ValueError, TypeError, KeyError, AttributeError):
        LOG.exception("the model catalogue of %s could not be read", directory)  # a malformed card
        infos = []
    embedders = {m.dataset for m in infos if m.kind == "embedder"}
    for m in infos:
        if (
            m.kind == "obfuscator"
            and not m.study_only  # α-sweep members and other study models: never released
            and m.dataset in embedders
            and m.name not in models.setdefault(m.dataset, [])
        ):
            models[m.dataset].append(m.name)
    models.setdefault(DEFAULT_DATASET, [default_model(DEFAULT_DATASET)])
    ordered = {DEFAULT_DATASET: models.pop(DEFAULT_DATASET), **dict(sorted(models.items()))}
    return {
        ds: tuple(sorted(names, key=lambda n, d=default_model(ds): (n != d, n != "ARL-C-N", "alpha" in n, n)))
        for ds, names in ordered.items()
    }


#: seconds the first certification of G for a model may take (every shipped obfuscator: 0.2–5 s)
GLOBAL_TIME_LIMIT_S = 60.0


@dataclass(frozen=True)
class Loaded:
    """A loaded pipeline and the dataset it really belongs to (the fallback may differ)."""

    pipeline: Any
    dataset: str
    model: str
    fallback_reason: str | None


def models_dir() -> str:
    """Where checkpoints are read from (``$PRIVCORE_MODELS_DIR`` or ``models/``): part of every cache key."""
    from privcore.models import default_models_dir

    return str(default_models_dir())


@st.cache_resource(show_spinner="Loading models (once per server process)…", max_entries=8)
def _load(dataset: str, model: str, directory: str) -> Any:
    from privcore.mechanisms import registry

    # every posthoc mechanism releases with the same pipeline: loaded as the registry loads it (and the
    # same object the library's API holds for this process)
    posthoc = next(m for m in registry.MECHANISMS if m.family == "posthoc")
    pipe = posthoc.load(dataset=dataset, model=model, models_dir=directory)
    for name in ("embedder", "decoder", "obfuscator", "classifier", "attacker"):
        module = getattr(pipe, name, None)
        if module is not None and hasattr(module, "eval"):
            module.eval()
            module.requires_grad_(False)
    return pipe


def load(dataset: str, model: str, directory: str) -> Any:
    """The pipeline of (dataset, model) from ``directory``, loaded once per process (errors raised)."""
    return _load(dataset, model, directory)


def image_shape(dataset: str) -> tuple[int, int, int] | None:
    """(C, H, W) of ``dataset``'s images, from its shipped embedder's card (``models/<dataset>/``); None
    where no readable card ships. No weights are loaded."""
    return _image_shape(dataset, models_dir())


@st.cache_data(show_spinner=False, ttl=60)
def _image_shape(dataset: str, directory: str) -> tuple[int, int, int] | None:
    try:
        from privcore.nets import read_card

        card = read_card(Path(directory) / dataset / "embedder")
        c, h, w = (int(v) for v in card["dataset"]["image_shape"])
    except (ImportError, PrivcoreError, OSError, ValueError, TypeError, KeyError):
        return None
    return c, h, w


def dataset_size(pipe: Any) -> int | None:
    """Number of images (train + test) of the pipeline's dataset, from its obfuscator's card; None if
    the card does not say."""
    try:
        data = pipe.cards["obfuscator"]["dataset"]
        return int(data["n_train"]) + int(data["n_test"])
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def pipeline(s: Settings) -> Loaded | None:
    """The pipeline for the settings, or the embedded default with an explanation; None if even that fails."""
    try:
        return Loaded(_load(s.dataset, s.model, models_dir()), s.dataset, s.model, None)
    except (DatasetUnavailableError, CheckpointError, FileNotFoundError, ValueError) as exc:
        reason = str(exc)
    except ImportError as exc:  # pipeline module not installed in this tree
        st.error(f"**The models cannot be loaded; nothing was released.** {public_text(exc)}")
        return None
    what = f"{md_literal(s.dataset)} / {md_literal(s.model)}"
    shown = public_text(reason)
    if s.dataset == DEFAULT_DATASET:  # the reason names the command that recreates them
        st.error(f"**The embedded default models ({what}) cannot be loaded; nothing was released.** {shown}")
        return None
    st.warning(f"**{what} is not available on this machine.** {shown}")
    models = catalogue()[DEFAULT_DATASET]
    try:
        loaded = Loaded(_load(DEFAULT_DATASET, models[0], models_dir()), DEFAULT_DATASET, models[0], reason)
    except (PrivcoreError, OSError, ValueError) as exc:
        failed = "**The embedded default could not be loaded either; nothing was released.**"
        st.error(f"{failed} {public_text(exc)}")
        return None
    st.info(f"Showing the embedded default instead: {DEFAULT_DATASET} / {models[0]}.")
    return loaded


def public_text(message: Any, *, limit: int = 1000) -> str:
    """A server message for the browser: the models directory and the repository's path replaced by
    ``<models>`` and ``<repository>`` (no server paths), as a code span (messages quote card values and
    file names: shown, never rendered)."""
    text = str(message)
    models, repo = models_dir(), str(Path(__file__).resolve().parents[1])
    replacements = ((str(Path(models).resolve()), "<models>"), (models, "<models>"), (repo, "<repository>"))
    for path, name in replacements:
        text = text.replace(path, name)
    return md_literal(text, limit=limit)


def embedder_note(pipe: Any) -> str | None:
    """What the pipeline's embedder changes about R, from its card: a sentence when g was trained with
    labels (``recipe.label_weight`` > 0, e.g. MNIST's default model), else None."""
    try:
        weight = float(pipe.cards["embedder"]["recipe"].get("label_weight") or 0.0)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    if weight <= 0:
        return None
    return (
        "This model's embedder g was trained with the class labels (γ = "
        f"{weight:g}; docs/RESULTS.md, \"MNIST\"), so R is measured in a metric that pulls images of one "
        "class together: an R-ball holds mostly images of the same class, and the release hides how the "
        "image is drawn more than which class it shows — which the released prediction states anyway."
    )
