"""Atomic writes (issue 18, item 6): a writer that dies leaves the previous file, or none.

Failures are simulated the way they happen: a payload that raises halfway, ``os.write``/``fsync``
failing with ENOSPC (a full disk) and ``os.replace`` failing, each checked on the helper itself
and on the library's writers (result tables, figures, training resume files, lab cards).
"""

from __future__ import annotations

import errno
import stat
from pathlib import Path

import pandas as pd
import pytest
import torch

import privcore._atomic as atomic
from privcore._atomic import atomic_open, atomic_path, atomic_write_bytes, atomic_write_text
from privcore.experiments.runner import save_figure
from privcore.experiments.tables import ResultTable
from privcore.train.common import ResumableRun


def _disk_full(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _only(directory: Path) -> list[str]:
    """Every entry of ``directory``: no temporary file may be left behind."""
    return sorted(p.name for p in directory.iterdir())


def test_a_write_replaces_the_file_with_the_usual_permissions(tmp_path) -> None:
    path = tmp_path / "sub" / "a.json"
    atomic_write_text(path, "old")
    atomic_write_text(path, "new")
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    atomic_write_bytes(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert _only(path.parent) == ["a.json"]


def test_a_payload_that_raises_midway_leaves_the_previous_file(tmp_path) -> None:
    path = tmp_path / "table1.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(RuntimeError, match="serialiser"), atomic_open(path, "w") as fh:
        fh.write("a,b\n")
        fh.flush()
        raise RuntimeError("serialiser failed halfway")
    assert path.read_text() == "a,b\n1,2\n"
    assert _only(tmp_path) == ["table1.csv"]


def test_a_failed_first_write_leaves_no_file_at_all(tmp_path) -> None:
    path = tmp_path / "fresh.csv"
    with pytest.raises(KeyboardInterrupt), atomic_open(path, "w") as fh:
        fh.write("partial")
        raise KeyboardInterrupt
    assert _only(tmp_path) == []


@pytest.mark.parametrize("fails", ["write", "fsync", "replace"])
def test_a_full_disk_leaves_the_previous_file(tmp_path, monkeypatch, fails) -> None:
    path = tmp_path / "table1.csv"
    path.write_text("previous\n")
    with pytest.raises(OSError) as err:
        if fails == "write":  # what fh.write raises when the data does not fit
            with atomic_open(path, "wb") as fh:
                fh.write(b"x" * 10)
                fh.flush()
                _disk_full()
        else:
            monkeypatch.setattr(atomic.os, fails, _disk_full)
            atomic_write_text(path, "new content\n")
    monkeypatch.undo()
    assert err.value.errno == errno.ENOSPC
    assert path.read_text() == "previous\n"
    assert _only(tmp_path) == ["table1.csv"]


def test_atomic_path_keeps_the_suffix_and_refuses_a_writer_that_wrote_nothing(tmp_path) -> None:
    path = tmp_path / "fig.png"
    with atomic_path(path) as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".png" and tmp != path
        tmp.write_bytes(b"png")
    assert path.read_bytes() == b"png"
    with pytest.raises(FileNotFoundError), atomic_path(path) as tmp:
        tmp.unlink()
    assert path.read_bytes() == b"png" and _only(tmp_path) == ["fig.png"]


# -- the library's writers ---------------------------------------------------------------------------

COLS = ("dataset", "epsilon", "accuracy")
KEY = ("epsilon",)


def _table(path: Path, config: dict | None = None) -> ResultTable:
    return ResultTable(path, columns=COLS, key=KEY, config=config or {"a": 1}, command="test")


def test_a_new_run_on_a_full_disk_keeps_the_old_table_instead_of_an_empty_one(tmp_path, monkeypatch) -> None:
    # issue 18: an experiment interrupted by a full disk left an empty table1.csv
    path = tmp_path / "table1.csv"
    old = _table(path, {"n": 1})
    old.add({"dataset": "d", "epsilon": 1.0, "accuracy": 0.5})
    before = path.read_text()
    monkeypatch.setattr(atomic.os, "replace", _disk_full)
    with pytest.raises(OSError):
        _table(path, {"n": 2})  # another configuration starts a fresh table: header write fails
    monkeypatch.undo()
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table1.csv", "table1.json"]


def test_a_row_that_cannot_be_written_leaves_the_table_and_resume_intact(tmp_path, monkeypatch) -> None:
    path = tmp_path / "t.csv"
    t = _table(path)
    t.add({"dataset": "d", "epsilon": 1.0, "accuracy": 0.5})
    monkeypatch.setattr(atomic.os, "fsync", _disk_full)
    with pytest.raises(OSError):
        t.add({"dataset": "d", "epsilon": 2.0, "accuracy": 0.7})
    monkeypatch.undo()
    assert pd.read_csv(path)["epsilon"].tolist() == [1.0]
    again = _table(path)
    assert again.resumed and again.done(epsilon=1.0) and not again.done(epsilon=2.0)
    again.add({"dataset": "d", "epsilon": 2.0, "accuracy": 0.7})
    assert again.finish()["accuracy"].tolist() == [0.5, 0.7]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv", "t.json"]


def test_a_torn_last_row_with_the_right_number_of_cells_is_not_resumed(tmp_path) -> None:
    # files written before writes were atomic: "0.7" cut to "0." still has three cells
    path = tmp_path / "t.csv"
    _table(path).add({"dataset": "d", "epsilon": 1.0, "accuracy": 0.5})
    with path.open("a") as fh:
        fh.write("d,2.0,0.")
    again = _table(path)
    assert again.done(epsilon=1.0) and not again.done(epsilon=2.0)
    assert path.read_text().splitlines()[-1] == "d,1.0,0.5"


def test_two_processes_resuming_one_table_keep_each_others_rows(tmp_path) -> None:
    path = tmp_path / "t.csv"
    a, b = _table(path), _table(path)
    a.add({"dataset": "d", "epsilon": 1.0, "accuracy": 0.1})
    b.add({"dataset": "d", "epsilon": 2.0, "accuracy": 0.2})
    a.add({"dataset": "d", "epsilon": 3.0, "accuracy": 0.3})
    b.add({"dataset": "d", "epsilon": 3.0, "accuracy": 0.3})  # a recorded it first: not twice
    assert b.done(epsilon=1.0)  # b learnt a's rows when it wrote
    df = a.finish()
    assert df["epsilon"].tolist() == [1.0, 2.0, 3.0]


def test_save_figure_on_a_full_disk_keeps_the_previous_figure(tmp_path, monkeypatch) -> None:
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=[0, 1], y=[1, 0]))
    stem = tmp_path / "digits" / "fig2"
    save_figure(fig, stem, png=False)
    before = (tmp_path / "digits" / "fig2.html").read_text()
    monkeypatch.setattr(atomic.os, "replace", _disk_full)
    with pytest.raises(OSError):
        save_figure(go.Figure(go.Bar(x=[1], y=[2])), stem, png=False)
    monkeypatch.undo()
    assert (tmp_path / "digits" / "fig2.html").read_text() == before
    assert _only(tmp_path / "digits") == ["fig2.html"]


def test_a_training_resume_file_is_never_torn(tmp_path, monkeypatch) -> None:
    run = ResumableRun(tmp_path / "model", config={"lr": 1e-3})
    net = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(0)
    run.save(1, {"net": net}, {"opt": opt}, gen, [{"loss": 1.0}])
    import safetensors.torch

    real_save = safetensors.torch.save_file

    def save_half(tensors, f, *args, **kwargs):  # the serialiser dies after part of the payload
        real_save(tensors, f, *args, **kwargs)
        with open(f, "r+b") as fh:
            fh.truncate(10)
        _disk_full()

    monkeypatch.setattr(safetensors.torch, "save_file", save_half)
    with pytest.raises(OSError):
        run.save(2, {"net": net}, {"opt": opt}, gen, [{"loss": 1.0}, {"loss": 0.5}])
    monkeypatch.undo()
    epoch, history = run.restore({"net": net}, {"opt": opt}, gen)
    assert epoch == 1 and history == [{"loss": 1.0}]
    assert _only(tmp_path) == ["model.resume.safetensors"]


def test_the_report_file_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    import privcore.experiments.report as report
    from privcore.cli import app

    target = tmp_path / "RESULTS.md"
    args = ["experiment", "report", "--dataset", "digits", "--out", str(tmp_path / "results")]
    result = CliRunner().invoke(app, [*args, "--report-file", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_text().startswith("## digits") and "_not run yet_" in target.read_text()

    def broken(*_args, **_kwargs):
        raise RuntimeError("a table failed to render")

    target.write_text("previous report\n")
    monkeypatch.setattr(report, "render_report", broken)
    result = CliRunner().invoke(app, [*args, "--report-file", str(target)])
    assert result.exit_code != 0
    assert target.read_text() == "previous report\n" and _only(tmp_path) == ["RESULTS.md"]
