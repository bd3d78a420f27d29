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


def test_every_number_of_the_tied_sections_is_generated_registered_or_a_constant() -> None:
    problems = dn.untied_numbers()
    assert not problems, "\n".join(problems)


def _planted(old: str, new: str) -> tuple[tuple[str, ...], int]:
    """docs/RESULTS.md with ``old`` replaced by ``new`` on the one line holding it, and that line."""
    lines = list(dn._lines(dn.RESULTS))
    (i,) = [i for i, text in enumerate(lines) if old in text]
    lines[i] = lines[i].replace(old, new)
    return tuple(lines), i + 1


def test_a_planted_stale_number_in_the_ceiling_prose_is_named() -> None:
    lines, lineno = _planted("The resume took 503 s", "The resume took 506 s")
    q = next(q for q in dn.QUOTES if q.line == "The resume took ")
    message = dn.check_quote(q, lines)
    assert message is not None and message.startswith(f"{dn.RESULTS}:{lineno}: quotes 506 where")
    assert "ceiling.json finished − resumed (s) is 503" in message


def test_a_planted_stale_cell_or_note_in_a_generated_table_is_named() -> None:
    row = "| shipped: N | — | 0.590 [0.583, 0.597] |"
    lines, lineno = _planted(row, row.replace("0.590 [", "0.600 ["))
    assert any(p.startswith(f"{dn.RESULTS}:{lineno} reads") for p in dn.check_report_tables(lines))
    note = "Noise-free (clean clip z, same MLP search): 0.819 [0.811, 0.826]."
    lines, _ = _planted(note, note.replace("0.819", "0.829"))
    assert any("lacks the generated line" in p and "0.819" in p for p in dn.check_report_tables(lines))


def test_a_planted_number_nobody_ties_is_named() -> None:
    old = "classes overlap in this embedding"
    lines, lineno = _planted(old, "classes overlap in 0.37 of this embedding")
    assert dn.untied_numbers(lines) == [f"{dn.RESULTS}:{lineno}: 0.37 is neither generated nor registered"]
