"""Lipschitz page (AppTest): certified bounds around the current image against the radius, with the
exact points, Δp and the solver; the radius grid follows the sidebar's R."""

from __future__ import annotations

import pytest

from tests._dashboard import app, default_radius, isolate


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    isolate(monkeypatch, tmp_path_factory)


def test_bounds_are_ordered_and_follow_r() -> None:
    at = app("lipschitz")
    t = at.dataframe[0].value
    R = default_radius()
    assert list(t["radius"]) == pytest.approx([R * m for m in (0.125, 0.25, 0.5, 1, 1.5, 2, 3, 4)], abs=1e-6)
    tol = 1e-9 * t["upper (exact)"].abs().max()
    # lower ≤ exact upper ≤ LP ≤ interval (each relaxation contains the one before)
    assert (t["lower"] <= t["upper (exact)"] + tol).all()
    assert (t["upper (exact)"] <= t["lp_upper"] + tol).all() and (
        t["lp_upper"] <= t["interval_upper"] + tol
    ).all()
    # L over nested balls grows with r
    assert (t["upper (exact)"].diff().dropna() >= -tol).all()
    assert t["solver"].str.len().gt(0).all()  # which engine ran (gurobi, highs, enumeration, closed-form, …)
    assert len(at.get("plotly_chart")) == 2  # the bounds and Fig. 2
    # the global bound G over all activation patterns caps every exact value
    caption = next(c.value for c in at.caption if c.value.startswith("Global bound: G = "))
    g = float(caption.removeprefix("Global bound: G = ").split(",")[0])
    assert (t["upper (exact)"] <= g * (1 + 1e-3)).all()
    at.select_slider(key="w_radius").set_value(0.1).run()
    assert at.dataframe[0].value["radius"].iloc[3] == pytest.approx(0.1)


def test_fig2_bars_are_named_as_other_models_beside_this_one() -> None:
    from tests._dashboard import figures, texts

    at = app("lipschitz")
    fig2 = figures(at)[1]
    assert "not ARL-C-N" in fig2.layout.title.text
    names = {x for t in fig2.data for x in t.x}
    # the synthetic CSV has no obfuscator column: bars are named by their α; this model apart
    assert {"model with α = 0", "model with α = 0.5", "model with α = 0.99"} <= names
    assert "ARL-C-N (this model, your image)" in names
    assert "other obfuscators" in texts(at)
    # each radius's bars name their n (the CSV's n_points) in the legend; the hover adds the interval
    for bars, r in zip(fig2.data, ("0.1", "0.25"), strict=True):
        own = any("this model" in x for x in bars.x)
        assert bars.name == f"r = {r} (n = 20" + ("; this model: your image)" if own else ")")
    first = fig2.data[0]
    assert first.customdata[0][0].endswith("(95 % bootstrap interval)") and first.customdata[0][1] == (
        "mean over n = 20 test points"
    )
    # error bars: the stored 95 % bootstrap interval of each mean (± 0.05 here), none on this model's bar
    assert "95 %" in fig2.layout.yaxis.title.text
    for bars in fig2.data:
        assert bars.error_y.symmetric is False
        for name, up, down in zip(bars.x, bars.error_y.array, bars.error_y.arrayminus, strict=True):
            assert (up, down) == ((0.0, 0.0) if "this model" in name else pytest.approx((0.05, 0.05)))


def test_fig2_fits_1000_px_legend_below_and_slanted_labels() -> None:
    """At 1000 px the legend beside the bars squeezed them and the category labels overlapped: the legend
    sits below the plot, the labels are slanted and the axes make room for them."""
    from tests._dashboard import figures

    fig2 = figures(app("lipschitz"))[1]
    assert fig2.layout.legend.orientation == "h" and fig2.layout.legend.yref == "container"  # at the foot
    assert fig2.layout.xaxis.tickangle == -30 and fig2.layout.xaxis.automargin
    assert fig2.layout.yaxis.automargin


@pytest.fixture
def certify_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per call of :meth:`Certifier.certify` during the test (a spy around the real one)."""
    from privcore.lipschitz import Certifier

    calls: list[int] = []
    real = Certifier.certify

    def spy(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Certifier, "certify", spy)
    return calls


def test_a_shipped_samples_table_is_certified_once_per_server_an_upload_per_session(
    certify_calls: list[int],
) -> None:
    """The shipped sample is public: a second session reads its table without certifying. An upload is
    the user's: another session that uploads the same file certifies it again (nothing is shared)."""
    from tests._dashboard import sample_png
    from tests.test_pages_release import ROOT, _confirm, _upload

    calls = certify_calls
    first = app("lipschitz")
    second = app("lipschitz")  # another session, the same shipped sample
    assert first.dataframe[0].value.equals(second.dataframe[0].value)
    calls.clear()
    app("lipschitz")
    assert calls == []  # read from the server's memo
    per_session = []
    for _ in range(2):
        at = _confirm(_upload(app("release"), "mine.png", sample_png()))
        calls.clear()
        at.switch_page(str(ROOT / "pages" / "lipschitz.py")).run()
        assert not at.exception, [e.value for e in at.exception]
        per_session.append(len(calls))
    assert per_session[0] > 0 and per_session[1] == per_session[0]  # each session certifies its upload


def test_the_warm_up_certifies_the_table_a_new_session_opens_on(
    monkeypatch: pytest.MonkeyPatch, certify_calls: list[int],
) -> None:
    """:func:`privlens.warmup.prepare_lipschitz` fills the page's process-wide memo with the default
    sample's table at the opening R, outside any session: the page's first visit then certifies nothing
    and shows that table."""
    from privlens import memo, pipelines, warmup
    from tests._dashboard import DATASET

    memo._shared.clear()  # a fresh server process
    monkeypatch.setattr(warmup, "wait_for_quiet", lambda: None)
    monkeypatch.setenv("PRIVLENS_WARM_UP", "on")
    model = pipelines._catalogue(pipelines.models_dir())[DATASET][0]
    warmup.prepare_lipschitz(DATASET, model)
    assert certify_calls  # the warm-up certified the table
    certify_calls.clear()
    at = app("lipschitz")
    assert certify_calls == []  # every radius read from the warm-up's table
    assert list(at.dataframe[0].value["radius"]) == pytest.approx(
        [default_radius() * m for m in (0.125, 0.25, 0.5, 1, 1.5, 2, 3, 4)], abs=1e-6)


def test_a_session_missing_an_entry_being_computed_waits_for_it() -> None:
    """Two threads (the warm-up and a page) asking the process-wide memo for one entry at once: one
    computes, the other waits and reads that value; a failure stores nothing."""
    import threading
    import time

    from privlens.memo import shared_memo

    key = ("test-wait", time.monotonic())
    calls: list[int] = []
    started = threading.Event()

    def slow() -> int:
        calls.append(1)
        started.set()
        time.sleep(0.3)
        return 7

    got: list[int] = []
    other = threading.Thread(target=lambda: got.append(shared_memo("test", key, slow)))
    other.start()
    assert started.wait(30)
    assert shared_memo("test", key, slow) == 7
    other.join(30)
    assert got == [7] and calls == [1]
    with pytest.raises(ZeroDivisionError):
        shared_memo("test", ("fails", key), lambda: 1 // 0)
    assert shared_memo("test", ("fails", key), lambda: 3) == 3
