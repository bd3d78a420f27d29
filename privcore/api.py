"""Release an image from Python. The entry points, all keyword-only after the first argument(s):

* :func:`certify` ``(image, …)`` → :class:`Certification`: PTR's φ (posthoc Alg. 1) and L(f, B(z, R))
  for one image; private.
* :func:`release` ``(image, *, epsilon, …)`` → :class:`Release`: one release with a posthoc
  mechanism (:mod:`privcore.mechanisms.registry`): ``"global"`` (default), f(clip z) + Lap(G·R/ε)
  with G certified over the model's public box by this process, (ε, 0, R), never ⊥; or ``"ptr"``,
  posthoc PTR, (2ε, δ/2, R) or ⊥ (Thm 4.4).
* :func:`~privcore.api_core.certify_embedding` ``(pipe, z, …)`` and
  :func:`~privcore.api_core.release_embedding` ``(pipe, z, *, epsilon, …)``: the same on a loaded
  :class:`~privcore.pipeline.Pipeline` and an embedding z = pipe.embed(image) (the dashboard's
  way in); :func:`certify` and :func:`release` load, embed and call them, so there is one code path.
* :meth:`Release.document`: the public JSON of a release, the one builder of it (never φ, R* or
  anything else computed from the image without noise).

Shared keywords: ``dataset``/``model``/``models_dir`` (which shipped models, default real MNIST and its
default model, :func:`privcore.defaults.default_model`; not for the ``_embedding`` forms), ``radius``
(default the model's R), ``certifier`` (``"exact"``, ``"lp"``, ``"interval"`` or a
:class:`~privcore.lipschitz.Certifier` instance, used as given), ``time_limit``, ``cache`` (privcore's φ
and certificate cache: True, None/False, a directory or a LipschitzCache), ``progress`` (PTR: called
``progress(r, passed)`` after each decision "U(z, r) ≤ Δp?" of φ's bisection; whatever it raises
propagates, and nothing is cached or released), ``rng`` (tests only). δ defaults to
:data:`DEFAULT_DELTA` = 1e-5 and must lie in :data:`DELTA_RANGE` ([1e-12, 0.5]); PTR's search range is
:func:`~privcore.mechanisms.search_range.ptr_search_range`. Every parameter is checked before anything
is computed; a certification that cannot be completed raises CertificationError, and so does φ > 0
while the certified L(f, B(z, R)) is above Δp (a backstop, docs/TRUST.md): nothing is released.

**Timing.** Certifying takes longer for some images than for others, and how long correlates with
the private φ; the noise covers the release's content, not the moment it leaves the device. So a
release that is sent as soon as :func:`release` returns tells its recipient something about φ.
The threat is the recipient (or anyone watching the network), not the device's owner, who may
see φ anyway. Two ways to send at a time that does not depend on φ:

* certify first, ``cert = certify(image, …)``, and send later with
  ``release(image, …, certification=cert)``, which checks that ``cert`` belongs to this image,
  model and R and does no certification work (embedding, the test and the noise only);
* or ``release(…, min_seconds=T)``, which returns no earlier than T seconds after the call; when
  the work takes longer it raises :class:`DeadlineExceededError` and releases nothing.
"""

from __future__ import annotations

import functools
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from privcore.api_core import (
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


@functools.lru_cache(maxsize=8)
def _pipeline(dataset: str, model: str, models_dir: str | None) -> Any:
    from privcore.data import get_spec
    from privcore.pipeline import load_pipeline

    get_spec(dataset)  # unknown dataset: ParameterError naming the known ones
    return load_pipeline(dataset, model, models_dir=models_dir, device="cpu")


def _image(image: Any, shape: tuple[int, int, int]) -> Any:
    """The model input (C, H, W) float32 in [0, 1]: a PNG/JPEG path or bytes, or an array."""
    import torch

    from privcore.images import load_image

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
    (default the smallest PTR runs at on the dashboard, 0.05 and 1e-10); other keywords: the module
    docstring."""
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
    certifier: Any = "exact",
    time_limit: float | None = 60.0,
    models_dir: str | Path | None = None,
    cache: Any = True,
    rng: Any = None,
    certification: Certification | None = None,
    min_seconds: float | None = None,
    progress: Progress | None = None,
) -> Release:
    """Release f(g(image)) with ``mechanism``, ``epsilon`` being that mechanism's ε:
    :func:`release_embedding` of the image's embedding.

    * ``"global"`` (the default): f(clip z) + Lap(G·R/ε) over the card's public box, G certified by
      this process (verified once per model and process): (ε, 0, R), always released, no δ and
      no per-image certification (docs/DESIGN.md, "Beyond the papers"). ``delta`` is checked but
      unused; the document's δ is 0.
    * ``"ptr"``: posthoc PTR, (2ε, δ/2, R)-private release or ⊥ (Thm 4.4).

    The guarantee's total ε (``epsilon`` for global, 2·``epsilon`` for ptr) must lie in EPSILON_RANGE
    and ``radius`` in RADIUS_RANGE, the dashboard's ranges (:mod:`privcore.ranges`). How long PTR's
    certification takes depends on φ (module docstring, *Timing*); for a PTR release sent as soon
    as it is made:

    * ``certification`` (PTR only): a :class:`Certification` from :func:`certify` of this image
      with the same dataset, model, radius, certifier and models_dir (ParameterError naming what
      differs otherwise, and when its search range does not cover ε and δ). Nothing is certified:
      the call embeds the image, runs the test and draws the noise, whose time does not depend on φ.
    * ``min_seconds``: the call returns no earlier than this many seconds after it began. If the
      work (certification included) takes longer, :class:`DeadlineExceededError` is raised and
      nothing is released; choose it above the slowest certification you expect (a time-out
      raises CertificationError earlier, also releasing nothing).

    The result's ``warnings`` are :func:`privcore.domain.check`'s (empty when the image looks like the
    dataset's; the first call per dataset calibrates it, seconds); private, never in ``document()``."""
    start = _monotonic()
    check_release_arguments(epsilon=epsilon, delta=delta, mechanism=mechanism, radius=radius,
                            certifier=certifier, certification=certification, progress=progress)
    budget = None if min_seconds is None else check_positive("min_seconds", min_seconds)
    pipe, z = _embed(image, dataset, model, models_dir)
    result = release_embedding(pipe, z, epsilon=epsilon, delta=delta, mechanism=mechanism, radius=radius,
                               certifier=certifier, time_limit=time_limit, cache=cache, rng=rng,
                               certification=certification, progress=progress)
    result = replace(result, warnings=_domain_warnings(image, pipe))
    if budget is not None:
        _wait_until(start, budget)
    return result


def _domain_warnings(image: Any, pipe: Any) -> tuple[str, ...]:
    """:func:`privcore.domain.check` of ``image``, with its file's own pixels when it is a path or bytes."""
    from privcore.domain import check

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
