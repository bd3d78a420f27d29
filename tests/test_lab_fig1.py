"""Shavit & Gjura Fig. 1: the optimal k-Lipschitz fit is optimal, the network is k-Lipschitz and no better."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import minimize

from privcore.lab.fig1 import MSE_COLUMNS, Fig1Config, fig1_tables, optimal_lipschitz_fit, t_interval


@pytest.mark.parametrize("seed", range(4))
def test_the_optimal_fit_is_feasible_and_beats_a_generic_solver(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 3, size=7))
    y = rng.normal(size=7)
    k = float(rng.uniform(0.2, 2.0))
    g = optimal_lipschitz_fit(x, y, k=k)
    assert np.all(np.abs(np.diff(g)) <= k * np.diff(x) * (1 + 1e-9) + 1e-12)
    cons = [{"type": "ineq", "fun": lambda v, i=i, s=s: k * (x[i + 1] - x[i]) - s * (v[i + 1] - v[i])}
            for i in range(6) for s in (1, -1)]
    ref = minimize(lambda v: np.sum((v - y) ** 2), np.full(7, y.mean()), constraints=cons, method="SLSQP",
                   options={"ftol": 1e-12, "maxiter": 500})
    assert np.sum((g - y) ** 2) <= ref.fun + 1e-7


def test_a_lipschitz_enough_fit_is_exact_and_bad_input_is_refused() -> None:
    x = np.linspace(0, 1, 9)
    np.testing.assert_allclose(optimal_lipschitz_fit(x, 3 * x, k=3.5), 3 * x, atol=1e-9)
    with pytest.raises(ValueError, match="k"):
        optimal_lipschitz_fit(x, x, k=0.0)
    with pytest.raises(ValueError, match="increasing"):
        optimal_lipschitz_fit(x[::-1], x, k=1.0)


def test_tiny_fig1_networks_are_k_lipschitz_and_never_beat_the_optimum() -> None:
    config = Fig1Config(ks=(1.0, 8.0), n_train=40, n_val=20, n_test=100, hidden=8, steps=30, seeds=3)
    summary, runs, curves = fig1_tables(config)
    assert list(summary["k"]) == [1.0, 8.0]
    assert len(runs) == 6 and sorted(set(runs["seed"])) == [0, 1, 2]
    assert (runs["network_bound"] <= runs["k"] * (1 + 1e-6)).all()
    assert (runs["network_slope_max"] <= runs["k"] * (1 + 1e-4)).all()
    assert (runs["network_mse_train"] >= runs["optimal_mse_train"] - 1e-9).all()
    assert (summary["network_bound_max"] <= summary["k"] * (1 + 1e-6)).all()
    # f is 6-Lipschitz: at k = 8 the optimal fit interpolates the training points
    assert summary.loc[1, "optimal_mse_train"] < 1e-12 < summary.loc[0, "optimal_mse_train"]
    # the seeds differ (initialisation), the data do not (the optimum is one value per k)
    assert runs.groupby("k")["network_mse_test"].nunique().min() == 3
    assert runs.groupby("k")["optimal_mse_test"].nunique().max() == 1
    assert (summary["n_seeds"] == 3).all()
    for col in MSE_COLUMNS:
        for k, grp in runs.groupby("k"):
            row = summary[summary["k"] == k].iloc[0]
            v = grp[col].to_numpy()
            lo, hi = stats.t.interval(0.95, len(v) - 1, loc=v.mean(), scale=stats.sem(v))
            np.testing.assert_allclose([row[col], row[f"{col}_sd"]], [v.mean(), v.std(ddof=1)], rtol=1e-12)
            np.testing.assert_allclose([row[f"{col}_ci_low"], row[f"{col}_ci_high"]], [lo, hi], rtol=1e-12)
    # curves: f, the optimal fit and the seed-0 network only
    assert set(curves["curve"]) == {"f", "network", "optimal"}
    assert len(curves[curves["curve"] == "network"]) == 2 * config.n_test


def test_t_interval_single_value_has_no_interval() -> None:
    mean, sd, lo, hi, n = t_interval([0.3])
    assert (mean, n) == (0.3, 1) and np.isnan([sd, lo, hi]).all()
    with pytest.raises(ValueError, match="seeds"):
        Fig1Config(seeds=0)
