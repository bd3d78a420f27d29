"""Inference-privacy page (AppTest): the three mechanisms on the shipped IP classifiers with their
noise following α, nothing drawn before Send, sent releases recorded in the ledger, and the chaining
table's exact values. Draw-at-send itself (issue 30, items 3–4) is tests/test_draw_at_send.py."""

from __future__ import annotations

import math

import pytest

from privcore.mechanisms import GaussInput
from privlens.settings import IP_MECHANISMS
from tests._dashboard import app, figures, isolate, sample_png, send_ip


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    isolate(monkeypatch, tmp_path_factory)


def test_mechanisms_noise_and_chaining() -> None:
    at = app(
        "inference_privacy", query={"mech": "Gauss-Input", "eps": "1.0", "delta": "1e-05", "alpha": "0.1"}
    )
    rows = at.table[0].value.set_index("model")  # a static table: its text wraps, never cut off
    gi = rows[rows["mechanism"].str.startswith("Gauss-Input")].iloc[0]
    assert gi["noise"] == f"σ = {GaussInput(epsilon=1.0, delta=1e-5, alpha=0.1).sigma:.4g} on pixels"
    assert gi["mechanism"].endswith("◀")  # the sidebar's mechanism is highlighted
    assert len(rows) == len(IP_MECHANISMS) == 4  # Gauss-Input, Gauss-Output, Lap-Output, LDP-Image
    assert not at.session_state.get("privlens_ledger")  # nothing drawn, nothing charged
    assert set(rows["sent"]) == {"no (nothing drawn)"} and not at.code  # no noisy scores before Send
    assert "The server holds your image for this session" in " ".join(c.value for c in at.caption)
    send_ip(at)
    assert len(at.session_state["privlens_ledger"]) == 3
    assert at.button(key="ip_send_Lap-Output").label == "Send another Lap-Output"
    at.run()
    assert len(at.session_state["privlens_ledger"]) == 3  # re-rendering the sent releases costs nothing
    sent = ["yes, release #1", "yes, release #2", "yes, release #3", "no (nothing drawn)"]  # LDP-Image unsent
    assert list(at.table[0].value["sent"]) == sent
    # one draw of each per neighbourhood relation (issue 18): ℓ1, ℓ2, worst case; LDP-Image's covers all
    per_draw = at.table[1].value
    assert list(per_draw["releases counted"]) == ["4 of 4", "3 of 4", "4 of 4"]
    assert list(per_draw["total ε = Σεᵢ"]) == ["4", "3", "4"] and set(per_draw["total δ = Σδᵢ"]) == {"2e-05"}
    chain = at.table[2].value
    # chaining: h = ⌈β/α⌉ hops give (hε, δ(e^{hε} − 1)/(e^ε − 1)); β = 0.2 → h = 2
    two = chain[chain["β"] == "0.2"].iloc[0]
    assert int(two["hops h = ⌈β/α⌉"]) == 2 and float(two["ε"]) == 2.0
    assert float(two["δ"]) == pytest.approx(1e-5 * (math.e**2 - 1) / (math.e - 1), rel=1e-2)
    assert int(chain[chain["β"] == "0.3"].iloc[0]["hops h = ⌈β/α⌉"]) == 3
    at.select_slider(key="w_alpha").set_value(0.2).run()
    noise = at.table[0].value.iloc[0]["noise"]
    assert noise == f"σ = {GaussInput(epsilon=1.0, delta=1e-5, alpha=0.2).sigma:.4g} on pixels"
    assert len(at.session_state["privlens_ledger"]) == 3  # at the new α nothing is drawn until sent
    assert set(at.table[0].value["sent"]) == {"no (nothing drawn)"}
    send_ip(at)
    assert len(at.session_state["privlens_ledger"]) == 6  # sent: new draws, charged again
    assert all("(sent)" in r["label"] for r in at.session_state["privlens_ledger"])
    assert len(at.get("plotly_chart")) == 6  # 4 class distributions; accuracy vs α and vs ε from ip.csv


def test_chaining_calls_a_large_delta_not_meaningful_by_a_stated_rule() -> None:
    """δ = 0.128 at β = 10α (or 0.186, 0.555 at other settings) is no meaningful guarantee: the column
    applies ε ≤ 10 and δ < min(1e-3, 1/n), the rule stated under the table (digits: n = 1797)."""
    query = {"mech": "Gauss-Input", "eps": "1.0", "delta": "1e-05", "alpha": "0.1"}
    at = app("inference_privacy", query=query)
    chain = at.table[2].value.set_index("β")
    assert chain.loc["0.1", "meaningful"] == "yes" and chain.loc["0.3", "meaningful"] == "yes"  # δ ≈ 1.1e-4
    assert chain.loc["0.5", "meaningful"] == "no: δ = 0.000858 ≥ 0.00056"  # past 1/n, still < 1e-3
    assert chain.loc["1", "meaningful"] == "no: δ = 0.128 ≥ 0.00056"
    assert chain.loc["2", "meaningful"].startswith("no: ε = 20 > 10, δ = ")
    rule = next(c.value for c in at.caption if "**Meaningful** here means" in c.value)
    assert "ε ≤ 10" in rule and "δ < 0.00056" in rule and "1/n = 0.00056" in rule and "n = 1797" in rule
    assert "Dwork & Roth" in rule


def test_accuracy_curves_name_n_and_delta() -> None:
    at = app("inference_privacy", query={"mech": "Gauss-Input", "delta": "0.001"})
    alpha_fig, eps_fig = figures(at)[-2:]
    names = {t.name for t in eps_fig.data}
    assert "Gauss-Input (ip-cnn-gauss-input, n = 360 × 15 draws, δ = 1e-05)" in names  # the CSV's n, δ
    assert "accuracy vs ε (α = 0.1, δ = 1e-05 for the Gaussian ones)" in eps_fig.layout.title.text
    assert "accuracy vs α (ε = 1, δ = 1e-05" in alpha_fig.layout.title.text
    assert any("The sidebar's δ = 0.001 is not that δ" in c.value for c in at.caption)


def test_accuracy_bars_are_95_percent_intervals_as_on_trade_offs() -> None:
    """The error bars are 95 % intervals over the test images (Hoeffding from n where the CSV records no
    bootstrap interval), not ± 1 sd over the draws, and the chart and caption say which."""
    from privcore.experiments import hoeffding_halfwidth

    at = app("inference_privacy", query={"mech": "Gauss-Input"})
    alpha_fig, eps_fig = figures(at)[-2:]
    for fig in (alpha_fig, eps_fig):
        assert "95 % interval" in fig.layout.yaxis.title.text and "std" not in fig.layout.yaxis.title.text
        curves = [t for t in fig.data if t.error_y is not None and t.error_y.array is not None]
        assert curves
        for t in curves:
            half = hoeffding_halfwidth(360)
            assert list(t.error_y.array) == pytest.approx([min(1.0, y + half) - y for y in t.y])
            assert list(t.error_y.arrayminus) == pytest.approx([y - max(0.0, y - half) for y in t.y])
            assert "95 % Hoeffding interval" in t.hovertemplate and "s.d." not in t.hovertemplate
    caption = next(c.value for c in at.caption if c.value.startswith("Each point"))
    assert "95 % Hoeffding interval over the n test images" in caption and "standard deviation" not in caption


def test_interval_bars_use_the_recorded_bootstrap_interval_where_every_point_has_one() -> None:
    from privlens.charts import BOOTSTRAP, interval_bars

    ci = interval_bars([0.5, 0.8], low=[0.45, 0.78], high=[0.56, 0.81], n=[360, 360])
    assert ci.how == BOOTSTRAP and ci.bars["array"] == pytest.approx([0.06, 0.01])
    assert ci.bars["arrayminus"] == pytest.approx([0.05, 0.02]) and ci.text[0] == " [0.450, 0.560]"
    assert interval_bars([0.5], low=[float("nan")], high=[0.6], n=[None]).bars is None


def test_accuracy_charts_label_the_current_values_at_log10() -> None:
    at = app("inference_privacy", query={"mech": "Lap-Output", "eps": "20.0", "alpha": "0.5"})
    alpha_fig, eps_fig = figures(at)[-2:]  # after the three class distributions
    for fig, text, value in ((alpha_fig, "current α = 0.5", 0.5), (eps_fig, "current ε = 20", 20.0)):
        (label,) = [a for a in fig.layout.annotations if a.text == text]
        assert label.x == pytest.approx(math.log10(value))  # plotly: a log axis's annotations are log10
        lo, hi = fig.layout.xaxis.range
        assert lo < math.log10(value) < hi < math.log10(value) + 0.5
        assert text in {t.name for t in fig.data}


def test_an_upload_on_this_page_shows_all_three_releases_with_their_guarantees() -> None:
    at = app(
        "inference_privacy", query={"mech": "Lap-Output", "eps": "2.0", "delta": "1e-05", "alpha": "0.1"}
    )
    at.radio(key="ip_source").set_value("Upload your own").run()
    at.file_uploader(key="ip_upload").upload("mine.png", sample_png(), "image/png").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["privlens_images"]["digits"]["name"] == "mine.png"  # every page's image now
    captions = [c.value for c in at.caption]
    guarantees = [c for c in captions if c.startswith("Guarantee if sent")]
    assert len(guarantees) == 4 and sum("over every pair of inputs" in c for c in guarantees) == 1
    assert any("(ε = 2, δ = 0) at α = 0.1" in c for c in guarantees)  # Lap-Output: pure ε
    assert sum("(ε = 2, δ = 1e-05) at α = 0.1" in c for c in guarantees) == 2  # the Gaussian two
    assert "noisy image" not in " ".join(str(i.proto) for i in at.get("image"))  # nothing drawn yet
    dists = [f for f in figures(at) if f.layout.title.text == "class distribution"]
    assert len(dists) == 4 and all(len(f.data) == 1 and abs(sum(f.data[0].y) - 1) < 1e-9 for f in dists)
    assert not at.session_state.get("privlens_ledger")  # nothing sent
    at.button(key="ip_send_Lap-Output").click().run()
    (row,) = at.session_state["privlens_ledger"]
    assert row["image"] == "mine.png" and row["label"].startswith("IP page: Lap-Output")
    dists = [f for f in figures(at) if f.layout.title.text == "class distribution"]
    assert [len(f.data) for f in dists] == [1, 1, 2, 1]  # the sent Lap-Output release beside the clean one
    assert abs(sum(dists[2].data[1].y) - 1) < 1e-9 and len(at.code) == 1  # its noisy scores
    # its public JSON, the document privcore.release writes: ε is the total the sidebar set
    (download,) = [d for d in at.get("download_button") if d.proto.label == "Release (JSON)"]
    assert download.key == "dl_ip_Lap-Output"
    at.button(key="ip_send_Gauss-Input").click().run()
    assert "noisy image it released" in " ".join(str(i.proto) for i in at.get("image"))  # Gauss-Input's


def test_a_bad_upload_on_this_page_releases_nothing() -> None:
    at = app("inference_privacy")
    at.radio(key="ip_source").set_value("Upload your own").run()
    at.file_uploader(key="ip_upload").upload("notes.png", b"not an image at all\n" * 8, "image/png").run()
    assert any("This file cannot be used" in e.value and "Nothing was released" in e.value for e in at.error)
    assert not [c for c in at.caption if c.value.startswith("Guarantee if sent")]
    assert "privlens_sent_releases" not in at.session_state and not at.session_state.get("privlens_ledger")
