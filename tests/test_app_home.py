"""The home page runs headless (streamlit.testing) and its numbers follow the shared sidebar via privcore."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from privcore.defaults import OPENING_EPSILON
from privcore.mechanisms import GaussInput, registry

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 180


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_home_page_runs_and_sigma_follows_the_epsilon_slider() -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception
    before = _metric(at, "Gauss-Input")
    assert before == f"σ = {GaussInput(epsilon=OPENING_EPSILON, delta=1e-5, alpha=0.1).sigma:.4g}"
    at.select_slider(key="w_epsilon").set_value(0.25).run()  # the sidebar's ε
    assert not at.exception
    after = _metric(at, "Gauss-Input")
    assert after != before
    assert after == f"σ = {GaussInput(epsilon=0.25, delta=1e-5, alpha=0.1).sigma:.4g}"
    at.select_slider(key="w_alpha_home").set_value(0.5).run()  # α on the page, shared with the sidebar
    assert (
        _metric(at, "Gauss-Input")
        == f"σ = {GaussInput(epsilon=0.25, delta=1e-5, alpha=0.5).sigma:.4g}"
    )
    assert at.query_params["alpha"] == "0.5" and at.query_params["eps"] == "0.25"


def test_default_settings_refuse_nothing_and_no_paper_only_row_is_shown() -> None:
    """Every registered mechanism runs at the default settings (no refusal, no error); the table lists
    the registry's mechanisms, not a calibration no page releases with."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception and not at.error
    assert not [i.value for i in at.info if "refused" in i.value]
    table = at.table[0].value
    assert not table["mechanism"].str.contains("classic").any()
    assert not table["now"].isin(["refused", "no model"]).any()


def test_a_page_that_does_not_exist_is_named_not_silently_home() -> None:
    """``?page=nonsense`` (and a path such as ``/nonsense``, checked in a browser by
    tests/test_pages_browser_text.py): an error names the value and the known pages; Home is shown."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["page"] = "nonsense"
    at.query_params["eps"] = "2.0"
    at.run()
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert "?page=nonsense" in error and "does not exist" in error
    assert "Release (`/release`)" in error and "Mechanism lab (`/mechanism_lab`)" in error
    assert at.title[0].value == "privlens" and at.metric  # Home, with the link's other settings
    assert "page" not in at.query_params and at.query_params["eps"] == "2.0"


def test_a_page_named_in_the_query_is_opened_with_the_other_settings() -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["page"] = "Trade-offs"
    at.query_params["eps"] = "2.0"
    at.run()
    assert not at.exception and not at.error
    assert at.title[0].value == "Trade-offs" and at.query_params["eps"] == "2.0"


def test_ldp_image_row_follows_the_datasets_image_size_and_metrics_wrap() -> None:
    """The LDP-Image row (the registry's, on the dataset's pixel classifier) states the sidebar's dataset's
    number of pixel values d (MNIST's 784, digits' 64) and its noise follows from it; the metrics sit in
    a wrapping row, each as wide as its text."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception
    table = at.table[0].value
    row = table[table["mechanism"].str.startswith("LDP-Image")].iloc[0]
    # the embedded default, real MNIST: 28×28
    assert "(d = 784;" in row["noise"] and row["model"] == "mnist/ip-cnn"
    assert row["now"] == f"b = {784 / OPENING_EPSILON:g}"  # d/ε at the opening ε
    assert "d = 64" not in " ".join(table["noise"])
    def blocks(node):  # every block under the page's main area (the table sits in a fragment)
        for child in getattr(node, "children", {}).values():
            yield child
            yield from blocks(child)

    (row_of_metrics,) = [
        b
        for b in blocks(at.main)
        if getattr(b, "type", "") == "flex_container" and b.proto.flex_container.wrap
        and b.children and all(getattr(c, "type", "") == "metric" for c in b.children.values())
    ]
    # one metric per registered mechanism, in a wrapping row: never cut to "σ = 0.3…"
    assert len(row_of_metrics.children) == len(registry.MECHANISMS) == len(at.metric)
    at.selectbox(key="w_dataset").set_value("digits").run()
    table = at.table[0].value
    row = table[table["mechanism"].str.startswith("LDP-Image")].iloc[0]
    assert "(d = 64;" in row["noise"] and row["now"] == f"b = {64 / OPENING_EPSILON:g}"
    assert "d = 784" not in " ".join(table["noise"]) and "784" not in " ".join(table["now"])
    if "fashion-mnist" in at.selectbox(key="w_dataset").options:
        at.selectbox(key="w_dataset").set_value("fashion-mnist").run()
        table = at.table[0].value
        row = table[table["mechanism"].str.startswith("LDP-Image")].iloc[0]
        assert "(d = 784;" in row["noise"] and row["now"] == f"b = {784 / OPENING_EPSILON:g}"


def test_home_noise_is_each_registered_mechanisms_outlook_on_the_sidebars_model() -> None:
    """Home's noise per mechanism is the registry mechanism's outlook on the sidebar's dataset/model at
    its (ε, δ, R, α) — the Release page's numbers — not a Lipschitz constant of Home's own."""
    from privcore.defaults import default_model
    from privcore.models.catalogue import default_models_dir

    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"dataset": "digits", "eps": "2.0", "R": "0.5"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not [w for w in at.select_slider if "μ" in str(w.label)]  # no slider of its own
    model = default_model("digits")  # the sidebar's model on digits
    for mech in registry.MECHANISMS:
        names = mech.parameter_names
        setting = mech.setting(epsilon=2.0, delta=1e-5, radius=0.5 if "radius" in names else None,
                               alpha=0.1 if "alpha" in names else None)
        target = mech.load(dataset="digits", model=model if mech.family == "posthoc" else None,
                           models_dir=str(default_models_dir()))
        scale = mech.outlook(target, setting).noise_scale
        assert _metric(at, mech.label).endswith(f" = {scale:.4g}"), (mech.name, _metric(at, mech.label))
