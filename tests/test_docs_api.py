"""docs/python-api.md's example runs as written (≤ 10 lines), and the one-call API's results and
refusals (issue 19)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import privcore
from privcore.errors import ParameterError

ROOT = Path(__file__).resolve().parents[1]


def test_the_docs_example_runs_in_at_most_ten_lines(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert len([line for line in code.splitlines() if line.strip()]) <= 10
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PRIVLENS_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Global True ") and "Global" in lines[0].split(":", 1)[0]
    assert lines[0].endswith(" ()")  # the real MNIST digit on the default model: no domain warning
    assert re.fullmatch(r"phi=\d+\.\d{3} R\*=\d+\.\d{3} L=\d+\.\d{3} \(delta_p=\d+\.\d{3}\)", lines[1])
    assert lines[2] == "['format', 'guarantee', 'mechanism', 'model', 'outcome', 'parameters', 'value']"


def test_release_is_typed_frozen_and_public_only(tmp_path: Path) -> None:
    from sklearn.datasets import load_digits

    image = load_digits().images[3] / 16
    out = privcore.release(image, dataset="digits", epsilon=10.0, delta=1e-5, mechanism="ptr", cache=tmp_path,
                           rng=np.random.default_rng(0))
    cert = out.certification
    with pytest.raises(AttributeError):
        out.released = False  # frozen
    assert cert.r_star is not None
    assert cert.phi == pytest.approx(max(cert.r_star / 2, cert.r_star - cert.radius))
    assert cert.lipschitz <= cert.delta_p  # the test at R passed, so L(f, B(z, R)) ≤ Δp
    doc = json.loads(json.dumps(out.document()))
    assert doc["parameters"]["r_max"] == cert.r_max and doc["guarantee"]["epsilon"] == 10.0  # the total
    flat = json.dumps(doc)
    assert "phi" not in flat and "r_star" not in flat and str(cert.phi) not in flat
    if out.released:
        assert len(doc["value"]) == 8 and out.predicted_class in range(10)
    else:
        assert doc["value"] is None and out.predicted_class is None


def test_bad_input_is_refused_before_anything_is_computed(tmp_path: Path) -> None:
    image = np.zeros((8, 8))
    with pytest.raises(ParameterError, match="epsilon must be in"):
        privcore.release(image, dataset="digits", epsilon=0.0, delta=1e-5)
    with pytest.raises(ValueError, match=r"unknown dataset 'nope' \(known: digits"):
        privcore.certify(image, dataset="nope")
    with pytest.raises(ParameterError, match=r"image must have shape \(1, 8, 8\)"):
        privcore.certify(np.zeros((28, 28)), dataset="digits")
    with pytest.raises(ParameterError, match=r"image values must be in \[0, 1\]"):
        privcore.certify(image + 2.0, dataset="digits")
    with pytest.raises(FileNotFoundError):
        privcore.certify(tmp_path / "none.png", dataset="digits")


def test_the_documented_release_is_sent_at_a_time_that_does_not_depend_on_phi() -> None:
    """The documented release reuses a certification, docs/TRUST.md says why, and docs/CLI.md
    warns that a Ray cluster has no authentication."""
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    release_lines = [line for line in code.splitlines() if "privcore.release(" in line and '"ptr"' in line]
    assert release_lines and all("certification=cert" in line for line in release_lines)
    assert "min_seconds" in text and "DeadlineExceededError" in text
    cli = (ROOT / "docs" / "CLI.md").read_text(encoding="utf-8")
    scaling = cli.split("## Scaling out", 1)[1].split("\n## ", 1)[0]
    assert "no authentication by default" in scaling and "cluster you control" in scaling
    trust = (ROOT / "docs" / "TRUST.md").read_text(encoding="utf-8")
    assert "**Timing.**" in trust and "certification=cert" in trust
