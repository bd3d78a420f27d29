"""The local-DP baselines on the dashboard (AppTest, digits): every page that lists every mechanism shows
them through the registry, with a live accuracy in the comparison, never ranked against the posthoc
mechanisms (another neighbourhood: every pair of inputs); a sent release is charged over every pair of
inputs in the ledger, and the report and the Accountant page read such a guarantee."""

from __future__ import annotations

import pytest

from privcore.mechanisms import registry
from tests._dashboard import ROOT, app, isolate, ledger, send, texts

#: the mechanisms whose guarantee covers every pair of inputs (they take neither R nor α)
LOCAL = [m for m in registry.MECHANISMS if not ({"radius", "alpha"} & set(m.parameter_names))
         and m.spent(m.setting(epsilon=1.0)).all_pairs]


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    isolate(monkeypatch, tmp_path_factory)


def _table(at, column: str) -> dict[str, dict]:
    frame = next(t.value for t in at.table if column in t.value.columns)
    return {str(r["mechanism"]).removeprefix("★ "): r for r in frame.to_dict("records")}


def test_the_registry_has_local_dp_mechanisms_on_both_pages() -> None:
    assert {m.page for m in LOCAL} == {"release", "inference_privacy"}


def test_the_comparison_shows_them_with_a_live_accuracy_and_never_ranks_them() -> None:
    posthoc = next(m for m in LOCAL if m.page == "release")
    at = app("release", query={"mech": posthoc.name, "eps": "8"})
    rows, details = _table(at, "accuracy [interval]"), _table(at, "ranked")
    for m in LOCAL:
        assert "n = " in rows[m.label]["accuracy [interval]"], rows[m.label]
        assert details[m.label]["ranked"].startswith("no") and details[m.label]["neighbourhood"] == (
            "every pair of inputs")
    recommended = next(e.value for e in at.success if e.value.startswith("**Recommended: "))
    assert not any(m.label in recommended.split(".**")[0] for m in LOCAL), recommended
    send(at)
    (row,) = ledger(at)
    assert row["guarantee"].all_pairs and row["guarantee"].epsilon == 8.0
    assert row["label"].startswith(f"Release page: {posthoc.name} ε=8, release #1")
    assert "R=" not in row["label"] and "α=" not in row["label"]
    assert "over every pair of inputs" in texts(at)


def test_the_inference_page_sends_the_image_baseline_and_the_accountant_reads_it() -> None:
    image = next(m for m in LOCAL if m.page == "inference_privacy")
    at = app("inference_privacy", query={"mech": image.name, "eps": "8"})
    at.button(key=f"ip_send_{image.name}").click().run()
    assert not at.exception, [e.value for e in at.exception]
    (row,) = ledger(at)
    assert row["guarantee"].all_pairs and row["label"].startswith(f"IP page: {image.name} ε=8, release #1")
    at.switch_page(str(ROOT / "pages" / "accountant.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "a guarantee over every pair of inputs has none to widen" in texts(at)


def test_home_lists_every_mechanism_once() -> None:
    at = app("home", query={"eps": "8"})
    labels = [str(r) for r in next(t.value for t in at.table if "now" in t.value.columns)["mechanism"]]
    assert labels == [m.label for m in registry.MECHANISMS]


def test_the_report_and_the_sidebar_text_say_every_pair() -> None:
    from privlens import budget, report
    from privlens.settings import Settings

    for m in LOCAL:
        s = Settings(dataset="digits", mechanism=m.name, epsilon=2.0)
        rows = {r["setting"]: r["value"] for r in report.settings_rows(s)}
        assert rows["pairs protected"].startswith("every pair") and not any(k.startswith(("R,", "α,"))
                                                                              for k in rows)
        assert "over every pair of inputs" in budget.spent_text(s)
