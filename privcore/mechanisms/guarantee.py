"""The privacy guarantee a mechanism states, as a small immutable value.

One object covers the three notions privcore implements, which share the (ε, δ) shape and
differ only in which pairs of inputs count as neighbours:

* {(ε, δ), α} inference privacy (Tian et al., Definitions 1–2): inputs within distance α in a
  stated metric;
* (ε, δ, R)-semantic-neighbourhood privacy (posthoc PTR paper, Definition 1 / Eq. 3): embeddings
  within ℓ∞ distance R;
* ε-local DP (posthoc paper, Table 2 baselines): every pair of inputs (``radius = math.inf``).

For every such pair x, x' and every set S of outputs: P[M(x) ∈ S] ≤ e^ε · P[M(x') ∈ S] + δ.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from privcore.validation import check_in_range, check_nonnegative, check_positive

__all__ = ["ANY_METRIC", "Guarantee"]

#: Metric label of guarantees that hold for every pair of inputs (local DP); compatible with all.
ANY_METRIC = "any pair of inputs"


@dataclass(frozen=True, kw_only=True)
class Guarantee:
    """A stated (ε, δ) guarantee over the neighbourhood ``d(x, x') ≤ radius`` (see module docstring).

    ``radius = math.inf`` means every pair of inputs (local DP). ``metric`` names the distance
    (e.g. ``"ℓ2 on the input, pixels in [0, 1]"``); ``mechanism`` and ``definition`` say what
    produced it and which paper definition it instantiates; ``calibration`` records which noise
    calibration is in force (``"analytic"``, ``"classic"``, ``"laplace"``, ...).
    """

    epsilon: float
    delta: float
    radius: float
    metric: str = ANY_METRIC
    mechanism: str = ""
    definition: str = ""
    calibration: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_nonnegative("epsilon", self.epsilon))
        object.__setattr__(
            self, "delta", check_in_range("delta", self.delta, 0.0, 1.0, low_open=False, high_open=False)
        )
        object.__setattr__(self, "radius", check_positive("radius", self.radius, allow_inf=True))
        for name in ("metric", "mechanism", "definition", "calibration"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a string, got {type(getattr(self, name)).__name__}")

    @property
    def all_pairs(self) -> bool:
        """True when the guarantee covers every pair of inputs (local DP)."""
        return math.isinf(self.radius)

    @property
    def vacuous(self) -> bool:
        """True when δ = 1: the statement then holds for every mechanism and protects nothing."""
        return self.delta >= 1.0

    def describe(self) -> str:
        """The guarantee in plain words (Definition 2 of the IP paper / Eq. 3 of the PTR paper)."""
        if self.vacuous:
            return (
                f"No protection: δ = 1 (after ε = {self.epsilon:.4g}). Any mechanism satisfies this; "
                "the composed budget is exhausted."
            )
        who = (
            "any two inputs"
            if self.all_pairs
            else f"any two inputs within distance {self.radius:.4g} ({self.metric})"
        )
        factor = math.exp(self.epsilon) if self.epsilon < 700 else math.inf
        head = f"(ε = {self.epsilon:.4g}, δ = {self.delta:.3g})"
        if self.mechanism:
            head = f"{self.mechanism}: {head}"
        if self.definition:
            head += f" {self.definition}"
        text = (
            f"{head}. For {who}, the probability of any outcome changes by at most a factor "
            f"e^ε ≈ {factor:.4g}"
        )
        text += "." if self.delta == 0 else f", plus at most {self.delta:.3g}."
        if self.calibration:
            text += f" Noise calibration: {self.calibration}."
        return text

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (JSON-friendly except that an all-pairs radius is ``inf``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Guarantee:
        """Inverse of :meth:`to_dict`; validates again."""
        return cls(**data)
