"""Every page runs (AppTest); the shared sidebar's values live in the session and the URL, survive page
switches, and a bad URL value stops every page with an error at its top (parameter, value, range) and
releases nothing until fixed; missing models are explained and the rest of the app keeps working."""

from __future__ import annotations

import pytest

from privcore.defaults import OPENING_EPSILON
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
        assert at.sidebar.select_slider(key="w_epsilon").value == OPENING_EPSILON, page


def test_settings_come_from_the_url_and_survive_page_switches() -> None:
    at = app("release", query={"eps": "2.0", "delta": "0.01", "R": "0.2", "cert": "interval"})
    s = at.session_state["privlens_settings"]
    assert (s.epsilon, s.delta, s.radius, s.certifier) == (2.0, 0.01, 0.2, "interval")
    at.select_slider(key="w_epsilon").set_value(5.0).run()
    at.switch_page(str(ROOT / "pages" / "tradeoffs.py")).run()
    assert at.sidebar.select_slider(key="w_epsilon").value == 5.0
    assert at.query_params["eps"] == "5.0" and at.query_params["cert"] == "interval"


def _top_error(at) -> str:
    """The first element of the page's main area, which must be an error."""
    first = next(iter(at.main.children.values()))
    assert first.type == "error", first
    return first.value


def _released_anything(at) -> bool:
    return bool(at.session_state["privlens_ledger"]) if "privlens_ledger" in at.session_state else False


@pytest.mark.parametrize("key", ["eps", "epsilon"])
def test_a_bad_url_value_stops_the_page_and_releases_nothing_until_fixed(key: str) -> None:
    at = app("release", query={key: "-1"})
    top = _top_error(at)
    assert f"{key}='-1'" in top and "a number in [0.01, 100]" in top and "nothing was released" in top
    assert f"ε = {OPENING_EPSILON:g} instead" in top
    assert not at.metric and not at.success and not at.status  # no certification, no outcome
    assert "privlens_releases" not in at.session_state and not _released_anything(at)
    assert at.query_params[key] == "-1"  # the URL keeps what the user must fix
    for page in ("inference_privacy", "attack", "home"):  # every page, not only Release
        at.switch_page(str(ROOT / "pages" / f"{page}.py")).run()
        assert "a number in [0.01, 100]" in _top_error(at), page
        assert "privlens_ip_draws" not in at.session_state
    at.switch_page(str(ROOT / "pages" / "release.py")).run()
    at.sidebar.select_slider(key="w_epsilon").set_value(2.0).run()  # fixed in the sidebar
    assert not any("a number in [0.01, 100]" in e.value for e in at.error)
    assert at.metric and at.session_state["privlens_settings"].epsilon == 2.0
    assert at.query_params["eps"] == "2.0"  # the URL follows, in the dashboard's own key
    assert key == "eps" or key not in at.query_params


def test_bad_url_values_are_named_and_can_be_accepted() -> None:
    query = {"eps": "lots", "delta": "7", "mech": "magic", "dataset": "imagenet", "foo": "1"}
    at = app("release", query=query)
    top = _top_error(at)
    for bad in ("eps='lots'", "delta='7'", "mech='magic'", "dataset='imagenet'", "foo='1'"):
        assert bad in top
    assert "Unknown URL parameter" in top and "a number in [1e-12, 0.5]" in top
    assert not at.metric and not _released_anything(at)
    at.button(key="url_accept").click().run()  # continue with the sidebar's values
    s = at.session_state["privlens_settings"]
    assert (s.epsilon, s.delta, s.mechanism, s.dataset) == (OPENING_EPSILON, 1e-5, "Global", "mnist")
    assert at.metric  # the page runs again
    assert at.query_params["eps"] == str(OPENING_EPSILON) and "foo" not in at.query_params  # URL rewritten


def test_an_alias_works_like_its_key() -> None:
    at = app("release", query={"epsilon": "2", "radius": "0.3"})
    s = at.session_state["privlens_settings"]
    assert (s.epsilon, s.radius) == (2.0, 0.3)
    assert not at.error or not any("URL parameter" in e.value for e in at.error)
    assert at.query_params["eps"] == "2.0" and "epsilon" not in at.query_params


def test_off_grid_url_value_is_kept_on_the_slider() -> None:
    at = app(query={"eps": "0.3"})
    slider = at.sidebar.select_slider(key="w_epsilon")
    assert slider.value == 0.3 and "0.3" in slider.options  # added between the grid's 0.25 and 0.5


def test_missing_models_are_explained_and_other_pages_work(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("PRIVCORE_MODELS_DIR", str(tmp_path))
    at = app("release", dataset=None)
    assert "python -m privcore train global-model --dataset mnist" in texts(at)  # the default's command
    assert not at.metric
    for page in ("home", "accountant", "tradeoffs"):
        at.switch_page(str(ROOT / "pages" / f"{page}.py")).run()
        assert not at.exception, page


def test_unavailable_dataset_falls_back_to_the_embedded_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from privcore.errors import DatasetUnavailableError
    from privlens import pipelines

    real_load = pipelines._load

    def load(dataset: str, model: str, directory: str):
        if dataset != "mnist":
            raise DatasetUnavailableError(
                "Fashion-MNIST is not installed: `sudo apt-get install dataset-fashion-mnist`"
            )
        return real_load(dataset, model, directory)

    monkeypatch.setattr(pipelines, "_load", load)
    shipped = {"mnist": ("N-global",), "fashion-mnist": ("ARL-C-N",)}
    monkeypatch.setattr(pipelines, "catalogue", lambda: shipped)
    at = app("release", query={"dataset": "fashion-mnist"})
    assert any("apt-get install dataset-fashion-mnist" in w.value for w in at.warning)
    assert any("embedded default instead: mnist / N-global" in i.value for i in at.info)
    assert at.metric  # the release still happens, on the embedded default


# ----------------------------------------------------------------- user text, errors, tampered cards


def rendered(markdown: str) -> str:
    """HTML of a Markdown string by a CommonMark renderer (markdown-it-py, pinned in requirements.txt)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").render(markdown)


def outside_code(html: str) -> str:
    """The rendered HTML without the contents of its code spans/blocks."""
    import re

    return re.sub(r"<code>.*?</code>", "", html, flags=re.S)


def test_url_values_are_shown_never_rendered() -> None:
    evil = {
        "model": "[click here](https://evil.example/login)",
        "mech": "<a href='https://evil.example'>PTR</a>",
        "cert": "``[x](https://evil.example)`` **bold**",
        "dataset": "line\n\n[next](https://evil.example)",
        "eps": "[1](https://evil.example)",
    }
    at = app("release", query=evil)
    warnings = [line for line in _top_error(at).split("\n") if line.startswith("* ")]
    assert len(warnings) == len(evil), warnings
    for w in warnings:
        html = rendered(w)
        assert "<a" not in html and "<strong>" not in html, (w, html)
        assert "evil.example" not in outside_code(html), (w, html)  # only inside a code span: shown as text
    assert any("[click here](https://evil.example/login)" in w for w in warnings)  # the value is still shown
    assert not at.metric
    at.button(key="url_accept").click().run()
    s = at.session_state["privlens_settings"]
    assert (s.model, s.mechanism, s.certifier, s.dataset) == ("N-global", "Global", "exact", "mnist")
    assert s.epsilon == OPENING_EPSILON


def test_an_unhandled_error_is_a_message_and_a_server_log_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(*a, **k):
        raise RuntimeError("internal detail /srv/privlens/secret.py")

    monkeypatch.setattr("privlens.mechanism_view.posthoc", boom)  # the mechanism's first step
    with caplog.at_level("ERROR", logger="privlens"):
        at = app("release")
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any("The Release page failed: nothing was released" in e and "RuntimeError" in e for e in errors)
    assert "secret.py" not in texts(at)  # the message of an unexpected error stays on the server
    assert not at.metric and not at.success
    logged = [r for r in caplog.records if r.name == "privlens" and r.exc_info]
    assert logged and "secret.py" in str(logged[-1].exc_info[1])  # with its traceback


@pytest.mark.parametrize(
    "path,value,field",
    [
        ("delta_p.proposed", -1.0, "delta_p.proposed"),
        ("radius", 0.25, "radius"),
        ("delta_p.mu", float("nan"), "delta_p.mu"),
        ("dataset", "fashion-mnist", "dataset"),  # also breaks the catalogue, which reads every card
    ],
)
def test_a_tampered_card_is_a_message_naming_the_field(
    monkeypatch: pytest.MonkeyPatch, tmp_path, path: str, value, field: str
) -> None:
    from tests.test_nets import _set, tampered_models

    default = {"dataset": "mnist", "stem": "obfuscator-N-global",
               "files": ("embedder-label.*", "*-N-global.*")}
    monkeypatch.setenv("PRIVCORE_MODELS_DIR", str(tampered_models(tmp_path, _set(path, value), **default)))
    at = app("release", dataset=None)
    errors = " ".join(e.value for e in at.error)
    assert "cannot be loaded; nothing was released" in errors and f"'{field}" in errors, errors
    assert "<models>/mnist/obfuscator-N-global.json is invalid" in errors
    assert str(tmp_path) not in errors  # no server path in the browser
    assert not at.metric and not at.success
    for page in ("neighbourhood", "lipschitz", "attack", "home"):
        at.switch_page(str(ROOT / "pages" / f"{page}.py")).run()
        assert not at.exception, page


def test_the_epsilon_slider_says_what_it_is_and_what_a_release_spends() -> None:
    """The ε slider is the total of a sent release's guarantee for every mechanism (issue 31, item 4):
    PTR runs at ε/2, and the sidebar says so and what a sent release spends."""
    at = app("release", query={"mech": "PTR", "eps": "2.0", "delta": "0.01", "R": "0.3"})
    slider = at.sidebar.select_slider(key="w_epsilon")
    assert "total of one sent release" in slider.label and "PTR runs at ε/2" in slider.label
    assert "[0.01, 100]" in slider.help
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "(ε, δ/2, R) = (2, 0.005, 0.3)" in captions and "Previews cost nothing" in captions
    assert "PTR runs at ε/2 = 1" in captions
    assert "e^ε times more likely" in slider.help  # plain-language help under every slider
    assert "fails outright" in at.sidebar.select_slider(key="w_delta").help
    assert "protected from each other" in at.sidebar.select_slider(key="w_radius").help
    at.sidebar.selectbox(key="w_mechanism").set_value("Global").run()
    assert "(ε, 0, R) = (2, 0, 0.3)" in " ".join(c.value for c in at.sidebar.caption)
    assert "PTR runs at" not in at.sidebar.select_slider(key="w_epsilon").label
    at.sidebar.selectbox(key="w_mechanism").set_value("Lap-Output").run()
    assert "total of one sent release" in at.sidebar.select_slider(key="w_epsilon").label
    assert "ℓ1 for Lap-Output" in at.sidebar.select_slider(key="w_alpha").help
    assert "(ε, δ) = (2, 0) at α = 0.1 (ℓ1 on the input)" in " ".join(c.value for c in at.sidebar.caption)


def test_the_obfuscator_selector_is_shown_for_the_posthoc_mechanisms_only() -> None:
    at = app("inference_privacy", query={"mech": "Gauss-Output"}, dataset=None)
    assert not [w for w in at.sidebar.selectbox if w.key == "w_model"]
    at.sidebar.selectbox(key="w_mechanism").set_value("PTR").run()
    assert at.sidebar.selectbox(key="w_model").value == "N-global"  # MNIST's default model
    assert at.sidebar.selectbox(key="w_certifier").value == "exact"  # φ's certifier: PTR's only
    at.sidebar.selectbox(key="w_mechanism").set_value("Global").run()
    assert at.sidebar.selectbox(key="w_model").value == "N-global"
    assert not [w for w in at.sidebar.selectbox if w.key == "w_certifier"]


def test_the_session_memo_computes_once_per_key_and_evicts_the_oldest() -> None:
    from streamlit.testing.v1 import AppTest

    def script() -> None:
        import streamlit as st

        from privlens.memo import memo

        calls = st.session_state.setdefault("calls", [])

        def compute(k: int):
            def run() -> int:
                calls.append(k)
                return k * k

            return run

        for k in (1, 2, 1, 3, 1):
            st.session_state.setdefault("out", []).append(memo("m", k, compute(k), max_entries=2))

    at = AppTest.from_function(script).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["out"] == [1, 4, 1, 9, 1]
    assert at.session_state["calls"] == [1, 2, 3, 1]  # 3 evicted 1 (the oldest), which is recomputed
    assert list(at.session_state["m"]) == [3, 1]
