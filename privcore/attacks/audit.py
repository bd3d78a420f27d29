"""Empirical privacy audit: a statistically sound lower bound on ε from many releases of a pair.

Following Jagielski, Ullman & Oprea (2020, "Auditing differentially private machine learning")
and Nasr et al. (2021, "Adversary instantiation"): if a mechanism M is (ε, δ)-private for the
pair (a, b) — neighbours at distance R or α, or any pair for local DP — then *every* test that
tries to tell M(a) from M(b) has false-positive and false-negative rates with

    FPR + e^ε · FNR ≥ 1 − δ   and   FNR + e^ε · FPR ≥ 1 − δ          (Kairouz et al. 2015, Thm 2.1)

so ε ≥ ln((1 − δ − FPR) / FNR) and ε ≥ ln((1 − δ − FNR) / FPR). We draw n releases from each of
M(a) and M(b), reduce each release to a score (a projection or a log-likelihood ratio; ⊥ maps to
−∞), and use threshold tests "score > t". Soundness at confidence 1 − β:

* the threshold is chosen on one half of the samples and evaluated on the other half, so the
  choice does not bias the evaluation;
* FPR and FNR on the evaluation half are replaced by one-sided Clopper–Pearson upper bounds at
  level β/2 each (Bonferroni), so with probability ≥ 1 − β both are upper bounds at once and
  then both inequalities above give valid lower bounds (they decrease in FPR and FNR).

Hence P[ε_lb > ε] ≤ β for a mechanism that really is (ε, δ)-private on that pair: an audit
whose ``epsilon_lb`` exceeds the claimed ε refutes the claim at confidence 1 − β. It can never
prove privacy: a small ``epsilon_lb`` only says this test family found no leak.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import beta as beta_dist

from privcore.validation import check_finite_array, check_in_range, check_int

__all__ = [
    "AuditResult",
    "audit_pair",
    "clopper_pearson_upper",
    "epsilon_lower_bound",
    "laplace_llr_statistic",
    "projection_statistic",
]

BOTTOM_SCORE = -math.inf


def clopper_pearson_upper(successes: Any, trials: int, beta: float) -> np.ndarray:
    """One-sided Clopper–Pearson upper confidence bound at level 1 − β on a binomial proportion.

    The exact bound (Clopper & Pearson 1934): the p with P[Bin(n, p) ≤ k] = β, i.e. the
    (1 − β) quantile of Beta(k + 1, n − k); 1 when k = n. Vectorised over ``successes``.
    """
    n = check_int("trials", trials, minimum=1)
    b = check_in_range("beta", beta, 0.0, 1.0)
    k = np.asarray(successes, dtype=np.float64)
    if np.any((k < 0) | (k > n) | (k != np.floor(k))):
        raise ValueError(f"successes must be integers in [0, {n}]")
    out = np.ones_like(k)
    inside = k < n
    out[inside] = beta_dist.ppf(1.0 - b, k[inside] + 1.0, n - k[inside])
    return out


def _eps_from_rates(fpr: np.ndarray, fnr: np.ndarray, delta: float) -> np.ndarray:
    """max(ln((1−δ−FPR)/FNR), ln((1−δ−FNR)/FPR)), 0 where neither is positive (Kairouz et al. 2015)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        one = np.log(np.maximum(1.0 - delta - fpr, 0.0) / fnr)
        two = np.log(np.maximum(1.0 - delta - fnr, 0.0) / fpr)
    best = np.fmax(np.nan_to_num(one, nan=-np.inf), np.nan_to_num(two, nan=-np.inf))
    return np.maximum(best, 0.0)


def _rates(
    scores_a: np.ndarray, scores_b: np.ndarray, thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Counts of false positives (a-scores > t) and false negatives (b-scores ≤ t) per threshold."""
    sa, sb = np.sort(scores_a), np.sort(scores_b)
    fp = sa.size - np.searchsorted(sa, thresholds, side="right")
    fn = np.searchsorted(sb, thresholds, side="right")
    return fp.astype(np.float64), fn.astype(np.float64)


@dataclass(frozen=True, kw_only=True)
class AuditResult:
    """Outcome of one audit (module docstring): the lower bound and the test that produced it.

    ``epsilon_lb`` holds at confidence ``confidence``; ``epsilon_lb_point`` is the same formula on
    the raw evaluation rates (no interval; optimistic, for display). ``fpr``/``fnr`` are those raw
    rates of the test "score > threshold" on the evaluation half (``n_eval`` samples per side).
    """

    epsilon_lb: float
    epsilon_lb_point: float
    threshold: float
    fpr: float
    fnr: float
    delta: float
    confidence: float
    n_releases: int
    n_eval: int

    def passes(self, epsilon: float) -> bool:
        """True when the audit does not refute an ε claim (``epsilon_lb ≤ epsilon``)."""
        return self.epsilon_lb <= epsilon

    def as_row(self) -> dict[str, float | int]:
        """Plain dict for a results table."""
        return {
            "epsilon_lb": self.epsilon_lb,
            "epsilon_lb_point": self.epsilon_lb_point,
            "threshold": self.threshold,
            "fpr": self.fpr,
            "fnr": self.fnr,
            "confidence": self.confidence,
            "n_releases": self.n_releases,
        }


def epsilon_lower_bound(
    scores_a: Any,
    scores_b: Any,
    *,
    delta: float = 0.0,
    confidence: float = 0.95,
    n_thresholds: int = 512,
) -> AuditResult:
    """A (1 − β)-confidence lower bound on ε from scores of releases of M(a) and M(b) (module docstring).

    Scores may be ±∞ (use −∞ for ⊥); NaN is refused. The first half of each array selects the
    threshold (maximising the Clopper–Pearson bound there), the second half evaluates it.
    """
    dlt = check_in_range("delta", delta, 0.0, 1.0, low_open=False)
    conf = check_in_range("confidence", confidence, 0.0, 1.0)
    n_thr = check_int("n_thresholds", n_thresholds, minimum=1)
    a = np.asarray(scores_a, dtype=np.float64).ravel()
    b = np.asarray(scores_b, dtype=np.float64).ravel()
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("scores must not be NaN (map ⊥ to -inf)")
    if a.size < 4 or b.size < 4:
        raise ValueError(f"need at least 4 scores per side, got {a.size} and {b.size}")
    beta = (1.0 - conf) / 2.0
    ha, hb = a.size // 2, b.size // 2
    sel_a, eval_a, sel_b, eval_b = a[:ha], a[ha:], b[:hb], b[hb:]

    pooled = np.unique(np.concatenate([sel_a, sel_b]))
    if pooled.size > n_thr:
        pooled = np.unique(pooled[np.linspace(0, pooled.size - 1, n_thr).round().astype(int)])
    fp, fn = _rates(sel_a, sel_b, pooled)
    sel_eps = _eps_from_rates(
        clopper_pearson_upper(fp, sel_a.size, beta), clopper_pearson_upper(fn, sel_b.size, beta), dlt
    )
    t = float(pooled[int(np.argmax(sel_eps))])

    fp_e, fn_e = _rates(eval_a, eval_b, np.array([t]))
    fpr_up = clopper_pearson_upper(fp_e, eval_a.size, beta)
    fnr_up = clopper_pearson_upper(fn_e, eval_b.size, beta)
    fpr, fnr = fp_e / eval_a.size, fn_e / eval_b.size
    return AuditResult(
        epsilon_lb=float(_eps_from_rates(fpr_up, fnr_up, dlt)[0]),
        epsilon_lb_point=float(_eps_from_rates(fpr, fnr, dlt)[0]),
        threshold=t,
        fpr=float(fpr[0]),
        fnr=float(fnr[0]),
        delta=dlt,
        confidence=conf,
        n_releases=int(min(a.size, b.size)),
        n_eval=int(min(eval_a.size, eval_b.size)),
    )


def _rows(releases: Any) -> tuple[np.ndarray, np.ndarray]:
    """(n, k) float array of releases and a mask of ⊥ rows (rows that are all NaN)."""
    if hasattr(releases, "detach"):  # torch tensor
        releases = releases.detach().cpu().numpy()
    r = np.asarray(releases, dtype=np.float64)
    r = r.reshape(r.shape[0], -1)
    bottom = np.isnan(r).all(axis=1)
    if np.isnan(r[~bottom]).any() or np.isinf(r).any():
        raise ValueError("releases must be finite (a ⊥ release is a row of NaN)")
    return r, bottom


def projection_statistic(center_a: Any, center_b: Any) -> Callable[[Any], np.ndarray]:
    """Score = ⟨y − a, b − a⟩ / ‖b − a‖₂ (the likelihood-ratio test for Gaussian noise); ⊥ → −∞."""
    a = check_finite_array("center_a", center_a).ravel()
    b = check_finite_array("center_b", center_b).ravel()
    diff = b - a
    norm = float(np.linalg.norm(diff))
    if a.shape != b.shape or norm == 0.0:
        raise ValueError("center_a and center_b must have the same shape and differ")
    u = diff / norm

    def score(releases: Any) -> np.ndarray:
        r, bottom = _rows(releases)
        out = (np.nan_to_num(r) - a) @ u
        out[bottom] = BOTTOM_SCORE
        return out

    return score


def laplace_llr_statistic(center_a: Any, center_b: Any) -> Callable[[Any], np.ndarray]:
    """Score = Σ_i |y_i − a_i| − |y_i − b_i| (∝ the log-likelihood ratio for i.i.d. Laplace noise); ⊥ → −∞."""
    a = check_finite_array("center_a", center_a).ravel()
    b = check_finite_array("center_b", center_b).ravel()
    if a.shape != b.shape or np.array_equal(a, b):
        raise ValueError("center_a and center_b must have the same shape and differ")

    def score(releases: Any) -> np.ndarray:
        r, bottom = _rows(releases)
        r = np.nan_to_num(r)
        out = (np.abs(r - a) - np.abs(r - b)).sum(axis=1)
        out[bottom] = BOTTOM_SCORE
        return out

    return score


def audit_pair(
    release_a: Callable[[int, np.random.Generator], Any],
    release_b: Callable[[int, np.random.Generator], Any],
    *,
    statistic: Callable[[Any], np.ndarray],
    n_releases: int = 100_000,
    delta: float = 0.0,
    confidence: float = 0.95,
    seed: int = 0,
    chunk: int = 20_000,
) -> AuditResult:
    """Draw ``n_releases`` of M(a) and of M(b) (seeded), score them, and bound ε (module docstring).

    ``release_a(m, rng)`` returns m independent releases as an array whose first axis indexes
    them (a ⊥ is a row of NaN). Seeds make audits reproducible; they never touch real releases.
    """
    n = check_int("n_releases", n_releases, minimum=8)
    step = check_int("chunk", chunk, minimum=1)
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    parts: dict[str, list[np.ndarray]] = {"a": [], "b": []}
    for start in range(0, n, step):
        m = min(step, n - start)
        parts["a"].append(np.asarray(statistic(release_a(m, rng)), dtype=np.float64))
        parts["b"].append(np.asarray(statistic(release_b(m, rng)), dtype=np.float64))
    return epsilon_lower_bound(
        np.concatenate(parts["a"]), np.concatenate(parts["b"]), delta=delta, confidence=confidence
    )
