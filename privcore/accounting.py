"""Privacy accounting on :class:`~privcore.mechanisms.guarantee.Guarantee` objects (pure maths).

Rules (Tian et al., "inference privacy", Section III and Appendices A–D; Vadhan 2017):

* post-processing (Prop. 1): F∘M keeps M's guarantee;
* basic composition (Prop. 2): independent M_i on the same input give (Σε_i, Σδ_i) at min α_i;
* parallel composition (Prop. 3): M_i on disjoint chunks of the input give (Σε_i, Σδ_i) at
  min α_i. Unlike DP's parallel composition (max ε), *every* chunk of two neighbouring inputs may
  differ, so the budgets add (the paper's Remark 6); each chunk's distance is ≤ the whole
  input's, so every M_i applies at radius min α_i;
* chaining (Prop. 4, proof in Appendix D): with h = ⌈β/α⌉, (ε, δ) at α gives
  (h·ε, δ·(e^{hε} − 1)/(e^ε − 1)) at β, by walking h hops of length ≤ α along the segment (needs a
  geodesic metric such as any ℓp norm). The main text's (hε, hδ) is a misprint: Eq. (33) of the
  appendix derives δ·Σ_{i<h} e^{iε}, which exceeds hδ for ε > 0;
* group privacy (Vadhan 2017, Lemma 2.2, as cited by the posthoc paper): (kε, k·e^{(k−1)ε}·δ)
  for groups of k, here radius k·α. chaining(g, k·α) is never worse and usually tighter.

Every composed ε and δ is rounded *up* (the sums are correctly rounded by ``math.fsum`` and then
moved up one ulp; closed forms get a 1e-12 relative margin), δ is capped at 1 (a vacuous but true
statement), and guarantees over different metrics are never combined.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from privcore.mechanisms.guarantee import ANY_METRIC, Guarantee
from privcore.validation import check_int, check_positive

__all__ = [
    "LedgerEntry",
    "PrivacyLedger",
    "basic_composition",
    "chaining",
    "chaining_hops",
    "group_privacy",
    "parallel_composition",
    "post_processing",
]

_MARGIN = 1.0 + 1e-12


def _up(x: float) -> float:
    return math.nextafter(x, math.inf) if x > 0 else x


def _check(g: Any, name: str = "guarantee") -> Guarantee:
    if not isinstance(g, Guarantee):
        raise TypeError(f"{name} must be a Guarantee, got {type(g).__name__}")
    return g


def _common_metric(gs: list[Guarantee]) -> str:
    metrics = {g.metric for g in gs if g.metric != ANY_METRIC}
    if len(metrics) > 1:
        raise ValueError(
            "cannot compose guarantees over different neighbourhood metrics: "
            + ", ".join(sorted(repr(m) for m in metrics))
        )
    return metrics.pop() if metrics else ANY_METRIC


def _sum_compose(guarantees: Iterable[Guarantee], label: str) -> Guarantee:
    gs = [_check(g, "guarantees[]") for g in guarantees]
    if not gs:
        raise ValueError("guarantees must hold at least one Guarantee")
    if len(gs) == 1:
        return gs[0]
    metric = _common_metric(gs)
    definitions = {g.definition for g in gs}
    return Guarantee(
        epsilon=_up(math.fsum(g.epsilon for g in gs)),
        delta=min(1.0, _up(math.fsum(g.delta for g in gs))),
        radius=min(g.radius for g in gs),
        metric=metric,
        mechanism=f"{label} of {len(gs)}",
        definition=definitions.pop() if len(definitions) == 1 else "",
    )


def post_processing(guarantee: Guarantee) -> Guarantee:
    """F∘M for any data-independent (possibly randomised) F keeps M's guarantee (IP paper Prop. 1)."""
    return _check(guarantee)


def basic_composition(guarantees: Iterable[Guarantee]) -> Guarantee:
    """(Σε, Σδ) at min α for independent mechanisms on the same input (IP paper Prop. 2)."""
    return _sum_compose(guarantees, "basic composition")


def parallel_composition(guarantees: Iterable[Guarantee]) -> Guarantee:
    """(Σε, Σδ) at min α for independent mechanisms on disjoint chunks (IP paper Prop. 3, Remark 6)."""
    return _sum_compose(guarantees, "parallel composition")


def chaining_hops(alpha: float, beta: float) -> int:
    """h = ⌈β/α⌉ ≥ 1, computed exactly on the two floating-point values.

    Both floats are converted to exact rationals (``fractions.Fraction``) before dividing, so a
    rounded quotient can never under-count the hops: 0.3/0.1 (really 2.9999999999999996) gives 3,
    and a β whose float lies just above a multiple (0.1 + 0.2 = 0.30000000000000004 with α = 0.1)
    gives 4, the conservative side, where float division might have said 3.
    """
    a = check_positive("alpha", alpha, allow_inf=True)
    b = check_positive("beta", beta)
    if math.isinf(a):
        return 1
    return max(1, math.ceil(Fraction(b) / Fraction(a)))


def _log_expm1(x: float) -> float:
    """log(e^x − 1) for x > 0, without overflow."""
    return x + math.log(-math.expm1(-x))


def chaining(guarantee: Guarantee, beta: float) -> Guarantee:
    """(h·ε, δ·(e^{hε} − 1)/(e^ε − 1)) at radius β, h = ⌈β/α⌉ (IP paper Prop. 4, Appendix D, Eq. 33).

    The main text's hδ is a misprint of the appendix's geometric sum δ·Σ_{i<h} e^{iε}. Valid for
    geodesic metrics (ℓp norms): the proof walks h hops of length ≤ α along the segment. h = 1
    (β ≤ α) returns the same (ε, δ) at radius β; an all-pairs guarantee is returned unchanged.
    """
    g = _check(guarantee)
    b = check_positive("beta", beta)
    if g.all_pairs:
        return g
    h = chaining_hops(g.radius, b)
    if h == 1:
        return Guarantee(**{**g.to_dict(), "radius": b})
    if g.delta == 0.0:
        delta = 0.0
    elif g.epsilon == 0.0:
        delta = min(1.0, h * g.delta * _MARGIN)
    else:
        log_delta = math.log(g.delta) + _log_expm1(h * g.epsilon) - _log_expm1(g.epsilon)
        delta = 1.0 if log_delta >= 0 else min(1.0, math.exp(log_delta) * _MARGIN)
    return Guarantee(
        epsilon=_up(h * g.epsilon),
        delta=delta,
        radius=b,
        metric=g.metric,
        mechanism=f"{g.mechanism} chained over {h} hops".strip(),
        definition=g.definition,
        calibration=g.calibration,
    )


def group_privacy(guarantee: Guarantee, k: int) -> Guarantee:
    """(kε, k·e^{(k−1)ε}·δ) at radius k·α (Vadhan 2017, Lemma 2.2). k = 1 is the identity.

    :func:`chaining` at β = k·α gives δ·(e^{kε} − 1)/(e^ε − 1) ≤ k·e^{(k−1)ε}·δ: prefer it. An
    all-pairs guarantee is returned unchanged.
    """
    g = _check(guarantee)
    kk = check_int("k", k, minimum=1)
    if kk == 1 or g.all_pairs:
        return g
    if g.delta == 0.0:
        delta = 0.0
    else:
        log_delta = math.log(kk) + (kk - 1) * g.epsilon + math.log(g.delta)
        delta = 1.0 if log_delta >= 0 else min(1.0, math.exp(log_delta) * _MARGIN)
    return Guarantee(
        epsilon=_up(kk * g.epsilon),
        delta=delta,
        radius=_up(kk * g.radius),
        metric=g.metric,
        mechanism=f"{g.mechanism} for groups of {kk}".strip(),
        definition=g.definition,
        calibration=g.calibration,
    )


@dataclass(frozen=True, kw_only=True)
class LedgerEntry:
    """One released output: a label and its guarantee."""

    label: str
    guarantee: Guarantee

    def to_dict(self) -> dict[str, Any]:
        """Plain data: ``{"label": ..., **guarantee fields}``."""
        return {"label": self.label, **self.guarantee.to_dict()}


@dataclass(frozen=True, kw_only=True)
class PrivacyLedger:
    """An append-only record of releases on the same input; ``add`` returns a new ledger.

    ``total()`` is their basic composition (IP paper Prop. 2); ``totals_by_metric()`` composes
    each neighbourhood metric separately (guarantees over different metrics do not combine).
    Serialises to and from a list of plain dicts (``to_dicts`` / ``from_dicts``).
    """

    entries: tuple[LedgerEntry, ...] = ()

    def add(self, guarantee: Guarantee, *, label: str) -> PrivacyLedger:
        """A new ledger with one more entry."""
        if not isinstance(label, str) or not label:
            raise ValueError(f"label must be a non-empty string, got {label!r}")
        return PrivacyLedger(entries=(*self.entries, LedgerEntry(label=label, guarantee=_check(guarantee))))

    def __len__(self) -> int:
        return len(self.entries)

    def total(self) -> Guarantee:
        """Basic composition of every entry; (0, 0) over all pairs when nothing was released."""
        if not self.entries:
            return Guarantee(epsilon=0.0, delta=0.0, radius=math.inf, mechanism="nothing released")
        return basic_composition(e.guarantee for e in self.entries)

    def totals_by_metric(self) -> dict[str, Guarantee]:
        """Basic composition per neighbourhood metric (all-pairs entries count towards every metric)."""
        anywhere = [e.guarantee for e in self.entries if e.guarantee.metric == ANY_METRIC]
        metrics = sorted({e.guarantee.metric for e in self.entries if e.guarantee.metric != ANY_METRIC})
        if not metrics:
            return {ANY_METRIC: self.total()} if self.entries else {}
        return {
            m: basic_composition([e.guarantee for e in self.entries if e.guarantee.metric == m] + anywhere)
            for m in metrics
        }

    def to_dicts(self) -> list[dict[str, Any]]:
        """Plain-data form, one dict per entry."""
        return [e.to_dict() for e in self.entries]

    @classmethod
    def from_dicts(cls, data: Iterable[dict[str, Any]]) -> PrivacyLedger:
        """Inverse of :meth:`to_dicts` (validates every guarantee again)."""
        entries = []
        for item in data:
            fields = dict(item)
            label = fields.pop("label")
            entries.append(LedgerEntry(label=label, guarantee=Guarantee.from_dict(fields)))
        return cls(entries=tuple(entries))
