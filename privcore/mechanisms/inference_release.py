"""The inference-privacy family of the mechanism protocol (IP paper, Defs 3–5): image → classifier.

Each mechanism releases a classifier's scores for one image under {(ε, δ), α} inference privacy over
the pixel α-neighbourhood, with its model chosen from the dataset's shipped IP classifiers (the first
of :attr:`Inference.models` present, or the one named). The noise and guarantees come from
:mod:`privcore.mechanisms.inference`; μ and η are recomputed from the loaded weights
(:func:`privcore.models.pipeline.load_ip_models`), never read from a card.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from privcore.errors import CheckpointError, ParameterError
from privcore.mechanisms.protocol import (
    ALPHA,
    DELTA,
    EPSILON,
    Mechanism,
    Options,
    Outlook,
    Release,
    Setting,
    Simulation,
)

__all__ = ["GaussInputRelease", "GaussOutputRelease", "Inference", "InferenceDraw", "LapOutputRelease",
           "load_ip_cached"]


@functools.lru_cache(maxsize=4)
def load_ip_cached(dataset: str, models_dir: str | None) -> Any:
    """The dataset's :class:`~privcore.models.pipeline.IPModels`, loaded and certified once per process
    (CPU)."""
    from privcore.data import get_spec
    from privcore.models.pipeline import load_ip_models

    get_spec(dataset)
    return load_ip_models(dataset, models_dir=models_dir, device="cpu")


@dataclass(frozen=True, kw_only=True)
class Inference(Mechanism):
    """An inference-privacy mechanism on one of the dataset's IP classifiers (``models``: which ones
    can run it, in order of preference)."""

    family: str = "inference"
    page: str = "inference_privacy"
    models: tuple[str, ...] = ()
    #: where the noise goes (Gauss-Input: the pixels) and which (Lap-Output: Laplace), for simulation
    noise_on_input: bool = False
    laplace: bool = False

    #: the norm of the α-neighbourhood on the input (a :class:`~privcore.mechanisms.guarantee.Norm` value)
    input_norm: ClassVar[str] = "l2"
    uses_options: ClassVar[frozenset[str]] = frozenset({"time_limit", "rng"})

    def choose(self, ip: Any, model: str | None = None) -> Any:
        """The IP classifier that runs this mechanism: ``model`` when given (it must be one of
        :attr:`models`), else the first of :attr:`models` shipped; CheckpointError when none is."""
        if model is not None:
            if str(model) not in self.models:
                raise ParameterError(f"model for mechanism {self.name!r} must be one of "
                                     f"{', '.join(self.models)}, got {model!r}")
            if str(model) not in ip.models:
                raise CheckpointError(f"no IP model {model!r} is shipped for {ip.dataset}")
            return ip.models[str(model)]
        for name in self.models:
            if name in ip.models:
                return ip.models[name]
        raise CheckpointError(f"no classifier for {self.name} is shipped for {ip.dataset} (needs one of "
                              f"{', '.join(self.models)}): train one with `python -m privcore train ip "
                              f"--dataset {ip.dataset}`")

    def load(self, *, dataset: str, model: str | None, models_dir: str | None) -> Any:
        ip = load_ip_cached(str(dataset), None if models_dir is None else str(models_dir))
        return _target(ip, str(self.choose(ip, model).name))

    def prepare(self, target: Any, image: Any) -> Any:
        import torch

        return torch.as_tensor(_writable(image), dtype=torch.float32).reshape(1, *target.ip.image_shape)

    def image_shape(self, target: Any) -> tuple[int, int, int]:
        return tuple(int(v) for v in target.ip.image_shape)  # type: ignore[return-value]

    def mechanism(self, target: Any, setting: Setting) -> Any:
        """The calibrated mechanism object of :mod:`privcore.mechanisms.inference` at ``setting``."""
        raise NotImplementedError

    def noise_text(self, mech: Any, target: Any) -> str:
        """The noise in words."""
        raise NotImplementedError

    def spent(self, setting: Setting) -> Any:
        from privcore.mechanisms.guarantee import Guarantee, Norm, Space

        return Guarantee(epsilon=setting.epsilon, delta=setting.delta, radius=setting.alpha,
                         space=Space.INPUT, norm=Norm(self.input_norm), mechanism=self.name)

    def outlook(self, target: Any, setting: Setting, *, time_limit: float | None = 60.0,
                certification: Any = None) -> Outlook:
        mech = self.mechanism(target, setting)
        scale = float(getattr(mech, "sigma", getattr(mech, "scale", float("nan"))))
        plan = mech.noise_plan(len(target.ip.class_names))
        return Outlook(mechanism=self.name, guarantee=self._guarantee(mech), noise_scale=scale,
                       noise_scale_effective=float(plan.effective), noise=self.noise_text(mech, target),
                       release_probability=1.0, public=self._public(mech, target))

    def _guarantee(self, mech: Any) -> Any:
        from dataclasses import replace

        return replace(mech.guarantee, mechanism=self.name)

    def _public(self, mech: Any, target: Any) -> dict[str, Any]:
        public: dict[str, Any] = {"alpha": float(mech.alpha), "sensitivity": float(mech.sensitivity)}
        lipschitz = getattr(mech, "lipschitz", None)
        if lipschitz is not None:
            public |= {"lipschitz": float(lipschitz), "rounding": float(mech.rounding)}
        return public

    def release(self, target: Any, x: Any, setting: Setting, options: Options | None = None) -> Release:
        import torch

        opts = Options() if options is None else options
        self.check_options(opts)
        mech = self.mechanism(target, setting)  # every parameter checked before anything is drawn
        scores, noisy_input = self.draw(target, mech, x, opts.rng)
        value = tuple(float(v) for v in np.asarray(scores, dtype=np.float64).ravel())
        plan = mech.noise_plan(len(value))
        model = target.model
        block = {"dataset": str(target.ip.dataset), "classifier": str(model.name),
                 "digest": str(model.card["weights"]["sha256"])}
        return Release(mechanism=self.name, released=True, value=value,
                       prediction=int(torch.as_tensor(scores).reshape(-1).argmax()),
                       guarantee=self._guarantee(mech), epsilon=setting.epsilon, delta=setting.delta,
                       noise_scale=float(getattr(mech, "sigma", getattr(mech, "scale", 0.0))),
                       noise_scale_effective=float(plan.effective), public=self._public(mech, target),
                       model=block, mechanism_result=InferenceDraw(mechanism=mech, noisy_input=noisy_input))

    def clean_scores(self, target: Any, x: Any) -> Any:
        """The classifier's scores for ``x`` without noise, as the mechanism computes them (the user's own
        information, never released): C(x) for input noise, the certified float64 scores (within η of
        C(x)) for output noise."""
        return target.model.scores(x)

    def draw(self, target: Any, mech: Any, x: Any, rng: Any) -> tuple[Any, Any]:
        """One draw: the noisy scores of ``x`` and the noisy input they were computed from (None for
        output noise)."""
        return self.scores(target, mech, x, rng), None

    def scores(self, target: Any, mech: Any, x: Any, rng: Any) -> Any:
        """The noisy scores of one image ``x`` (1, C, H, W): one draw."""
        raise NotImplementedError

    def prepare_batch(self, target: Any, images: Any) -> Any:
        """A batch of model inputs (n, C, H, W) in [0, 1], as the mechanism takes them."""
        import torch

        return torch.as_tensor(_writable(images), dtype=torch.float32).reshape(-1, *target.ip.image_shape)

    def simulate(self, target: Any, inputs: Any, setting: Setting, rng: Any, *,
                 certificates: Any = None) -> Simulation:
        import torch

        mech = self.mechanism(target, setting)
        x = self.prepare_batch(target, inputs)
        eff = float(mech.noise_plan(int(np.prod(x.shape[1:])) if self.noise_on_input else
                                    len(target.ip.class_names)).effective)
        if self.noise_on_input:
            noisy = x.double().numpy() + rng.normal(0.0, eff, size=tuple(x.shape))
            scores = target.model(torch.as_tensor(noisy, dtype=torch.float32)).double().numpy()
        else:
            clean = _clean_scores(target.model, inputs, x)
            noise = (rng.laplace(0.0, eff, size=clean.shape) if self.laplace
                     else rng.normal(0.0, eff, size=clean.shape))
            scores = clean + noise
        return Simulation(predicted=np.asarray(scores).argmax(-1), released=np.ones(len(scores), bool),
                          noise_scale_effective=eff)


def _writable(images: Any) -> Any:
    """``images``, copied when it is a read-only numpy array (torch takes no read-only memory)."""
    return images.copy() if isinstance(images, np.ndarray) and not images.flags.writeable else images


#: per model (by identity): the last read-only input array scored and its noise-free scores
_CLEAN: dict[int, tuple[Any, Any, Any]] = {}


def _clean_scores(model: Any, inputs: Any, batch: Any) -> Any:
    """``model.scores(batch)`` as numpy, for the output-noise mechanisms' simulation. The scores of a
    read-only ``inputs`` array that owns its data (the evaluation split's:
    :func:`~privcore.mechanisms.utility.evaluation_inputs`) are kept for the next draw and the next ε:
    the noise-free part of every reading of one model."""
    frozen = isinstance(inputs, np.ndarray) and not inputs.flags.writeable and inputs.flags.owndata
    hit = _CLEAN.get(id(model)) if frozen else None
    if hit is not None and hit[0] is model and hit[1] is inputs:
        return hit[2]
    clean = model.scores(batch).numpy()
    if frozen:
        clean.setflags(write=False)
        _CLEAN[id(model)] = (model, inputs, clean)
    return clean


@dataclass(frozen=True)
class InferenceDraw:
    """An inference-privacy release's private part: the calibrated ``mechanism`` and, for input noise,
    the ``noisy_input`` it classified (the owner's to look at; :meth:`Release.document` holds neither)."""

    mechanism: Any
    noisy_input: Any = None


@dataclass(frozen=True)
class _Target:
    """An IP mechanism's model: the dataset's classifiers and the one that runs the mechanism."""

    ip: Any
    model: Any


@functools.lru_cache(maxsize=32)
def _target(ip: Any, model: str) -> _Target:
    """One target object per loaded classifier set and model, so that memos keyed on the loaded model
    (live accuracy, its evaluation inputs) hit across calls."""
    return _Target(ip=ip, model=ip.models[model])


def _lipschitz(target: Any, p: str, name: str) -> tuple[float, float]:
    model = target.model
    if model.lipschitz is None or model.rounding is None:
        raise CheckpointError(f"{model.name} has no certified Lipschitz constant, which {name} needs")
    return float(model.lipschitz[p]), float(model.rounding[p])


@dataclass(frozen=True, kw_only=True)
class GaussInputRelease(Inference):
    """Gauss-Input: C(x + N(0, σ²I)), σ calibrated to α in ℓ2 on the pixels (IP paper Def. 5)."""

    name: str = "Gauss-Input"
    label: str = "Gauss-Input"
    parameters: tuple = (EPSILON, DELTA, ALPHA)
    needs: str = "a classifier fine-tuned on Gaussian input noise"
    description: str = "C(x + N(0, σ²I)) with σ calibrated to α in ℓ2 on the input"
    source: str = "IP paper, Def. 5"
    guarantee: str = "{(ε, δ), α} in ℓ2"
    models: tuple[str, ...] = ("ip-cnn-gauss-input", "ip-cnn", "ip-lipschitz-l2")
    noise_on_input: bool = True

    def mechanism(self, target: Any, setting: Setting) -> Any:
        from privcore.mechanisms.inference import GaussInput

        return GaussInput(epsilon=setting.epsilon, delta=setting.delta, alpha=setting.alpha)

    def noise_text(self, mech: Any, target: Any) -> str:
        return f"σ = {mech.sigma:.4g} on pixels"

    def clean_scores(self, target: Any, x: Any) -> Any:
        return target.model(x)

    def draw(self, target: Any, mech: Any, x: Any, rng: Any) -> tuple[Any, Any]:
        import torch

        noisy = torch.as_tensor(mech(x, rng=rng))
        return target.model(noisy), noisy

    def scores(self, target: Any, mech: Any, x: Any, rng: Any) -> Any:
        return self.draw(target, mech, x, rng)[0]


@dataclass(frozen=True, kw_only=True)
class GaussOutputRelease(Inference):
    """Gauss-Output: C(x) + N(0, σ²I), σ calibrated to μ₂·α + 2η (IP paper Def. 4)."""

    name: str = "Gauss-Output"
    label: str = "Gauss-Output"
    parameters: tuple = (EPSILON, DELTA, ALPHA)
    needs: str = "a classifier with a certified ℓ2→ℓ2 Lipschitz constant ≤ 1"
    description: str = "C(x) + N(0, σ²I) with σ calibrated to μ₂·α"
    source: str = "IP paper, Def. 4"
    guarantee: str = "{(ε, δ), α} in ℓ2"
    models: tuple[str, ...] = ("ip-lipschitz-l2",)

    def mechanism(self, target: Any, setting: Setting) -> Any:
        from privcore.mechanisms.inference import GaussOutput

        mu, eta = _lipschitz(target, "l2", self.name)
        return GaussOutput(epsilon=setting.epsilon, delta=setting.delta, alpha=setting.alpha, lipschitz=mu,
                           rounding=eta)

    def noise_text(self, mech: Any, target: Any) -> str:
        return (f"σ = {mech.sigma:.4g} on logits (μ₂ = {mech.lipschitz:.3g}, float64 rounding "
                f"η = {mech.rounding:.2g})")

    def scores(self, target: Any, mech: Any, x: Any, rng: Any) -> Any:
        return mech(target.model.scores(x), rng=rng)


@dataclass(frozen=True, kw_only=True)
class LapOutputRelease(Inference):
    """Lap-Output: C(x) + Lap((μ₁·α + 2η)/ε) (IP paper Def. 3); no δ."""

    name: str = "Lap-Output"
    label: str = "Lap-Output"
    parameters: tuple = (EPSILON, ALPHA)
    needs: str = "a classifier with a certified ℓ1→ℓ1 Lipschitz constant ≤ 1"
    description: str = "C(x) + Lap(μ₁·α/ε)"
    source: str = "IP paper, Def. 3"
    guarantee: str = "{(ε, 0), α} in ℓ1"
    models: tuple[str, ...] = ("ip-lipschitz-l1",)
    laplace: bool = True
    input_norm: ClassVar[str] = "l1"

    def mechanism(self, target: Any, setting: Setting) -> Any:
        from privcore.mechanisms.inference import LapOutput

        mu, eta = _lipschitz(target, "l1", self.name)
        return LapOutput(epsilon=setting.epsilon, alpha=setting.alpha, lipschitz=mu, rounding=eta)

    def noise_text(self, mech: Any, target: Any) -> str:
        return (f"b = {mech.scale:.4g} on logits (μ₁ = {mech.lipschitz:.3g}, float64 rounding "
                f"η = {mech.rounding:.2g})")

    def scores(self, target: Any, mech: Any, x: Any, rng: Any) -> Any:
        return mech(target.model.scores(x), rng=rng)
