"""The Release page's live readings at the sidebar's (R, ε): pure Python, no Streamlit.

* :func:`accuracy_at` — the model's test accuracy under PTR at PTR's own ε from the Table 1 experiment
  CSV (whose ε column is PTR's parameter: the sidebar's total ε halved), with a 95 % Wilson interval
  over its n test images (``scipy.stats.binomtest``); between measured ε, the value is interpolated in
  log ε and the reading says so, with no interval and no n (an estimate, not a measurement);
* :func:`global_accuracy_at` — the same under the certified global mechanism at the total ε, from
  ``table1-global.csv`` (its own 95 % interval, columns read defensively);
* :func:`attack_at` — the attacker's mean SSIM (or another metric) at (R, ε) from the attack CSV,
  measured, with its bootstrap interval, or interpolated between the cells around it (no interval, no n).

Every measured reading says its n, its interval and the δ it was measured at (:attr:`Reading.delta`, from the
CSV's ``delta`` column): a reading at another δ than the sidebar's is not the accuracy there, and the
pages say so (:meth:`Reading.other_delta`). Readings of published experiment results, never of the
user's image (that one is :func:`privlens.outcome.release_probability`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from scipy.stats import binomtest

from privlens.charts import grid_position, interpolate

__all__ = [
    "Reading",
    "accuracy_at",
    "at_delta",
    "attack_at",
    "attack_delta",
    "attack_grids",
    "delta_text",
    "global_accuracy_at",
    "ip_accuracy_at",
    "wilson",
]


@dataclass(frozen=True, kw_only=True)
class Reading:
    """A value read from a results table, its interval (or None), how it was obtained (n, interval and δ
    in words), the δ of the measurement (None: not recorded) and its n (None: not recorded)."""

    value: float
    low: float | None
    high: float | None
    how: str
    delta: float | None = None
    n: int | None = None

    def other_delta(self, delta: float) -> bool:
        """The reading was measured at a known δ other than ``delta``."""
        return self.delta is not None and not math.isclose(self.delta, float(delta), rel_tol=1e-9, abs_tol=0)

    @property
    def interval_text(self) -> str:
        """"[0.281, 0.378]", or "" without an interval."""
        return "" if self.low is None else f"[{self.low:.3f}, {self.high:.3f}]"


def wilson(acc: float, n: int) -> tuple[float, float]:
    """The 95 % Wilson interval of an accuracy ``acc`` measured on ``n`` test images."""
    return _wilson_counts(round(acc * n), int(n))


@lru_cache(maxsize=4096)
def _wilson_counts(k: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson interval of ``k`` successes in ``n`` (cached: every rerun asks again)."""
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


_wilson = wilson


Point = tuple[float, float, float, float, int]  # (ε, value, low, high, n)


def delta_text(delta: float | None) -> str:
    """", δ = 0.05" for a known δ (", δ = 0" for a pure guarantee), else ", δ not recorded"."""
    return ", δ not recorded" if delta is None else f", δ = {delta:g}"


def _deltas(rows: Any) -> list[float | None]:
    """The δ of each row (a missing or empty ``delta`` is 0: a pure guarantee has none)."""
    if "delta" not in rows:
        return [None] * len(rows)
    return [0.0 if d != d else float(d) for d in rows["delta"]]


def at_delta(rows: Any, delta: float | None) -> tuple[Any, float | None]:
    """The rows measured at ``delta`` when there are any, else those at the δ nearest to it (in log δ;
    the largest when ``delta`` is None); and that δ (None: the table records none)."""
    ds = _deltas(rows)
    known = sorted({d for d in ds if d is not None})
    if not known:
        return rows, None
    if delta is None:
        pick = known[-1]
    else:
        def distance(d: float) -> float:
            if d == delta:
                return -1.0
            if d <= 0 or delta <= 0:
                return math.inf
            return abs(math.log10(d) - math.log10(delta))

        pick = min(known, key=distance)
    return rows[[d == pick for d in ds]], pick


def _read(
    points: list[Point], epsilon: float, *, what: str, delta: float | None = None
) -> Reading | None:
    """The reading at ``epsilon`` from (ε, value, low, high, n) points sorted by ε: measured, or
    interpolated in log ε between the two around it; None outside them. ``what`` names the ε,
    ``delta`` the δ the points were measured at."""
    eps = [p[0] for p in points]
    pos = grid_position(eps, float(epsilon), log=True)
    if pos is None:
        return None
    i = math.floor(pos)
    j = min(i + 1, len(points) - 1)
    t = pos - i
    d_text = delta_text(delta)
    if t != 0:  # an estimate between two measurements: no interval and no n of its own
        value = (1 - t) * points[i][1] + t * points[j][1]
        how = (f"interpolated in log ε between the measured {what} = {eps[i]:g} and {eps[j]:g}{d_text} "
               "(an estimate: no interval, no n)")
        return Reading(value=value, low=None, high=None, how=how, delta=delta, n=None)
    _, value, low, high, n = points[i]
    n_text = f"n = {n}" if n else "n not recorded"
    how = f"measured at {what} = {eps[i]:g}{d_text} ({n_text}, 95 % interval)"
    ok = math.isfinite(low) and math.isfinite(high)
    return Reading(value=value, low=low if ok else None, high=high if ok else None, how=how, delta=delta,
                   n=n or None)


def accuracy_at(
    table1: Any, *, model: str, certifier: str, epsilon: float, delta: float | None = None
) -> Reading | None:
    """The test accuracy of ``model`` under PTR run at ``epsilon`` — PTR's own ε, half the total of a
    sent release's guarantee (Table 1 CSV rows; the certifier's when present), with its 95 % Wilson
    interval; at ``delta`` where measured there, else at the measured δ nearest to it (the reading's
    :attr:`~Reading.delta` says which)."""
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
    rows, measured_delta = at_delta(rows, delta)
    points = []
    for _, r in rows.iterrows():
        n = int(r["n_test"]) if "n_test" in r and r["n_test"] == r["n_test"] else 0
        acc = float(r["accuracy"])
        low, high = _wilson(acc, n) if n > 0 else (math.nan, math.nan)
        points.append((float(r["epsilon"]), acc, low, high, n))
    reading = _read(points, epsilon, what="PTR's ε", delta=measured_delta)
    if reading is None:
        return None
    return replace(reading, how=reading.how.replace("95 % interval", "95 % Wilson interval"))


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
    rows, measured_delta = at_delta(rows, 0.0)  # the global mechanism is pure: δ = 0
    if measured_delta is None and "delta" not in table:
        measured_delta = 0.0  # a table of the global mechanism without the column: pure all the same
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
    return _read(points, epsilon, what="total ε", delta=measured_delta) if points else None


def attack_delta(attack: Any) -> float | None:
    """The PTR δ of the attack experiment's releases: its CSV's ``delta`` column, else the δ the
    experiment runs PTR at (``privcore.experiments.ptr_common.PAPER_DELTA``; older CSVs do not record
    it); None when neither is known."""
    if attack is not None and "delta" in attack:
        ds = {float(d) for d in attack["delta"] if d == d}
        return ds.pop() if len(ds) == 1 else None
    try:
        from privcore.experiments import PAPER_DELTA
    except ImportError:  # pragma: no cover - privcore without its experiments
        return None
    return float(PAPER_DELTA)


def attack_grids(attack: Any, metric: str) -> dict[str, Any]:
    """The attack CSV's (R × ε) grids of ``metric``: "value" (the mean), "low"/"high" (its 95 %
    bootstrap interval, where the CSV has ``<metric>_lo``/``_hi``) and "n" (``n_eval``, where present)."""
    out = {}
    for name, col in (("value", metric), ("low", f"{metric}_lo"), ("high", f"{metric}_hi"), ("n", "n_eval")):
        if col in attack:
            grid = attack.pivot_table(index="radius", columns="epsilon", values=col, aggfunc="mean")
            out[name] = grid.sort_index()
    return out


def attack_at(attack: Any, *, radius: float, epsilon: float, metric: str = "ssim") -> Reading | None:
    """The attacker's mean ``metric`` at (R, ε) from the attack CSV: measured, with its 95 % bootstrap
    interval where the CSV has one, n and the experiment's δ; or interpolated between the cells around
    it, labelled so, with no interval and no n."""
    if attack is None or metric not in attack:
        return None
    grids = attack_grids(attack, metric)
    grid = grids["value"]
    col = grid_position([float(c) for c in grid.columns], float(epsilon), log=True)
    row = grid_position([float(r) for r in grid.index], float(radius), log=False)
    if col is None or row is None:
        return None
    value = interpolate(grid.to_numpy(dtype=float), row, col)
    if math.isnan(value):
        return None
    on_grid = float(col).is_integer() and float(row).is_integer()
    delta = attack_delta(attack)
    if not on_grid:  # an estimate between measured cells: no interval and no n of its own
        how = ("interpolated between the measured (R, ε) cells around it (an estimate: no interval, no n"
               f"{delta_text(delta)})")
        return Reading(value=value, low=None, high=None, how=how, delta=delta, n=None)
    low = high = None
    if "low" in grids and "high" in grids:
        lo, hi = (interpolate(grids[k].to_numpy(dtype=float), row, col) for k in ("low", "high"))
        if math.isfinite(lo) and math.isfinite(hi):
            low, high = lo, hi
    n = None
    if "n" in grids:
        cell = float(grids["n"].to_numpy(dtype=float)[int(row), int(col)])
        n = int(cell) if cell == cell else None
    n_text = "n not recorded" if n is None else f"n = {n} released test images"
    said = ("" if low is None else "95 % bootstrap interval, ") + n_text + delta_text(delta)
    return Reading(value=value, low=low, high=high, how=f"measured ({said})", delta=delta, n=n)


def ip_accuracy_at(
    ip: Any, *, mechanism: str, model: str, epsilon: float, alpha: float, delta: float | None = None
) -> Reading | None:
    """The test accuracy of an IP ``mechanism`` run on ``model`` at (``epsilon``, ``alpha``) from the ``ip``
    experiment CSV (mean over images and noise draws, with its 95 % interval: the CSV's bootstrap interval
    over the test images, else Hoeffding's from their number, as every accuracy chart shows; the analytic
    calibration where both were run), measured or interpolated in log ε at that α — at ``delta`` where
    measured there, else at the measured δ nearest to it (Lap-Output's is 0); None elsewhere."""
    from privlens.charts import interval_bars

    if ip is None or not {"mechanism", "model", "epsilon", "alpha", "accuracy_mean"} <= set(ip.columns):
        return None
    base = ip["mechanism"].astype(str).str.split(" (", regex=False).str[0]  # e.g. Gauss-Input (tuned)
    rows = ip[(ip["model"].astype(str) == model) & (base == mechanism)]
    if "calibration" in rows:
        rows = rows[rows["calibration"].isna() | (rows["calibration"].astype(str) == "analytic")]
    rows = rows[[math.isclose(float(a), float(alpha), rel_tol=1e-9) for a in rows["alpha"]]]
    rows, measured_delta = at_delta(rows, delta)
    draws = sorted({int(v) for v in rows["n_draws"] if v == v}) if "n_draws" in rows else []
    points: dict[float, Point] = {}
    hows = set()
    for _, r in rows.iterrows():
        e, acc = float(r["epsilon"]), float(r["accuracy_mean"])
        n = int(r["n_test"]) if "n_test" in r and r["n_test"] == r["n_test"] else 0
        if math.isfinite(e) and e > 0 and math.isfinite(acc):
            ci = interval_bars([acc], low=[r.get("accuracy_lo")], high=[r.get("accuracy_hi")], n=[n or None])
            lo, hi = (math.nan, math.nan) if ci.bars is None else (
                acc - ci.bars["arrayminus"][0], acc + ci.bars["array"][0])
            hows.add(ci.how)
            points[e] = (e, acc, lo, hi, n)
    reading = _read(sorted(points.values()), epsilon, what="ε", delta=measured_delta) if points else None
    if reading is None:
        return None
    over = f"{'/'.join(map(str, draws))} noise draws" if draws else "noise draws"
    interval = " or ".join(sorted(hows))
    how = reading.how.replace(", 95 % interval", f" × {over}, {interval}", 1).replace(
        "; 95 % interval", f" × {over}; {interval}", 1)
    return replace(reading, how=how)
