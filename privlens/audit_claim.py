"""The claim beside the evidence: the privacy audit's empirical ε lower bound next to the stated ε.

Pure Python, no Streamlit. The ``audit`` experiment (:mod:`privcore.experiments.audit`,
``data/results/<dataset>/audit.csv``) draws many releases of a pair of neighbouring inputs and bounds ε
from below with a threshold test at 95 % confidence: a mechanism that keeps its claim shows a bound above
it with probability at most 5 % (the false-alarm rate). :func:`evidence` finds, for a mechanism at the
sidebar's total ε, the audited row at that ε or else the nearest one in log ε (labelled so), for each kind
of pair: the worst-case pair (a synthetic pair the proof treats as worst, the calibration every model of
the dataset shares) and the model pair (a real test input and its most-moved neighbour through one shipped
model, :data:`privcore.experiments.AUDIT_MODELS`). Controls (deliberately mis-calibrated) are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from privlens.results import experiment_command, load_results

__all__ = ["AuditRow", "Evidence", "evidence"]

#: what each kind of pair is, in words
PAIRS = {
    "worst-case": "worst-case pair (synthetic inputs at the distance the proof covers: the calibration "
                  "every model of the dataset shares)",
    "model": "model pair (a real test input and its most-moved neighbour, through the shipped model {model})",
}


@dataclass(frozen=True, kw_only=True)
class AuditRow:
    """One audited claim: the ``pair`` kind, the stated total ``epsilon`` and ``delta``, the pair's
    ``distance``, ``n`` releases per input, the 95 % lower bound ``bound``, the ``confidence``, whether the
    row is at the sidebar's ε (``exact``), and the ``model`` a model pair ran through."""

    pair: str
    epsilon: float
    delta: float
    distance: float
    n: int
    bound: float
    confidence: float
    exact: bool
    model: str = ""
    #: the δ of the setting on screen, where the caller gives one: a row at another δ says so
    setting_delta: float | None = None

    @property
    def false_alarm(self) -> float:
        """P[bound > ε] for a mechanism that keeps its claim: 1 − confidence."""
        return 1.0 - self.confidence

    @property
    def refutes(self) -> bool:
        """Whether the bound lies above the stated ε (the claim is refuted at this confidence)."""
        return self.bound > self.epsilon

    @property
    def where(self) -> str:
        """Whether the row is at the sidebar's ε (else the nearest audited one) and its δ, in words."""
        where = "at this ε" if self.exact else f"nearest audited setting, stated ε = {self.epsilon:g}"
        other = self.setting_delta is not None and not math.isclose(self.delta, self.setting_delta,
                                                                    rel_tol=1e-9, abs_tol=1e-300)
        note = f", not this setting's δ = {self.setting_delta:g}" if other else ""
        return f"{where}, δ = {self.delta:g}{note}"

    @property
    def verdict(self) -> str:
        """Above the stated ε (refuted) or below it."""
        return ("**above the stated ε: the claim is refuted**" if self.refutes
                else f"below the stated ε = {self.epsilon:g}")

    def text(self) -> str:
        """The row in words, labelled as the nearest audited ε when it is not at the sidebar's."""
        pair = PAIRS.get(self.pair, self.pair).format(model=self.model)
        return (f"empirical ε ≥ **{self.bound:.3f}** ({self.where}), {self.verdict} — {pair} at "
                f"distance {self.distance:.3g}; threshold test on n = {self.n:,} releases of each input, "
                f"{self.confidence:.0%} one-sided (Clopper–Pearson), false-alarm rate ≤ "
                f"{self.false_alarm:.0%}")

    def short(self) -> str:
        """The row in one line for a narrow column: bound, where, verdict, pair kind, n, false-alarm rate."""
        return (f"{self.pair} pair: empirical ε ≥ **{self.bound:.3f}** ({self.where}), {self.verdict}; "
                f"n = {self.n:,}, false-alarm rate ≤ {self.false_alarm:.0%}")


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """The audit rows for a mechanism on a model (empty when none), and ``missing``: what has no row,
    in words, with the command that writes them."""

    rows: tuple[AuditRow, ...]
    missing: str


def _nearest(frame: Any, epsilon: float) -> Any:
    gaps = (frame["epsilon_claimed"].astype(float).map(math.log) - math.log(epsilon)).abs()
    return frame.loc[gaps.idxmin()]


def evidence(dataset: str, mechanism: str, *, epsilon: float, model: str,
             delta: float | None = None) -> Evidence:
    """The audit's evidence for ``mechanism`` at the total ``epsilon`` on ``dataset/model`` (module
    docstring): the worst-case row, and the model row where the audit ran through ``model``. ``delta``:
    the setting's δ, so that a row audited at another δ says so."""
    from privcore.experiments import AUDIT_MODELS

    frame = load_results(dataset, "audit")
    command = f"`{experiment_command('audit', dataset, quick=False)}`"
    if frame is None or "mechanism" not in frame:
        return Evidence(rows=(), missing=f"No audit was run on {dataset}: {command} writes it.")
    mine = frame[(frame["mechanism"] == mechanism) & ~frame["control"].astype(bool)]
    rows: list[AuditRow] = []
    notes: list[str] = []
    for pair in ("worst-case", "model"):
        audited = AUDIT_MODELS.get(mechanism, "") if pair == "model" else ""
        part = mine[mine["pair"] == pair]
        if pair == "model" and (part.empty or audited != model):
            if audited and audited != model:
                notes.append(f"the model pair was audited through {audited}, not through {model}")
            elif audited:
                notes.append(f"no model-pair audit through {model} on {dataset}")
            continue
        if part.empty:
            notes.append(f"no audit of {mechanism} on {dataset} ({command} writes it)")
            continue
        row = _nearest(part, epsilon)
        eps = float(row["epsilon_claimed"])
        rows.append(AuditRow(pair=pair, epsilon=eps, delta=float(row["delta_claimed"]),
                             distance=float(row["distance"]), n=int(row["n_releases"]),
                             bound=float(row["epsilon_lb"]), confidence=float(row["confidence"]),
                             exact=math.isclose(eps, epsilon, rel_tol=1e-9), model=audited,
                             setting_delta=delta))
    missing = "; ".join(notes)
    return Evidence(rows=tuple(rows), missing=(missing[:1].upper() + missing[1:] + ".") if missing else "")
