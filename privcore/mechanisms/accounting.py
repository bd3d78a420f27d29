"""Privacy accounting on :class:`~privcore.mechanisms.guarantee.Guarantee` objects (pure maths).

Rules (Tian et al., "inference privacy", Section III and Appendices A–D; Vadhan 2017):

* post-processing (Prop. 1): F∘M keeps M's guarantee;
* basic composition (Prop. 2): independent M_i on the same input give (Σε_i, Σδ_i) for every pair
  of inputs that is a neighbour under every M_i's guarantee. In one space that is the ball of the
  smallest ℓp norm and the smallest radius among them (‖·‖∞ ≤ ‖·‖₂ ≤ ‖·‖₁ in any dimension, so the
  ℓ1 ball of radius min α_i lies inside every ℓ1, ℓ2 and ℓ∞ ball of radius ≥ min α_i);
* parallel composition (Prop. 3): M_i on disjoint chunks of the input give (Σε_i, Σδ_i) on the
  same neighbourhood. Unlike DP's parallel composition (max ε), *every* chunk of two neighbouring
  inputs may differ, so the budgets add (the paper's Remark 6); each chunk's distance is ≤ the
  whole input's, so every M_i applies;
* chaining (Prop. 4, proof in Appendix D): with h = ⌈β/α⌉, (ε, δ) at α gives
  (h·ε, δ·(e^{hε} − 1)/(e^ε − 1)) at β, by walking h hops of length ≤ α along the segment (needs a
  geodesic metric such as any ℓp norm). The main text's (hε, hδ) is a misprint: Eq. (33) of the
  appendix derives δ·Σ_{i<h} e^{iε}, which exceeds hδ for ε > 0;
* group privacy (Vadhan 2017, Lemma 2.2, as cited by the posthoc paper): (kε, k·e^{(k−1)ε}·δ)
  for groups of k, here radius k·α. chaining(g, k·α) is never worse and usually tighter.

The ledger (:class:`PrivacyLedger`) composes per neighbourhood relation, not per label: a release
stated for (space s, ℓq, α_i) applies to every pair within ℓp distance a in s whenever the ℓp ball
of radius a lies in the ℓq ball of radius α_i, i.e. p ≤ q and a ≤ α_i (the dimension-free
inclusions; nothing is assumed about the dimension). For each relation in the ledger it reports
the composition of the releases that cover every pair of it, and names the ones that do not; the
worst case is the composition of *every* entry, which is what a pair that is a neighbour under all
of them loses (in one space, pairs within ℓ1 distance min α_i are such pairs, and they exist).

Spaces are not converted into one another. PTR's guarantee (posthoc Thm 4.4) is over images whose
embeddings z = E(x) lie within ℓ∞ distance R; which pixel pairs those are depends on the encoder E,
and no pixel ball is certified to map into an R-ball of z (that would need a certified Lipschitz
bound on E, which the shipped encoders do not have), nor the other way round. So the ledger does
not restate a pixel-space guarantee over embedding pairs or back; but one pair of images can be
a neighbour in both spaces at once (a small enough pixel change moves a continuous encoder's
embedding by less than R), and such a pair loses the sum of both spaces' budgets. The worst case
therefore adds every entry, across spaces too.

Every composed ε and δ is rounded *up* (correctly rounded sums by ``math.fsum``, moved up one ulp
when below the exact sum; closed forms get a 1e-12 relative margin), δ is capped at 1 (a vacuous
but true statement), and a guarantee is never restated for pairs it does not cover.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from privcore.mechanisms.guarantee import Guarantee, Neighbourhood, Space
from privcore.validation import check_int, check_positive

__all__ = [
    "LedgerEntry",
    "PrivacyLedger",
    "RelationTotal",
    "basic_composition",
    "chaining",
    "chaining_hops",
    "common_neighbourhood",
    "group_privacy",
    "parallel_composition",
    "post_processing",
]

_MARGIN = 1.0 + 1e-12


def _int_text(n: int) -> str:
    """An integer for an error message (huge ones by their order of magnitude)."""
    return str(n) if n < 10**30 else f"about 10^{math.log10(n):.0f}"


def _float_up(exact: Fraction, what: str) -> float:
    """The smallest float ≥ ``exact``; ValueError (``what`` says which quantity) past float64."""
    try:
        x = float(exact)  # correctly rounded
    except OverflowError:
        x = math.inf
    if math.isinf(x):
        raise ValueError(f"{what} overflows float64")
    return x if Fraction(x) >= exact else math.nextafter(x, math.inf)


def _float_down(exact: Fraction) -> float:
    """The largest float ≤ ``exact`` (> 0), the largest finite float past float64's range."""
    try:
        x = float(exact)
    except OverflowError:
        x = math.inf
    if math.isinf(x):
        return sys.float_info.max
    return x if Fraction(x) <= exact else math.nextafter(x, 0.0)


def _sum_up(name: str, values: list[float]) -> float:
    """Σ values rounded up: the smallest float ≥ the exact sum of the floats (so 1 + 1 + 1 is 3, and
    0.1 + 0.1 + 0.1 is never below 3 × 0.1)."""
    return _float_up(sum(map(Fraction, values), Fraction(0)), f"the composed {name} (a sum of {len(values)})")


def _check(g: Any, name: str = "guarantee") -> Guarantee:
    if not isinstance(g, Guarantee):
        raise TypeError(f"{name} must be a Guarantee, got {type(g).__name__}")
    return g


def _joint(hoods: Iterable[Neighbourhood]) -> tuple[Neighbourhood, ...]:
    """Per space (in :class:`Space` order), the largest neighbourhood inside every one given there:
    the smallest ℓp norm and the smallest radius. Only all-pairs ones: (every pair,)."""
    hoods = list(hoods)
    out = []
    for space in Space:
        mine = [h for h in hoods if h.space is space]
        if mine:
            norm = min((h.norm for h in mine), key=lambda n: n.p)  # type: ignore[union-attr]
            out.append(Neighbourhood(space=space, norm=norm, radius=min(h.radius for h in mine)))
    return tuple(out) or (Neighbourhood(radius=math.inf),)


def common_neighbourhood(guarantees: Iterable[Guarantee]) -> Neighbourhood:
    """The largest neighbourhood every guarantee covers (smallest ℓp norm, smallest radius).

    ValueError for guarantees on different spaces: no neighbourhood of one space lies inside one of
    another (module docstring), so they have no common neighbourhood to state a total for.
    """
    gs = [_check(g, "guarantees[]") for g in guarantees]
    joint = _joint(g.neighbourhood for g in gs)
    if len(joint) > 1:
        raise ValueError(
            "cannot compose guarantees on different spaces ("
            + ", ".join(h.metric for h in joint)
            + ") into one guarantee: no neighbourhood of one space lies inside one of another; "
            "PrivacyLedger.worst_case() adds them for pairs that are neighbours in every space"
        )
    return joint[0]


def _sum_compose(guarantees: Iterable[Guarantee], label: str) -> Guarantee:
    gs = [_check(g, "guarantees[]") for g in guarantees]
    if not gs:
        raise ValueError("guarantees must hold at least one Guarantee")
    if len(gs) == 1:
        return gs[0]
    hood = common_neighbourhood(gs)
    definitions = {g.definition for g in gs}
    return Guarantee(
        epsilon=_sum_up("epsilon", [g.epsilon for g in gs]),
        delta=min(1.0, _sum_up("delta", [g.delta for g in gs])),
        radius=hood.radius,
        space=hood.space,
        norm=hood.norm,
        mechanism=f"{label} of {len(gs)}",
        definition=definitions.pop() if len(definitions) == 1 else "",
    )


def post_processing(guarantee: Guarantee) -> Guarantee:
    """F∘M for any data-independent (possibly randomised) F keeps M's guarantee (IP paper Prop. 1)."""
    return _check(guarantee)


def basic_composition(guarantees: Iterable[Guarantee]) -> Guarantee:
    """(Σε, Σδ) for independent mechanisms on the same input (IP paper Prop. 2), stated on the
    largest neighbourhood all of them cover (:func:`common_neighbourhood`: smallest norm and radius)."""
    return _sum_compose(guarantees, "basic composition")


def parallel_composition(guarantees: Iterable[Guarantee]) -> Guarantee:
    """(Σε, Σδ) for independent mechanisms on disjoint chunks (IP paper Prop. 3, Remark 6), on the
    same neighbourhood as :func:`basic_composition`."""
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
    what = f"beta = {b!r}: the chained epsilon h·ε (h = ⌈beta/radius⌉ = {_int_text(h)})"
    eps = _float_up(h * Fraction(g.epsilon), what)
    if g.delta == 0.0:
        delta = 0.0
    elif g.epsilon == 0.0:
        exact = h * Fraction(g.delta)
        delta = 1.0 if exact >= 1 else min(1.0, _float_up(exact, "delta") * _MARGIN)
    else:
        log_delta = math.log(g.delta) + _log_expm1(eps) - _log_expm1(g.epsilon)
        delta = 1.0 if log_delta >= 0 else min(1.0, math.exp(log_delta) * _MARGIN)
    return Guarantee(
        epsilon=eps,
        delta=delta,
        radius=b,
        space=g.space,
        norm=g.norm,
        mechanism=f"{g.mechanism} chained over {h} hops".strip(),
        definition=g.definition,
        calibration=g.calibration,
    )


def group_privacy(guarantee: Guarantee, k: int) -> Guarantee:
    """(kε, k·e^{(k−1)ε}·δ) at radius k·α (Vadhan 2017, Lemma 2.2). k = 1 is the identity.

    k·α is rounded down (the largest finite float past float64's range): a smaller radius is a
    weaker, still true statement, where rounding up would claim pairs the lemma does not cover.

    :func:`chaining` at β = k·α gives δ·(e^{kε} − 1)/(e^ε − 1) ≤ k·e^{(k−1)ε}·δ: prefer it. An
    all-pairs guarantee is returned unchanged.
    """
    g = _check(guarantee)
    kk = check_int("k", k, minimum=1)
    if kk == 1 or g.all_pairs:
        return g
    eps = _float_up(kk * Fraction(g.epsilon), f"k = {_int_text(kk)}: the group epsilon k·ε")
    if g.delta == 0.0:
        delta = 0.0
    else:
        eps_k1 = _float_up((kk - 1) * Fraction(g.epsilon), "(k − 1)·ε")  # ≤ eps: finite
        log_delta = math.log(kk) + eps_k1 + math.log(g.delta)
        delta = 1.0 if log_delta >= 0 else min(1.0, math.exp(log_delta) * _MARGIN)
    return Guarantee(
        epsilon=eps,
        delta=delta,
        radius=_float_down(kk * Fraction(g.radius)),  # down: never claim pairs beyond k·α
        space=g.space,
        norm=g.norm,
        mechanism=f"{g.mechanism} for groups of {kk}".strip(),
        definition=g.definition,
        calibration=g.calibration,
    )


@dataclass(frozen=True, kw_only=True)
class LedgerEntry:
    """One released output: a label and its guarantee."""

    label: str
    guarantee: Guarantee

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label:
            raise ValueError(f"label must be a non-empty string, got {self.label!r}")
        _check(self.guarantee)

    def to_dict(self) -> dict[str, Any]:
        """Plain data: ``{"label": ..., **guarantee fields}``."""
        return {"label": self.label, **self.guarantee.to_dict()}


@dataclass(frozen=True, kw_only=True)
class RelationTotal:
    """What a ledger's releases cost the pairs that are neighbours under every one of ``neighbourhoods``.

    ``covering`` indexes the entries whose guarantee covers every such pair; (``epsilon``, ``delta``)
    is their basic composition (IP paper Prop. 2). ``missing`` indexes the others: some such pairs
    lie outside their neighbourhood, and those releases state nothing for them, while the pairs
    that lie inside lose their budget as well (the ledger's :meth:`~PrivacyLedger.worst_case`).
    """

    neighbourhoods: tuple[Neighbourhood, ...]
    epsilon: float
    delta: float
    covering: tuple[int, ...]
    missing: tuple[int, ...]

    @property
    def complete(self) -> bool:
        """True when every release of the ledger covers every such pair, so this is their full cost."""
        return not self.missing

    @property
    def vacuous(self) -> bool:
        """True when δ reached 1: no protection left for these pairs."""
        return self.delta >= 1.0

    @property
    def guarantee(self) -> Guarantee | None:
        """The total as one :class:`Guarantee` when it is stated on one neighbourhood (else None)."""
        if len(self.neighbourhoods) != 1:
            return None
        hood = self.neighbourhoods[0]
        return Guarantee(
            epsilon=self.epsilon,
            delta=self.delta,
            radius=hood.radius,
            space=hood.space,
            norm=hood.norm,
            mechanism=f"basic composition of {len(self.covering)}",
        )

    def pairs(self) -> str:
        """The pairs meant, in words (``"pairs within … and at the same time within …"``)."""
        texts = [h.describe() for h in self.neighbourhoods]
        if len(texts) == 1:
            return texts[0]
        return "pairs " + " and at the same time ".join(t.removeprefix("pairs ") for t in texts)


def _relation_order(h: Neighbourhood) -> tuple[int, float, float]:
    space = len(Space) if h.space is None else list(Space).index(h.space)
    return (space, math.inf if h.norm is None else h.norm.p, h.radius)


@dataclass(frozen=True, kw_only=True)
class PrivacyLedger:
    """An append-only record of releases on the same input; ``add`` returns a new ledger.

    :meth:`totals_by_relation` composes, for each neighbourhood relation in the ledger (and, per
    space, the one every release there covers), the releases that cover every pair of it;
    :meth:`worst_case` is the composition of all entries, what a pair that is a neighbour under
    every relation loses, across spaces too (module docstring). :meth:`total` is the same sum as
    one :class:`Guarantee` when the ledger has one space. Serialises to and from a list of plain
    dicts (``to_dicts`` / ``from_dicts``).
    """

    entries: tuple[LedgerEntry, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.entries, tuple) or not all(isinstance(e, LedgerEntry) for e in self.entries):
            raise TypeError("entries must be a tuple of LedgerEntry")

    def add(self, guarantee: Guarantee, *, label: str) -> PrivacyLedger:
        """A new ledger with one more entry."""
        return PrivacyLedger(entries=(*self.entries, LedgerEntry(label=label, guarantee=guarantee)))

    def __len__(self) -> int:
        return len(self.entries)

    def total(self) -> Guarantee:
        """Basic composition of every entry; (0, 0) over all pairs when nothing was released.

        ValueError when the entries lie in different spaces (no one neighbourhood to state it on):
        use :meth:`worst_case`.
        """
        if not self.entries:
            return Guarantee(epsilon=0.0, delta=0.0, radius=math.inf, mechanism="nothing released")
        return basic_composition(e.guarantee for e in self.entries)

    def _total_for(self, hoods: tuple[Neighbourhood, ...]) -> RelationTotal:
        # a pair in every one of ``hoods`` is covered by an entry that covers one of them
        covering = tuple(
            i for i, e in enumerate(self.entries) if any(h.within(e.guarantee.neighbourhood) for h in hoods)
        )
        missing = tuple(i for i in range(len(self.entries)) if i not in covering)
        gs = [self.entries[i].guarantee for i in covering]
        return RelationTotal(
            neighbourhoods=hoods,
            epsilon=_sum_up("epsilon", [g.epsilon for g in gs]) if gs else 0.0,
            delta=min(1.0, _sum_up("delta", [g.delta for g in gs])) if gs else 0.0,
            covering=covering,
            missing=missing,
        )

    def totals_by_relation(self) -> tuple[RelationTotal, ...]:
        """One total per neighbourhood relation of the ledger's releases, plus per space the largest
        relation all its releases cover (smallest norm and radius) when no release states it; sorted
        by space, norm and radius. An all-pairs release covers every relation; a ledger of only those
        gives one all-pairs total. Empty ledger: ``()``."""
        hoods = {e.guarantee.neighbourhood for e in self.entries if not e.guarantee.all_pairs}
        if self.entries and not hoods:
            hoods = {Neighbourhood(radius=math.inf)}
        hoods |= {h for h in _joint(hoods) if not h.all_pairs}
        return tuple(self._total_for((h,)) for h in sorted(hoods, key=_relation_order))

    def worst_case(self) -> RelationTotal:
        """The composition of every entry: the most any pair of inputs can lose.

        Stated for the pairs that are neighbours under every entry's relation: per space, within the
        smallest norm's distance min α there (such pairs exist in every space); across spaces, pairs
        in each space's relation at once, which nothing rules out (module docstring).
        """
        return self._total_for(_joint(e.guarantee.neighbourhood for e in self.entries))

    def to_dicts(self) -> list[dict[str, Any]]:
        """Plain-data form, one dict per entry."""
        return [e.to_dict() for e in self.entries]

    @classmethod
    def from_dicts(cls, data: Iterable[dict[str, Any]]) -> PrivacyLedger:
        """Inverse of :meth:`to_dicts` (validates every guarantee again). Entries stored before
        guarantees carried a space and norm are read through their metric text when it is one the
        library wrote; any other is refused (ValueError), never guessed."""
        if isinstance(data, str | bytes | dict) or not isinstance(data, Iterable):
            raise TypeError(f"data must be a list of dicts (one per entry), got {type(data).__name__}")
        entries = []
        for n, item in enumerate(data):
            if not isinstance(item, dict):
                raise TypeError(f"data[{n}] must be a dict, got {type(item).__name__}")
            fields = dict(item)
            if "label" not in fields:
                raise ValueError(f"data[{n}] has no 'label'")
            label = fields.pop("label")
            try:
                guarantee = Guarantee.from_dict(fields)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"data[{n}] ({label!r}): {exc}") from exc
            entries.append(LedgerEntry(label=label, guarantee=guarantee))
        return cls(entries=tuple(entries))
