"""What an attacker rebuilds from a mechanism's releases at a setting: SSIM, PSNR, ℓ1 and ℓ2, live.

:func:`live_attack` answers "what can an attacker rebuild from what I send at this (mechanism, model,
ε, δ, R)?" for every registered mechanism that releases a posthoc model's embedding. It simulates
``draws`` releases of every evaluation image
(:meth:`~privcore.mechanisms.protocol.Mechanism.simulate_release`: numpy's generator, evaluation only,
never a release), decodes each with the model's scale-told attacker
(:class:`~privcore.nets.attacker.ScaleToldAttacker`, told the public noise scale and kind) and scores it
against the image (:mod:`privcore.attacks.metrics`, posthoc paper Tables 3–6). Beside it, the
no-release baseline: the training mean image as the guess for every image, what an attacker gets from
nothing. Each mean carries a 95 % percentile bootstrap interval over images of per-image means over
draws, as :func:`~privcore.mechanisms.utility.live_accuracy`; results are memoised per setting.

Conventions: the evaluation split is the test split (:data:`~privcore.mechanisms.utility.SPLIT`, on which
no choice was made; the attackers chose their epochs and widths on validation). PTR is read *given a
release*: whether its test passes needs each image's φ, and a ⊥ sends nothing, so the attacker of a ⊥
has exactly the baseline; the reading is therefore what a sent release gives away. A mechanism that
releases no embedding (the inference-privacy family: class scores) or a model without a shipped
attacker gets a reading with ``available`` False and the reason, never an error.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privcore.mechanisms.protocol import Mechanism, Setting
from privcore.mechanisms.utility import DRAWS, SPLIT, _Held, _interval, evaluation_inputs

__all__ = [
    "METRICS",
    "AttackReading",
    "Interval",
    "SentAttack",
    "attack_release",
    "image_noise_free_attack",
    "live_attack",
    "no_release_baseline",
    "noise_free_attack",
]

#: the metrics, in the papers' table order
METRICS = ("ssim", "psnr", "l1", "l2")


@dataclass(frozen=True, kw_only=True)
class Interval:
    """A mean over images with its 95 % bootstrap interval [``low``, ``high``]."""

    mean: float
    low: float
    high: float

    def text(self, digits: int = 3) -> str:
        """``0.412 [0.401, 0.423]``."""
        return f"{self.mean:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


@dataclass(frozen=True, kw_only=True)
class AttackReading:
    """The attack at ``setting``: ``metrics`` (SSIM, PSNR in dB, ℓ1 = mean absolute pixel error,
    ℓ2 = mean squared pixel error) and the no-release ``baseline``, each an :class:`Interval`, over ``n``
    images of ``split`` × ``draws`` draws; ``told_scale`` the scale the attacker was told, ``gaussian``
    its noise kind, ``given_release`` True where the releases were drawn given a release (PTR).
    ``available`` False: no reading, ``reason`` says why."""

    mechanism: str
    model: str
    setting: Setting | None
    available: bool
    reason: str = ""
    metrics: Mapping[str, Interval] = field(default_factory=dict)
    baseline: Mapping[str, Interval] = field(default_factory=dict)
    n: int = 0
    draws: int = 0
    told_scale: float | None = None
    gaussian: bool = False
    given_release: bool = False
    split: str = SPLIT

    @property
    def sample_text(self) -> str:
        """``n = 1000 test images × 3 draws``."""
        return f"n = {self.n} {self.split} images × {self.draws} draws"

    @property
    def convention(self) -> str:
        """How the reading treats ⊥, in words."""
        if self.given_release:
            return ("given a release: a ⊥ sends nothing, so the attacker of a ⊥ gets the no-release baseline")
        return "every image is released (no ⊥)"


def _per_image(images: Any, recs: Any) -> dict[str, np.ndarray]:
    import torch

    from privcore.attacks.metrics import image_metrics

    # SSIM in float32 (within 1e-6 of float64, shown to 3 decimals): about 9× faster on CPU
    m = image_metrics(images, recs, ssim_dtype=torch.float32)
    return {k: np.asarray(getattr(m, k), dtype=np.float64) for k in METRICS}


def _summaries(per_image: Mapping[str, np.ndarray], seed: int) -> dict[str, Interval]:
    out = {}
    for k in METRICS:
        v = per_image[k]
        low, high = _interval(v, seed)
        out[k] = Interval(mean=float(v.mean()), low=low, high=high)
    return out


@functools.lru_cache(maxsize=8)
def _images(dataset: str, n: int | None) -> tuple[Any, Any]:
    """The evaluation images (first ``n`` of the test split) and the training mean image."""
    from privcore.data import load_dataset

    ds = load_dataset(dataset)
    x = ds.x_test if n is None else ds.x_test[:n]
    return x.float(), ds.x_train.float().mean(dim=0, keepdim=True)


@functools.lru_cache(maxsize=8)
def no_release_baseline(dataset: str, n: int | None = None, seed: int = 0) -> dict[str, Interval]:
    """The no-release baseline on the evaluation images: the training mean image as every guess."""
    x, mean = _images(dataset, n)
    return _summaries(_per_image(x, mean.expand_as(x)), seed)


@functools.lru_cache(maxsize=16)
def _attacker(held: _Held, models_dir: str | None) -> Any:
    from privcore.models.told_attacker import load_told_attacker

    return load_told_attacker(held.target, models_dir)


def _unavailable(mechanism: Mechanism, model: str, setting: Setting | None, reason: str) -> AttackReading:
    return AttackReading(mechanism=mechanism.name, model=model, setting=setting, available=False,
                         reason=reason)


def _reconstruct(att: Any, values: np.ndarray, told: float, gaussian: bool) -> Any:
    import torch

    with torch.no_grad():
        return att.module(torch.as_tensor(values, dtype=torch.float32), float(told), float(gaussian))


def live_attack(mechanism: Mechanism, target: Any, setting: Setting, *, dataset: str, model: str,
                n: int | None = None, draws: int = DRAWS, seed: int = 0,
                models_dir: str | None = None) -> AttackReading:
    """The attack on ``mechanism``'s releases of ``target`` at ``setting`` (module docstring): memoised."""
    return _live(mechanism, _Held(target), setting, dataset, model, n, draws, seed, models_dir)


@functools.lru_cache(maxsize=256)
def _live(mechanism: Mechanism, held: _Held, setting: Setting, dataset: str, model: str, n: int | None,
          draws: int, seed: int, models_dir: str | None) -> AttackReading:
    target = held.target
    rng = np.random.default_rng([seed, zlib.crc32(repr((mechanism.name, setting)).encode())])
    inputs, _ = evaluation_inputs(mechanism, target, dataset, n=n)
    try:
        sims = [mechanism.simulate_release(target, inputs, setting, rng) for _ in range(draws)]
    except NotImplementedError as exc:
        return _unavailable(mechanism, model, setting, f"no attacker for this model: {exc}")
    att = _attacker(held, models_dir)
    if att is None:
        return _unavailable(mechanism, model, setting,
                            f"no attacker is shipped for {dataset}/{model}: train it with "
                            f"`python -m privcore train told-attacker --dataset {dataset} --model {model}`")
    x, _ = _images(dataset, n)
    scores = [_per_image(x, _reconstruct(att, s.values, s.told_scale, s.gaussian)) for s in sims]
    per_image = {k: np.mean([s[k] for s in scores], axis=0) for k in METRICS}
    return AttackReading(mechanism=mechanism.name, model=model, setting=setting, available=True,
                         metrics=_summaries(per_image, seed), baseline=no_release_baseline(dataset, n, seed),
                         n=int(x.shape[0]), draws=draws, told_scale=float(sims[0].told_scale),
                         gaussian=bool(sims[0].gaussian), given_release=bool(sims[0].given_release))


def noise_free_attack(mechanism: Mechanism, target: Any, *, dataset: str, model: str, n: int | None = None,
                      seed: int = 0, models_dir: str | None = None) -> AttackReading:
    """The attack on ``mechanism``'s released vector without its noise (ε = ∞, the attacker told b = 0):
    the attacker's best case. The noise-free part comes from the mechanism's own simulation with a
    generator that draws zeros, so it is clipped (or not) as that mechanism clips."""
    from dataclasses import replace

    rng = np.random.default_rng([seed, 0])
    inputs, _ = evaluation_inputs(mechanism, target, dataset, n=n)
    try:
        sim = mechanism.simulate_release(target, inputs, mechanism.setting(epsilon=100.0), _Zero(rng))
    except NotImplementedError as exc:
        return _unavailable(mechanism, model, None, f"no attacker for this model: {exc}")
    att = _attacker(_Held(target), models_dir)
    if att is None:
        return _unavailable(mechanism, model, None, f"no attacker is shipped for {dataset}/{model}")
    x, _ = _images(dataset, n)
    per_image = _per_image(x, _reconstruct(att, sim.values, 0.0, False))
    out = AttackReading(mechanism=mechanism.name, model=model, setting=None, available=True,
                        metrics=_summaries(per_image, seed), baseline=no_release_baseline(dataset, n, seed),
                        n=int(x.shape[0]), draws=1, told_scale=0.0)
    return replace(out, given_release=bool(sim.given_release))


def image_noise_free_attack(mechanism: Mechanism, target: Any, x: Any, image: Any, *,
                            models_dir: str | None = None) -> SentAttack | None:
    """What the scale-told attacker rebuilds from ``mechanism``'s released vector of one prepared input
    ``x`` (:meth:`~privcore.mechanisms.protocol.Mechanism.prepare`'s output) without its noise (ε = ∞, the
    attacker told b = 0), scored against ``image`` (C, H, W in [0, 1]): the attacker's best case on this
    image, clipped as the mechanism clips (:func:`noise_free_attack` for one image). None without a
    shipped attacker; NotImplementedError, naming why, where no attacker reads the releases
    (:meth:`~privcore.mechanisms.protocol.Mechanism.attack_unavailable`)."""
    import torch

    reason = mechanism.attack_unavailable()
    if reason:
        raise NotImplementedError(reason)
    rng = _Zero(np.random.default_rng(0))
    inputs = np.asarray(x, dtype=np.float64).reshape(1, -1)
    sim = mechanism.simulate_release(target, inputs, mechanism.setting(epsilon=100.0), rng)
    att = _attacker(_Held(target), models_dir)
    if att is None:
        return None
    rec = _reconstruct(att, sim.values, 0.0, False)
    scores = _per_image(torch.as_tensor(image, dtype=torch.float32)[None], rec)
    return SentAttack(reconstruction=rec[0], metrics={k: float(scores[k][0]) for k in METRICS},
                      told_scale=0.0, gaussian=False)


class _Zero:
    """A numpy-generator stand-in whose noise is zero: the simulation's values are then the noise-free
    released part (f(clip z) or f(z)), with the mechanism's own clipping."""

    def __init__(self, rng: Any) -> None:
        self.rng = rng

    def laplace(self, loc: float, scale: float, size: Any) -> np.ndarray:
        return np.zeros(size)

    def normal(self, loc: float, scale: float, size: Any) -> np.ndarray:
        return np.zeros(size)


@dataclass(frozen=True, kw_only=True)
class SentAttack:
    """The attacker's ``reconstruction`` (C, H, W) of one sent release and its ``metrics`` against the
    user's own image (SSIM, PSNR, ℓ1, ℓ2; one image, one draw: no interval), and the ``told_scale``."""

    reconstruction: Any
    metrics: Mapping[str, float]
    told_scale: float
    gaussian: bool


def attack_release(mechanism: Mechanism, target: Any, release: Any, image: Any, *,
                   models_dir: str | None = None) -> SentAttack | None:
    """What the scale-told attacker rebuilds from one sent ``release`` of ``image`` (C, H, W in [0, 1]),
    told the release's public noise scale; None for a ⊥, a release that is no embedding, a mechanism
    whose releases the attacker does not read
    (:meth:`~privcore.mechanisms.protocol.Mechanism.attack_unavailable`), or a model without a shipped
    attacker."""
    import torch

    if mechanism.family != "posthoc" or not release.released or release.value is None:
        return None
    if mechanism.attack_unavailable():
        return None
    att = _attacker(_Held(target), models_dir)
    if att is None:
        return None
    told, gaussian = mechanism.told_scale(release)
    rec = _reconstruct(att, np.asarray([release.value], dtype=np.float64), told, gaussian)
    x = torch.as_tensor(image, dtype=torch.float32)[None]
    scores = _per_image(x, rec)
    return SentAttack(reconstruction=rec[0], metrics={k: float(scores[k][0]) for k in METRICS},
                      told_scale=told, gaussian=gaussian)
