"""Formatting shared by the report's table renderers (:mod:`privcore.experiments.report`): cells,
intervals and markdown tables."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["eps_label", "finite", "fmt", "hoeffding_halfwidth", "lookup", "t_halfwidth", "table"]


def fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float) and v != 0 and abs(v) < 10 ** -(digits - 1):
        return f"{v:.2g}"
    return f"{v:.{digits}f}"


def hoeffding_halfwidth(n: Any, *, level: float = 0.95) -> float:
    """Half-width of a two-sided ``level`` interval for the mean of ``n`` independent scores in
    [0, 1] (Hoeffding): valid for accuracies that score ⊥ as a uniform guess, where the per-image
    score is not a 0/1 count."""
    n = int(n)
    return math.inf if n <= 0 else math.sqrt(math.log(2.0 / (1.0 - level)) / (2.0 * n))


def t_halfwidth(sd: Any, n: Any, *, level: float = 0.95) -> float:
    """Half-width of a two-sided ``level`` Student-t interval for a mean from its population sd
    (``np.std``) over ``n`` values; inf for n < 2."""
    from scipy import stats

    n = int(n)
    if n < 2 or not math.isfinite(float(sd)):
        return math.inf
    sample_sd = float(sd) * math.sqrt(n / (n - 1))
    return float(stats.t.ppf(0.5 + level / 2.0, n - 1)) * sample_sd / math.sqrt(n)


def finite(v: Any) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def eps_label(e: float) -> str:
    return "∞" if math.isinf(e) else f"{e:g}"


def table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def lookup(frame: Any, **where: Any) -> Any:
    part = frame
    for k, v in where.items():
        part = part[part[k] == v]
    return None if part.empty else part.iloc[0]
