"""Trade-offs page (AppTest): accuracy/release-rate charts from the experiment CSVs with the current ε
marked, the smallest-ε solver wired to the sidebar, and the command shown when results are missing."""

from __future__ import annotations

import json

import pytest

from tests._dashboard import app, chart_specs, figures, isolate, texts


@pytest.fixture
def results(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory):
    return isolate(monkeypatch, tmp_path_factory)


def _vline_x(spec: str) -> list[float]:
    fig = json.loads(spec)
    return [s["x0"] for s in fig["layout"].get("shapes", []) if s.get("x0") == s.get("x1")]


def test_charts_mark_the_current_epsilon_and_follow_the_slider(results) -> None:
    at = app("tradeoffs")
    specs = chart_specs(at)
    assert len(specs) == 2  # accuracy vs ε, release rate vs ε
    acc = json.loads(specs[0])
    names = {t["name"] for t in acc["data"]}
    # each curve names its n and the δ it was measured at (Table 1's δ column; ε-LDP is pure)
    assert {"ARL-C-N (PTR, n = 360, δ = 0.05)", "Encoder (PTR, n = 360, δ = 0.05)",
            "LDP-Image (ε-LDP, n = 360, δ = 0)", "LDP-Embedding (ε-LDP, n = 360, δ = 0)"} <= names
    hover = next(t for t in acc["data"] if t["name"].startswith("ARL-C-N"))
    assert "95 % interval" in hover["hovertemplate"] and hover["customdata"][0][1] == "n = 360"
    # the sidebar's δ (1e-5) is not the curves': said, with which way PTR's accuracy moves
    assert any("measured at δ = 0.05, not at the sidebar's δ = 1e-05" in w.value for w in at.warning)
    rates = {t["name"] for t in json.loads(specs[1])["data"]}
    assert "ARL-C-N: test set, n = 360, δ = 0.05" in rates
    # each point carries its 95 % Hoeffding half-width at n = 360: sqrt(ln(40) / 720)
    bars = [t["error_y"]["array"] for t in acc["data"] if "(PTR" in t.get("name", "")]
    assert bars and all(abs(b - 0.0715782) < 1e-6 for arr in bars for b in arr)
    assert "own ε" in acc["layout"]["xaxis"]["title"]["text"] and acc["layout"]["yaxis"]["title"]["text"]
    assert _vline_x(specs[0]) == [0.5, 1.0]  # PTR's ε/2 and the sidebar's total ε
    assert _vline_x(specs[1]) == [0.5]  # release rates are PTR's: its ε only
    at.select_slider(key="w_epsilon").set_value(5.0).run()
    assert _vline_x(chart_specs(at)[0]) == [2.5, 5.0]
    assert {b.label for b in at.get("download_button")} >= {"Download data (accuracy-vs-epsilon-digits.csv)"}


def test_smallest_epsilon_solver_sets_the_sidebar(results) -> None:
    at = app("tradeoffs")
    at.number_input(key="to_target").set_value(0.5).run()
    # ARL-C-N: accuracy 0.1 + 0.8·ε/6 → 0.367 at ε = 2, 0.767 at ε = 5 → smallest measured ε = 5
    assert any("ε = 5 is the smallest measured ε" in s.value for s in at.success), texts(at)
    assert any("(The curve was measured at δ = 0.05.)" in s.value for s in at.success)
    button = at.button(key="use_eps")
    label_total = float(button.label.split("=")[1].split()[0])
    assert 2.0 < label_total / 2 < 5.0  # log-ε interpolation between the bracketing measurements of PTR's ε
    assert f"(PTR at ε/2 = {label_total / 2:g})" in button.label
    button.click().run()
    assert at.session_state["privlens_settings"].epsilon == pytest.approx(label_total)  # the total
    at.number_input(key="to_target").set_value(0.95).run()
    assert any("No measured ε reaches accuracy 0.95" in w.value for w in at.warning)


def test_missing_results_name_the_command(monkeypatch: pytest.MonkeyPatch, tmp_path_factory) -> None:
    isolate(monkeypatch, tmp_path_factory, results=False)
    at = app("tradeoffs")
    assert "python -m privcore experiment table1 --dataset digits" in texts(at)
    assert "python -m privcore experiment table2 --dataset digits" in texts(at)


def test_current_image_release_probability_is_added_on_request(results) -> None:
    at = app("tradeoffs")
    names = {t["name"] for t in json.loads(chart_specs(at)[1])["data"]}
    assert not any(n.startswith("your image") for n in names)
    at.button(key="to_add_image").click().run()
    curve = [t for t in json.loads(chart_specs(at)[1])["data"] if t["name"].startswith("your image")]
    assert curve and all(0.0 <= y <= 1.0 for y in curve[0]["y"])
    assert curve[0]["y"] == sorted(curve[0]["y"])  # more ε, more releases
    at.select_slider(key="w_epsilon").set_value(2.0).run()  # stays, from the session's φ
    assert any(t["name"].startswith("your image") for t in json.loads(chart_specs(at)[1])["data"])


@pytest.mark.parametrize("eps", [0.5, 2.0, 20.0])
def test_current_epsilon_label_sits_on_its_line_on_the_log_axis(results, eps: float) -> None:
    """Plotly puts a log axis's annotation at log10(x) but its shape at x: the label must be at
    log10(ε) (not at ε, i.e. 10^ε on screen), the range must show ε and every point, and every line
    must be named in the legend."""
    import math

    at = app("tradeoffs", query={"eps": repr(eps)})
    figs = figures(at)
    assert len(figs) == 2
    for i, fig in enumerate(figs):
        assert fig.layout.xaxis.type == "log"
        marks = {f"PTR's ε/2 = {eps / 2:g}": eps / 2, **({f"total ε = {eps:g}": eps} if i == 0 else {})}
        for text, x in marks.items():
            (label,) = [a for a in fig.layout.annotations if a.text == text]
            assert label.x == pytest.approx(math.log10(x)) and label.xref == "x"
        assert [s.x0 for s in fig.layout.shapes if s.x0 == s.x1] == list(marks.values())
        lo, hi = fig.layout.xaxis.range
        xs = [float(x) for t in fig.data if t.x is not None for x in t.x if x is not None and x > 0]
        assert lo < math.log10(min(xs)) and math.log10(max(xs)) < hi  # ε and every point are on screen
        assert hi < math.log10(max(xs)) + 0.5  # and the axis is not stretched beyond them
        lines = [t for t in fig.data if "lines" in (t.mode or "")]
        assert all(t.name and t.showlegend is not False for t in lines)
        assert set(marks) <= {t.name for t in lines}
