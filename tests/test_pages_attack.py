"""Attack page (AppTest): the (R, ε) heatmap from the CSV with the current setting marked (on a
measured cell, or interpolated between cells), the no-release baseline computed from the data with
n, and the selected model's scale-told attacker on the current image under the sidebar's mechanism at
several total ε with SSIM, PSNR, ℓ1 and ℓ2 (or the mechanism's reason where no attacker reads it)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from privcore.attacks.metrics import mean_image_baseline
from privcore.data import load_dataset
from privlens.charts import grid_position, interpolate
from tests._dashboard import app, figures, isolate, texts


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    isolate(monkeypatch, tmp_path_factory)


@pytest.fixture
def results_with_intervals(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The synthetic results with an attack CSV that has the bootstrap interval columns (± 0.02)."""
    import os
    import shutil

    import pandas as pd

    root = tmp_path / "results"
    shutil.copytree(os.environ["PRIVLENS_RESULTS_DIR"], root)
    atk = pd.read_csv(root / "digits" / "attack.csv")
    atk["ssim_lo"], atk["ssim_hi"] = atk["ssim"] - 0.02, atk["ssim"] + 0.02
    atk.to_csv(root / "digits" / "attack.csv", index=False)
    monkeypatch.setenv("PRIVLENS_RESULTS_DIR", str(root))


def _heatmap(at):
    fig = figures(at)[0]
    heat = fig.data[0]
    return fig, heat, [t for t in fig.data if (t.name or "").startswith("current (R, ε)")]


def test_heatmap_and_live_reconstructions() -> None:
    at = app("attack", query={"R": "0.25", "eps": "4.0"})  # the total: PTR's ε = 2, the CSV's ε
    fig, heat, marker = _heatmap(at)
    assert heat.type == "heatmap"
    assert list(fig.layout.xaxis.ticktext) == ["1", "2", "5", "10", "∞"]
    assert list(fig.layout.yaxis.ticktext) == ["0.1", "0.25", "0.5"]
    (m,) = marker
    # the measured cell is outlined along its edges, never covered: its value stays readable
    assert m.name == "current (R, ε)" and m.mode == "lines"
    assert (list(m.x), list(m.y)) == ([0.5, 1.5, 1.5, 0.5, 0.5], [0.5, 0.5, 1.5, 1.5, 0.5])
    assert "n = 50 released test images" in m.hovertemplate and "δ = 0.05" in m.hovertemplate
    assert heat.text[1][1] == f"{heat.z[1][1]:.3g}"  # the synthetic CSV has no interval: the value alone
    assert "n = 50 released images, PTR's δ = 0.05" in heat.customdata[1][1][2]
    table = at.dataframe[-1].value  # the "On your image" table, the last one
    assert list(table["ε"]) == ["no release (baseline)", "1", "2", "4", "5", "10", "20", "∞"]  # total ε
    assert list(table.columns) == ["ε", "released", "SSIM", "PSNR (dB)", "ℓ1", "ℓ2"]
    released = table[table["released"] == "yes"]
    assert "∞" in set(released["ε"])  # the noise-free reference is always there
    ssim, psnr = released["SSIM"].astype(float), released["PSNR (dB)"].astype(float)
    assert ssim.between(-1, 1).all() and (psnr > 0).all()
    at.selectbox(key="atk_metric").set_value("psnr").run()
    assert figures(at)[0].data[0].colorbar.title.text == "PSNR"
    assert "privlens_ledger" not in at.session_state or not at.session_state["privlens_ledger"]


def test_a_bottom_draw_shows_a_dash_and_a_legend_not_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """A draw that released nothing (⊥) shows "–" in its SSIM and PSNR cells, explained under the table."""
    import dataclasses

    from privlens import mechanism_view

    real = mechanism_view.simulate

    def bottom(*args, **kwargs):
        return dataclasses.replace(real(*args, **kwargs), released=False, value=None)

    monkeypatch.setattr(mechanism_view, "simulate", bottom)
    at = app("attack", query={"R": "0.25", "eps": "4.0"})
    table = at.dataframe[-1].value  # the "On your image" table, the last one
    bottoms = table[table["released"] == "⊥"]
    assert list(bottoms["ε"]) == ["1", "2", "4", "5", "10", "20"]
    assert set(bottoms["SSIM"]) == set(bottoms["PSNR (dB)"]) == {"–"}
    assert "None" not in table.astype(str).to_string()
    assert "⊥: that draw released nothing" in texts(at)


def test_the_tables_name_the_model_they_were_measured_on() -> None:
    """The (R, ε) tables are ARL-C-N's (posthoc Tables 3–6): the title names it, and another selected model
    (MNIST's default N-global, here digits' Encoder) is told that its attacker is not in them."""
    at = app("attack", query={"R": "0.25", "eps": "4.0"})
    assert "digits/ARL-C-N" in figures(at)[0].layout.title.text
    assert not any("measured on" in i.value for i in at.info)
    other = app("attack", query={"R": "0.25", "eps": "4.0", "model": "Encoder"})
    assert any("measured on ` ARL-C-N `" in i.value and "` Encoder `" in i.value for i in other.info)


def test_the_default_r_between_cells_is_interpolated_and_shown() -> None:
    # synthetic CSV: ssim = min(0.9, 0.1·ε/R) on R ∈ {0.1, 0.25, 0.5}, ε ∈ {1, 2, 5, 10, ∞}
    at = app("attack", query={"R": "0.3", "eps": "6.0"})  # PTR's ε = 3
    _, heat, marker = _heatmap(at)
    (m,) = marker
    assert m.name == "current (R, ε), interpolated"
    (box,) = [t for t in _heatmap(at)[0].data if t.name == "measured cells it is read between"]
    assert (min(box.x), max(box.x), min(box.y), max(box.y)) == (0.5, 2.5, 0.5, 2.5)  # the cells around it
    col = 1 + math.log10(3 / 2) / math.log10(5 / 2)
    row = 1 + (0.3 - 0.25) / (0.5 - 0.25)
    # marked on the grid's edges at its ε and its R: never over a cell's value
    assert (m.x[0], m.y[0]) == pytest.approx((col, -0.5)) and (m.x[1], m.y[1]) == pytest.approx((-0.5, row))
    expected = interpolate(heat.z, row, col)
    assert f"SSIM ≈ {expected:.3g}, interpolated" in texts(at)
    # a PTR ε outside the measured finite ε is not marked, and the page says so
    at.select_slider(key="w_epsilon").set_value(0.1).run()  # PTR's ε = 0.05
    assert not _heatmap(at)[2] and "outside the experiment's grid" in texts(at)


def test_no_release_baseline_is_the_training_mean_image_scored_on_the_test_set() -> None:
    at = app("attack")
    ds = load_dataset("digits")
    ref = mean_image_baseline(ds.x_train, ds.x_test).summary()
    shown = texts(at)
    assert f"each of {ds.x_test.shape[0]} test images" in shown
    assert f"SSIM {ref['ssim']:.3f}, PSNR {ref['psnr']:.1f} dB" in shown
    assert "n = 50 released test images per cell" in shown  # the CSV's n_eval


def test_cells_show_their_interval_when_the_csv_has_one(results_with_intervals) -> None:
    at = app("attack", query={"R": "0.25", "eps": "4.0"})
    _, heat, _ = _heatmap(at)
    z = heat.z[1][1]
    assert heat.text[1][1] == f"{z:.3g}<br>[{z - 0.02:.3g}, {z + 0.02:.3g}]"  # value, then its interval
    assert "(95 % bootstrap)" in heat.customdata[1][1][1]
    assert f"interval [{z - 0.02:.3f}, {z + 0.02:.3f}]" in texts(at)


def test_grid_position_and_interpolation() -> None:
    eps = [1.0, 2.0, 5.0, 10.0, math.inf]
    assert grid_position(eps, 2.0, log=True) == 1.0
    assert grid_position(eps, 10.0, log=True) == 3.0
    assert grid_position(eps, math.sqrt(10.0), log=True) == pytest.approx(
        1 + math.log10(math.sqrt(10.0) / 2) / math.log10(5 / 2)
    )
    assert grid_position(eps, 20.0, log=True) is None and grid_position(eps, 0.5, log=True) is None
    assert grid_position([0.1, 0.25, 0.5], 0.375, log=False) == pytest.approx(1.5)
    z = [[0.0, 1.0], [2.0, 3.0]]
    assert interpolate(z, 0.5, 0.5) == pytest.approx(1.5) and interpolate(z, 1.0, 1.0) == 3.0
    assert interpolate(z, 0.0, 0.25) == pytest.approx(0.25)
    assert math.isnan(interpolate([[0.0, math.nan]], 0.0, 0.5))


def test_heatmap_title_and_y_label_fit_1000_px() -> None:
    """The long title is wrapped (plotly does not wrap: it was cut off at 1000 px) and the y axis keeps
    room for its title and ticks; the legend sits below the plot."""
    fig, _, _ = _heatmap(app("attack", query={"R": "0.25", "eps": "4.0"}))
    lines = fig.layout.title.text.split("<br>")
    assert len(lines) >= 2 and max(map(len, lines)) <= 80
    assert fig.layout.margin.t >= 40 + 22 * len(lines) and fig.layout.margin.l >= 80
    assert fig.layout.yaxis.automargin and fig.layout.legend.orientation == "h"


def _on_image(at):
    """The "On your image" table (the page's last dataframe)."""
    return at.dataframe[-1].value


def test_your_image_is_attacked_by_the_models_scale_told_attacker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Global on digits/ARL-C-N: every finite ε is decoded by the scale-told attacker (told each release's
    public b, which shrinks as ε grows), never by the untold one; more ε rebuilds no worse on average."""
    from privcore.models.pipeline import Pipeline

    def untold(*args, **kwargs):
        raise AssertionError("the untold attacker decoded a release")

    monkeypatch.setattr(Pipeline, "reconstruct", untold)
    at = app("attack", query={"R": "0.25", "eps": "4.0"})
    table = _on_image(at)
    assert (table["released"].iloc[1:] == "yes").all()
    captions = [img.caption for i in at.get("image") for img in i.proto.imgs if "told b = " in img.caption]
    b = [float(c.split("told b = ")[1].split(")")[0]) for c in captions]
    assert len(b) == 7 and b[-1] == 0.0 and all(x > y for x, y in itertools.pairwise(b))
    assert "scale-told attacker" in texts(at)


@pytest.mark.parametrize("mech", ["Gauss-Output", "LDP-Embedding"])
def test_a_mechanism_no_attacker_reads_says_why(mech: str) -> None:
    at = app("attack", query={"mech": mech, "eps": "4.0"})
    (note,) = [i.value for i in at.info if i.value.startswith("No attacker runs on your image")]
    from privcore.mechanisms import registry

    assert registry.get(mech).attack_unavailable() in note
    assert not [img for i in at.get("image") for img in i.proto.imgs if "told b = " in img.caption]


def test_ptr_on_your_image_certifies_then_decodes_with_the_told_attacker() -> None:
    at = app("attack", query={"mech": "PTR", "R": "0.25", "eps": "4.0"})
    table = _on_image(at)
    assert list(table["ε"])[-1] == "∞" and set(table["released"].iloc[1:]) <= {"yes", "⊥"}
    assert "Simulated PTR releases" in texts(at)
