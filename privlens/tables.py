"""Tables the pages show, as text a reader can take in: no raw ``None`` or ``nan`` in a cell.

* :func:`attack_table` — the Attack page's reconstructions of the current image per ε: SSIM, PSNR, ℓ1
  and ℓ2 to fixed decimals, "–" where a draw released nothing (⊥), explained by :data:`ATTACK_LEGEND`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

__all__ = ["ATTACK_LEGEND", "NOTHING", "attack_table"]

#: a cell with no number because nothing was released (⊥)
NOTHING = "–"
ATTACK_LEGEND = (
    f"⊥: that draw released nothing, so the attacker has nothing to rebuild and the cell shows {NOTHING}. "
    "The baseline is the training mean image, the guess of an attacker who receives no release."
)


def _number(value: Any, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NOTHING
    return f"{float(value):.{digits}f}"


def _epsilon(e: Any) -> str:
    if isinstance(e, str):
        return e
    return "∞" if math.isinf(e) else f"{e:g}"


#: the table's metric columns: (row key, header, decimals)
METRIC_COLUMNS = (("ssim", "SSIM", 3), ("psnr", "PSNR (dB)", 1), ("l1", "ℓ1", 4), ("l2", "ℓ2", 4))


def attack_table(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows of ``epsilon`` (a number, ∞, or a label such as "no release (baseline)"), ``released``,
    ``ssim`` and ``psnr`` (None for ⊥), optionally ``l1`` and ``l2`` (mean absolute and mean squared pixel
    error) as the page's table: ε, released ("yes", "⊥" or "—" for the baseline), SSIM (3 decimals),
    PSNR (dB, 1 decimal), and ℓ1 and ℓ2 (4 decimals) where any row has them."""
    rows = list(rows)
    metrics = [(k, name, d) for k, name, d in METRIC_COLUMNS if any(k in r for r in rows)]
    out = []
    for r in rows:
        baseline = isinstance(r["epsilon"], str)
        row = {"ε": _epsilon(r["epsilon"]), "released": "—" if baseline else "yes" if r["released"] else "⊥"}
        row.update({name: _number(r.get(k), d) for k, name, d in metrics})
        out.append(row)
    return pd.DataFrame(out, columns=["ε", "released", *(name for _, name, _ in metrics)])
