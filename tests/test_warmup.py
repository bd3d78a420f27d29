"""The dashboard's warm-up (privlens.warmup, issue 33.5): what it prepares for the default model is what
the pages then read, computed once per process."""

from __future__ import annotations

import pytest

from privcore._inflight import MISSING
from privlens import baselines, warmup


def test_prepare_default_leaves_g_the_domain_check_and_the_attack_baseline_ready(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from privcore.inputs.domain import _CHECKS
    from privcore.models.pipeline import load_pipeline

    monkeypatch.setattr(warmup, "wait_for_quiet", lambda: None)
    monkeypatch.delenv("PRIVLENS_WARM_UP", raising=False)
    monkeypatch.setattr(baselines, "_BASELINES", type(baselines._BASELINES)(4))
    warmup.prepare_default(str(warmup.models_dir()), "digits", "ARL-C-N")
    metrics, mean_image = baselines._BASELINES.peek("digits")
    assert len(metrics.ssim) == 360 and mean_image.shape == (1, 8, 8)  # every digits test image
    assert baselines.no_release_baseline("digits")[0] is metrics  # the page reads the same object
    pipe = load_pipeline("digits", "ARL-C-N", device="cpu")
    assert _CHECKS.peek(("digits", pipe.domain_digest)) is not MISSING


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
