"""The models behind the pages, loaded once per server process (widgets only where a load fails).

* :func:`catalogue`: obfuscators per dataset from the shipped model cards;
* :func:`pipeline`: the pipeline of the sidebar's settings (``st.cache_resource``, eval mode,
  inference only), or the embedded default (digits) with the reason when a dataset or checkpoint
  is missing;
* :func:`image_shape`: a dataset's image size from its embedder's card (no weights loaded);
* :func:`warm_up`: slow imports and the exact certifier's pattern tables, in a background thread;
* :func:`public_text`: a server message for the browser, without server paths.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from privcore.errors import CheckpointError, DatasetUnavailableError, PrivcoreError
from privlens.settings import Settings, md_literal

LOG = logging.getLogger("privlens")
DEFAULT_DATASET = "digits"


def catalogue() -> dict[str, tuple[str, ...]]:
    """Obfuscator names per dataset from the shipped model cards (``models/<dataset>/``), the α-sweep
    members of Fig. 2 left out; digits always."""
    return _catalogue(models_dir())


@st.cache_data(show_spinner=False, ttl=60)
def _catalogue(directory: str) -> dict[str, tuple[str, ...]]:
    models: dict[str, list[str]] = {}
    try:
        from privcore.catalogue import list_models

        infos = list_models(directory)
    except (ImportError, PrivcoreError, OSError, ValueError, TypeError, KeyError, AttributeError):
        LOG.exception("the model catalogue of %s could not be read", directory)  # a malformed card
        infos = []
    embedders = {m.dataset for m in infos if m.kind == "embedder"}
    for m in infos:
        if (
            m.kind == "obfuscator"
            and not m.fig2_only  # α-sweep members exist for Fig. 2 only: no Δp, never released
            and m.dataset in embedders
            and m.name not in models.setdefault(m.dataset, [])
        ):
            models[m.dataset].append(m.name)
    models.setdefault(DEFAULT_DATASET, ["ARL-C-N"])
    ordered = {DEFAULT_DATASET: models.pop(DEFAULT_DATASET), **dict(sorted(models.items()))}
    return {
        ds: tuple(sorted(names, key=lambda n: (n != "ARL-C-N", "alpha" in n, n)))
        for ds, names in ordered.items()
    }


_RUNS = threading.Condition()
_running = 0
#: the longest the warm-up waits at one point for the script runs to end (then it goes on regardless)
QUIET_WAIT_S = 5.0


@contextmanager
def script_run() -> Iterator[None]:
    """Around a run of the app's script: while one runs, the warm-up waits (:func:`wait_for_quiet`) at
    its next pause point instead of taking the interpreter from the page the user waits for."""
    global _running
    with _RUNS:
        _running += 1
    try:
        yield
    finally:
        with _RUNS:
            _running -= 1
            _RUNS.notify_all()


def wait_for_quiet() -> None:
    """Block until no script run is in progress (at most :data:`QUIET_WAIT_S`): the warm-up's pause."""
    with _RUNS:
        _RUNS.wait_for(lambda: _running == 0, timeout=QUIET_WAIT_S)


#: seconds the first certification of G for a model may take (every shipped obfuscator: 0.2–5 s)
GLOBAL_TIME_LIMIT_S = 60.0

#: Modules slow to import (torchmetrics pulls in torchvision and torch._dynamo: seconds) that a page
#: needs later; imported once per server process in the background so no page waits for them.
SLOW_IMPORTS = ("privcore.attacks.metrics",)


@st.cache_resource(show_spinner=False)
def warm_up() -> threading.Thread:
    """In a daemon thread (once per process): certify G of the default model (the default mechanism's
    constant, :func:`_certify_global`; a page asking for it meanwhile waits for this result), import
    :data:`SLOW_IMPORTS`, then make the
    exact certifier's pattern tables of the shipped obfuscators ready (enumerated here from the
    weights; region labels only from certificates verified here:
    :func:`privcore.lipschitz.pattern_store.precompute_pattern_tables`; the rest of their regions are
    resolved on demand by the certifications, which share them)."""

    # privcore.lipschitz is imported here, in the script's thread (~0.3 s, once per process): imported by
    # the thread while a page imports it too, its circular modules (package __init__ → engine → patterns)
    # raised importlib's _DeadlockError in the page (seen on a fresh server's first Attack page)
    try:
        from privcore.lipschitz.pattern_store import precompute_pattern_tables
    except ImportError:  # pragma: no cover - the pages that need it report the problem
        precompute_pattern_tables = None
    directory = models_dir()
    # the default model of each dataset, the default dataset first, fully resolved in the background:
    # their certifications then need no region LP (and their verified labels are stored: docs/TRUST.md)
    first = [f"{ds}/{names[0]}" for ds, names in _catalogue(directory).items() if names]

    def run() -> None:
        if first:
            _certify_global(directory, *first[0].split("/", 1))
        for name in SLOW_IMPORTS:
            wait_for_quiet()
            try:
                importlib.import_module(name)
            except Exception:  # pragma: no cover - the page that needs it imports it again and reports
                LOG.warning("warm-up import of %s failed", name, exc_info=True)
        if os.environ.get("PRIVLENS_WARM_UP", "").lower() in ("off", "0", "no"):
            return  # tables are built on demand (the test suite: many short-lived dashboards)
        try:
            if precompute_pattern_tables is not None:
                precompute_pattern_tables(directory, resolve=first, pause=wait_for_quiet)
        except Exception:  # an accelerator only: certification builds what it needs
            LOG.warning("pattern tables not precomputed", exc_info=True)

    thread = threading.Thread(target=run, name="privlens-warm-up", daemon=True)
    thread.start()
    return thread


def _certify_global(directory: str, dataset: str, model: str) -> None:
    """Certify G of ``dataset/model`` in this process (kept in privcore's in-memory memo, which the pages'
    :func:`privlens.globalmech.certified_constant` reads); the first Release page then need not wait for it.
    An accelerator only: a failure is left for the page to report."""
    if os.environ.get("PRIVLENS_WARM_UP", "").lower() in ("off", "0", "no"):
        return
    try:
        from privcore.mechanisms import card_global_constant
        from privcore.pipeline import load_pipeline

        pipe = load_pipeline(dataset, obfuscator=model, models_dir=directory)
        card_global_constant(pipe.obfuscator, pipe.cards["obfuscator"], time_limit=GLOBAL_TIME_LIMIT_S)
    except Exception:  # the page certifies again and says why
        LOG.warning("G of %s/%s not certified ahead", dataset, model, exc_info=True)


@dataclass(frozen=True)
class Loaded:
    """A loaded pipeline and the dataset it really belongs to (the fallback may differ)."""

    pipeline: Any
    dataset: str
    model: str
    fallback_reason: str | None


def models_dir() -> str:
    """Where checkpoints are read from (``$PRIVCORE_MODELS_DIR`` or ``models/``): part of every cache key."""
    from privcore.catalogue import default_models_dir

    return str(default_models_dir())


@st.cache_resource(show_spinner="Loading models (once per server process)…", max_entries=8)
def _load(dataset: str, model: str, directory: str) -> Any:
    from privcore.pipeline import load_pipeline

    pipe = load_pipeline(dataset, obfuscator=model, models_dir=directory)
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
