"""One adapter between the pages and every mechanism of the registry (:mod:`privcore.mechanisms.registry`).

The pages never interpret a mechanism's name: they ask this module for a :class:`View` of the sidebar's
mechanism (or of each one, for a comparison) on its model and the current image, and read the
mechanism's own properties (``family``, ``needs_certificate``, ``uses_delta``, ``parameters``) and its
:class:`~privcore.mechanisms.protocol.Outlook`. Everything goes through the mechanism object:

* the target — :meth:`Mechanism.load` (a posthoc pipeline: the process-wide one of
  :mod:`privlens.pipelines`, with its fallback; an inference-privacy classifier) and the image's input,
  :meth:`Mechanism.prepare` (z = g(x), memoised per image);
* the certification, for a mechanism that :attr:`~Mechanism.needs_certificate` (PTR's φ): once per
  (model, image, R, Δp, R_max, tol, certifier) — within a session through ``st.session_state``, across
  sessions through privcore's disk cache only in a personal deployment (:mod:`privlens.deployment`) —
  with a progress bar and a cancel button; reported identically whether computed or read from disk,
  without its duration, so no session learns about another's work;
* :func:`outlook` — what a release would be at the current settings, nothing drawn;
* :func:`send` — one draw through :meth:`Mechanism.release` and one ledger entry, in one step
  (:mod:`privlens.sending` argues why the pages draw at Send); :func:`latest`, the release sent at these
  settings (kept for the session);
* :func:`simulate` — the Attack page's draws: never sent, memoised per page and resample counter.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import streamlit as st
import torch

from privcore.errors import CertificationError, CheckpointError, DatasetUnavailableError, PrivcoreError
from privcore.mechanisms import (
    Mechanism,
    Options,
    Outlook,
    Release,
    Setting,
    bisection_decisions,
    ptr_search_range,
    registry,
)
from privlens import pipelines, sending
from privlens.deployment import image_cache
from privlens.image import CurrentImage
from privlens.memo import memo
from privlens.settings import DELTA_GRID, EPSILON_GRID, Settings

__all__ = [
    "PAGES",
    "ImageViews",
    "Scores",
    "View",
    "certify",
    "inference_views",
    "known_certificate",
    "latest",
    "outlook",
    "posthoc",
    "send",
    "setting",
    "simulate",
]

PHI_KEY = "privlens_phi"
RELEASE_KEY = "privlens_releases"
CANCELLED_KEY = "privlens_cert_cancelled"
NONCE_KEY = "privlens_nonce"
CLEAN_KEY = "privlens_ip_clean"
#: The page each family sends from, as its ledger labels name it (by the registry's ``page``).
PAGES = {"release": "Release page", "inference_privacy": "IP page"}
CERT_TIME_LIMIT_S = 60.0
#: seconds the first certification of a model's constant (G, G₂) may take: the warm-up's limit
TIME_LIMIT_S = pipelines.GLOBAL_TIME_LIMIT_S
#: The smallest total ε and δ of the sidebar: a certification's search range is sized for them, so one
#: certified once serves every setting.
EPSILON_MIN = min(EPSILON_GRID)
DELTA_MIN = min(DELTA_GRID)


def setting(mech: Mechanism, s: Settings) -> Setting:
    """The mechanism's validated setting at the sidebar's values (R or α only where it takes them)."""
    names = mech.parameter_names
    return mech.setting(epsilon=s.epsilon, delta=s.delta, radius=s.radius if "radius" in names else None,
                        alpha=s.alpha if "alpha" in names else None)


def page_of(mech: Mechanism) -> str:
    """The page name its sends are recorded under."""
    return PAGES.get(mech.page, mech.page)


@dataclass(frozen=True)
class View:
    """One mechanism on its model and the current image, nothing that depends on ε or δ: the loaded
    ``target``, the prepared input ``x`` (z for a posthoc mechanism, the pixels for an inference one),
    R (posthoc) and the certifier (for a mechanism that needs a certificate)."""

    mech: Mechanism
    target: Any
    image: CurrentImage
    x: Any
    dataset: str
    model: str
    radius: float | None = None
    certifier: str = "exact"

    @property
    def pipe(self) -> Any:
        """The posthoc pipeline (the target)."""
        return self.target

    @property
    def model_digest(self) -> str:
        """SHA-256 of the weights that release (public)."""
        if self.mech.family == "posthoc":
            return str(self.target.cards["obfuscator"]["weights"]["sha256"])
        return str(self.target.model.card["weights"]["sha256"])

    @property
    def key(self) -> tuple:
        """What a release's settings add ε and δ to: mechanism, model, image, R, certifier."""
        return (self.mech.name, self.model_digest, self.image.digest, self.radius, self.certifier)

    @property
    def certificate_key(self) -> tuple:
        """A certification's key: model, image, R, Δp, R_max, tol, certifier (never ε or δ)."""
        r_max, tol = ptr_search_range(self.radius, epsilon_min=EPSILON_MIN, delta_min=DELTA_MIN)
        return (self.model_digest, self.image.digest, self.radius, float(self.pipe.proposed_delta_p),
                r_max, tol, self.certifier)


def embedding(pipe: Any, image: CurrentImage) -> np.ndarray:
    """z = g(x) as float64 (memoised per image in the session): what a posthoc mechanism releases from."""

    def compute() -> np.ndarray:
        z = pipe.embed(image.tensor).double().cpu().numpy().reshape(-1)
        z.setflags(write=False)
        return z

    return memo("privlens_z", (id(pipe), image.digest), compute)


def posthoc(s: Settings, loaded: pipelines.Loaded, image: CurrentImage, mech: Mechanism | None = None,
            *, quiet: bool = False) -> View | None:
    """The :class:`View` of a posthoc mechanism (the sidebar's by default) on the loaded pipeline, or None
    after saying why it cannot run for this model (unless ``quiet``): nothing is released then. The
    model's constant (G, G₂) is certified here on first use of the model (a spinner, a few seconds)."""
    mech = s.spec if mech is None else mech
    view = View(mech=mech, target=loaded.pipeline, image=image, x=embedding(loaded.pipeline, image),
                dataset=loaded.dataset, model=loaded.model, radius=float(s.radius), certifier=s.certifier)
    try:
        with st.spinner("Certifying the model's constant over its public clipping box (first use of this "
                        "model on this server: a few seconds, the same for every image)…"):
            mech.outlook(view.target, setting(mech, s), time_limit=TIME_LIMIT_S)
    except CheckpointError as exc:
        if not quiet:
            st.error(f"**{mech.label} cannot run for {loaded.dataset}/{loaded.model}; nothing was "
                     f"released.** {pipelines.public_text(exc)}")
        return None
    except ValueError:
        pass  # the settings themselves: the page says so with the outlook at these settings
    return view


def disk_cache() -> bool | None:
    """The ``cache`` argument for per-image certifications in this deployment
    (:func:`privlens.deployment.image_cache`: the disk cache only when ``personal``); a bad
    ``PRIVLENS_DEPLOYMENT`` stops the page with an error, and nothing is released."""
    try:
        return image_cache()
    except ValueError as exc:
        st.error(f"The server is misconfigured: {exc}. Nothing was released.")
        st.stop()
        raise  # st.stop() raises; this only tells type checkers so


def known_certificate(view: View) -> Any | None:
    """The image's certification if this session already has it (no solve); None for a mechanism that
    needs none."""
    if not view.mech.needs_certificate:
        return None
    return st.session_state.setdefault(PHI_KEY, {}).get(view.certificate_key)


def certify(view: View) -> Any | None:
    """The image's :class:`~privcore.api.Certification`: from the session, else
    :func:`privcore.api.certify_embedding` — (personal deployment only) from privcore's disk cache, else
    a fresh certification with progress and a cancel button, and the API's backstop either way. None
    when cancelled or failed (nothing released). The status line is the same for a disk hit and a
    computation: "Certified (N decisions)", N from φ itself, no time."""
    from privcore.api import certify_embedding

    key = view.certificate_key
    phis = st.session_state.setdefault(PHI_KEY, {})
    if key in phis:
        return phis[key]
    disk = disk_cache()
    cancelled = st.session_state.setdefault(CANCELLED_KEY, set())
    if key in cancelled:
        st.info("Certification of this image was cancelled; nothing was released.")
        if st.button("Certify this image", key="cert_restart", type="primary"):
            cancelled.discard(key)
            st.rerun()
        return None
    total = bisection_decisions(view.radius, key[4], key[5])
    with st.status(
        f"Certifying this image with the {view.certifier} certifier (first time only)…", expanded=True
    ) as status:
        if st.button("Cancel certification", key="cert_cancel"):
            cancelled.add(key)
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

        try:  # a cancelled run raises from report: nothing is cached or released
            cert = certify_embedding(view.pipe, view.x, radius=view.radius, certifier=view.certifier,
                                     epsilon_min=EPSILON_MIN, delta_min=DELTA_MIN,
                                     time_limit=CERT_TIME_LIMIT_S, cache=disk, progress=report)
        except CertificationError as exc:
            status.update(label="Certification failed: nothing released", state="error")
            st.error(f"The local Lipschitz constant could not be certified: {exc}. Nothing was released.")
            return None
        # the same words whether φ was computed now or read from the disk cache (personal mode)
        status.update(label=f"Certified ({cert.n_decisions} decisions)", state="complete", expanded=False)
    phis[key] = cert
    return cert


def outlook(view: View, s: Settings, certification: Any = None) -> Outlook:
    """What a release at the sidebar's settings would be, nothing drawn (with the image's certification,
    P[release] of a mechanism that needs one). ValueError or PrivcoreError: nothing can be sent here."""
    return view.mech.outlook(view.target, setting(view.mech, s), time_limit=TIME_LIMIT_S,
                             certification=certification)


# ------------------------------------------------------------------ Send: one draw, one ledger entry


@dataclass(frozen=True)
class Scores:
    """A sent inference-privacy release as the page shows it: the API's ``release``, its noisy scores
    as a tensor and, for input noise, the noisy input it classified (the owner's only)."""

    release: Release
    noisy: torch.Tensor
    noisy_input: torch.Tensor | None

    @property
    def guarantee(self) -> Any:
        """The guarantee the sent release spends."""
        return self.release.guarantee


def release_key(view: View, s: Settings) -> tuple:
    """The settings a release is drawn at: the view's key and the mechanism's setting."""
    return (*view.key, setting(view.mech, s))


def _draw(view: View, s: Settings, certification: Any = None, epsilon: float | None = None) -> Release:
    """One release through :meth:`Mechanism.release`: the library's exact sampler, OS randomness; a
    certification is checked against this model, image, R and certifier, and certifies nothing again."""
    mech = view.mech
    at = setting(mech, s if epsilon is None else s.replace(epsilon=epsilon))
    if mech.needs_certificate:
        options = Options(certifier=view.certifier, time_limit=CERT_TIME_LIMIT_S, cache=disk_cache(),
                          certification=certification)
    else:
        options = Options(time_limit=TIME_LIMIT_S)
    return mech.release(view.target, view.x, at, options)


def ledger_label(mech: Mechanism, s: Settings, release: Release, number: int) -> str:
    """The ledger's line for a sent release: the registry's name, the total ε (and the ε the mechanism
    runs at where it spends it in parts), δ where it takes one, R or α, the outcome."""
    share = mech.epsilon_share
    eps = (f"{mech.name} ε={s.epsilon:g}" if share == 1 else
           f"{mech.name} at ε/{1 / share:g}={mech.mechanism_epsilon(s.epsilon):g} (total ε={s.epsilon:g})")
    parts = [eps]
    if mech.uses_delta:
        parts.append(f"δ={s.delta:g}")
    radii = (("radius", "R", s.radius), ("alpha", "α", s.alpha))
    parts += [f"{symbol}={value:g}" for name, symbol, value in radii if name in mech.parameter_names]
    what = "released" if release.released else "⊥"
    return f"{page_of(mech)}: {', '.join(parts)}, release #{number} → {what} (sent)"


def send(view: View, s: Settings, certification: Any = None) -> sending.SentRelease | None:
    """Send a release at the sidebar's settings: one draw (:meth:`Mechanism.release`) and one ledger
    entry, in one step (:func:`privlens.sending.send`). None when the library refused (nothing drawn or
    charged). A posthoc outcome is the API's Release; an inference one its :class:`Scores`."""
    mech = view.mech

    def draw() -> Any:
        out = _draw(view, s, certification)
        if mech.family == "posthoc":
            return out
        private = out.mechanism_result
        return Scores(out, torch.as_tensor(out.value, dtype=torch.float32).reshape(1, -1),
                      None if private is None else private.noisy_input)

    def describe(outcome: Any, number: int) -> tuple[Any, str]:
        release = outcome if isinstance(outcome, Release) else outcome.release
        return release.guarantee, ledger_label(mech, s, release, number)

    return sending.send(page=page_of(mech), key=release_key(view, s), image=view.image, draw=draw,
                        describe=describe)


def latest(view: View, s: Settings) -> sending.SentRelease | None:
    """The newest release of this mechanism sent at these settings for this image (None: none was)."""
    return sending.latest(page_of(view.mech), release_key(view, s))


# ------------------------------------------------------------------ the Attack page's simulations


def nonce(label: str) -> int:
    """The resample counter of this session for one page's simulations."""
    return int(st.session_state.get(NONCE_KEY, {}).get(label, 0))


def resample(label: str) -> None:
    """Draw fresh simulated noise for ``label`` on the next render."""
    st.session_state.setdefault(NONCE_KEY, {})[label] = nonce(label) + 1


def simulate(view: View, s: Settings, certification: Any, *, epsilon: float, label: str) -> Release:
    """A simulated release at the total ``epsilon``, drawn once (OS randomness) and memoised per page
    (``label``) and resample counter: the Attack page shows what an attacker would rebuild. It is never
    sent nor offered for download, and no page that sends shows it (they draw at Send)."""
    if label in PAGES.values():
        raise ValueError("a page that sends draws at Send (mechanism_view.send), never a free simulation")
    key = (view.key, float(epsilon), float(s.delta), nonce(label), label)
    return memo(RELEASE_KEY, key, partial(_draw, view, s, certification, epsilon), max_entries=64)


def as_tensor(value: Any) -> torch.Tensor:
    """A released vector as a (1, d) float32 tensor."""
    return torch.as_tensor(np.asarray(value, dtype=np.float32)).reshape(1, -1)


# ------------------------------------------------------------------ what a page shows of the image


@dataclass(frozen=True)
class ImageViews:
    """What the Release page shows that does not depend on ε or δ (computed once per image)."""

    input_png: bytes
    reconstruction_png: bytes
    clean_class: int


def image_views(view: View, *, scale: int) -> ImageViews:
    """The model's input and its VAE reconstruction as PNGs, and the noise-free class of f(z) (memoised)."""
    from privcore.inputs import encode_png

    def compute() -> ImageViews:
        z = torch.from_numpy(view.x.astype(np.float32))[None]
        recon = view.pipe.decode(z)[0]
        clean = int(view.pipe.classify(view.pipe.obfuscate(z)).argmax(-1)[0])
        return ImageViews(encode_png(view.image.tensor, scale=scale), encode_png(recon, scale=scale), clean)

    return memo("privlens_views", (id(view.pipe), view.image.digest, scale), compute, max_entries=16)


# ------------------------------------------------------------------ the inference-privacy family


def ip_models(dataset: str, *, quiet: bool = False) -> Any | None:
    """The dataset's IP classifiers (loaded once per process, as :meth:`Mechanism.load` loads them), or
    None after saying how to train them (silently with ``quiet``)."""
    from privcore.mechanisms import load_ip_cached

    try:
        with st.spinner("Loading the IP classifiers (once per server process)…"):
            return load_ip_cached(dataset, pipelines.models_dir())
    except (CheckpointError, DatasetUnavailableError, FileNotFoundError) as exc:
        if not quiet:
            st.warning(f"No inference-privacy classifiers for {dataset}: {pipelines.public_text(exc)}")
            st.info(f"Train them with `.venv/bin/python -m privcore train all --dataset {dataset}` (or "
                    "`train ip`).")
        return None


def dataset_size(ip: Any) -> int | None:
    """Number of images (train + test) of the IP classifiers' dataset, from their cards; None if no
    card says."""
    for model in getattr(ip, "models", {}).values():
        try:
            data = model.card["dataset"]
            return int(data["n_train"]) + int(data["n_test"])
        except (AttributeError, KeyError, TypeError, ValueError):
            continue
    return None


def inference_views(s: Settings, dataset: str, image: CurrentImage | None) -> dict[str, View | str]:
    """Each inference-privacy mechanism of the registry as a :class:`View` on its classifier, or why it
    cannot run (no model shipped, parameters refused). ``image`` None: the views hold no input."""
    out: dict[str, View | str] = {}
    for mech in registry.MECHANISMS:
        if mech.family != "inference":
            continue
        try:
            target = mech.load(dataset=dataset, model=None, models_dir=pipelines.models_dir())
            mech.outlook(target, setting(mech, s))
        except (CheckpointError, DatasetUnavailableError, FileNotFoundError):
            out[mech.name] = "no model shipped"
            continue
        except (ValueError, PrivcoreError) as exc:
            out[mech.name] = f"refused: {exc}"
            continue
        x = None if image is None else mech.prepare(target, image.tensor)
        out[mech.name] = View(mech=mech, target=target, image=image, x=x, dataset=dataset,  # type: ignore[arg-type]
                              model=str(target.model.name))
    return out


def clean_scores(view: View) -> torch.Tensor:
    """The classifier's scores for the image without noise (memoised; no draw): what the page shows of an
    inference mechanism before Send — the user's own information, never released."""
    return memo(CLEAN_KEY, (view.image.digest, view.mech.name, view.model),
                lambda: view.mech.clean_scores(view.target, view.x), max_entries=16)


def class_distribution(scores: Any) -> list[float]:
    """softmax of one row of scores, as floats (post-processing: costs nothing)."""
    return [float(v) for v in torch.softmax(torch.as_tensor(scores, dtype=torch.float64), -1).reshape(-1)]
