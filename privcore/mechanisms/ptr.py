"""Extended Propose-Test-Release for (ε, δ, R)-semantic-neighbourhood privacy (posthoc PTR paper).

Follows Algorithm 1 and Theorem 4.4 of the posthoc paper with the corrections of docs/DESIGN.md:
the bisection evaluates the local Lipschitz bound at R_mid and keeps the lower end; φ is
max(R*/2, R* − R); the test noise carries the bisection grid spacing ζ; the release noise is
Lap(Δp·R/ε), not the printed Lap(Δp/ε) (the authors' Table-1 code scales by R too). Metrics: ℓ∞ on
the embedding z, ℓ1 on the obfuscator output f(z).

Split in two so that a dashboard can move ε/δ sliders without any solve:
:func:`~privcore.mechanisms.phi.compute_phi` (its own module; depends on f, z, R, Δp, R_max, tol
and the certifier, never on ε or δ; re-exported here) and :func:`propose_test_release` (reuses a
:class:`PhiResult` when given one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from privcore.lipschitz.rounding import CertifiedNet, rounding_allowance, sensitivity_with_rounding
from privcore.mechanisms._arrays import as_float64
from privcore.mechanisms.guarantee import Guarantee, Norm, Space
from privcore.mechanisms.phi import (
    HINT_STEPS,
    DecidingSensitivityOracle,
    PhiResult,
    SensitivityOracle,
    bisection_decisions,
    check_center,
    check_grid,
    check_ptr_oracle,
    compute_phi,
    model_digest,
    oracle_identity,
)
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
    "ptr_plans",
    "ptr_scales",
    "release_probability",
]


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
        mechanism="PTR",
        definition="(ε, δ, R)-semantic-neighbourhood privacy (posthoc Thm 4.4)",
        calibration=(
            f"extended PTR run at ε/2 = {eps:.6g} and δ = {dlt:.6g} (posthoc Alg. 1; Thm 4.4 states "
            f"(2·ε/2, δ/2, R)). Laplace: test (R+ζ)/(ε/2), release (Δp·R + 2η)/(ε/2) with Δp = {dp:.4g}, "
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
    """Extended PTR (posthoc Alg. 1, Thm 4.4 with docs/DESIGN.md's corrections): (2ε, δ/2, R)-private release.

    1. φ = :func:`compute_phi` (or the given ``phi``, refused with a ValueError naming what differs
       unless it was computed for this z, R, Δp, R_max, tol, ζ, f's :func:`model_digest` and this
       oracle's certifier and norms: a φ certified for another model certifies nothing here).
    2. Test: φ̂ = φ + Lap(b_test), b_test = (R + ζ)/ε: φ has sensitivity R + ζ over ℓ∞-distance R
       (compute_phi's docstring), so φ̂ is ε-private; with ζ = 0 this is the paper's Lap(R/ε).
       If φ̂ ≤ ln(1/δ)·b_test (threshold as in :class:`PTRResult`): return ⊥. When the local
       sensitivity exceeds Δp, φ = 0 and the test passes with probability ≤ δ/2.
    3. Release f(z) + Lap(Δp·R/ε) i.i.d. per coordinate: Δp bounds ‖f(z) − f(z')‖₁ per unit of
       ‖z − z'‖∞, so over the radius R the ℓ1 sensitivity is Δp·R (the printed Lap(Δp/ε) is too
       little noise for R > 1).
    Every parameter is validated and f(z) evaluated before any noise is drawn; any error raises
    and nothing is released. Noise comes from the exact grid samplers (secure unless seeded).
    """
    eps = check_sampler_epsilon(epsilon)
    dlt = check_delta(delta)
    r, dp, rm, t = check_grid(radius, delta_p, r_max, tol)
    center = check_center(z)
    bits = as_random_bits(rng)
    if phi is not None:
        if not isinstance(phi, PhiResult):
            raise TypeError(f"phi must be a PhiResult from compute_phi, got {type(phi).__name__}")
        certifier, input_norm, output_norm = check_ptr_oracle(lipschitz)
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
    eta = rounding_allowance(dp * r)  # public η bounding ‖f̂(z) − f(z)‖₁ (privcore.lipschitz.rounding)
    try:  # before any noise: an error here must not depend on the test
        output = _evaluate(f, center, eta)
    except ValueError as exc:
        raise ValueError(
            f"f(z) could not be certified for delta_p = {dp!r}, radius = {r!r} (rounding budget "
            f"η = 2⁻²⁴·delta_p·radius = {eta:.3g}): {exc}"
        ) from exc
    test_plan, release_plan, threshold = ptr_plans(epsilon=eps, delta=dlt, radius=r, delta_p=dp,
                                                   zeta=phi_result.zeta, numel=output.size)
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


def ptr_plans(*, epsilon: float, delta: float, radius: float, delta_p: float, zeta: float,
              numel: int) -> tuple[NoisePlan, NoisePlan, float]:
    """The exact samplers' plans of PTR's test (sensitivity R + ζ, one number) and of its release
    (Δp·R plus f's rounding allowance, ``numel`` coordinates) at ε, and the test's threshold: what
    :func:`propose_test_release` draws with, for its callers' simulations too (validated there)."""
    eta = rounding_allowance(delta_p * radius)
    test_plan = plan_laplace(sensitivity=math.nextafter(radius + zeta, math.inf), epsilon=epsilon, numel=1)
    release_plan = plan_laplace(
        sensitivity=sensitivity_with_rounding(lipschitz=delta_p, radius=radius, rounding=eta),
        epsilon=epsilon,
        numel=max(1, int(numel)),
    )
    return test_plan, release_plan, _test_threshold(test_plan, delta)


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


def release_probability(
    phi: float, *, epsilon: float, delta: float, radius: float, zeta: float = 0.0
) -> float:
    """P[PTR releases] for a given φ: P[φ + Lap(b) > ln(1/δ)·b], b = (R + ζ)/ε (posthoc Alg. 1).

    Continuous-Laplace reading of the test (the exact sampler's discrete noise and its slightly
    larger threshold differ by a relative ~1e-9); for an outlook or a curve, never for calibration.
    """
    p = check_nonnegative("phi", phi)
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    b = (check_positive("radius", radius) + check_nonnegative("zeta", zeta)) / eps
    gap = (p - math.log(1.0 / dlt) * b) / b
    return 1.0 - 0.5 * math.exp(-gap) if gap >= 0 else 0.5 * math.exp(gap)


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
