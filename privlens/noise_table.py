"""Home's noise table: every mechanism of the registry, its outlook at the sidebar's settings on the
sidebar's model — the numbers the Release and Inference-privacy pages show, never a constant of
Home's own.

The posthoc mechanisms are asked on the sidebar's dataset/model (the pipeline every page loads, its
constants certified by this process), the inference ones on their dataset's IP classifiers
(:func:`privlens.mechanism_view.inference_views`). Nothing is drawn and no image is involved: PTR's
row is its noise scale when the test passes (P[release] needs an image's certification). No mechanism
is named here; each row reads the mechanism's own label, source and :class:`Outlook`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from privcore.errors import CheckpointError, PrivcoreError
from privcore.mechanisms import registry
from privlens import mechanism_view as mv
from privlens import pipelines
from privlens.settings import Settings

__all__ = ["NoiseRow", "noise_rows", "scale_text"]


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


def noise_rows(s: Settings, loaded: pipelines.Loaded | None) -> list[NoiseRow]:
    """Each mechanism of the registry, in its order, at the sidebar's (ε, δ, R, α): posthoc ones on
    ``loaded`` (None: the model could not be loaded), inference ones on the dataset's IP classifiers."""
    dataset = s.dataset if loaded is None else loaded.dataset
    ip = mv.inference_views(s, dataset, None)
    rows = []
    for mech in registry.MECHANISMS:
        if mech.family == "posthoc":
            if loaded is None:
                rows.append(NoiseRow(name=mech.name, label=mech.label, source=mech.source, model="", noise="",
                                     now="no model", refused="the model could not be loaded"))
                continue
            rows.append(_row(mech, loaded.pipeline, s, f"{loaded.dataset}/{loaded.model}"))
            continue
        view = ip.get(mech.name)
        if isinstance(view, mv.View):
            rows.append(_row(mech, view.target, s, f"{view.dataset}/{view.model}"))
        else:
            refused = view or "no model shipped"
            rows.append(NoiseRow(name=mech.name, label=mech.label, source=mech.source, model="", noise="",
                                 now="refused" if refused.startswith("refused") else "no model",
                                 refused=refused))
    return rows
