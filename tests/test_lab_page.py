"""The mechanism-lab dashboard page (Streamlit AppTest, headless, on the shipped models)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "mechanism_lab.py")


def _learned_row(at: AppTest) -> dict[str, float]:
    df = at.dataframe[0].value
    row = df[df["mechanism"].str.startswith("learned")].iloc[0]
    return {key: float(row[key]) for key in ("mean response", "std", "expected squared error")}


@pytest.fixture(scope="module")
def app() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_page_runs_and_shows_learned_expert_and_blind(app: AppTest) -> None:
    df = app.dataframe[0].value
    labels = " ".join(df["mechanism"])
    assert "learned" in labels and "expert" in labels and "data-blind" in labels
    assert len(app.get("plotly_chart")) == 2  # the response laws and the Fig. 5 curves
    assert not app.warning  # the precomputed Fig. 5 CSV is shipped


def test_changing_epsilon_changes_the_distribution(app: AppTest) -> None:
    app.select_slider(key="w_epsilon_lab").set_value(1.0).run()
    before = _learned_row(app)
    app.select_slider(key="w_epsilon_lab").set_value(4.0).run()
    assert not app.exception
    after = _learned_row(app)
    # Laplace scale k·c/ε shrinks 4×: same centre, smaller spread and error.
    assert after["std"] == pytest.approx(before["std"] / 4, rel=1e-9)
    assert after["mean response"] == pytest.approx(before["mean response"], rel=1e-12)
    assert after["expected squared error"] < before["expected squared error"]


def test_exponential_median_and_other_choices(app: AppTest) -> None:
    app.selectbox(key="lab_query").set_value("median").run()
    app.selectbox(key="lab_kind").set_value("exponential").run()
    assert not app.exception, [e.value for e in app.exception]
    first = _learned_row(app)
    app.select_slider(key="w_epsilon_lab").set_value(0.25).run()
    assert _learned_row(app)["std"] != first["std"]
    app.radio(key="lab_components").set_value(2).run()
    app.number_input(key="lab_seed").set_value(11).run()
    assert not app.exception
    app.button(key="lab_release").click().run()
    assert not app.exception and any("released" in s.value for s in app.success)


def test_fig5_reference_lines_are_named_traces_on_the_log_axes(app: AppTest) -> None:
    from tests._dashboard import figures

    laws, fig5 = figures(app)
    names = {t.name for t in fig5.data}
    assert {"data-blind (train)", "expert (train)"} <= names, names
    assert all(t.name and t.showlegend is not False for t in fig5.data)
    # no annotation left to float on the log y axis (the labels are legend entries now)
    assert not fig5.layout.annotations
    blind = next(t for t in fig5.data if t.name == "data-blind (train)")
    learned = next(t for t in fig5.data if t.name.startswith("learned, train (mean"))
    assert list(blind.x) == [min(learned.x), max(learned.x)] and blind.y[0] == blind.y[1]
    (truth,) = [a for a in laws.layout.annotations if a.text.startswith("true ")]
    assert truth.x == laws.layout.shapes[0].x0  # a linear axis: label and line in the same coordinates
    assert truth.text in {t.name for t in laws.data}


def test_the_lab_reads_the_sidebars_epsilon(app: AppTest) -> None:
    app.sidebar.select_slider(key="w_epsilon").set_value(2.0).run()
    assert app.select_slider(key="w_epsilon_lab").value == 2.0
    app.select_slider(key="w_epsilon_lab").set_value(0.25).run()
    assert app.sidebar.select_slider(key="w_epsilon").value == 0.25
    assert app.session_state["privlens_settings"].epsilon == 0.25


def test_controls_have_room_for_the_mechanisms_name(app: AppTest) -> None:
    """The mechanism's selectbox shares its row with the query only (four columns cut its label off at
    1400 px), and the metrics wrap instead of being cut."""
    def path_to(node, key: str) -> list:
        """The blocks from ``node`` down to the widget ``key`` (empty when it is not below ``node``)."""
        for child in getattr(node, "children", {}).values():
            if getattr(child, "key", None) == key:
                return [node]
            below = path_to(child, key)
            if below:
                return [node, *below]
        return []

    query, kind = path_to(app.main, "lab_query"), path_to(app.main, "lab_kind")
    row = query[-2]  # the horizontal block whose columns hold the two selectboxes
    assert row is kind[-2] and len(row.children) == 2
    rows = [b for b in app.main.children.values() if getattr(b, "type", "") == "flex_container"]
    assert any(b.proto.flex_container.wrap and len(b.children) == 3 for b in rows)
