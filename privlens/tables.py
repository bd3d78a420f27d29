"""Tables the pages show, as text a reader can take in: no raw ``None`` or ``nan`` in a cell.

* :func:`attack_table` — the Attack page's reconstructions of the current image per ε: SSIM and PSNR
  to fixed decimals, "–" where a draw released nothing (⊥), explained by :data:`ATTACK_LEGEND`.
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


def attack_table(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows of ``epsilon`` (a number, ∞, or a label such as "no release (baseline)"), ``released``,
    ``ssim`` and ``psnr`` (None for ⊥) as the page's table: ε, released ("yes", "⊥" or "—" for the
    baseline), SSIM (3 decimals), PSNR (dB, 1 decimal)."""
    out = []
    for r in rows:
        eps = _epsilon(r["epsilon"])
        baseline = isinstance(r["epsilon"], str)
        out.append({
            "ε": eps,
            "released": "—" if baseline else "yes" if r["released"] else "⊥",
            "SSIM": _number(r["ssim"], 3),
            "PSNR (dB)": _number(r["psnr"], 1),
        })
    return pd.DataFrame(out, columns=["ε", "released", "SSIM", "PSNR (dB)"])
