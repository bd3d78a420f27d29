"""φ(z) of posthoc PTR through the persistent cache: :func:`cached_phi`.

φ is a mechanism's quantity (:func:`privcore.mechanisms.phi.compute_phi`) evaluated with a
Lipschitz oracle, so its cache lives here, on the mechanisms side, and takes a
:class:`~privcore.lipschitz.Certifier`; :mod:`privcore.lipschitz` never imports the mechanisms.
The entries share the certificates' authenticated store (:mod:`privcore.lipschitz.cache`, kind
``"phi"``): keys are HMACs of the model digest, the centre's exact bytes and the parameters, and
a value holds no point of the ball. A row read back is a claim, not a proof: its one pass that
matters (the test at R*) is decided again here before the row is used (docs/TRUST.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np

from privcore.errors import CertificationError
from privcore.lipschitz.bounds import sampled_lower_bound
from privcore.lipschitz.cache import resolve_cache
from privcore.lipschitz.certifier import Certifier, center_hex
from privcore.lipschitz.engine import RELAXATION_VERSION
from privcore.lipschitz.network import as_network
from privcore.mechanisms.phi import PhiResult, compute_phi
from privcore.validation import check_finite_array

__all__ = ["cached_phi", "cached_phi_source", "phi_key"]


def phi_key(digest: str, z: np.ndarray, *, radius: float, delta_p: float, r_max: float, tol: float,
            certifier: Certifier) -> dict:
    """Cache key of φ: model digest, z's exact bytes, R, Δp, R_max, tol, norms, certifier kind and, for
    a relaxation, its version (the cache stores only its HMAC)."""
    return {
        "model": digest,
        "center": center_hex(z),
        "radius": float(radius),
        "delta_p": float(delta_p),
        "r_max": float(r_max),
        "tol": float(tol),
        "input_norm": certifier.input_norm,
        "output_norm": certifier.output_norm,
        "certifier": certifier.kind,
        **({} if certifier.kind == "exact" else {"relaxation": RELAXATION_VERSION}),
    }


def _phi_value(res: PhiResult) -> dict:
    """What the cache stores of a PhiResult: everything but the centre (the query supplies it)."""
    value = asdict(res)
    del value["center"]
    return value


def cached_phi(
    f: Any,
    z: Any,
    *,
    radius: float,
    delta_p: float,
    r_max: float,
    tol: float,
    certifier: Certifier,
    cache: Any = True,
    progress: Callable[[float, bool], None] | None = None,
) -> PhiResult:
    """φ(z) through the cache: :func:`cached_phi_source`'s φ."""
    return cached_phi_source(f, z, radius=radius, delta_p=delta_p, r_max=r_max, tol=tol, certifier=certifier,
                             cache=cache, progress=progress)[0]


def cached_phi_source(
    f: Any,
    z: Any,
    *,
    radius: float,
    delta_p: float,
    r_max: float,
    tol: float,
    certifier: Certifier,
    cache: Any = True,
    progress: Callable[[float, bool], None] | None = None,
) -> tuple[PhiResult, str]:
    """φ(z) of posthoc PTR through the persistent cache, and where it came from (``"cache"``: a
    verified hit; ``"computed"``) (key: model hash, z bytes, R, Δp, R_max,
    tol, norms, certifier kind — stored only as an HMAC); on a miss
    :func:`~privcore.mechanisms.phi.compute_phi` with ``certifier`` as the oracle. φ never depends
    on ε or δ (docs/DESIGN.md), so one entry serves every slider position. ``progress(r, passed)``
    is called after each decision of a computation (not for a hit's check); if it raises, the error
    propagates and nothing is stored. The stored value holds no
    embedding: a hit is rebuilt with ``z`` as its centre, and must carry this model's digest, this
    certifier's kind and norms and this grid (else it is deleted and recomputed, never trusted).

    Nothing read from disk makes the test pass: a hit with φ > 0 is used only once ``certifier``
    has decided U(z, R*) ≤ Δp again in this process (every smaller radius follows by
    monotonicity; its fails can only lower φ); otherwise it is reported, deleted and recomputed.
    Backstop, whatever the source: φ > 0 while a point of B(z, R) verified in float64 has a
    Jacobian norm above Δp (so L(f, B(z, R)) > Δp is certified) raises
    :class:`~privcore.errors.CertificationError`, and nothing is released."""
    if not isinstance(certifier, Certifier):
        raise TypeError(f"certifier must be a privcore.lipschitz.Certifier, got {type(certifier).__name__}")
    net = as_network(f)
    zz = check_finite_array("z", z).reshape(-1)
    store = resolve_cache(cache)
    key = phi_key(net.digest, zz, radius=radius, delta_p=delta_p, r_max=r_max, tol=tol, certifier=certifier)
    if store is not None:
        hit = store.get("phi", key)
        if hit is not None:
            try:
                res = PhiResult(
                    **{
                        **hit,
                        "evaluations": tuple((float(a), bool(b)) for a, b in hit["evaluations"]),
                        "center": tuple(float(v) for v in zz),
                    }
                )
                if res.matches(z=zz, radius=radius, delta_p=delta_p, r_max=r_max, tol=tol,
                               model_digest=net.digest, certifier=certifier.kind, **certifier.norms.kwargs):
                    if res.r_star is None or certifier.decide(net, zz, res.r_star, delta_p):
                        return _backstop(net, res, certifier), "cache"
                    warnings.warn(f"a cached φ in {store.path} did not verify (U(z, R*) > Δp here): "
                                  "deleted and recomputed", RuntimeWarning, stacklevel=2)
            except (TypeError, ValueError, KeyError):
                pass
            store.delete("phi", key)
    # the parsed network stands in for f: the oracle is all compute_phi evaluates, and parsing once
    # spares a model hash per decision (its digest is f's model_hash)
    res = _backstop(net, compute_phi(net, zz, radius=radius, delta_p=delta_p, r_max=r_max, tol=tol,
                                     lipschitz=certifier, progress=progress), certifier)
    if store is not None:
        store.put("phi", key, _phi_value(res))
    return res, "computed"


def _backstop(net: Any, res: PhiResult, certifier: Certifier) -> PhiResult:
    """``res`` unless φ > 0 while a float64-verified point of B(z, R) has a Jacobian norm above Δp
    (then the test at R cannot have passed: :class:`CertificationError`)."""
    if res.r_star is None:
        return res
    low = sampled_lower_bound(net, np.asarray(res.center), res.radius, **certifier.norms.kwargs)
    if low.value > res.delta_p:
        raise CertificationError(
            f"φ = {res.phi:.6g} > 0 but a verified point of B(z, {res.radius:g}) has a Jacobian norm "
            f"{low.value:.6g} above Δp = {res.delta_p:.6g}: the certification is inconsistent, so "
            "nothing is released"
        )
    return res
