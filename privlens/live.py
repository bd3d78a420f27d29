"""The Release page's live readings at the sidebar's (R, ε): pure Python, no Streamlit.

* :func:`accuracy_at` — the model's test accuracy under PTR at PTR's own ε from the Table 1 experiment
  CSV (whose ε column is PTR's parameter: the sidebar's total ε halved), with a 95 % Wilson interval
  over its n test images (``scipy.stats.binomtest``); between measured ε, both are interpolated in
  log ε and the reading says so;
* :func:`global_accuracy_at` — the same under the certified global mechanism at the total ε, from
  ``table1-global.csv`` (its own 95 % interval, columns read defensively);
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

__all__ = ["Reading", "accuracy_at", "attack_at", "global_accuracy_at", "ip_accuracy_at"]


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


Point = tuple[float, float, float, float, int]  # (ε, value, low, high, n)


def _read(points: list[Point], epsilon: float, *, what: str) -> Reading | None:
    """The reading at ``epsilon`` from (ε, value, low, high, n) points sorted by ε: measured, or
    interpolated in log ε between the two around it; None outside them. ``what`` names the ε."""
    eps = [p[0] for p in points]
    pos = grid_position(eps, float(epsilon), log=True)
    if pos is None:
        return None
    i = math.floor(pos)
    j = min(i + 1, len(points) - 1)
    t = pos - i
    value, low, high = ((1 - t) * a + t * b for a, b in zip(points[i][1:4], points[j][1:4], strict=True))
    n_text = f"n = {points[i][4]}" if points[i][4] == points[j][4] else f"n = {points[i][4]}, {points[j][4]}"
    how = (
        f"measured at {what} = {eps[i]:g} ({n_text}, 95 % interval)"
        if t == 0
        else f"interpolated in log ε between {what} = {eps[i]:g} and {eps[j]:g} ({n_text}; an estimate)"
    )
    ok = math.isfinite(low) and math.isfinite(high)
    return Reading(value=value, low=low if ok else None, high=high if ok else None, how=how)


def accuracy_at(table1: Any, *, model: str, certifier: str, epsilon: float) -> Reading | None:
    """The test accuracy of ``model`` under PTR run at ``epsilon`` — PTR's own ε, half the total of a
    sent release's guarantee (Table 1 CSV rows; the certifier's when present), with its 95 % Wilson
    interval."""
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
    points = []
    for _, r in rows.iterrows():
        n = int(r["n_test"]) if "n_test" in r and r["n_test"] == r["n_test"] else 0
        acc = float(r["accuracy"])
        low, high = _wilson(acc, n) if n > 0 else (math.nan, math.nan)
        points.append((float(r["epsilon"]), acc, low, high, n))
    reading = _read(points, epsilon, what="PTR's ε")
    if reading is None:
        return None
    return Reading(
        value=reading.value,
        low=reading.low,
        high=reading.high,
        how=reading.how.replace("95 % interval", "95 % Wilson interval"),
    )


def _column(df: Any, *names: str) -> str | None:
    return next((n for n in names if n in df), None)


def global_accuracy_at(
    table: Any, *, model: str, epsilon: float, radius: float | None = None
) -> Reading | None:
    """The test accuracy of ``model`` under the certified global mechanism at the total ``epsilon``
    (``table1-global.csv``: ``obfuscator`` or ``variant``, ``epsilon_total``, ``accuracy``, ``low``/``high``,
    ``n_test`` or ``n``; rows at another R than ``radius`` left out). None where nothing is measured
    or the table lacks a column it needs."""
    if table is None:
        return None
    who, eps_col = _column(table, "obfuscator", "variant"), _column(table, "epsilon_total", "epsilon")
    if who is None or eps_col is None or "accuracy" not in table:
        return None
    rows = table[table[who].astype(str) == model]
    if "mechanism" in rows:
        rows = rows[rows["mechanism"].astype(str).str.lower() == "global"]
    if radius is not None and "radius" in rows:
        rows = rows[[math.isclose(float(r), float(radius), rel_tol=1e-9) for r in rows["radius"]]]
    n_col = _column(rows, "n_test", "n")
    points = []
    for _, r in rows.iterrows():
        try:
            e, acc = float(r[eps_col]), float(r["accuracy"])
            low = float(r["low"]) if "low" in r else math.nan
            high = float(r["high"]) if "high" in r else math.nan
            n = int(r[n_col]) if n_col is not None and r[n_col] == r[n_col] else 0
        except (TypeError, ValueError):
            continue
        if math.isfinite(e) and e > 0 and math.isfinite(acc):
            points.append((e, acc, low, high, n))
    points.sort()
    return _read(points, epsilon, what="total ε") if points else None


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


def ip_accuracy_at(ip: Any, *, mechanism: str, model: str, epsilon: float, alpha: float) -> Reading | None:
    """The test accuracy of an IP ``mechanism`` run on ``model`` at (``epsilon``, ``alpha``) from the ``ip``
    experiment CSV (mean over noise draws, interval ± one standard deviation of them; the analytic
    calibration where both were run), measured or interpolated in log ε at that α; None elsewhere."""
    if ip is None or not {"mechanism", "model", "epsilon", "alpha", "accuracy_mean"} <= set(ip.columns):
        return None
    base = ip["mechanism"].astype(str).str.split(" (", regex=False).str[0]  # "Gauss-Input (tuned)"
    rows = ip[(ip["model"].astype(str) == model) & (base == mechanism)]
    if "calibration" in rows:
        rows = rows[rows["calibration"].isna() | (rows["calibration"].astype(str) == "analytic")]
    rows = rows[[math.isclose(float(a), float(alpha), rel_tol=1e-9) for a in rows["alpha"]]]
    points: dict[float, Point] = {}
    for _, r in rows.iterrows():
        e, acc = float(r["epsilon"]), float(r["accuracy_mean"])
        sd = float(r["accuracy_std"]) if "accuracy_std" in r else math.nan
        n = int(r["n_test"]) if "n_test" in r and r["n_test"] == r["n_test"] else 0
        if math.isfinite(e) and e > 0 and math.isfinite(acc):
            points[e] = (e, acc, acc - sd, acc + sd, n)
    reading = _read(sorted(points.values()), epsilon, what="ε") if points else None
    if reading is None:
        return None
    return Reading(
        value=reading.value,
        low=reading.low,
        high=reading.high,
        how=reading.how.replace("95 % interval", "± 1 s.d. over noise draws"),
    )
