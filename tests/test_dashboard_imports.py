"""Structure of the dashboard (issue 16, item 10): pages and privlens use only the public interface of
privcore's packages (``from privcore.lipschitz import …``, never ``privcore.lipschitz.engine``), and
privcore knows nothing of the dashboard (no privlens, no streamlit)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A submodule import that is deliberate: the warm-up thread imports the pattern tables' module in the
#: script's thread first, because importing the package from two threads at once deadlocked. (In
#: privlens/warmup.py since issue 33.)
#: The ledger's files follow the Lipschitz cache's rules for a private folder and its secret (0700,
#: 0600, owner checks), reused rather than copied: one implementation of security code.
ALLOWED = {
    ("privlens/warmup.py", "privcore.lipschitz.pattern_store"),
    ("privlens/ledger_store.py", "privcore.lipschitz.cache_files"),
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def _dashboard_files() -> list[Path]:
    return [
        ROOT / "app.py",
        *sorted((ROOT / "pages").glob("*.py")),
        *sorted((ROOT / "privlens").glob("*.py")),
    ]


def test_dashboard_imports_only_privcore_packages_public_interfaces() -> None:
    bad = []
    for path in _dashboard_files():
        rel = str(path.relative_to(ROOT))
        for module in _imports(path):
            parts = module.split(".")
            if parts[0] != "privcore" or len(parts) < 3:
                continue
            if (ROOT / "privcore" / parts[1] / "__init__.py").exists() and (rel, module) not in ALLOWED:
                bad.append(f"{rel}: {module}")
    assert not bad, bad


def test_privcore_does_not_know_the_dashboard() -> None:
    bad = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in sorted((ROOT / "privcore").rglob("*.py"))
        for module in _imports(path)
        if module.split(".")[0] in {"privlens", "streamlit"}
    ]
    assert not bad, bad
    assert not (ROOT / "privcore" / "session.py").exists()  # the view-model lives in privlens
