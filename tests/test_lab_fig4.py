"""Shavit & Gjura Fig. 4 in numbers: exact law summaries, and the baseline computed on the same records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privcore.lab.data import TruncatedGaussianMixture
from privcore.lab.experiments import fig4_tables
from privcore.lab.fig4 import fig4_aggregate, fig4_comparison, law_summary
from privcore.lab.mechanisms import expert_mechanism
from privcore.lab.store import load_mechanism

MODEL = Path(__file__).resolve().parents[1] / "models" / "lab" / "exponential-median-k10.json"


def test_law_summary_by_hand() -> None:
    support = np.array([0.0, 1.0, 2.0, 3.0])
    probs = np.array([0.1, 0.4, 0.4, 0.1])
    s = law_summary(support, probs, 1.6, np.array([0.5, 1.5, 2.5]), radius=0.5)
    assert (s["mode_low"], s["mode_high"]) == (1.0, 2.0)  # a flat top: both ends
    assert (s["mean"], s["skewness"]) == pytest.approx((1.5, 0.0))  # symmetric about 1.5
    assert s["sd"] == pytest.approx(np.sqrt(0.1 * 2.25 * 2 + 0.4 * 0.25 * 2))
    assert s["abs_error"] == pytest.approx(0.1 * 1.6 + 0.4 * 0.6 + 0.4 * 0.4 + 0.1 * 1.4)
    assert s["mass_within"] == pytest.approx(0.4)  # only r = 2 is within 0.5 of 1.6
    assert (s["mass_below"], s["mass_above"]) == pytest.approx((0.5, 0.5))
    # records strictly between 1.6 and r: r=0 → {0.5, 1.5}, r=1 → {1.5}, r=2 → {}, r=3 → {2.5}
    assert s["quantile_loss"] == pytest.approx(0.1 * 2 + 0.4 * 1 + 0.1 * 1)
    with pytest.raises(ValueError, match="probability"):
        law_summary(support, probs * 2, 1.6, np.array([1.0]))


def test_comparison_of_the_baseline_with_itself_is_identical() -> None:
    expert = expert_mechanism("median", epsilon=1.0)
    responses, datasets = fig4_tables(expert, n_datasets=3, seed=7)
    table = fig4_comparison(responses, datasets)
    assert len(table) == 6 and set(table["mechanism"]) == {"learned exponential", "quantile exponential"}
    cols = ["abs_error", "mass_within", "quantile_loss", "mode_low", "mode_high"]
    a = table[table.mechanism == "learned exponential"][cols].to_numpy()
    b = table[table.mechanism == "quantile exponential"][cols].to_numpy()
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="truth"):
        fig4_comparison(responses.assign(truth=responses.truth + 1.0), datasets)


def test_aggregate_matches_the_mechanisms_exact_quantile_loss() -> None:
    mech, _ = load_mechanism(MODEL)
    agg = fig4_aggregate(mech, n_datasets=40, components=2, seed=11)
    assert set(agg["n_datasets"]) == {40}
    assert np.all(agg.ci_low <= agg["mean"]) and np.all(agg["mean"] <= agg.ci_high)
    data = TruncatedGaussianMixture(n_components=2).sample(40, seed=11)
    m = agg.set_index(["mechanism", "statistic"])["mean"]
    learned, base = "learned exponential", "quantile exponential"
    assert m[learned, "quantile_loss"] == pytest.approx(mech.expected_loss(data, "quantile").mean())
    expert = expert_mechanism("median", epsilon=mech.epsilon)
    assert m[base, "quantile_loss"] == pytest.approx(expert.expected_loss(data, "quantile").mean())
    diff = m["learned − quantile (paired)", "abs_error"]
    assert diff == pytest.approx(m[learned, "abs_error"] - m[base, "abs_error"])
