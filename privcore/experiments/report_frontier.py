"""Markdown tables of the low-ε frontier of the global mechanism (``experiment report``): the
validation grid of ``select-frontier``, its one test read beside the ceiling (``ceiling``) and the
shipped default (``table1-global``), and the reconstruction attack at equal total ε
(``attack-frontier``)."""

from __future__ import annotations

import math
from typing import Any

from privcore.experiments.report_format import table

__all__ = ["render_attack_frontier", "render_frontier_test", "render_frontier_validation"]

_EPS = (1.0, 2.0, 4.0, 10.0)


def _cell(part: Any, eps: float, column: str = "epsilon_total") -> str:
    row = part[part[column] == eps]
    if row.empty:
        return "—"
    r = row.iloc[0]
    return f"{r['accuracy']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"


def render_frontier_validation(frame: Any) -> str:
    """Every candidate on validation: accuracy [95 % bootstrap] per total ε, G, * = selected."""
    val = frame[frame["choice"] == "obfuscator"]
    rows = []
    for name, part in val.groupby("candidate", sort=False):
        first = part.iloc[0]
        star = " *" if str(first["selected"]) == "True" else ""
        rows.append([f"{name}{star}", f"{first['target_epsilon']:g}", str(int(first["out_dim"])),
                     f"{first['global_lipschitz']:.4g}", *(_cell(part, e) for e in _EPS)])
    n, draws = (int(val["n"].max()), int(val["draws"].max())) if len(val) else (0, 0)
    note = (f"Validation, n = {n} images, {draws} noise draws each, [95 % percentile bootstrap over "
            "images]; * = selected (highest accuracy at total ε = 2). T: training ε ∈ {T, 2T}; k: output "
            "dimension.\n\n")
    header = ["candidate", "T", "k", "G", *(f"total ε = {e:g}" for e in _EPS)]
    return note + table(header, rows)


def render_frontier_test(frame: Any, ceiling: Any, table1_global: Any) -> str:
    """Test accuracy per total ε: the ceiling's rows for the same embedder, the shipped default, the
    selected candidate, and the selected candidate's gap to the LP bound."""
    final = frame[frame["choice"] == "final"]
    name = str(final["candidate"].iloc[0])
    rows: list[list[str]] = []
    bound: dict[float, float] = {}
    if ceiling is not None:
        embedders = list(dict.fromkeys(ceiling["embedder"]))
        emb = "embedder-label" if "embedder-label" in embedders else str(embedders[0])
        c = ceiling[(ceiling["embedder"] == emb) & (ceiling["split"] == "test")]
        for est, label in (("metric-dp-bound", "upper bound: any obfuscator (LP)"),
                           ("per-coordinate", "estimate: clip z + Lap(R/ε) per coordinate"),
                           ("identity-global", "achievable: identity, Lap(d·R/ε)")):
            part = c[c["estimator"] == est]
            cells = []
            for e in _EPS:
                row = part[part["epsilon_total"] == e]
                if row.empty:
                    cells.append("—")
                elif est == "metric-dp-bound":
                    bound[e] = float(row.iloc[0]["accuracy"])
                    cells.append(f"≤ {bound[e]:.3f}")
                else:
                    cells.append(_cell(row, e))
            rows.append([label, *cells])
    if table1_global is not None:
        shipped = table1_global[table1_global["obfuscator"] == "N-global"]
        if not shipped.empty:
            rows.append(["shipped default: N-global (T = 10)", *(_cell(shipped, e) for e in _EPS)])
    first = final.iloc[0]
    rows.append([f"selected: {name} (T = {first['target_epsilon']:g}, k = {int(first['out_dim'])})",
                 *(_cell(final, e) for e in _EPS)])
    gaps = []
    for e in _EPS:
        row = final[final["epsilon_total"] == e]
        gap = None if row.empty or e not in bound else bound[e] - float(row.iloc[0]["accuracy"])
        gaps.append("—" if gap is None else f"{gap:.3f}")
    rows.append([f"gap of {name} to the LP bound", *gaps])
    n, draws = int(final["n"].max()), int(final["draws"].max())
    note = (f"Test, n = {n} images, {draws} noise draws each, [95 % percentile bootstrap over images]; read "
            "once for the selected candidate. Ceiling rows: `ceiling.csv`, same embedder and R; shipped "
            "default: `table1-global.csv` (no ε = 1 column there).\n\n")
    return note + table(["model", *(f"total ε = {e:g}" for e in _EPS)], rows)


def render_attack_frontier(frame: Any) -> str:
    """SSIM and PSNR [95 % bootstrap] of the reconstruction attack per model and total ε."""
    totals = sorted(frame["epsilon_total"].astype(float).unique())
    rows = []
    for name, part in frame.groupby("obfuscator", sort=False):
        cells = [str(name), f"{part['global_lipschitz'].iloc[0]:.4g}"]
        for e in totals:
            r = part[part["epsilon_total"].astype(float) == e]
            cells.append("—" if r.empty else (
                f"{r.iloc[0]['ssim']:.3f} [{r.iloc[0]['ssim_lo']:.3f}, {r.iloc[0]['ssim_hi']:.3f}] · "
                f"{r.iloc[0]['psnr']:.2f} dB"))
        rows.append(cells)
    floor = frame.iloc[0]
    note = (f"n = {int(frame['n_eval'].max())} test images per cell, one release each; SSIM [95 % percentile "
            f"bootstrap] · PSNR (data range 1). No-release floor (the training mean image): SSIM "
            f"{floor['ssim_floor']:.3f}, PSNR {floor['psnr_floor']:.2f} dB.\n\n")
    header = ["model", "G", *(("ε = ∞" if math.isinf(e) else f"total ε = {e:g}") for e in totals)]
    return note + table(header, rows)
