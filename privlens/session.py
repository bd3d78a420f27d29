"""The privlens dashboard's view-model: pure Python, no Streamlit, no privacy maths.

The dashboard's pages hold widgets and layout only; what they need beyond privcore's mechanisms,
accounting and Lipschitz engine lives here so it can be tested without a browser:

* :class:`Settings` and its URL form (from :mod:`privlens.settings`, re-exported here);
* :func:`outcome_summary`, :func:`plain_guarantee` — the outcome and the (2ε, δ/2, R) guarantee of
  Theorem 4.4 in plain words;
* :func:`ledger_of`, :func:`ledger_totals` — the session's releases composed per image and per
  neighbourhood relation, with the worst case (:mod:`privcore.accounting`);
* :func:`ptr_search_range` — R_max and tol for the bisection that do not depend on the current
  ε/δ (so one φ serves every slider position, docs/DESIGN.md);
* :func:`load_results`, :func:`experiment_command`, :func:`smallest_epsilon` — the experiment
  CSVs of ``data/results/README.md`` and reading the trade-off curves;
* :func:`list_samples` — the shipped sample images under ``data/samples``.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privcore._paths import results_dir
from privcore.api import RELEASE_FORMAT as _API_RELEASE_FORMAT
from privcore.mechanisms import ptr_search_range
from privcore.validation import (
    check_delta,
    check_epsilon,
    check_in_range,
    check_nonnegative,
    check_positive,
)
from privlens.settings import (
    ALPHA_GRID,
    CERTIFIER_CHOICES,
    DELTA_GRID,
    EPSILON_GRID,
    IP_MECHANISMS,
    MECHANISMS,
    PARAMS,
    RADIUS_GRID,
    QueryProblem,
    Settings,
    grid_with,
    md_code,
    md_literal,
    mechanism_label,
    settings_from_query,
)

__all__ = [
    "ALPHA_GRID",
    "CERTIFIER_CHOICES",
    "DELTA_GRID",
    "EPSILON_GRID",
    "IP_MECHANISMS",
    "LEDGER_EXPLANATION",
    "MECHANISMS",
    "PARAMS",
    "RADIUS_GRID",
    "RELEASE_FORMAT",
    "EpsilonSolution",
    "OutcomeText",
    "QueryProblem",
    "Sample",
    "Settings",
    "experiment_command",
    "grid_with",
    "image_digest",
    "latent_walk",
    "ledger_of",
    "ledger_totals",
    "list_samples",
    "load_results",
    "md_code",
    "md_literal",
    "mechanism_label",
    "outcome_summary",
    "plain_guarantee",
    "ptr_search_range",
    "rank_axes",
    "release_probability",
    "results_path",
    "settings_from_query",
    "smallest_epsilon",
    "tile_images",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES_DIR = REPO_ROOT / "data" / "samples"
RESULTS_DIR = results_dir()

RELEASE_FORMAT = _API_RELEASE_FORMAT  # privcore.api's: the dashboard's JSON is the API's


# ------------------------------------------------------------------------- PTR presentation


@dataclass(frozen=True, kw_only=True)
class OutcomeText:
    """What the Release page prints: a headline, one explanatory sentence and the test in numbers."""

    released: bool
    headline: str
    detail: str
    test: str


def outcome_summary(result: Any) -> OutcomeText:
    """Plain-words reading of a :class:`privcore.mechanisms.PTRResult` (posthoc Alg. 1)."""
    phi = float(result.phi)
    phi_hat = float(result.phi_noisy)
    thr = float(result.threshold)
    test = f"φ̂ = {phi_hat:.4g} {'>' if result.released else '≤'} threshold {thr:.4g} (φ = {phi:.4g})"
    if result.released:
        return OutcomeText(
            released=True,
            headline="Released",
            detail=(
                f"The noisy test passed: the output is the obfuscated vector plus Laplace noise of "
                f"scale {result.noise_scale_effective:.4g} per coordinate."
            ),
            test=test,
        )
    if phi == 0.0:
        why = (
            "φ = 0: the certified local Lipschitz constant of the obfuscator over the R-ball already exceeds "
            "Δp, so this image is too sensitive to be released at this R."
        )
    else:
        why = (
            "φ > 0 (the image is at least φ from any point whose R-neighbourhood breaks Δp) but the noisy "
            "test fell at or below the threshold ln(1/δ)·b; a larger ε or δ makes it pass more often."
        )
    return OutcomeText(released=False, headline="⊥ (nothing released)", detail=why, test=test)


def plain_guarantee(guarantee: Any) -> str:
    """The guarantee of a release as one sentence (posthoc Def. 1 / Thm 4.4; IP paper Def. 2)."""
    eps, dlt, r = float(guarantee.epsilon), float(guarantee.delta), float(guarantee.radius)
    if dlt >= 1.0:
        return f"No protection: δ = 1 (ε = {eps:.4g}); this statement holds for every mechanism."
    factor = math.exp(eps) if eps < 700 else math.inf
    if math.isinf(r):
        who = "Any other image"
    elif getattr(guarantee, "space", None) is not None and guarantee.space.value == "embedding":
        who = f"Any image whose embedding lies within ℓ∞ distance R = {r:.4g} of this one's"
    else:
        who = f"Any input within distance α = {r:.4g} of this one ({guarantee.metric})"
    return (
        f"{who} would have produced this output with almost the same probability: "
        f"ε = {eps:.4g}, δ = {dlt:.3g} (no outcome becomes more than e^ε ≈ {factor:.3g} times "
        f"more likely, except with probability δ)."
    )


def ledger_of(rows: Sequence[Mapping[str, Any]]) -> Any:
    """The :class:`~privcore.accounting.PrivacyLedger` of ledger rows (dicts with ``label`` and
    ``guarantee``), in order.

    A row kept in a browser session from before an upgrade may hold a guarantee of an older class;
    it is read again through its plain data (:meth:`Guarantee.from_dict` maps the metric texts the
    library wrote to their space and norm). Anything else is a ValueError naming the row: the
    totals would leave that release out, so none are given.
    """
    from privcore.accounting import PrivacyLedger
    from privcore.mechanisms import Guarantee

    ledger = PrivacyLedger()
    for n, row in enumerate(rows):
        g = row.get("guarantee")
        if not isinstance(g, Guarantee):
            try:
                g = Guarantee.from_dict(dict(g.to_dict()))
            except (AttributeError, TypeError, ValueError) as exc:
                raise ValueError(
                    f"release {n + 1} ({row.get('label', '?')!r}) holds a guarantee this version cannot "
                    f"read ({exc})"
                ) from None
        ledger = ledger.add(g, label=str(row.get("label") or f"release {n + 1}"))
    return ledger


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def ledger_totals(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The Accountant's table: per image (``image_key``, in order of first release), one row per
    neighbourhood relation (:meth:`PrivacyLedger.totals_by_relation`) and a last one for the worst
    case (:meth:`PrivacyLedger.worst_case`), with the pairs and the releases that miss them in words.
    ValueError as :func:`ledger_of`."""
    out: list[dict[str, Any]] = []
    for key in dict.fromkeys(r["image_key"] for r in rows):
        mine = [r for r in rows if r["image_key"] == key]
        ledger = ledger_of(mine)
        totals = [("per relation", t) for t in ledger.totals_by_relation()]
        for kind, t in [*totals, ("worst case", ledger.worst_case())]:
            missing = [ledger.entries[i].label for i in t.missing]
            out.append(
                {
                    "image": mine[0]["image"],
                    "total": kind,
                    "pairs": t.pairs(),
                    "releases counted": f"{len(t.covering)} of {len(ledger)}",
                    "total ε = Σεᵢ": t.epsilon,
                    "total δ = Σδᵢ": t.delta,
                    "releases that cover only some of these pairs": (
                        "none" if not missing else f"{_count(len(missing), 'release')}: " + "; ".join(missing)
                    ),
                }
            )
    return out


#: The Accountant's and the Inference-privacy page's explanation of :func:`ledger_totals`.
LEDGER_EXPLANATION = (
    "A release's guarantee covers the pairs of images within its radius, in its norm, in its space "
    "(pixels of the model input, or the embedding z for PTR). In one space a pair within ℓ1 distance α is "
    "also within ℓ2 and ℓ∞ distance α (‖·‖∞ ≤ ‖·‖₂ ≤ ‖·‖₁), so every ℓ1, ℓ2 or ℓ∞ release of radius ≥ α "
    "covers it; a pair within ℓ2 distance α may be further apart in ℓ1, so an ℓ1 release need not cover it. "
    "Each *per relation* row adds up (basic composition, IP paper Prop. 2) the releases that cover every "
    "pair of that relation; the releases that cover only some of those pairs cost those pairs their budget "
    "too. The *worst case* adds every release of the image: that is what a pair that is a neighbour under "
    "all of them loses (in one space, the pairs within ℓ1 distance of the smallest radius are such pairs). "
    "Spaces are not converted into one another: whether two images' embeddings lie within R says nothing "
    "certified about their pixel distance, nor the other way round, so pixel and embedding totals are "
    "listed apart. One pair of images can still be a neighbour in both (a small enough pixel change moves "
    "the embedding little), and then both budgets add: the worst case counts them together."
)


def release_probability(
    phi: float, *, epsilon: float, delta: float, radius: float, zeta: float = 0.0
) -> float:
    """P[PTR releases] for a given φ: P[φ + Lap(b) > ln(1/δ)·b], b = (R + ζ)/ε (posthoc Alg. 1).

    Continuous-Laplace reading of the test (the exact sampler's discrete noise and its slightly
    larger threshold differ by a relative ~1e-9); for a dashboard curve, never for calibration.
    """
    p = check_nonnegative("phi", phi)
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    b = (check_positive("radius", radius) + check_nonnegative("zeta", zeta)) / eps
    gap = (p - math.log(1.0 / dlt) * b) / b
    return 1.0 - 0.5 * math.exp(-gap) if gap >= 0 else 0.5 * math.exp(gap)


def latent_walk(z: Any, *, axes: Sequence[int], offsets: Sequence[float]) -> np.ndarray:
    """Points z + t·e_k for every axis k and offset t, shape (len(axes), len(offsets), d) (posthoc Fig. 3).

    With offsets in [−R, R] every point lies in the ℓ∞ ball B(z, R), the neighbourhood the
    guarantee protects; decode them to see what R means in pictures.
    """
    center = np.asarray(z, dtype=np.float64).reshape(-1)
    d = center.size
    ks = [int(k) for k in axes]
    if any(k < 0 or k >= d for k in ks):
        raise ValueError(f"axes must be in [0, {d - 1}], got {ks}")
    ts = np.asarray(offsets, dtype=np.float64)
    out = np.repeat(np.repeat(center[None, None, :], len(ks), axis=0), ts.size, axis=1)
    for i, k in enumerate(ks):
        out[i, :, k] += ts
    return out


def rank_axes(decode: Any, z: Any, *, radius: float, top: int) -> tuple[int, ...]:
    """The ``top`` latent axes along which the decoded picture changes most over [−R, R].

    ``decode`` maps a (n, d) array of latent points to images; the score of axis k is the mean
    absolute pixel difference between decode(z + R·e_k) and decode(z − R·e_k).
    """
    center = np.asarray(z, dtype=np.float64).reshape(-1)
    r = check_positive("radius", radius)
    d = center.size
    pts = latent_walk(center, axes=range(d), offsets=(-r, r)).reshape(2 * d, d)
    imgs = np.asarray(decode(pts), dtype=np.float64).reshape(d, 2, -1)
    score = np.abs(imgs[:, 1] - imgs[:, 0]).mean(axis=1)
    order = np.argsort(-score, kind="stable")
    return tuple(int(k) for k in order[: max(1, min(int(top), d))])


def tile_images(
    images: Any, *, pad: int = 1, pad_value: float = 1.0, highlight_col: int | None = None
) -> np.ndarray:
    """A (rows, cols, C, H, W) stack in [0, 1] as one RGB picture (3, H', W') with ``pad`` pixels
    between tiles; the tiles of ``highlight_col`` get a red frame (the centre of posthoc Fig. 3)."""
    arr = np.clip(np.asarray(images, dtype=np.float64), 0.0, 1.0)
    if arr.ndim != 5 or arr.shape[2] not in (1, 3):
        raise ValueError(f"images must have shape (rows, cols, 1 or 3, H, W), got {arr.shape}")
    rows, cols, ch, h, w = arr.shape
    if ch == 1:
        arr = np.repeat(arr, 3, axis=2)
    p = int(pad)
    out = np.full((rows * (h + p) + p, cols * (w + p) + p, 3), float(pad_value))
    for i in range(rows):
        for j in range(cols):
            top, left = p + i * (h + p), p + j * (w + p)
            out[top : top + h, left : left + w] = arr[i, j].transpose(1, 2, 0)
            if highlight_col is not None and j == highlight_col and p > 0:
                red = np.array([0.85, 0.1, 0.1])
                out[top - p : top, left - p : left + w + p] = red
                out[top + h : top + h + p, left - p : left + w + p] = red
                out[top - p : top + h + p, left - p : left] = red
                out[top - p : top + h + p, left + w : left + w + p] = red
    return out.transpose(2, 0, 1)


def image_digest(image: Any) -> str:
    """SHA-256 of an image tensor's shape, dtype and bytes: a session-local key, never released."""
    arr = image.detach().cpu().numpy() if hasattr(image, "detach") else np.asarray(image)
    arr = np.ascontiguousarray(arr)
    h = hashlib.sha256(f"{arr.shape}|{arr.dtype}".encode())
    h.update(arr.tobytes())
    return h.hexdigest()


# -------------------------------------------------------------------------------- experiments


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
    if not path.is_file():
        return None
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError):
        return None
    return None if df.empty else df


def experiment_command(name: str, dataset: str, *, quick: bool = True) -> str:
    """The command that writes ``data/results/<dataset>/<name>.csv``."""
    command = f".venv/bin/python -m privcore experiment {name} --dataset {dataset}"
    return command + (" --quick" if quick else "")


@dataclass(frozen=True, kw_only=True)
class EpsilonSolution:
    """Smallest ε reaching a target accuracy on a measured curve.

    ``measured``: smallest measured ε whose accuracy reaches the target (None if none does);
    ``interpolated``: linear interpolation in log ε between it and the measured point before it
    (an estimate, not a measurement; None when there is no bracket); ``reachable`` False when
    no finite measured ε reaches the target.
    """

    target: float
    measured: float | None
    interpolated: float | None
    reachable: bool
    note: str


def smallest_epsilon(
    epsilons: Sequence[float], accuracies: Sequence[float], *, target: float
) -> EpsilonSolution:
    """Smallest ε whose measured accuracy reaches ``target`` (finite ε only), plus a log-ε interpolation."""
    tgt = check_in_range("target", target, 0.0, 1.0, low_open=False, high_open=False)
    pts = sorted(
        (float(e), float(a))
        for e, a in zip(epsilons, accuracies, strict=True)
        if math.isfinite(float(e)) and float(e) > 0 and math.isfinite(float(a))
    )
    for i, (e, a) in enumerate(pts):
        if a >= tgt:
            interp = None
            if i > 0:
                e0, a0 = pts[i - 1]
                if a > a0:
                    t = (tgt - a0) / (a - a0)
                    interp = float(math.exp(math.log(e0) + t * (math.log(e) - math.log(e0))))
            note = f"ε = {e:g} is the smallest measured ε with accuracy ≥ {tgt:.3g} ({a:.3g})."
            if interp is not None:
                note += f" Interpolating in log ε between measured points: ε ≈ {interp:.3g} (an estimate)."
            return EpsilonSolution(target=tgt, measured=e, interpolated=interp, reachable=True, note=note)
    best = max((a for _, a in pts), default=float("nan"))
    return EpsilonSolution(
        target=tgt,
        measured=None,
        interpolated=None,
        reachable=False,
        note=f"No measured ε reaches accuracy {tgt:.3g} (best measured: {best:.3g}).",
    )


# ----------------------------------------------------------------------------------- samples


@dataclass(frozen=True, kw_only=True)
class Sample:
    """A shipped sample image: file ``path``, display ``name`` and its test-set ``label``."""

    name: str
    label: str
    path: Path

    def data(self) -> bytes:
        """The PNG bytes."""
        return self.path.read_bytes()


def list_samples(dataset: str, *, root: Path | None = None) -> tuple[Sample, ...]:
    """Sample images of ``dataset`` (``data/samples/<dataset>/<label>-<index>.png``), sorted by name."""
    folder = (root or SAMPLES_DIR) / dataset
    if not folder.is_dir():
        return ()
    out = []
    for path in sorted(folder.glob("*.png")):
        label = path.stem.rpartition("-")[0]
        out.append(Sample(name=path.stem, label=label or path.stem, path=path))
    return tuple(out)
