"""The Release page's live readings at the sidebar's (R, ε): pure Python, no Streamlit.

* :func:`accuracy_at` — the model's test accuracy at ε from the Table 1 experiment CSV, with a 95 %
  Wilson interval over its n test images (``scipy.stats.binomtest``); between measured ε, both are
  interpolated in log ε and the reading says so;
* :func:`attack_at` — the attacker's mean SSIM (or another metric) at (R, ε) from the attack CSV,
  measured or interpolated between the cells around it.

Readings of published experiment results, never of the user's image (that one is
:func:`privlens.session.release_probability`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scipy.stats import binomtest

from privlens.charts import grid_position, interpolate

__all__ = ["Reading", "accuracy_at", "attack_at"]


@dataclass(frozen=True, kw_only=True)
class Reading:
    """A value read from a results table, its interval (or None) and how it was obtained."""

    value: float
    low: float | None
    high: float | None
    how: str


def _wilson(acc: float, n: int) -> tuple[float, float]:
    ci = binomtest(round(acc * n), n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def accuracy_at(table1: Any, *, model: str, certifier: str, epsilon: float) -> Reading | None:
    """The test accuracy of ``model`` at ``epsilon`` (Table 1 CSV rows; the certifier's when present)."""
    if table1 is None or "obfuscator" not in table1:
        return None
    rows = table1[table1["obfuscator"].astype(str) == model]
    if "certifier" in rows and certifier in set(rows["certifier"]):
        rows = rows[rows["certifier"] == certifier]
    if rows.empty:
        return None
    rows = rows[[math.isfinite(float(e)) for e in rows["epsilon"]]].sort_values("epsilon")
    if rows.empty:
        return None
    eps = [float(e) for e in rows["epsilon"]]
    pos = grid_position(eps, float(epsilon), log=True)
    if pos is None:
        return None
    points = []
    for _, r in rows.iterrows():
        n = int(r["n_test"]) if "n_test" in r and r["n_test"] == r["n_test"] else 0
        acc = float(r["accuracy"])
        low, high = _wilson(acc, n) if n > 0 else (math.nan, math.nan)
        points.append((acc, low, high, n))
    i = math.floor(pos)
    j = min(i + 1, len(points) - 1)
    t = pos - i
    value, low, high = ((1 - t) * a + t * b for a, b in zip(points[i][:3], points[j][:3], strict=True))
    n_text = f"n = {points[i][3]}" if points[i][3] == points[j][3] else f"n = {points[i][3]}, {points[j][3]}"
    how = (
        f"measured at ε = {eps[i]:g} ({n_text}, 95 % Wilson interval)"
        if t == 0
        else f"interpolated in log ε between ε = {eps[i]:g} and {eps[j]:g} ({n_text}; an estimate)"
    )
    ok = math.isfinite(low) and math.isfinite(high)
    return Reading(value=value, low=low if ok else None, high=high if ok else None, how=how)


def attack_at(attack: Any, *, radius: float, epsilon: float, metric: str = "ssim") -> Reading | None:
    """The attacker's mean ``metric`` at (R, ε) from the attack CSV: measured or interpolated."""
    if attack is None or metric not in attack:
        return None
    grid = attack.pivot_table(index="radius", columns="epsilon", values=metric, aggfunc="mean").sort_index()
    col = grid_position([float(c) for c in grid.columns], float(epsilon), log=True)
    row = grid_position([float(r) for r in grid.index], float(radius), log=False)
    if col is None or row is None:
        return None
    value = interpolate(grid.to_numpy(dtype=float), row, col)
    if math.isnan(value):
        return None
    on_grid = float(col).is_integer() and float(row).is_integer()
    how = "measured" if on_grid else "interpolated between the measured (R, ε) cells around it (an estimate)"
    return Reading(value=value, low=None, high=None, how=how)
