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
