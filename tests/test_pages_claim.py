"""Release and Inference privacy pages: the audit's empirical ε beside the stated ε (nearest audited row,
labelled so; a row at another δ says so), and PTR's live accuracy from the test images' φ table, computed
in the background (AppTest on digits)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from privlens import evaluation
from privlens.audit_claim import evidence
from tests._dashboard import app, texts, write_results

AUDIT = pd.DataFrame(
    [
        # mechanism, pair, ε, δ, distance, n, bound, control
        ("Global", "worst-case", 1.0, 0.0, 0.25, 20000, 0.91, False),
        ("Global", "worst-case", 4.0, 0.0, 0.25, 20000, 3.70, False),
        ("Global", "worst-case", 1.0, 0.0, 0.25, 20000, 1.90, True),  # a control: never shown
        ("PTR", "worst-case", 4.0, 0.025, 0.25, 100000, 3.28, False),
        ("PTR", "model", 2.0, 0.025, 0.25, 100000, 0.82, False),
        ("Gauss-Output", "worst-case", 1.0, 1e-5, 0.1, 100000, 0.61, False),
        ("Lap-Output", "worst-case", 1.0, 0.0, 1.0, 100000, 0.97, False),
        ("Lap-Output", "model", 1.0, 0.0, 1.0, 100000, 0.15, False),
        ("LDP-Image", "worst-case", 2.0, 0.0, 64.0, 12755, 0.0, False),
    ],
    columns=["mechanism", "pair", "epsilon_claimed", "delta_claimed", "distance", "n_releases", "epsilon_lb",
             "control"],
).assign(dataset="digits", confidence=0.95, passed=True)


@pytest.fixture
def results(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    write_results(tmp_path / "digits")
    AUDIT.to_csv(tmp_path / "digits" / "audit.csv", index=False)
    monkeypatch.setenv("PRIVLENS_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("PRIVLENS_CACHE_DIR", str(tmp_path / "phi-cache"))
    return tmp_path


def test_the_nearest_audited_row_is_labelled_and_a_missing_one_said_in_words(results: Path) -> None:
    at_one = evidence("digits", "Global", epsilon=1.0, model="ARL-C-N")
    assert [r.bound for r in at_one.rows] == [0.91] and at_one.rows[0].exact  # not the control's 1.90
    assert "at this ε" in at_one.rows[0].text() and "false-alarm rate ≤ 5%" in at_one.rows[0].text()
    near = evidence("digits", "Global", epsilon=3.0, model="ARL-C-N").rows[0]
    assert not near.exact and near.epsilon == 4.0  # |log 4 − log 3| < |log 1 − log 3|
    assert "nearest audited setting, stated ε = 4" in near.text() and "n = 20,000" in near.text()
    ptr = evidence("digits", "PTR", epsilon=2.0, model="ARL-C-N")
    assert [r.pair for r in ptr.rows] == ["worst-case", "model"] and "ARL-C-N" in ptr.rows[1].text()
    other = evidence("digits", "PTR", epsilon=2.0, model="N")
    assert [r.pair for r in other.rows] == ["worst-case"]
    assert "through ARL-C-N, not through N" in other.missing
    none = evidence("digits", "Global-Gauss", epsilon=1.0, model="ARL-C-N")
    assert none.rows == () and "No audit of Global-Gauss on digits" in none.missing
    assert "No audit was run on mnist" in evidence("mnist", "Global", epsilon=1.0, model="N-global").missing


def test_release_page_shows_the_claim_beside_the_evidence_and_ptr_live_accuracy(results: Path) -> None:
    at = app("release", query={"mech": "PTR", "eps": "3"})
    page = texts(at)
    assert "The claim beside the evidence" in page and "empirical ε ≥ **3.280**" in page
    assert "nearest audited setting, stated ε = 4" in page and "false-alarm rate ≤ 5%" in page
    jobs = [j for j in evaluation._JOBS.values() if j.planned == evaluation.table_images()]
    assert jobs, "no φ table was started for PTR's live accuracy"
    assert evaluation.settle(120.0) and all(j.error is None for j in jobs), [j.error for j in jobs]
    at.run()
    captions = " ".join(c.value for c in at.caption)
    assert "certified φ" in captions and f"n = {evaluation.table_images()} test images" in captions, captions
    assert not any(m.value == "—" for m in at.metric if m.label.startswith("model accuracy at this ε"))


def test_inference_privacy_shows_each_mechanisms_audit_in_its_column(results: Path) -> None:
    """Per column: the row at this ε (Gauss-Output; Lap-Output's worst-case and its model pair through
    ip-lipschitz-l1), the nearest audited one labelled so (LDP-Image at ε = 2), and in words where no
    audit row exists (Gauss-Input)."""
    query = {"mech": "Gauss-Output", "eps": "1.0", "delta": "1e-05", "alpha": "0.1"}
    at = app("inference_privacy", query=query)
    page = texts(at)
    gauss = "Audit, worst-case pair: empirical ε ≥ **0.610** (at this ε, δ = 1e-05), below the stated ε = 1"
    assert gauss in page
    assert "Audit, worst-case pair: empirical ε ≥ **0.970** (at this ε, δ = 0)" in page
    assert "Audit, model pair: empirical ε ≥ **0.150**" in page  # Lap-Output through ip-lipschitz-l1
    assert "Audit, worst-case pair: empirical ε ≥ **0.000** (nearest audited setting, stated ε = 2" in page
    assert "No audit of Gauss-Input on digits" in page
    assert "n = 100,000, false-alarm rate ≤ 5%" in page
    at.select_slider(key="w_delta").set_value(1e-3).run()  # the Gaussian rows were audited at δ = 1e-5
    assert "(at this ε, δ = 1e-05, not this setting's δ = 0.001)" in texts(at)


def test_the_opening_view_has_an_audited_row_at_its_own_epsilon(monkeypatch: pytest.MonkeyPatch) -> None:
    """The committed MNIST audit covers the total ε the dashboard opens at: the opening view's mechanism
    shows the row at that ε, not the nearest audited one."""
    from privcore.defaults import DEFAULT_DATASET, OPENING_EPSILON, default_model
    from privlens.settings import DEFAULT_MECHANISM

    monkeypatch.delenv("PRIVLENS_RESULTS_DIR", raising=False)
    ev = evidence(DEFAULT_DATASET, DEFAULT_MECHANISM, epsilon=OPENING_EPSILON,
                  model=default_model(DEFAULT_DATASET))
    assert ev.rows and ev.rows[0].exact and not ev.rows[0].refutes, ev
    assert "at this ε" in ev.rows[0].text()
