"""Inference-privacy mechanisms: Lap-Output, Gauss-Output, Gauss-Input (Tian et al., Section IV).

A mechanism M gives {(ε, δ), α} inference privacy (IP paper, Definition 2) when, for all inputs
x_a, x_b with d(x_a, x_b) ≤ α and every set S, P[M(x_a) ∈ S] ≤ e^ε P[M(x_b) ∈ S] + δ.

Norms (checked against the paper). Eq. (8) defines the global Lipschitz constant μ_C with the
*same* ℓp norm on input and output. Lap-Output (Definition 3, Theorem 1, proof in Appendix E)
uses the ℓ1 constant and its proof needs ‖C(x_a) − C(x_b)‖₁ ≤ α·μ_C for d(x_a, x_b) ≤ α, so α is
an ℓ1 input distance and μ₁ the ℓ1 → ℓ1 constant. Gauss-Output (Definition 4, Theorem 2,
Appendix F) uses the ℓ2 → ℓ2 constant μ₂ and α in ℓ2. Gauss-Input (Definition 5, Theorem 3,
Appendix G) is Gauss-Output for the identity (μ = 1), α in ℓ2 on the input as the user sees it
(pixels in [0, 1]), *before* any normalisation layer. μ must be a certified upper bound covering
every layer of C, the last one included.

Floating point. μ certifies the real-number model C; the outputs y passed to
Gauss-/Lap-Output are computed in floating point. ``rounding`` = η is a public bound on
‖y − C(x)‖ in the output norm for every admissible x, and the noise is calibrated to the
sensitivity μ·α + 2η (rounded up; :mod:`privcore.lipschitz.rounding`). The IP models evaluate in
float64 with a certified η for pixels in [0, 1] (:attr:`privcore.models.pipeline.IPModel.rounding`);
η = 0 asserts that y is exactly C(x). The guarantee's calibration text states μ and η.

Noise is drawn by :mod:`privcore.mechanisms.sampling` (exact on a power-of-two grid). ``.sigma``
and ``.scale`` are the paper's formulas at that sensitivity; ``noise_plan(numel)`` shows what the
sampler draws. A noise scale above 2^1000 is refused (the noisy output would overflow float64), and
a noisy output that overflows anyway raises instead of returning ±inf.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from privcore.lipschitz.rounding import sensitivity_with_rounding
from privcore.mechanisms._arrays import as_float64
from privcore.mechanisms.gaussian_calibration import CALIBRATIONS, gaussian_sigma
from privcore.mechanisms.guarantee import Guarantee, Norm, Space
from privcore.mechanisms.sampling import (
    NoisePlan,
    RngLike,
    add_noise,
    check_sampler_epsilon,
    plan_gaussian,
    plan_laplace,
)
from privcore.validation import check_choice, check_delta, check_nonnegative, check_positive

__all__ = ["GaussInput", "GaussOutput", "LapOutput"]

_IP_DEFINITION = "{(ε, δ), α} inference privacy (Tian et al., Def. 2)"
#: Noise scales (Laplace b or Gaussian σ) served: the exact samplers' grids stay in float64 range.
MIN_NOISE_SCALE, MAX_NOISE_SCALE = 2.0**-960, 2.0**1000


def _check_scale(mech: Any, scale: float, culprit: str) -> None:
    """Refuse a noise scale the samplers cannot serve (naming the parameter that made it so)."""
    where = f"alpha = {mech.alpha!r}, epsilon = {mech.epsilon!r}"
    if not (math.isfinite(scale) and scale <= MAX_NOISE_SCALE):
        raise ValueError(
            f"{culprit} = {getattr(mech, culprit)!r} is too large for {where}: the noise scale "
            f"{scale:.4g} must be ≤ 2^1000 ≈ {MAX_NOISE_SCALE:.4g} (the noisy output would overflow float64)"
        )
    if not scale >= MIN_NOISE_SCALE:
        raise ValueError(
            f"{culprit} = {getattr(mech, culprit)!r} is too small for {where}: the noise scale "
            f"{scale:.4g} must be ≥ 2^-960 ≈ {MIN_NOISE_SCALE:.4g} (the sampler's grid would underflow)"
        )


def _quotient_up(numerator: float, denominator: float) -> float:
    """numerator/denominator rounded up (an upper bound on the exact quotient, > 0 for positive inputs)."""
    q = numerator / denominator
    if Fraction(q) * Fraction(denominator) < Fraction(numerator):
        q = math.nextafter(q, math.inf)
    return q


def _output_sensitivity(mech: Any) -> float:
    """μ·α + 2η rounded up (module docstring); ValueError naming ``lipschitz`` when it overflows."""
    try:
        return sensitivity_with_rounding(lipschitz=mech.lipschitz, radius=mech.alpha, rounding=mech.rounding)
    except ValueError:
        raise ValueError(
            f"lipschitz = {mech.lipschitz!r} is too large for alpha = {mech.alpha!r}: "
            f"lipschitz·alpha + 2·rounding must be finite"
        ) from None


def _rounding_text(mu_name: str, mu: float, eta: float) -> str:
    what = "C's float64 rounding, certified" if eta > 0 else "outputs taken as exact C(x)"
    return f"sensitivity {mu_name}·α + 2η with {mu_name} = {mu:.4g}, η = {eta:.3g} ({what})"


def _release(arr: Any, plan: NoisePlan, rng: RngLike) -> Any:
    """Noisy values; ValueError (nothing released) if they overflow float64."""
    with np.errstate(over="ignore"):
        out = add_noise(arr, plan, rng)
    if not np.all(np.isfinite(out)):
        raise ValueError("the noisy output overflowed float64; nothing released")
    return out


def _init_gaussian(mech: Any, culprit: str) -> None:
    """Validate ε, δ, α and the calibration of a Gaussian IP mechanism and set its σ (IP paper Thms 2–3).

    σ is calibrated to ``mech.sensitivity`` (α for Gauss-Input, α·μ₂ + 2η rounded up for Gauss-Output).
    """
    object.__setattr__(mech, "epsilon", check_sampler_epsilon(mech.epsilon))
    object.__setattr__(mech, "delta", check_delta(mech.delta))
    object.__setattr__(mech, "alpha", check_positive("alpha", mech.alpha))
    check_choice("calibration", mech.calibration, CALIBRATIONS)
    sensitivity = mech.sensitivity
    _check_scale(mech, _quotient_up(sensitivity, mech.epsilon), culprit)
    sigma = gaussian_sigma(
        epsilon=mech.epsilon, delta=mech.delta, sensitivity=sensitivity, calibration=mech.calibration
    )
    _check_scale(mech, sigma, culprit)
    object.__setattr__(mech, "sigma", sigma)


def _gaussian_plan(mech: Any, numel: int) -> NoisePlan:
    """The exact sampler's plan for ``numel`` values of a Gaussian IP mechanism (σ_eff ≥ σ)."""
    return plan_gaussian(
        sigma=mech.sigma, sensitivity=mech.sensitivity, epsilon=mech.epsilon, delta=mech.delta, numel=numel
    )


@dataclass(frozen=True, kw_only=True)
class GaussInput:
    """Gauss-Input (IP paper Def. 5 / Thm 3): M(x) = C(x + Z), Z ~ N(0, σ²I) on the input pixels.

    σ = √(2 ln(1.25/δ))·α/ε (``calibration="classic"``, ε < 1 only) or the analytic σ of Balle &
    Wang 2018 at sensitivity α (default, every ε). α is the ℓ2 distance between inputs in pixel
    units ([0, 1]); calling the mechanism on an input outside [0, 1] is refused, since α would then
    be measured in other units. ``mech(x)`` returns x + Z (same type and shape); feed it to the
    model. The guarantee is per input (per row of a batch).
    """

    epsilon: float
    delta: float
    alpha: float
    calibration: str = "analytic"
    sigma: float = field(init=False)

    def __post_init__(self) -> None:
        _init_gaussian(self, "alpha")

    @property
    def sensitivity(self) -> float:
        """ℓ2 sensitivity of the identity over an α-ball: α."""
        return self.alpha

    @property
    def guarantee(self) -> Guarantee:
        """{(ε, δ), α} IP with α in ℓ2 on the input pixels (IP paper Theorem 3)."""
        return Guarantee(
            epsilon=self.epsilon,
            delta=self.delta,
            radius=self.alpha,
            space=Space.INPUT,
            norm=Norm.L2,
            mechanism="Gauss-Input",
            definition=_IP_DEFINITION,
            calibration=f"{self.calibration} Gaussian",
        )

    def noise_plan(self, numel: int) -> NoisePlan:
        """What the exact sampler draws for an array of ``numel`` values (σ_eff ≥ σ)."""
        return _gaussian_plan(self, numel)

    def __call__(self, x: Any, *, rng: RngLike = None) -> Any:
        """Return x + Z for an input (batch) with values in [0, 1]; same type, shape and dtype."""
        arr, restore = as_float64("x", x)
        if arr.size and (arr.min() < 0.0 or arr.max() > 1.0):
            raise ValueError(
                f"x must hold pixel values in [0, 1] (α is measured in those units), got range "
                f"[{arr.min():.4g}, {arr.max():.4g}]; apply any normalisation after the mechanism"
            )
        return restore(_release(arr, self.noise_plan(max(1, arr.size)), rng))

    apply = __call__


@dataclass(frozen=True, kw_only=True)
class GaussOutput:
    """Gauss-Output (IP paper Def. 4 / Thm 2): M(x) = C(x) + Z, Z ~ N(0, σ²I) on the model output.

    σ = √(2 ln(1.25/δ))·Δ/ε (classic, ε < 1) or the analytic σ at sensitivity Δ (default), with
    Δ = α·μ₂ + 2η. μ₂ (``lipschitz``) is a certified upper bound on the ℓ2 → ℓ2 global Lipschitz
    constant of the whole model C; α is an ℓ2 input distance; η (``rounding``) bounds ‖y − C(x)‖₂
    for the outputs y passed in (module docstring). ``mech(y)`` takes the model output y ≈ C(x).
    """

    epsilon: float
    delta: float
    alpha: float
    lipschitz: float
    calibration: str = "analytic"
    rounding: float = 0.0
    sigma: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lipschitz", check_positive("lipschitz", self.lipschitz))
        object.__setattr__(self, "rounding", check_nonnegative("rounding", self.rounding))
        _init_gaussian(self, "lipschitz")

    @property
    def sensitivity(self) -> float:
        """ℓ2 sensitivity α·μ₂ + 2η of the computed outputs over an α-ball, rounded up."""
        return _output_sensitivity(self)

    @property
    def guarantee(self) -> Guarantee:
        """{(ε, δ), α} IP with α in ℓ2 on the model input (IP paper Theorem 2)."""
        return Guarantee(
            epsilon=self.epsilon,
            delta=self.delta,
            radius=self.alpha,
            space=Space.INPUT,
            norm=Norm.L2,
            mechanism="Gauss-Output",
            definition=_IP_DEFINITION,
            calibration=f"{self.calibration} Gaussian, {_rounding_text('μ₂', self.lipschitz, self.rounding)}",
        )

    def noise_plan(self, numel: int) -> NoisePlan:
        """What the exact sampler draws for an output array of ``numel`` values (σ_eff ≥ σ)."""
        return _gaussian_plan(self, numel)

    def __call__(self, y: Any, *, rng: RngLike = None) -> Any:
        """Return C(x) + Z for model output(s) ``y`` = C(x); same type, shape and dtype."""
        arr, restore = as_float64("y", y)
        return restore(_release(arr, self.noise_plan(max(1, arr.size)), rng))

    apply = __call__


@dataclass(frozen=True, kw_only=True)
class LapOutput:
    """Lap-Output (IP paper Def. 3 / Thm 1): M(x) = C(x) + Z, Z i.i.d. Lap((μ₁·α + 2η)/ε); pure ε.

    μ₁ (``lipschitz``) is a certified upper bound on the ℓ1 → ℓ1 global Lipschitz constant of the
    whole model C (IP paper Eq. 8 with p = 1); α is an ℓ1 input distance; η (``rounding``) bounds
    ‖y − C(x)‖₁ for the outputs y passed in (module docstring; the paper's b = μ₁·α/ε is η = 0).
    ``scale`` is b = (μ₁·α + 2η)/ε. ``mech(y)`` takes the model output y ≈ C(x).
    """

    epsilon: float
    alpha: float
    lipschitz: float
    rounding: float = 0.0
    scale: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_sampler_epsilon(self.epsilon))
        object.__setattr__(self, "alpha", check_positive("alpha", self.alpha))
        object.__setattr__(self, "lipschitz", check_positive("lipschitz", self.lipschitz))
        object.__setattr__(self, "rounding", check_nonnegative("rounding", self.rounding))
        scale = _quotient_up(self.sensitivity, self.epsilon)
        _check_scale(self, scale, "lipschitz")
        object.__setattr__(self, "scale", scale)

    @property
    def sensitivity(self) -> float:
        """ℓ1 sensitivity α·μ₁ + 2η of the computed outputs over an α-ball, rounded up."""
        return _output_sensitivity(self)

    @property
    def guarantee(self) -> Guarantee:
        """{(ε, 0), α} IP with α in ℓ1 on the model input (IP paper Theorem 1)."""
        return Guarantee(
            epsilon=self.epsilon,
            delta=0.0,
            radius=self.alpha,
            space=Space.INPUT,
            norm=Norm.L1,
            mechanism="Lap-Output",
            definition=_IP_DEFINITION,
            calibration=f"Laplace, {_rounding_text('μ₁', self.lipschitz, self.rounding)}",
        )

    def noise_plan(self, numel: int) -> NoisePlan:
        """What the exact sampler draws for an output array of ``numel`` values (scale_eff ≥ scale)."""
        return plan_laplace(sensitivity=self.sensitivity, epsilon=self.epsilon, numel=numel)

    def __call__(self, y: Any, *, rng: RngLike = None) -> Any:
        """Return C(x) + Z for model output(s) ``y`` = C(x); same type, shape and dtype."""
        arr, restore = as_float64("y", y)
        return restore(_release(arr, self.noise_plan(max(1, arr.size)), rng))

    apply = __call__
