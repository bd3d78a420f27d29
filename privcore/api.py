"""One-call release for notebooks and scripts: :func:`certify` and :func:`release`.

``privcore.release(image, dataset="digits", model="ARL-C-N", epsilon=1)`` loads the shipped
networks, embeds the image and releases it with the chosen mechanism
(:mod:`privcore.mechanisms.registry`): by default the certified global mechanism, f(clip z) +
Lap(G·R/ε) with G certified over the model's public box by this process, (ε, 0, R), never ⊥;
with ``mechanism="ptr"`` posthoc PTR, which certifies φ (Alg. 1, with the library's search range
:func:`privcore.mechanisms.search_range.ptr_search_range`) and runs the test and the release
(Thm 4.4). δ defaults to :data:`DEFAULT_DELTA` = 1e-5 and must lie in :data:`DELTA_RANGE`, the
dashboard's [1e-12, 0.5]. Results are frozen dataclasses; :meth:`Release.document` is the public
JSON, which never holds φ, R* or anything else computed from the image without noise.

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
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privcore.errors import (
    CertificationError,
    CheckpointError,
    ParameterError,
    ParameterTypeError,
    PrivcoreError,
)
from privcore.validation import (
    DELTA_RANGE,
    RADIUS_RANGE,
    check_choice,
    check_finite_array,
    check_positive,
    check_range,
    check_release_epsilon,
)

__all__ = [
    "DEFAULT_DELTA",
    "DELTA_RANGE",
    "RELEASE_FORMAT",
    "Certification",
    "DeadlineExceededError",
    "Release",
    "certify",
    "release",
]

RELEASE_FORMAT = "privlens.release/1"
CERTIFIERS = ("exact", "lp", "interval")
#: δ of :func:`release` and ``privcore release`` when none is given (issue 30: ≤ 1e-5 everywhere).
DEFAULT_DELTA = 1e-5
# DELTA_RANGE (re-exported): the δ :func:`release` accepts, ends included, defined once in
# privcore.ranges with ε's and R's ranges, which the CLI and the dashboard read too.
_monotonic, _sleep = time.monotonic, time.sleep  # module attributes, so tests can stand in a clock


class DeadlineExceededError(PrivcoreError):
    """``release(…, min_seconds=T)`` needed more than T seconds: nothing was released (returning
    late would let the send time depend on φ)."""


def check_release_delta(value: Any) -> float:
    """δ of a PTR release: in :data:`DELTA_RANGE` (ParameterError naming it, its value and the range)."""
    return check_range("delta", value, DELTA_RANGE)


@dataclass(frozen=True, kw_only=True)
class Certification:
    """φ of one image (posthoc Alg. 1) and the local Lipschitz constant at R. Private: computed
    from the image without noise, so never publish it (only a :class:`Release` is covered). Pass
    it to :func:`release` (``certification=``) to send later, at a time that does not depend on φ."""

    dataset: str
    model: str
    model_digest: str
    certifier: str
    radius: float
    delta_p: float
    r_max: float
    tol: float
    phi: float
    r_star: float | None
    lipschitz: float
    lipschitz_exact: bool
    n_decisions: int
    phi_result: Any


@dataclass(frozen=True, kw_only=True)
class Release:
    """The outcome of one release of an image: ``value`` (the noisy f(z)) or ⊥ (``released`` False,
    ``value`` None; PTR only), with its ``guarantee`` — (ε, 0, R) for ``mechanism`` "Global",
    (2ε, δ/2, R) for "PTR" (Thm 4.4) — and public parameters. ``certification`` (PTR only) is
    private: :meth:`document` never includes it."""

    mechanism: str
    released: bool
    value: tuple[float, ...] | None
    predicted_class: int | None
    guarantee: Any
    epsilon: float
    delta: float
    noise_scale: float
    noise_scale_effective: float
    public: dict[str, Any]
    model: dict[str, str]
    certification: Certification | None = None
    test_scale_effective: float | None = None

    @classmethod
    def of_global(cls, out: Any, *, model: dict[str, str], predicted_class: int | None = None) -> Release:
        """A :class:`~privcore.mechanisms.GlobalRelease` with its public parameters (R, G and how it was
        certified, the clipping box, the sensitivity): the API's and the dashboard's one constructor."""
        params = out.parameters()
        keys = ("radius", "global_lipschitz", "global_lipschitz_how", "clip_box", "sensitivity")
        return cls(mechanism="global", released=True,
                   value=tuple(float(v) for v in np.asarray(out.value).ravel()),
                   predicted_class=predicted_class, guarantee=out.guarantee, epsilon=float(out.epsilon),
                   delta=0.0, noise_scale=float(out.noise_scale),
                   noise_scale_effective=float(out.noise_scale_effective),
                   public={k: params[k] for k in keys}, model=dict(model))

    @classmethod
    def of_ptr(cls, out: Any, *, epsilon: float, delta: float, certifier: str, model: dict[str, str],
               predicted_class: int | None = None, certification: Certification | None = None) -> Release:
        """A :class:`~privcore.mechanisms.PTRResult` run at ``epsilon``/``delta`` (PTR's own) with its
        public parameters (R, Δp, R_max, tol, the test's scale, the certifier): the API's and the
        dashboard's one constructor. No φ, R* or trace: those stay private."""
        phi = out.phi_result
        value = None if not out.released else tuple(float(v) for v in np.asarray(out.value).ravel())
        public = {"radius": float(phi.radius), "delta_p": float(phi.delta_p), "r_max": float(phi.r_max),
                  "tol": float(phi.tol), "test_noise_scale_effective": float(out.test_scale_effective),
                  "certifier": certifier}
        return cls(mechanism="ptr", released=bool(out.released), value=value, predicted_class=predicted_class,
                   guarantee=out.guarantee, epsilon=float(epsilon), delta=float(delta),
                   noise_scale=float(out.noise_scale), noise_scale_effective=float(out.noise_scale_effective),
                   public=public, model=dict(model), certification=certification,
                   test_scale_effective=float(out.test_scale_effective))

    def document(self) -> dict[str, Any]:
        """The public JSON of this release, the one builder of it (no φ, φ̂, R*, trace, image or
        digest of it): outcome, value, the guarantee with its text, the public parameters, the model."""
        return {
            "format": RELEASE_FORMAT,
            "mechanism": self.mechanism,
            "outcome": "released" if self.released else "bottom",
            "value": None if self.value is None else list(self.value),
            "guarantee": {**self.guarantee.to_dict(), "text": self.guarantee.describe()},
            "parameters": {
                "epsilon": self.epsilon,
                "delta": self.delta,
                **self.public,
                "release_noise_scale": self.noise_scale,
                "release_noise_scale_effective": self.noise_scale_effective,
            },
            "model": dict(self.model),
        }


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
        path = Path(image)
        if not path.is_file():
            raise FileNotFoundError(2, "No such file or directory", str(path))
        image = path.read_bytes()
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


def _setup(image: Any, dataset: str, model: str, radius: float | None, models_dir: Any) -> tuple:
    pipe = _pipeline(str(dataset), str(model), None if models_dir is None else str(models_dir))
    delta_p = pipe.proposed_delta_p
    if delta_p is None:
        raise CheckpointError(
            f"no Δp is stored with {dataset}/{model}: compute it with "
            f"`python -m privcore train delta-p --dataset {dataset} --variant {model}`"
        )
    r = pipe.radius if radius is None else check_positive("radius", radius)
    z = pipe.embed(_image(image, tuple(pipe.image_shape))).double().cpu().numpy().reshape(-1)
    return pipe, float(delta_p), float(r), z


def certify(
    image: Any,
    *,
    dataset: str = "digits",
    model: str = "ARL-C-N",
    radius: float | None = None,
    certifier: str = "exact",
    epsilon_min: float | None = None,
    delta_min: float | None = None,
    time_limit: float | None = 60.0,
    models_dir: str | Path | None = None,
    cache: Any = True,
) -> Certification:
    """φ(z) and L(f, B(z, R)) for one image (posthoc Alg. 1). ``radius`` defaults to the model's
    R; the search range is :func:`ptr_search_range` sized for ``epsilon_min``/``delta_min``
    (default the dashboard's smallest, 0.1 and 1e-10). ``cache``: privcore's φ cache."""
    from privcore.lipschitz.certifier import Certifier
    from privcore.mechanisms.phi_cache import cached_phi
    from privcore.mechanisms.search_range import DEFAULT_DELTA_MIN, DEFAULT_EPSILON_MIN, ptr_search_range

    check_choice("certifier", certifier, CERTIFIERS)
    if radius is not None:
        check_range("radius", radius, RADIUS_RANGE)
    pipe, delta_p, r, z = _setup(image, dataset, model, radius, models_dir)
    eps_min = DEFAULT_EPSILON_MIN if epsilon_min is None else epsilon_min
    dlt_min = DEFAULT_DELTA_MIN if delta_min is None else delta_min
    r_max, tol = ptr_search_range(r, epsilon_min=eps_min, delta_min=dlt_min)
    oracle = Certifier(kind=certifier, time_limit=time_limit, cache=cache)
    phi = cached_phi(pipe.obfuscator, z, radius=r, delta_p=delta_p, r_max=r_max, tol=tol, certifier=oracle,
                     cache=cache)
    cert = oracle.certify(pipe.obfuscator, z, r)
    if phi.phi > 0 and cert.lower > delta_p:  # backstop (docs/TRUST.md): the test at R cannot pass
        raise CertificationError(
            f"φ = {phi.phi:.6g} > 0 but the certified L(f, B(z, {r:g})) ≥ {cert.lower:.6g} is above "
            f"Δp = {delta_p:.6g}: the certification is inconsistent, so nothing is released"
        )
    return Certification(
        dataset=str(dataset),
        model=str(model),
        model_digest=str(pipe.cards["obfuscator"]["weights"]["sha256"]),
        certifier=certifier,
        radius=r,
        delta_p=delta_p,
        r_max=r_max,
        tol=tol,
        phi=float(phi.phi),
        r_star=None if phi.r_star is None else float(phi.r_star),
        lipschitz=float(cert.upper),
        lipschitz_exact=bool(cert.exact),
        n_decisions=int(phi.n_decisions),
        phi_result=phi,
    )


def _matching(
    certification: Any,
    image: Any,
    *,
    dataset: str,
    model: str,
    radius: float | None,
    certifier: str,
    models_dir: Any,
    eps: float,
    dlt: float,
) -> Certification:
    """``certification`` when it was computed by :func:`certify` for this image, model, R and
    certifier, with a search range that covers ε and δ; else ParameterError saying what differs.
    Embeds the image (to compare), certifies nothing."""
    from privcore.mechanisms.search_range import DEFAULT_DELTA_MIN, DEFAULT_EPSILON_MIN, ptr_search_range

    if not isinstance(certification, Certification):
        got = type(certification).__name__
        raise ParameterTypeError(f"certification must be a Certification from privcore.certify(), got {got}")
    c = certification
    pipe, delta_p, r, z = _setup(image, dataset, model, radius, models_dir)
    digest = str(pipe.cards["obfuscator"]["weights"]["sha256"])
    for name, mine, theirs in (
        ("dataset", c.dataset, str(dataset)),
        ("model", c.model, str(model)),
        ("model digest", c.model_digest, digest),
        ("certifier", c.certifier, certifier),
        ("radius", c.radius, r),
        ("delta_p", c.delta_p, delta_p),
    ):
        if mine != theirs:
            raise ParameterError(
                f"certification was computed for {name} {mine!r}, this release asks for {theirs!r}: pass "
                "release() the dataset, model, radius, certifier and models_dir given to certify(), or "
                "certify again (nothing released)"
            )
    center = np.asarray(c.phi_result.center, dtype=np.float64)
    if center.shape != z.shape or not np.array_equal(center, z):
        raise ParameterError(
            "certification was computed for another image (its embedding differs): certify this "
            "image (nothing released)"
        )
    r_max, tol = ptr_search_range(
        r, epsilon_min=min(eps, DEFAULT_EPSILON_MIN), delta_min=min(dlt, DEFAULT_DELTA_MIN)
    )
    if c.r_max < r_max or c.tol != tol:
        raise ParameterError(
            f"certification's search range (R_max {c.r_max:.6g}, tol {c.tol:.6g}) is sized for a larger ε "
            f"or δ than epsilon = {eps!r}, delta = {dlt!r} (R_max {r_max:.6g}, tol {tol:.6g} needed): "
            f"certify with epsilon_min={eps!r}, delta_min={dlt!r} (nothing released)"
        )
    return c


def release(
    image: Any,
    *,
    epsilon: float,
    delta: float = DEFAULT_DELTA,
    dataset: str = "digits",
    model: str = "ARL-C-N",
    mechanism: str = "global",
    radius: float | None = None,
    certifier: str = "exact",
    time_limit: float | None = 60.0,
    models_dir: str | Path | None = None,
    cache: Any = True,
    rng: Any = None,
    certification: Certification | None = None,
    min_seconds: float | None = None,
) -> Release:
    """Release f(g(image)) with ``mechanism`` (:mod:`privcore.mechanisms.registry`), ``epsilon``
    being that mechanism's ε:

    * ``"global"`` (the default): f(clip z) + Lap(G·R/ε) over the card's public box, G certified by
      this process (verified once per model and process): (ε, 0, R), always released, no δ and
      no per-image certification (docs/DESIGN.md, "Beyond the papers"). ``delta`` is checked but
      unused; the document's δ is 0.
    * ``"ptr"``: posthoc PTR, (2ε, δ/2, R)-private release or ⊥ (Thm 4.4).

    ``delta`` in :data:`DELTA_RANGE` ([1e-12, 0.5]), default 1e-5; the guarantee's total ε (``epsilon``
    for global, 2·``epsilon`` for ptr) in EPSILON_RANGE and ``radius`` in RADIUS_RANGE, the dashboard's
    ranges (:mod:`privcore.ranges`). Every parameter is checked
    before anything is computed; a certification that cannot be completed (e.g. a solver
    time-out) raises :class:`~privcore.errors.CertificationError` and nothing is released.

    How long PTR's certification takes depends on φ (module docstring, *Timing*); the global
    mechanism's time does not depend on the image. For a PTR release sent as soon as it is made:

    * ``certification`` (PTR only): a :class:`Certification` from :func:`certify` of this image
      with the same dataset, model, radius, certifier and models_dir (ParameterError naming what
      differs otherwise, and when its search range does not cover ε and δ). Nothing is certified:
      the call embeds the image, runs the test and draws the noise, whose time does not depend on φ.
    * ``min_seconds``: the call returns no earlier than this many seconds after it began. If the
      work (certification included) takes longer, :class:`DeadlineExceededError` is raised and
      nothing is released; choose it above the slowest certification you expect (a time-out
      raises CertificationError earlier, also releasing nothing).

    ``rng`` only for tests (default: the OS's randomness)."""
    start = _monotonic()
    from privcore.mechanisms.registry import get as get_mechanism

    spec = get_mechanism(mechanism)
    if spec.family != "posthoc":
        raise ParameterError(
            f"mechanism {spec.name!r} releases a classifier's output (the dashboard's Inference privacy "
            "page); privcore.release takes 'global' or 'ptr'"
        )
    eps, dlt = check_release_epsilon(epsilon, share=spec.epsilon_share), check_release_delta(delta)
    if radius is not None:
        check_range("radius", radius, RADIUS_RANGE)
    budget = None if min_seconds is None else check_positive("min_seconds", min_seconds)
    check_choice("certifier", certifier, CERTIFIERS)
    if spec.name == "Global":
        if certification is not None:
            raise ParameterError("certification applies to mechanism 'ptr' only (the global mechanism "
                                 "certifies nothing per image)")
        result = _release_global(image, epsilon=eps, dataset=dataset, model=model, radius=radius,
                                 time_limit=time_limit, models_dir=models_dir, rng=rng)
    else:
        result = _release_ptr(image, eps=eps, dlt=dlt, dataset=dataset, model=model, radius=radius,
                              certifier=certifier, time_limit=time_limit, models_dir=models_dir, cache=cache,
                              rng=rng, certification=certification)
    if budget is not None:
        _wait_until(start, budget)
    return result


def _model_block(pipe: Any, dataset: str, model: str) -> dict[str, str]:
    return {"dataset": str(dataset), "obfuscator": str(model),
            "digest": str(pipe.cards["obfuscator"]["weights"]["sha256"])}


def _predict(pipe: Any, value: tuple[float, ...], noise_scale: float) -> int:
    """The release classifier's class for a released vector, told the noise scale it carries."""
    import torch

    logits = pipe.classify(torch.tensor([value], dtype=torch.float32), float(noise_scale))
    return int(logits.argmax(-1)[0])


def _release_global(image: Any, *, epsilon: float, dataset: str, model: str, radius: float | None,
                    time_limit: float | None, models_dir: Any, rng: Any) -> Release:
    """The certified global mechanism on one image (:func:`release`, ``mechanism="global"``)."""
    from privcore.mechanisms.global_mechanism import card_global_constant, global_release

    pipe = _pipeline(str(dataset), str(model), None if models_dir is None else str(models_dir))
    r = pipe.radius if radius is None else check_positive("radius", radius)
    z = pipe.embed(_image(image, tuple(pipe.image_shape))).double().cpu().numpy().reshape(-1)
    try:
        constant = card_global_constant(pipe.obfuscator, pipe.cards["obfuscator"],
                                        time_limit=60.0 if time_limit is None else time_limit)
    except ValueError as exc:
        raise CheckpointError(f"{dataset}/{model}: {exc}") from exc
    out = global_release(pipe.obfuscator, z, epsilon=epsilon, radius=float(r), constant=constant, rng=rng)
    value = tuple(float(v) for v in np.asarray(out.value).ravel())
    return Release.of_global(out, model=_model_block(pipe, dataset, model),
                             predicted_class=_predict(pipe, value, out.noise_scale))


def _release_ptr(image: Any, *, eps: float, dlt: float, dataset: str, model: str, radius: float | None,
                 certifier: str, time_limit: float | None, models_dir: Any, cache: Any, rng: Any,
                 certification: Certification | None) -> Release:
    """Posthoc PTR on one image (:func:`release`, ``mechanism="ptr"``)."""
    from privcore.lipschitz.certifier import Certifier
    from privcore.mechanisms.ptr import propose_test_release
    from privcore.mechanisms.search_range import DEFAULT_DELTA_MIN, DEFAULT_EPSILON_MIN

    if certification is None:
        cert = certify(
            image,
            dataset=dataset,
            model=model,
            radius=radius,
            certifier=certifier,
            epsilon_min=min(eps, DEFAULT_EPSILON_MIN),
            delta_min=min(dlt, DEFAULT_DELTA_MIN),
            time_limit=time_limit,
            models_dir=models_dir,
            cache=cache,
        )
    else:
        cert = _matching(certification, image, dataset=dataset, model=model, radius=radius,
                         certifier=certifier, models_dir=models_dir, eps=eps, dlt=dlt)
    pipe = _pipeline(str(dataset), str(model), None if models_dir is None else str(models_dir))
    z = np.asarray(cert.phi_result.center, dtype=np.float64)
    out = propose_test_release(
        pipe.obfuscator,
        z,
        epsilon=eps,
        delta=dlt,
        radius=cert.radius,
        delta_p=cert.delta_p,
        r_max=cert.r_max,
        tol=cert.tol,
        lipschitz=Certifier(kind=certifier, time_limit=time_limit),  # identifies φ's certifier only
        phi=cert.phi_result,
        rng=rng,
    )
    value = None if not out.released else tuple(float(v) for v in np.asarray(out.value).ravel())
    predicted = None if value is None else _predict(pipe, value, out.noise_scale)
    finite = [float(v) for v in (out.noise_scale, out.noise_scale_effective, out.test_scale_effective)]
    assert all(math.isfinite(v) for v in finite)  # propose_test_release validated ε, δ, R and Δp
    model_block = {"dataset": cert.dataset, "obfuscator": cert.model, "digest": cert.model_digest}
    return Release.of_ptr(out, epsilon=eps, delta=dlt, certifier=cert.certifier, predicted_class=predicted,
                          model=model_block, certification=cert)


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
