"""The experiment results the dashboard reads: pure Python, no Streamlit, no privacy maths.

:func:`results_path`, :func:`load_results` — the experiment CSVs of ``data/results/README.md``
(``$PRIVLENS_RESULTS_DIR`` overrides the folder); :func:`experiment_command` — the command that writes
one; :func:`smallest_epsilon` — the smallest ε reaching a target accuracy on a measured trade-off curve.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from privcore._paths import results_dir
from privcore.validation import check_in_range

T = TypeVar("T")

__all__ = [
    "RESULTS_DIR",
    "EpsilonSolution",
    "experiment_command",
    "load_results",
    "results_path",
    "smallest_epsilon",
    "what_r_protects",
]

RESULTS_DIR = results_dir()


def results_path(dataset: str, name: str, *, root: Path | None = None) -> Path:
    """``<root>/<dataset>/<name>.csv``; root defaults to ``$PRIVLENS_RESULTS_DIR`` or ``data/results``
    (see ``data/results/README.md``)."""
    simple = re.fullmatch(r"[A-Za-z0-9_]+(-[A-Za-z0-9_]+)*", name)  # table1, table1-global
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", dataset) or not simple:
        raise ValueError(f"dataset and name must be simple identifiers, got {dataset!r}, {name!r}")
    env = os.environ.get("PRIVLENS_RESULTS_DIR")
    base = root if root is not None else (Path(env).expanduser() if env else RESULTS_DIR)
    return base / dataset / f"{name}.csv"


def load_results(dataset: str, name: str, *, root: Path | None = None) -> Any:
    """The experiment CSV as a pandas DataFrame, or None when it has not been produced (or is empty)."""
    import pandas as pd

    path = results_path(dataset, name, root=root)
    try:
        stat = path.stat()
    except OSError:
        return None
    if not path.is_file():
        return None
    version = (stat.st_mtime_ns, stat.st_size)
    cached = _PARSED.get(str(path))
    if cached is None or cached[0] != version:
        try:
            df = pd.read_csv(path)
        except (OSError, ValueError, pd.errors.ParserError):
            return None
        cached = _PARSED[str(path)] = (version, None if df.empty else df)
    return None if cached[1] is None else cached[1].copy()  # a copy: callers may change theirs


def reading(dataset: str, name: str, read: Callable[..., T], **kwargs: Hashable) -> T:
    """``read(load_results(dataset, name), **kwargs)`` (e.g. :func:`privlens.live.accuracy_at`), computed
    once per version of the CSV and arguments: a reading of public results, the same for every session,
    that every ε or δ step would otherwise recompute."""
    path = results_path(dataset, name)
    try:
        stat = path.stat()
        version: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
    except OSError:
        version = None
    key = (str(path), version, read, tuple(sorted(kwargs.items())))
    if key not in _READINGS:
        value = read(load_results(dataset, name), **kwargs)
        while len(_READINGS) >= 4096:
            _READINGS.pop(next(iter(_READINGS)))
        _READINGS[key] = value
    return _READINGS[key]


_READINGS: dict[tuple, Any] = {}

#: Parsed CSVs by path: (mtime_ns, size) and the frame (public experiment results, the same for
#: every session: parsed once per version of the file, not on every rerun).
_PARSED: dict[str, tuple[tuple[int, int], Any]] = {}


def experiment_command(name: str, dataset: str, *, quick: bool = True) -> str:
    """The command that writes ``data/results/<dataset>/<name>.csv``."""
    command = f".venv/bin/python -m privcore experiment {name} --dataset {dataset}"
    return command + (" --quick" if quick else "")


@dataclass(frozen=True, kw_only=True)
class EpsilonSolution:
    """Smallest ε reaching a target accuracy on a measured curve.

    ``measured``: smallest measured ε whose accuracy reaches the target (None if none does);
    ``interpolated``: linear interpolation in log ε between it and the measured point before it
    (an estimate, not a measurement: it has no interval and no n; None when there is no bracket);
    ``reachable`` False when no finite measured ε reaches the target.
    """

    target: float
    measured: float | None
    interpolated: float | None
    reachable: bool
    note: str


def _said(accuracy: float, low: Any, high: Any, n: Any) -> str:
    """"0.767 [0.72, 0.81], n = 360": a measured accuracy with its interval and n where known."""
    text = f"{accuracy:.3g}"
    if low is not None and high is not None and math.isfinite(float(low)) and math.isfinite(float(high)):
        text += f" [{float(low):.3g}, {float(high):.3g}]"
    return text + ("" if n is None or n != n else f", n = {int(n)}")


def smallest_epsilon(
    epsilons: Sequence[float], accuracies: Sequence[float], *, target: float,
    lows: Sequence[Any] | None = None, highs: Sequence[Any] | None = None, ns: Sequence[Any] | None = None,
) -> EpsilonSolution:
    """Smallest ε whose measured accuracy reaches ``target`` (finite ε only; said with its 95 % interval
    ``lows``/``highs`` and ``ns`` where given), plus a log-ε interpolation labelled as such."""
    tgt = check_in_range("target", target, 0.0, 1.0, low_open=False, high_open=False)
    k = len(epsilons)
    extra = [list(v) if v is not None else [None] * k for v in (lows, highs, ns)]
    pts = sorted(
        (float(e), float(a), lo, hi, n)
        for e, a, lo, hi, n in zip(epsilons, accuracies, *extra, strict=True)
        if math.isfinite(float(e)) and float(e) > 0 and math.isfinite(float(a))
    )
    for i, (e, a, lo, hi, n) in enumerate(pts):
        if a >= tgt:
            interp = None
            if i > 0:
                e0, a0 = pts[i - 1][:2]
                if a > a0:
                    t = (tgt - a0) / (a - a0)
                    interp = float(math.exp(math.log(e0) + t * (math.log(e) - math.log(e0))))
            note = f"ε = {e:g} is the smallest measured ε with accuracy ≥ {tgt:.3g} ({_said(a, lo, hi, n)})."
            if interp is not None:
                note += (f" Interpolated in log ε between measured points: ε ≈ {interp:.3g} "
                         "(interpolated: an estimate, no interval, no n).")
            return EpsilonSolution(target=tgt, measured=e, interpolated=interp, reachable=True, note=note)
    best = max((a for _, a, *_ in pts), default=float("nan"))
    return EpsilonSolution(
        target=tgt,
        measured=None,
        interpolated=None,
        reachable=False,
        note=f"No measured ε reaches accuracy {tgt:.3g} (best measured: {best:.3g}).",
    )


@dataclass(frozen=True)
class Protection:
    """What R protects for one embedder, from ``neighbours.csv``: ``lines`` (sentences with n and 95 %
    intervals) and ``table`` (the CSV's rows for that embedder, for display)."""

    lines: tuple[str, ...]
    table: Any


def what_r_protects(frame: Any, embedder_sha256: str) -> Protection | None:
    """The ``neighbours`` experiment's shares for the embedder with weights ``embedder_sha256`` as
    sentences (None when the CSV has no row for it)."""
    if frame is None or "embedder_sha256" not in frame:
        return None
    rows = frame[frame["embedder_sha256"] == embedder_sha256]
    if rows.empty:
        return None
    by = {str(r["quantity"]): r for _, r in rows.iterrows()}
    first = rows.iloc[0]
    r, n_ref = float(first["radius"]), int(first["n_reference"])

    def share(q: str) -> str:
        x = by[q]
        return (f"{100 * x['value']:.1f} % [{100 * x['low']:.1f}, {100 * x['high']:.1f}] "
                f"({int(x['k'])} of {int(x['n'])} test images)")

    lines = []
    if "other_class_within_r" in by:
        lines.append(f"Another class within R = {r:g}: {share('other_class_within_r')} have a training image "
                     f"of another class within ℓ∞ distance R of their embedding (among {n_ref} training "
                     "images); only for these does the guarantee reach across a class boundary.")
    if "nearest_within_r_same_class" in by:
        lines.append(f"Same class within R: for {share('nearest_within_r_same_class')} the nearest training "
                     "image lies within R and shows the same class: what the guarantee hides for them is how "
                     "the image is drawn, not which class it shows.")
    if "median_other_class_distance_over_r" in by:
        m = by["median_other_class_distance_over_r"]
        lines.append(f"The median test image's nearest other-class training image is {m['value']:.2f} R away "
                     f"[{m['low']:.2f}, {m['high']:.2f}] (n = {int(m['n'])}).")
    table = rows[["quantity", "value", "low", "high", "k", "n"]].reset_index(drop=True)
    return Protection(lines=tuple(lines), table=table)
