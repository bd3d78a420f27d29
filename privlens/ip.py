"""Inference-privacy plumbing of the Inference-privacy page (the IP paper's Gauss-Input, Gauss-Output,
Lap-Output; Tian et al., Defs 3–5), mirroring :mod:`privlens.ptr`.

The IP classifiers are loaded once per process. For the sidebar's ε, δ and α, :func:`plans` builds
each mechanism on its model (or says why not); :func:`draw` makes one draw of noise per (image,
mechanism, model, ε, δ, α, resample counter) and memoises it, so a rerun never draws again. A draw
is a preview: it stays on the device and costs nothing; :func:`send` charges the session's ledger,
once per draw. No maths here: noise and guarantees come from :mod:`privcore.mechanisms`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st
import torch

from privcore.errors import CheckpointError, DatasetUnavailableError
from privcore.mechanisms import GaussInput, GaussOutput, Guarantee, LapOutput
from privlens import pipelines, ui
from privlens.image import CurrentImage
from privlens.memo import memo
from privlens.session import IP_MECHANISMS, Settings

NONCE_KEY = "privlens_ip_nonce"
DRAWS_KEY = "privlens_ip_draws"
SENT_KEY = "privlens_ip_sent"

#: Which shipped classifier runs each mechanism (first one present).
MODEL_CHOICES = {
    "Gauss-Input": ("ip-cnn-gauss-input", "ip-cnn", "ip-lipschitz-l2"),
    "Gauss-Output": ("ip-lipschitz-l2",),
    "Lap-Output": ("ip-lipschitz-l1",),
}


@st.cache_resource(show_spinner="Loading the IP classifiers (once per server process)…", max_entries=4)
def _ip_models(name: str, directory: str) -> Any:
    from privcore.pipeline import load_ip_models

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
    """One draw of a mechanism on the current image: clean and noisy scores (logits), the noisy input
    for Gauss-Input (pixels, what its release is computed from), and its ledger label."""

    key: tuple
    plan: Plan
    clean: torch.Tensor
    noisy: torch.Tensor
    noisy_input: torch.Tensor | None
    label: str


def nonce() -> int:
    """The page's resample counter."""
    return int(st.session_state.get(NONCE_KEY, 0))


def resample() -> None:
    """Fresh noise for every mechanism on the next render."""
    st.session_state[NONCE_KEY] = nonce() + 1


def draw(image: CurrentImage, plan: Plan, s: Settings) -> Draw:
    """The draw of ``plan`` for ``image`` at the settings — made once (OS randomness), then memoised."""
    n = nonce()
    key = (image.digest, plan.name, plan.model.name, s.epsilon, s.delta, s.alpha, n)

    def compute() -> Draw:
        x = image.tensor[None]
        model, mech = plan.model, plan.mechanism
        if plan.name == "Gauss-Input":
            clean = model(x)
            noisy_input = torch.as_tensor(mech(x))
            noisy = model(noisy_input)
        else:
            clean = model.scores(x)  # within η of C(x), which the mechanism's η accounts for
            noisy_input, noisy = None, torch.as_tensor(mech(clean))
        g = plan.guarantee
        label = f"IP page: {plan.name} ε={s.epsilon:g}, δ={g.delta:g}, α={s.alpha:g}, draw {n + 1}"
        return Draw(key, plan, clean, noisy, noisy_input, label)

    return memo(DRAWS_KEY, key, compute, max_entries=96)


def sent(d: Draw) -> bool:
    """Whether this draw has left the device in this session."""
    return d.key in st.session_state.setdefault(SENT_KEY, set())


def send(image: CurrentImage, d: Draw) -> bool:
    """Charge the session's ledger for ``d`` leaving the device, once per draw; True when charged now."""
    done = st.session_state.setdefault(SENT_KEY, set())
    if d.key in done:
        return False
    done.add(d.key)
    ui.record_release(image=image, guarantee=d.plan.guarantee, label=f"{d.label} (sent)")
    return True


def class_distribution(scores: Any) -> list[float]:
    """softmax of one row of scores, as floats (post-processing: costs nothing)."""
    return [float(v) for v in torch.softmax(torch.as_tensor(scores, dtype=torch.float64), -1).reshape(-1)]
