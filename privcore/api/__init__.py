"""Release an image from Python. The entry points, all keyword-only after the first argument(s):

* :func:`release` ``(image, *, mechanism, epsilon, …)`` → :class:`Release`: one release with any
  mechanism of the registry (:mod:`privcore.mechanisms.registry`): ``"global"`` (default),
  f(clip z) + Lap(G·R/ε), (ε, 0, R), never ⊥;
  ``"ptr"``, posthoc PTR, (ε, δ/2, R) or ⊥ (Thm 4.4, run at ε/2); ``"gauss-input"``,
  ``"gauss-output"``, ``"lap-output"``, inference privacy over the pixel α-neighbourhood. **ε is
  always the total of the sent release's guarantee**: ``release(…, epsilon=e).document()["guarantee"]
  ["epsilon"] == e`` for every mechanism.
* :func:`certify` ``(image, …)`` → :class:`Certification`: PTR's φ (posthoc Alg. 1) and L(f, B(z, R))
  for one image; private.
* :func:`~privcore.api.core.certify_embedding` ``(pipe, z, …)`` and
  :func:`~privcore.api.core.release_embedding` ``(pipe, z, *, epsilon, …)``: the same on a loaded
  :class:`~privcore.models.pipeline.Pipeline` and an embedding z = pipe.embed(image) (the dashboard's
  way in); :func:`certify` and :func:`release` load, embed and call the same mechanism code.
* :meth:`Release.document`: the public JSON of a release, the one builder of it (never φ, R* or
  anything else computed from the image without noise).

Shared keywords: ``dataset``/``model``/``models_dir`` (which shipped models, default real MNIST and its
default model, :func:`privcore.defaults.default_model`; for the inference-privacy mechanisms ``model``
names an IP classifier, default the first one the mechanism can run on), ``radius`` (posthoc: default
the model's R), ``alpha`` (inference privacy: required), ``certifier`` (PTR: ``"exact"``, ``"lp"``,
``"interval"`` or a :class:`~privcore.lipschitz.Certifier` instance, used as given), ``time_limit``,
``cache`` (PTR's φ and certificate cache: True, None/False, a directory or a LipschitzCache),
``progress`` (PTR: called ``progress(r, passed)`` after each decision "U(z, r) ≤ Δp?" of φ's bisection;
whatever it raises propagates, and nothing is cached or released), ``rng`` (tests only). δ defaults to
:data:`DEFAULT_DELTA` = 1e-5 and must lie in :data:`DELTA_RANGE`; ε, R and α in the ranges of
:mod:`privcore.ranges`. Every parameter is checked before anything is computed; a certification that
cannot be completed raises CertificationError, and so does φ > 0 while the certified L(f, B(z, R)) is
above Δp (a backstop, docs/TRUST.md): nothing is released.

**Timing.** Certifying takes longer for some images than for others, and how long correlates with
the private φ; the noise covers the release's content, not the moment it leaves the device. So a
PTR release that is sent as soon as :func:`release` returns tells its recipient something about φ.
The threat is the recipient (or anyone watching the network), not the device's owner, who may
see φ anyway. Two ways to send at a time that does not depend on φ:

* certify first, ``cert = certify(image, …)``, and send later with
  ``release(image, …, certification=cert)``, which checks that ``cert`` was made by this process for
  this image, model and R and does no certification work (embedding, the test and the noise only);
* or ``release(…, min_seconds=T)``, which returns no earlier than T seconds after the call; when
  the work takes longer it raises :class:`DeadlineExceededError` and releases nothing.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from privcore.api.core import (
    CERTIFIERS,
    DEFAULT_DELTA,
    RELEASE_FORMAT,
    Certification,
    DeadlineExceededError,
    Progress,
    Release,
    certify_embedding,
    check_certify_arguments,
    check_release_arguments,
    check_release_delta,
    release_embedding,
    release_with,
)
from privcore.defaults import DEFAULT_DATASET, default_model
from privcore.errors import ParameterError
from privcore.validation import DELTA_RANGE, check_finite_array, check_input_file, check_positive

__all__ = [
    "CERTIFIERS",
    "DEFAULT_DELTA",
    "DELTA_RANGE",
    "RELEASE_FORMAT",
    "Certification",
    "DeadlineExceededError",
    "Release",
    "certify",
    "certify_embedding",
    "check_release_delta",
    "release",
    "release_embedding",
]

# DELTA_RANGE (re-exported): the δ :func:`release` accepts, ends included, defined once in
# privcore.ranges with ε's and R's ranges, which the CLI and the dashboard read too.
_monotonic, _sleep = time.monotonic, time.sleep  # module attributes, so tests can stand in a clock


def _pipeline(dataset: str, model: str, models_dir: str | None) -> Any:
    """The posthoc pipeline of ``dataset``/``model``, loaded once per process."""
    from privcore.mechanisms.posthoc import load_pipeline_cached

    return load_pipeline_cached(dataset, model, models_dir)


def _image(image: Any, shape: tuple[int, int, int]) -> Any:
    """The model input (C, H, W) float32 in [0, 1]: a PNG/JPEG path or bytes, or an array."""
    import torch

    from privcore.inputs.images import load_image

    if isinstance(image, str | Path):
        image = check_input_file("image", image).read_bytes()
    if isinstance(image, bytes | bytearray):
        return load_image(bytes(image), target_shape=shape)
    if isinstance(image, torch.Tensor):
        image = image.detach().cpu().numpy()
    arr = check_finite_array("image", image)
    if arr.shape == shape[1:] and shape[0] == 1:
        arr = arr[None]
    if arr.shape != shape:
        one = f" (or {shape[1:]})" if shape[0] == 1 else ""
        raise ParameterError(f"image must have shape {shape}{one}, got {arr.shape}")
    if arr.min() < 0.0 or arr.max() > 1.0:
        raise ParameterError(f"image values must be in [0, 1], got [{arr.min():.4g}, {arr.max():.4g}]")
    return torch.from_numpy(arr.astype(np.float32))


def _embed(image: Any, dataset: str, model: str | None, models_dir: Any) -> tuple[Any, np.ndarray]:
    """The pipeline of ``dataset``/``model`` (None: the dataset's default) and the image's embedding z
    (float64)."""
    model = default_model(str(dataset)) if model is None else model
    pipe = _pipeline(str(dataset), str(model), None if models_dir is None else str(models_dir))
    z = pipe.embed(_image(image, tuple(pipe.image_shape))).double().cpu().numpy().reshape(-1)
    return pipe, z


def certify(
    image: Any,
    *,
    dataset: str = DEFAULT_DATASET,
    model: str | None = None,
    radius: float | None = None,
    certifier: Any = "exact",
    epsilon_min: float | None = None,
    delta_min: float | None = None,
    time_limit: float | None = 60.0,
    models_dir: str | Path | None = None,
    cache: Any = True,
    progress: Progress | None = None,
) -> Certification:
    """φ(z) and L(f, B(z, R)) for one image (posthoc Alg. 1): :func:`certify_embedding` of its
    embedding. The search range is :func:`ptr_search_range` sized for ``epsilon_min``/``delta_min``
    (the smallest total ε and δ it must serve; default 0.1 and 1e-10, the dashboard's smallest); other
    keywords: the module docstring."""
    check_certify_arguments(radius=radius, certifier=certifier, progress=progress)
    pipe, z = _embed(image, dataset, model, models_dir)
    return certify_embedding(pipe, z, radius=radius, certifier=certifier, epsilon_min=epsilon_min,
                             delta_min=delta_min, time_limit=time_limit, cache=cache, progress=progress)


def release(
    image: Any,
    *,
    epsilon: float,
    delta: float = DEFAULT_DELTA,
    dataset: str = DEFAULT_DATASET,
    model: str | None = None,
    mechanism: str = "global",
    radius: float | None = None,
    alpha: float | None = None,
    certifier: Any = "exact",
    time_limit: float | None = 60.0,
    models_dir: str | Path | None = None,
    cache: Any = True,
    rng: Any = None,
    certification: Certification | None = None,
    min_seconds: float | None = None,
    progress: Progress | None = None,
) -> Release:
    """Release ``image`` with ``mechanism`` (any name of :mod:`privcore.mechanisms.registry`, any case)
    at total ``epsilon``: the guarantee of the result spends exactly ``epsilon`` (PTR runs at ε/2).

    * posthoc mechanisms (``global``, ``ptr``) release the obfuscated embedding
      f(g(image)) over the ℓ∞ R-neighbourhood on z (``radius``; default the model card's R);
    * inference-privacy mechanisms (``gauss-input``, ``gauss-output``, ``lap-output``) release a
      classifier's noisy scores over the pixel α-neighbourhood (``alpha``, required).
    * the local-DP baselines (``ldp-image``, ``ldp-embedding``) take ε only and hold for every pair of
      inputs (:mod:`privcore.mechanisms.ldp`).

    PTR only: ``certification`` (a :class:`Certification` that :func:`certify` made in this process for
    this image, dataset, model, radius and certifier; anything else is refused and nothing released;
    nothing is certified again) and ``min_seconds`` (the call returns no earlier than this many seconds
    after it began; if the work takes longer :class:`DeadlineExceededError` is raised and nothing is
    released). The result's ``warnings`` are :func:`privcore.inputs.domain.check`'s (empty when the
    image looks like the dataset's); private, never in ``document()``."""
    start = _monotonic()
    mech, setting, options = check_release_arguments(
        epsilon=epsilon, delta=delta, mechanism=mechanism, radius=radius, alpha=alpha, certifier=certifier,
        time_limit=time_limit, cache=cache, certification=certification, progress=progress, rng=rng)
    budget = None if min_seconds is None else check_positive("min_seconds", min_seconds)
    target = mech.load(dataset=str(dataset), model=model,
                       models_dir=None if models_dir is None else str(models_dir))
    x = _image(image, mech.image_shape(target))
    result = release_with(mech, target, mech.prepare(target, x), setting, options)
    pipe = target if mech.family == "posthoc" else _pipeline(str(dataset), default_model(str(dataset)),
                                                             None if models_dir is None else str(models_dir))
    result = replace(result, warnings=_domain_warnings(image, pipe))
    if budget is not None:
        _wait_until(start, budget)
    return result


def _domain_warnings(image: Any, pipe: Any) -> tuple[str, ...]:
    """:func:`privcore.inputs.domain.check` of ``image``, with its file's own pixels when it is a path
    or bytes."""
    from privcore.inputs.domain import check

    data = Path(image).read_bytes() if isinstance(image, str | Path) else image
    upload = bytes(data) if isinstance(data, bytes | bytearray) else None
    return check(_image(image, tuple(pipe.image_shape)), pipe, upload=upload)


def _wait_until(start: float, budget: float) -> None:
    """Sleep until ``budget`` seconds after ``start``; DeadlineExceededError if already past."""
    elapsed = _monotonic() - start
    if elapsed > budget:
        raise DeadlineExceededError(
            f"the release took {elapsed:.1f} s, more than min_seconds = {budget:g}: nothing released "
            "(returning later would make the send time depend on φ). Fix: a larger min_seconds, or "
            "certify first and release with the certification"
        )
    while (left := budget - (_monotonic() - start)) > 0:
        _sleep(left)
