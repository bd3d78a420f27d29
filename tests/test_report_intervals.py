"""The report's 95 % intervals: exact formulas, and coverage by simulation (fixed seed; the false-alarm
rate of each coverage check is below 1e-6 by a binomial tail bound)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privcore.experiments.report import hoeffding_halfwidth, t_halfwidth


def test_hoeffding_halfwidth_is_the_formula() -> None:
    assert hoeffding_halfwidth(360) == pytest.approx(math.sqrt(math.log(40) / 720))
    assert hoeffding_halfwidth(1000) == pytest.approx(0.04295, abs=1e-5)
    assert math.isinf(hoeffding_halfwidth(0))


def test_t_halfwidth_matches_scipy_from_the_population_sd() -> None:
    x = np.random.default_rng(0).normal(0.6, 0.1, size=30)
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert t_halfwidth(np.std(x), len(x)) == pytest.approx((hi - lo) / 2)
    assert math.isinf(t_halfwidth(0.1, 1))


def test_hoeffding_covers_accuracy_with_bottom_as_a_uniform_guess() -> None:
    """Per-image scores in {0, 1/10, 1} (wrong, ⊥, right): the interval misses the true mean in at most
    5 % of 4000 trials: above 270 misses has probability < 1e-6 at a 5 % miss rate (binomial tail)."""
    rng = np.random.default_rng(1)
    values, probs = np.array([0.0, 0.1, 1.0]), np.array([0.3, 0.3, 0.4])
    mean, n = float(values @ probs), 40
    means = rng.choice(values, p=probs, size=(4000, n)).mean(axis=1)
    misses = int(np.sum(np.abs(means - mean) > hoeffding_halfwidth(n)))
    assert misses <= 270


def test_t_interval_covers_a_bounded_metric_at_moderate_n() -> None:
    """SSIM-like values in [0, 1] (a beta law), n = 30: the t interval's miss rate stays near 5 %
    (≤ 280 of 4000 trials; above that has probability < 1e-7 if the true rate were 5 %)."""
    rng = np.random.default_rng(2)
    a, b, n = 6.0, 3.0, 30
    draws = rng.beta(a, b, size=(4000, n))
    half = np.array([t_halfwidth(np.std(d), n) for d in draws])
    misses = int(np.sum(np.abs(draws.mean(axis=1) - a / (a + b)) > half))
    assert misses <= 280


def test_like_for_like_table_puts_the_paper_the_authors_code_and_ours_side_by_side() -> None:
    import pandas as pd

    from privcore.experiments.report import render_table1_like_for_like

    inf = float("inf")
    t1 = pd.DataFrame({"obfuscator": "C", "epsilon": [inf, 1.0, 2.0, 5.0, 10.0], "accuracy": 0.5,
                       "n_test": 10000})
    cal = pd.DataFrame({"obfuscator": "C",
                        "calibration": ["paper-text"] * 4 + ["ours"] + ["authors-code"] * 5
                        + ["authors-code-release-clf"] * 5,
                        "epsilon": [1.0, 2.0, 5.0, 10.0, 1.0] + [1.0, 2.0, 5.0, 10.0, inf] * 2,
                        "accuracy_mean": [0.25] * 5 + [0.3] * 5 + [0.35] * 5,
                        "n_test": [1000] * 5 + [10000] * 10, "n_draws": [10] * 5 + [3, 3, 3, 3, 1] * 2})
    glob = pd.DataFrame({"obfuscator": "C", "epsilon_total": [2.0, 4.0, 10.0, 20.0], "accuracy": 0.6,
                         "low": 0.59, "high": 0.61, "n_test": 10000, "draws": 3})
    text = render_table1_like_for_like(t1, cal, "fashion-mnist", glob)
    lines = [ln for ln in text.splitlines() if ln.startswith("| C |")]
    assert len(lines) == 6
    # the paper's row is the authors' code, not PTR with the printed formula
    assert "authors' code" in lines[0] and "0.781 | 0.158" in lines[0]  # FMNIST C: Informal, ε = 1
    assert "Lap(Δp∞·R/ε)" in lines[1] and "not private" in lines[1] and "0.300 ±0.014" in lines[1]
    assert lines[1].endswith("| 10000 × 3 draws |")  # ε = ∞ (one draw) does not set the count
    assert "release classifier" in lines[2] and "0.350 ±0.014" in lines[2]
    assert "printed formula" in lines[3] and "0.250 ±0.043" in lines[3] and "1000 × 10 draws" in lines[3]
    assert "| – |" in lines[3]  # no informal cell for a noise calibration
    assert "PTR" in lines[4] and "0.500 ±0.014" in lines[4] and lines[4].endswith("| 10000 |")
    assert "global" in lines[5] and "0.600 [0.590, 0.610]" in lines[5] and "(2ε, 0, R)" in lines[5]
    assert "multi_eps" in text
    # PTR not run yet (MNIST): the same table from the calibration's obfuscators, without PTR's row
    lines = [ln for ln in render_table1_like_for_like(None, cal, "mnist", glob).splitlines()
             if ln.startswith("| C |")]
    assert len(lines) == 5 and not any("PTR" in ln for ln in lines)
    assert "authors' code" in lines[0] and "0.926 | 0.443" in lines[0]  # the paper's MNIST C row


def test_like_for_like_puts_the_paper_recipe_twin_after_its_variant() -> None:
    import pandas as pd

    from privcore.experiments.report import render_table1, render_table1_like_for_like

    eps = [1.0, 2.0, 5.0, 10.0]
    t1 = pd.DataFrame({"obfuscator": ["ARL-C-N-paper"] * 4 + ["ARL-C-N"] * 4, "epsilon": eps * 2,
                       "accuracy": [0.1] * 4 + [0.5] * 4, "release_rate": 1.0, "n_test": 10000})
    cal = pd.DataFrame({"obfuscator": "ARL-C-N-paper", "calibration": "paper-text", "epsilon": eps,
                        "accuracy_mean": 0.11, "n_test": 1000, "n_draws": 10})
    text = render_table1_like_for_like(t1, cal, "fashion-mnist")
    rows = [ln for ln in text.splitlines() if ln.startswith("| ARL-C-N")]
    assert len(rows) == 4  # the paper's row once, ours, then the twin's two rows
    assert rows[0].startswith("| ARL-C-N | paper") and "0.371" in rows[0]
    assert rows[1].startswith("| ARL-C-N | ours, PTR") and "0.500" in rows[1]
    assert rows[2].startswith("| ARL-C-N-paper | ours, the paper's recipe") and "printed formula" in rows[2]
    assert rows[3].startswith("| ARL-C-N-paper | ours, the paper's recipe") and "0.100 ±0.014" in rows[3]
    assert "App. E" in text
    table = render_table1(t1.assign(epsilon=eps * 2), "fashion-mnist")
    names = [ln.split("|")[1].strip() for ln in table.splitlines() if ln.startswith("| ARL")]
    assert names == ["ARL-C-N", "ARL-C-N-paper"] and "(0.371)" in table.split("ARL-C-N-paper")[1]


def test_calibration_table_labels_each_row_and_gives_n_and_the_interval() -> None:
    import pandas as pd

    from privcore.experiments.report import render_calibration

    inf = float("inf")
    frame = pd.DataFrame({"obfuscator": "C", "calibration": ["ours", "authors-code", "authors-code"],
                          "epsilon": [1.0, 1.0, inf], "noise_scale_mean": [2.0, 0.5, 0.0],
                          "accuracy_mean": [0.2, 0.3, 0.8], "accuracy_refit": [0.25, None, None],
                          "private": [True, False, False], "n_draws": [10, 3, 1],
                          "n_test": [1000, 10000, 10000]})
    text = render_calibration(frame)
    assert "ε = ∞" in text and "ε = inf" not in text
    ours = next(ln for ln in text.splitlines() if "| `ours`" in ln)
    assert "0.200 (b=2)" in ours and ours.endswith("| 1000 × 10 (±0.043) |") and "not private" not in ours
    authors = next(ln for ln in text.splitlines() if "`authors-code`" in ln)
    assert "(not private)" in authors and "0.800 (b=0)" in authors and authors.endswith("(±0.014) |")
    refit = next(ln for ln in text.splitlines() if "refit" in ln)
    assert "0.250" in refit and "× 1 (" in refit


def test_fig2_table_shows_n_and_the_bootstrap_interval() -> None:
    import pandas as pd

    from privcore.experiments.report import render_fig2

    frame = pd.DataFrame({"obfuscator": ["ARL-alpha0.5", "Encoder"], "arl_alpha": [0.5, 0.0],
                          "radius": 0.25, "lipschitz_mean": [2.0, 3.0], "lipschitz_std": 0.5,
                          "lipschitz_lo": [1.9, 2.8], "lipschitz_hi": [2.1, 3.2], "n_points": 100,
                          "n_inexact": 0})
    text = render_fig2(frame)
    rows = [ln for ln in text.splitlines() if ln.startswith("| Encoder") or ln.startswith("| ARL")]
    assert rows[0].startswith("| Encoder | 0 | 3.000 [2.800, 3.200]") and "n = 100" in text


def test_ip_and_fig4_tables_show_n_and_their_intervals() -> None:
    import pandas as pd

    from privcore.experiments.report import render_fig4, render_ip_fig5, render_ip_grid

    ip = pd.DataFrame({"sweep": ["grid", "fig5", "fig5"], "model": "ip-lipschitz-l2",
                       "mechanism": "Gauss-Output", "calibration": "analytic", "epsilon": [1.0, 1.0, 2.0],
                       "alpha": 0.1, "accuracy_mean": [0.5, 0.5, 0.6], "accuracy_std": 0.01,
                       "accuracy_lo": [0.48, 0.48, 0.58], "accuracy_hi": [0.52, 0.52, 0.62], "n_draws": 15,
                       "n_test": 2000})
    assert "| 1 | 50.00 ± 1.00 [48.0, 52.0] |" in render_ip_grid(ip) and "n = 2000" in render_ip_grid(ip)
    fig5 = render_ip_fig5(ip)
    assert "| ip-lipschitz-l2 & Gauss-Output | 0.1 | 50.00 [48.0, 52.0] | 60.00 [58.0, 62.0] |" in fig5
    fig4 = pd.DataFrame({"sweep": ["depth"], "value": [3], "lipmip_seconds_mean": [2.0],
                         "lipmip_seconds_lo": [1.5], "lipmip_seconds_hi": [2.5], "lipmip_timeouts": [1],
                         "seconds_mean": [0.5], "seconds_lo": [0.25], "seconds_hi": [0.75], "n_timeouts": [0],
                         "solver": ["split"], "n": [10]})
    text = render_fig4(fig4)
    assert "| depth | 3 | 2.000 [1.500, 2.500] | 1 | 0.500 [0.250, 0.750] | 0 | split | 10 |" in text
    assert "1 of 20 solves hit the time limit" in text


def test_the_fig4_dims_table_shows_each_way_its_interval_and_the_ratios() -> None:
    import pandas as pd

    from privcore.experiments.report_figures import render_fig4_dims

    rows = [dict(nets="fresh", d=24, n=10, way=w, mean=m, lo=m / 2, hi=m * 2, timeouts=t, load=3.0,
                 ratio_median=r, ratio_lo=r / 2 if r else None, ratio_hi=r * 2 if r else None)
            for w, m, t, r in (("engine", 1.0, 0, 15.0), ("portfolio", 1.5, 1, 10.0),
                               ("milp", 15.0, 10, None))]
    text = render_fig4_dims(pd.DataFrame(rows))
    assert ("| fresh | 24 | 1.000 [0.500, 2.000] | 0 | 1.500 [0.750, 3.000] | 1 | 15.000 [7.500, 30.000] "
            "| 10 | 15.000 [7.500, 30.000] | 10.000 [5.000, 20.000] | 10 | 3.0 |") in text
    assert "lower bound" in text and "bootstrap" in text
