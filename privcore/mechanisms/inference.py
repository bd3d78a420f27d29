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

Noise is drawn by :mod:`privcore.mechanisms.sampling` (exact on a power-of-two grid). ``.sigma``
and ``.scale`` are the paper's formulas; ``noise_plan(numel)`` shows what the sampler draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from privcore.mechanisms._arrays import as_float64
from privcore.mechanisms.gaussian_calibration import CALIBRATIONS, gaussian_sigma
from privcore.mechanisms.guarantee import Guarantee
from privcore.mechanisms.sampling import (
    NoisePlan,
    RngLike,
    add_noise,
    check_sampler_epsilon,
    plan_gaussian,
    plan_laplace,
)
from privcore.validation import check_choice, check_delta, check_positive

__all__ = ["GaussInput", "GaussOutput", "LapOutput"]

_IP_DEFINITION = "{(ε, δ), α} inference privacy (Tian et al., Def. 2)"


def _round_up_product(a: float, b: float) -> float:
    """a·b rounded up (one ulp), so a sensitivity computed from it is an upper bound."""
    return math.nextafter(a * b, math.inf)


def _init_gaussian(mech: Any) -> None:
    """Validate ε, δ, α and the calibration of a Gaussian IP mechanism and set its σ (IP paper Thms 2–3).

    σ is calibrated to ``mech.sensitivity`` (α for Gauss-Input, α·μ₂ rounded up for Gauss-Output).
    """
    object.__setattr__(mech, "epsilon", check_sampler_epsilon(mech.epsilon))
    object.__setattr__(mech, "delta", check_delta(mech.delta))
    object.__setattr__(mech, "alpha", check_positive("alpha", mech.alpha))
    check_choice("calibration", mech.calibration, CALIBRATIONS)
    sigma = gaussian_sigma(
        epsilon=mech.epsilon, delta=mech.delta, sensitivity=mech.sensitivity, calibration=mech.calibration
    )
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
        _init_gaussian(self)

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
            metric="ℓ2 on the input, pixel values in [0, 1]",
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
        return restore(add_noise(arr, self.noise_plan(max(1, arr.size)), rng))

    apply = __call__


@dataclass(frozen=True, kw_only=True)
class GaussOutput:
    """Gauss-Output (IP paper Def. 4 / Thm 2): M(x) = C(x) + Z, Z ~ N(0, σ²I) on the model output.

    σ = √(2 ln(1.25/δ))·α·μ₂/ε (classic, ε < 1) or the analytic σ at sensitivity α·μ₂ (default).
    μ₂ (``lipschitz``) is a certified upper bound on the ℓ2 → ℓ2 global Lipschitz constant of the
    whole model C; α is an ℓ2 input distance. ``mech(y)`` takes the model output y = C(x).
    """

    epsilon: float
    delta: float
    alpha: float
    lipschitz: float
    calibration: str = "analytic"
    sigma: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lipschitz", check_positive("lipschitz", self.lipschitz))
        _init_gaussian(self)

    @property
    def sensitivity(self) -> float:
        """ℓ2 sensitivity α·μ₂ of C over an α-ball, rounded up."""
        return _round_up_product(self.alpha, self.lipschitz)

    @property
    def guarantee(self) -> Guarantee:
        """{(ε, δ), α} IP with α in ℓ2 on the model input (IP paper Theorem 2)."""
        return Guarantee(
            epsilon=self.epsilon,
            delta=self.delta,
            radius=self.alpha,
            metric="ℓ2 on the model input",
            mechanism="Gauss-Output",
            definition=_IP_DEFINITION,
            calibration=f"{self.calibration} Gaussian, μ₂ = {self.lipschitz:.4g}",
        )

    def noise_plan(self, numel: int) -> NoisePlan:
        """What the exact sampler draws for an output array of ``numel`` values (σ_eff ≥ σ)."""
        return _gaussian_plan(self, numel)

    def __call__(self, y: Any, *, rng: RngLike = None) -> Any:
        """Return C(x) + Z for model output(s) ``y`` = C(x); same type, shape and dtype."""
        arr, restore = as_float64("y", y)
        return restore(add_noise(arr, self.noise_plan(max(1, arr.size)), rng))

    apply = __call__


@dataclass(frozen=True, kw_only=True)
class LapOutput:
    """Lap-Output (IP paper Def. 3 / Thm 1): M(x) = C(x) + Z, Z i.i.d. Lap(μ₁·α/ε); pure ε (δ = 0).

    μ₁ (``lipschitz``) is a certified upper bound on the ℓ1 → ℓ1 global Lipschitz constant of the
    whole model C (IP paper Eq. 8 with p = 1); α is an ℓ1 input distance. ``mech(y)`` takes the
    model output y = C(x).
    """

    epsilon: float
    alpha: float
    lipschitz: float
    scale: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_sampler_epsilon(self.epsilon))
        object.__setattr__(self, "alpha", check_positive("alpha", self.alpha))
        object.__setattr__(self, "lipschitz", check_positive("lipschitz", self.lipschitz))
        object.__setattr__(self, "scale", self.lipschitz * self.alpha / self.epsilon)

    @property
    def sensitivity(self) -> float:
        """ℓ1 sensitivity α·μ₁ of C over an α-ball, rounded up."""
        return _round_up_product(self.alpha, self.lipschitz)

    @property
    def guarantee(self) -> Guarantee:
        """{(ε, 0), α} IP with α in ℓ1 on the model input (IP paper Theorem 1)."""
        return Guarantee(
            epsilon=self.epsilon,
            delta=0.0,
            radius=self.alpha,
            metric="ℓ1 on the model input",
            mechanism="Lap-Output",
            definition=_IP_DEFINITION,
            calibration=f"Laplace, μ₁ = {self.lipschitz:.4g}",
        )

    def noise_plan(self, numel: int) -> NoisePlan:
        """What the exact sampler draws for an output array of ``numel`` values (scale_eff ≥ scale)."""
        return plan_laplace(sensitivity=self.sensitivity, epsilon=self.epsilon, numel=numel)

    def __call__(self, y: Any, *, rng: RngLike = None) -> Any:
        """Return C(x) + Z for model output(s) ``y`` = C(x); same type, shape and dtype."""
        arr, restore = as_float64("y", y)
        return restore(add_noise(arr, self.noise_plan(max(1, arr.size)), rng))

    apply = __call__
