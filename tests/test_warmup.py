"""The dashboard's warm-up (privlens.warmup, issue 33.5): what it prepares for the default model is what
the pages then read, computed once per process."""

from __future__ import annotations

import pytest

from privcore._inflight import MISSING
from privlens import baselines, warmup


def test_prepare_default_leaves_g_and_the_domain_check_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    from privcore.inputs.domain import _CHECKS
    from privcore.models.pipeline import load_pipeline

    monkeypatch.setattr(warmup, "wait_for_quiet", lambda: None)
    monkeypatch.delenv("PRIVLENS_WARM_UP", raising=False)
    warmup.prepare_default(str(warmup.models_dir()), "digits", "ARL-C-N")
    pipe = load_pipeline("digits", "ARL-C-N", device="cpu")
    assert _CHECKS.peek(("digits", pipe.domain_digest)) is not MISSING


def test_the_warm_up_leaves_the_attack_baseline_and_opening_reading_ready(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Attack page's no-release baseline and its live reading at the opening settings are in before
    the page asks: the page's own job is done and holds the reading the page computes."""
    from privcore.defaults import default_model
    from privcore.mechanisms import registry
    from privlens import attack_view, pipelines

    monkeypatch.setattr(warmup, "wait_for_quiet", lambda: None)
    monkeypatch.setenv("PRIVLENS_WARM_UP", "on")
    monkeypatch.setattr(baselines, "_BASELINES", type(baselines._BASELINES)(4))
    model = default_model("digits")
    warmup.prepare_baseline("digits")
    warmup.prepare_attack("digits", model)
    metrics, mean_image = baselines._BASELINES.peek("digits")
    assert len(metrics.ssim) == 360 and mean_image.shape == (1, 8, 8)  # every digits test image
    assert baselines.no_release_baseline("digits")[0] is metrics  # the page reads the same object
    s = warmup.opening_settings("digits", model)
    mech = registry.get(s.mechanism)
    target = pipelines.load("digits", model, pipelines.models_dir())
    job = attack_view.live_reading_job(mech, target, s, dataset="digits", model=model)
    assert job.done.is_set() and job.error is None
    assert job.value == attack_view.live_reading(mech, target, s, dataset="digits", model=model)


def test_the_warm_ups_settings_are_the_ones_a_new_session_opens_on() -> None:
    """What the warm-up prepares is keyed on the settings (R included, which every posthoc mechanism's
    setting holds): they are the sidebar's defaults on every dataset, the dataset's own R."""
    from privcore.data import get_spec
    from privlens import pipelines, ui
    from privlens.settings import settings_from_query

    models = pipelines._catalogue(pipelines.models_dir())
    default = ui.default_settings(models)
    assert warmup.opening_settings(default.dataset, default.model) == default
    for dataset, names in models.items():
        opened, problems = settings_from_query({"dataset": dataset}, default=default, models=models)
        assert problems == () and opened.model == names[0], dataset
        assert warmup.opening_settings(dataset, names[0]) == opened
        assert opened.radius == float(get_spec(dataset).radius)


def test_early_imports_are_third_party_only() -> None:
    """The early imports run alongside the script runs, so no module of this project may be among them
    (or imported by them): a page importing privcore meanwhile could then meet a cycle of import locks."""
    import subprocess
    import sys

    from privlens.warmup import EARLY_IMPORTS

    assert EARLY_IMPORTS and all(n.split(".")[0] not in ("privcore", "privlens", "pages", "app")
                                 for n in EARLY_IMPORTS)
    code = ("import importlib, sys\nfor n in sys.argv[1:]: importlib.import_module(n)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('privcore', 'privlens')))")
    out = subprocess.run([sys.executable, "-c", code, *EARLY_IMPORTS], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def test_torch_threads_default_to_one_and_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRIVLENS_TORCH_THREADS", raising=False)
    assert warmup.torch_threads() == warmup.TORCH_THREADS == 1
    monkeypatch.setenv("PRIVLENS_TORCH_THREADS", "3")
    assert warmup.torch_threads() == 3
    for bad in ("0", "-2", "two", ""):
        monkeypatch.setenv("PRIVLENS_TORCH_THREADS", bad)
        assert warmup.torch_threads() == 1


def test_the_early_imports_set_torch_threads_for_the_whole_process() -> None:
    """In a fresh process (torch's thread count is process-wide): after the early imports, a thread
    of the server's sees the configured count."""
    import os
    import subprocess
    import sys

    code = ("import threading, torch\nfrom privlens import warmup\nwarmup.import_early().join()\n"
            "seen = []\nt = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))\n"
            "t.start(); t.join(); print(seen[0])")
    for want in ("1", "2"):
        env = {**os.environ, "PRIVLENS_TORCH_THREADS": want, "PRIVLENS_WARM_UP": "off"}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env=env)
        assert out.returncode == 0 and out.stdout.strip().splitlines()[-1] == want, out.stderr


def test_the_warm_up_leaves_the_trade_offs_opening_curve_in_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    """After :func:`privlens.warmup.prepare_tradeoffs`, every point of the Trade-offs page's opening curve
    is a memo hit (the page's own model object, setting and n)."""
    import dataclasses

    from privcore.defaults import default_model
    from privcore.mechanisms import peek_accuracy, registry
    from privlens import mechanism_text, pipelines
    from privlens import mechanism_view as mv
    from privlens import tradeoff_view as tv
    from privlens.settings import Settings

    monkeypatch.setattr(warmup, "wait_for_quiet", lambda: None)
    monkeypatch.setenv("PRIVLENS_WARM_UP", "on")
    model = default_model("digits")
    tv._line.cache_clear()  # a Trade-offs test of this process may hold the curve: the readings then aged out
    warmup.prepare_tradeoffs("digits", model)
    s = Settings(dataset="digits", model=model)
    mech = registry.get(s.mechanism)
    target = pipelines.load("digits", model, pipelines.models_dir())
    at = mv.setting(mech, s)
    for eps in tv.GRID:
        hit = peek_accuracy(mech, target, dataclasses.replace(at, epsilon=eps), dataset="digits", model=model,
                            n=mechanism_text.LIVE_IMAGES)
        assert hit is not None, eps
