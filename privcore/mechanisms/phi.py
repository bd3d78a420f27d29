"""φ(z) for extended Propose-Test-Release: the certified distance to the sensitivity boundary.

The ε/δ-free half of :mod:`privcore.mechanisms.ptr` (posthoc paper, Alg. 1 lines 1–8, with the
corrections of docs/DESIGN.md): :func:`compute_phi` bisects over a fixed dyadic grid of radii asking a
sensitivity oracle "U(z, r) ≤ Δp?" and returns a :class:`PhiResult` bound to the model, the oracle
and the grid. ``check_grid``, ``check_center`` and ``check_ptr_oracle`` validate those inputs for
both halves.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from privcore.errors import CertificationError
from privcore.mechanisms._arrays import as_float64
from privcore.validation import check_positive

__all__ = [
    "HINT_STEPS",
    "DecidingSensitivityOracle",
    "PhiResult",
    "SensitivityOracle",
    "bisection_decisions",
    "check_center",
    "check_grid",
    "check_ptr_oracle",
    "compute_phi",
    "grid_spacing",
    "model_digest",
    "oracle_identity",
]

_MAX_BISECTION_STEPS = 52  # grid indices k/2^m stay exact in float64
#: most questions of :func:`compute_phi` placed by the oracle's fail radius instead of at a midpoint
#: (two rounds of: the grid point below it, the grid point above it)
HINT_STEPS = 4


@runtime_checkable
class SensitivityOracle(Protocol):
    """Certified upper bound U(center, radius) on the local Lipschitz constant of f.

    ``oracle(f, center, radius) -> float`` bounds sup over the ℓ∞ ball B(center, radius) of
    ‖J_f‖∞→1 (ℓ∞ input, ℓ1 output; docs/DESIGN.md). U must be a certified *upper* bound (e.g. a MIP's
    proven dual bound, never its incumbent) and monotone under ball inclusion:
    B(c', r') ⊆ B(c, r) ⇒ U(c', r') ≤ U(c, r). It may raise
    :class:`privcore.errors.CertificationError` (e.g. a solver time-out); PTR then fails and
    releases nothing. An oracle may also provide ``decide`` (see
    :class:`DecidingSensitivityOracle`).
    """

    def __call__(self, f: Any, center: np.ndarray, radius: float, /) -> float: ...


@runtime_checkable
class DecidingSensitivityOracle(SensitivityOracle, Protocol):
    """An oracle that can answer ``U(center, radius) <= threshold`` directly, possibly faster.

    ``decide`` must return exactly the truth value of ``U(center, radius) <= threshold`` for the
    same U as ``__call__`` (e.g. stop a MIP as soon as its bound settles the question, or settle it
    with cheap bounds when they do: upper ≤ threshold or lower > threshold). It must never guess:
    when it cannot decide it raises CertificationError. It may also offer
    ``fail_radius(f, center, threshold) -> float | None``, a radius from which ``decide`` is already
    known to answer False; :func:`compute_phi` uses it only to choose which question to ask next.
    """

    def decide(self, f: Any, center: np.ndarray, radius: float, threshold: float, /) -> bool: ...


def model_digest(f: Any) -> str:
    """What a φ is bound to on the model side: the SHA-256 the certifier and the cache key by
    (:func:`privcore.lipschitz.network.model_hash`: structure and every parameter's bytes) for a
    torch module or a parsed ``ReluNetwork``; a plain callable, which has no weights to hash, is
    identified by its qualified name only (``callable:<module>.<qualname>``)."""
    from privcore.lipschitz.network import ReluNetwork, model_hash

    if isinstance(f, ReluNetwork):
        return f.digest
    import torch

    if isinstance(f, torch.nn.Module):
        return model_hash(f)
    if callable(f):
        return f"callable:{_qualified_name(f)}"
    raise TypeError(f"f must be a torch module or a callable, got {type(f).__name__}")


def _qualified_name(obj: Any) -> str:
    target = obj if hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(target, '__module__', '?')}.{target.__qualname__}"


def oracle_identity(lipschitz: Any) -> tuple[str, str, str]:
    """(certifier, input_norm, output_norm) of a sensitivity oracle: a privcore
    :class:`~privcore.lipschitz.Certifier` (or subclass) is its ``kind`` ("exact", "lp",
    "interval") and its norms; an oracle object is its qualified class name, a plain function just
    ``"function"`` (it declares no kind; two lambdas are indistinguishable); norms as declared by
    ``input_norm``/``output_norm`` attributes, PTR's ℓ∞ → ℓ1 when absent."""
    if not callable(lipschitz):
        raise TypeError(f"lipschitz must be a sensitivity oracle (callable), got {type(lipschitz).__name__}")
    import functools
    import types

    from privcore.lipschitz.certifier import Certifier

    if isinstance(lipschitz, Certifier):
        name = lipschitz.kind
    elif isinstance(lipschitz, types.FunctionType | types.BuiltinFunctionType | types.MethodType
                    | functools.partial):
        name = "function"
    else:
        name = _qualified_name(type(lipschitz))
    input_norm = getattr(lipschitz, "input_norm", "linf")
    output_norm = getattr(lipschitz, "output_norm", "l1")
    return str(name), str(input_norm), str(output_norm)


@dataclass(frozen=True, kw_only=True)
class PhiResult:
    """φ(z) and how it was found (the client's private intermediate: never send it anywhere).

    ``evaluations`` lists every (radius, passed) decision "U(z, radius) ≤ Δp" in order;
    ``r_star`` is None when the test at R already failed (φ = 0); ``zeta`` is the spacing of the
    fixed bisection grid (a public function of R, R_max and tol). A φ is bound to what it
    certified: ``model_digest`` (:func:`model_digest` of f), ``certifier`` and the norms
    (:func:`oracle_identity` of the oracle) and the grid (R, Δp, R_max, tol, ζ);
    :func:`propose_test_release` refuses it for anything else. Construction checks that the
    fields agree with each other (φ = max(R*/2, R* − R), R* the largest passing radius, ζ the
    grid's spacing), so a hand-edited φ that contradicts its own evaluations is refused.
    """

    phi: float
    r_star: float | None
    zeta: float
    radius: float
    delta_p: float
    r_max: float
    tol: float
    n_decisions: int
    evaluations: tuple[tuple[float, bool], ...]
    center: tuple[float, ...]
    model_digest: str
    certifier: str
    input_norm: str
    output_norm: str

    def __post_init__(self) -> None:
        for name in ("model_digest", "certifier", "input_norm", "output_norm"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise TypeError(f"PhiResult.{name} must be a non-empty string, got {value!r}")
        check_grid(self.radius, self.delta_p, self.r_max, self.tol)
        _, zeta = _grid(self.radius, self.r_max, self.tol)
        passing = [r for r, ok in self.evaluations if ok]
        failing = [r for r, ok in self.evaluations if not ok]
        expected = 0.0 if self.r_star is None else max(self.r_star / 2.0, self.r_star - self.radius)
        problems = []
        if self.zeta != zeta:
            problems.append(f"zeta {self.zeta!r} is not the grid's spacing {zeta!r}")
        if self.n_decisions != len(self.evaluations):
            problems.append(f"n_decisions {self.n_decisions} ≠ {len(self.evaluations)} evaluations")
        if self.phi != expected:
            problems.append(f"phi {self.phi!r} ≠ max(R*/2, R* − R) = {expected!r}")
        if self.r_star is None:
            if passing or failing[:1] != [self.radius]:
                problems.append("R* is None but the test at R did not fail first")
        elif not passing or max(passing) != self.r_star or any(r <= self.r_star for r in failing):
            problems.append(f"R* = {self.r_star!r} is not the largest passing radius of the evaluations")
        if problems:
            raise ValueError("inconsistent PhiResult: " + "; ".join(problems))

    def mismatches(
        self,
        *,
        z: np.ndarray,
        radius: float,
        delta_p: float,
        r_max: float,
        tol: float,
        model_digest: str,
        certifier: str,
        input_norm: str,
        output_norm: str,
    ) -> list[str]:
        """What differs between this φ and the given inputs (empty when it was computed for
        exactly these: z, the grid, the model digest, the certifier and the norms)."""
        out = []
        mine_z = np.asarray(self.center, dtype=np.float64)
        if mine_z.size != z.size or not np.array_equal(mine_z, z.ravel()):
            out.append("z (the embedding)")
        for name, mine, theirs in (
            ("radius", self.radius, radius),
            ("delta_p", self.delta_p, delta_p),
            ("r_max", self.r_max, r_max),
            ("tol", self.tol, tol),
            ("zeta", self.zeta, _grid(radius, r_max, tol)[1]),
            ("model digest", self.model_digest, model_digest),
            ("certifier", self.certifier, certifier),
            ("input_norm", self.input_norm, input_norm),
            ("output_norm", self.output_norm, output_norm),
        ):
            if mine != theirs:
                out.append(f"{name} (φ has {mine!r}, this call {theirs!r})")
        return out

    def matches(self, **inputs: Any) -> bool:
        """True when this result was computed for exactly these inputs (see :meth:`mismatches`)."""
        return not self.mismatches(**inputs)



def check_grid(
    radius: float, delta_p: float, r_max: float, tol: float
) -> tuple[float, float, float, float]:
    r = check_positive("radius", radius)
    dp = check_positive("delta_p", delta_p)
    rm = check_positive("r_max", r_max)
    if rm < r:
        raise ValueError(f"r_max must be in [radius, ∞) = [{r:g}, ∞), got {r_max!r}")
    t = check_positive("tol", tol)
    span = rm - r
    # tol < R: the spacing ζ ≤ tol adds to the test noise (R + ζ)/ε, so a tolerance of R or more
    # would (at least) double it; tol ≤ R_max − R: a coarser grid than the search interval is a
    # misconfiguration; and span/tol ≤ 2^52 keeps the grid exact in float64
    if span == 0:
        ok, allowed = t < r, f"(0, radius) = (0, {r:g})"
    else:
        low = span / 2.0**_MAX_BISECTION_STEPS
        end = ")" if r <= span else "]"  # tol < radius, tol ≤ r_max − radius: whichever binds
        ok = low <= t < r and t <= span * (1.0 + 1e-9)  # slack: R_max − R is rounded (0.3 − 0.2 < 0.1)
        allowed = (
            f"[(r_max − radius)/2^{_MAX_BISECTION_STEPS}, min(radius, r_max − radius){end} = "
            f"[{low:.3g}, {min(r, span):g}{end}"
        )
    if not ok:
        raise ValueError(f"tol must be in {allowed}, got {tol!r}")
    return r, dp, rm, t


def _grid(radius: float, r_max: float, tol: float) -> tuple[int, float]:
    """(m, ζ): the bisection grid r_k = R + k·ζ, ζ = (R_max − R)/2^m, m the least with ζ ≤ tol."""
    span = r_max - radius
    m = _grid_steps(span, tol)
    return m, span / 2.0**m


def grid_spacing(radius: float, r_max: float, tol: float) -> float:
    """ζ, the spacing of φ's bisection grid (public: a function of R, R_max and tol)."""
    r, _, rm, t = check_grid(radius, 1.0, r_max, tol)
    return float(_grid(r, rm, t)[1])


def check_center(z: Any) -> np.ndarray:
    arr, _ = as_float64("z", z)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"z must be a non-empty 1-D embedding, got shape {arr.shape}")
    arr.setflags(write=False)
    return arr


def _grid_steps(span: float, tol: float) -> int:
    """Smallest m ≥ 0 with span/2^m ≤ tol."""
    m = 0
    while span / 2.0**m > tol:
        m += 1
    return m


def bisection_decisions(radius: float, r_max: float, tol: float) -> int:
    """Most decisions :func:`compute_phi` makes on this grid (for a progress bar): 1 when
    R_max = R, else 2 + m + :data:`HINT_STEPS`, m the least with (R_max − R)/2^m ≤ tol (the test
    at R, at R_max, the bisection over the 2^m grid steps, each at least halving the interval
    left, and the questions an oracle's fail radius directs). Same validation as
    :func:`compute_phi`."""
    r, _, rm, t = check_grid(radius, 1.0, r_max, tol)
    span = rm - r
    return 1 if span == 0 else 2 + _grid_steps(span, t) + HINT_STEPS


def _decider(oracle: Any, f: Any, center: np.ndarray, threshold: float):
    """Return r -> bool deciding U(center, r) ≤ threshold via ``decide`` if present, else via U."""
    if not callable(oracle):
        raise TypeError(f"lipschitz must be a sensitivity oracle (callable), got {type(oracle).__name__}")
    decide = getattr(oracle, "decide", None)
    if callable(decide):

        def by_decide(r: float) -> bool:
            answer = decide(f, center, r, threshold)
            if not isinstance(answer, bool | np.bool_):
                raise TypeError(f"oracle.decide must return a bool, got {type(answer).__name__}")
            return bool(answer)

        return by_decide

    def by_bound(r: float) -> bool:
        bound = oracle(f, center, r)
        try:
            value = float(bound)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"lipschitz oracle must return a real number, got {type(bound).__name__}"
            ) from exc
        if math.isnan(value) or value < 0:
            raise CertificationError(
                f"lipschitz oracle returned {value!r} at radius {r:g}: not a certificate"
            )
        return value <= threshold

    return by_bound


def check_ptr_oracle(lipschitz: Any) -> tuple[str, str, str]:
    """:func:`oracle_identity`, refusing an oracle whose norms are not PTR's ℓ∞ → ℓ1 (the test's
    metric on z and the Laplace release's ℓ1 sensitivity both depend on them)."""
    certifier, input_norm, output_norm = oracle_identity(lipschitz)
    if (input_norm, output_norm) != ("linf", "l1"):
        raise ValueError(
            f"lipschitz must certify ℓ∞ → ℓ1 (input_norm='linf', output_norm='l1') for PTR, got "
            f"input_norm={input_norm!r}, output_norm={output_norm!r}"
        )
    return certifier, input_norm, output_norm


def compute_phi(
    f: Any,
    z: Any,
    *,
    radius: float,
    delta_p: float,
    r_max: float,
    tol: float,
    lipschitz: SensitivityOracle,
    progress: Callable[[float, bool], None] | None = None,
) -> PhiResult:
    """φ(z) = max(R*/2, R* − R) by bisection over a fixed dyadic grid (posthoc Alg. 1, docs/DESIGN.md).

    Decisions are "U(z, r) ≤ Δp?" with the sensitivity oracle (``lipschitz.decide`` when it
    exists, else ``lipschitz(f, z, r) <= Δp``). If U(z, R) > Δp: φ = 0, R* = None. Else, with the
    grid r_k = R + k·(R_max − R)/2^m (m the least integer making the spacing ζ ≤ tol): if R_max
    passes, R* = R_max; otherwise bisect on k keeping the lower end while hi − lo > 1. With U
    monotone in r, R* is the largest grid point that passes and never exceeds the true sup.
    Which k in (lo, hi) is asked next does not change R* (every answer is exact and lo always
    passes, hi always fails), only how many hard questions are asked: usually the midpoint, but
    when the oracle knows a radius ρ from which U > Δp (``lipschitz.fail_radius(f, z, Δp)``, e.g. a
    witness found at R_max and moved to its region's point nearest z), the largest grid point
    below ρ and the one above it (answered from the oracle's memo), for at most
    :data:`HINT_STEPS` questions; the boundary is then settled by one hard question instead of a
    bisection through the band where U is close to Δp. No ε, δ involved: compute once, reuse across sliders. A
    CertificationError from the oracle propagates (never turned into a decision). The result
    records f's :func:`model_digest`, the oracle's :func:`oracle_identity` (which must be ℓ∞ → ℓ1)
    and the grid, and :func:`propose_test_release` accepts it only for those. ``progress(r, passed)``,
    if given, is called after each decision (e.g. a progress bar); whatever it raises propagates,
    and nothing is returned.

    Why this φ is safe (proof sketch). Let R̄(z) = sup{r ∈ [R, R_max] : U(z, r) ≤ Δp}.
      * R̄ is 1-Lipschitz in z for ‖·‖∞: if ‖z − z'‖∞ ≤ η then B(z', r − η) ⊆ B(z, r), so by
        monotonicity U(z', r − η) ≤ U(z, r) ≤ Δp, i.e. R̄(z') ≥ R̄(z) − η, and symmetrically
        (balls nest). Flooring to the fixed grid moves R* by less than ζ at every z, so
        |R*(z) − R*(z')| ≤ ‖z − z'‖∞ + ζ.
      * (a) |φ(z) − φ(z')| ≤ R + ζ whenever ‖z − z'‖∞ ≤ R: if both are positive, r ↦ max(r/2, r − R)
        is 1-Lipschitz, so the bound above carries over. If φ(z') = 0 < φ(z) then U(z', R) > Δp,
        and B(z', R) ⊆ B(z, R + η) forces R̄(z) < R + η ≤ 2R, so φ(z) = max(R*/2, R* − R) ≤ R.
      * (b) φ(z) = 0 whenever the local sensitivity at z exceeds Δp: Δ_LS(z, R) ≤ L(f, N(z, R)) ≤
        U(z, R) (Lemma 4.1), so U(z, R) > Δp and the first test fails.
    The paper's R*/2, the certified distance R* − R and their maximum each satisfy (a) and (b);
    the maximum releases most often. (a) needs every decision to be the exact truth value for a
    fixed monotone U, which is why a time-out must raise and never pick a side.
    """
    r, dp, rm, t = check_grid(radius, delta_p, r_max, tol)
    center = check_center(z)
    certifier, input_norm, output_norm = check_ptr_oracle(lipschitz)
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable, got {type(progress).__name__}")
    digest = model_digest(f)
    decide = _decider(lipschitz, f, center, dp)
    fail_radius = _hinter(lipschitz, f, center, dp)
    span = rm - r
    m, zeta = _grid(r, rm, t)
    n_grid = 2**m

    def radius_at(k: int) -> float:
        return rm if k == n_grid else r + span * (k / n_grid)

    evaluations: list[tuple[float, bool]] = []

    def check(rr: float) -> bool:
        ok = decide(rr)
        evaluations.append((rr, ok))
        if progress is not None:
            progress(float(rr), bool(ok))
        return ok

    r_star: float | None
    if not check(r):
        r_star = None
    elif span == 0.0:
        r_star = r
    elif check(rm):
        r_star = rm
    else:
        lo, hi = 0, n_grid
        hints = HINT_STEPS
        while hi - lo > 1:
            mid = (lo + hi) // 2
            below = _grid_below(fail_radius(), radius_at, lo, hi) if hints else None
            if below is not None:
                mid, hints = below, hints - 1
            if check(radius_at(mid)):
                lo = mid
            else:
                hi = mid
        r_star = radius_at(lo)
    phi = 0.0 if r_star is None else max(r_star / 2.0, r_star - r)
    return PhiResult(
        phi=phi,
        r_star=r_star,
        zeta=zeta,
        radius=r,
        delta_p=dp,
        r_max=rm,
        tol=t,
        n_decisions=len(evaluations),
        evaluations=tuple(evaluations),
        center=tuple(float(v) for v in center),
        model_digest=digest,
        certifier=certifier,
        input_norm=input_norm,
        output_norm=output_norm,
    )


def _hinter(oracle: Any, f: Any, center: np.ndarray, threshold: float):
    """Return () -> ρ or None: the oracle's known fail radius (``fail_radius``), if it has one. A
    hint only orders the questions, so anything but a finite positive float is ignored."""
    hint = getattr(oracle, "fail_radius", None)

    def fail_radius() -> float | None:
        if not callable(hint):
            return None
        rho = hint(f, center, threshold)
        if isinstance(rho, bool) or not isinstance(rho, int | float | np.floating):
            return None
        rho = float(rho)
        return rho if math.isfinite(rho) and rho > 0 else None

    return fail_radius


def _grid_below(rho: float | None, radius_at: Any, lo: int, hi: int) -> int | None:
    """The grid index to ask next given a known fail radius ρ: j, the largest with r_j < ρ, when
    lo < j < hi (the one hard question), else j + 1 when lo < j + 1 < hi (it fails: the memo
    answers); None when ρ says nothing inside (lo, hi)."""
    if rho is None:
        return None
    if radius_at(lo) >= rho:  # a wrong hint (lo passes): ignore it
        return None
    a, b = lo, hi  # r_a < ρ; find the largest k in [lo, hi] with r_k < ρ
    while b - a > 1:
        k = (a + b) // 2
        if radius_at(k) < rho:
            a = k
        else:
            b = k
    j = b if radius_at(b) < rho else a
    if lo < j < hi:
        return j
    if lo < j + 1 < hi:
        return j + 1
    return None
