"""A session report as one self-contained HTML file: pure Python, no Streamlit.

What a privacy engineer files after a session: the settings, the guarantee one sent release spends,
the release sent at the current settings (only a sent one: the dashboard draws at Send, so there is
nothing else to put in), the attacker's reconstruction from it, the accuracy curve with the current
ε marked, and the session's ledger with its totals. Every user-supplied text (file names, labels) is
HTML-escaped; plotly.js is embedded once so the file opens offline.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from privlens.settings import Settings

__all__ = ["accuracy_figure", "session_report", "settings_rows"]

# nothing may widen the page past its column: long JSON lines wrap (and a block scrolls if a token is
# still too long), wide tables scroll in their own box
_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
h1{margin-bottom:0} .muted{color:#666} table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;font-size:.9em;overflow-wrap:break-word}
.box{background:#eef4ff;padding:.75em 1em;border-radius:6px} .warn{background:#fff6dd}
.scroll{max-width:100%;overflow-x:auto}
pre{white-space:pre-wrap;overflow-wrap:anywhere;max-width:100%;overflow-x:auto;background:#f6f6f6;
padding:.75em;border-radius:6px;font-size:.85em}
img{image-rendering:pixelated;width:160px;border:1px solid #ccc;margin-right:1em}
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _bold(escaped: str) -> str:
    """Markdown **bold** (in already escaped text) as <b>."""
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", escaped)


def _png(data: bytes | None, caption: str) -> str:
    if not data:
        return ""
    src = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    return (
        f'<figure style="display:inline-block"><img src="{src}" alt="{_e(caption)}">'
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


def _table(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "<p class='muted'>none</p>"
    return f"<div class='scroll'>{pd.DataFrame(list(rows)).to_html(index=False, escape=True, border=0)}</div>"


def settings_rows(settings: Settings) -> list[dict[str, str]]:
    """The settings in words, each only where it applies: the model, R and (PTR) the certifier for the
    posthoc mechanisms, α for the inference-privacy ones; δ as the mechanism uses it."""
    from privlens import budget
    from privlens.settings import mechanism_label

    s, mech = settings, settings.spec
    own = mech.mechanism_epsilon(s.epsilon)
    half = "" if mech.epsilon_share == 1 else f" ({mech.name} runs at ε/{1 / mech.epsilon_share:g} = {own:g})"
    rows = [
        ("dataset", s.dataset),
        ("mechanism", mechanism_label(s.mechanism)),
        ("ε, the total of one sent release", f"{s.epsilon:g}{half}"),
    ]
    posthoc = "radius" in mech.parameter_names
    if mech.family == "posthoc":  # the obfuscator releases
        rows.insert(1, ("model (obfuscator)", s.model))
    spent = budget.spent_guarantee(s)
    if not mech.uses_delta:
        rows.append(("δ", f"0: {mech.label} is pure"))
    elif spent.delta != s.delta:
        rows.append((f"δ, {mech.name}'s parameter", f"{s.delta:g} (a sent release spends {spent.delta:g})"))
    else:
        rows.append(("δ, the failure probability", f"{s.delta:g}"))
    if posthoc:
        rows.append(("R, ℓ∞ radius in the embedding", f"{s.radius:g}"))
        if mech.needs_certificate:
            rows.append(("certifier of φ", s.certifier))
    elif "alpha" in mech.parameter_names:
        metric = "ℓ1" if spent.norm.value == "l1" else "ℓ2"
        rows.append((f"α, {metric} radius on the input", f"{s.alpha:g}"))
    if spent.all_pairs:
        rows.append(("pairs protected", "every pair of inputs (local DP)"))
    return [{"setting": k, "value": v} for k, v in rows]


def accuracy_figure(
    table1: Any,
    *,
    model: str,
    epsilon: float,
    column: str = "epsilon",
    label: str = "ε",
    mechanism: str | None = None,
    delta: float | None = None,
) -> Any | None:
    """Test accuracy of ``model`` against ε (a Table 1 CSV: ``table1`` for PTR, whose ε is PTR's own,
    ``table1-global`` with ``column="epsilon_total"``; finite ε) with ``epsilon`` marked; ``label``
    names the axis's ε, ``mechanism`` the mechanism measured (None: ``table1``'s); rows at ``delta``
    where measured there, else at the nearest measured δ. Each point has its 95 % interval (the table's
    ``low``/``high``, else Wilson over ``n_test``); the legend and title name n and δ. None without data."""
    import plotly.graph_objects as go

    from privcore.experiments import MEASURES
    from privcore.mechanisms import registry
    from privlens import charts, live

    mechanism = MEASURES["table1"] if mechanism is None else mechanism  # (the default table's)
    if table1 is None or "obfuscator" not in table1 or column not in table1 or "accuracy" not in table1:
        return None
    mine = table1[table1["obfuscator"].astype(str) == model]
    if mine.empty:
        return None
    mine = mine[np.isfinite(mine[column].astype(float).to_numpy())].sort_values(column)
    if mine.empty:
        return None
    mine, measured = live.at_delta(mine, delta)
    if measured is None and not registry.get(mechanism).uses_delta:
        measured = 0.0  # pure
    acc = mine["accuracy"].astype(float).tolist()
    n_col = next((c for c in ("n_test", "n") if c in mine), None)
    ns = [int(v) if v == v else 0 for v in mine[n_col]] if n_col else [0] * len(acc)
    if {"low", "high"} <= set(mine.columns):
        lows, highs = mine["low"].astype(float).tolist(), mine["high"].astype(float).tolist()
    else:
        nan = (float("nan"), float("nan"))
        cis = [live.wilson(a, n) if n > 0 else nan for a, n in zip(acc, ns, strict=True)]
        lows, highs = [c[0] for c in cis], [c[1] for c in cis]
    sizes = sorted({n for n in ns if n > 0})
    n_text = f"n = {'/'.join(map(str, sizes))}" if sizes else "n not recorded"
    d_text = live.delta_text(measured).removeprefix(", ")
    fig = go.Figure(
        go.Scatter(
            x=mine[column],
            y=acc,
            mode="lines+markers",
            name=f"{model} ({n_text} test images, {d_text}; bars: 95 % interval)",
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [h - a for a, h in zip(acc, highs, strict=True)],
                "arrayminus": [a - lo for a, lo in zip(acc, lows, strict=True)],
            },
        )
    )
    charts.mark_x(fig, epsilon, f"current {label} = {epsilon:g}", log=True)
    charts.log_axis(fig, [*mine[column], epsilon])
    fig.update_layout(
        title=f"Test accuracy vs {label} ({mechanism}, Table 1; {n_text}, measured at {d_text})",
        yaxis_range=[0, 1],
        height=420,
        xaxis_title=f"{label} (log scale)",
        yaxis_title="test accuracy (fraction; 95 % interval)",
        legend={"orientation": "h", "yanchor": "top", "y": -0.25},
    )
    return fig


def session_report(
    *,
    settings: Settings,
    guarantee_text: str,
    image_name: str,
    input_png: bytes | None,
    release: Mapping[str, Any] | None,
    attacker_png: bytes | None,
    figures: Sequence[Any],
    ledger: Sequence[Mapping[str, Any]],
    totals: Sequence[Mapping[str, Any]],
    warnings: Sequence[str] = (),
) -> str:
    """The report's HTML. ``release`` is the release JSON of a sent release (None: nothing sent);
    ``figures`` plotly figures (the first embeds plotly.js); ``ledger`` rows with image, label and a
    guarantee (``to_dict``); ``totals`` the rows of :func:`privlens.ledger.ledger_totals`."""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>privlens session report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>privlens session report</h1>",
        f"<p class='muted'>{_e(when)} · keep this file private: it shows your image.</p>",
        "<h2>Settings</h2>",
        _table(settings_rows(settings)),
        f"<div class='box'><b>Guarantee one sent release spends.</b> {_e(guarantee_text)}</div>",
    ]
    parts += [f"<div class='box warn'>{_bold(_e(w))}</div>" for w in warnings]
    parts.append(f"<h2>Image</h2>{_png(input_png, f'your image: {image_name}')}")
    parts.append("<h2>Release</h2>")
    if release is None:
        parts.append("<p>Nothing was sent at these settings, so no release is in this report.</p>")
    else:
        parts.append(_png(attacker_png, "the attacker's reconstruction from the release"))
        parts.append(f"<pre>{_e(json.dumps(release, indent=2, ensure_ascii=False))}</pre>")
    if figures:
        parts.append("<h2>Curves</h2>")
        for i, fig in enumerate(figures):
            parts.append(fig.to_html(full_html=False, include_plotlyjs=(i == 0)))
    parts.append("<h2>Ledger (sent releases)</h2>")
    parts.append(
        _table(
            [
                {"#": i + 1, "image": r["image"], "release": r["label"], **r["guarantee"].to_dict()}
                for i, r in enumerate(ledger)
            ]
        )
    )
    parts.append("<h3>Totals per image (basic composition)</h3>")
    parts.append(_table(totals))
    parts.append("</body></html>")
    return "\n".join(parts)
