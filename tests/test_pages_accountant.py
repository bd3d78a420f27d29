"""Accountant page (AppTest): the session's releases composed per image exactly as basic
composition says, and the chaining / group-privacy calculators with their formulas."""

from __future__ import annotations

import math

import pytest

from tests._dashboard import ROOT, app, isolate


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    isolate(monkeypatch, tmp_path_factory)


def test_ledger_composes_the_session_releases() -> None:
    at = app("release")
    at.select_slider(key="w_epsilon").set_value(2.0).run()
    at.switch_page(str(ROOT / "pages" / "accountant.py")).run()
    assert not at.exception
    releases = at.dataframe[0].value
    assert list(releases["ε"]) == [2.0, 4.0]  # PTR at ε gives 2ε (posthoc Thm 4.4)
    composed = at.dataframe[1].value.iloc[0]
    assert composed["releases"] == 2
    assert composed["total ε = Σεᵢ"] == pytest.approx(6.0) and composed["total δ = Σδᵢ"] == pytest.approx(
        0.05
    )
    at.button(key="clear_ledger").click().run()
    assert not at.session_state["privlens_ledger"]


def test_calculators_follow_the_formulas() -> None:
    at = app("accountant", query={"mech": "Lap-Output", "eps": "0.5", "alpha": "0.1"})
    at.number_input(key="acc_beta_0.1").set_value(0.35).run()  # h = ⌈0.35/0.1⌉ = 4
    results = [s.value for s in at.success]
    assert results[0] == "(ε = 2, δ = 0, radius 0.35)"  # pure ε: δ stays 0
    at.number_input(key="acc_delta_0.0").set_value(1e-6).run()
    at.number_input(key="acc_beta_0.1").set_value(0.35).run()
    chained = at.success[0].value
    expected = 1e-6 * (math.exp(2.0) - 1) / (math.exp(0.5) - 1)
    assert chained.startswith("(ε = 2, δ = ") and float(
        chained.split("δ = ")[1].split(",")[0]
    ) == pytest.approx(expected, rel=1e-3)
    at.number_input(key="acc_k").set_value(3).run()
    group = at.success[1].value
    assert float(group.split("δ = ")[1].split(",")[0]) == pytest.approx(3 * math.exp(1.0) * 1e-6, rel=1e-3)
