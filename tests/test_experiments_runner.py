"""Experiment plumbing (privcore.experiments.runner): resumable CSV tables, provenance, figures."""

from __future__ import annotations

import json
import math
import os

import pandas as pd
import pytest

from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.tables import ResultTable, format_value

COLS = ("dataset", "epsilon", "radius", "accuracy", "released")
KEY = ("epsilon", "radius")


def _table(path, config=None, **kw) -> ResultTable:
    return ResultTable(path, columns=COLS, key=KEY, config=config or {"a": 1}, command="test", **kw)


def test_format_value_round_trips_through_pandas(tmp_path) -> None:
    assert format_value(math.inf) == "inf"
    assert format_value(float("nan")) == ""
    assert format_value(None) == ""
    assert format_value(True) == "True"
    assert format_value(0.1) == repr(0.1)
    t = _table(tmp_path / "t.csv")
    t.add({"dataset": "d", "epsilon": math.inf, "radius": 0.1, "accuracy": 1 / 3, "released": True})
    t.add({"dataset": "d", "epsilon": 2.0, "radius": 0.1, "accuracy": None, "released": False})
    df = pd.read_csv(tmp_path / "t.csv")
    assert df["epsilon"].tolist() == [math.inf, 2.0]
    assert df["accuracy"].iloc[0] == 1 / 3  # exact float round trip
    assert math.isnan(df["accuracy"].iloc[1])
    assert df["released"].dtype == bool


def test_resume_skips_done_settings_and_repairs_a_torn_line(tmp_path) -> None:
    path = tmp_path / "t.csv"
    t = _table(path)
    t.add({"dataset": "d", "epsilon": 1.0, "radius": 0.2, "accuracy": 0.5, "released": True})
    with path.open("a") as fh:  # a run killed while writing a row
        fh.write("d,2.0,0.2,0.")
    again = _table(path)
    assert again.resumed
    assert again.done(epsilon=1.0, radius=0.2)
    assert not again.done(epsilon=2.0, radius=0.2)
    again.add({"dataset": "d", "epsilon": 2.0, "radius": 0.2, "accuracy": 0.7, "released": True})
    df = again.finish()
    assert len(df) == 2 and df["accuracy"].tolist() == [0.5, 0.7]
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["complete"] is True and meta["rows"] == 2 and meta["command"] == "test"
    with pytest.raises(ValueError, match="already"):
        again.add({"dataset": "d", "epsilon": 2.0, "radius": 0.2, "accuracy": 0.7, "released": True})


def test_a_different_config_or_fresh_starts_over(tmp_path) -> None:
    path = tmp_path / "t.csv"
    t = _table(path, {"n": 10})
    t.add({"dataset": "d", "epsilon": 1.0, "radius": 0.2, "accuracy": 0.5, "released": True})
    assert not _table(path, {"n": 20}).done(epsilon=1.0, radius=0.2)
    assert len(pd.read_csv(path)) == 0
    t = _table(path, {"n": 20})
    t.add({"dataset": "d", "epsilon": 1.0, "radius": 0.2, "accuracy": 0.5, "released": True})
    assert not _table(path, {"n": 20}, fresh=True).done(epsilon=1.0, radius=0.2)


def test_rows_must_match_the_columns(tmp_path) -> None:
    t = _table(tmp_path / "t.csv")
    with pytest.raises(ValueError, match="lacks"):
        t.add({"dataset": "d", "epsilon": 1.0, "radius": 0.2})
    with pytest.raises(ValueError, match="extra"):
        t.add({"dataset": "d", "epsilon": 1.0, "radius": 0.2, "accuracy": 1, "released": 1, "oops": 0})
    with pytest.raises(ValueError, match="key columns"):
        ResultTable(tmp_path / "u.csv", columns=("a",), key=("b",), config={})


def test_run_context_modes_and_paths(tmp_path) -> None:
    ctx = RunContext(dataset="digits", mode="tiny", out_dir=tmp_path, show_progress=False)
    assert ctx.quick and ctx.pick(full=3, quick=2, tiny=1) == 1
    assert ctx.dataset_dir == tmp_path / "digits"
    with pytest.raises(ValueError, match="mode"):
        RunContext(dataset="digits", mode="fast")
    with pytest.raises(ValueError, match="certifier"):
        RunContext(dataset="digits", certifier="guess")
    table = ctx.table("x", columns=("dataset", "v"), key=("v",), config={"k": 1})
    meta = json.loads((tmp_path / "digits" / "x.json").read_text())
    assert meta["config"] == {"dataset": "digits", "mode": "tiny", "seed": 0, "k": 1}
    assert table.n_rows == 0


def test_save_figure_writes_html_sharing_one_plotly_js(tmp_path) -> None:
    import plotly.graph_objects as go

    names = save_figure(go.Figure(go.Scatter(x=[0, 1], y=[1, 0])), tmp_path / "digits" / "fig")
    assert "fig.html" in names
    html = (tmp_path / "digits" / "fig.html").read_text()
    assert "../plotly.min.js" in html and len(html) < 100_000
    assert (tmp_path / "plotly.min.js").stat().st_size > 1_000_000


def test_save_figure_says_when_a_png_cannot_be_written(tmp_path, monkeypatch) -> None:
    import plotly.graph_objects as go

    from privcore.experiments.runner import PngExportWarning

    def no_exporter(self, *a, **k):
        raise ValueError("Kaleido requires Google Chrome to be installed.")

    monkeypatch.setattr(go.Figure, "write_image", no_exporter)
    with pytest.warns(PngExportWarning, match=r"fig\.png not written .*Chrome.*apt-get install chromium"):
        names = save_figure(go.Figure(go.Scatter(x=[0, 1], y=[1, 0])), tmp_path / "digits" / "fig")
    assert names == ["fig.html"] and not (tmp_path / "digits" / "fig.png").exists()


def test_save_figure_writes_a_png_with_kaleido_and_chromium(tmp_path) -> None:
    import shutil

    import plotly.graph_objects as go

    pytest.importorskip("kaleido", reason="kaleido is in requirements.txt; this venv predates it")
    if not (shutil.which("chromium") or os.environ.get("BROWSER_PATH")):
        pytest.skip("no Chromium for kaleido (make test apt-installs Debian's chromium as root)")
    names = save_figure(go.Figure(go.Scatter(x=[0, 1], y=[1, 0])), tmp_path / "digits" / "fig")
    assert names == ["fig.html", "fig.png"]
    assert (tmp_path / "digits" / "fig.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_finish_drops_a_setting_written_twice(tmp_path) -> None:
    path = tmp_path / "t.csv"
    t = _table(path)
    row = {"dataset": "d", "epsilon": 1.0, "radius": 0.2, "accuracy": 0.5, "released": True}
    t.add(row)
    with path.open("a") as fh:  # a second process resuming the same table appended it again
        fh.write("d,1.0,0.2,0.5,True\n")
    df = t.finish()
    assert len(df) == 1
    assert json.loads(path.with_suffix(".json").read_text())["duplicates_removed"] == 1


def test_parts_resume_one_part_at_a_time(tmp_path) -> None:
    """With Parts, adding an obfuscator keeps the others' rows; a part whose settings changed is
    redone alone; a change to the shared config starts over."""
    from privcore.experiments.tables import Parts

    cols = ("obfuscator", "epsilon", "accuracy")
    parts = Parts(column="obfuscator", names="variants", fields=("weights",))
    path = tmp_path / "t.csv"

    def table(variants, weights, shared=1, command="first"):
        config = {"n": shared, "variants": variants, "weights": weights}
        return ResultTable(path, columns=cols, key=("obfuscator", "epsilon"), config=config,
                           command=command, parts=parts)

    t = table(["A", "B"], {"A": "a1", "B": "b1"})
    for v in ("A", "B"):
        t.add({"obfuscator": v, "epsilon": 1.0, "accuracy": 0.5})
    t.finish()
    added = table(["C"], {"C": "c1"}, command="add C")
    assert added.resumed and added.done(obfuscator="A", epsilon=1.0)
    assert not added.done(obfuscator="C", epsilon=1.0)
    added.add({"obfuscator": "C", "epsilon": 1.0, "accuracy": 0.7})
    added.finish()
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["command"] == "first" and meta["config"]["variants"] == ["A", "B", "C"]
    assert meta["config"]["weights"] == {"A": "a1", "B": "b1", "C": "c1"}
    assert [a["parts"] for a in meta["added"]] == [["C"]] and meta["added"][0]["command"] == "add C"
    # the same parts again: a plain resume, nothing redone or recorded as added
    again = table(["A", "B", "C"], {"A": "a1", "B": "b1", "C": "c1"})
    assert all(again.done(obfuscator=v, epsilon=1.0) for v in "ABC")
    assert len(json.loads(path.with_suffix(".json").read_text())["added"]) == 1
    # B retrained: only B's rows go
    redo = table(["B"], {"B": "b2"}, command="redo B")
    assert redo.done(obfuscator="A", epsilon=1.0) and redo.done(obfuscator="C", epsilon=1.0)
    assert not redo.done(obfuscator="B", epsilon=1.0)
    assert sorted(pd.read_csv(path)["obfuscator"]) == ["A", "C"]
    # another shared setting: start over
    other = table(["A"], {"A": "a1"}, shared=2)
    assert not other.resumed and len(pd.read_csv(path)) == 0
    with pytest.raises(ValueError, match="parts column"):
        ResultTable(tmp_path / "u.csv", columns=("x",), key=("x",), config={}, parts=parts)


def test_a_recalibrated_told_scale_map_invalidates_table_rows(tmp_path) -> None:
    """Same weights, another told-scale map: the classifier predicts differently, so the table
    config (and with it every cached row) must change."""
    import shutil

    from privcore.models.pipeline import default_models_dir
    from privcore.nets.checkpoint import read_card, update_card

    src = default_models_dir() / "digits"
    dst = tmp_path / "models" / "digits"
    dst.mkdir(parents=True)
    for f in src.glob("classifier-ARL-C-N.*"):
        shutil.copy(f, dst / f.name)
    ctx = RunContext(dataset="digits", mode="tiny", out_dir=tmp_path, models_dir=tmp_path / "models",
                     show_progress=False)
    before = ctx.classifier_weights(["ARL-C-N", "N"])
    card = read_card(dst / "classifier-ARL-C-N")
    assert before["N"] is None and before["ARL-C-N"].startswith(card["weights"]["sha256"] + "+told-scale:")
    arch = card["architecture"]
    told = dict(arch["classifier"]["kwargs"]["told_scale"])
    told["max_scale"] = 2.0 * float(told["max_scale"])
    arch["classifier"]["kwargs"]["told_scale"] = told
    update_card(dst / "classifier-ARL-C-N", {"architecture": arch})
    after = ctx.classifier_weights(["ARL-C-N"])
    assert after["ARL-C-N"] != before["ARL-C-N"]
    assert after["ARL-C-N"].split("+")[0] == before["ARL-C-N"].split("+")[0]


def test_a_cached_model_survives_a_recipe_option_added_later() -> None:
    """select's model cache compares recipes field by field: a card written before an option existed
    matches a recipe at that option's default, and any other value still forces a retrain."""
    from privcore.train.ensure import _same_recipe
    from privcore.train.recipes import obfuscator_recipe

    recipe = obfuscator_recipe("digits", "ARL-C-N")
    old_card = {"recipe": {k: v for k, v in recipe.to_json().items() if k != "noise_box_samples"}}
    assert _same_recipe(old_card, recipe)
    assert not _same_recipe({"recipe": {**old_card["recipe"], "lr": 0.5}}, recipe)
    assert not _same_recipe(old_card, obfuscator_recipe("digits", "ARL-C-N-global", noise_box_samples=8))
    assert not _same_recipe(None, recipe) and not _same_recipe({}, recipe)
