"""privlens.live and the Release page's live panel: the model's accuracy at ε with its Wilson interval
and the attacker's SSIM at (R, ε), measured or interpolated, following the sliders (synthetic CSVs of
tests/_dashboard.write_results)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy.stats import binomtest

from privlens.live import accuracy_at, attack_at, global_accuracy_at, ip_accuracy_at
from privlens.outcome import release_probability
from tests._dashboard import app, isolate, metric, texts


@pytest.fixture
def results(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory):
    return isolate(monkeypatch, tmp_path_factory)


def _acc(e: float) -> float:  # the synthetic ARL-C-N curve
    return 0.1 + 0.8 * min(1.0, e / 6)


def test_accuracy_is_measured_with_a_wilson_interval_or_interpolated(results) -> None:
    t1 = pd.read_csv(results / "digits" / "table1.csv")
    r = accuracy_at(t1, model="ARL-C-N", certifier="exact", epsilon=2.0)
    ci = binomtest(round(_acc(2) * 360), 360).proportion_ci(method="wilson")
    assert r.value == pytest.approx(_acc(2)) and (r.low, r.high) == pytest.approx((ci.low, ci.high))
    assert "measured at PTR's ε = 2, δ = 0.05" in r.how and "n = 360" in r.how  # the CSV's δ column
    assert (r.delta, r.n) == (0.05, 360) and r.other_delta(1e-5) and not r.other_delta(0.05)
    r = accuracy_at(t1, model="ARL-C-N", certifier="exact", epsilon=3.0)
    t = math.log10(3 / 2) / math.log10(5 / 2)
    assert r.value == pytest.approx((1 - t) * _acc(2) + t * _acc(5)) and "interpolated" in r.how
    # an estimate between measurements: no interval and no n of its own
    assert (r.low, r.high, r.n) == (None, None, None) and "no interval, no n" in r.how and "n = " not in r.how
    assert accuracy_at(t1, model="ARL-C-N", certifier="exact", epsilon=20.0) is None  # beyond ε = 10
    assert accuracy_at(t1, model="nope", certifier="exact", epsilon=2.0) is None


def test_attack_ssim_is_read_at_r_and_epsilon(results) -> None:
    atk = pd.read_csv(results / "digits" / "attack.csv")
    r = attack_at(atk, radius=0.25, epsilon=2.0)
    assert r.value == pytest.approx(min(0.9, 0.1 * 2 / 0.25)) and r.how.startswith("measured (")
    assert "n = 50 released test images" in r.how and "δ = 0.05" in r.how  # the experiment's PTR δ
    r = attack_at(atk, radius=0.3, epsilon=2.0)
    expected = 0.8 * (0.5 - 0.3) / 0.25 + min(0.9, 0.1 * 2 / 0.5) * (0.3 - 0.25) / 0.25
    assert r.value == pytest.approx(expected) and "interpolated" in r.how
    assert (r.low, r.high, r.n) == (None, None, None) and "n = " not in r.how
    assert attack_at(atk, radius=2.0, epsilon=2.0) is None


def test_global_accuracy_is_read_at_the_total_epsilon_defensively() -> None:
    table = pd.DataFrame(
        {
            "variant": ["ARL-C-N"] * 3 + ["Encoder"],
            "mechanism": ["global"] * 4,
            "epsilon_total": [2.0, 4.0, 8.0, 2.0],
            "radius": [0.25] * 4,
            "accuracy": [0.5, 0.6, 0.7, 0.2],
            "low": [0.45, 0.55, 0.65, 0.15],
            "n": [360] * 4,  # no "high": the interval is left out, the value is still read
        }
    )
    r = global_accuracy_at(table, model="ARL-C-N", epsilon=4.0, radius=0.25)
    assert r.value == 0.6 and r.low is None and "n = 360" in r.how
    assert "measured at total ε = 4, δ = 0 " in r.how and r.delta == 0.0  # pure: no δ column, δ = 0
    r = global_accuracy_at(table, model="ARL-C-N", epsilon=2 * 2**0.5, radius=0.25)
    assert r.value == pytest.approx(0.55) and "interpolated" in r.how
    assert (r.low, r.n) == (None, None) and "n = " not in r.how
    assert global_accuracy_at(table, model="ARL-C-N", epsilon=1.0, radius=0.25) is None  # not measured
    assert global_accuracy_at(table, model="ARL-C-N", epsilon=4.0, radius=0.5) is None  # another R
    assert global_accuracy_at(table.drop(columns="accuracy"), model="ARL-C-N", epsilon=4.0) is None
    assert global_accuracy_at(None, model="ARL-C-N", epsilon=4.0) is None


def test_ip_accuracy_is_read_at_epsilon_and_alpha(results) -> None:
    ip = pd.read_csv(results / "digits" / "ip.csv")
    r = ip_accuracy_at(ip, mechanism="Lap-Output", model="ip-lipschitz-l1", epsilon=1.0, alpha=0.1)
    # a 95 % interval over the test images (Hoeffding from n: the CSV has no bootstrap one), not ± 1 sd
    from privcore.experiments import hoeffding_halfwidth

    half = hoeffding_halfwidth(360)
    assert r.value == pytest.approx(0.5 + 0.04)
    assert (r.low, r.high) == pytest.approx((0.54 - half, 0.54 + half))
    assert "δ = 1e-05" in r.how and "n = 360 × 15 noise draws, 95 % Hoeffding interval" in r.how
    assert "s.d." not in r.how
    model = "ip-cnn-gauss-input"
    r = ip_accuracy_at(ip, mechanism="Gauss-Input", model=model, epsilon=1.0, alpha=0.1, delta=1e-3)
    assert r.delta == 1e-5 and "δ = 1e-05" in r.how and r.other_delta(1e-3)  # the δ it was measured at
    assert ip_accuracy_at(ip, mechanism="Lap-Output", model="ip-lipschitz-l1", epsilon=1.0, alpha=0.3) is None


def test_release_page_live_panel_follows_the_sliders(results, monkeypatch: pytest.MonkeyPatch) -> None:
    """PTR's readings at the sidebar's total ε are taken at PTR's own ε, half of it (Table 1's ε is PTR's),
    from the committed table when its live φ table is turned off."""
    monkeypatch.setenv("PRIVLENS_CERTIFIED_IMAGES", "0")
    at = app("release", query={"mech": "PTR", "eps": "4.0"})
    label = "model accuracy at this ε, δ = 0.05"  # the CSV's δ: every reading names it
    assert metric(at, label) == f"{_acc(2):.3f}"
    assert "PTR's ε = 2, δ = 0.05" in next(m for m in at.metric if m.label == label).help
    ci = binomtest(round(_acc(2) * 360), 360).proportion_ci(method="wilson")
    assert f"interval [{ci.low:.3f}, {ci.high:.3f}], measured at PTR's ε = 2, δ = 0.05 (n = 360" in texts(at)
    # the sidebar's δ (1e-5) is not the measured one: said, with which way the accuracy would move
    assert any("Measured at δ = 0.05, not at the sidebar's δ = 1e-05" in w.value for w in at.warning)
    assert metric(at, "attacker's SSIM at (R, ε), δ = 0.05") == f"{0.8:.3f}"
    p2 = float(metric(at, "P[this image is released]").rstrip(" %"))
    phi = float(metric(at, "φ (private, yours only)"))
    zeta = next(iter(at.session_state["privlens_phi"].values())).zeta
    delta = at.session_state["privlens_settings"].delta  # the default, 1e-5
    expected = 100 * release_probability(phi, epsilon=2.0, delta=delta, radius=0.25, zeta=zeta)
    assert p2 == pytest.approx(expected, abs=0.06 + 100 * 1e-3)  # φ is shown to 4 digits
    at.select_slider(key="w_epsilon").set_value(10.0).run()
    assert metric(at, label) == f"{_acc(5):.3f}"
    assert float(metric(at, "P[this image is released]").rstrip(" %")) >= p2  # more ε, more releases
    at.select_slider(key="w_epsilon").set_value(20.0).run()  # PTR at 10: measured, as total ε 20
    assert metric(at, label) == f"{_acc(10):.3f}"
    at.select_slider(key="w_delta").set_value(0.05).run()  # the measured δ: nothing to warn about
    assert not any("Measured at δ" in w.value for w in at.warning)
    at.select_slider(key="w_epsilon").set_value(1.0).run()  # PTR at 0.5: below the measured ε
    assert metric(at, "model accuracy at this ε") == "—"
