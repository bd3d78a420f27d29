"""The product states contracts and reasons, not the tracker's history: no issue numbers in the
library, the dashboard or the documents a reader is sent to."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: "issue 31", "Issues 30/31", "issue #6", "(#32)", "#33.1": a reference to the tracker
ISSUE_REF = re.compile(r"\bissues?\s*#?\d+|(?<![^\s(])#\d{1,3}\b", re.IGNORECASE)

#: TEMPORARY: files that others are rewriting in parallel, each with the lines still to clean.
#: This must be empty: remove an entry as soon as its file no longer refers to the tracker.
PENDING: dict[str, int] = {}


def _scanned() -> list[Path]:
    files = [p for d in ("privcore", "privlens", "pages") for p in (ROOT / d).rglob("*.py")]
    files += sorted((ROOT / "docs").glob("*.md"))
    files += [ROOT / "README.md", ROOT / "models" / "README.md", ROOT / "app.py"]
    return sorted(p for p in files if p.is_file())


def _hits(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(ROOT).as_posix()
    lines = enumerate(text.splitlines(), 1)
    return [f"{rel}:{n}: {line.strip()}" for n, line in lines if ISSUE_REF.search(line)]


def test_the_pattern_finds_issue_references() -> None:
    for text in ("(issue 31)", "Issues 30/31", "issue #6", "see #32", "(#33.1)", "ISSUE 17 item 2"):
        assert ISSUE_REF.search(text), text
    for text in ("color:#222", "&#39;", "issued", "tissue 3", "#ff00aa", "sha256:#"):
        assert not ISSUE_REF.search(text), text


def test_no_issue_references_in_the_product() -> None:
    hits: list[str] = []
    for path in _scanned():
        found = _hits(path)
        rel = path.relative_to(ROOT).as_posix()
        if rel in PENDING and len(found) <= PENDING[rel]:
            continue
        hits += found
    assert not hits, "issue references (state the contract or cite docs/ instead):\n" + "\n".join(hits)


def test_pending_lists_only_files_that_still_need_it() -> None:
    stale = [rel for rel in PENDING if not (ROOT / rel).is_file() or not _hits(ROOT / rel)]
    assert not stale, f"remove from PENDING (clean now): {stale}"
