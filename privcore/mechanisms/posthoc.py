"""The posthoc family of the mechanism protocol: image → embedding z → obfuscator f → f(z) + noise.

What the posthoc mechanisms share (:class:`Posthoc`): the pipeline they release with, loaded once per
process; the image's embedding; R (the card's, checked against the range of a user's R); the model
block of the release document; and the release classifier's prediction of a noisy vector, told its
noise scale. :class:`GlobalLaplace` is the certified global mechanism, f(clip z) + Lap(G·R/ε)
(docs/DESIGN.md, "Beyond the papers"; the maths in :mod:`privcore.mechanisms.global_mechanism`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from privcore.errors import CheckpointError, ParameterError
from privcore.mechanisms.protocol import (
    EPSILON,
    RADIUS,
    Mechanism,
    Options,
    Outlook,
    Release,
    Setting,
    Simulation,
)

__all__ = ["GlobalLaplace", "Posthoc", "load_pipeline_cached", "model_block"]


@functools.lru_cache(maxsize=8)
def load_pipeline_cached(dataset: str, model: str, models_dir: str | None) -> Any:
    """The :class:`~privcore.models.pipeline.Pipeline` of ``dataset``/``model``, loaded once per process
    (CPU)."""
    from privcore.data import get_spec
    from privcore.models.pipeline import load_pipeline

    get_spec(dataset)  # unknown dataset: ParameterError naming the known ones
    return load_pipeline(dataset, model, models_dir=models_dir, device="cpu")


def model_block(pipe: Any) -> dict[str, str]:
    """The release document's model block: dataset, obfuscator and its weights' digest."""
    return {"dataset": str(pipe.dataset), "obfuscator": str(pipe.obfuscator_name),
            "digest": str(pipe.cards["obfuscator"]["weights"]["sha256"])}


def embedding(pipe: Any, z: Any) -> np.ndarray:
    """z as a float64 vector of the pipeline's latent dimension (ParameterError otherwise)."""
    from privcore.validation import check_finite_array

    zz = check_finite_array("z", z).reshape(-1)
    if zz.shape != (int(pipe.latent_dim),):
        raise ParameterError(f"z must be one image's embedding ({pipe.latent_dim} numbers), got {zz.size}")
    return zz


def out_dim(pipe: Any) -> int:
    """The number of coordinates f releases (the obfuscator's last Linear layer's outputs)."""
    return int(pipe.obfuscator[-1].out_features)


def clipped_outputs(pipe: Any, box: Any, z: np.ndarray) -> np.ndarray:
    """f(clip z) for a batch of embeddings (n, d), in float64 (evaluation only: a release evaluates f
    through the certified float64 evaluator)."""
    from privcore.lipschitz.network import as_network

    return as_network(pipe.obfuscator).forward(np.clip(z, box.lower, box.upper))


def classes(pipe: Any, values: np.ndarray, told: float) -> np.ndarray:
    """The release classifier's classes for a batch of released vectors told the Laplace scale ``told``."""
    import torch

    logits = pipe.classify(torch.as_tensor(values, dtype=torch.float32), float(told))
    return logits.argmax(-1).cpu().numpy()


def predict(pipe: Any, value: tuple[float, ...], noise_scale: float) -> int:
    """The release classifier's class for a released vector, told the noise scale it carries (a
    noise-aware classifier: :func:`~privcore.nets.models.logits_one`, the same
    logits as ``pipe.classify``)."""
    import torch

    from privcore.nets.models import NoiseAwareClassifier, logits_one

    with torch.no_grad():
        if isinstance(getattr(pipe, "classifier", None), NoiseAwareClassifier):
            logits = logits_one(pipe.classifier, value, float(noise_scale))
        else:
            logits = pipe.classify(torch.tensor([value], dtype=torch.float32), float(noise_scale))
    return int(logits[0].numpy().argmax() if logits.device.type == "cpu" else logits.argmax(-1)[0])


@dataclass(frozen=True, kw_only=True)
class Posthoc(Mechanism):
    """A posthoc mechanism: releases f(z) for the embedding z = g(image) of a loaded pipeline."""

    family: str = "posthoc"
    page: str = "release"

    def load(self, *, dataset: str, model: str | None, models_dir: str | None) -> Any:
        from privcore.defaults import default_model

        name = default_model(str(dataset)) if model is None else str(model)
        return load_pipeline_cached(str(dataset), name, None if models_dir is None else str(models_dir))

    def prepare(self, target: Any, image: Any) -> np.ndarray:
        import torch

        return target.embed(torch.as_tensor(image, dtype=torch.float32)).double().cpu().numpy().reshape(-1)

    def image_shape(self, target: Any) -> tuple[int, int, int]:
        return tuple(int(v) for v in target.image_shape)  # type: ignore[return-value]

    @staticmethod
    def radius(pipe: Any, setting: Setting) -> float:
        """R of the setting, else the card's (ParameterError when the card's lies outside R's range)."""
        from privcore.validation import check_range

        if setting.radius is not None:
            return float(setting.radius)
        try:
            return check_range("radius", pipe.radius, RADIUS.bounds)
        except ParameterError as exc:
            raise CheckpointError(f"{pipe.dataset}/{pipe.obfuscator_name}'s card: {exc}") from None


@dataclass(frozen=True, kw_only=True)
class GlobalLaplace(Posthoc):
    """f(clip z) + Lap(G·R/ε) over the card's public box, G ≥ sup ‖J_f‖_{∞→1} certified by this
    process: (ε, 0, R), never ⊥, nothing certified per image."""

    name: str = "Global"
    label: str = "Global (certified)"
    parameters: tuple = (EPSILON, RADIUS)
    needs: str = ("the obfuscator and its card's public clipping box; G over the box, certified by this "
                  "process")
    description: str = "f(clip z) + Lap(G·R/ε): one certified constant for the whole box, never ⊥, no δ"
    source: str = 'docs/DESIGN.md, "Beyond the papers"'
    guarantee: str = "(ε, 0, R)"

    uses_options: ClassVar[frozenset[str]] = frozenset({"time_limit", "rng"})

    def constant(self, pipe: Any, *, time_limit: float | None = 60.0) -> Any:
        """G over the card's box, certified by this process (memoised per model and process)."""
        from privcore.mechanisms.global_mechanism import card_global_constant

        try:
            return card_global_constant(pipe.obfuscator, pipe.cards["obfuscator"],
                                        time_limit=60.0 if time_limit is None else time_limit)
        except ValueError as exc:
            raise CheckpointError(f"{pipe.dataset}/{pipe.obfuscator_name}: {exc}") from exc

    def spent(self, setting: Setting) -> Any:
        from dataclasses import replace

        from privcore.mechanisms.global_mechanism import global_scales

        g = global_scales(epsilon=setting.epsilon, radius=setting.radius, global_lipschitz=1.0).guarantee
        return replace(g, calibration="")  # G does not enter (ε, 0, R)

    def outlook(self, target: Any, setting: Setting, *, time_limit: float | None = 60.0,
                certification: Any = None) -> Outlook:
        from privcore.mechanisms.global_mechanism import global_scales

        constant = self.constant(target, time_limit=time_limit)
        r = self.radius(target, setting)
        scales = global_scales(epsilon=setting.epsilon, radius=r, global_lipschitz=constant.value,
                               numel=out_dim(target), how=constant.how.value)
        return Outlook(mechanism=self.name, guarantee=scales.guarantee, noise_scale=scales.noise_scale,
                       noise_scale_effective=scales.noise_scale_effective,
                       noise=f"Laplace b = G·R/ε = {scales.noise_scale:.4g} per coordinate "
                             f"(G = {constant.value:.4g}, {constant.how.value}, over the public box)",
                       release_probability=1.0,
                       public={"radius": r, "global_lipschitz": constant.value,
                               "global_lipschitz_how": constant.how.value,
                               "clip_box": constant.box.to_dict()})

    def simulate(self, target: Any, inputs: Any, setting: Setting, rng: Any, *,
                 certificates: Any = None) -> Simulation:
        sim = self.simulate_release(target, inputs, setting, rng)
        return replace(sim, predicted=classes(target, sim.values, sim.told_scale))

    def simulate_release(self, target: Any, inputs: Any, setting: Setting, rng: Any) -> Simulation:
        look = self.outlook(target, setting)
        constant = self.constant(target)
        out = clipped_outputs(target, constant.box, np.asarray(inputs, dtype=np.float64))
        values = out + rng.laplace(0.0, look.noise_scale_effective, size=out.shape)
        return Simulation(predicted=None, released=np.ones(len(out), bool), values=values,
                          noise_scale_effective=look.noise_scale_effective, told_scale=look.noise_scale)

    def release(self, target: Any, x: Any, setting: Setting, options: Options | None = None) -> Release:
        from privcore.mechanisms.global_mechanism import card_plan

        opts = Options() if options is None else options
        self.check_options(opts)
        z = embedding(target, x)
        r = self.radius(target, setting)
        plan = card_plan(target.obfuscator, target.cards["obfuscator"], epsilon=setting.epsilon, radius=r,
                         where=f"{target.dataset}/{target.obfuscator_name}", mechanism=self.name,
                         time_limit=60.0 if opts.time_limit is None else opts.time_limit)
        out = plan.release(z, opts.rng)
        value = tuple(out.value.ravel().tolist())
        box = plan.constant.box
        public = {"radius": r, "global_lipschitz": out.global_lipschitz, "global_lipschitz_how": out.how,
                  "clip_box": {"lower": box.lower.tolist(), "upper": box.upper.tolist()},
                  "sensitivity": out.sensitivity}
        return Release(mechanism=self.name, released=True, value=value,
                       prediction=functools.partial(predict, target, value, out.noise_scale),
                       guarantee=out.guarantee, epsilon=setting.epsilon, delta=0.0,
                       noise_scale=float(out.noise_scale),
                       noise_scale_effective=float(out.noise_scale_effective),
                       public=public, model=model_block(target), mechanism_result=out)
