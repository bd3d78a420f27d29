"""A/B benchmarks' shared parts: the trees compared (:func:`ab_trees`) and the table of medians
(:func:`print_medians`).

Imported by ``bench/dashboard_browser.py`` and ``bench/live_readings.py`` (not a benchmark itself)."""

from __future__ import annotations

import shutil
import statistics
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def ab_trees(ref: str | None, root: Path, work: Path) -> Iterator[list[tuple[str, Path]]]:
    """``[("A=<rev>", a detached worktree of ref in work/ref), ("B=tree", root)]``, or ``[("tree", root)]``
    without ``ref``; at exit the worktree is removed and ``work`` deleted."""
    trees: list[tuple[str, Path]] = []
    try:
        if ref:
            rev = subprocess.run(["git", "rev-parse", "--short", ref], cwd=root, check=True,
                                 capture_output=True, text=True).stdout.strip()
            subprocess.run(["git", "worktree", "add", "--detach", str(work / "ref"), rev], cwd=root,
                           check=True, capture_output=True)
            trees.append((f"A={rev}", work / "ref"))
        trees.append(("B=tree" if ref else "tree", root))
        yield trees
    finally:
        if (work / "ref").exists():
            subprocess.run(["git", "worktree", "remove", "--force", str(work / "ref")], cwd=root,
                           capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


def print_medians(results: dict[str, dict[str, list[float]]], names: list[str], *, first: str,
                  width: int) -> None:
    """One row per figure in ``names``: its median in seconds under each tree of ``results`` (label →
    figure → timings, in the order A, B), B/A when there are two trees, and n per tree."""
    labels = list(results)
    head = "".join(f"{label + ' median':>18}" for label in labels)
    print(f"{first:<{width}}{head}{'B/A' if len(labels) == 2 else '':>8}{'n':>8}")
    for name in names:
        meds = [statistics.median(results[label][name]) if results[label].get(name) else float("nan")
                for label in labels]
        ns = "/".join(str(len(results[label].get(name, []))) for label in labels)
        row = "".join(f"{m:>16.3f} s" for m in meds)
        ratio = f"{meds[1] / meds[0]:8.2f}" if len(meds) == 2 and meds[0] > 0 else ""
        print(f"{name:<{width}}{row}{ratio:>8}{ns:>8}")
