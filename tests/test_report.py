"""The session report (issue 16, item 9): one self-contained HTML file with the settings, the guarantee,
the sent release (nothing that was not sent), the curve at the current ε and the ledger; user text is
escaped. Built from the Release page's download button, lazily."""

from __future__ import annotations

import pytest

from privcore.mechanisms import Guarantee, Norm, Space
from privlens.report import session_report
from privlens.settings import Settings
from tests._dashboard import app, isolate, send


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    isolate(monkeypatch, tmp_path_factory)


def _g() -> Guarantee:
    return Guarantee(
        epsilon=2.0, delta=0.025, radius=0.25, space=Space.EMBEDDING, norm=Norm.LINF, mechanism="PTR"
    )


def test_report_escapes_user_text_and_holds_only_a_sent_release() -> None:
    evil = "<script>alert(1)</script>.png"
    ledger = [{"image": evil, "label": "Release page: release #1 (sent)", "guarantee": _g()}]
    kw = dict(
        settings=Settings(),
        guarantee_text="(2, 0.025, 0.25)",
        image_name=evil,
        input_png=b"\x89PNG fake",
        attacker_png=None,
        figures=[],
        ledger=ledger,
        totals=[{"image": evil, "total": "worst case", "total ε = Σεᵢ": 2.0}],
    )
    page = session_report(release=None, **kw)
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;.png" in page
    assert "Nothing was sent at these settings" in page and "Release page: release #1 (sent)" in page
    sent = session_report(release={"format": "privlens.release/1", "value": [0.5, -1.25]}, **kw)
    assert "privlens.release/1" in sent and "-1.25" in sent


def test_release_page_offers_the_report() -> None:
    """The button is there; what it downloads (built lazily on the click) is checked in a real browser
    by tests/test_browser.py, which AppTest cannot do."""
    at = app("release", query={"eps": "2.0"})
    (button,) = [b for b in at.get("download_button") if b.key == "dl_report"]
    assert button.proto.label == "Session report (HTML)"
    send(at)
    assert [b for b in at.get("download_button") if b.key == "dl_report"]


def test_the_reports_curve_marks_the_current_epsilon_from_table1() -> None:
    import math

    import pandas as pd

    from privlens.report import accuracy_figure
    from tests._dashboard import ROOT

    t1 = pd.read_csv(ROOT / "data" / "results" / "digits" / "table1.csv")  # the shipped results
    fig = accuracy_figure(t1, model="ARL-C-N", epsilon=2.0)
    (label,) = [a for a in fig.layout.annotations if a.text == "current ε = 2"]
    assert label.x == math.log10(2.0) and all(math.isfinite(x) for x in fig.data[0].x)
    assert (
        accuracy_figure(t1, model="nope", epsilon=2.0) is None
        and accuracy_figure(None, model="x", epsilon=1) is None
    )
    html = session_report(
        settings=Settings(),
        guarantee_text="g",
        image_name="x.png",
        input_png=None,
        release=None,
        attacker_png=None,
        figures=[fig],
        ledger=[],
        totals=[],
    )
    assert "current \\u03b5 = 2" in html and "plotly" in html.lower()  # plotly's JSON escapes ε


def test_the_reports_settings_are_words_and_only_those_that_apply() -> None:
    from privcore.mechanisms import registry
    from privlens.report import settings_rows

    s = Settings(mechanism="PTR", epsilon=2.0, delta=1e-5)
    ptr = {r["setting"]: r["value"] for r in settings_rows(s)}
    assert ptr["mechanism"] == registry.get("PTR").label
    assert ptr["ε, the total of one sent release"] == "2 (PTR runs at ε/2 = 1)"
    assert ptr["δ, PTR's parameter"].startswith("1e-05") and ptr["certifier of φ"] == "exact"
    assert "R, ℓ∞ radius in the embedding" in ptr and not any(k.startswith("α") for k in ptr)  # no α for PTR
    assert not {"mech", "eps", "cert", "R", "alpha"} & set(ptr)  # never the URL's keys
    glob = {r["setting"]: r["value"] for r in settings_rows(Settings(mechanism="Global"))}
    assert glob["δ"].startswith("0") and "certifier of φ" not in glob and "model (obfuscator)" in glob
    ip = {r["setting"]: r["value"] for r in settings_rows(Settings(mechanism="Gauss-Input", alpha=0.2))}
    assert ip["α, ℓ2 radius on the input"] == "0.2" and "R, ℓ∞ radius in the embedding" not in ip
    assert "model (obfuscator)" not in ip and ip["δ, the failure probability"] == "1e-05"


def test_the_reports_curve_has_axis_titles_n_delta_and_intervals() -> None:
    import pandas as pd

    from privlens.report import accuracy_figure
    from tests._dashboard import ROOT

    t1 = pd.read_csv(ROOT / "data" / "results" / "digits" / "table1.csv")
    fig = accuracy_figure(t1, model="ARL-C-N", epsilon=2.0, delta=1e-5)
    assert fig.layout.xaxis.title.text == "ε (log scale)" and "test accuracy" in fig.layout.yaxis.title.text
    (curve,) = [t for t in fig.data if t.name.startswith("ARL-C-N")]
    assert "n = 360" in curve.name and "δ = 0.05" in curve.name and "95 % interval" in curve.name
    assert "measured at δ = 0.05" in fig.layout.title.text  # the CSV's δ, not the sidebar's
    up, down = curve.error_y.array, curve.error_y.arrayminus
    assert len(up) == len(curve.x) and all(u > 0 for u in up) and all(d > 0 for d in down)
    glob = pd.read_csv(ROOT / "data" / "results" / "digits" / "table1-global.csv")
    fig = accuracy_figure(glob, model="ARL-C-N", epsilon=2.0, column="epsilon_total", mechanism="Global")
    assert "δ = 0" in fig.data[0].name and fig.data[0].error_y.array is not None


def test_a_long_json_line_wraps_instead_of_widening_the_report() -> None:
    long = {"format": "privlens.release/1", "guarantee": {"text": "word " * 400}}
    page = session_report(
        settings=Settings(),
        guarantee_text="g",
        image_name="x.png",
        input_png=None,
        release=long,
        attacker_png=None,
        figures=[],
        ledger=[],
        totals=[],
    )
    assert "pre{white-space:pre-wrap;overflow-wrap:anywhere" in page and "<pre>" in page
    assert "<div class='scroll'><table" in page  # a wide table scrolls in its own box
