"""Markdown tables of our results beside the papers' (``python -m privcore experiment report``).

Reads ``data/results/<dataset>/*.csv`` and renders each paper table with the same rows and
columns, every cell "ours (paper)", plus the command and mode that produced our numbers (from the
JSON provenance). ``docs/RESULTS.md`` is written from this output plus the discussion.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from privcore.defaults import OPENING_EPSILON, default_model
from privcore.experiments import paper_numbers as paper
from privcore.experiments.report_bounds import render_ceiling, render_neighbours
from privcore.experiments.report_figures import (
    CALIBRATION_LABELS,
    render_calibration,
    render_fig2,
    render_fig4,
    render_fig4_dims,
    render_ip_fig5,
    render_ip_grid,
    render_simple,
)
from privcore.experiments.report_format import (
    eps_label,
    finite,
    fmt,
    hoeffding_halfwidth,
    lookup,
    t_halfwidth,
    table,
)
from privcore.experiments.runner import DEFAULT_RESULTS_DIR

__all__ = ["CALIBRATION_LABELS", "PAPER_DATASET", "hoeffding_halfwidth", "render_report", "t_halfwidth"]

#: Which paper column our dataset is compared with (digits: the closest, MNIST; not in the papers).
PAPER_DATASET = {"digits": "MNIST", "mnist": "MNIST", "fashion-mnist": "FMNIST", "utkface": "UTKFace"}


def _provenance(results: Path, name: str) -> str:
    meta_path = results / f"{name}.json"
    if not meta_path.is_file():
        return ""
    meta = json.loads(meta_path.read_text())
    mode = meta.get("config", {}).get("mode", "?")
    done = "complete" if meta.get("complete") else "INCOMPLETE"
    rows, rev = meta.get("rows", "?"), meta.get("git_revision", "?")
    out = f"`{meta.get('command', '')}` ({mode} mode, {rows} rows, {done}, git {rev})"
    for added in meta.get("added") or ():  # parts added or redone later (tables.Parts)
        out += (f"; the rows of {', '.join(added.get('parts', []))} by `{added.get('command', '')}` "
                f"(git {added.get('git_revision', '?')})")
    return out


def _order(names: Any) -> list[str]:
    """Obfuscator names in Table 1's order (each variant, then its paper-recipe twin), others after."""
    from privcore.train.recipes import table1_order

    names = list(dict.fromkeys(names))
    first = table1_order(names)
    return first + [n for n in names if n not in first]


def _paper_ref(ref: dict[str, Any], name: str) -> Any:
    """The paper's Table-1 row for an obfuscator name (a paper-recipe or authors'-code twin, and a variant
    at other loss weights such as ``ARL-alpha0.9`` or ``N-paper-sigma0.1``, read their variant's)."""
    from privcore.train.recipes import AUTHORS_RECIPE_SUFFIX, PAPER_RECIPE_SUFFIX

    base = re.sub(r"(-alpha[\d.]+)?(-sigma[\d.]+)?$", "", name).removesuffix("-abc903c")
    return ref.get(name, ref.get(base.removesuffix(PAPER_RECIPE_SUFFIX).removesuffix(AUTHORS_RECIPE_SUFFIX)))


def render_table1(frame: Any, dataset: str, column: str = "accuracy") -> str:
    """Table 1: ``column`` [release rate] (paper) per obfuscator × (Informal, ε = 1, 2, 5, 10)."""
    ref = paper.TABLE1.get(PAPER_DATASET.get(dataset, ""), {})
    header = ["obfuscator"] + ["Informal" if math.isinf(e) else f"ε = {e:g}" for e in paper.TABLE1_COLUMNS]
    rows = []
    for name in _order(frame["obfuscator"]):
        cells = [name]
        theirs_row = _paper_ref(ref, name)
        for k, e in enumerate(paper.TABLE1_COLUMNS):
            row = lookup(frame, obfuscator=name, epsilon=e)
            ours = "–" if row is None else fmt(row[column])
            if row is not None and "n_test" in row:
                ours += f" ±{hoeffding_halfwidth(row['n_test']):.3f}"
            if row is not None and not math.isinf(e):
                ours += f" [{row['release_rate']:.0%}]"
            theirs = f" ({theirs_row[k]:.3f})" if theirs_row is not None else ""
            cells.append(ours + theirs)
        rows.append(cells)
    return _n_note(frame, "n_test", "test images per cell") + table(header, rows)


#: how each calibration.csv calibration is named in the report


def _cell(row: Any, column: str) -> str:
    """``value ±h`` with h the 95 % Hoeffding half-width over the row's ``n_test`` images."""
    return "–" if row is None else f"{fmt(row[column])} ±{hoeffding_halfwidth(row['n_test']):.3f}"


def render_table1_like_for_like(
    table1: Any, calibration: Any, dataset: str, table1_global: Any = None
) -> str:
    """Per obfuscator, at the paper's columns (Informal, ε = 1, 2, 5, 10): the paper's Table 1; ours
    under the authors' code protocol (``calibration``'s ``authors-code`` rows: Lap(Δp∞·R/ε), no test,
    every image, the obfuscator's own head; and ``authors-code-release-clf``); ours under the
    printed formula Lap(Δp/ε) (``paper-text``); ours under PTR (``table1``); and ours under the
    certified global mechanism at the same total ε as PTR's column (``table1_global`` at 2ε). Without
    ``table1`` (PTR not run) the obfuscators are ``calibration``'s and the PTR rows are left out."""
    ref = paper.TABLE1.get(PAPER_DATASET.get(dataset, ""), {})
    cols = list(paper.TABLE1_COLUMNS)
    header = ["obfuscator", "row"] + ["Informal" if math.isinf(e) else f"ε = {e:g}" for e in cols] + ["n"]
    from privcore.train.recipes import AUTHORS_RECIPE_SUFFIX, PAPER_RECIPE_SUFFIX

    def cal_rows(name: str, calib: str) -> Any:
        if calibration is None or "calibration" not in calibration:
            return None
        part = calibration[(calibration["obfuscator"] == name) & (calibration["calibration"] == calib)]
        return None if part.empty else part

    rows = []
    names = _order((table1 if table1 is not None else calibration)["obfuscator"])
    for name in names:
        suffix = next((s for s in (PAPER_RECIPE_SUFFIX, AUTHORS_RECIPE_SUFFIX) if name.endswith(s)), "")
        twin = bool(suffix)
        recipe = {PAPER_RECIPE_SUFFIX: "the paper's recipe, ",
                  AUTHORS_RECIPE_SUFFIX: "the authors' code's recipe (validation-selected), "}.get(suffix, "")
        theirs = _paper_ref(ref, name)
        # the paper's row once per variant: before the variant, or before a twin shown alone
        base = name.removesuffix(suffix) if twin else name
        if theirs is not None and not (twin and (base in names or base + PAPER_RECIPE_SUFFIX in names)):
            column = PAPER_DATASET.get(dataset, "")
            same = column.lower().replace("fmnist", "fashion-mnist") == dataset
            other = "" if same else f"{column}, not {dataset}; "
            rows.append([name, f"paper ({other}the authors' code: Lap(Δp∞·R/ε), no test, every image)"]
                        + [f"{theirs[k]:.3f}" for k in range(len(cols))] + ["–"])
        for calib, label in (
            ("authors-code",
             "authors' code: Lap(Δp∞·R/ε), Δp∞ from test points, no test, own head; not private"),
            ("authors-code-release-clf", "authors' code noise, our release classifier; not private"),
            ("paper-text", "the printed formula Lap(Δp/ε) (text only, no code runs it), no test"),
        ):
            part = cal_rows(name, calib)
            if part is None:
                continue
            cells = [name, f"ours, {recipe}{label}"]
            cells += [_cell(lookup(part, epsilon=e), "accuracy_mean") for e in cols]
            finite = part[part["epsilon"].map(math.isfinite)]
            cells.append(f"{int(finite['n_test'].max())} × {int(finite['n_draws'].max())} draws")
            rows.append(cells)
        if table1 is not None:
            cells = [name, f"ours, {recipe}PTR, Lap(Δp·R/ε), ℓ∞→ℓ1 Δp from training points; (2ε, δ/2, R)"]
            n = "–"
            for e in cols:
                row = lookup(table1, obfuscator=name, epsilon=e)
                cells.append(_cell(row, "accuracy"))
                n = str(int(row["n_test"])) if row is not None else n
            rows.append([*cells, n])
        g = None if table1_global is None else table1_global[table1_global["obfuscator"] == name]
        if g is not None and not g.empty:
            cells = [name, f"ours, {recipe}certified global mechanism at total 2ε, Lap(G·R/(2ε)); (2ε, 0, R)"]
            for e in cols:
                row = None if math.isinf(e) else lookup(g, epsilon_total=2 * e)
                cells.append("–" if row is None else
                             f"{row['accuracy']:.3f} [{row['low']:.3f}, {row['high']:.3f}]")
            cells.append(f"{int(g['n_test'].max())} × {int(g['draws'].max())} draws")
            rows.append(cells)
    note = ("Accuracy; ± is a 95 % Hoeffding half-width over the n test images (per-image scores averaged "
            "over the noise draws; ⊥ under PTR scores a uniform guess), [lo, hi] a 95 % percentile "
            "bootstrap over images. Rows without PTR release every image. The authors' code rows follow "
            "github.com/tremblerz/posthoc_privacy@66a8d35 `experiment_automation.py:multi_eps` (Δp∞ = "
            "μ + 3σ of exact ℓ∞→ℓ∞ constants at 101 test points, `privacy_estimation.py:156–223`).")
    if any(n.endswith(PAPER_RECIPE_SUFFIX) for n in names):
        note += (" `<variant>-paper` is that variant trained with the paper's own recipe (App. E: α = 0.99, "
                 "Lap(σ = 0.01) noise regulariser, λ = 1, margin 25), beside our release-aware N; the "
                 "paper's row above it applies to both.")
    if any(n.endswith(AUTHORS_RECIPE_SUFFIX) for n in names):
        note += (" `<variant>-authors` is that variant trained with the authors' code's settings "
                 "(66a8d35: their α, λ on a contrastive term that never reaches f, widths, lr 1e-4, 500 "
                 "epochs; privcore.train.authors), the epoch chosen on the validation split, not on test.")
    note += "\n\n"
    return note + table(header, rows)


def _n_note(frame: Any, column: str, what: str) -> str:
    """A line stating the sample sizes and what ± means (Hoeffding, 95 %)."""
    if column not in frame:
        return ""
    sizes = sorted({int(v) for v in frame[column].dropna()})
    shown = ", ".join(map(str, sizes)) if len(sizes) <= 4 else f"{sizes[0]}–{sizes[-1]}"
    return (f"n = {shown} {what}; ± is the half-width of a 95 % interval (Hoeffding, for a mean of per-image "
            "scores in [0, 1], ⊥ scoring a uniform guess).\n\n")


def render_table1_global(frame: Any, table1: Any) -> str:
    """Per obfuscator, at each total ε of a sent release: the certified global mechanism's accuracy
    [95 % bootstrap interval] ((ε, 0, R), every image released) beside PTR's at ε/2 ± Hoeffding
    [release rate] ((ε, δ/2, R), ``table1``), with G, Δp and the noise ratio G/(2Δp)."""
    totals = sorted(frame["epsilon_total"].unique())
    header = ["obfuscator", "G", "Δp", "G/(2Δp)"] + [f"total ε = {e:g}: global · PTR" for e in totals]
    rows = []
    for name in _order(frame["obfuscator"]):
        first = lookup(frame, obfuscator=name)
        cells = [name, fmt(first["global_lipschitz"], 4), fmt(first["delta_p"], 4),
                 fmt(first["noise_ratio_vs_ptr"], 3)]
        for e in totals:
            g = lookup(frame, obfuscator=name, epsilon_total=e)
            ours = "–" if g is None else f"{g['accuracy']:.3f} [{g['low']:.3f}, {g['high']:.3f}]"
            p = None if table1 is None else lookup(table1, obfuscator=name, epsilon=e / 2)
            theirs = "–" if p is None else (f"{p['accuracy']:.3f} ±{hoeffding_halfwidth(p['n_test']):.3f} "
                                            f"[{p['release_rate']:.0%}]")
            cells.append(f"{ours} · {theirs}")
        rows.append(cells)
    n = int(frame["n_test"].max()) if len(frame) else 0
    draws = int(frame["draws"].max()) if len(frame) else 0
    delta = "" if table1 is None or "delta" not in table1 else f", δ = {table1['delta'].dropna().max():g}"
    note = (f"n = {n} test images per cell. Global: every image released, {draws} noise draws each, "
            "[95 % percentile bootstrap over images]; guarantee (ε, 0, R). PTR at ε/2 (table1"
            f"{delta}): ± is a 95 % Hoeffding half-width, [release rate]; guarantee (ε, δ/2, R), ⊥ "
            "scored as a uniform guess.\n\n")
    return note + table(header, rows)


def render_mechanisms(frame: Any) -> str:
    """The never-⊥ posthoc mechanisms at equal total (ε, δ): per split, mechanism and total ε the accuracy
    [95 % bootstrap interval] and the effective noise scale; the validation choice per ε marked ★."""
    from privcore.experiments.mechanisms import chosen

    pick = chosen(frame)
    totals = sorted(frame["epsilon_total"].unique())
    header = ["split", "mechanism", "δ"] + [f"total ε = {e:g}" for e in totals]
    rows = []
    for split in ("validation", "test"):
        part = frame[frame["split"] == split]
        for name in sorted(part["mechanism"].unique(), key=lambda m: (m != "Global", m)):
            first = lookup(part, mechanism=name)
            cells = [split, name, f"{first['delta']:g}"]
            for e in totals:
                r = lookup(part, mechanism=name, epsilon_total=e)
                star = " ★" if pick.get(float(e)) == name else ""
                cells.append("–" if r is None else
                             f"{r['accuracy']:.3f} [{r['low']:.3f}, {r['high']:.3f}] "
                             f"(s {r['noise_scale_effective']:.3g}){star}")
            rows.append(cells)
    n_val = int(frame.loc[frame["split"] == "validation", "n"].max()) if len(frame) else 0
    n_test = int(frame.loc[frame["split"] == "test", "n"].max()) if len(frame) else 0
    draws = int(frame["draws"].max()) if len(frame) else 0
    model = frame["model"].iloc[0] if len(frame) else ""
    note = (f"Model {model}; n = {n_val} validation and {n_test} test images, {draws} noise draws each; "
            "[95 % percentile bootstrap over images]; (s: the sampler's noise scale per coordinate, Laplace "
            "b or Gaussian σ). ★: the mechanism chosen on validation at that ε; test was read once, "
            "after.\n\n")
    return note + table(header, rows)


def render_attack_global(frame: Any) -> str:
    """Posthoc Tables 3–6 under the certified global mechanism: per total ε (∞: no noise) the scale-told
    attacker's SSIM, PSNR, ℓ1 and ℓ2, mean [95 % bootstrap interval over images], and the no-release
    baseline's as the last row."""
    metrics = (("ssim", 3), ("psnr", 2), ("l1", 4), ("l2", 4))
    header = ["total ε", "told b", "SSIM", "PSNR (dB)", "ℓ1", "ℓ2"]

    def cells(r: Any, prefix: str = "") -> list[str]:
        return [f"{r[prefix + m]:.{d}f} [{r[prefix + m + '_low']:.{d}f}, {r[prefix + m + '_high']:.{d}f}]"
                for m, d in metrics]

    rows = []
    ordered = frame.assign(_e=frame["epsilon_total"].astype(float)).sort_values("_e")
    for _, r in ordered.iterrows():
        e = float(r["epsilon_total"])
        label = "∞ (no noise)" if math.isinf(e) else f"{e:g}"
        rows.append([label, fmt(float(r["told_scale"]), 4), *cells(r)])
    if len(frame):
        rows.append(["no release (training mean image)", "–", *cells(ordered.iloc[0], "baseline_")])
    first = ordered.iloc[0] if len(frame) else None
    note = ("" if first is None else
            f"Model {first['model']} under {first['mechanism']} (R = {float(first['radius']):g}); n = "
            f"{int(ordered['n'].max())} {first['split']} images × {int(ordered['draws'].max())} noise draws "
            "(∞: one, no noise); mean [95 % percentile bootstrap over images]. The attacker is the model's "
            "scale-told attacker, told b = G·R/ε. ℓ1: mean absolute pixel error, ℓ2: mean squared pixel "
            "error; PSNR with data range 1.\n\n")
    return note + table(header, rows)


def render_table2(frame: Any, dataset: str) -> str:
    """Table 2: method × ε ∈ {1, 2, 5, 7, ∞}."""
    ref = paper.TABLE2.get(PAPER_DATASET.get(dataset, ""), {})
    header = ["method"] + [f"ε = {eps_label(e)}" for e in paper.TABLE2_EPSILONS]
    rows = []
    for method in ("LDP-Image", "LDP-Embedding", "Adversarial"):
        cells = [method]
        for k, e in enumerate(paper.TABLE2_EPSILONS):
            row = lookup(frame, method=method, epsilon=e)
            theirs = f" ({ref[method][k]:g})" if method in ref else ""
            ours = "–" if row is None else fmt(row["accuracy"])
            if row is not None and "n_test" in row:
                ours += f" ±{hoeffding_halfwidth(row['n_test']):.3f}"
            cells.append(ours + theirs)
        rows.append(cells)
    return _n_note(frame, "n_test", "test images per cell") + table(header, rows)


def render_attack(frame: Any, dataset: str, metric: str) -> str:
    """One of Tables 3–6: ε rows × R columns, ours (paper MNIST)."""
    ref = paper.TABLES_3_6[metric].get(PAPER_DATASET.get(dataset, ""), {})
    col = "psnr_paper" if metric == "psnr" else metric
    digits = 2 if metric == "psnr" else 4
    header = [metric.upper() if metric in ("ssim", "psnr") else f"ℓ{metric[1]}"]
    header += [f"R = {r:g}" for r in paper.TABLES_RADII]
    rows = []
    for e in (1.0, 2.0, 5.0, 10.0, math.inf):
        cells = [f"ε = {eps_label(e)}"]
        for k, r in enumerate(paper.TABLES_RADII):
            row = lookup(frame, radius=r, epsilon=e)
            theirs = f" ({ref[e][k]:g})" if e in ref else ""
            ours = "–" if row is None else fmt(row[col], digits)
            shift = float(row[col] - row[metric]) if row is not None else 0.0  # PSNR: the paper's offset
            if row is not None and f"{metric}_lo" in row and finite(row[f"{metric}_lo"]):
                lo, hi = row[f"{metric}_lo"] + shift, row[f"{metric}_hi"] + shift
                ours += f" [{fmt(lo, digits)}, {fmt(hi, digits)}] n={int(row['n_eval'])}"
            elif row is not None and f"{metric}_std" in row and "n_eval" in row:
                half = t_halfwidth(row[f"{metric}_std"], row["n_eval"])
                ours += f" ±{fmt(half, digits)} n={int(row['n_eval'])}"
            cells.append(ours + theirs)
        rows.append(cells)
    if f"{metric}_floor" in frame:
        cells = ["no release (training mean)"]
        for r in paper.TABLES_RADII:
            row = lookup(frame, radius=r, epsilon=math.inf)
            shift = float(row[col] - row[metric]) if row is not None else 0.0
            cells.append("–" if row is None else fmt(row[f"{metric}_floor"] + shift, digits))
        rows.append(cells)
    if f"{metric}_lo" in frame:
        note = ("n = released images the attacker reconstructed in that cell (⊥ gives it nothing); [lo, hi] "
                "is a 95 % percentile-bootstrap interval of the mean (2 000 resamples of those images; it "
                "covers the choice of images, not the one noise draw per image or the one seeded attacker). "
                "The last row is the floor: the training mean image as the guess, on all evaluated test "
                "images (each cell's floor on its own released images is `<metric>_floor` in the CSV).\n\n")
    elif "n_eval" in frame:
        note = ("n = released images the attacker reconstructed in that cell (⊥ gives it nothing); ± is the "
                "half-width of a 95 % Student-t interval from the cell's mean, standard deviation and n.\n\n")
    else:
        note = ""
    return note + table(header, rows)


def _shipped_obfuscators(dataset: str) -> list[str]:
    """The obfuscators ``dataset`` ships in the default models folder (the dashboard's choices)."""
    from privcore.models import list_models

    return [m.name.removeprefix("obfuscator-") for m in list_models()
            if m.dataset == dataset and m.kind == "obfuscator" and not m.study_only]


def _frontier_sections(res: Path, section: Any) -> None:
    """The low-ε frontier's tables, where the dataset has ``select-frontier.csv``/``attack-frontier.csv``."""
    import pandas as pd

    from privcore.experiments import report_frontier as rf

    def read(name: str) -> Any:
        return pd.read_csv(res / f"{name}.csv") if (res / f"{name}.csv").is_file() else None

    if (res / "select-frontier.csv").is_file():
        section("select-frontier", "The frontier on validation: low-ε obfuscators for the global mechanism",
                rf.render_frontier_validation)
        section("select-frontier", "The frontier on test: the selected obfuscator beside the ceiling",
                lambda f: rf.render_frontier_test(f, read("ceiling"), read("table1-global"),
                                                  read("select-global")))
        section("select-frontier", "The opening view: default model and opening ε on validation",
                lambda f: rf.render_opening_view(f, _shipped_obfuscators(res.name),
                                                 (default_model(res.name), OPENING_EPSILON)))
    if (res / "frontier-groupsort.csv").is_file():
        section("frontier-groupsort", "GroupSort obfuscators on validation beside the selection",
                lambda f: rf.render_groupsort(f, read("select-frontier")))
    if (res / "attack-frontier.csv").is_file():
        section("attack-frontier", "Reconstruction attack on global releases at equal total ε (SSIM · PSNR)",
                rf.render_attack_frontier)


def render_report(
    dataset: str,
    results_dir: Path = DEFAULT_RESULTS_DIR,
    *,
    only: set[str] | None = None,
    heading: bool = True,
) -> str:
    """Every available table for ``dataset`` as markdown (sections in the papers' order); ``only``
    restricts it to some experiments."""
    import pandas as pd

    res = Path(results_dir) / dataset
    parts = [f"## {dataset}\n"] if heading else []

    def section(name: str, title: str, body: Any, *, optional: bool = False) -> None:
        if only is not None and name not in only:
            return
        path = res / f"{name}.csv"
        if not path.is_file() and optional:  # a study run for one dataset only
            return
        if not path.is_file():
            parts.append(
                f"### {title}\n\n_not run yet_ (`python -m privcore experiment {name} --dataset {dataset}`)\n"
            )
            return
        frame = pd.read_csv(path)
        parts.append(f"### {title}\n\nProduced by {_provenance(res, name)}.\n\n{body(frame)}\n")

    section(
        "table1",
        "Table 1 — accuracy under PTR, the pipeline's release classifier (ours [release rate] (paper))",
        lambda f: render_table1(f, dataset),
    )
    section(
        "table1",
        "Table 1 — same releases, classifier fine-tuned on training releases (ours [release rate] (paper))",
        lambda f: render_table1(f, dataset, "accuracy_refit"),
    )
    if only is None or "table1" in only:
        t1, cal = res / "table1.csv", res / "calibration.csv"
        if t1.is_file() or cal.is_file():
            tg = res / "table1-global.csv"
            body = render_table1_like_for_like(pd.read_csv(t1) if t1.is_file() else None,
                                               pd.read_csv(cal) if cal.is_file() else None,
                                               dataset, pd.read_csv(tg) if tg.is_file() else None)
            title = ("Table 1 like for like: the paper, ours under the authors' code, the printed formula, "
                     "PTR and the global mechanism")
            if not t1.is_file():
                body = ("PTR's rows are missing: `python -m privcore experiment table1 --dataset "
                        f"{dataset}` has not been run.\n\n{body}")
            parts.append(f"### {title}\n\n{body}\n")
    if only is None or "table1-global" in only:
        tg, t1 = res / "table1-global.csv", res / "table1.csv"
        title = "Table 1 at the same total guarantee: the certified global mechanism beside PTR"
        if tg.is_file():
            body = render_table1_global(pd.read_csv(tg), pd.read_csv(t1) if t1.is_file() else None)
            parts.append(f"### {title}\n\nProduced by {_provenance(res, 'table1-global')}.\n\n{body}\n")
        else:
            parts.append(f"### {title}\n\n_not run yet_ (`python -m privcore experiment table1-global "
                         f"--dataset {dataset}`)\n")
    _frontier_sections(res, section)
    section("table1-weights",
            "Table 1 at the authors' loss weights (α = 0.9, σ = 0.1): ours [release rate] (paper)",
            lambda f: render_table1(f, dataset))
    section("mechanisms", "The never-⊥ mechanisms at equal total (ε, δ = 1e-5): Global beside Global-Gauss",
            render_mechanisms)
    section("ceiling", "The ceiling of the global mechanism (accuracy on test)", render_ceiling)
    section("neighbours", "What R protects (shares of test images, 95 % intervals)", render_neighbours)
    section(
        "calibration",
        "Release noise under each calibration (no test, every image released; accuracy (Laplace scale b))",
        render_calibration,
    )
    section("table2", "Table 2 — LDP baselines (ours (paper))", lambda f: render_table2(f, dataset))
    for metric, num in (("ssim", 3), ("l1", 4), ("l2", 5), ("psnr", 6)):
        section(
            "attack",
            f"Table {num} — reconstruction attack, {metric} (ours (paper, MNIST))",
            lambda f, m=metric: render_attack(f, dataset, m),
        )
    section("attack-global", "Tables 3–6 under the certified global mechanism — the default model's "
            "scale-told attacker", render_attack_global)
    section("fig2", "Fig. 2 — local Lipschitz constant vs ARL weight", render_fig2)
    section("fig4", "Fig. 4 — exact certification time (s): LipMIP's fresh MILP (Gurobi) and our engine",
            render_fig4)
    section("fig4-dims", "Fig. 4 past paper size — input dimension 2–32: the engine and the portfolio beside "
            "LipMIP's MILP (Gurobi)", render_fig4_dims, optional=True)
    section("ip", "IP paper — ε × α grid (accuracy %, mean ± sd [95 % interval over images])", render_ip_grid)
    section("ip", "IP paper, Fig. 5 — Gauss-Output accuracy against ε per α (%, [95 % interval over images])",
            render_ip_fig5)
    section(
        "audit",
        "Empirical privacy audit",
        lambda f: render_simple(
            f, ["mechanism", "pair", "epsilon_claimed", "delta_claimed", "epsilon_lb", "passed", "n_releases"]
        ),
    )
    return "\n".join(parts)
