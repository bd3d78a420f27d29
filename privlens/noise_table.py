"""Home's noise table: every mechanism of the registry, its outlook at the sidebar's settings on the
sidebar's model — the numbers the Release and Inference-privacy pages show, never a constant of
Home's own.

The posthoc mechanisms are asked on the sidebar's dataset/model (the pipeline every page loads, its
constants certified by this process), the inference ones on their dataset's IP classifiers
(:func:`privlens.mechanism_view.inference_views`). Nothing is drawn and no image is involved: PTR's
row is its noise scale when the test passes (P[release] needs an image's certification). No mechanism
is named here; each row reads the mechanism's own label, source and :class:`Outlook`.

:func:`noise_rows_soon` computes them beside the page (the background's worker threads), so that Home
is drawn while a constant is still being certified on a model's first use (seconds): that row says so
and fills in when ready.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

# imported here, in the page's thread, before any row's thread starts: two threads importing scipy.stats
# at once can leave one of them a half-initialised module (the outlooks' calibrations import it)
import scipy.stats  # noqa: F401

from privcore.errors import CheckpointError, DatasetUnavailableError, PrivcoreError
from privcore.mechanisms import registry
from privlens import background, pipelines
from privlens import mechanism_view as mv
from privlens.settings import Settings

__all__ = ["NoiseRow", "mechanism_row", "noise_rows", "noise_rows_soon", "scale_text"]


@dataclass(frozen=True)
class NoiseRow:
    """One registered mechanism at the sidebar's settings: ``now`` is "b = 0.5562" (or "σ = …"), or
    "refused" / "no model" with the reason in ``refused``; ``noise`` the outlook's own words."""

    name: str
    label: str
    source: str
    model: str
    noise: str
    now: str
    guarantee: str = ""
    refused: str = ""
    noise_scale: float | None = None
    pending: bool = False


def scale_text(noise: str, scale: float) -> str:
    """"b = 0.5562" or "σ = 0.3731": the symbol the outlook's noise text names first (b: Laplace)."""
    head = noise.split(" = ", 1)[0].split()
    symbol = head[-1] if head and head[-1] in ("b", "σ") else "scale"
    return f"{symbol} = {scale:.4g}"


def _row(mech: Any, target: Any, s: Settings, model: str) -> NoiseRow:
    base = {"name": mech.name, "label": mech.label, "source": mech.source, "model": model}
    try:
        look = mech.outlook(target, mv.setting(mech, s), time_limit=mv.TIME_LIMIT_S)
    except CheckpointError as exc:
        return NoiseRow(**base, noise="", now="no model", refused=pipelines.public_text(exc))
    except (ValueError, PrivcoreError) as exc:
        return NoiseRow(**base, noise="", now="refused", refused=str(exc))
    return NoiseRow(**base, noise=look.noise, now=scale_text(look.noise, look.noise_scale),
                    guarantee=look.guarantee.describe(), noise_scale=float(look.noise_scale))


def _inference_row(mech: Any, s: Settings, dataset: str) -> NoiseRow:
    """An inference-privacy mechanism's row on its dataset's classifier (loaded as
    :func:`privlens.mechanism_view.inference_views` loads it), or why it has none."""
    try:
        target = mech.load(dataset=dataset, model=None, models_dir=pipelines.models_dir())
    except (CheckpointError, DatasetUnavailableError, FileNotFoundError):
        return NoiseRow(name=mech.name, label=mech.label, source=mech.source, model="", noise="",
                        now="no model", refused="no model shipped")
    return _row(mech, target, s, f"{dataset}/{target.model.name}")


def mechanism_row(mech: Any, s: Settings, loaded: pipelines.Loaded | None) -> NoiseRow:
    """``mech`` at the sidebar's (ε, δ, R, α): a posthoc one on ``loaded`` (None: the model could not be
    loaded), an inference one on its dataset's IP classifier."""
    if mech.family != "posthoc":
        return _inference_row(mech, s, s.dataset if loaded is None else loaded.dataset)
    if loaded is None:
        return NoiseRow(name=mech.name, label=mech.label, source=mech.source, model="", noise="",
                        now="no model", refused="the model could not be loaded")
    return _row(mech, loaded.pipeline, s, f"{loaded.dataset}/{loaded.model}")


def noise_rows(s: Settings, loaded: pipelines.Loaded | None) -> list[NoiseRow]:
    """Each mechanism of the registry, in its order, at the sidebar's (ε, δ, R, α): posthoc ones on
    ``loaded`` (None: the model could not be loaded), inference ones on the dataset's IP classifiers."""
    return [mechanism_row(mech, s, loaded) for mech in registry.MECHANISMS]


def _pending(mech: Any) -> NoiseRow:
    return NoiseRow(name=mech.name, label=mech.label, source=mech.source, model="", noise="",
                    now="computing…", pending=True)


def noise_rows_soon(s: Settings, loaded: pipelines.Loaded | None, *,
                    wait_s: float) -> tuple[list[NoiseRow], bool]:
    """:func:`noise_rows`, each row computed once per (settings, model) in this process by the
    background's worker threads (:func:`privlens.background.soon`, at the process's priority: numbers
    on the screen): waits at most ``wait_s`` seconds, and a row not computed by then (a constant still
    being certified) is a pending one ("computing…"). Returns the rows and whether any is pending. With
    background work turned off (:func:`privlens.background.enabled`) it computes them here."""
    if not background.enabled():
        return noise_rows(s, loaded), False
    model = None if loaded is None else (loaded.dataset, loaded.model, id(loaded.pipeline))
    jobs = [background.soon(("noise-row", s, model, mech.name), partial(mechanism_row, mech, s, loaded),
                            name=f"privlens-noise-{mech.name}") for mech in registry.MECHANISMS]
    background.wait_all(jobs, wait_s)
    rows = [_row_of(mech, job) for mech, job in zip(registry.MECHANISMS, jobs, strict=True)]
    return rows, any(r.pending for r in rows)


def _row_of(mech: Any, job: background.Job) -> NoiseRow:
    """The job's row, a pending one, or one that says why it failed."""
    if not job.done.is_set():
        return _pending(mech)
    if job.value is None:
        return NoiseRow(name=mech.name, label=mech.label, source=mech.source, model="", noise="",
                        now="not computed", refused=job.error or "")
    return job.value
