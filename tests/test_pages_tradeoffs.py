"""Trade-offs page (AppTest): live accuracy curves on the total-ε axis with the sidebar's mechanism and
model highlighted, measured ones labelled with their table, the release rate on the total ε, and the
smallest-ε solver opening on the selected mechanism and model."""

from __future__ import annotations

import json
import math
import re

import pytest

from privcore.defaults import OPENING_EPSILON
from tests._dashboard import app, chart_specs, figures, isolate, texts


@pytest.fixture
def results(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory):
    return isolate(monkeypatch, tmp_path_factory)


def _traces(at, i: int = 0) -> dict[str, dict]:
    return {t["name"]: t for t in json.loads(chart_specs(at)[i])["data"]}


def _vline_x(spec: str) -> list[float]:
    fig = json.loads(spec)
    return [s["x0"] for s in fig["layout"].get("shapes", []) if s.get("x0") == s.get("x1")]


def test_the_selected_curve_is_live_on_the_total_epsilon_with_the_solver_opened_on_it(results) -> None:
    at = app("tradeoffs")
    traces = _traces(at)
    (name,) = [n for n in traces if n.startswith("Global on ARL-C-N (live, n = 360 × 3 draws, δ = 0)")]
    curve = traces[name]
    assert curve["line"]["width"] == 4 and curve["opacity"] == 1.0  # the sidebar's pair, highlighted
    assert curve["x"][0] == 0.1 and curve["x"][-1] == 100.0
    bars = curve["error_y"]
    assert bars["symmetric"] is False and all(v >= 0 for v in bars["array"] + bars["arrayminus"])
    assert "95 % interval" in curve["hovertemplate"] and curve["customdata"][0][1] == "n = 360 × 3 draws"
    # the local-DP baselines are registered mechanisms: live when added, never a second, measured copy
    assert not [n for n in traces if n.startswith("LDP-Image (measured")]
    assert _vline_x(chart_specs(at)[0]) == [OPENING_EPSILON]  # the sidebar's total ε, the one axis
    assert at.selectbox(key="to_pair").value == ("Global", "ARL-C-N")
    assert at.number_input(key="to_target").value == 0.9  # out of reach on the digits models: said so
    assert any("Not reachable within ε ∈ [0.1, 100]" in w.value for w in at.warning), texts(at)
    at.number_input(key="to_target").set_value(0.5).run()
    (answer,) = [x.value for x in at.success]
    m = re.search(r"accuracy ≥ 0.5 from total ε = ([\d.]+) \[([\d.]+), ([\d.]+)\] on", answer)
    assert m and float(m[2]) <= float(m[1]) <= float(m[3]) and "n = 360 × 3 draws" in answer
    at.button(key="use_eps").click().run()
    assert at.session_state["privlens_settings"].epsilon == pytest.approx(float(m[1]))
    assert _vline_x(chart_specs(at)[0]) == [pytest.approx(float(m[1]))]


def test_more_mechanisms_and_models_are_added_muted_and_measured_ones_say_so(results) -> None:
    at = app("tradeoffs")
    at.multiselect(key="to_mechs").select("PTR").run()
    at.multiselect(key="to_models").select("Encoder").run()
    traces = _traces(at)
    pairs = {n.split(" (")[0] for n in traces}
    assert {"Global on ARL-C-N", "Global on Encoder", "PTR on ARL-C-N", "PTR on Encoder"} <= pairs
    muted = [t for n, t in traces.items() if n.startswith(("Global on Encoder", "PTR on"))]
    assert muted and all(t["opacity"] == 0.35 and t["line"]["width"] == 1.5 for t in muted)
    ptr = next(n for n in traces if n.startswith("PTR on ARL-C-N"))
    # a mechanism that cannot simulate its noise is read from its table, on the total ε (2× its own)
    assert "(live," in ptr or "(measured (table1), n = 360, δ = 0.05)" in ptr
    if "measured" in ptr:
        assert traces[ptr]["x"] == [2.0, 4.0, 10.0, 20.0]  # table ε 1, 2, 5, 10 (∞ left out), as totals
        # the solver on a measured curve: the measured ε with its interval and n, the estimate labelled
        at.selectbox(key="to_pair").set_value(("PTR", "ARL-C-N")).run()
        at.number_input(key="to_target").set_value(0.5).run()
        (answer,) = [x.value for x in at.success]
        assert "ε = 10 is the smallest measured ε with accuracy ≥ 0.5 (0.767 [" in answer
        assert "n = 360)" in answer and "measured (table1), δ = 0.05" in answer
        assert "(interpolated: an estimate, no interval, no n)" in answer
    labels = {b.label for b in at.get("download_button")}
    assert "Download data (accuracy-vs-total-epsilon-digits.csv)" in labels


def test_release_rate_is_on_the_total_epsilon(results) -> None:
    at = app("tradeoffs")
    rates = _traces(at, 1)
    (name,) = [n for n in rates if n.startswith("PTR on ARL-C-N: test set (measured (table1), n = 360")]
    assert rates[name]["x"] == [2.0, 4.0, 10.0, 20.0] and "δ = 0.05" in name  # PTR's own ε 1, 2, 5, 10
    assert _vline_x(chart_specs(at)[1]) == [OPENING_EPSILON]


@pytest.mark.parametrize("eps", [0.5, 20.0])
def test_current_epsilon_label_sits_on_its_line_on_the_log_axis(results, eps: float) -> None:
    """Plotly puts a log axis's annotation at log10(x) but its shape at x: the label must be at
    log10(ε), the range must show ε and every point, and every line must be named in the legend."""
    at = app("tradeoffs", query={"eps": repr(eps)})
    for fig in figures(at):
        assert fig.layout.xaxis.type == "log" and "total ε" in fig.layout.xaxis.title.text
        (label,) = [a for a in fig.layout.annotations if a.text == f"total ε = {eps:g}"]
        assert label.x == pytest.approx(math.log10(eps)) and label.xref == "x"
        lo, hi = fig.layout.xaxis.range
        xs = [float(x) for t in fig.data if t.x is not None for x in t.x if x is not None and x > 0]
        assert lo < math.log10(min(xs)) and math.log10(max(xs)) < hi
        assert all(t.name for t in fig.data if "lines" in (t.mode or ""))


def test_mnist_default_names_the_epsilon_for_accuracy_0_9() -> None:
    """The embedded default (MNIST, Global on N-global): the solver opens on it and answers 0.9 with an
    ε and its interval."""
    at = app("tradeoffs", dataset=None)
    assert at.selectbox(key="to_pair").value == ("Global", "N-global")
    (answer,) = [x.value for x in at.success]
    m = re.search(r"accuracy ≥ 0.9 from total ε = ([\d.]+) \[([\d.]+), ([\d.]+|beyond 100)\] on", answer)
    assert m and float(m[2]) <= float(m[1]) and "n = 1000 × 3 draws" in answer, answer


def test_the_solver_in_the_background_answers_what_solve_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """With background work on, the page's solver is computed by a worker: "pending" until it is in,
    then the very answer :func:`privlens.tradeoff_view.solve` gives (one memo for both)."""
    import time

    from privcore.mechanisms import registry
    from privlens import tradeoff_view as tv

    monkeypatch.delenv("PRIVLENS_WARM_UP", raising=False)
    mech = registry.get("Global")
    model = next(m for name, m in tv.pairs("digits") if name == mech.name)
    args = {"dataset": "digits", "metric": "accuracy", "bound": 0.31}
    deadline = time.monotonic() + 120
    sol, pending = tv.solve_soon(mech, model, mech.setting(epsilon=2.0), **args)
    while pending and time.monotonic() < deadline:
        sol, pending = tv.solve_soon(mech, model, mech.setting(epsilon=2.0), wait_s=0.5, **args)
    assert not pending and sol is not None and sol.crossing is not None
    assert sol is tv.solve(mech, model, mech.setting(epsilon=7.0), **args)  # ε is not part of the question
