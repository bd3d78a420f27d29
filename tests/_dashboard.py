"""Helpers shared by the dashboard tests (AppTest and browser): not a test module itself."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
ENTRY = str(ROOT / "tests" / "_entry" / "run_app.py")  # app.py, run from a folder without pages/
TIMEOUT = 180


def default_radius() -> float:
    """The sidebar's R on :data:`DATASET`: its registry radius (the shipped cards' R)."""
    from privcore.data import get_spec

    return float(get_spec(DATASET).radius)


def isolate(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory, *, results: bool = True
) -> Path:
    """Point φ's disk cache at one directory per test session (so the first certification really
    runs once) and the experiment results at synthetic CSVs (or at an empty directory)."""
    base = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("PRIVLENS_CACHE_DIR", str(base / "phi-cache"))
    root = base / ("results" if results else "no-results")
    if results and not (root / "digits" / "table1.csv").exists():
        write_results(root / "digits")
    root.mkdir(exist_ok=True)
    monkeypatch.setenv("PRIVLENS_RESULTS_DIR", str(root))
    return root


#: The dataset the page tests run on unless they say otherwise: scikit-learn's 8×8 digits, small and
#: fast to certify (the embedded default, real MNIST, is tested by name: ``dataset=None``).
DATASET = "digits"


def app(
    page: str | None = None, *, query: dict[str, str] | None = None, dataset: str | None = DATASET
) -> AppTest:
    """Run app.py (optionally with URL query parameters; ``dataset`` added unless the query names one,
    None: the embedded default), then switch to ``pages/<page>.py``."""
    at = AppTest.from_file(ENTRY, default_timeout=TIMEOUT)
    query = dict(query or {})
    if dataset is not None:
        query.setdefault("dataset", dataset)
    if query:
        at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    if page is not None:
        at.switch_page(str(ROOT / "pages" / f"{page}.py")).run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def send(at: AppTest) -> AppTest:
    """Press the Release page's Send button (charges the ledger for the draw on screen)."""
    at.button(key="send").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def send_ip(at: AppTest) -> AppTest:
    """Press the Inference-privacy page's three Send buttons."""
    for mech in ("Gauss-Input", "Gauss-Output", "Lap-Output"):
        at.button(key=f"ip_send_{mech}").click().run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def held(at: AppTest, match: Callable[[Any], bool]) -> list[Any]:
    """Every object held anywhere in the session state (through dicts, sequences, privlens
    dataclasses and the API's Release and Certification) that ``match`` accepts: what a page keeps
    between reruns."""
    found: dict[int, Any] = {}

    def walk(obj: Any) -> None:
        if match(obj):
            found[id(obj)] = obj
        elif isinstance(obj, dict):
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list | tuple | set | frozenset):
            for v in obj:
                walk(v)
        elif dataclasses.is_dataclass(obj) and type(obj).__module__.startswith(
            ("privlens", "privcore.api", "privcore.mechanisms.protocol", "privcore.mechanisms.ptr_release")
        ):
            for f in dataclasses.fields(obj):
                walk(getattr(obj, f.name))

    walk(at.session_state.to_dict())
    return list(found.values())


def ledger(at: AppTest) -> list:
    """The session's ledger rows (empty before any send)."""
    return list(at.session_state["privlens_ledger"]) if "privlens_ledger" in at.session_state else []


def metric(at: AppTest, label: str) -> str:
    """The value of the metric called ``label``."""
    return next(m.value for m in at.metric if m.label == label)


def texts(at: AppTest) -> str:
    """All markdown, alerts and captions of the page as one string."""
    parts = [
        e.value
        for kind in ("markdown", "caption", "success", "error", "warning", "info")
        for e in getattr(at, kind)
    ]
    return "\n".join(str(p) for p in parts)


def chart_specs(at: AppTest) -> list[str]:
    """The plotly figure JSON of every chart on the page."""
    return [c.proto.spec for c in at.get("plotly_chart")]


def figures(at: AppTest) -> list:
    """Every chart of the page as a plotly Figure (typed arrays decoded: ``trace.x`` is a sequence)."""
    import json

    import plotly.graph_objects as go

    return [go.Figure(_decoded(json.loads(spec))) for spec in chart_specs(at)]


def _decoded(obj):
    """A figure dict with plotly's base64 typed arrays ({"bdata", "dtype"}) as lists of numbers."""
    import base64

    if isinstance(obj, dict):
        if set(obj) >= {"bdata", "dtype"}:
            arr = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=np.dtype(obj["dtype"]))
            if "shape" in obj:  # written as "3, 4"
                arr = arr.reshape(tuple(int(n) for n in str(obj["shape"]).split(",") if n.strip()))
            return arr.tolist()
        return {k: _decoded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decoded(v) for v in obj]
    return obj


def write_results(folder: Path) -> None:
    """Small experiment CSVs in the documented format (data/results/README.md) for the digits dataset."""
    folder.mkdir(parents=True, exist_ok=True)
    eps = [1.0, 2.0, 5.0, 10.0, math.inf]
    rows = []
    for ob, top in (("ARL-C-N", 0.90), ("Encoder", 0.93)):
        for e in eps:
            rate = 1.0 if math.isinf(e) else min(1.0, 0.2 * e)
            acc = top if math.isinf(e) else 0.1 + (top - 0.1) * min(1.0, e / 6)
            rows.append(
                {
                    "dataset": "digits",
                    "obfuscator": ob,
                    "epsilon": e,
                    "delta": 0.05,
                    "radius": 0.25,
                    "delta_p": 2.0,
                    "noise_scale": 0.0 if math.isinf(e) else 0.5 / e,
                    "accuracy": acc,
                    "accuracy_bot_wrong": acc * 0.9,
                    "accuracy_released": top,
                    "release_rate": rate,
                    "n_test": 360,
                    "n_released": int(360 * rate),
                    "certifier": "exact",
                    "seed": 0,
                }
            )
    pd.DataFrame(rows).to_csv(folder / "table1.csv", index=False)
    rows = [
        {
            "dataset": "digits",
            "method": m,
            "epsilon": e,
            "guarantee": "eps-LDP",
            "accuracy": 0.9 if math.isinf(e) else 0.1 + 0.02 * e,
            "release_rate": 1.0,
            "noise_scale": 1.0,
            "n_test": 360,
            "seed": 0,
        }
        for m in ("LDP-Image", "LDP-Embedding")
        for e in (1.0, 2.0, 5.0, 7.0, math.inf)
    ]
    pd.DataFrame(rows).to_csv(folder / "table2.csv", index=False)
    rows = [
        {
            "dataset": "digits",
            "obfuscator": "ARL-C-N",
            "radius": r,
            "epsilon": e,
            "delta_p": 2.0,
            "noise_scale": 0.0,
            "ssim": 0.9 if math.isinf(e) else min(0.9, 0.1 * e / r),
            "psnr": 20.0,
            "psnr_paper": 68.1,
            "l1": 0.1,
            "l2": 0.02,
            "ssim_std": 0.1,
            "psnr_std": 1.0,
            "l1_std": 0.01,
            "l2_std": 0.01,
            "n_eval": 50,
            "release_rate": 0.5,
            "n_train_attack": 500,
            "seed": 0,
        }
        for r in (0.1, 0.25, 0.5)
        for e in eps
    ]
    pd.DataFrame(rows).to_csv(folder / "attack.csv", index=False)
    rows = [
        {
            "dataset": "digits",
            "arl_alpha": a,
            "radius": r,
            "lipschitz_mean": 3 * (1 - a) + r,
            "lipschitz_std": 0.2,
            "lipschitz_lo": 3 * (1 - a) + r - 0.05,
            "lipschitz_hi": 3 * (1 - a) + r + 0.05,
            "lipschitz_lower_mean": 2 * (1 - a),
            "n_points": 20,
            "certifier": "exact",
        }
        for a in (0.0, 0.5, 0.99)
        for r in (0.1, 0.25)
    ]
    pd.DataFrame(rows).to_csv(folder / "fig2.csv", index=False)
    rows = []
    for mech, model in (("Gauss-Input", "ip-cnn-gauss-input"), ("Lap-Output", "ip-lipschitz-l1")):
        rows += [
            {
                "dataset": "digits",
                "sweep": "alpha",
                "model": model,
                "mechanism": mech,
                "epsilon": 1.0,
                "delta": 1e-5,
                "alpha": a,
                "calibration": "analytic",
                "noise": a,
                "lipschitz": 1.0,
                "accuracy_mean": 0.9 - a,
                "accuracy_std": 0.01,
                "n_draws": 15,
                "n_test": 360,
            }
            for a in (0.01, 0.1, 0.2)
        ]
        rows += [
            {
                "dataset": "digits",
                "sweep": "epsilon",
                "model": model,
                "mechanism": mech,
                "epsilon": e,
                "delta": 1e-5,
                "alpha": 0.1,
                "calibration": "analytic",
                "noise": 0.1 / e,
                "lipschitz": 1.0,
                "accuracy_mean": 0.5 + 0.04 * e,
                "accuracy_std": 0.01,
                "n_draws": 15,
                "n_test": 360,
            }
            for e in (0.1, 1.0, 10.0)
        ]
    pd.DataFrame(rows).to_csv(folder / "ip.csv", index=False)


def sample_png() -> bytes:
    """A shipped digits sample (PNG bytes)."""
    return sorted((ROOT / "data" / "samples" / "digits").glob("*.png"))[0].read_bytes()


def rgba_png() -> bytes:
    """An 8×8 RGBA PNG whose left half is transparent."""
    import io

    from PIL import Image

    arr = np.zeros((8, 8, 4), np.uint8)
    arr[2:6, 2:6, :3] = 255
    arr[..., 3] = 255
    arr[:, :4, 3] = 0
    buf = io.BytesIO()
    Image.fromarray(arr, mode="RGBA").save(buf, format="PNG")
    return buf.getvalue()
