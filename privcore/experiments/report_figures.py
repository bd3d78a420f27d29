"""The report's renderers of the papers' figures and calibration tables (Fig. 2, Fig. 4, the IP
paper's grid and Fig. 5, the noise calibrations), for :func:`privcore.experiments.report.render_report`."""

from __future__ import annotations

from typing import Any

from privcore.experiments.report_format import eps_label, finite, fmt, hoeffding_halfwidth, lookup, table

__all__ = ["CALIBRATION_LABELS", "render_calibration", "render_fig2", "render_fig4", "render_fig4_dims",
           "render_ip_fig5", "render_ip_grid", "render_simple"]

CALIBRATION_LABELS = {
    "ours": "privcore's noise Lap(Δp·R/ε), ℓ∞→ℓ1 Δp from training points",
    "paper-text": "the printed formula Lap(Δp/ε), text only",
    "authors-code": "the authors' Table-1 code, Lap(Δp∞·R/ε), Δp∞ from test points, own head",
    "authors-code-release-clf": "the same noise draws, release classifier",
}


def render_ip_grid(frame: Any) -> str:
    """The IP grid (ε × α) per (model, mechanism, Gaussian calibration), accuracy % mean ± sd."""
    grid = frame[frame["sweep"] == "grid"]
    alphas = sorted(grid["alpha"].unique())
    header = ["model & mechanism", "ε"] + [f"α = {a:g}" for a in alphas]
    cal = grid["calibration"] if "calibration" in grid else None
    keys = ["model", "mechanism"] + (["calibration"] if cal is not None else [])
    rows = []
    for key, part in grid.groupby(keys, sort=False, dropna=False):
        model, mech = key[0], key[1]
        label = f"{model} & {mech}"
        if len(key) > 2 and isinstance(key[2], str):
            label += f" ({key[2]})"
        for e in sorted(part["epsilon"].unique()):
            cells = [label, f"{e:g}"]
            for a in alphas:
                row = lookup(part, epsilon=e, alpha=a)
                cells.append("–" if row is None else _ip_cell(row, sd=True))
            rows.append(cells)
    sizes = ""
    if {"n_draws", "n_test"} <= set(grid.columns) and not grid.empty:
        draws, n = int(grid["n_draws"].max()), int(grid["n_test"].max())
        interval = (f" [95 % percentile-bootstrap interval of the mean over the n = {n} test images]"
                    if "accuracy_lo" in grid else "")
        sizes = (f"Each cell: accuracy % mean ± sd over {draws} noise draws on n = {n} test "
                 f"images{interval}; the classic Gaussian calibration (the paper's formula) is only valid "
                 "for ε < 1 and is shown beside the analytic one there.\n\n")
    return sizes + table(header, rows)


def _ip_cell(row: Any, *, sd: bool) -> str:
    """An IP accuracy in %: mean (± draw sd) [bootstrap interval over images, when stored]."""
    out = f"{100 * row['accuracy_mean']:.2f}"
    if sd:
        out += f" ± {100 * row['accuracy_std']:.2f}"
    if finite(row.get("accuracy_lo")) and finite(row.get("accuracy_hi")):
        out += f" [{100 * row['accuracy_lo']:.1f}, {100 * row['accuracy_hi']:.1f}]"
    return out


def render_ip_fig5(frame: Any) -> str:
    """IP Fig. 5 as a table: Gauss-Output accuracy % per α (rows) against ε (columns), analytic
    calibration, mean [95 % bootstrap interval over images]."""
    part = frame[(frame["sweep"] == "fig5") & (frame["calibration"].fillna("analytic") == "analytic")]
    if part.empty:
        return "_no `fig5` rows in this CSV (it predates the sweep)_"
    epss = sorted(part["epsilon"].unique())
    header = ["model & mechanism", "α"] + [f"ε = {e:g}" for e in epss]
    rows = []
    for (model, mech, a), cell in part.groupby(["model", "mechanism", "alpha"], sort=True):
        cells = [f"{model} & {mech}", f"{a:g}"]
        for e in epss:
            row = lookup(cell, epsilon=e)
            cells.append("–" if row is None else _ip_cell(row, sd=False))
        rows.append(cells)
    draws, n = int(part["n_draws"].max()), int(part["n_test"].max())
    note = (f"Each cell: accuracy % (analytic calibration), mean over {draws} noise draws on n = {n} test "
            f"images [95 % percentile-bootstrap interval of the mean over the images]; {len(epss)} ε per α. "
            "The draw sd is in the CSV.\n\n")
    return note + table(header, rows)


def render_fig4(frame: Any) -> str:
    """Fig. 4 as a table: mean seconds [95 % t-interval] for LipMIP's MILP and the engine, time-outs, n."""
    if "seconds_lo" not in frame:  # results from before the intervals were stored
        return render_simple(
            frame,
            [c for c in ("sweep", "value", "lipmip_seconds_mean", "lipmip_seconds_std", "lipmip_timeouts",
                         "seconds_mean", "seconds_std", "n_timeouts", "solver", "n") if c in frame],
        )

    def cell(row: Any, prefix: str) -> str:
        return (f"{fmt(row[f'{prefix}_mean'], 3)} [{fmt(row[f'{prefix}_lo'], 3)}, "
                f"{fmt(row[f'{prefix}_hi'], 3)}]")

    header = ["sweep", "value", "LipMIP's MILP (s)", "time-outs", "engine (s)", "time-outs", "engine solver",
              "n"]
    rows = [
        [str(r["sweep"]), f"{r['value']:g}", cell(r, "lipmip_seconds"), str(int(r["lipmip_timeouts"])),
         cell(r, "seconds"), str(int(r["n_timeouts"])), str(r["solver"]), str(int(r["n"]))]
        for _, r in frame.iterrows()
    ]
    timeouts = int(frame["lipmip_timeouts"].sum()) + int(frame["n_timeouts"].sum())
    note = ("Seconds per exact certificate: mean over n (network, centre) pairs [95 % Student-t interval "
            f"of the mean, lower end clipped at 0]; {timeouts} of {2 * int(frame['n'].sum())} solves hit "
            "the time limit (a time-out enters the mean at the limit, so such a mean is a lower bound).\n\n")
    return note + table(header, rows)


def render_fig4_dims(frame: Any) -> str:
    """Fig. 4's input-dimension sweep to d = 32 (``bench/fig4_dims.py``): per set of nets and d, mean
    seconds [95 % t-interval] and time-outs of the engine, the portfolio and LipMIP's MILP, and the
    median per-pair ratios MILP ÷ engine and MILP ÷ portfolio [95 % bootstrap interval]."""
    ways = (("engine", "engine (s)"), ("portfolio", "portfolio (s)"), ("milp", "LipMIP's MILP (s)"))
    header = ["nets", "d"] + [h for _, label in ways for h in (label, "time-outs")]
    header += ["MILP ÷ engine", "MILP ÷ portfolio", "n", "load"]
    rows = []
    for (nets, d), part in frame.groupby(["nets", "d"], sort=False):
        by = {r["way"]: r for _, r in part.iterrows()}
        row = [str(nets), str(int(d))]
        for way, _ in ways:
            r = by[way]
            row += [f"{fmt(r['mean'], 3)} [{fmt(r['lo'], 3)}, {fmt(r['hi'], 3)}]", str(int(r["timeouts"]))]
        for way in ("engine", "portfolio"):
            r = by[way]
            row.append(f"{fmt(r['ratio_median'], 3)} [{fmt(r['ratio_lo'], 3)}, {fmt(r['ratio_hi'], 3)}]")
        row += [str(int(by["engine"]["n"])), f"{float(by['engine']['load']):.1f}"]
        rows.append(row)
    note = ("Seconds per certificate: mean over n (network, centre) pairs [95 % Student-t interval of "
            "the mean, lower end clipped at 0]; a time-out enters at its seconds, so a mean with time-outs, "
            "and a ratio against a MILP time-out, is a lower bound. Ratios: median over pairs "
            "[95 % percentile-bootstrap interval]; load: the 1-minute load average after the row.\n\n")
    return note + table(header, rows)


def render_calibration(frame: Any) -> str:
    """Noise-only accuracy per obfuscator × calibration × ε (Laplace scale b), with n and the 95 %
    Hoeffding half-width of each row."""
    import pandas as pd

    epss = sorted(frame["epsilon"].unique())
    header = ["obfuscator", "calibration"] + [f"ε = {eps_label(e)}" for e in epss] + ["n (± 95 %)"]
    if "accuracy_refit" in frame:
        refit = frame[frame["calibration"] == "ours"].copy()
        refit["calibration"] = "ours, refit classifier"
        refit["accuracy_mean"] = refit["accuracy_refit"]
        refit["n_draws"] = 1
        frame = pd.concat([frame, refit])
    rows = []
    for (name, cal), part in frame.groupby(["obfuscator", "calibration"], sort=False):
        label = CALIBRATION_LABELS.get(cal, cal) if cal != "ours, refit classifier" else (
            "ours, classifier refit on training releases at that ε (one draw)")
        cells = [name, f"`{cal}`: {label}" + ("" if bool(part["private"].iloc[0]) else " (not private)")]
        for e in epss:
            row = lookup(part, epsilon=e)
            cells.append(
                "–" if row is None else f"{row['accuracy_mean']:.3f} (b={row['noise_scale_mean']:.3g})"
            )
        n, draws = int(part["n_test"].max()), int(part["n_draws"].max())
        cells.append(f"{n} × {draws} (±{hoeffding_halfwidth(n):.3f})")
        rows.append(cells)
    return table(header, rows)


def render_fig2(frame: Any) -> str:
    """Fig. 2 as a table: α rows × radius columns, mean certified L [95 % interval]."""
    if "lipschitz_lo" not in frame:  # results from before the intervals were stored
        return render_simple(frame, ["obfuscator", "arl_alpha", "radius", "lipschitz_mean", "lipschitz_std"])
    radii = sorted(frame["radius"].unique())
    header = ["obfuscator", "α"] + [f"r = {r:g}" for r in radii]
    rows = []
    ordered = frame.sort_values("arl_alpha", kind="stable")
    for (name, alpha), part in ordered.groupby(["obfuscator", "arl_alpha"], sort=False):
        cells = [str(name), f"{alpha:g}"]
        for r in radii:
            row = lookup(part, radius=r)
            cells.append("–" if row is None else (
                f"{fmt(row['lipschitz_mean'])} [{fmt(row['lipschitz_lo'])}, {fmt(row['lipschitz_hi'])}]"))
        rows.append(cells)
    sizes = sorted({int(v) for v in frame["n_points"].dropna()})
    inexact = int(frame["n_inexact"].sum()) if "n_inexact" in frame else 0
    note = (f"Mean certified L(f, B∞(z, r)) (ℓ∞→ℓ1) over n = {', '.join(map(str, sizes))} test embeddings "
            "(the same points for every model and radius), [95 % percentile-bootstrap interval of the mean]; "
            f"{inexact} certificates hit a time limit (their proven upper bound is used).\n\n")
    return note + table(header, rows)


def render_simple(frame: Any, columns: list[str], digits: int = 4) -> str:
    """The CSV's chosen columns as a markdown table."""
    rows = []
    for _, r in frame.iterrows():
        rows.append([fmt(r[c], digits) if isinstance(r[c], float) else str(r[c]) for c in columns])
    return table(columns, rows)
