"""The certified global mechanism on the Release page: f(clip z) + Lap(G·R/ε), (ε, 0, R), never ⊥
(docs/DESIGN.md, "Beyond the papers"; :mod:`privcore.mechanisms.global_mechanism`).

G is certified by this server process from the obfuscator's weights over the public clipping box
its card records (the card's G is a hint the library verifies, docs/TRUST.md): once per model and
process (:func:`certified_constant`, a spinner the first time, ~1–5 s), never per image — and it
does not depend on any image, so neither does how long it takes. Like PTR's path
(:mod:`privlens.ptr`), the page draws at Send (:mod:`privlens.sending` argues why): before Send it
shows :func:`outlook` — G, the box, the noise scale and the guarantee, none of it drawn;
:func:`send` makes the one draw through the API, :func:`privcore.api.release_embedding` (the code
``privcore.release`` runs), and charges the ledger in the same step; :func:`latest` is the release
sent at the current settings.
No maths here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import streamlit as st
import torch

from privcore.api import Release, release_embedding
from privcore.errors import PrivcoreError
from privcore.mechanisms import Guarantee, card_global_constant, global_scales
from privlens import pipelines, sending
from privlens.image import CurrentImage
from privlens.ptr import PAGE, embedding

__all__ = [
    "GlobalContext",
    "Outlook",
    "certified_constant",
    "certified_how",
    "context",
    "latest",
    "outlook",
    "send",
]

#: seconds the first certification of G for a model may take (the warm-up's limit: the same memo entry)
TIME_LIMIT_S = pipelines.GLOBAL_TIME_LIMIT_S


@st.cache_resource(
    show_spinner="Certifying G over the model's public clipping box (first use of this model on this "
    "server: a few seconds, the same for every image)…",
    max_entries=32,
)
def _certified(digest: str, _obfuscator: Any, _card: Any) -> Any:
    """G for the obfuscator with weights ``digest``, certified by this process (once per model)."""
    return card_global_constant(_obfuscator, _card, time_limit=TIME_LIMIT_S)


def certified_constant(loaded: pipelines.Loaded, *, quiet: bool = False) -> Any | None:
    """The :class:`~privcore.lipschitz.GlobalConstant` of the loaded obfuscator, certified here and
    kept for the process; None when there is none (no clipping box in the card, or a certification
    that failed: nothing is released), after saying why unless ``quiet``."""
    pipe = loaded.pipeline
    card = pipe.cards["obfuscator"]
    try:
        return _certified(str(card["weights"]["sha256"]), pipe.obfuscator, card)
    except (ValueError, PrivcoreError) as exc:
        if quiet:
            return None
        st.error(
            f"**The global mechanism cannot run for {loaded.dataset}/{loaded.model}; nothing was released.** "
            f"{pipelines.public_text(exc)}"
        )
        return None


@dataclass(frozen=True)
class GlobalContext:
    """Everything the global mechanism needs for the current image, none of it depending on ε."""

    loaded: pipelines.Loaded
    image: CurrentImage
    z: np.ndarray  # float64 embedding
    radius: float
    constant: Any  # a GlobalConstant certified by this process

    @property
    def pipe(self) -> Any:
        """The pipeline."""
        return self.loaded.pipeline

    @property
    def model_digest(self) -> str:
        """SHA-256 of the obfuscator weights (public)."""
        return str(self.pipe.cards["obfuscator"]["weights"]["sha256"])

    @property
    def key(self) -> tuple:
        """The settings a release is drawn at, but ε: mechanism, model, image, R."""
        return ("Global", self.model_digest, self.image.digest, self.radius)


def context(radius: float, loaded: pipelines.Loaded, image: CurrentImage) -> GlobalContext | None:
    """The context for the image at radius R, or None after explaining what is missing."""
    constant = certified_constant(loaded)
    if constant is None:
        return None
    z = embedding(loaded.pipeline, image)
    return GlobalContext(loaded=loaded, image=image, z=z, radius=float(radius), constant=constant)


@dataclass(frozen=True, kw_only=True)
class Outlook:
    """What the page shows before Send — nothing drawn: the guarantee, G and how it was certified,
    the noise scale G·R/ε (and what the exact sampler draws), the public box, and — the user's own
    information, never released — whether z lies in the box and the class of f(clip z) without noise."""

    guarantee: Guarantee
    global_lipschitz: float
    how: str
    source: str
    seconds: float
    noise_scale: float
    noise_scale_effective: float
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    inside: bool
    clean_class: int


def outlook(ctx: GlobalContext, *, epsilon: float) -> Outlook:
    """The :class:`Outlook` at ``epsilon`` (ValueError: nothing can be sent at this ε)."""
    c = ctx.constant
    noise_free = ctx.pipe.obfuscate(torch.from_numpy(c.box.clip(ctx.z).astype(np.float32))[None])
    scales = global_scales(
        epsilon=epsilon,
        radius=ctx.radius,
        global_lipschitz=c.value,
        numel=int(noise_free.shape[-1]),
        how=c.how.value,
    )
    clean = int(ctx.pipe.classify(noise_free).argmax(-1)[0])
    return Outlook(
        guarantee=scales.guarantee,
        global_lipschitz=float(c.value),
        how=c.how.value,
        source=c.source,
        seconds=float(c.seconds),
        noise_scale=scales.noise_scale,
        noise_scale_effective=scales.noise_scale_effective,
        lower=tuple(float(v) for v in c.box.lower),
        upper=tuple(float(v) for v in c.box.upper),
        inside=c.box.contains(ctx.z),
        clean_class=clean,
    )


def certified_how(o: Outlook) -> str:
    """How G was certified, in words: e.g. "exact: the card's value, verified by this server"."""
    verified = o.source == "verified-hint"
    origin = "the card's value, verified by this server" if verified else "computed by this server"
    return f"{o.how}: {origin} on first use of this model ({o.seconds:.1f} s; the same for every image)"


def release_key(ctx: GlobalContext, *, epsilon: float) -> tuple:
    """The settings a release is drawn at: mechanism, model, image, R and ε."""
    return (*ctx.key, float(epsilon))


def send(ctx: GlobalContext, *, epsilon: float) -> sending.SentRelease | None:
    """Send a release of the global mechanism at ``epsilon``: one draw through
    :func:`privcore.api.release_embedding` (OS randomness, the library's exact sampler; G from the
    library's per-process memo, the constant :func:`certified_constant` shows) and one ledger entry,
    in one step (:func:`privlens.sending.send`); the sent outcome is the API's
    :class:`~privcore.api.Release`. None when the library refused (nothing drawn or charged)."""

    def draw() -> Release:
        return release_embedding(
            ctx.pipe, ctx.z, epsilon=epsilon, mechanism="global", radius=ctx.radius, time_limit=TIME_LIMIT_S
        )

    def describe(result: Release, number: int) -> tuple[Guarantee, str]:
        label = f"{PAGE}: Global ε={epsilon:g}, R={ctx.radius:g}, release #{number} → released (sent)"
        return result.guarantee, label

    return sending.send(
        page=PAGE, key=release_key(ctx, epsilon=epsilon), image=ctx.image, draw=draw, describe=describe
    )


def latest(ctx: GlobalContext, *, epsilon: float) -> sending.SentRelease | None:
    """The newest release of the global mechanism sent from the Release page at these settings."""
    return sending.latest(PAGE, release_key(ctx, epsilon=epsilon))
