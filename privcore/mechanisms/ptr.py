"""Extended Propose-Test-Release for (ε, δ, R)-semantic-neighbourhood privacy (posthoc PTR paper).

Follows Algorithm 1 and Theorem 4.4 of the posthoc paper with the corrections of DESIGN.md:
the bisection evaluates the local Lipschitz bound at R_mid and keeps the lower end; φ is
max(R*/2, R* − R); the test noise carries the bisection grid spacing ζ; the release noise is
Lap(Δp·R/ε), not Lap(Δp/ε). Metrics: ℓ∞ on the embedding z, ℓ1 on the obfuscator output f(z).

Split in two so that a dashboard can move ε/δ sliders without any solve:
:func:`compute_phi` (depends on f, z, R, Δp, R_max, tol and the certifier; never on ε or δ) and
:func:`propose_test_release` (reuses a :class:`PhiResult` when given one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from privcore.errors import CertificationError
from privcore.mechanisms._arrays import as_float64
from privcore.mechanisms.guarantee import Guarantee, Norm, Space
from privcore.mechanisms.rounding import CertifiedNet, rounding_allowance, sensitivity_with_rounding
from privcore.mechanisms.sampling import (
    NoisePlan,
    RngLike,
    add_noise,
    as_random_bits,
    check_sampler_epsilon,
    plan_laplace,
)
from privcore.validation import (
    check_delta,
    check_epsilon,
    check_finite_array,
    check_nonnegative,
    check_positive,
)

__all__ = [
    "HINT_STEPS",
    "DecidingSensitivityOracle",
    "PTRResult",
    "PTRScales",
    "PhiResult",
    "SensitivityOracle",
    "bisection_decisions",
    "compute_phi",
    "model_digest",
    "oracle_identity",
    "propose_delta_p",
    "propose_test_release",
    "ptr_scales",
]

_MAX_BISECTION_STEPS = 52  # grid indices k/2^m stay exact in float64
#: most questions of :func:`compute_phi` placed by the oracle's fail radius instead of at a midpoint
#: (two rounds of: the grid point below it, the grid point above it)
HINT_STEPS = 4


@runtime_checkable
class SensitivityOracle(Protocol):
    """Certified upper bound U(center, radius) on the local Lipschitz constant of f.

    ``oracle(f, center, radius) -> float`` bounds sup over the ℓ∞ ball B(center, radius) of
    ‖J_f‖∞→1 (ℓ∞ input, ℓ1 output; DESIGN.md). U must be a certified *upper* bound (e.g. a MIP's
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
        _validate_grid(self.radius, self.delta_p, self.r_max, self.tol)
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


@dataclass(frozen=True, kw_only=True)
class PTRResult:
    """Outcome of :func:`propose_test_release`.

    ``released`` False means ⊥ and ``value`` is None. Only ``value``/⊥ (and ``phi_noisy``, the
    output of the ε-DP test) are covered by ``guarantee`` = (2ε, δ/2, R) (Theorem 4.4); ``phi`` and
    ``phi_result`` are private intermediates for the user's own view. ``noise_scale`` = Δp·R/ε and
    ``test_scale`` = (R+ζ)/ε are the formulas; the ``*_effective`` values are what the exact sampler
    drew (slightly larger, see :mod:`privcore.mechanisms.sampling`); ``threshold`` is the test
    threshold actually used, ln(1/δ)·test_scale_effective plus a ≤ 2⁻³⁰ relative correction that
    keeps P[pass | φ = 0] ≤ δ/2 for the discrete noise.
    """

    released: bool
    value: np.ndarray | None
    phi: float
    phi_noisy: float
    threshold: float
    noise_scale: float
    test_scale: float
    noise_scale_effective: float
    test_scale_effective: float
    guarantee: Guarantee
    phi_result: PhiResult


def _validate_grid(
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


def _validate_center(z: Any) -> np.ndarray:
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
    r, _, rm, t = _validate_grid(radius, 1.0, r_max, tol)
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


def _ptr_oracle(lipschitz: Any) -> tuple[str, str, str]:
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
) -> PhiResult:
    """φ(z) = max(R*/2, R* − R) by bisection over a fixed dyadic grid (posthoc Alg. 1, DESIGN.md).

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
    and the grid, and :func:`propose_test_release` accepts it only for those.

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
    r, dp, rm, t = _validate_grid(radius, delta_p, r_max, tol)
    center = _validate_center(z)
    certifier, input_norm, output_norm = _ptr_oracle(lipschitz)
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


def _evaluate(f: Any, center: np.ndarray, eta: float) -> np.ndarray:
    """f(z) as float64. A torch module is parsed into its Linear/ReLU chain (Dropout as in eval
    mode; any other layer raises TypeError) and evaluated in float64 within ℓ1 distance ``eta`` of
    the exact f(z) that the oracle certifies (:meth:`CertifiedNet.within`; never in float32, never
    with z rounded). A plain callable gets a float64 CPU tensor and is taken as it computes: its
    oracle must certify the callable as evaluated."""
    import torch

    if isinstance(f, torch.nn.Module):
        return CertifiedNet.from_module(f).within(center, eta=eta, p=1).value
    if not callable(f):
        raise TypeError(f"f must be a torch module or a callable, got {type(f).__name__}")
    with torch.no_grad():
        out = f(torch.as_tensor(np.array(center), dtype=torch.float64))
    arr, _ = as_float64("f(z)", out)
    return arr


def _ptr_guarantee(eps: float, dlt: float, r: float, dp: float) -> Guarantee:
    """(2ε, δ/2, R) over ℓ∞ on z (posthoc Thm 4.4); the release is calibrated to Δp·R + 2η."""
    eta = rounding_allowance(dp * r)
    return Guarantee(
        epsilon=2.0 * eps,
        delta=dlt / 2.0,
        radius=r,
        space=Space.EMBEDDING,
        norm=Norm.LINF,
        mechanism="extended PTR (posthoc Alg. 1)",
        definition="(ε, δ, R)-semantic-neighbourhood privacy (posthoc Thm 4.4)",
        calibration=(
            f"Laplace: test (R+ζ)/ε, release (Δp·R + 2η)/ε with Δp = {dp:.4g}, "
            f"η = 2⁻²⁴·Δp·R = {eta:.3g} (bound on f's float64 rounding, ℓ1)"
        ),
    )


def _test_threshold(plan: NoisePlan, delta: float) -> float:
    """Smallest safe T with P[φ̂ > T | φ = 0] ≤ δ/2 for the discrete Laplace of ``plan``.

    For P(N = n) ∝ q^|n|, q = e^{−1/t}: P(N ≥ n) = q^n/(1+q), so T = b_eff·(ln(1/δ) + ln(2/(1+q)))
    gives ≤ δ/2; 2⁻³⁸ more covers the sampler's (1 ± 2⁻⁴⁰) pmf accuracy, 2⁻⁵⁰ the rounding here.
    """
    t = plan.grid_scale
    log_two_over_1_plus_q = -math.log1p(math.expm1(-1.0 / t) / 2.0)
    # −log δ, not log(1/δ): 1/δ overflows to inf for a subnormal δ
    return plan.effective * (-math.log(delta) + log_two_over_1_plus_q + 2.0**-38) * (1.0 + 2.0**-50)


def propose_test_release(
    f: Any,
    z: Any,
    *,
    epsilon: float,
    delta: float,
    radius: float,
    delta_p: float,
    r_max: float,
    tol: float,
    lipschitz: SensitivityOracle,
    rng: RngLike = None,
    phi: PhiResult | None = None,
) -> PTRResult:
    """Extended PTR (posthoc Alg. 1, Thm 4.4 with DESIGN.md's corrections): (2ε, δ/2, R)-private release.

    1. φ = :func:`compute_phi` (or the given ``phi``, refused with a ValueError naming what differs
       unless it was computed for this z, R, Δp, R_max, tol, ζ, f's :func:`model_digest` and this
       oracle's certifier and norms: a φ certified for another model certifies nothing here).
    2. Test: φ̂ = φ + Lap(b_test), b_test = (R + ζ)/ε: φ has sensitivity R + ζ over ℓ∞-distance R
       (compute_phi's docstring), so φ̂ is ε-private; with ζ = 0 this is the paper's Lap(R/ε).
       If φ̂ ≤ ln(1/δ)·b_test (threshold as in :class:`PTRResult`): return ⊥. When the local
       sensitivity exceeds Δp, φ = 0 and the test passes with probability ≤ δ/2.
    3. Release f(z) + Lap(Δp·R/ε) i.i.d. per coordinate: Δp bounds ‖f(z) − f(z')‖₁ per unit of
       ‖z − z'‖∞, so over the radius R the ℓ1 sensitivity is Δp·R (the paper's Lap(Δp/ε) is too
       little noise for R > 1).
    Every parameter is validated and f(z) evaluated before any noise is drawn; any error raises
    and nothing is released. Noise comes from the exact grid samplers (secure unless seeded).
    """
    eps = check_sampler_epsilon(epsilon)
    dlt = check_delta(delta)
    r, dp, rm, t = _validate_grid(radius, delta_p, r_max, tol)
    center = _validate_center(z)
    bits = as_random_bits(rng)
    if phi is not None:
        if not isinstance(phi, PhiResult):
            raise TypeError(f"phi must be a PhiResult from compute_phi, got {type(phi).__name__}")
        certifier, input_norm, output_norm = _ptr_oracle(lipschitz)
        differs = phi.mismatches(
            z=center, radius=r, delta_p=dp, r_max=rm, tol=t, model_digest=model_digest(f),
            certifier=certifier, input_norm=input_norm, output_norm=output_norm,
        )
        if differs:
            raise ValueError(
                "phi was computed for a different query, so it certifies nothing here (nothing "
                "released); it differs in: " + "; ".join(differs)
            )
        phi_result = phi
    else:
        phi_result = compute_phi(f, center, radius=r, delta_p=dp, r_max=rm, tol=t, lipschitz=lipschitz)
    eta = rounding_allowance(dp * r)  # public η bounding ‖f̂(z) − f(z)‖₁ (privcore.mechanisms.rounding)
    try:  # before any noise: an error here must not depend on the test
        output = _evaluate(f, center, eta)
    except ValueError as exc:
        raise ValueError(
            f"f(z) could not be certified for delta_p = {dp!r}, radius = {r!r} (rounding budget "
            f"η = 2⁻²⁴·delta_p·radius = {eta:.3g}): {exc}"
        ) from exc
    test_sensitivity = math.nextafter(r + phi_result.zeta, math.inf)
    test_plan = plan_laplace(sensitivity=test_sensitivity, epsilon=eps, numel=1)
    release_plan = plan_laplace(
        sensitivity=sensitivity_with_rounding(lipschitz=dp, radius=r, rounding=eta),
        epsilon=eps,
        numel=max(1, output.size),
    )
    threshold = _test_threshold(test_plan, dlt)
    phi_noisy = float(add_noise(np.array([phi_result.phi]), test_plan, bits)[0])
    released = phi_noisy > threshold
    value = add_noise(output, release_plan, bits) if released else None
    return PTRResult(
        released=released,
        value=value,
        phi=phi_result.phi,
        phi_noisy=phi_noisy,
        threshold=threshold,
        noise_scale=dp * r / eps,
        test_scale=(r + phi_result.zeta) / eps,
        noise_scale_effective=release_plan.effective,
        test_scale_effective=test_plan.effective,
        guarantee=_ptr_guarantee(eps, dlt, r, dp),
        phi_result=phi_result,
    )


@dataclass(frozen=True, kw_only=True)
class PTRScales:
    """PTR's noise levels for given parameters, before any solve (for dashboards and tables)."""

    test_scale: float
    threshold: float
    release_scale: float
    pass_probability_at_zero: float
    guarantee: Guarantee


def ptr_scales(
    *, epsilon: float, delta: float, radius: float, delta_p: float, zeta: float = 0.0
) -> PTRScales:
    """Formulas of :func:`propose_test_release`: b_test = (R+ζ)/ε, threshold ln(1/δ)·b_test, Δp·R/ε.

    ``pass_probability_at_zero`` = δ/2 is the chance that the test passes when φ = 0.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    r = check_positive("radius", radius)
    dp = check_positive("delta_p", delta_p)
    z = check_nonnegative("zeta", zeta)
    test_scale = (r + z) / eps
    threshold = -math.log(dlt) * test_scale
    release_scale = dp * r / eps
    if not all(0.0 < v < math.inf for v in (test_scale, threshold, release_scale)):
        raise ValueError(
            f"radius={radius!r}, delta_p={delta_p!r}, zeta={zeta!r}, epsilon={epsilon!r} give a noise scale "
            f"outside float64's range: (R+ζ)/ε = {test_scale:.3g}, Δp·R/ε = {release_scale:.3g}"
        )
    return PTRScales(
        test_scale=test_scale,
        threshold=threshold,
        release_scale=release_scale,
        pass_probability_at_zero=dlt / 2.0,
        guarantee=_ptr_guarantee(eps, dlt, r, dp),
    )


def propose_delta_p(lipschitz_values: Any, n_sigma: float = 3.0) -> float:
    """Δp = μ + n·σ of local Lipschitz constants L(f, N(z_i, R)) (posthoc paper, Sec. 5, n = 3).

    ``lipschitz_values`` must come from TRAINING embeddings (or other public data): PTR's proof
    treats Δp as a data-independent public parameter, so computing it from the test points (as
    the authors' public code did) breaks the guarantee. σ is the sample standard deviation
    (ddof = 1); at least two values are needed.
    """
    values = check_finite_array("lipschitz_values", lipschitz_values).ravel()
    if values.size < 2:
        raise ValueError(f"lipschitz_values must hold at least 2 values, got {values.size}")
    if np.any(values < 0):
        raise ValueError("lipschitz_values must be ≥ 0 (they are Lipschitz constants)")
    n = check_nonnegative("n_sigma", n_sigma)
    with np.errstate(over="ignore", invalid="ignore"):
        proposal = float(values.mean() + n * values.std(ddof=1))
    if not math.isfinite(proposal):
        raise ValueError(
            f"the proposed delta_p overflows float64 (lipschitz_values up to {values.max():.3g}, "
            f"n_sigma={n_sigma!r}); choose delta_p by hand"
        )
    if proposal <= 0:
        raise ValueError("the proposed delta_p is 0: all Lipschitz values are 0; choose delta_p by hand")
    return proposal
