"""Every number that README.md, docs/*.md and models/README.md quote from a committed result is that
result, rounded to the digits the document shows (the registry and the checker: tests/_docs_numbers.py).
Reads committed files only; no model runs."""

from __future__ import annotations

import pytest

from tests import _docs_numbers as dn


def test_every_registered_quote_is_its_committed_value() -> None:
    problems = dn.check_quotes()
    assert not problems, "documents disagree with the committed results:\n" + "\n".join(problems)


def test_results_md_holds_the_tables_the_report_renders_from_the_committed_csvs() -> None:
    problems = dn.check_report_tables()
    assert not problems, ("docs/RESULTS.md differs from `python -m privcore experiment report`:\n"
                          + "\n".join(problems))


def test_the_registry_covers_every_table_of_models_readme() -> None:
    """Each table of models/README.md has at least one registered row (a new table must be tied too)."""
    lines = dn._lines(dn.MODELS)
    tied = set()
    for q in dn.QUOTES:
        if q.doc == dn.MODELS and q.cell is not None:
            try:
                tied.add(dn.locate(q)[0])
            except LookupError:  # reported by the first test
                pass
    tables, start = [], None
    for i, text in enumerate((*lines, "")):
        if text.startswith("|") and start is None:
            start = i
        elif not text.startswith("|") and start is not None:
            tables.append(range(start + 3, i + 1))  # 1-based lines of the body (header, rule skipped)
            start = None
    untied = [f"{dn.MODELS}:{t.start - 2}" for t in tables if not tied & set(t)]
    assert not untied, f"tables with no registered quote: {untied}"


@pytest.mark.parametrize(("quoted", "value", "ok"), [
    ("0.452", 0.45228, True), ("0.45", 0.45228, True), ("0.462", 0.45228, False),
    ("98", 97.92, True), ("10 000", 10000.0, True), ("1 592", 2350.0, False), ("−23", -23.4, True),
])
def test_a_quote_agrees_when_it_is_the_value_rounded_to_its_digits(quoted: str, value: float,
                                                                   ok: bool) -> None:
    assert dn.agrees(quoted, value) is ok


def test_a_planted_wrong_number_is_named_with_its_line_and_both_values() -> None:
    q = next(q for q in dn.QUOTES
             if q.doc == dn.MODELS and q.line.startswith("| Fashion-MNIST ARL-C-N (") and q.cell == 1)
    lines = list(dn._lines(dn.MODELS))
    lineno, _ = dn.locate(q)
    cells = lines[lineno - 1].split("|")
    cells[2] = " 0.999 "  # the ε = 1 cell
    lines[lineno - 1] = "|".join(cells)
    message = dn.check_quote(q, tuple(lines))
    assert message is not None
    source = "data/results/fashion-mnist/table1.csv [obfuscator=ARL-C-N, epsilon=1.0] accuracy"
    assert message.startswith(f"{dn.MODELS}:{lineno}: quotes 0.999 where {source} is")
