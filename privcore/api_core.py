"""The API on a loaded pipeline and an embedding: :func:`certify_embedding` and :func:`release_embedding`.

:func:`privcore.api.certify` and :func:`privcore.api.release` load the models, embed the image and
call these two; the dashboard, which holds its pipeline and z = g(x) already, calls them directly,
so every release, whoever asks, runs the same validations, the same backstop and the same mechanism
code. The list of the API's entry points and what they promise is :mod:`privcore.api`'s docstring.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
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
    check_range,
    check_release_epsilon,
)

__all__ = [
    "CERTIFIERS",
    "DEFAULT_DELTA",
    "RELEASE_FORMAT",
    "Certification",
    "DeadlineExceededError",
    "Release",
    "certify_embedding",
    "check_certify_arguments",
    "check_release_arguments",
    "check_release_delta",
    "release_embedding",
]

RELEASE_FORMAT = "privlens.release/1"
CERTIFIERS = ("exact", "lp", "interval")
#: δ of a release when none is given (issue 30: ≤ 1e-5 everywhere).
DEFAULT_DELTA = 1e-5
#: What a progress callback receives after each decision "U(z, r) ≤ Δp?": (r, passed).
Progress = Callable[[float, bool], None]


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
    it to ``release`` (``certification=``) to send later, at a time that does not depend on φ."""

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

    @property
    def zeta(self) -> float:
        """ζ, the spacing of φ's grid (public: a function of R, R_max and tol)."""
        return float(self.phi_result.zeta)


@dataclass(frozen=True, kw_only=True)
class Release:
    """The outcome of one release of an image: ``value`` (the noisy f(z)) or ⊥ (``released`` False,
    ``value`` None; PTR only), with its ``guarantee`` — (ε, 0, R) for ``mechanism`` "global",
    (2ε, δ/2, R) for "ptr" (Thm 4.4) — and public parameters. ``certification`` (PTR only) and
    ``mechanism_result`` (the mechanism's own result: PTR's holds φ and the noisy test value φ̂) are
    private: :meth:`document` never includes them. Nor ``warnings`` (:func:`privcore.domain.check`, filled
    by :func:`privcore.api.release`: why the image may not be like the dataset's images, plain sentences,
    empty when it looks in domain): they are computed from the image without noise, for its owner only."""

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
    mechanism_result: Any = field(default=None, repr=False, compare=False)
    warnings: tuple[str, ...] = ()

    @classmethod
    def of_global(cls, out: Any, *, model: dict[str, str], predicted_class: int | None = None) -> Release:
        """A :class:`~privcore.mechanisms.GlobalRelease` with its public parameters (R, G and how it was
        certified, the clipping box, the sensitivity): the one constructor of a global release."""
        params = out.parameters()
        keys = ("radius", "global_lipschitz", "global_lipschitz_how", "clip_box", "sensitivity")
        return cls(mechanism="global", released=True,
                   value=tuple(float(v) for v in np.asarray(out.value).ravel()),
                   predicted_class=predicted_class, guarantee=out.guarantee, epsilon=float(out.epsilon),
                   delta=0.0, noise_scale=float(out.noise_scale),
                   noise_scale_effective=float(out.noise_scale_effective),
                   public={k: params[k] for k in keys}, model=dict(model), mechanism_result=out)

    @classmethod
    def of_ptr(cls, out: Any, *, epsilon: float, delta: float, certifier: str, model: dict[str, str],
               predicted_class: int | None = None, certification: Certification | None = None) -> Release:
        """A :class:`~privcore.mechanisms.PTRResult` run at ``epsilon``/``delta`` (PTR's own) with its
        public parameters (R, Δp, R_max, tol, the test's scale, the certifier): the one constructor of
        a PTR release. No φ, R* or trace among them: those stay private."""
        phi = out.phi_result
        value = None if not out.released else tuple(float(v) for v in np.asarray(out.value).ravel())
        public = {"radius": float(phi.radius), "delta_p": float(phi.delta_p), "r_max": float(phi.r_max),
                  "tol": float(phi.tol), "test_noise_scale_effective": float(out.test_scale_effective),
                  "certifier": certifier}
        return cls(mechanism="ptr", released=bool(out.released), value=value, predicted_class=predicted_class,
                   guarantee=out.guarantee, epsilon=float(epsilon), delta=float(delta),
                   noise_scale=float(out.noise_scale), noise_scale_effective=float(out.noise_scale_effective),
                   public=public, model=dict(model), certification=certification,
                   test_scale_effective=float(out.test_scale_effective), mechanism_result=out)

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


# ----------------------------------------------------------------------------- checks


def _check_certifier(certifier: Any) -> str:
    """The kind of ``certifier``: one of :data:`CERTIFIERS`, or a :class:`~privcore.lipschitz.Certifier`."""
    if isinstance(certifier, str):  # the usual case: no import of the certifiers (and their solvers)
        return check_choice("certifier", certifier, CERTIFIERS)
    from privcore.lipschitz.certifier import Certifier

    if isinstance(certifier, Certifier):
        return certifier.kind
    raise ParameterTypeError(
        f"certifier must be one of {', '.join(map(repr, CERTIFIERS))} or a privcore.lipschitz.Certifier, "
        f"got {type(certifier).__name__}"
    )


def _check_progress(progress: Any) -> None:
    if progress is not None and not callable(progress):
        raise ParameterTypeError(f"progress must be callable (radius, passed), got {type(progress).__name__}")


def check_certify_arguments(*, radius: Any, certifier: Any, progress: Any = None) -> str:
    """The arguments of a certification checked before anything is computed; the certifier's kind."""
    kind = _check_certifier(certifier)
    if radius is not None:
        check_range("radius", radius, RADIUS_RANGE)
    _check_progress(progress)
    return kind


def check_release_arguments(*, epsilon: Any, delta: Any, mechanism: Any, radius: Any, certifier: Any,
                            certification: Any = None, progress: Any = None) -> tuple[Any, float, float]:
    """Every argument of a release checked before anything is computed: the mechanism's registry
    spec, ε (the mechanism's own, its total in EPSILON_RANGE) and δ; ParameterError otherwise."""
    from privcore.mechanisms.registry import get as get_mechanism

    spec = get_mechanism(mechanism)
    if spec.family != "posthoc":
        raise ParameterError(
            f"mechanism {spec.name!r} releases a classifier's output (the dashboard's Inference privacy "
            "page); privcore.release takes 'global' or 'ptr'"
        )
    eps, dlt = check_release_epsilon(epsilon, share=spec.epsilon_share), check_release_delta(delta)
    check_certify_arguments(radius=radius, certifier=certifier, progress=progress)
    if spec.name == "Global" and certification is not None:
        raise ParameterError("certification applies to mechanism 'ptr' only (the global mechanism "
                             "certifies nothing per image)")
    return spec, eps, dlt


def _embedding(pipe: Any, z: Any) -> np.ndarray:
    """z as a float64 vector of the pipeline's latent dimension (ParameterError otherwise)."""
    zz = check_finite_array("z", z).reshape(-1)
    if zz.shape != (int(pipe.latent_dim),):
        raise ParameterError(f"z must be one image's embedding ({pipe.latent_dim} numbers), got {zz.size}")
    return zz


def _model_block(pipe: Any) -> dict[str, str]:
    return {"dataset": str(pipe.dataset), "obfuscator": str(pipe.obfuscator_name),
            "digest": str(pipe.cards["obfuscator"]["weights"]["sha256"])}


def _radius(pipe: Any, radius: float | None) -> float:
    return float(pipe.radius if radius is None else check_range("radius", radius, RADIUS_RANGE))


def _delta_p(pipe: Any) -> float:
    """The card's Δp (CheckpointError saying how to compute it when there is none)."""
    delta_p = pipe.proposed_delta_p
    if delta_p is None:
        raise CheckpointError(
            f"no Δp is stored with {pipe.dataset}/{pipe.obfuscator_name}: compute it with "
            f"`python -m privcore train delta-p --dataset {pipe.dataset} --variant {pipe.obfuscator_name}`"
        )
    return float(delta_p)


# ----------------------------------------------------------------------------- certify


def certify_embedding(
    pipe: Any,
    z: Any,
    *,
    radius: float | None = None,
    certifier: Any = "exact",
    epsilon_min: float | None = None,
    delta_min: float | None = None,
    time_limit: float | None = 60.0,
    cache: Any = True,
    progress: Progress | None = None,
) -> Certification:
    """:func:`privcore.api.certify` for an embedding ``z = pipe.embed(image)`` of a loaded
    :class:`~privcore.pipeline.Pipeline`: φ (posthoc Alg. 1 through privcore's φ cache) and the
    certificate at R, cross-checked (φ > 0 with a certified L(f, B(z, R)) above Δp raises
    CertificationError). ``certifier``: a kind or a :class:`~privcore.lipschitz.Certifier` used as
    given (its own time limit and certificate cache); ``progress(r, passed)`` after each decision."""
    from privcore.lipschitz.certifier import Certifier
    from privcore.mechanisms.phi_cache import cached_phi
    from privcore.mechanisms.search_range import DEFAULT_DELTA_MIN, DEFAULT_EPSILON_MIN, ptr_search_range

    kind = check_certify_arguments(radius=radius, certifier=certifier, progress=progress)
    r, delta_p = _radius(pipe, radius), _delta_p(pipe)
    zz = _embedding(pipe, z)
    eps_min = DEFAULT_EPSILON_MIN if epsilon_min is None else epsilon_min
    dlt_min = DEFAULT_DELTA_MIN if delta_min is None else delta_min
    r_max, tol = ptr_search_range(r, epsilon_min=eps_min, delta_min=dlt_min)
    oracle = certifier if isinstance(certifier, Certifier) else Certifier(kind=kind, time_limit=time_limit,
                                                                          cache=cache)
    phi = cached_phi(pipe.obfuscator, zz, radius=r, delta_p=delta_p, r_max=r_max, tol=tol, certifier=oracle,
                     cache=cache, progress=progress)
    cert = oracle.certify(pipe.obfuscator, zz, r)
    if phi.phi > 0 and cert.lower > delta_p:  # backstop (docs/TRUST.md): the test at R cannot pass
        raise CertificationError(
            f"φ = {phi.phi:.6g} > 0 but the certified L(f, B(z, {r:g})) ≥ {cert.lower:.6g} is above "
            f"Δp = {delta_p:.6g}: the certification is inconsistent, so nothing is released"
        )
    return Certification(
        dataset=str(pipe.dataset),
        model=str(pipe.obfuscator_name),
        model_digest=str(pipe.cards["obfuscator"]["weights"]["sha256"]),
        certifier=kind,
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


def _matching(certification: Any, pipe: Any, z: np.ndarray, *, radius: float | None, certifier: str,
              eps: float, dlt: float) -> Certification:
    """``certification`` when it was computed for this model, embedding, R and certifier, with a
    search range that covers ε and δ; else ParameterError saying what differs. Certifies nothing."""
    from privcore.mechanisms.search_range import DEFAULT_DELTA_MIN, DEFAULT_EPSILON_MIN, ptr_search_range

    if not isinstance(certification, Certification):
        got = type(certification).__name__
        raise ParameterTypeError(f"certification must be a Certification from privcore.certify(), got {got}")
    c = certification
    r, delta_p = _radius(pipe, radius), _delta_p(pipe)
    for name, mine, theirs in (
        ("dataset", c.dataset, str(pipe.dataset)),
        ("model", c.model, str(pipe.obfuscator_name)),
        ("model digest", c.model_digest, str(pipe.cards["obfuscator"]["weights"]["sha256"])),
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


# ----------------------------------------------------------------------------- release


def release_embedding(
    pipe: Any,
    z: Any,
    *,
    epsilon: float,
    delta: float = DEFAULT_DELTA,
    mechanism: str = "global",
    radius: float | None = None,
    certifier: Any = "exact",
    time_limit: float | None = 60.0,
    cache: Any = True,
    rng: Any = None,
    certification: Certification | None = None,
    progress: Progress | None = None,
) -> Release:
    """:func:`privcore.api.release` for an embedding ``z = pipe.embed(image)`` of a loaded
    pipeline, with the same arguments and checks (all before anything is computed) but
    ``min_seconds``. PTR without ``certification`` certifies through :func:`certify_embedding`
    (``certifier``, ``cache`` and ``progress`` as there); with one, it certifies nothing."""
    spec, eps, dlt = check_release_arguments(epsilon=epsilon, delta=delta, mechanism=mechanism,
                                             radius=radius, certifier=certifier,
                                             certification=certification, progress=progress)
    zz = _embedding(pipe, z)
    if spec.name == "Global":
        return _release_global(pipe, zz, epsilon=eps, radius=radius, time_limit=time_limit, rng=rng)
    return _release_ptr(pipe, zz, eps=eps, dlt=dlt, radius=radius, certifier=certifier, time_limit=time_limit,
                        cache=cache, rng=rng, certification=certification, progress=progress)


def _predict(pipe: Any, value: tuple[float, ...], noise_scale: float) -> int:
    """The release classifier's class for a released vector, told the noise scale it carries."""
    import torch

    logits = pipe.classify(torch.tensor([value], dtype=torch.float32), float(noise_scale))
    return int(logits.argmax(-1)[0])


def _release_global(pipe: Any, z: np.ndarray, *, epsilon: float, radius: float | None,
                    time_limit: float | None, rng: Any) -> Release:
    """The certified global mechanism on one embedding (G certified once per model and process)."""
    from privcore.mechanisms.global_mechanism import card_global_constant, global_release

    try:
        constant = card_global_constant(pipe.obfuscator, pipe.cards["obfuscator"],
                                        time_limit=60.0 if time_limit is None else time_limit)
    except ValueError as exc:
        raise CheckpointError(f"{pipe.dataset}/{pipe.obfuscator_name}: {exc}") from exc
    out = global_release(pipe.obfuscator, z, epsilon=epsilon, radius=_radius(pipe, radius), constant=constant,
                         rng=rng)
    value = tuple(float(v) for v in np.asarray(out.value).ravel())
    predicted = _predict(pipe, value, out.noise_scale)
    return Release.of_global(out, model=_model_block(pipe), predicted_class=predicted)


def _release_ptr(pipe: Any, z: np.ndarray, *, eps: float, dlt: float, radius: float | None, certifier: Any,
                 time_limit: float | None, cache: Any, rng: Any, certification: Certification | None,
                 progress: Progress | None) -> Release:
    """Posthoc PTR on one embedding: certify (or check ``certification``), test, release."""
    from privcore.lipschitz.certifier import Certifier
    from privcore.mechanisms.ptr import propose_test_release
    from privcore.mechanisms.search_range import DEFAULT_DELTA_MIN, DEFAULT_EPSILON_MIN

    kind = _check_certifier(certifier)
    if certification is None:
        cert = certify_embedding(pipe, z, radius=radius, certifier=certifier, time_limit=time_limit,
                                 epsilon_min=min(eps, DEFAULT_EPSILON_MIN),
                                 delta_min=min(dlt, DEFAULT_DELTA_MIN), cache=cache, progress=progress)
    else:
        cert = _matching(certification, pipe, z, radius=radius, certifier=kind, eps=eps, dlt=dlt)
    # the oracle only identifies φ's certifier here: φ is given, so nothing is decided again
    oracle = certifier if isinstance(certifier, Certifier) else Certifier(kind=kind, time_limit=time_limit)
    center = np.asarray(cert.phi_result.center, dtype=np.float64)
    out = propose_test_release(pipe.obfuscator, center, epsilon=eps, delta=dlt, radius=cert.radius,
                               delta_p=cert.delta_p, r_max=cert.r_max, tol=cert.tol, lipschitz=oracle,
                               phi=cert.phi_result, rng=rng)
    value = None if not out.released else tuple(float(v) for v in np.asarray(out.value).ravel())
    predicted = None if value is None else _predict(pipe, value, out.noise_scale)
    finite = [float(v) for v in (out.noise_scale, out.noise_scale_effective, out.test_scale_effective)]
    assert all(math.isfinite(v) for v in finite)  # propose_test_release validated ε, δ, R and Δp
    model_block = {"dataset": cert.dataset, "obfuscator": cert.model, "digest": cert.model_digest}
    return Release.of_ptr(out, epsilon=eps, delta=dlt, certifier=cert.certifier, predicted_class=predicted,
                          model=model_block, certification=cert)
