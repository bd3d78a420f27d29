"""Local-DP baselines of the posthoc paper's Table 2: LDP-Image and LDP-Embedding (pure ε, all pairs).

Both are the Laplace mechanism (Dwork & Roth 2014, Thm 3.6) with the ℓ1 sensitivity of a record
whose every value lies in a known interval, so the guarantee covers *every* pair of inputs
(ε-local DP; a stronger and different notion than (ε, δ, R)-neighbourhood privacy, which is why
the paper reports it only as a baseline).

* LDP-Image: clip each pixel to [0, 1]; two images of d values differ by at most d in ℓ1, so the
  scale is d/ε.
* LDP-Embedding: clip each coordinate to [−B, B]; two k-dimensional embeddings differ by at most
  2Bk in ℓ1, so the scale is 2Bk/ε.

Clipping happens *before* the noise, so the sensitivity bound holds whatever the input was.

Both are registered mechanisms (:mod:`privcore.mechanisms.registry`), each releasing what Table 2
classifies (everything after the noise is post-processing, so ε-LDP holds for what is released):

* ``LDP-Image`` (:class:`LDPImageRelease`, image → classifier): the scores of the dataset's standard
  pixel classifier ``ip-cnn`` for the noisy image clipped back to [0, 1]; the noisy image itself
  stays with the owner.
* ``LDP-Embedding`` (:class:`LDPEmbeddingRelease`, image → embedding): f(clip(z) + Lap(2Bk/ε)), the
  noisy embedding passed through the public obfuscator f, so that the value lies where every posthoc
  release lies and the pipeline's classifier reads it (as Table 2's "obfuscator and classifier").
  B is the 0.99 quantile of |z| over the first 5000 training embeddings, computed by this process
  from the training split (public; never from the image released).
"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from privcore.mechanisms._arrays import as_float64
from privcore.mechanisms.guarantee import ANY_METRIC, Guarantee
from privcore.mechanisms.inference_release import Inference, InferenceDraw
from privcore.mechanisms.posthoc import Posthoc, classes, embedding, model_block, predict
from privcore.mechanisms.protocol import EPSILON, Options, Outlook, Release, Setting, Simulation
from privcore.mechanisms.sampling import (
    MAX_NUMEL,
    NoisePlan,
    RngLike,
    add_noise,
    check_sampler_epsilon,
    plan_laplace,
)
from privcore.validation import check_int, check_positive

__all__ = ["LDPEmbedding", "LDPEmbeddingRelease", "LDPImage", "LDPImageRelease", "embedding_bound"]


def _check_count(name: str, value: int) -> int:
    """An integer in [1, MAX_NUMEL]: no record can hold more values than the samplers cover."""
    v = check_int(name, value, minimum=1)
    if v > MAX_NUMEL:
        raise ValueError(f"{name} must be in [1, 2^28 = {MAX_NUMEL}], got {value!r}")
    return v


def _finite_scale(scale: float, what: str) -> float:
    if not math.isfinite(scale):
        raise ValueError(f"the Laplace scale {what} overflows float64; nothing released")
    return scale


def _ldp_guarantee(epsilon: float, mechanism: str) -> Guarantee:
    return Guarantee(
        epsilon=epsilon,
        delta=0.0,
        radius=math.inf,
        metric=ANY_METRIC,
        mechanism=mechanism,
        definition="ε-local differential privacy",
        calibration="Laplace",
    )


@dataclass(frozen=True, kw_only=True)
class LDPImage:
    """LDP-Image (posthoc paper, Table 2): clip pixels to [0, 1], add i.i.d. Lap(d/ε), d = values per image.

    Input: a batch (N, ...) whose first axis indexes images (pass one image as ``x[None]``).
    ``values_per_image`` is optional; when given, the batch layout is checked against it and
    :attr:`scale` is available before any call. A 1-D input is accepted only with
    ``values_per_image`` equal to its length (one flattened image), so a single H×W image can never
    be mistaken for H images of W pixels (which would under-noise it H-fold).
    """

    epsilon: float
    values_per_image: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_sampler_epsilon(self.epsilon))
        if self.values_per_image is not None:
            object.__setattr__(
                self, "values_per_image", _check_count("values_per_image", self.values_per_image)
            )

    def scale_for(self, values_per_image: int) -> float:
        """Laplace scale d/ε for images of d pixel values."""
        return _check_count("values_per_image", values_per_image) / self.epsilon

    @property
    def scale(self) -> float:
        """d/ε; needs ``values_per_image`` (else use :meth:`scale_for`)."""
        if self.values_per_image is None:
            raise ValueError("LDPImage.scale needs values_per_image; use scale_for(d) or set it")
        return self.scale_for(self.values_per_image)

    @property
    def guarantee(self) -> Guarantee:
        """ε-LDP: every pair of images."""
        return _ldp_guarantee(self.epsilon, "LDP-Image")

    def _values_per_image(self, shape: tuple[int, ...]) -> int:
        if len(shape) >= 2:
            d = int(np.prod(shape[1:]))
        elif len(shape) == 1 and self.values_per_image is not None:
            d = shape[0]
        else:
            raise ValueError(
                f"x must be a batch of images with shape (N, ...), got shape {shape}; "
                "pass one image as x[None] (or a flat image with values_per_image set)"
            )
        if d == 0:
            raise ValueError(f"x must hold at least one value per image, got shape {shape}")
        if self.values_per_image is not None and d != self.values_per_image:
            raise ValueError(
                f"x has {d} values per image but values_per_image is {self.values_per_image} (shape {shape})"
            )
        return d

    def noise_plan(self, values_per_image: int, numel: int) -> NoisePlan:
        """What the exact sampler draws (scale_eff ≥ d/ε) for ``numel`` values in all."""
        return plan_laplace(sensitivity=float(values_per_image), epsilon=self.epsilon, numel=numel)

    def __call__(self, x: Any, *, rng: RngLike = None) -> Any:
        """Clip to [0, 1] and add Lap(d/ε) to every value; same type, shape and dtype."""
        arr, restore = as_float64("x", x)
        d = self._values_per_image(arr.shape)
        clipped = np.clip(arr, 0.0, 1.0)
        return restore(add_noise(clipped, self.noise_plan(d, max(1, arr.size)), rng))

    apply = __call__


@dataclass(frozen=True, kw_only=True)
class LDPEmbedding:
    """LDP-Embedding (posthoc paper, Table 2): clip to [−B, B]^k, add i.i.d. Lap(2Bk/ε).

    Input: one embedding (k,) or a batch (N, k).
    """

    epsilon: float
    bound: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_sampler_epsilon(self.epsilon))
        object.__setattr__(self, "bound", check_positive("bound", self.bound))

    def scale_for(self, dim: int) -> float:
        """Laplace scale 2Bk/ε for k-dimensional embeddings."""
        k = _check_count("dim", dim)
        return _finite_scale(
            2.0 * self.bound * k / self.epsilon, f"2·bound·dim/epsilon (bound={self.bound!r}, dim={k})"
        )

    @property
    def guarantee(self) -> Guarantee:
        """ε-LDP: every pair of embeddings."""
        return _ldp_guarantee(self.epsilon, "LDP-Embedding")

    def noise_plan(self, dim: int, numel: int) -> NoisePlan:
        """What the exact sampler draws (scale_eff ≥ 2Bk/ε) for ``numel`` values in all."""
        k = _check_count("dim", dim)
        sensitivity = _finite_scale(
            math.nextafter(2.0 * self.bound * k, math.inf),
            f"sensitivity 2·bound·dim (bound={self.bound!r}, dim={k})",
        )
        return plan_laplace(sensitivity=sensitivity, epsilon=self.epsilon, numel=numel)

    def __call__(self, z: Any, *, rng: RngLike = None) -> Any:
        """Clip to [−B, B] and add Lap(2Bk/ε) to every coordinate; same type, shape and dtype."""
        arr, restore = as_float64("z", z)
        if arr.ndim not in (1, 2) or arr.shape[-1] == 0:
            raise ValueError(f"z must have shape (k,) or (N, k) with k ≥ 1, got {arr.shape}")
        clipped = np.clip(arr, -self.bound, self.bound)
        return restore(add_noise(clipped, self.noise_plan(arr.shape[-1], max(1, arr.size)), rng))

    apply = __call__


# ---------------------------------------------------------------------- the registered mechanisms

#: B is this quantile of |z| over training embeddings (posthoc paper, Table 2)
BOUND_QUANTILE = 0.99
#: training images B is computed from (the first ones of the training split)
BOUND_IMAGES = 5000
_BOUNDS: dict[tuple[str, str], tuple[float, int]] = {}
_BOUNDS_LOCK = threading.Lock()


def embedding_bound(pipe: Any, *, batch_size: int = 512) -> tuple[float, int]:
    """(B, n): B the :data:`BOUND_QUANTILE` quantile of |z| over the embeddings of the first n =
    min(:data:`BOUND_IMAGES`, size) training images of ``pipe``'s dataset, computed by this process
    (memoised per dataset and embedder weights). Public: it never depends on an image released."""
    import torch

    from privcore.data import load_dataset

    key = (str(pipe.dataset), str(pipe.cards["embedder"]["weights"]["sha256"]))
    with _BOUNDS_LOCK:
        if key in _BOUNDS:
            return _BOUNDS[key]
    x = load_dataset(str(pipe.dataset)).x_train
    x = x[: min(BOUND_IMAGES, x.shape[0])]
    with torch.no_grad():
        z = np.concatenate([pipe.embed(torch.as_tensor(x[s:s + batch_size])).double().cpu().numpy()
                            for s in range(0, x.shape[0], batch_size)])
    out = (check_positive("bound", float(np.quantile(np.abs(z), BOUND_QUANTILE))), int(x.shape[0]))
    with _BOUNDS_LOCK:
        _BOUNDS[key] = out
    return out


def _spent(epsilon: float, name: str) -> Guarantee:
    return replace(_ldp_guarantee(epsilon, name), calibration="")


LDP_GUARANTEE = "ε-LDP (every pair of inputs)"


@dataclass(frozen=True, kw_only=True)
class LDPImageRelease(Inference):
    """LDP-Image in the mechanism protocol: the ``ip-cnn`` scores of clip(clip(x) + Lap(d/ε), 0, 1);
    ε-local DP over every pair of images (module docstring), never ⊥, no δ."""

    name: str = "LDP-Image"
    label: str = "LDP-Image (local DP)"
    parameters: tuple = (EPSILON,)
    needs: str = "the dataset's standard pixel classifier ip-cnn"
    description: str = ("C(clip(clip(x) + Lap(d/ε), 0, 1)), d the pixel values, C the pixel classifier: "
                        "every pair of images, never ⊥")
    source: str = "posthoc paper, Table 2"
    guarantee: str = LDP_GUARANTEE
    models: tuple[str, ...] = ("ip-cnn",)
    noise_on_input: bool = True
    laplace: bool = True

    uses_options: ClassVar[frozenset[str]] = frozenset({"time_limit", "rng"})

    def mechanism(self, target: Any, setting: Setting) -> LDPImage:
        return LDPImage(epsilon=setting.epsilon, values_per_image=int(np.prod(target.ip.image_shape)))

    def spent(self, setting: Setting) -> Guarantee:
        return _spent(setting.epsilon, self.name)

    def _stated(self, mech: LDPImage, target: Any) -> tuple[Guarantee, NoisePlan, dict[str, Any]]:
        d = int(mech.values_per_image)  # type: ignore[arg-type]
        plan = mech.noise_plan(d, d)
        g = replace(mech.guarantee, mechanism=self.name,
                    calibration=f"Laplace b = d/ε = {mech.scale:.6g} per pixel value at ℓ1 sensitivity "
                                f"d = {d} (pixels clipped to [0, 1])")
        return g, plan, {"values_per_image": d, "classifier": str(target.model.name)}

    def outlook(self, target: Any, setting: Setting, *, time_limit: float | None = 60.0,
                certification: Any = None) -> Outlook:
        mech = self.mechanism(target, setting)
        g, plan, public = self._stated(mech, target)
        return Outlook(mechanism=self.name, guarantee=g, noise_scale=mech.scale,
                       noise_scale_effective=float(plan.effective),
                       noise=f"Laplace b = d/ε = {mech.scale:.4g} per pixel (d = "
                             f"{public['values_per_image']}; the noisy image is classified by "
                             f"{public['classifier']})",
                       release_probability=1.0, public=public)

    def clean_scores(self, target: Any, x: Any) -> Any:
        return target.model(x)

    def release(self, target: Any, x: Any, setting: Setting, options: Options | None = None) -> Release:
        import torch

        opts = Options() if options is None else options
        self.check_options(opts)
        mech = self.mechanism(target, setting)
        g, plan, public = self._stated(mech, target)
        pixels = torch.as_tensor(x, dtype=torch.float64).reshape(1, -1).numpy()
        noisy = np.clip(mech(pixels, rng=opts.rng), 0.0, 1.0)  # clipping after the noise: post-processing
        noisy_t = torch.as_tensor(noisy, dtype=torch.float32).reshape(1, *target.ip.image_shape)
        scores = target.model(noisy_t)
        value = tuple(float(v) for v in np.asarray(scores, dtype=np.float64).ravel())
        model = target.model
        return Release(mechanism=self.name, released=True, value=value,
                       prediction=int(np.argmax(value)), guarantee=g, epsilon=setting.epsilon, delta=0.0,
                       noise_scale=mech.scale, noise_scale_effective=float(plan.effective), public=public,
                       model={"dataset": str(target.ip.dataset), "classifier": str(model.name),
                              "digest": str(model.card["weights"]["sha256"])},
                       mechanism_result=InferenceDraw(mechanism=mech, noisy_input=noisy_t))

    def simulate(self, target: Any, inputs: Any, setting: Setting, rng: Any, *,
                 certificates: Any = None) -> Simulation:
        import torch

        mech = self.mechanism(target, setting)
        d = int(mech.values_per_image)  # type: ignore[arg-type]
        eff = float(mech.noise_plan(d, d).effective)
        x = np.clip(np.asarray(inputs, dtype=np.float64).reshape(len(inputs), -1), 0.0, 1.0)
        noisy = np.clip(x + rng.laplace(0.0, eff, size=x.shape), 0.0, 1.0)
        scores = target.model(torch.as_tensor(noisy, dtype=torch.float32).reshape(-1, *target.ip.image_shape))
        return Simulation(predicted=np.asarray(scores).argmax(-1), released=np.ones(len(x), bool),
                          noise_scale_effective=eff)


@dataclass(frozen=True, kw_only=True)
class LDPEmbeddingRelease(Posthoc):
    """LDP-Embedding in the mechanism protocol: f(clip(z, −B, B) + Lap(2Bk/ε)), classified by the
    pipeline's classifier; ε-local DP over every pair of inputs (module docstring), never ⊥, no δ."""

    name: str = "LDP-Embedding"
    label: str = "LDP-Embedding (local DP)"
    parameters: tuple = (EPSILON,)
    needs: str = ("the embedder and obfuscator; B, the 0.99 quantile of |z| over training embeddings, "
                  "computed here")
    description: str = "f(clip(z, ±B) + Lap(2Bk/ε)): noise on the embedding, every pair of inputs, never ⊥"
    source: str = "posthoc paper, Table 2"
    guarantee: str = LDP_GUARANTEE

    uses_options: ClassVar[frozenset[str]] = frozenset({"time_limit", "rng"})

    def mechanism(self, pipe: Any, setting: Setting) -> tuple[LDPEmbedding, int]:
        """The calibrated :class:`LDPEmbedding` for ``pipe`` and the n training images of its B."""
        bound, n = embedding_bound(pipe)
        return LDPEmbedding(epsilon=setting.epsilon, bound=bound), n

    def spent(self, setting: Setting) -> Guarantee:
        return _spent(setting.epsilon, self.name)

    def _stated(self, pipe: Any, setting: Setting
                ) -> tuple[LDPEmbedding, Guarantee, NoisePlan, dict[str, Any]]:
        mech, n = self.mechanism(pipe, setting)
        k = int(pipe.latent_dim)
        scale = mech.scale_for(k)
        g = replace(mech.guarantee, mechanism=self.name,
                    calibration=f"Laplace b = 2Bk/ε = {scale:.6g} per coordinate of z at ℓ1 sensitivity "
                                f"2Bk, B = {mech.bound:.6g} (the {BOUND_QUANTILE:g} quantile of |z| over {n} "
                                f"training embeddings), k = {k}")
        public = {"bound": mech.bound, "bound_quantile": BOUND_QUANTILE, "bound_images": n, "dim": k}
        return mech, g, mech.noise_plan(k, k), public

    def outlook(self, target: Any, setting: Setting, *, time_limit: float | None = 60.0,
                certification: Any = None) -> Outlook:
        mech, g, plan, public = self._stated(target, setting)
        scale = mech.scale_for(public["dim"])
        return Outlook(mechanism=self.name, guarantee=g, noise_scale=scale,
                       noise_scale_effective=float(plan.effective),
                       noise=f"Laplace b = 2Bk/ε = {scale:.4g} per coordinate of z, then f (B = "
                             f"{mech.bound:.4g}, k = {public['dim']})",
                       release_probability=1.0, public=public)

    def _obfuscated(self, pipe: Any, z: np.ndarray) -> np.ndarray:
        import torch

        return pipe.obfuscate(torch.as_tensor(z, dtype=torch.float32)).double().cpu().numpy()

    def release(self, target: Any, x: Any, setting: Setting, options: Options | None = None) -> Release:
        opts = Options() if options is None else options
        self.check_options(opts)
        z = embedding(target, x)
        mech, g, plan, public = self._stated(target, setting)
        noisy = np.asarray(mech(z, rng=opts.rng))  # clipped to [−B, B]^k, then the noise
        value = tuple(float(v) for v in self._obfuscated(target, noisy[None]).ravel())
        return Release(mechanism=self.name, released=True, value=value,
                       prediction=functools.partial(predict, target, value, 0.0), guarantee=g,
                       epsilon=setting.epsilon, delta=0.0, noise_scale=mech.scale_for(public["dim"]),
                       noise_scale_effective=float(plan.effective), public=public, model=model_block(target),
                       mechanism_result=noisy)

    def simulate(self, target: Any, inputs: Any, setting: Setting, rng: Any, *,
                 certificates: Any = None) -> Simulation:
        mech, _, plan, _ = self._stated(target, setting)
        z = np.clip(np.asarray(inputs, dtype=np.float64), -mech.bound, mech.bound)
        eff = float(plan.effective)
        values = self._obfuscated(target, z + rng.laplace(0.0, eff, size=z.shape))
        return Simulation(predicted=classes(target, values, 0.0), released=np.ones(len(z), bool),
                          noise_scale_effective=eff)

    def attack_unavailable(self) -> str:
        """The shipped attackers are told the scale of noise added to f's output, and LDP-Embedding's
        noise enters before f, so no attacker is calibrated for its releases."""
        return (f"{self.name}'s noise enters before f, and the shipped attackers are trained on noise added "
                "to f's output: no attacker is calibrated for its releases")

    def simulate_release(self, target: Any, inputs: Any, setting: Setting, rng: Any) -> Simulation:
        """Not read by the attack (:meth:`attack_unavailable`)."""
        raise NotImplementedError(self.attack_unavailable())
