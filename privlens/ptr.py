"""Posthoc-PTR plumbing shared by the Release, Trade-offs, Attack and Neighbourhood pages.

Certification and every draw go through the library's API on the loaded pipeline
(:func:`privcore.api.certify_embedding`, :func:`privcore.api.release_embedding`), so the dashboard
runs the same checks and backstop as ``privcore.release``. φ is certified once per (model, image, R,
Δp, R_max, tol, certifier) — within a session through ``st.session_state``, and across sessions
through privcore's on-disk cache only in a personal deployment (:mod:`privlens.deployment`; never in
the default ``shared`` one) — with a progress bar and a cancel button (the API's progress callback);
an ε/δ slider move then needs no solve. A certification is reported
identically whether it was computed or read from the disk cache, without its duration, so no
session learns about another's work.

The Release page draws at Send (:mod:`privlens.sending` argues why): before Send it shows
:func:`outlook` — the guarantee, the noise scales and the probability that PTR releases, none of it
drawn; :func:`send` makes the one draw and charges the ledger in the same step, and :func:`latest`
is the release sent at the current settings (kept for the session). :func:`release` is only for
the Attack page's simulations, which are shown there and can never be sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import streamlit as st
import torch

from privcore.api import Certification, Release, certify_embedding, release_embedding
from privcore.errors import CertificationError
from privcore.mechanisms import Guarantee, bisection_decisions, ptr_scales, ptr_search_range, registry
from privlens import pipelines, sending
from privlens.deployment import image_cache
from privlens.image import CurrentImage
from privlens.memo import memo
from privlens.outcome import release_probability
from privlens.settings import DELTA_GRID, EPSILON_GRID, Settings

PHI_KEY = "privlens_phi"
RELEASE_KEY = "privlens_releases"
CANCELLED_KEY = "privlens_cert_cancelled"
NONCE_KEY = "privlens_nonce"
PAGE = "Release page"
CERT_TIME_LIMIT_S = 60.0
#: The smallest total ε and δ of the sidebar: φ's search range is sized for them, so a φ certified once
#: serves every setting.
EPSILON_MIN = min(EPSILON_GRID)
DELTA_MIN = min(DELTA_GRID)


@dataclass(frozen=True)
class PTRContext:
    """Everything PTR needs for the current image, none of it depending on ε or δ."""

    loaded: pipelines.Loaded
    image: CurrentImage
    z: np.ndarray  # float64 embedding
    radius: float
    delta_p: float
    r_max: float
    tol: float
    certifier: str

    @property
    def pipe(self) -> Any:
        """The pipeline."""
        return self.loaded.pipeline

    @property
    def key(self) -> tuple:
        """φ's key: model, image, R, Δp, R_max, tol, certifier (never ε or δ)."""
        digest = str(self.pipe.cards["obfuscator"]["weights"]["sha256"])
        return (digest, self.image.digest, self.radius, self.delta_p, self.r_max, self.tol, self.certifier)

    @property
    def model_digest(self) -> str:
        """SHA-256 of the obfuscator weights (public)."""
        return str(self.pipe.cards["obfuscator"]["weights"]["sha256"])


def context(s: Settings, loaded: pipelines.Loaded, image: CurrentImage) -> PTRContext | None:
    """The PTR context for the settings, or None after explaining what is missing."""
    pipe = loaded.pipeline
    delta_p = pipe.proposed_delta_p
    if delta_p is None:
        st.error(
            f"No Δp is stored with {loaded.dataset}/{loaded.model}, so PTR cannot run (nothing is released). "
            f"Compute it from training data with `.venv/bin/python -m privcore train delta-p --dataset "
            f"{loaded.dataset} --variant {loaded.model}`."
        )
        return None
    z = embedding(pipe, image)
    r_max, tol = ptr_search_range(s.radius, epsilon_min=EPSILON_MIN, delta_min=DELTA_MIN)
    return PTRContext(
        loaded=loaded,
        image=image,
        z=z,
        radius=s.radius,
        delta_p=float(delta_p),
        r_max=r_max,
        tol=tol,
        certifier=s.certifier,
    )


def embedding(pipe: Any, image: CurrentImage) -> np.ndarray:
    """z = g(x) as float64 (memoised per image in the session)."""

    def compute() -> np.ndarray:
        z = pipe.embed(image.tensor).double().cpu().numpy().reshape(-1)
        z.setflags(write=False)
        return z

    return memo("privlens_z", (id(pipe), image.digest), compute)


@dataclass(frozen=True)
class ImageViews:
    """What the Release page shows that does not depend on ε or δ (computed once per image)."""

    input_png: bytes
    reconstruction_png: bytes
    clean_class: int


def image_views(ctx: Any, *, scale: int) -> ImageViews:
    """The model's input and its VAE reconstruction as PNGs, and the noise-free class of f(z) (memoised).
    ``ctx``: a :class:`PTRContext` or any context with its ``pipe``, ``image`` and ``z`` (the global
    mechanism's)."""
    from privcore.inputs.images import encode_png


    def compute() -> ImageViews:
        z = torch.from_numpy(ctx.z.astype(np.float32))[None]
        recon = ctx.pipe.decode(z)[0]
        clean = int(ctx.pipe.classify(ctx.pipe.obfuscate(z)).argmax(-1)[0])
        return ImageViews(encode_png(ctx.image.tensor, scale=scale), encode_png(recon, scale=scale), clean)

    return memo("privlens_views", (id(ctx.pipe), ctx.image.digest, scale), compute, max_entries=16)


def disk_cache() -> bool | None:
    """The ``cache`` argument for per-image φ and certificates in this deployment
    (:func:`privlens.deployment.image_cache`: the disk cache only when ``personal``); a bad
    ``PRIVLENS_DEPLOYMENT`` stops the page with an error, and nothing is released."""
    try:
        return image_cache()
    except ValueError as exc:
        st.error(f"The server is misconfigured: {exc}. Nothing was released.")
        st.stop()
        raise  # st.stop() raises; this only tells type checkers so


def known_phi(ctx: PTRContext) -> Certification | None:
    """The certification (φ, R*, ζ, …) if this session already has it (no solve)."""
    return st.session_state.setdefault(PHI_KEY, {}).get(ctx.key)


def certify(ctx: PTRContext) -> Certification | None:
    """The :class:`~privcore.api.Certification` (φ, R*, ζ, …) for the context: from the session,
    else :func:`privcore.api.certify_embedding` — (personal deployment only) from privcore's disk
    cache, else a fresh certification with progress and a cancel button, and the API's backstop
    either way. Returns None when cancelled or failed (nothing released). The status line is the
    same for a disk hit and a computation: "Certified (N decisions)", N from φ itself, no time."""
    phis = st.session_state.setdefault(PHI_KEY, {})
    if ctx.key in phis:
        return phis[ctx.key]
    disk = disk_cache()
    cancelled = st.session_state.setdefault(CANCELLED_KEY, set())
    if ctx.key in cancelled:
        st.info("Certification of this image was cancelled; nothing was released.")
        if st.button("Certify this image", key="cert_restart", type="primary"):
            cancelled.discard(ctx.key)
            st.rerun()
        return None
    total = bisection_decisions(ctx.radius, ctx.r_max, ctx.tol)
    with st.status(
        f"Certifying this image with the {ctx.certifier} certifier (first time only)…", expanded=True
    ) as status:
        if st.button("Cancel certification", key="cert_cancel"):
            cancelled.add(ctx.key)
            status.update(label="Certification cancelled", state="error")
            st.rerun()
        bar = st.progress(0.0, text="local Lipschitz decisions: 0")
        steps: list[tuple[float, bool]] = []

        def report(radius: float, passed: bool) -> None:
            steps.append((radius, passed))
            verdict = "≤ Δp" if passed else "> Δp"
            bar.progress(
                min(1.0, len(steps) / total),
                text=f"decision {len(steps)} of at most {total}: L(f, B(z, {radius:.4g})) {verdict}",
            )

        try:
            phi = certify_embedding(
                ctx.pipe,
                ctx.z,
                radius=ctx.radius,
                certifier=ctx.certifier,
                epsilon_min=EPSILON_MIN,
                delta_min=DELTA_MIN,
                time_limit=CERT_TIME_LIMIT_S,
                cache=disk,
                progress=report,  # a cancelled run raises from it: nothing is cached or released
            )
        except CertificationError as exc:
            status.update(label="Certification failed: nothing released", state="error")
            st.error(f"The local Lipschitz constant could not be certified: {exc}. Nothing was released.")
            return None
        # the same words whether φ was computed now or read from the disk cache (personal mode):
        # neither the source nor a duration, which would tell a hit from a computation
        status.update(label=f"Certified ({phi.n_decisions} decisions)", state="complete", expanded=False)
    phis[ctx.key] = phi
    return phi


# ------------------------------------------------------------------ the Release page: draw at Send


def release_key(ctx: PTRContext, *, epsilon: float, delta: float) -> tuple:
    """The settings a release is drawn at: φ's key (model, image, R, Δp, …), ε and δ."""
    return (ctx.key, float(epsilon), float(delta))


@dataclass(frozen=True, kw_only=True)
class Outlook:
    """What the Release page shows before Send — nothing in it is drawn: the guarantee one sent
    release spends, P[PTR releases] from the certified φ (the data owner's own information; posthoc
    Alg. 1), the test threshold ln(1/δ)·(R + ζ)/ε and the release's Laplace scale Δp·R/ε."""

    guarantee: Guarantee
    probability: float
    threshold: float
    noise_scale: float
    test_scale: float


def outlook(ctx: PTRContext, phi: Certification, *, epsilon: float, delta: float) -> Outlook:
    """The :class:`Outlook` for (φ, ε, δ). A ValueError means nothing can be sent at these settings
    (a refusal of the sampler itself comes at Send, before any noise is drawn, and is shown then)."""
    scales = ptr_scales(epsilon=epsilon, delta=delta, radius=ctx.radius, delta_p=ctx.delta_p, zeta=phi.zeta)
    return Outlook(
        guarantee=scales.guarantee,
        probability=release_probability(
            phi.phi, epsilon=epsilon, delta=delta, radius=ctx.radius, zeta=phi.zeta
        ),
        threshold=scales.threshold,
        noise_scale=scales.release_scale,
        test_scale=scales.test_scale,
    )


def send(ctx: PTRContext, phi: Certification, *, epsilon: float, delta: float) -> sending.SentRelease | None:
    """Send a PTR release at (ε, δ) — PTR's own ε, half the sidebar's total: one draw through
    :func:`privcore.api.release_embedding` (OS randomness, the exact sampler) and one ledger entry, in
    one step (:func:`privlens.sending.send`); the sent outcome is the API's
    :class:`~privcore.api.Release`. None when the API refused (nothing drawn or charged)."""

    def describe(result: Release, number: int) -> tuple[Guarantee, str]:
        what = "released" if result.released else "⊥"
        total = result.guarantee.epsilon  # (2ε, δ/2, R): the total a sent release spends
        label = (
            f"{PAGE}: PTR at ε/2={epsilon:g} (total ε={total:g}), δ={delta:g}, R={ctx.radius:g}, "
            f"release #{number} → {what} (sent)"
        )
        return result.guarantee, label

    key = release_key(ctx, epsilon=epsilon, delta=delta)
    draw = partial(_draw, ctx, phi, epsilon=epsilon, delta=delta)
    return sending.send(page=PAGE, key=key, image=ctx.image, draw=draw, describe=describe)


def latest(ctx: PTRContext, *, epsilon: float, delta: float) -> sending.SentRelease | None:
    """The newest release sent from the Release page at these settings (None: none was sent)."""
    return sending.latest(PAGE, release_key(ctx, epsilon=epsilon, delta=delta))


# ------------------------------------------------------------------ the Attack page's simulations


def nonce(label: str) -> int:
    """The resample counter of this session for one page's simulations."""
    return int(st.session_state.get(NONCE_KEY, {}).get(label, 0))


def resample(label: str) -> None:
    """Draw fresh simulated noise for ``label`` on the next render."""
    st.session_state.setdefault(NONCE_KEY, {})[label] = nonce(label) + 1


def release(ctx: PTRContext, phi: Certification, *, epsilon: float, delta: float, label: str) -> Release:
    """A simulated PTR outcome for (φ, ε, δ), drawn once (OS randomness) and memoised per page
    (``label``) and resample counter: the Attack page shows what an attacker would rebuild. It is
    never sent nor offered for download, and the Release page never shows it (it draws at Send)."""
    if label == PAGE:
        raise ValueError("the Release page draws at Send (privlens.ptr.send), never a free simulation")
    key = (ctx.key, float(epsilon), float(delta), nonce(label), label)
    return memo(RELEASE_KEY, key, partial(_draw, ctx, phi, epsilon=epsilon, delta=delta), max_entries=64)


def _draw(ctx: PTRContext, cert: Certification, *, epsilon: float, delta: float) -> Release:
    """One run of extended PTR (posthoc Alg. 1) with the certification, through the API (it checks
    that ``cert`` is this model's, image's, R's and certifier's and certifies nothing): the library's
    exact sampler, OS randomness."""
    return release_embedding(
        ctx.pipe,
        ctx.z,
        epsilon=epsilon / registry.get("PTR").epsilon_share,  # the API takes the total ε
        delta=delta,
        mechanism="ptr",
        radius=ctx.radius,
        certifier=ctx.certifier,
        certification=cert,
    )


def as_tensor(value: Any) -> torch.Tensor:
    """A released vector as a (1, d) float32 tensor."""
    return torch.as_tensor(np.asarray(value, dtype=np.float32)).reshape(1, -1)
