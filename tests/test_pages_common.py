"""Every page runs (AppTest); the shared sidebar's values live in the session and the URL, survive page
switches, and bad URL values fall back to defaults with a warning; missing models are explained and
the rest of the app keeps working."""

from __future__ import annotations

import pytest

from tests._dashboard import ROOT, app, isolate, texts

PAGES = (
    "home",
    "release",
    "tradeoffs",
    "neighbourhood",
    "attack",
    "lipschitz",
    "inference_privacy",
    "accountant",
    "mechanism_lab",
)


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    isolate(monkeypatch, tmp_path_factory)


def test_every_page_runs_with_the_shared_sidebar() -> None:
    at = app()
    for page in PAGES:
        at.switch_page(str(ROOT / "pages" / f"{page}.py")).run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert at.sidebar.select_slider(key="w_epsilon").value == 1.0, page


def test_settings_come_from_the_url_and_survive_page_switches() -> None:
    at = app("release", query={"eps": "2.0", "delta": "0.01", "R": "0.2", "cert": "interval"})
    s = at.session_state["privlens_settings"]
    assert (s.epsilon, s.delta, s.radius, s.certifier) == (2.0, 0.01, 0.2, "interval")
    at.select_slider(key="w_epsilon").set_value(5.0).run()
    at.switch_page(str(ROOT / "pages" / "tradeoffs.py")).run()
    assert at.sidebar.select_slider(key="w_epsilon").value == 5.0
    assert at.query_params["eps"] == "5.0" and at.query_params["cert"] == "interval"


def test_bad_url_values_fall_back_with_a_warning() -> None:
    at = app("release", query={"eps": "lots", "delta": "7", "mech": "magic", "dataset": "imagenet"})
    warnings = " ".join(w.value for w in at.sidebar.warning)
    for bad in ("eps='lots'", "delta='7'", "mech='magic'", "dataset='imagenet'"):
        assert bad in warnings
    s = at.session_state["privlens_settings"]
    assert (s.epsilon, s.delta, s.mechanism, s.dataset) == (1.0, 0.05, "PTR", "digits")
    assert at.query_params["eps"] == "1.0"  # the URL is rewritten with valid values


def test_off_grid_url_value_is_kept_on_the_slider() -> None:
    at = app(query={"eps": "0.3"})
    slider = at.sidebar.select_slider(key="w_epsilon")
    assert slider.value == 0.3 and "0.3" in slider.options  # added between the grid's 0.25 and 0.5


def test_missing_models_are_explained_and_other_pages_work(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("PRIVCORE_MODELS_DIR", str(tmp_path))
    at = app("release")
    assert "python -m privcore train all --dataset digits" in texts(at)
    assert not at.metric
    for page in ("home", "accountant", "tradeoffs"):
        at.switch_page(str(ROOT / "pages" / f"{page}.py")).run()
        assert not at.exception, page


def test_unavailable_dataset_falls_back_to_the_embedded_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from privcore.errors import DatasetUnavailableError
    from privlens import ui

    real_load = ui._load

    def load(dataset: str, model: str, directory: str):
        if dataset != "digits":
            raise DatasetUnavailableError(
                "Fashion-MNIST is not installed: `sudo apt-get install dataset-fashion-mnist`"
            )
        return real_load(dataset, model, directory)

    monkeypatch.setattr(ui, "_load", load)
    monkeypatch.setattr(ui, "catalogue", lambda: {"digits": ("ARL-C-N",), "fashion-mnist": ("ARL-C-N",)})
    at = app("release", query={"dataset": "fashion-mnist"})
    assert any("apt-get install dataset-fashion-mnist" in w.value for w in at.warning)
    assert any("embedded default instead: digits" in i.value for i in at.info)
    assert at.metric  # the release still happens, on digits
