"""Markdown of the experiments that bound what any obfuscator can keep: ``ceiling`` (the global
mechanism's ceiling on an embedder) and ``neighbours`` (what R protects). Rendered from the committed
CSVs by :func:`privcore.experiments.report.render_report`; docs/RESULTS.md carries the output."""

from __future__ import annotations

from typing import Any

from privcore.experiments.report_format import table

__all__ = ["render_ceiling", "render_neighbours"]

#: ceiling.csv's estimators in the order and with the labels of the table.
_CEILING_ROWS = (
    ("metric-dp-bound", "upper bound: any obfuscator (LP) [one-sided 95 %]"),
    ("per-coordinate", "estimate: clip z + Lap(R/ε) per coordinate"),
    ("identity-global", "achievable: identity under the global mechanism, Lap(d·R/ε)"),
)
#: neighbours.csv's shares (per cent with a Clopper–Pearson interval) in the order of the table.
_SHARES = ("other_class_within_r", "nearest_within_r_same_class", "any_within_r")


def _interval(r: Any) -> str:
    return f"{r['accuracy']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"


def _ceiling_cell(part: Any, eps: float) -> str:
    rows = part[part["epsilon_total"] == eps]
    if rows.empty:
        return "—"
    r = rows.iloc[0]
    if r["kind"] == "upper-bound":  # a proof over these images; in brackets + the Hoeffding margin
        return f"≤ {r['accuracy']:.3f} (≤ {r['high']:.3f})"
    return _interval(r)


def render_ceiling(frame: Any) -> str:
    """Per embedder: the LP upper bound, the per-coordinate estimate, the identity under the global
    mechanism and every shipped model on that embedder at each total ε (test split; selected
    classifiers; 95 % percentile bootstrap), then the noise-free reference."""
    test = frame[frame["split"] == "test"]
    test = test[test["kind"].isin(("upper-bound", "shipped")) | (test["selected"].astype(str) == "True")]
    totals = sorted(e for e in test["epsilon_total"].unique() if e != float("inf"))
    out = []
    for embedder in dict.fromkeys(test["embedder"]):
        part = test[test["embedder"] == embedder]
        first = part.iloc[0]
        rows = [[label, *(_ceiling_cell(part[part["estimator"] == est], e) for e in totals)]
                for est, label in _CEILING_ROWS]
        shipped = part[part["kind"] == "shipped"]
        for model in dict.fromkeys(shipped["classifier"]):
            rows.append([f"shipped: {model}",
                         *(_ceiling_cell(shipped[shipped["classifier"] == model], e) for e in totals)])
        clean = part[part["estimator"] == "clean"]
        note = "" if clean.empty else (
            f"\n\nNoise-free (clean clip z, same MLP search): {_interval(clean.iloc[0])}.")
        out.append(f"{first['dataset']}, embedder `{embedder}` (R = {first['radius']:g}, "
                   f"d = {int(first['latent_dim'])}; n = {int(first['n'])} test images)\n\n"
                   + table(["estimator", *(f"ε = {e:g}" for e in totals)], rows) + note)
    return "\n\n".join(out)


def render_neighbours(frame: Any) -> str:
    """Per embedder: the shares of test images with a training image of another class within R, whose
    nearest training image lies within R and shows the same class, and with any within R (per cent
    [95 % Clopper–Pearson]), and the median other-class distance over R [95 % order-statistic]."""
    header = ["embedder (model)", "R", "another class within R", "nearest within R, same class",
              "any within R", "median other-class distance / R", "n"]
    rows = []
    for embedder in dict.fromkeys(frame["embedder"]):
        part = frame[frame["embedder"] == embedder].set_index("quantity")
        first = part.iloc[0]
        shares = [f"{100 * part.loc[q, 'value']:.1f} % [{100 * part.loc[q, 'low']:.1f}, "
                  f"{100 * part.loc[q, 'high']:.1f}]" for q in _SHARES]
        m = part.loc["median_other_class_distance_over_r"]
        rows.append([f"`{embedder}` ({first['model']})", f"{first['radius']:g}", *shares,
                     f"{m['value']:.2f} [{m['low']:.2f}, {m['high']:.2f}]", str(int(first["n"]))])
    return table(header, rows)
