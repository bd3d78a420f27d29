"""The privacy guarantee a mechanism states, as a small immutable value.

One object covers the three notions privcore implements, which share the (ε, δ) shape and
differ only in which pairs of inputs count as neighbours:

* {(ε, δ), α} inference privacy (Tian et al., Definitions 1–2): inputs within distance α in a
  stated ℓp norm on the model input (image pixels in [0, 1]);
* (ε, δ, R)-semantic-neighbourhood privacy (posthoc PTR paper, Definition 1 / Eq. 3): images whose
  embeddings z lie within ℓ∞ distance R;
* ε-local DP (posthoc paper, Table 2 baselines): every pair of inputs (``radius = math.inf``).

For every such pair x, x' and every set S of outputs: P[M(x) ∈ S] ≤ e^ε · P[M(x') ∈ S] + δ.

The pairs are a :class:`Neighbourhood`: a :class:`Space` (where the distance is measured), a
:class:`Norm` and a radius, validated once. Two neighbourhoods in the same space compare by the
dimension-free inclusions ‖v‖∞ ≤ ‖v‖₂ ≤ ‖v‖₁: the ℓp ball of radius a lies inside the ℓq ball of
radius α whenever p ≤ q and a ≤ α, in every dimension (so ℓ1 ⊂ ℓ2 ⊂ ℓ∞ at the same radius).
Neighbourhoods in different spaces are never contained in one another: whether two images'
embeddings are within R says nothing certified about their pixel distance, and back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

from privcore.validation import check_in_range, check_nonnegative, check_positive

__all__ = ["ANY_METRIC", "Guarantee", "Neighbourhood", "Norm", "Space"]

#: Display text of the neighbourhood of guarantees that hold for every pair of inputs (local DP).
ANY_METRIC = "any pair of inputs"


class Norm(Enum):
    """The ℓp norm a neighbourhood's distance is measured in."""

    L1 = "l1"
    L2 = "l2"
    LINF = "linf"

    @property
    def p(self) -> float:
        """The exponent p (∞ for ℓ∞)."""
        return {"l1": 1.0, "l2": 2.0, "linf": math.inf}[self.value]

    @property
    def symbol(self) -> str:
        """ℓ1, ℓ2 or ℓ∞."""
        return {"l1": "ℓ1", "l2": "ℓ2", "linf": "ℓ∞"}[self.value]


class Space(Enum):
    """Where a neighbourhood's distance is measured."""

    #: The input of the model as the user sees it: image pixels in [0, 1], before any normalisation
    #: layer (Gauss-Input adds its noise here; Gauss-/Lap-Output's μ covers C from here on).
    INPUT = "input"
    #: The embedding z = E(x) that posthoc PTR releases f(z) of.
    EMBEDDING = "embedding"

    @property
    def text(self) -> str:
        """The space in words."""
        texts = {"input": "the model input (image pixels in [0, 1])", "embedding": "the embedding z"}
        return texts[self.value]


def _member(enum: type[Enum], name: str, value: Any) -> Any:
    if value is None or isinstance(value, enum):
        return value
    allowed = ", ".join(repr(m.value) for m in enum)  # type: ignore[attr-defined]
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a {enum.__name__} or one of {allowed}, got {type(value).__name__}")
    try:
        return enum(value)
    except ValueError:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}") from None


def _metric_text(space: Space | None, norm: Norm | None) -> str:
    return ANY_METRIC if space is None or norm is None else f"{norm.symbol} on {space.text}"


#: Display texts written by earlier versions (stored ledgers, release documents) and what they meant.
_LEGACY_METRICS: dict[str, tuple[Space, Norm]] = {
    "ℓ2 on the input, pixel values in [0, 1]": (Space.INPUT, Norm.L2),  # Gauss-Input
    "ℓ2 on the model input": (Space.INPUT, Norm.L2),  # Gauss-Output (same pixels as Gauss-Input)
    "ℓ1 on the model input": (Space.INPUT, Norm.L1),  # Lap-Output
    "ℓ2 on the input": (Space.INPUT, Norm.L2),  # the Accountant page's calculator
    "ℓ1 on the input": (Space.INPUT, Norm.L1),
    "ℓ∞ on the embedding z": (Space.EMBEDDING, Norm.LINF),  # posthoc PTR
    **{_metric_text(s, n): (s, n) for s in Space for n in Norm},
}


def _parse_metric(metric: str) -> tuple[Space, Norm]:
    if metric not in _LEGACY_METRICS:
        raise ValueError(
            f"metric {metric!r} names no known neighbourhood: give space (one of "
            f"{', '.join(repr(s.value) for s in Space)}) and norm (one of "
            f"{', '.join(repr(n.value) for n in Norm)}); a guarantee the ledger cannot compare with "
            "the others would make it under-report"
        )
    return _LEGACY_METRICS[metric]


@dataclass(frozen=True, kw_only=True)
class Neighbourhood:
    """The pairs (x, x') with ‖x − x'‖ ≤ radius in ``norm`` on ``space``; radius ∞: every pair.

    An all-pairs neighbourhood has no space or norm (a guarantee for every pair of embeddings, or
    of pixels, is one for every pair of inputs); ``space`` and ``norm`` given with radius ∞ are
    dropped for that reason. A finite radius needs both.
    """

    radius: float
    space: Space | None = None
    norm: Norm | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "radius", check_positive("radius", self.radius, allow_inf=True))
        space, norm = _member(Space, "space", self.space), _member(Norm, "norm", self.norm)
        if math.isinf(self.radius):
            space = norm = None
        elif space is None or norm is None:
            raise ValueError(
                f"a finite radius ({self.radius!r}) needs both space and norm, got space = {self.space!r}, "
                f"norm = {self.norm!r}"
            )
        object.__setattr__(self, "space", space)
        object.__setattr__(self, "norm", norm)

    @property
    def all_pairs(self) -> bool:
        """True for every pair of inputs."""
        return math.isinf(self.radius)

    @property
    def metric(self) -> str:
        """The distance in words, e.g. ``"ℓ2 on the model input (image pixels in [0, 1])"``."""
        return _metric_text(self.space, self.norm)

    def within(self, other: Neighbourhood) -> bool:
        """True when every pair of this neighbourhood is a pair of ``other``.

        In one space, the ℓp ball of radius a lies in the ℓq ball of radius α in every dimension
        iff p ≤ q and a ≤ α (‖v‖_q ≤ ‖v‖_p for q ≥ p, equality on a coordinate axis). Different
        spaces: never (nothing certified links a pixel distance to an embedding distance).
        """
        if not isinstance(other, Neighbourhood):
            raise TypeError(f"other must be a Neighbourhood, got {type(other).__name__}")
        if other.all_pairs:
            return True
        if self.all_pairs or self.space is not other.space:
            return False
        assert self.norm is not None and other.norm is not None
        return self.norm.p <= other.norm.p and self.radius <= other.radius

    def describe(self) -> str:
        """``"pairs within ℓ2 distance 0.1 on the model input (…)"`` or ``"every pair of inputs"``."""
        if self.all_pairs:
            return "every pair of inputs"
        assert self.norm is not None and self.space is not None
        return f"pairs within {self.norm.symbol} distance {self.radius:.4g} on {self.space.text}"


@dataclass(frozen=True, kw_only=True)
class Guarantee:
    """A stated (ε, δ) guarantee over the pairs of a :class:`Neighbourhood` (see module docstring).

    ``radius = math.inf`` means every pair of inputs (local DP). Otherwise ``space`` and ``norm``
    say where and how the distance is measured (enum members or their values, e.g. ``"input"``,
    ``"l2"``). ``metric`` is display text derived from them; for stored data written before they
    existed, a known old ``metric`` text alone is accepted and mapped to (space, norm), and any
    other text is refused. ``mechanism`` and ``definition`` say what produced it and which paper
    definition it instantiates; ``calibration`` records which noise calibration is in force.
    """

    epsilon: float
    delta: float
    radius: float
    space: Space | None = None
    norm: Norm | None = None
    metric: str = ""
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
        space, norm = _member(Space, "space", self.space), _member(Norm, "norm", self.norm)
        if self.metric and self.metric != ANY_METRIC:
            stated = _parse_metric(self.metric)
            if space is None and norm is None:
                space, norm = stated
            elif (space, norm) != stated:
                raise ValueError(
                    f"metric {self.metric!r} contradicts space = {self.space!r}, norm = {self.norm!r}; "
                    "give space and norm only (metric is derived from them)"
                )
        elif self.metric == ANY_METRIC and not math.isinf(self.radius):
            raise ValueError(
                f"metric {ANY_METRIC!r} needs radius = inf, got radius = {self.radius!r}; give space and norm"
            )
        hood = Neighbourhood(radius=self.radius, space=space, norm=norm)
        object.__setattr__(self, "space", hood.space)
        object.__setattr__(self, "norm", hood.norm)
        object.__setattr__(self, "metric", hood.metric)

    @property
    def neighbourhood(self) -> Neighbourhood:
        """The pairs this guarantee is stated for."""
        return Neighbourhood(radius=self.radius, space=self.space, norm=self.norm)

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
        """Plain data (JSON-friendly except that an all-pairs radius is ``inf``); space and norm as
        their string values (``None`` for all pairs)."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "radius": self.radius,
            "space": None if self.space is None else self.space.value,
            "norm": None if self.norm is None else self.norm.value,
            "metric": self.metric,
            "mechanism": self.mechanism,
            "definition": self.definition,
            "calibration": self.calibration,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Guarantee:
        """Inverse of :meth:`to_dict`; validates again. A dict written before ``space``/``norm``
        existed is read through its ``metric`` text (known texts only; anything else is refused)."""
        if not isinstance(data, dict):
            raise TypeError(f"data must be a dict, got {type(data).__name__}")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"data has unknown guarantee fields {unknown}")
        return cls(**data)
