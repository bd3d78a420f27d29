"""Inference-privacy plumbing of the Inference-privacy page (the IP paper's Gauss-Input, Gauss-Output,
Lap-Output; Tian et al., Defs 3–5).

The IP classifiers are loaded once per process. For the sidebar's ε, δ and α, :func:`plans` builds
each mechanism on its model (or says why not). Like the Release page, this page draws at Send
(:mod:`privlens.sending` argues why): before Send it shows each plan's noise and guarantee and the
noise-free prediction (:func:`clean_scores`, the user's own information, never released);
:func:`send` makes the one draw of a mechanism and charges the ledger in the same step, and
:func:`latest` is the release sent at the current settings (kept for the session). No maths here:
noise and guarantees come from :mod:`privcore.mechanisms`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st
import torch

from privcore.errors import CheckpointError, DatasetUnavailableError
from privcore.mechanisms import GaussInput, GaussOutput, Guarantee, LapOutput
from privlens import pipelines, sending
from privlens.image import CurrentImage
from privlens.memo import memo
from privlens.settings import IP_MECHANISMS, Settings

PAGE = "IP page"
CLEAN_KEY = "privlens_ip_clean"

#: Which shipped classifier runs each mechanism (first one present).
MODEL_CHOICES = {
    "Gauss-Input": ("ip-cnn-gauss-input", "ip-cnn", "ip-lipschitz-l2"),
    "Gauss-Output": ("ip-lipschitz-l2",),
    "Lap-Output": ("ip-lipschitz-l1",),
}


@st.cache_resource(show_spinner="Loading the IP classifiers (once per server process)…", max_entries=4)
def _ip_models(name: str, directory: str) -> Any:
    from privcore.models.pipeline import load_ip_models

    return load_ip_models(name, models_dir=directory)


def models(dataset: str) -> Any | None:
    """The dataset's IP classifiers, or None after saying how to train them."""
    try:
        return _ip_models(dataset, pipelines.models_dir())
    except (CheckpointError, DatasetUnavailableError, FileNotFoundError) as exc:
        st.warning(f"No inference-privacy classifiers for {dataset}: {pipelines.public_text(exc)}")
        command = f".venv/bin/python -m privcore train all --dataset {dataset}"
        st.info(f"Train them with `{command}` (or `train ip`).")
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


def models_if_shipped(dataset: str) -> Any | None:
    """The dataset's IP classifiers, or None (silently: for a comparison that can do without them)."""
    try:
        return _ip_models(dataset, pipelines.models_dir())
    except (CheckpointError, DatasetUnavailableError, FileNotFoundError):
        return None


@dataclass(frozen=True)
class Plan:
    """One mechanism on its model at the current settings: the mechanism object and its noise in words."""

    name: str
    model: Any
    mechanism: Any
    noise: str

    @property
    def guarantee(self) -> Guarantee:
        """The guarantee one sent draw spends."""
        return self.mechanism.guarantee


def plans(ip: Any, s: Settings) -> dict[str, Plan | str]:
    """Each IP mechanism as a :class:`Plan`, or the reason it cannot run (no model, refused parameters)."""
    out: dict[str, Plan | str] = {}
    for name in IP_MECHANISMS:
        model = next((ip.models[c] for c in MODEL_CHOICES[name] if c in ip.models), None)
        if model is None:
            out[name] = "no model shipped"
            continue
        try:
            if name == "Gauss-Input":
                mech = GaussInput(epsilon=s.epsilon, delta=s.delta, alpha=s.alpha)
                noise = f"σ = {mech.sigma:.4g} on pixels"
            elif name == "Gauss-Output":
                mu, eta = model.lipschitz["l2"], model.rounding["l2"]
                mech = GaussOutput(
                    epsilon=s.epsilon, delta=s.delta, alpha=s.alpha, lipschitz=mu, rounding=eta
                )
                noise = f"σ = {mech.sigma:.4g} on logits (μ₂ = {mu:.3g}, float64 rounding η = {eta:.2g})"
            else:
                mu, eta = model.lipschitz["l1"], model.rounding["l1"]
                mech = LapOutput(epsilon=s.epsilon, alpha=s.alpha, lipschitz=mu, rounding=eta)
                noise = f"b = {mech.scale:.4g} on logits (μ₁ = {mu:.3g}, float64 rounding η = {eta:.2g})"
        except ValueError as exc:
            out[name] = f"refused: {exc}"
            continue
        out[name] = Plan(name, model, mech, noise)
    return out


@dataclass(frozen=True)
class Draw:
    """One sent draw of a mechanism on the current image: clean and noisy scores (logits) and, for
    Gauss-Input, the noisy input (pixels, what its release is computed from)."""

    plan: Plan
    clean: torch.Tensor
    noisy: torch.Tensor
    noisy_input: torch.Tensor | None


def release_key(image: CurrentImage, plan: Plan, s: Settings) -> tuple:
    """The settings a release is drawn at: image, mechanism, model, ε, δ, α."""
    return (image.digest, plan.name, plan.model.name, s.epsilon, s.delta, s.alpha)


def clean_scores(image: CurrentImage, plan: Plan) -> torch.Tensor:
    """The model's scores for ``image`` without noise (memoised; no draw): what the page shows of a
    mechanism before Send — the user's own information, never released."""

    def compute() -> torch.Tensor:
        x = image.tensor[None]
        # Gauss-Input's model sees pixels; the output mechanisms' scores lie within η of C(x)
        return plan.model(x) if plan.name == "Gauss-Input" else plan.model.scores(x)

    return memo(CLEAN_KEY, (image.digest, plan.name, plan.model.name), compute, max_entries=16)


def send(image: CurrentImage, plan: Plan, s: Settings) -> sending.SentRelease | None:
    """Send ``plan``'s release for ``image``: one draw (OS randomness, the exact sampler) and one
    ledger entry, in one step (:func:`privlens.sending.send`)."""

    def draw() -> Draw:
        x = image.tensor[None]
        model, mech = plan.model, plan.mechanism
        clean = clean_scores(image, plan)
        if plan.name == "Gauss-Input":
            noisy_input = torch.as_tensor(mech(x))
            return Draw(plan, clean, model(noisy_input), noisy_input)
        return Draw(plan, clean, torch.as_tensor(mech(clean)), None)

    def describe(d: Draw, number: int) -> tuple[Guarantee, str]:
        g = plan.guarantee
        label = f"{PAGE}: {plan.name} ε={s.epsilon:g}, δ={g.delta:g}, α={s.alpha:g}, release #{number} (sent)"
        return g, label

    return sending.send(page=PAGE, key=release_key(image, plan, s), image=image, draw=draw, describe=describe)


def latest(image: CurrentImage, plan: Plan, s: Settings) -> sending.SentRelease | None:
    """The newest release of ``plan`` sent at these settings for ``image`` (None: none was sent)."""
    return sending.latest(PAGE, release_key(image, plan, s))


def class_distribution(scores: Any) -> list[float]:
    """softmax of one row of scores, as floats (post-processing: costs nothing)."""
    return [float(v) for v in torch.softmax(torch.as_tensor(scores, dtype=torch.float64), -1).reshape(-1)]
