"""The session's releases composed: pure Python, no Streamlit, no privacy maths.

:func:`ledger_of` reads the ledger rows the pages keep into a
:class:`privcore.mechanisms.accounting.PrivacyLedger`;
:func:`ledger_totals` is the Accountant's table, per image and per neighbourhood relation with the
worst case (basic composition, IP paper Prop. 2); :data:`LEDGER_EXPLANATION` says in words which
releases each total counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["LEDGER_EXPLANATION", "ledger_of", "ledger_totals"]


def ledger_of(rows: Sequence[Mapping[str, Any]]) -> Any:
    """The :class:`~privcore.mechanisms.accounting.PrivacyLedger` of ledger rows (dicts with ``label`` and
    ``guarantee``), in order.

    A row kept in a browser session from before an upgrade may hold a guarantee of an older class;
    it is read again through its plain data (:meth:`Guarantee.from_dict` maps the metric texts the
    library wrote to their space and norm). Anything else is a ValueError naming the row: the
    totals would leave that release out, so none are given.
    """
    from privcore.mechanisms import Guarantee, PrivacyLedger

    ledger = PrivacyLedger()
    for n, row in enumerate(rows):
        g = row.get("guarantee")
        if not isinstance(g, Guarantee):
            try:
                g = Guarantee.from_dict(dict(g.to_dict()))
            except (AttributeError, TypeError, ValueError) as exc:
                raise ValueError(
                    f"release {n + 1} ({row.get('label', '?')!r}) holds a guarantee this version cannot "
                    f"read ({exc})"
                ) from None
        ledger = ledger.add(g, label=str(row.get("label") or f"release {n + 1}"))
    return ledger


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def ledger_totals(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The Accountant's table: per image (``image_key``, in order of first release), one row per
    neighbourhood relation (:meth:`PrivacyLedger.totals_by_relation`) and a last one for the worst
    case (:meth:`PrivacyLedger.worst_case`), with the pairs and the releases that miss them in words.
    ValueError as :func:`ledger_of`."""
    out: list[dict[str, Any]] = []
    for key in dict.fromkeys(r["image_key"] for r in rows):
        mine = [r for r in rows if r["image_key"] == key]
        ledger = ledger_of(mine)
        totals = [("per relation", t) for t in ledger.totals_by_relation()]
        for kind, t in [*totals, ("worst case", ledger.worst_case())]:
            missing = [ledger.entries[i].label for i in t.missing]
            out.append(
                {
                    "image": mine[0]["image"],
                    "total": kind,
                    "pairs": t.pairs(),
                    "releases counted": f"{len(t.covering)} of {len(ledger)}",
                    "total ε = Σεᵢ": t.epsilon,
                    "total δ = Σδᵢ": t.delta,
                    "releases that cover only some of these pairs": (
                        "none" if not missing else f"{_count(len(missing), 'release')}: " + "; ".join(missing)
                    ),
                }
            )
    return out


#: The Accountant's and the Inference-privacy page's explanation of :func:`ledger_totals`.
LEDGER_EXPLANATION = (
    "A release's guarantee covers the pairs of images within its radius, in its norm, in its space "
    "(pixels of the model input, or the embedding z for PTR). In one space a pair within ℓ1 distance α is "
    "also within ℓ2 and ℓ∞ distance α (‖·‖∞ ≤ ‖·‖₂ ≤ ‖·‖₁), so every ℓ1, ℓ2 or ℓ∞ release of radius ≥ α "
    "covers it; a pair within ℓ2 distance α may be further apart in ℓ1, so an ℓ1 release need not cover it. "
    "Each *per relation* row adds up (basic composition, IP paper Prop. 2) the releases that cover every "
    "pair of that relation; the releases that cover only some of those pairs cost those pairs their budget "
    "too. The *worst case* adds every release of the image: that is what a pair that is a neighbour under "
    "all of them loses (in one space, the pairs within ℓ1 distance of the smallest radius are such pairs). "
    "Spaces are not converted into one another: whether two images' embeddings lie within R says nothing "
    "certified about their pixel distance, nor the other way round, so pixel and embedding totals are "
    "listed apart. One pair of images can still be a neighbour in both (a small enough pixel change moves "
    "the embedding little), and then both budgets add: the worst case counts them together."
)
