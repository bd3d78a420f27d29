"""Home's noise table computed in the background: pending rows first, then the same rows as computed
in the page's own thread."""

from __future__ import annotations

import os

import pytest

from privcore.mechanisms import registry
from privlens import noise_table, pipelines
from privlens.settings import Settings


@pytest.fixture
def background_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVLENS_WARM_UP", "on")


def _loaded(s: Settings) -> pipelines.Loaded:
    pipe = pipelines.load(s.dataset, s.model, pipelines.models_dir())
    return pipelines.Loaded(pipe, s.dataset, s.model, None)


def test_rows_soon_fill_in_and_equal_the_rows_computed_here(background_on: None) -> None:
    from privcore.defaults import default_model

    s = Settings(dataset="digits", model=default_model("digits"), epsilon=0.75)
    loaded = _loaded(s)
    first, _ = noise_table.noise_rows_soon(s, loaded, wait_s=0.0)
    assert [r.name for r in first] == [m.name for m in registry.MECHANISMS]
    assert all(r.now == "computing…" for r in first if r.pending)
    rows, pending = noise_table.noise_rows_soon(s, loaded, wait_s=120.0)  # the same job, now finished
    assert not pending and not any(r.pending for r in rows)
    assert rows == noise_table.noise_rows(s, loaded)


def test_rows_are_computed_here_when_background_work_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from privcore.defaults import default_model

    monkeypatch.setenv("PRIVLENS_WARM_UP", "off")
    s = Settings(dataset="digits", model=default_model("digits"), epsilon=1.5)
    rows, pending = noise_table.noise_rows_soon(s, _loaded(s), wait_s=0.0)
    assert not pending and rows == noise_table.noise_rows(s, _loaded(s))


def test_the_warm_up_leaves_the_opening_views_accuracies_in_the_memo(background_on: None) -> None:
    """After :func:`privlens.warmup.prepare_opening`, the Release page's first reading of every mechanism
    that needs no per-image certificate is a memo hit (same model objects, same setting)."""
    from privcore.defaults import default_model
    from privcore.mechanisms import peek_accuracy
    from privlens import mechanism_text, warmup
    from privlens import mechanism_view as mv

    model = default_model("digits")
    warmup.prepare_opening("digits", model)
    s = Settings(dataset="digits", model=model)
    views = mv.inference_views(s, "digits", None)
    checked = 0
    for mech in registry.MECHANISMS:
        if mech.needs_certificate:
            continue
        if mech.family == "posthoc":
            target, name = _loaded(s).pipeline, model
        else:
            target, name = views[mech.name].target, views[mech.name].model
        hit = peek_accuracy(mech, target, mv.setting(mech, s), dataset="digits", model=name,
                            n=mechanism_text.LIVE_IMAGES)
        assert hit is not None, mech.name
        checked += 1
    assert checked == sum(not m.needs_certificate for m in registry.MECHANISMS)


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="thread priorities are a POSIX call")
def test_background_threads_run_at_the_lowest_priority_and_the_page_keeps_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A background thread (φ tables, certifications) yields the cores to the page the user waits for, at
    nice 19 unless ``PRIVLENS_BACKGROUND_NICE`` says otherwise; a bad value is named, and starts nothing."""
    import threading

    from privcore.validation import ParameterError
    from privlens import background

    def nice_seen() -> int:
        seen: dict[str, int] = {}

        def record() -> None:
            seen["nice"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

        background.start(record, name="privlens-test-priority").join(timeout=30)
        return seen["nice"]

    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    monkeypatch.delenv("PRIVLENS_BACKGROUND_NICE", raising=False)
    assert background.BACKGROUND_NICE == 19 and nice_seen() == 19
    for value, nice in ((" 7 ", 7), ("0", before)):
        monkeypatch.setenv("PRIVLENS_BACKGROUND_NICE", value)
        assert nice_seen() == nice
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before
    started = threading.active_count()
    for bad in ("20", "-1", "low", "1.5", "١"):
        monkeypatch.setenv("PRIVLENS_BACKGROUND_NICE", bad)
        named = rf"PRIVLENS_BACKGROUND_NICE must be an integer in \[0, 19\], got '{bad}'"
        with pytest.raises(ParameterError, match=named):
            background.start(lambda: None, name="privlens-test-bad-priority")
    assert threading.active_count() == started


def test_the_warm_up_reads_the_pipeline_the_pages_hold(background_on: None) -> None:
    """The pages' model cache can outlive the library's (each keeps 8): the warm-up must fill the memo for
    the object the pages hold, or their first reading misses it."""
    from privcore.defaults import default_model
    from privcore.mechanisms import peek_accuracy
    from privcore.mechanisms.posthoc import load_pipeline_cached
    from privlens import mechanism_text, warmup
    from privlens import mechanism_view as mv

    model = default_model("digits")
    s = Settings(dataset="digits", model=model, epsilon=0.3)
    held = _loaded(s).pipeline  # the pages' object
    load_pipeline_cached.cache_clear()  # the library's cache let it go meanwhile
    warmup.prepare_opening("digits", model)
    mech = registry.get("Global")
    assert peek_accuracy(mech, held, mv.setting(mech, Settings(dataset="digits", model=model)),
                         dataset="digits", model=model, n=mechanism_text.LIVE_IMAGES) is not None
