"""Accountant page (AppTest): the session's releases composed per image and per neighbourhood relation
exactly as privcore.mechanisms.accounting says (one Inference-privacy draw costs ℓ2 pairs (2ε, 2δ) and
ℓ1 pairs (3ε, 2δ)), a ledger it cannot read refused, and the chaining / group-privacy calculators."""

from __future__ import annotations

import math

import pytest

from privcore.mechanisms import Guarantee
from tests._dashboard import ROOT, app, isolate, send, send_ip, texts

COLUMNS = ["image", "total", "pairs", "releases counted", "total ε = Σεᵢ", "total δ = Σδᵢ"]
PIXELS = "on the model input (image pixels in [0, 1])"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    isolate(monkeypatch, tmp_path_factory)


def _composed(at) -> list[tuple]:
    table = at.dataframe[1].value
    return [tuple(row) for row in table[COLUMNS[1:]].itertuples(index=False)]


def test_ledger_composes_the_session_releases() -> None:
    at = send(app("release", query={"mech": "PTR", "eps": "2.0"}))
    at.select_slider(key="w_epsilon").set_value(5.0).run()
    send(at)
    at.switch_page(str(ROOT / "pages" / "accountant.py")).run()
    assert not at.exception
    releases = at.dataframe[0].value
    assert list(releases["ε"]) == [2.0, 5.0]  # the sidebar's total ε: PTR at ε/2 states (2·ε/2, δ/2, R)
    radius = float(releases["radius"].iloc[0])
    pairs = f"pairs within ℓ∞ distance {radius:.4g} on the embedding z"
    assert _composed(at) == [  # two sends at the default δ = 1e-5: each spends δ/2
        ("per relation", pairs, "2 of 2", 7.0, 1e-5),
        ("worst case", pairs, "2 of 2", 7.0, 1e-5),
    ]
    assert "Worst case per image" in texts(at) and "ε = 7, δ = 1e-05" in texts(at)  # a status: 7 < 8
    at.button(key="clear_ledger").click().run()
    assert not at.session_state["privlens_ledger"]


def test_one_ip_draw_costs_l2_pairs_two_releases_and_l1_pairs_three() -> None:
    at = app(
        "inference_privacy", query={"mech": "Gauss-Input", "eps": "1.0", "delta": "1e-05", "alpha": "0.1"}
    )
    assert not at.session_state["privlens_ledger"]  # nothing drawn before Send, nothing charged
    send_ip(at)
    assert len(at.session_state["privlens_ledger"]) == 3
    # the Inference-privacy page's own per-draw table and its worst-case line
    # a static table (its text wraps), the numbers as short text: one draw of each of the page's four
    # mechanisms, LDP-Image's over every pair of inputs
    per_draw = at.table[1].value
    assert [tuple(r) for r in per_draw[COLUMNS[1:]].itertuples(index=False)] == [
        ("per relation", f"pairs within ℓ1 distance 0.1 {PIXELS}", "4 of 4", "4", "2e-05"),
        ("per relation", f"pairs within ℓ2 distance 0.1 {PIXELS}", "3 of 4", "3", "2e-05"),
        ("worst case", f"pairs within ℓ1 distance 0.1 {PIXELS}", "4 of 4", "4", "2e-05"),
    ]
    assert per_draw["releases that cover only some of these pairs"].iloc[1].endswith("Lap-Output")
    assert "worst case ε = 3, δ = 2e-05 for pairs within ℓ1 distance 0.1" in texts(at)
    at.switch_page(str(ROOT / "pages" / "accountant.py")).run()
    assert not at.exception
    composed = _composed(at)
    assert composed[0][:4] == ("per relation", f"pairs within ℓ1 distance 0.1 {PIXELS}", "3 of 3", 3.0)
    assert composed[1][:4] == ("per relation", f"pairs within ℓ2 distance 0.1 {PIXELS}", "2 of 3", 2.0)
    assert composed[2][:4] == ("worst case", f"pairs within ℓ1 distance 0.1 {PIXELS}", "3 of 3", 3.0)
    assert all(row[4] == 2e-5 for row in composed)
    assert "do not combine" not in texts(at) and "not converted" in texts(at)


def test_pixel_and_embedding_releases_are_listed_apart_and_added_in_the_worst_case() -> None:
    at = send(app("release", query={"eps": "1.0"}))  # one Global release (the default): (1, 0) on embeddings
    ptr = at.session_state["privlens_ledger"][0]["guarantee"]
    at.switch_page(str(ROOT / "pages" / "inference_privacy.py")).run()  # the same image, three more
    send_ip(at)
    at.switch_page(str(ROOT / "pages" / "accountant.py")).run()
    assert not at.exception
    ip = [r["guarantee"] for r in at.session_state["privlens_ledger"][1:]]
    composed = _composed(at)
    kinds = [row[0] for row in composed]
    assert kinds == ["per relation", "per relation", "per relation", "worst case"]
    embedding = composed[2]
    assert "embedding z" in embedding[1] and embedding[2:4] == ("1 of 4", ptr.epsilon)
    worst = composed[3]
    assert "embedding z" in worst[1] and "ℓ1 distance" in worst[1] and worst[2] == "4 of 4"
    assert worst[3] == pytest.approx(ptr.epsilon + sum(g.epsilon for g in ip), rel=1e-15)
    assert worst[3] >= ptr.epsilon + sum(g.epsilon for g in ip)
    assert worst[4] >= ptr.delta + sum(g.delta for g in ip)


class _OldGuarantee:
    """What a session kept from before an upgrade might hold: another class, plain data only."""

    def __init__(self, metric: str) -> None:
        self.epsilon, self.delta, self.radius, self.metric = 1.0, 1e-5, 0.1, metric

    def to_dict(self) -> dict:
        return {"epsilon": 1.0, "delta": 1e-5, "radius": 0.1, "metric": self.metric, "mechanism": "old"}


def test_a_ledger_kept_from_an_older_version_is_read_or_refused_clearly() -> None:
    at = app("accountant")
    rows = [
        {
            "image": "a",
            "image_key": "k",
            "label": "old Gauss-Input",
            "guarantee": _OldGuarantee("ℓ2 on the model input"),
        },
        {
            "image": "a",
            "image_key": "k",
            "label": "new Lap-Output",
            "guarantee": Guarantee(epsilon=1.0, delta=0.0, radius=0.1, space="input", norm="l1"),
        },
    ]
    at.session_state["privlens_ledger"] = rows
    at.run()
    assert not at.exception and _composed(at)[0][2:4] == ("2 of 2", 2.0)  # read through its metric text
    rows[0]["guarantee"] = _OldGuarantee("ℓ2 somewhere")
    at.session_state["privlens_ledger"] = rows
    at.run()
    assert not at.exception and len(at.dataframe) == 1  # the releases, but no totals
    assert "cannot be composed" in at.error[0].value and "ℓ2 somewhere" in at.error[0].value


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
    assert f"ℓ1 {PIXELS}" in texts(at)  # the starting guarantee is stated for ℓ1 pixel pairs


def test_composition_past_the_users_threshold_is_flagged() -> None:
    at = send(app("release", query={"mech": "PTR", "eps": "6.0"}))  # one sent release: ε = 6 (PTR at 3)
    at.switch_page(str(ROOT / "pages" / "accountant.py")).run()
    assert not any("Over budget" in e.value for e in at.error)  # 6 ≤ the default 10
    at.number_input(key="acc_threshold").set_value(5.0).run()
    over = [e.value for e in at.error if "Over budget" in e.value]
    assert len(over) == 1 and "worst case ε = 6 > your threshold 5" in over[0]
    # the calculators are not green at extreme settings: 5 releases at (6, 5e-06) → (30, 2.5e-05)
    assert any("(ε = 30, δ = 2.5e-05" in w.value and "is very large" in w.value for w in at.warning)


def test_worst_case_far_below_the_threshold_is_a_status_not_a_warning_box() -> None:
    """One Global release at ε = 1 against the default threshold 10: no yellow box, a plain status line;
    a threshold of 1.2 (ε at 83 % of it) warns; the long column headers are short, their meaning on hover."""
    import json

    at = send(app("release", query={"eps": "1.0"}))  # the default mechanism at ε = 1
    at.switch_page(str(ROOT / "pages" / "accountant.py")).run()
    assert not at.exception
    assert not [w.value for w in at.warning if "Worst case" in w.value or "threshold" in w.value]
    assert "**Worst case per image**, below 80% of your threshold 10" in texts(at)
    headers = {name: col.get("label") for name, col in json.loads(at.dataframe[1].proto.columns).items()}
    assert headers["releases that cover only some of these pairs"] == "partly covering"
    at.number_input(key="acc_threshold").set_value(1.2).run()
    (near,) = [w.value for w in at.warning if "Near your threshold" in w.value]
    assert "83% of your threshold 1.2" in near
