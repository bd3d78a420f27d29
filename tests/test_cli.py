"""The command line as a user meets it (issue 19): expected errors are one ``error:`` line naming
the problem and the fix with exit code 1 or 2, tracebacks only with ``--debug``, and ``--help``
does not load torch."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest

from privcore.cli import main
from privcore.cli_errors import describe
from privcore.errors import CertificationError, ParameterError

ROOT = Path(__file__).resolve().parents[1]


def _fails(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("error: ") and err.count("\n") == 1, err
    return exit_.value.code, err


def test_help_is_served_without_importing_torch(tmp_path: Path) -> None:
    code = "import sys, privcore.cli; print('torch' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False"], out.stderr
    cmd = [sys.executable, "-m", "privcore", "--help"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "experiment" in out.stdout and not out.stderr


def test_unknown_dataset_names_the_known_ones(capsys) -> None:
    code, err = _fails(["experiment", "table1", "--dataset", "nope", "--tiny"], capsys)
    assert code == 2
    assert "unknown dataset 'nope' (known: digits, fashion-mnist" in err
    assert "see `privcore experiment --help`" in err
    code, err = _fails(["train", "embedder", "--dataset", "nope"], capsys)
    assert code == 2 and "unknown dataset 'nope'" in err


def test_bad_parameter_and_unknown_command_are_usage_errors(capsys) -> None:
    code, err = _fails(["experiment", "table1", "--tiny", "--workers", "0"], capsys)
    assert code == 2 and "workers must be an integer ≥ 1, got 0" in err
    code, err = _fails(["nope"], capsys)
    assert code == 2 and "No such command 'nope'" in err


def test_missing_file_is_one_line_and_debug_shows_the_traceback(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "none.json"
    code, err = _fails(["lab", "verify", "--model", str(missing)], capsys)
    assert code == 1 and str(missing) in err and "No such file" in err
    with pytest.raises(Exception, match="No such file") as exc:
        main(["lab", "verify", "--model", str(missing), "--debug"])
    assert not isinstance(exc.value, SystemExit)


def test_describe_names_problem_and_fix_for_each_expected_error() -> None:
    try:  # a real full disk: the kernel's /dev/full answers every write with ENOSPC
        with open("/dev/full", "w") as f:
            f.write("x")
    except OSError as exc:
        full = exc
    else:  # pragma: no cover
        pytest.skip("/dev/full accepted a write")
    assert full.errno == errno.ENOSPC
    message, code = describe(full)
    assert code == 1 and message.startswith("disk full while writing. Fix: free space") and "--out" in message
    message, code = describe(CertificationError("exact certificate at radius 0.2 not completed (time limit)"))
    assert code == 1 and "time limit" in message and "--certifier lp" in message
    message, code = describe(FileNotFoundError(errno.ENOENT, "No such file or directory", "/x/card.json"))
    assert code == 1 and message.startswith("file not found: /x/card.json. Fix:")
    assert describe(ParameterError("epsilon must be in (0, inf), got -1")) == (
        "bad parameter: epsilon must be in (0, inf), got -1",
        2,
    )
    message, code = describe(RuntimeError("boom"))
    assert code == 1 and "internal error: RuntimeError: boom" in message and "--debug" in message


def test_release_and_certify_commands(tmp_path: Path, capsys, monkeypatch) -> None:
    import json

    import torch
    from sklearn.datasets import load_digits

    from privcore.images import encode_png

    monkeypatch.setenv("PRIVLENS_CACHE_DIR", str(tmp_path / "cache"))
    png = tmp_path / "digit.png"
    png.write_bytes(encode_png(torch.tensor(load_digits().images[3] / 16).float()[None]))
    main(["certify", str(png), "--dataset", "digits"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["phi", "R*", "L", "R"]
    out = tmp_path / "release.json"
    main(["release", str(png), "--epsilon", "10", "--delta", "1e-5", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert doc["format"] == "privlens.release/1" and doc["parameters"]["epsilon"] == 10.0
    assert doc["outcome"] in ("released", "bottom") and "wrote" in capsys.readouterr().err
    code, err = _fails(["release", str(png), "--epsilon", "-1", "--delta", "1e-5"], capsys)
    assert code == 2 and "epsilon must be in (0, ∞), got -1.0" in err
    code, err = _fails(["release", str(tmp_path / "none.png"), "--epsilon", "1", "--delta", "1e-5"], capsys)
    assert code == 1 and "file not found" in err


def test_lab_fig5_and_train_write_their_files(tmp_path: Path, capsys) -> None:
    """The lab's writing commands end to end (their progress bar and CSV writer once broke silently)."""
    main(["lab", "fig5", "--out", str(tmp_path), "--runs", "1", "--ks", "1", "--mechanisms", "laplace",
          "--queries", "mean", "--epochs", "1", "--num-eval", "20", "--threads", "1"])
    import pandas as pd

    runs = pd.read_csv(tmp_path / "fig5_runs.csv")
    learned = runs[runs["method"] == "learned"]
    assert set(learned["split"]) == {"train", "test"} and (learned["k"] == 1.0).all()
    assert (learned["erl"] > 0).all() and (learned["certified_bound"] <= 1.0).all()
    assert len(pd.read_csv(tmp_path / "fig5_summary.csv")) >= 2
    assert (tmp_path / "fig5_command.txt").read_text().startswith("python -m privcore ")
    main(["lab", "train", "--mechanism", "laplace", "--query", "mean", "--k", "1", "--epochs", "1",
          "--out", str(tmp_path / "models"), "--threads", "1", "--no-verify"])
    assert "certified layer product" in capsys.readouterr().out
    assert sorted(p.suffix for p in (tmp_path / "models").iterdir()) == [".json", ".safetensors"]
