"""Posthoc PTR in the mechanism protocol: certify φ for one embedding, then test and release.

At total ε the mechanism runs extended Propose-Test-Release (posthoc Alg. 1) at ε/2 and δ, whose
statement (Thm 4.4) is (2·ε/2, δ/2, R) = (ε, δ/2, R): the one ε a caller gives is that total.

Certification. :func:`certify_embedding` computes φ through privcore's φ cache and cross-checks it
with a certificate at R (φ > 0 while L(f, B(z, R)) > Δp raises CertificationError: docs/TRUST.md's
backstop). A :class:`Certification` lets an owner send later, at a time that does not depend on φ;
only certifications this process made are accepted (:func:`issued`): a caller-built or altered one
is refused and nothing is released.
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from privcore.errors import CertificationError, CheckpointError, ParameterError, ParameterTypeError
from privcore.mechanisms.posthoc import Posthoc, embedding, model_block, predict
from privcore.mechanisms.protocol import (
    DELTA,
    EPSILON,
    RADIUS,
    Options,
    Outlook,
    Release,
    Setting,
    Simulation,
)
from privcore.ranges import CERTIFIERS

__all__ = ["CERTIFIERS", "PTR", "Certification", "certify_embedding", "check_certifier", "issued",
           "ptr_record"]

#: What a progress callback receives after each decision "U(z, r) ≤ Δp?": (r, passed).
Progress = Callable[[float, bool], None]


@dataclass(frozen=True, kw_only=True)
class Certification:
    """φ of one image (posthoc Alg. 1) and the local Lipschitz constant at R. Private: computed
    from the image without noise, so never publish it (only a :class:`Release` is covered). Pass
    it to ``release`` (``certification=``) to send later, at a time that does not depend on φ; only
    one made by :func:`certify_embedding` in this process is accepted."""

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


#: id → (weak reference, fingerprint) of every Certification certify_embedding returned in this process
_ISSUED_BY_ID: dict[int, tuple[weakref.ref, tuple]] = {}
_ISSUED_LOCK = threading.Lock()


def _fingerprint(c: Certification) -> tuple:
    p = c.phi_result
    center = np.asarray(p.center, dtype=np.float64)
    return (c.dataset, c.model, c.model_digest, c.certifier, c.radius, c.delta_p, c.r_max, c.tol, c.phi,
            c.r_star, c.lipschitz, id(p), float(p.phi), p.r_star, float(p.radius), float(p.delta_p),
            float(p.r_max), float(p.tol), center.tobytes())


def _issue(c: Certification) -> Certification:
    with _ISSUED_LOCK:
        _ISSUED_BY_ID[id(c)] = (weakref.ref(c), _fingerprint(c))
    return c


def issued(c: Any) -> bool:
    """Whether ``c`` is a :class:`Certification` that :func:`certify_embedding` made in this process,
    unaltered since (a copy, ``dataclasses.replace`` or a changed field is not)."""
    if not isinstance(c, Certification):
        return False
    with _ISSUED_LOCK:
        entry = _ISSUED_BY_ID.get(id(c))
        for key in [k for k, (ref, _) in _ISSUED_BY_ID.items() if ref() is None]:
            del _ISSUED_BY_ID[key]
    return entry is not None and entry[0]() is c and entry[1] == _fingerprint(c)


def check_certifier(certifier: Any) -> str:
    """The kind of ``certifier``: one of :data:`CERTIFIERS`, or a :class:`~privcore.lipschitz.Certifier`."""
    from privcore.validation import check_choice

    if isinstance(certifier, str):  # the usual case: no import of the certifiers (and their solvers)
        return check_choice("certifier", certifier, CERTIFIERS)
    from privcore.lipschitz.certifier import Certifier

    if isinstance(certifier, Certifier):
        return certifier.kind
    raise ParameterTypeError(
        f"certifier must be one of {', '.join(map(repr, CERTIFIERS))} or a privcore.lipschitz.Certifier, "
        f"got {type(certifier).__name__}"
    )


def check_progress(progress: Any) -> None:
    """TypeError unless ``progress`` is None or callable."""
    if progress is not None and not callable(progress):
        raise ParameterTypeError(f"progress must be callable (radius, passed), got {type(progress).__name__}")


def delta_p_of(pipe: Any) -> float:
    """The card's Δp (CheckpointError saying how to compute it when there is none)."""
    delta_p = pipe.proposed_delta_p
    if delta_p is None:
        raise CheckpointError(
            f"no Δp is stored with {pipe.dataset}/{pipe.obfuscator_name}: compute it with "
            f"`python -m privcore train delta-p --dataset {pipe.dataset} --variant {pipe.obfuscator_name}`"
        )
    return float(delta_p)


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
    """φ (posthoc Alg. 1, through privcore's φ cache) and the certificate at R for an embedding
    ``z = pipe.embed(image)``, cross-checked (module docstring). ``certifier``: a kind or a
    :class:`~privcore.lipschitz.Certifier` used as given; ``epsilon_min``/``delta_min``: the smallest
    total ε and δ the search range must serve; ``progress(r, passed)`` after each decision."""
    from privcore.lipschitz.certifier import Certifier
    from privcore.mechanisms.phi_cache import cached_phi
    from privcore.mechanisms.search_range import DEFAULT_DELTA_MIN, DEFAULT_EPSILON_MIN, ptr_search_range
    from privcore.validation import check_range

    kind = check_certifier(certifier)
    check_progress(progress)
    if radius is not None:
        check_range("radius", radius, RADIUS.bounds)
    r = PTR.radius(pipe, Setting(epsilon=1.0, radius=radius))
    delta_p = delta_p_of(pipe)
    zz = embedding(pipe, z)
    eps_min = DEFAULT_EPSILON_MIN if epsilon_min is None else PTR().own_epsilon(epsilon_min)
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
    return _issue(Certification(
        dataset=str(pipe.dataset), model=str(pipe.obfuscator_name),
        model_digest=str(pipe.cards["obfuscator"]["weights"]["sha256"]), certifier=kind, radius=r,
        delta_p=delta_p, r_max=r_max, tol=tol, phi=float(phi.phi),
        r_star=None if phi.r_star is None else float(phi.r_star), lipschitz=float(cert.upper),
        lipschitz_exact=bool(cert.exact), n_decisions=int(phi.n_decisions), phi_result=phi,
    ))


def _matching(c: Any, pipe: Any, z: np.ndarray, *, radius: float, certifier: str, eps: float,
              dlt: float) -> Certification:
    """``c`` when this process made it for this model, embedding, R and certifier, with a search
    range that covers PTR's own ε and δ; else ParameterError saying what differs. Certifies nothing."""
    from privcore.mechanisms.search_range import DEFAULT_DELTA_MIN, DEFAULT_EPSILON_MIN, ptr_search_range

    if not isinstance(c, Certification):
        got = type(c).__name__
        raise ParameterTypeError(f"certification must be a Certification from privcore.certify(), got {got}")
    if not issued(c):
        raise ParameterError(
            "certification was not made by privcore.certify() in this process, or was altered since: "
            "only certifications this process computed are trusted (nothing released)"
        )
    for name, mine, theirs in (
        ("dataset", c.dataset, str(pipe.dataset)),
        ("model", c.model, str(pipe.obfuscator_name)),
        ("model digest", c.model_digest, str(pipe.cards["obfuscator"]["weights"]["sha256"])),
        ("certifier", c.certifier, certifier),
        ("radius", c.radius, radius),
        ("delta_p", c.delta_p, delta_p_of(pipe)),
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
        radius, epsilon_min=min(eps, DEFAULT_EPSILON_MIN), delta_min=min(dlt, DEFAULT_DELTA_MIN)
    )
    if c.r_max < r_max or c.tol != tol:
        raise ParameterError(
            f"certification's search range (R_max {c.r_max:.6g}, tol {c.tol:.6g}) is sized for a larger ε "
            f"or δ than total epsilon = {2 * eps!r}, delta = {dlt!r} (R_max {r_max:.6g}, tol {tol:.6g} "
            f"needed): certify with epsilon_min={2 * eps!r}, delta_min={dlt!r} (nothing released)"
        )
    return c


@dataclass(frozen=True, kw_only=True)
class PTR(Posthoc):
    """Extended Propose-Test-Release at ε/2 (posthoc Alg. 1, Thm 4.4): f(z) + Lap(Δp·R/(ε/2)) when the
    noisy test passes, else ⊥; (ε, δ/2, R) in the total ε."""

    name: str = "PTR"
    label: str = "PTR"
    parameters: tuple = (EPSILON, DELTA, RADIUS)
    needs: str = "the obfuscator and its card's Δp; φ certified per image (exact local Lipschitz constants)"
    description: str = ("extended Propose-Test-Release at ε/2: f(z) + Lap(Δp·R/(ε/2)) when the noisy test "
                        "passes, else ⊥")
    source: str = "posthoc paper, Alg. 1 and Thm 4.4"
    guarantee: str = "(ε, δ/2, R)"
    epsilon_share: float = 0.5
    epsilon_split: str = "half for its test, half for its noise"

    uses_options: ClassVar[frozenset[str]] = frozenset(
        {"certifier", "time_limit", "cache", "certification", "progress", "rng"})

    def own_epsilon(self, total: float) -> float:
        """The ε PTR runs at for a sent release whose guarantee spends ``total``: half of it."""
        return self.mechanism_epsilon(total)

    def spent(self, setting: Setting) -> Any:
        from dataclasses import replace

        from privcore.mechanisms.ptr import ptr_scales

        # Δp does not enter (2·ε/2, δ/2, R): 1.0 only fills the argument, and its calibration text goes
        g = ptr_scales(epsilon=self.own_epsilon(setting.epsilon), delta=setting.delta, radius=setting.radius,
                       delta_p=1.0).guarantee
        return replace(g, calibration="")

    def outlook(self, target: Any, setting: Setting, *, time_limit: float | None = 60.0,
                certification: Any = None) -> Outlook:
        """PTR's outlook; with this image's ``certification`` (at this R), P[release] from its φ and the
        test's scale and threshold with φ's grid spacing ζ (public)."""
        from privcore.mechanisms.ptr import ptr_scales, release_probability

        r, dp = self.radius(target, setting), delta_p_of(target)
        own = self.own_epsilon(setting.epsilon)
        zeta = 0.0 if certification is None else float(certification.zeta)
        scales = ptr_scales(epsilon=own, delta=setting.delta, radius=r, delta_p=dp, zeta=zeta)
        probability = None if certification is None else release_probability(
            certification.phi, epsilon=own, delta=setting.delta, radius=r, zeta=zeta)
        public = {"radius": r, "delta_p": dp, "test_noise_scale": scales.test_scale}
        if certification is not None:
            public |= {"zeta": zeta, "threshold": scales.threshold}
        return Outlook(mechanism=self.name, guarantee=scales.guarantee, noise_scale=scales.release_scale,
                       noise_scale_effective=scales.release_scale,
                       noise=f"Laplace b = Δp·R/(ε/2) = {scales.release_scale:.4g} per coordinate when the "
                             f"test passes (Δp = {dp:.4g})",
                       release_probability=probability, public=public)

    def certificate_key(self, target: Any, setting: Setting) -> Any:
        """φ's :class:`~privcore.mechanisms.ptr_eval.PhiKey` at ``setting``: the model, the exact certifier,
        R, Δp and the grid a release at this ε and δ bisects on (the library's range, widened below its
        smallest ε and δ as :meth:`release` widens it)."""
        from privcore.lipschitz.network import as_network
        from privcore.mechanisms.ptr_eval import PhiKey
        from privcore.mechanisms.search_range import DEFAULT_DELTA_MIN, DEFAULT_EPSILON_MIN, ptr_search_range

        r = self.radius(target, setting)
        r_max, tol = ptr_search_range(r, epsilon_min=min(self.own_epsilon(setting.epsilon),
                                                         DEFAULT_EPSILON_MIN),
                                      delta_min=min(setting.delta, DEFAULT_DELTA_MIN))
        return PhiKey(digest=as_network(target.obfuscator).digest, certifier="exact", radius=r,
                      delta_p=delta_p_of(target), r_max=r_max, tol=tol)

    def certify_inputs(self, target: Any, inputs: Any, setting: Setting, *,
                       progress: Callable[[Any], None] | None = None) -> Any:
        """φ of each embedding of ``inputs`` (:func:`~privcore.mechanisms.ptr_eval.certify_table`)."""
        from privcore.mechanisms.ptr_eval import certify_table

        key = self.certificate_key(target, setting)
        return certify_table(target.obfuscator, inputs, key, progress=progress)

    def simulate(self, target: Any, inputs: Any, setting: Setting, rng: Any, *,
                 certificates: Any = None) -> Simulation:
        """One draw of PTR at ``setting`` for each embedding of ``inputs`` given their φ table: the test
        φ + Lap(b_test) > threshold and f(z) + Lap(b) at the exact samplers' effective scales
        (:func:`~privcore.mechanisms.ptr.ptr_plans`), the classifier told Δp·R/(ε/2) as a release tells it."""
        from privcore.lipschitz.network import as_network
        from privcore.mechanisms.posthoc import classes
        from privcore.mechanisms.ptr import ptr_plans
        from privcore.mechanisms.ptr_eval import PhiTable

        if certificates is None:
            return super().simulate(target, inputs, setting, rng)
        z = np.asarray(inputs, dtype=np.float64)
        key = self.certificate_key(target, setting)
        if not isinstance(certificates, PhiTable) or certificates.key != key or len(certificates) != len(z):
            raise ParameterError(f"certificates must be the φ table of these {len(z)} inputs at {key}")
        eps = self.own_epsilon(setting.epsilon)
        out = as_network(target.obfuscator).forward(z)
        test, noise, threshold = ptr_plans(epsilon=eps, delta=setting.delta, radius=key.radius,
                                           delta_p=key.delta_p, zeta=certificates.zeta, numel=out.shape[1])
        noisy_phi = np.asarray(certificates.phi) + rng.laplace(0.0, test.effective, size=len(z))
        released = (noisy_phi > threshold) & certificates.testable()
        values = out + rng.laplace(0.0, noise.effective, size=out.shape)
        return Simulation(predicted=classes(target, values, key.delta_p * key.radius / eps),
                          released=released, noise_scale_effective=float(noise.effective))
    def simulate_release(self, target: Any, inputs: Any, setting: Setting, rng: Any) -> Simulation:
        """f(z) + Lap(Δp·R/(ε/2)) for every row, given a release (``given_release``): whether the test
        passes needs each image's φ; a ⊥ sends nothing, so an attacker of a ⊥ has only the no-release
        baseline."""
        from privcore.lipschitz.network import as_network

        look = self.outlook(target, setting)
        out = as_network(target.obfuscator).forward(np.asarray(inputs, dtype=np.float64))
        values = out + rng.laplace(0.0, look.noise_scale_effective, size=out.shape)
        return Simulation(predicted=None, released=np.ones(len(out), bool), values=values,
                          noise_scale_effective=look.noise_scale_effective, told_scale=look.noise_scale,
                          given_release=True)

    def release(self, target: Any, x: Any, setting: Setting, options: Options | None = None) -> Release:
        from privcore.lipschitz.certifier import Certifier
        from privcore.mechanisms.ptr import propose_test_release
        from privcore.mechanisms.search_range import DEFAULT_DELTA_MIN, DEFAULT_EPSILON_MIN

        opts = Options() if options is None else options
        kind = check_certifier(opts.certifier)
        check_progress(opts.progress)
        eps, dlt = self.own_epsilon(setting.epsilon), setting.delta
        z = embedding(target, x)
        r = self.radius(target, setting)
        if opts.certification is None:
            cert = certify_embedding(target, z, radius=setting.radius, certifier=opts.certifier,
                                     time_limit=opts.time_limit,
                                     epsilon_min=min(eps, DEFAULT_EPSILON_MIN) / self.epsilon_share,
                                     delta_min=min(dlt, DEFAULT_DELTA_MIN), cache=opts.cache,
                                     progress=opts.progress)
        else:
            cert = _matching(opts.certification, target, z, radius=r, certifier=kind, eps=eps, dlt=dlt)
        # the oracle only identifies φ's certifier here: φ is given, so nothing is decided again
        oracle = (opts.certifier if isinstance(opts.certifier, Certifier)
                  else Certifier(kind=kind, time_limit=opts.time_limit))
        center = np.asarray(cert.phi_result.center, dtype=np.float64)
        out = propose_test_release(target.obfuscator, center, epsilon=eps, delta=dlt, radius=cert.radius,
                                   delta_p=cert.delta_p, r_max=cert.r_max, tol=cert.tol, lipschitz=oracle,
                                   phi=cert.phi_result, rng=opts.rng)
        value = None if not out.released else tuple(float(v) for v in np.asarray(out.value).ravel())
        finite = [float(v) for v in (out.noise_scale, out.noise_scale_effective, out.test_scale_effective)]
        assert all(math.isfinite(v) for v in finite)  # propose_test_release validated ε, δ, R and Δp
        return ptr_record(out, delta=dlt, certifier=cert.certifier, model=model_block(target),
                          prediction=(None if value is None
                                      else functools.partial(predict, target, value, out.noise_scale)),
                          certification=cert)


def ptr_record(out: Any, *, delta: float, certifier: str, model: dict[str, str],
               prediction: int | Callable[[], int | None] | None = None,
               certification: Certification | None = None) -> Release:
    """The :class:`Release` of a :class:`~privcore.mechanisms.ptr.PTRResult` run at δ with its public
    parameters (R, Δp, R_max, tol, the test's scale, the certifier): the one constructor of a PTR release.
    Its ε is the total the guarantee spends; no φ, R* or trace among the public parameters."""
    phi = out.phi_result
    value = None if not out.released else tuple(float(v) for v in np.asarray(out.value).ravel())
    public = {"radius": float(phi.radius), "delta_p": float(phi.delta_p), "r_max": float(phi.r_max),
              "tol": float(phi.tol), "test_noise_scale_effective": float(out.test_scale_effective),
              "certifier": certifier}
    return Release(mechanism=PTR.name, released=bool(out.released), value=value,
                   prediction=prediction, guarantee=out.guarantee,
                   epsilon=float(out.guarantee.epsilon), delta=float(delta),
                   noise_scale=float(out.noise_scale), noise_scale_effective=float(out.noise_scale_effective),
                   public=public, model=dict(model), certification=certification,
                   test_scale_effective=float(out.test_scale_effective), mechanism_result=out)
