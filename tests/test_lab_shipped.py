"""The shipped lab models and results: certified, verified, complete and self-consistent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privcore.lab.queries import QUERIES
from privcore.lab.store import list_cards, load_mechanism

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models" / "lab"
RESULTS = ROOT / "data" / "results" / "lab"


def test_every_shipped_model_is_certified_and_engine_verified() -> None:
    cards = list_cards(MODELS)
    kinds = {(c["kind"], c["query"]) for _, c in cards}
    assert kinds == {(m, q) for m in ("laplace", "exponential") for q in QUERIES}
    for path, card in cards:
        mech, _ = load_mechanism(path)  # hash + exact rational layer-product check ≤ k
        assert mech.certified_bound <= mech.k
        ver = card["verification"]
        assert ver is not None and ver["engine_passed"], path.name
        assert ver["engine_lower"] <= ver["engine_upper"] <= mech.k * (1 + 1e-6), path.name
        assert "python -m privcore lab" in card["command"]
    total = sum(p.stat().st_size for p in MODELS.iterdir())
    assert total < 2 * 1024 * 1024


def test_fig5_results_are_complete_and_consistent() -> None:
    runs = pd.read_csv(RESULTS / "fig5_runs.csv")
    learned = runs[runs.method == "learned"]
    counts = learned.groupby(["mechanism", "query", "k", "split"]).size()
    assert set(counts) == {5} and len(counts) == 2 * 4 * 7 * 2
    # An exact ERL of f(x) + Lap(kc/ε) under squared loss is never below the noise floor 2(kc/ε)².
    lap = learned[(learned.mechanism == "laplace") & (learned.loss == "squared")]
    floor = 2 * (lap.k * 10.0 / lap.epsilon) ** 2
    assert np.all(lap.erl >= floor * (1 - 1e-12))
    assert np.all(learned.certified_bound <= learned.k)
    expert_mean = runs[(runs.method == "expert") & (runs["query"] == "mean")].erl
    assert np.allclose(expert_mean, 2 * (10 / 100) ** 2)  # Lap(c/(nε)), ε = 1
    summary = pd.read_csv(RESULTS / "fig5_summary.csv")
    best = summary[summary.best_k.astype(bool)]
    assert len(best) == 2 * 4 * 2  # one k per (mechanism, query), on both splits
    rows = summary[summary.method == "learned"]
    assert (rows.runs == 5).all()
    assert np.all(rows.erl_ci_low <= rows.erl_mean) and np.all(rows.erl_mean <= rows.erl_ci_high)
    assert "--quick" not in (RESULTS / "fig5_command.txt").read_text()  # the full setting is shipped


@pytest.mark.parametrize("name", ["fig4_exponential-median-k10"])
def test_fig4_tables(name: str) -> None:
    resp = pd.read_csv(RESULTS / f"{name}_responses.csv")
    data = pd.read_csv(RESULTS / f"{name}_datasets.csv")
    assert np.allclose(resp.groupby("dataset").probability.sum(), 1.0)
    assert data.groupby("dataset").size().eq(100).all()
    med = data.groupby("dataset").value.median()
    assert np.allclose(resp.groupby("dataset").truth.first(), med)


def test_fig1_results_have_five_seeds_and_intervals() -> None:
    summary = pd.read_csv(RESULTS / "fig1_summary.csv")
    runs = pd.read_csv(RESULTS / "fig1_runs.csv")
    assert (summary.n_seeds >= 5).all() and len(runs) == summary.n_seeds.sum()
    assert not summary.command.str.contains("--quick").any()  # the full setting is shipped
    for col in ("network_mse_train", "network_mse_val", "network_mse_test"):
        assert np.all(summary[f"{col}_ci_low"] <= summary[col])
        assert np.all(summary[col] <= summary[f"{col}_ci_high"])
        np.testing.assert_allclose(summary[col], runs.groupby("k")[col].mean().to_numpy(), rtol=1e-12)
    assert np.all(summary.network_bound_max <= summary.k * (1 + 1e-6))


def test_fig4_summary_matches_the_fig4_tables() -> None:
    name = "fig4_exponential-median-k10"
    summary = pd.read_csv(RESULTS / f"{name}_summary.csv")
    resp = pd.read_csv(RESULTS / f"{name}_responses.csv")
    learned = summary[summary.mechanism == "learned exponential"].set_index("dataset")
    err = resp.assign(e=resp.probability * (resp.response - resp.truth).abs()).groupby("dataset").e.sum()
    np.testing.assert_allclose(learned.abs_error.sort_index(), err.sort_index(), rtol=1e-12)
    agg = pd.read_csv(RESULTS / f"{name}_aggregate.csv")
    assert (agg.n_datasets >= 100).all() and set(agg.components) == {2, 4}
