"""The honest chooser (issue 31, item 4) on the Release page (AppTest, the shipped digits models).

The sidebar lists the registry's mechanisms and defaults to the certified global mechanism, which
releases at the default settings; the sidebar's ε is the total of a sent release's guarantee (PTR runs
at ε/2 and the ledger charges (ε, δ/2, R)); the comparison panel names Global for ARL-C-N with both
noise scales and their ratio G/(2Δp); Global draws nothing before Send and each Send draws and charges
once; its JSON carries the API's keys.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

import privcore.mechanisms.global_mechanism as global_module
import privcore.mechanisms.ptr as ptr_module
from privcore.defaults import OPENING_EPSILON
from privcore.mechanisms import GlobalRelease, registry
from privlens import ui
from privlens.settings import MECHANISMS
from tests._dashboard import ROOT, app, default_radius, held, isolate, ledger, metric, send, texts


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    isolate(monkeypatch, tmp_path_factory)


def _ledger(at: AppTest) -> list:
    return ledger(at)


def _global_draws(at: AppTest) -> list[GlobalRelease]:
    """Every GlobalRelease held anywhere in the session."""
    return held(at, lambda o: isinstance(o, GlobalRelease))


def _comparison(at: AppTest, column: str = "noise per coordinate") -> Any:
    """The comparison panel's table (``column`` "ranked": its details, in the expander below it)."""
    return next(d.value for d in [*at.table, *at.dataframe] if column in d.value.columns)


def test_the_sidebar_lists_the_registry_and_defaults_to_global_which_releases_at_the_defaults() -> None:
    at = app("release")
    box = at.sidebar.selectbox(key="w_mechanism")
    assert box.options == [registry.get(n).label for n in MECHANISMS]  # registry order and labels
    assert box.value == "Global" and at.query_params["mech"] == "Global"
    s = at.session_state["privlens_settings"]
    assert (s.mechanism, s.epsilon, s.delta) == ("Global", OPENING_EPSILON, 1e-5)
    assert metric(at, "P[this image is released]") == "100 %"
    assert not any(w.value for w in at.warning)
    send(at)
    assert any(e.value.startswith("**Released**") for e in at.success), texts(at)
    (row,) = _ledger(at)
    g = row["guarantee"]
    assert (g.epsilon, g.delta, g.radius) == (OPENING_EPSILON, 0.0, default_radius())  # (ε, 0, R): total ε
    assert f"Global ε={OPENING_EPSILON:g}" in row["label"] and "(sent)" in row["label"]
    assert any(m.value.startswith("Released vector") for m in at.markdown)


def test_ptr_runs_at_half_the_slider_epsilon_and_the_ledger_records_epsilon_and_half_delta(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = ptr_module.propose_test_release
    asked: list[float] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs["epsilon"])
        return real(*args, **kwargs)

    monkeypatch.setattr(ptr_module, "propose_test_release", spy)  # the API's draw
    at = app("release", query={"mech": "PTR", "eps": "3.0", "delta": "1e-05"})
    R = default_radius()
    assert "PTR runs at ε/2 = 1.5" in texts(at) and "(ε, δ/2, R) = (3, 5e-06" in texts(at)
    send(at)
    assert asked == [1.5]  # PTR itself ran at ε/2
    (row,) = _ledger(at)
    g = row["guarantee"]
    assert (g.epsilon, g.delta, g.radius) == (3.0, 5e-6, R)  # the guarantee the library returned
    assert "PTR at ε/2=1.5 (total ε=3)" in row["label"]
    at.switch_page(str(ROOT / "pages" / "accountant.py")).run()
    assert not at.exception
    assert "PTR at ε/2 = 1.5 (total ε = 3)" in texts(at)


def test_the_comparison_names_global_with_both_noise_scales_and_their_ratio() -> None:
    at = app("release", query={"eps": "1.0"})
    table = _comparison(at)
    rows = table.to_dict("records")
    by = {str(row["mechanism"]).removeprefix("★ "): row for row in rows}
    assert list(by) == [registry.get(n).label for n in MECHANISMS]
    assert rows[0]["mechanism"] == "★ Global (certified)"  # the recommended one
    more = _comparison(at, "ranked").to_dict("records")
    details = {str(r["mechanism"]).removeprefix("★ "): r for r in more}
    card = json.loads((ROOT / "models" / "digits" / "obfuscator-ARL-C-N.json").read_text())
    delta_p = float(card["delta_p"]["proposed"])
    g = float(details["Global (certified)"]["calibrated to"].split()[2])  # the G this process certified
    assert g == pytest.approx(card["global_lipschitz"]["value"], rel=1e-6)  # (the card's, verified)
    R = default_radius()
    assert by["Global (certified)"]["noise per coordinate"].startswith(f"{g * R / 1.0:.4g} = G·R/ε")
    assert by["PTR"]["noise per coordinate"].startswith(f"{delta_p * R / 0.5:.4g} = Δp·R/(ε/2)")  # at ε/2
    assert by["Global (certified)"]["P[released]"].startswith("100 %")
    assert by["PTR"]["P[released]"] == "not certified yet"  # certifying costs time: the page asks first
    assert details["PTR"]["guarantee (ε, δ, radius)"] == f"(1, 5e-06, {R:g})"
    assert details["Global (certified)"]["guarantee (ε, δ, radius)"] == f"(1, 0, {R:g})"
    for name in registry.names(family="inference"):
        assert details[registry.get(name).label]["ranked"].startswith("no")
    assert "different guarantee, not comparable" in texts(at)
    (rec,) = [e.value for e in at.success if e.value.startswith("**Recommended")]
    assert rec.startswith("**Recommended: Global (certified).**")
    assert f"G/(2Δp) = **{g / (2 * delta_p):.3f}×** PTR's" in rec and 0.4 < g / (2 * delta_p) < 0.7
    assert "privlens_phi" not in at.session_state or not at.session_state["privlens_phi"]  # no solve yet
    at.button(key="compare_certify_ptr").click().run()  # the user asks: PTR's φ is certified now
    assert not at.exception
    assert _comparison(at)["P[released]"][1].endswith("% (else ⊥)")
    assert not _ledger(at)  # comparing draws and charges nothing


def test_global_holds_no_draw_before_send_and_each_send_draws_and_charges_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = global_module.GlobalPlan.release
    calls: list[float] = []

    def counting(self: Any, *args: Any, **kwargs: Any) -> GlobalRelease:
        calls.append(self.epsilon)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(global_module.GlobalPlan, "release", counting)  # the API's draw
    offered: list[tuple[str, Any]] = []
    real_json = ui.download_json

    def spy(label: str, doc: Any, **kwargs: Any) -> None:
        offered.append((kwargs["key"], doc))
        real_json(label, doc, **kwargs)

    monkeypatch.setattr(ui, "download_json", spy)
    at = app("release")
    at.run()  # a rerun
    at.select_slider(key="w_epsilon").set_value(2.0).run()  # a slider move and back
    at.select_slider(key="w_epsilon").set_value(1.0).run()
    assert calls == [] and _global_draws(at) == [] and not _ledger(at)
    assert not any(m.value.startswith("Released vector") for m in at.markdown)
    assert not [k for k, _ in offered if k == "dl_release"]
    for step in (1, 2):  # Send, then Send another: each a draw, each charged
        send(at)
        assert len(calls) == len(_ledger(at)) == len(_global_draws(at)) == step
    assert calls == [1.0, 1.0]
    doc = [d for k, d in offered if k == "dl_release"][-1]  # the JSON: the API's Release.document() keys
    assert doc["mechanism"] == "Global" and doc["outcome"] == "released" and len(doc["value"]) == 8
    assert {"global_lipschitz", "global_lipschitz_how", "clip_box", "radius", "sensitivity", "epsilon",
            "delta", "release_noise_scale"} <= set(doc["parameters"])
    assert doc["guarantee"]["delta"] == 0.0 and doc["guarantee"]["text"]
    assert "phi" not in str(doc)
