"""Structure rules of the library, read from the source: privcore's modules import each other without
a cycle (the Lipschitz engine's too), the engine never imports the mechanisms (function-level imports
included), privcore never imports Streamlit, and the dashboard never branches on a mechanism's name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def _module(path: Path) -> str:
    name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return name.removesuffix(".__init__")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}
    found: list[list[str]] = []

    def visit(u: str, path: list[str]) -> None:
        state[u] = 1
        path.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                found.append([*path[path.index(v):], v])
            elif v not in state:
                visit(v, path)
        path.pop()
        state[u] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return found


def test_the_lipschitz_engine_has_no_import_cycle() -> None:
    pkg = "privcore.lipschitz"
    files = {_module(p): p for p in (ROOT / "privcore" / "lipschitz").glob("*.py")}
    graph = {m: {d for d in _imports(p) if d in files and d != pkg} for m, p in files.items() if m != pkg}
    assert len(graph) >= 15
    assert _cycles(graph) == []
    assert _cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]  # the check itself finds one


def _module_imports(path: Path, files: dict[str, Path]) -> set[str]:
    """The modules of ``files`` that ``path`` imports, at any level: ``from pkg import sub`` is an
    import of ``pkg.sub`` when that is a module, and ``pkg.name`` otherwise of ``pkg``."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
            out.update(n if n in files else node.module for n in names)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    resolved = set()
    for name in out:
        while name and name not in files:
            name = name.rpartition(".")[0]
        if name:
            resolved.add(name)
    return resolved


def test_privcore_has_no_import_cycle() -> None:
    """No module of privcore imports, directly or through others, one that imports it back (the
    package root, which only re-exports, left out)."""
    files = {_module(p): p for p in (ROOT / "privcore").rglob("*.py")}
    graph = {m: _module_imports(p, files) - {m, "privcore"} for m, p in files.items() if m != "privcore"}
    assert len(graph) >= 100
    assert _cycles(graph) == []


def test_the_lipschitz_engine_never_imports_the_mechanisms(tmp_path: Path) -> None:
    """Mechanisms use the engine (φ, PTR), never the other way round: privcore.lipschitz has no
    import of privcore.mechanisms anywhere, module level or inside a function, nor a lazy export
    that names one."""
    pkg = ROOT / "privcore" / "lipschitz"
    offenders = {
        str(p.relative_to(ROOT)): sorted(d for d in _imports(p) if d == "privcore.mechanisms"
                                         or d.startswith("privcore.mechanisms."))
        for p in pkg.rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}
    import privcore.lipschitz as lipschitz

    assert "cached_phi" not in lipschitz.__all__
    probe = tmp_path / "probe.py"  # the check sees an import inside a function
    probe.write_text("def f():\n    from privcore.mechanisms.ptr import compute_phi\n", encoding="utf-8")
    assert _imports(probe) == {"privcore.mechanisms.ptr"}


def test_privcore_never_imports_streamlit() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "privcore").rglob("*.py")
        if any(name == "streamlit" or name.startswith("streamlit.") for name in _imports(p))
    ]
    assert offenders == []


#: privcore's packages from the bottom layer up: a module may import its own package and the packages
#: before it, never one after it (module-level and function-local imports alike). The root holds only
#: the foundation (errors, validation, ranges, defaults, file and memo helpers); privcore/__init__.py
#: (which re-exports the API lazily) and __main__.py (the entry point) are left out.
PACKAGE_ORDER = ("<root>", "data", "nets", "executors", "attacks", "lipschitz", "inputs", "models",
                 "mechanisms", "api", "train", "experiments", "lab", "cli")


def _package(module: str, packages: set[str]) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in packages else "<root>"


def test_packages_import_only_downwards_in_one_order() -> None:
    files = {_module(p): p for p in (ROOT / "privcore").rglob("*.py")}
    packages = {p.parent.name for p in (ROOT / "privcore").glob("*/__init__.py")}
    assert set(PACKAGE_ORDER) == packages | {"<root>"}, "a package is missing from PACKAGE_ORDER"
    rank = {name: i for i, name in enumerate(PACKAGE_ORDER)}
    upward = []
    for module, path in files.items():
        if module in ("privcore", "privcore.__main__"):
            continue
        here = _package(module, packages)
        for target in _module_imports(path, files) - {"privcore"}:
            there = _package(target, packages)
            if rank[there] > rank[here]:
                upward.append(f"{module} ({here}) imports {target} ({there})")
    assert upward == [], "\n".join(sorted(upward))


#: What dashboard code must not branch on: a mechanism's name (the registry key) or the old flags.
#: It reads the mechanism's own properties (family, needs_certificate, uses_delta, parameters) instead.
_MECHANISM_NAME_PATTERN = re.compile(r'is_ptr|is_global|"PTR"|"Global"|"Gauss-|"Lap-Output"')


def test_the_dashboard_never_names_a_mechanism_to_branch_on() -> None:
    """pages/, privlens/ and app.py hold no mechanism name as a string literal and no is_ptr/is_global:
    every mechanism reaches the pages through privlens.mechanism_view and the registry."""
    files = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")),
             *sorted((ROOT / "privlens").rglob("*.py"))]
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if _MECHANISM_NAME_PATTERN.search(line)
    ]
    assert len(files) > 20 and not hits, "\n".join(hits)
