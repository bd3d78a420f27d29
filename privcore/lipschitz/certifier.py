"""The sensitivity oracle for PTR: ``Certifier(kind="exact" | "lp" | "interval")``.

A certifier is chosen *before* the query (docs/DESIGN.md, "certifier choice"):

* ``exact`` — U = L(f, B(z, r)), LipMIP solved to optimality (Jordan & Dimakis 2020): the
  largest R*, the most releases, the slowest.
* ``lp`` — U = min(LP relaxation of LipMIP with big-M from interval bounds, interval bound).
* ``interval`` — U = interval propagation of the Jacobian (min with nothing else).

Each U is monotone under ball inclusion (B(z', r') ⊆ B(z, r) ⇒ U(z', r') ≤ U(z, r); proofs in
:mod:`privcore.lipschitz.bounds` and :mod:`privcore.lipschitz.milp`; a minimum of monotone
functions is monotone), which is all PTR's φ needs, so every kind is private. Switching kind
per step because a solve ran out of time is *not* allowed (the switch would depend on the
data): a time-out raises :class:`~privcore.errors.CertificationError` and the query fails.

``decide(f, z, r, τ)`` returns exactly ``U(z, r) ≤ τ`` for the certifier's own U:

* exact: U = L, so any certified bracket of L settles it — interval/LP upper ≤ τ ⇒ pass, a
  verified Jacobian norm > τ ⇒ fail — and otherwise LipMIP with early stops decides
  (:func:`~privcore.lipschitz.decide.decide_exact`).
* lp / interval: bounds on L are *not* U, so they may only settle a step through U itself: for
  lp, the interval bound ≤ τ ⇒ pass (U_lp ≤ U_int by definition), otherwise U_lp is computed
  and compared. (A verified Jacobian norm v > τ would imply a fail too — U ≥ L ≥ v > τ for
  every sound relaxation, so it could never change the answer — but one LP is cheaper than the
  sampling that could skip it, and a memo fact from L must never stand in for a value of U.)
  The interval bound is computed directly (it is cheaper than anything that could skip it).

Cached certificates (:mod:`privcore.lipschitz.cache`) are keyed by an HMAC of the model digest,
the centre's exact bytes and the parameters, and hold no point of the ball (a certificate's
``argmax`` is dropped before it is stored or returned, so a certificate is the same whether it
was computed or read back). What is read from disk never makes a decision pass
(docs/TRUST.md): a cached certificate is returned by ``certify`` as a report and may make a
decision fail; ``decide`` and ``__call__`` rest on bounds computed here. φ through the same
cache is a mechanism's job: :func:`privcore.mechanisms.phi_cache.cached_phi` takes a
:class:`Certifier`.

A memo per (model, centre, norms) remembers what was learnt, per certifier instance and so per
kind — never across kinds: an upper fact (r, u) means U(r) ≤ u and so U(r') ≤ τ for every
r' ≤ r when u ≤ τ (monotonicity); a lower fact (ρ, v) means U(r) ≥ v for every r ≥ ρ (for
exact/lp/interval alike from a verified point at distance ρ, or from U(ρ) = v itself).
``fail_radius`` reports the least such ρ with v > τ, which PTR's bisection uses to order its
questions (never to answer one).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from privcore.errors import CertificationError
from privcore.lipschitz.backends import SOLVERS
from privcore.lipschitz.ball import Ball
from privcore.lipschitz.cache import LipschitzCache, resolve_cache
from privcore.lipschitz.engine import (
    CERTIFIERS,
    MAX_RADIUS,
    RELAXATION_VERSION,
    Certificate,
    decide_exact,
    local_lipschitz,
    relaxed_upper_bound,
)
from privcore.lipschitz.network import ReluNetwork, as_network
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.portfolio import portfolio_lipschitz
from privcore.validation import check_choice, check_finite_array, check_in_range, check_int, check_positive

__all__ = [
    "Certifier",
    "center_hex",
    "certificate_from_dict",
    "certificate_key",
    "load_certificate",
    "store_certificate",
]


class _Facts:
    """Monotone facts about one U(·) as a function of the radius (see module docstring)."""

    __slots__ = ("lowers", "uppers")

    def __init__(self) -> None:
        self.uppers: list[tuple[float, float]] = []  # (r, u): U(r) ≤ u
        self.lowers: list[tuple[float, float]] = []  # (ρ, v): U(r) ≥ v for r ≥ ρ

    def add_upper(self, r: float, u: float) -> None:
        if not math.isfinite(u):
            return
        if any(r2 >= r and u2 <= u for r2, u2 in self.uppers):
            return
        self.uppers = [(r2, u2) for r2, u2 in self.uppers if not (r >= r2 and u <= u2)] + [(r, u)]

    def add_lower(self, rho: float, v: float) -> None:
        if not v > 0:
            return
        if any(r2 <= rho and v2 >= v for r2, v2 in self.lowers):
            return
        self.lowers = [(r2, v2) for r2, v2 in self.lowers if not (rho <= r2 and v >= v2)] + [(rho, v)]

    def fail_radius(self, tau: float) -> float | None:
        """The least ρ of a lower fact above τ: U(r) > τ is known for every r ≥ ρ."""
        return min((r2 for r2, v2 in self.lowers if v2 > tau), default=None)

    def decide(self, r: float, tau: float) -> bool | None:
        if any(r2 >= r and u2 <= tau for r2, u2 in self.uppers):
            return True
        if any(r2 <= r and v2 > tau for r2, v2 in self.lowers):
            return False
        return None


class _Memo:
    """Thread-safe LRU of :class:`_Facts` per (model hash, centre bytes, norms)."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._lock = threading.RLock()
        self._facts: OrderedDict[tuple, _Facts] = OrderedDict()
        self._max = max_entries
        self.stats: dict[str, int] = {}

    def facts(self, key: tuple) -> _Facts:
        with self._lock:
            f = self._facts.pop(key, None) or _Facts()
            self._facts[key] = f
            while len(self._facts) > self._max:
                self._facts.popitem(last=False)
            return f

    def count(self, how: str) -> None:
        with self._lock:
            self.stats[how] = self.stats.get(how, 0) + 1

    def clear(self) -> None:
        with self._lock:
            self._facts.clear()
            self.stats.clear()


def _center_bytes(center: np.ndarray) -> bytes:
    return np.ascontiguousarray(center, dtype="<f8").tobytes()


def center_hex(center: np.ndarray) -> str:
    """The centre's exact float64 bytes: part of a cache key, which the cache only ever stores as a
    keyed hash (HMAC under the installation secret), so no key spells out or fingerprints an
    embedding for anyone without the secret."""
    return _center_bytes(center).hex()


def certificate_key(digest: str, center: np.ndarray, radius: float, *, kind: str, norms: Norms) -> dict:
    """Cache key of a certificate: model hash, the exact centre bytes, radius, norms, kind (and, for
    the ``lp``/``interval`` relaxations, :data:`~privcore.lipschitz.engine.RELAXATION_VERSION`)."""
    key = {
        "model": digest,
        "center": center_hex(np.asarray(center, dtype=np.float64).reshape(-1)),
        "radius": float(radius),
        "input_norm": norms.input,
        "output_norm": norms.output,
        "certifier": kind,
    }
    if kind != "exact":
        key["relaxation"] = RELAXATION_VERSION
    return key


def certificate_from_dict(d: dict) -> Certificate:
    """Inverse of ``dataclasses.asdict`` for :class:`Certificate` (raises on any mismatch)."""
    d = dict(d)
    if d.get("argmax") is not None:
        d["argmax"] = tuple(float(v) for v in d["argmax"])
    return Certificate(**d)


def load_certificate(
    cache: LipschitzCache, key: dict, *, digest: str, radius: float, kind: str, norms: Norms
) -> Certificate | None:
    """The cached exact certificate for ``key`` if there is one and it is for exactly this model,
    radius, kind and norms (an authentic row that does not fit is deleted), else None."""
    hit = cache.get("certificate", key)
    if hit is None:
        return None
    try:
        cert = certificate_from_dict(hit)
        if (
            cert.exact
            and cert.argmax is None
            and (cert.model_hash, cert.radius, cert.certifier) == (digest, radius, kind)
            and (cert.input_norm, cert.output_norm) == (norms.input, norms.output)
            and math.isfinite(cert.upper)
            and cert.lower <= cert.upper
        ):
            return cert
    except (TypeError, ValueError):
        pass
    cache.delete("certificate", key)
    return None


def store_certificate(cache: LipschitzCache | None, key: dict, cert: Certificate) -> Certificate:
    """``cert`` without its ``argmax`` (a point of the ball, i.e. near the private centre), stored
    in ``cache`` when it is exact; returns what was stored, so computed and cached agree."""
    kept = replace(cert, argmax=None)
    if cache is not None and kept.exact:
        cache.put("certificate", key, asdict(kept))
    return kept


@dataclass(frozen=True, kw_only=True)
class Certifier:
    """Sensitivity oracle ``U(f, center, radius)`` with an exact ``decide`` (posthoc PTR, docs/DESIGN.md).

    ``kind``: "exact", "lp" or "interval" (fixed before any query). ``solver``: "auto", "gurobi"
    or "highs". ``time_limit`` (seconds per certificate or decision, its split
    step, bound tightening, LPs and MILP together; None = no limit): reaching it raises
    CertificationError. ``cache``: None, True (default directory), a directory or a
    :class:`LipschitzCache` for certificates. Norms as in
    :func:`~privcore.lipschitz.engine.local_lipschitz` (the product's default ℓ∞→ℓ1).
    """

    kind: str = "exact"
    solver: str = "auto"
    time_limit: float | None = 60.0
    cache: Any = None
    input_norm: str = "linf"
    output_norm: str = "l1"
    threads: int | None = None
    _memo: _Memo = field(default_factory=_Memo, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, CERTIFIERS)
        check_choice("solver", self.solver, SOLVERS)
        self.norms  # noqa: B018 - validates input_norm and output_norm now, not at the first query
        if self.time_limit is not None:
            object.__setattr__(self, "time_limit", check_positive("time_limit", self.time_limit))
        if self.threads is not None:
            object.__setattr__(self, "threads", check_int("threads", self.threads, minimum=1))
        object.__setattr__(self, "cache", resolve_cache(self.cache))

    # -- helpers ------------------------------------------------------------------------------------
    @cached_property
    def norms(self) -> Norms:
        """The certifier's :class:`~privcore.lipschitz.norms.Norms` (built once)."""
        return Norms(input=self.input_norm, output=self.output_norm)

    @property
    def stats(self) -> dict[str, int]:
        """How many decisions each kind of evidence settled (memo, interval, sampled, lp, mip-…)."""
        return dict(self._memo.stats)

    def _prepare(self, f: Any, center: Any, radius: Any) -> tuple[ReluNetwork, np.ndarray, float, _Facts]:
        net = as_network(f)
        c = check_finite_array("center", center).reshape(-1)
        if c.shape[0] != net.in_dim:
            raise ValueError(f"center must have the network's input dimension {net.in_dim}, got {c.shape[0]}")
        r = check_in_range("radius", radius, 0.0, MAX_RADIUS, high_open=False)  # the engine's range
        facts = self._memo.facts((net.digest, _center_bytes(c), self.input_norm, self.output_norm))
        return net, c, r, facts

    # -- the oracle ---------------------------------------------------------------------------------
    def certify(self, f: Any, center: Any, radius: float) -> Certificate:
        """The :class:`Certificate` of this kind at (center, radius), through the cache (without its
        ``argmax``, computed or cached alike: see the module docstring). A certificate read from the
        cache is a report: it was not computed by this process, so only its lower bound (which can
        only make a decision fail) enters the memo; a pass needs a bound computed here."""
        return self._certify(f, center, radius, cached=True)

    def _certify(self, f: Any, center: Any, radius: float, *, cached: bool) -> Certificate:
        net, c, r, facts = self._prepare(f, center, radius)
        cache: LipschitzCache | None = self.cache
        key = certificate_key(net.digest, c, r, kind=self.kind, norms=self.norms)
        if cache is not None and cached:
            hit = load_certificate(cache, key, digest=net.digest, radius=r, kind=self.kind, norms=self.norms)
            if hit is not None:
                facts.add_lower(hit.radius, hit.upper if self.kind != "exact" else hit.lower)
                return hit
        cert = self._value(net, c, r)
        if cert.exact:
            self._learn(facts, cert)
        return store_certificate(cache, key, cert)

    def _value(self, net: ReluNetwork, c: np.ndarray, r: float) -> Certificate:
        """The certificate computed here: an exact value with ``solver="auto"`` and a time limit from
        :func:`~privcore.lipschitz.portfolio.portfolio_lipschitz` (the engine and the MILP, the one
        predicted cheaper first; no race, so no process is started), otherwise from
        :func:`~privcore.lipschitz.engine.local_lipschitz` (module docstring)."""
        if self.kind == "exact" and self.solver == "auto" and self.time_limit is not None:
            return portfolio_lipschitz(net, c, r, time_limit=self.time_limit, threads=self.threads,
                                       race=False, **self.norms.kwargs)
        return local_lipschitz(net, c, r, solver=self.solver, time_limit=self.time_limit, certifier=self.kind,
                               threads=self.threads, **self.norms.kwargs)

    def _learn(self, facts: _Facts, cert: Certificate) -> None:
        facts.add_upper(cert.radius, cert.upper)
        facts.add_lower(cert.radius, cert.upper if self.kind != "exact" else cert.lower)

    def __call__(self, f: Any, center: np.ndarray, radius: float, /) -> float:
        """U(center, radius): a certified upper bound, monotone under ball inclusion, computed by
        this process (never read from the cache: it may calibrate noise); raises
        CertificationError when this kind's value could not be computed (e.g. a MILP time-out)."""
        cert = self._certify(f, center, radius, cached=False)
        if not cert.exact:
            raise CertificationError(
                f"{self.kind} certificate at radius {radius:g} not completed ({cert.solver}: {cert.status}, "
                f"proven bound {cert.upper:.6g}); a time-out cannot be used as this certifier's value"
            )
        return float(cert.upper)

    def decide(self, f: Any, center: np.ndarray, radius: float, threshold: float, /) -> bool:
        """Exactly ``U(center, radius) ≤ threshold`` for this kind's U (see module docstring)."""
        net, c, r, facts = self._prepare(f, center, radius)
        tau = check_positive("threshold", threshold)
        known = facts.decide(r, tau)
        if known is not None:
            self._memo.count("memo")
            return known
        if self.kind == "exact":
            dec = decide_exact(
                net, c, r, tau, solver=self.solver, time_limit=self.time_limit, threads=self.threads,
                **self.norms.kwargs,
            )
            facts.add_upper(r, dec.upper)
            facts.add_lower(dec.lower_radius, dec.lower)
            for rr, u in dec.upper_facts:
                facts.add_upper(rr, u)
            for rho, v in dec.lower_facts:
                facts.add_lower(rho, v)
            self._memo.count(dec.how)
            return dec.passed
        if self.kind == "interval":
            u = relaxed_upper_bound(net, c, r, kind="interval", **self.norms.kwargs)
            facts.add_upper(r, u)
            facts.add_lower(r, u)
            self._memo.count("interval")
            return u <= tau
        # lp
        u_int = Ball.of(net, c, r, **self.norms.kwargs).relaxed_interval
        if u_int <= tau:
            facts.add_upper(r, u_int)
            self._memo.count("interval")
            return True
        u = relaxed_upper_bound(
            net, c, r, kind="lp", solver="highs" if self.solver == "auto" else self.solver,
            **self.norms.kwargs,
        )
        facts.add_upper(r, u)
        facts.add_lower(r, u)
        self._memo.count("lp")
        return u <= tau

    def fail_radius(self, f: Any, center: np.ndarray, threshold: float, /) -> float | None:
        """The least radius from which ``U(center, ·) > threshold`` is already known from this
        certifier's memo (a verified point, or a value), or None. A hint for the order of PTR's
        questions (:func:`~privcore.mechanisms.phi.compute_phi`); ``decide`` at any radius ≥ it
        answers False from the memo."""
        *_, facts = self._prepare(f, center, MAX_RADIUS)
        return facts.fail_radius(check_positive("threshold", threshold))

    def clear_memo(self) -> None:
        """Forget what was learnt (the persistent cache is untouched)."""
        self._memo.clear()
