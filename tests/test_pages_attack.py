"""Attack page (AppTest): the (R, ε) heatmap from the CSV with the current cell marked, and the
shipped attacker's reconstructions of the current image at several ε with SSIM/PSNR."""

from __future__ import annotations

import json

import pytest

from tests._dashboard import app, chart_specs, isolate


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    isolate(monkeypatch, tmp_path_factory)


def test_heatmap_and_live_reconstructions() -> None:
    at = app("attack", query={"R": "0.25", "eps": "2.0"})
    fig = json.loads(chart_specs(at)[0])
    heat = fig["data"][0]
    assert (
        heat["type"] == "heatmap"
        and heat["x"] == ["1", "2", "5", "10", "∞"]
        and heat["y"] == ["0.1", "0.25", "0.5"]
    )
    marker = [t for t in fig["data"] if t.get("name") == "current (R, ε)"]
    assert marker and marker[0]["x"] == ["2"] and marker[0]["y"] == ["0.25"]
    table = at.dataframe[0].value
    assert list(table["ε"]) == ["1", "2", "5", "10", "∞"]
    released = table[table["released"] == "yes"]
    assert "∞" in set(released["ε"])  # the noise-free reference is always there
    assert released["SSIM"].between(-1, 1).all() and (released["PSNR (dB)"] > 0).all()
    at.selectbox(key="atk_metric").set_value("psnr").run()
    assert json.loads(chart_specs(at)[0])["data"][0]["colorbar"]["title"]["text"] == "PSNR"
    assert "privlens_ledger" not in at.session_state or not at.session_state["privlens_ledger"]
