"""Plotly helpers of the privlens pages: a marked current value that stays right on log axes.

Plotly places a shape on a log axis at its data value but an annotation at log10 of it: a label
given the data value (what ``add_vline(annotation_text=…)`` does) lands at 10^x — at ε = 2 the
axis stretched to 100, at ε = 20 to 10^20. :func:`mark_x` writes each in its own coordinates and
names the line in the legend; :func:`log_range` is a log axis's range (also in log10 units) that
shows every plotted value and the marked one; :func:`grid_position` and :func:`interpolate` place a
setting between a heatmap's measured cells; :func:`interval_bars` is a curve's 95 % intervals as
error bars (every accuracy chart shows 95 % intervals, never ± 1 sd).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

#: how an interval was made, as a chart says it
BOOTSTRAP = "95 % bootstrap interval over the test images"
HOEFFDING = "95 % Hoeffding interval over the n test images"

__all__ = [
    "Intervals",
    "grid_position",
    "hline_trace",
    "interpolate",
    "interval_bars",
    "log_axis",
    "log_range",
    "mark_x",
    "narrow_bars",
    "narrow_heatmap",
]


def mark_x(
    fig: go.Figure, x: float, text: str, *, log: bool, color: str = "crimson", dash: str = "dot"
) -> None:
    """A vertical line at data value ``x`` labelled ``text`` at its top (at log10(x) when the x axis
    is logarithmic), and a legend entry naming it."""
    fig.add_vline(x=x, line_dash=dash, line_color=color, line_width=2)
    fig.add_annotation(
        x=math.log10(x) if log else x,
        xref="x",
        y=1.0,
        yref="paper",
        yanchor="bottom",
        xanchor="center",
        text=text,
        showarrow=False,
        font={"color": color},
    )
    line = {"color": color, "dash": dash, "width": 2}
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=text, line=line))


def hline_trace(y: float, *, x: Iterable[float], name: str, **line: Any) -> go.Scatter:
    """A horizontal reference line as a trace from min(x) to max(x): in the legend, and right on a
    log y axis (where an annotated ``add_hline`` label would float at 10^y)."""
    xs = [float(v) for v in x]
    return go.Scatter(x=[min(xs), max(xs)], y=[float(y)] * 2, mode="lines", name=name, line=line)


def log_range(values: Iterable[float], *, pad: float = 0.1) -> list[float]:
    """[log10(min) − pad, log10(max) + pad] over the positive finite ``values``: a log axis's range."""
    vs = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    if not vs:
        raise ValueError("log_range needs at least one positive finite value")
    return [math.log10(min(vs)) - pad, math.log10(max(vs)) + pad]


def grid_position(grid: Sequence[float], value: float, *, log: bool) -> float | None:
    """Where ``value`` sits among the increasing finite ``grid`` points, as a fractional index
    (2.0 on the third point, 2.5 halfway to the fourth — halfway in log10 when ``log``); None when
    it lies outside them. For marking a setting between a heatmap's measured cells."""
    pts = [float(g) for g in grid]
    v = float(value)
    for i, (a, b) in enumerate(itertools.pairwise(pts)):
        if not (math.isfinite(a) and math.isfinite(b)):
            break
        if a <= v <= b:
            if v == a:
                return float(i)
            if log:
                return i + (math.log10(v) - math.log10(a)) / (math.log10(b) - math.log10(a))
            return i + (v - a) / (b - a)
    return float(len(pts) - 1) if pts and v == pts[-1] else None


def interpolate(values: Any, row: float, col: float) -> float:
    """Bilinear interpolation of a 2-D array at the fractional (row, col) position (NaN when a
    neighbouring cell is NaN): the estimate between measured cells, never a measurement."""
    import numpy as np

    arr = np.asarray(values, dtype=float)
    r0, c0 = math.floor(row), math.floor(col)
    r1, c1 = min(r0 + 1, arr.shape[0] - 1), min(c0 + 1, arr.shape[1] - 1)
    tr, tc = row - r0, col - c0
    top = (1 - tc) * arr[r0, c0] + tc * arr[r0, c1] if tc else arr[r0, c0]
    bottom = (1 - tc) * arr[r1, c0] + tc * arr[r1, c1] if tc else arr[r1, c0]
    return float((1 - tr) * top + tr * bottom if tr else top)


def log_axis(fig: go.Figure, values: Iterable[float], *, pad: float = 0.1) -> None:
    """Make the x axis logarithmic over :func:`log_range` of ``values``, ticks at 1-2-5 steps
    (plotly's default labels 20 as "2" and 0.8 as "8")."""
    lo, hi = log_range(values, pad=pad)
    ticks = [
        m * 10.0**e
        for e in range(math.floor(lo) - 1, math.ceil(hi) + 1)
        for m in (1, 2, 5)
        if lo <= math.log10(m * 10.0**e) <= hi
    ]
    fig.update_xaxes(type="log", range=[lo, hi], tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])


@dataclass(frozen=True)
class Intervals:
    """A curve's 95 % intervals: ``bars`` (plotly ``error_y``, asymmetric; None: none known), ``text``
    per point (" [lo, hi]" or ""), and ``how`` they were made (:data:`BOOTSTRAP` or :data:`HOEFFDING`)."""

    bars: dict | None
    text: list[str]
    how: str


def _finite(v: Any) -> bool:
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def interval_bars(mean: Sequence[float], *, low: Sequence[Any] | None = None,
                  high: Sequence[Any] | None = None, n: Sequence[Any] | None = None) -> Intervals:
    """95 % intervals of accuracies ``mean``: the recorded ``low``/``high`` (a bootstrap over the test
    images) where every point has them, else Hoeffding's from the ``n`` test images (scores in [0, 1]),
    clipped to [0, 1]; no bars when neither is known."""
    from privcore.experiments import hoeffding_halfwidth

    ys = [float(v) for v in mean]
    if low is not None and high is not None and all(_finite(a) and _finite(b) for a, b in zip(low, high,
                                                                                            strict=True)):
        lo, hi, how = [float(v) for v in low], [float(v) for v in high], BOOTSTRAP
    elif n is not None and all(_finite(k) and float(k) > 0 for k in n):
        half = [hoeffding_halfwidth(k) for k in n]
        lo = [max(0.0, y - h) for y, h in zip(ys, half, strict=True)]
        hi = [min(1.0, y + h) for y, h in zip(ys, half, strict=True)]
        how = HOEFFDING
    else:
        return Intervals(None, [""] * len(ys), "no interval recorded")
    bars = {"type": "data", "symmetric": False, "array": [h - y for y, h in zip(ys, hi, strict=True)],
            "arrayminus": [y - a for y, a in zip(ys, lo, strict=True)], "thickness": 1}
    return Intervals(bars, [f" [{a:.3f}, {b:.3f}]" for a, b in zip(lo, hi, strict=True)], how)


def _wrapped(text: str, width: int) -> str:
    """``text`` broken into lines of at most about ``width`` characters with <br> (plotly titles do not
    wrap on their own: a long one is cut off at the chart's edge)."""
    import textwrap

    if len(text) <= width:
        return text
    # never between a symbol and its value ("δ =<br>0.05"): " = " holds no-break spaces while wrapping
    kept = text.replace(" = ", "\u00a0=\u00a0")
    return "<br>".join(textwrap.wrap(kept, width=width, break_long_words=False)).replace("\u00a0", " ")


def narrow_heatmap(fig: go.Figure, *, title: str, rows: int) -> None:
    """A heatmap that fits a 1000-px-wide page: its title wrapped, room on the left for the y title and
    its tick labels (automargin), the legend below the plot."""
    lines = _wrapped(title, 80)
    fig.update_layout(
        title={"text": lines, "x": 0, "xanchor": "left", "font": {"size": 15}},
        margin={"l": 90, "r": 20, "t": 40 + 22 * (lines.count("<br>") + 1), "b": 60},
        legend={"orientation": "h", "yanchor": "top", "y": -0.18, "x": 0, "xanchor": "left"},
        height=max(440, 160 + 62 * rows),
    )
    fig.update_yaxes(automargin=True, title_standoff=8)
    fig.update_xaxes(automargin=True)


def narrow_bars(fig: go.Figure, *, title: str, categories: int) -> None:
    """Grouped bars that fit a 1000-px-wide page: the legend below the plot instead of beside it (where
    it squeezes the bars), slanted category labels that do not overlap, the title wrapped."""
    lines = _wrapped(title, 80)
    entries = len(fig.data)
    fig.update_layout(
        title={"text": lines, "x": 0, "xanchor": "left", "font": {"size": 15}},
        # the legend at the foot of the figure (container coordinates), below the slanted labels and the
        # axis title, with room kept for its rows
        margin={"l": 70, "r": 20, "t": 40 + 22 * (lines.count("<br>") + 1), "b": 40 + 22 * entries},
        legend={"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0, "x": 0,
                "xanchor": "left"},
        height=560 + 22 * entries + (40 if categories > 4 else 0),
    )
    fig.update_xaxes(tickangle=-30, automargin=True)
    fig.update_yaxes(automargin=True)
