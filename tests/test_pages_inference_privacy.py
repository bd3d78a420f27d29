"""Inference-privacy page (AppTest): the three mechanisms on the shipped IP classifiers with their
noise following α, noisy releases recorded in the ledger, and the chaining table's exact values."""

from __future__ import annotations

import math

import pytest

from privcore.mechanisms import GaussInput
from tests._dashboard import app, figures, isolate, send_ip


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    isolate(monkeypatch, tmp_path_factory)


def test_mechanisms_noise_and_chaining() -> None:
    at = app(
        "inference_privacy", query={"mech": "Gauss-Input", "eps": "1.0", "delta": "1e-05", "alpha": "0.1"}
    )
    rows = at.dataframe[0].value.set_index("model")
    gi = rows[rows["mechanism"].str.startswith("Gauss-Input")].iloc[0]
    assert gi["noise"] == f"σ = {GaussInput(epsilon=1.0, delta=1e-5, alpha=0.1).sigma:.4g} on pixels"
    assert gi["mechanism"].endswith("◀")  # the sidebar's mechanism is highlighted
    assert len(rows) == 3 and not at.session_state.get("privlens_ledger")  # previews cost nothing
    assert "nothing has left your device" in " ".join(c.value for c in at.caption)
    send_ip(at)
    assert len(at.session_state["privlens_ledger"]) == 3
    assert at.button(key="ip_send_Lap-Output").disabled  # the same draw is not charged twice
    at.run()
    assert len(at.session_state["privlens_ledger"]) == 3  # re-rendering the same draws costs nothing
    per_draw = at.dataframe[1].value  # one draw per neighbourhood relation (issue 18): ℓ1, ℓ2, worst case
    assert list(per_draw["releases counted"]) == ["3 of 3", "2 of 3", "3 of 3"]
    assert list(per_draw["total ε = Σεᵢ"]) == [3.0, 2.0, 3.0] and set(per_draw["total δ = Σδᵢ"]) == {2e-5}
    chain = at.dataframe[2].value
    # chaining: h = ⌈β/α⌉ hops give (hε, δ(e^{hε} − 1)/(e^ε − 1)); β = 0.2 → h = 2
    two = chain[chain["β"] == "0.2"].iloc[0]
    assert two["hops h = ⌈β/α⌉"] == 2 and float(two["ε"]) == 2.0
    assert float(two["δ"]) == pytest.approx(1e-5 * (math.e**2 - 1) / (math.e - 1), rel=1e-2)
    assert chain[chain["β"] == "0.3"].iloc[0]["hops h = ⌈β/α⌉"] == 3
    at.select_slider(key="w_alpha").set_value(0.2).run()
    noise = at.dataframe[0].value.iloc[0]["noise"]
    assert noise == f"σ = {GaussInput(epsilon=1.0, delta=1e-5, alpha=0.2).sigma:.4g} on pixels"
    assert len(at.session_state["privlens_ledger"]) == 3  # three new draws at the new α: previews, free
    send_ip(at)
    assert len(at.session_state["privlens_ledger"]) == 6  # sent: charged again, as new draws
    assert all("(sent)" in r["label"] for r in at.session_state["privlens_ledger"])
    assert len(at.get("plotly_chart")) == 2  # accuracy vs α and vs ε from ip.csv


def test_accuracy_charts_label_the_current_values_at_log10() -> None:
    at = app("inference_privacy", query={"mech": "Lap-Output", "eps": "20.0", "alpha": "0.5"})
    alpha_fig, eps_fig = figures(at)
    for fig, text, value in ((alpha_fig, "current α = 0.5", 0.5), (eps_fig, "current ε = 20", 20.0)):
        (label,) = [a for a in fig.layout.annotations if a.text == text]
        assert label.x == pytest.approx(math.log10(value))  # plotly: a log axis's annotations are log10
        lo, hi = fig.layout.xaxis.range
        assert lo < math.log10(value) < hi < math.log10(value) + 0.5
        assert text in {t.name for t in fig.data}
