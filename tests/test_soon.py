"""Numbers a page shows without waiting for them (privlens.background.soon): the comparison's live
accuracies and the Attack page's live attack come from one worker thread, "computing…" until they are
in, and then equal the readings computed in the page's own thread."""

from __future__ import annotations

import threading
import time

import pytest

from privcore.mechanisms import registry
from privlens import attack_view, background, pipelines
from privlens import mechanism_text as mt
from privlens.settings import Settings


@pytest.fixture
def background_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVLENS_WARM_UP", "on")


def _digits(epsilon: float) -> tuple[Settings, pipelines.Loaded]:
    from privcore.defaults import default_model

    s = Settings(dataset="digits", model=default_model("digits"), epsilon=epsilon)
    pipe = pipelines.load(s.dataset, s.model, pipelines.models_dir())
    return s, pipelines.Loaded(pipe, s.dataset, s.model, None)


def test_a_job_is_computed_once_per_key_and_a_failure_is_said(background_on: None) -> None:
    calls: list[int] = []
    gate = threading.Event()

    def compute() -> int:
        calls.append(1)
        assert gate.wait(30)
        return 7

    key = ("test-soon", time.monotonic())
    first = background.soon(key, compute, name="test", wait_s=0.0)
    assert not first.done.is_set()  # the page is drawn without it
    gate.set()
    again = background.soon(key, compute, name="test", wait_s=30.0)
    assert again is first and again.value == 7 and calls == [1]
    failed = background.soon(("test-soon-fails", time.monotonic()), lambda: 1 / 0, name="test", wait_s=30.0)
    assert failed.value is None and failed.error.startswith("ZeroDivisionError")


def test_a_live_accuracy_soon_equals_the_one_computed_here(background_on: None) -> None:
    s, loaded = _digits(0.75)
    mech = next(m for m in registry.MECHANISMS if m.family == "posthoc" and not m.needs_certificate)
    _, pending = mt.live_accuracy_soon(mech, loaded.pipeline, s, dataset=s.dataset, model=s.model)
    now, pending = mt.live_accuracy_soon(mech, loaded.pipeline, s, dataset=s.dataset, model=s.model,
                                         wait_s=120.0)
    assert not pending and now is not None and now.reading is not None and now.reading.n
    here = mt.live_accuracy(mech, loaded.pipeline, s, dataset=s.dataset, model=s.model)
    assert now.reading == here.reading


def test_readings_are_computed_here_when_background_work_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVLENS_WARM_UP", "off")
    s, loaded = _digits(1.5)
    mech = registry.get(s.mechanism)
    now, pending = mt.live_accuracy_soon(mech, loaded.pipeline, s, dataset=s.dataset, model=s.model)
    assert not pending and now is not None
    reading, pending = attack_view.live_reading_soon(mech, loaded.pipeline, s, dataset=s.dataset,
                                                     model=s.model)
    assert not pending and reading == attack_view.live_reading(mech, loaded.pipeline, s, dataset=s.dataset,
                                                               model=s.model)


def test_a_pending_row_says_computing_and_is_not_ranked() -> None:
    from privlens import chooser

    posthoc = [m for m in registry.MECHANISMS if m.family == "posthoc" and not m.needs_certificate]
    s, loaded = _digits(1.0)
    ready = posthoc[0]
    look = ready.outlook(loaded.pipeline, ready.setting(epsilon=1.0, delta=s.delta, radius=s.radius))
    entries = [chooser.Entry(mechanism=ready, outlook=look, accuracy=None, pending=True),
               chooser.Entry(mechanism=posthoc[1], outlook="computing…", pending=True)]
    cmp = chooser.compare(entries, epsilon=1.0, alpha=s.alpha)
    rows = {r["mechanism"].lstrip("★ "): r for r in cmp.rows()}
    assert rows[ready.label]["accuracy [interval]"] == "computing…"
    assert rows[posthoc[1].label]["noise per coordinate"] == "computing…"
    assert rows[posthoc[1].label]["accuracy [interval]"] == "computing…"
    assert cmp.recommended == ready.name  # ranked among the rows that are in
    assert all(c.note != "computing…" for c in cmp.choices)
