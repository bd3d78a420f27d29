"""Markdown tables of the low-ε frontier of the global mechanism (``experiment report``): the
validation grid of ``select-frontier``, its one test read beside the ceiling (``ceiling``) and the
shipped default (``table1-global``), the GroupSort family beside its selection
(``frontier-groupsort``), and the reconstruction attack at equal total ε (``attack-frontier``)."""

from __future__ import annotations

import math
from typing import Any

from privcore.experiments.report_format import table

__all__ = ["OPENING_RULE", "opening_view", "render_attack_frontier", "render_frontier_test",
           "render_frontier_validation", "render_groupsort", "render_opening_view"]

_EPS = (1.0, 2.0, 4.0, 10.0)
#: how the dashboard's default model and opening ε are chosen, together, on validation only
OPENING_RULE = (
    "among the models the dataset ships, on the validation rows of select-frontier (certified global "
    "mechanism, 3 noise draws per image): the opening total ε is the smallest validation ε at which "
    "some shipped model's 95 % interval lies at or above the usefulness level u = (1 + 1/C)/2 (halfway "
    "from chance to perfect; 0.55 for C = 10 classes); the default model is, among the shipped models "
    "that clear it there, the one with the highest validation accuracy at that ε (ties: higher at the "
    "largest validation ε)"
)


def opening_view(frame: Any, shipped: Any, classes: int = 10) -> dict[str, Any] | None:
    """(model, ε) that :data:`OPENING_RULE` picks from ``select-frontier`` rows (validation only),
    among the names in ``shipped``; None when no shipped model reaches the level at any ε."""
    val = frame[(frame["choice"] == "obfuscator") & frame["candidate"].isin(list(shipped))]
    level = (1.0 + 1.0 / classes) / 2.0
    top = float(val["epsilon_total"].max()) if len(val) else math.inf
    for eps in sorted(val["epsilon_total"].unique()):
        at = val[(val["epsilon_total"] == eps) & (val["low"] >= level)]
        if at.empty:
            continue
        last = val[val["epsilon_total"] == top].set_index("candidate")["accuracy"]
        best = max(at.itertuples(), key=lambda r: (r.accuracy, float(last.get(r.candidate, -1.0))))
        return {"epsilon": float(eps), "model": str(best.candidate), "accuracy": float(best.accuracy),
                "low": float(best.low), "high": float(best.high), "level": level}
    return None


def render_opening_view(frame: Any, shipped: Any, current: tuple[str, float], classes: int = 10) -> str:
    """The shipped models' validation accuracy per total ε, the rule's pick (★) beside the dashboard's
    present default model and opening ε."""
    names = [c for c in dict.fromkeys(frame["candidate"]) if c in set(shipped)]
    if not names:
        return (f"None of the models this dataset ships has validation rows in `select-frontier.csv`, so "
                f"the rule ({OPENING_RULE}) has nothing to pick here; the dashboard opens with "
                f"{current[0]} at total ε = {current[1]:g}.\n")
    val = frame[frame["choice"] == "obfuscator"]
    pick = opening_view(frame, names, classes)
    rows = []
    for name in names:
        part = val[val["candidate"] == name]
        cells = []
        for e in _EPS:
            mark = " ★" if pick and pick["model"] == name and pick["epsilon"] == e else ""
            cells.append(_cell(part, e) + mark)
        rows.append([name, *cells])
    level = (1.0 + 1.0 / classes) / 2.0
    chosen = ("no shipped model reaches it at any validation ε" if pick is None else
              f"the rule picks {pick['model']} at total ε = {pick['epsilon']:g} (★)")
    note = (f"Validation rows of `select-frontier.csv` for the models this dataset ships; usefulness level "
            f"u = {level:.2f} ({classes} classes). Rule: {OPENING_RULE}. Here {chosen}; the dashboard "
            f"opens with {current[0]} at total ε = {current[1]:g}.\n\n")
    return note + table(["shipped model", *(f"total ε = {e:g}" for e in _EPS)], rows)


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


def render_frontier_test(frame: Any, ceiling: Any, table1_global: Any, select_global: Any = None) -> str:
    """Test accuracy per total ε: the ceiling's rows for the same embedder recipe, the shipped default
    (or ``select-global``'s one test read, where it ran), the selected candidate, and the selected
    candidate's gap to the LP bound."""
    final = frame[frame["choice"] == "final"]
    if final.empty:
        return "_the test set has not been read: the run has not selected a candidate yet_\n"
    name = str(final["candidate"].iloc[0])
    rows: list[list[str]] = []
    bound: dict[float, float] = {}
    emb = ""
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
    if select_global is not None:
        earlier = select_global[(select_global["choice"] == "final") & (select_global["split"] == "test")]
        if not earlier.empty:
            label = f"select-global's selection: {earlier['obfuscator'].iloc[0]} (T = 2)"
            rows.append([label, *(_cell(earlier, e) for e in _EPS)])
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
    where = ("same embedder and R" if ceiling is None or emb == "embedder-label" else
             f"embedder `{emb}` (the same recipe on all training images), same R")
    note = (f"Test, n = {n} images, {draws} noise draws each, [95 % percentile bootstrap over images]; read "
            f"once for the selected candidate. Ceiling rows: `ceiling.csv`, {where}; shipped "
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


def render_groupsort(frame: Any, frontier: Any) -> str:
    """The GroupSort family on validation beside ``select-frontier``'s selected candidate (the bar), and
    the family's one test read where its best passed the bar."""
    from privcore.experiments.groupsort_family import family

    fam = family(str(frame["dataset"].iloc[0])) if len(frame) else {}
    rows = []
    if frontier is not None:
        ref = frontier[(frontier["choice"] == "obfuscator") & (frontier["selected"].astype(str) == "True")]
        if len(ref):
            first = ref.iloc[0]
            rows.append([f"{first['candidate']} (select-frontier's selection, the bar)", "ReLU (10, 10)",
                         "sampled", f"{first['global_lipschitz']:.4g}", *(_cell(ref, e) for e in _EPS)])
    val = frame[frame["choice"] == "family"]
    for name, part in val.groupby("candidate", sort=False):
        over = fam.get(name, (0.0, 0, {}))[2]
        hidden = ", ".join(str(w) for w in over.get("obfuscator_hidden", ()))
        bound = over.get("noise_bound", "sampled")
        rows.append([str(name), f"MaxMin ({hidden})", bound, f"{part.iloc[0]['global_lipschitz']:.4g}",
                     *(_cell(part, e) for e in _EPS)])
    n, draws = (int(val["n"].max()), int(val["draws"].max())) if len(val) else (0, 0)
    note = (f"Validation, n = {n} images, {draws} noise draws each, [95 % percentile bootstrap over "
            "images]. All at training ε ∈ {2, 4} and output dimension 2. Ĝ in training: `sampled` (the "
            "largest ‖J_f‖∞→1 over the batch's R-balls and 512 box points) or `construction` (Π‖Ŵ_l‖∞→∞·"
            "‖Ŵ_L‖∞→1 = 1 of ∞-normalised weights); G: certified by the run's process from the baked ReLU "
            "form.\n\n")
    out = note + table(["candidate", "activation (widths)", "Ĝ in training", "G",
                        *(f"total ε = {e:g}" for e in _EPS)], rows)
    test = frame[frame["choice"] == "final"]
    if len(test):
        name = str(test["candidate"].iloc[0])
        rows = []
        if frontier is not None:  # select-frontier's own test read of its selection
            ref = frontier[frontier["choice"] == "final"]
            if len(ref):
                rows.append([f"{ref['candidate'].iloc[0]} (select-frontier's selection)",
                             *(_cell(ref, e) for e in _EPS)])
        rows.append([name, *(_cell(test, e) for e in _EPS)])
        out += (f"\n\nTest, n = {int(test['n'].max())} images, {int(test['draws'].max())} noise draws each, "
                f"read once for {name}:\n\n" + table(["model", *(f"total ε = {e:g}" for e in _EPS)], rows))
    else:
        out += "\n\nThe test set was not read: no candidate of the family is above the bar on validation."
    return out

