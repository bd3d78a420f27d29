"""The command line as a user meets it (issue 19): expected errors are one ``error:`` line naming
the problem and the fix with exit code 1 or 2, tracebacks only with ``--debug``, and ``--help``
does not load torch. ``privcore release`` is the dashboard's twin (issue 33, item 3): the same image
preparation, notes and warnings (on stderr), ranges and JSON document."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import privcore
from privcore.cli import main
from privcore.cli.errors import describe
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

    from privcore.inputs.images import encode_png

    monkeypatch.setenv("PRIVLENS_CACHE_DIR", str(tmp_path / "cache"))
    png = tmp_path / "digit.png"
    png.write_bytes(encode_png(torch.tensor(load_digits().images[3] / 16).float()[None]))
    main(["certify", str(png), "--dataset", "digits"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["phi", "R*", "L", "R"]
    out = tmp_path / "release.json"
    # no --dataset: the embedded default, real MNIST, and a real MNIST digit in its domain (no warning)
    main(["release", str(ROOT / "data" / "samples" / "mnist" / "7-700.png"), "--epsilon", "10", "--delta",
          "1e-5", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert doc["format"] == "privlens.release/1" and doc["parameters"]["epsilon"] == 10.0
    assert doc["model"]["dataset"] == "mnist" and doc["model"]["obfuscator"] == "N-global"
    assert doc["outcome"] == "released" and capsys.readouterr().err.startswith("released; wrote")
    code, err = _fails(["release", "--dataset", "digits", str(png), "--epsilon", "-1", "--delta", "1e-5"],
                       capsys)
    assert code == 2 and "epsilon must be in [0.01, 100], got -1.0" in err
    code, err = _fails(["release", "--dataset", "digits", str(tmp_path / "none.png"), "--epsilon", "1",
                        "--delta", "1e-5"], capsys)
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


# ------------------------------------------------------------- release: the dashboard's twin (issue 33)

SAMPLE = ROOT / "data" / "samples" / "digits" / "0-24.png"


def _png(path: Path, pixels: Any) -> Path:
    from privcore.inputs.images import encode_png

    path.write_bytes(encode_png(np.asarray(pixels, dtype=np.float64)))
    return path


class _Seen:
    """Stands in for privcore.api.release, recording the model input the CLI hands it."""

    def __init__(self) -> None:
        self.image: Any = None
        self.kwargs: dict[str, Any] = {}

    def __call__(self, image: Any, **kwargs: Any) -> Any:
        self.image, self.kwargs = image, kwargs

        class _Out:
            released = True

            def document(self) -> dict[str, Any]:
                return {"outcome": "released", "text": "ε"}

        return _Out()


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> _Seen:
    import privcore.api as api

    fake = _Seen()
    monkeypatch.setattr(api, "release", fake)
    return fake


def test_release_help_names_the_dashboards_options() -> None:
    from typer.testing import CliRunner

    from privcore.cli import app

    res = CliRunner().invoke(app, ["release", "--help"], terminal_width=200)
    assert res.exit_code == 0, res.output
    for option in ("--invert", "--digit-style", "--mechanism", "--force", "--epsilon", "--delta"):
        assert option in res.output, option
    assert "[1e-12, 0.5]" in res.output and "[0.01, 100]" in res.output


def test_blank_and_one_pixel_images_are_warned_about_and_refused_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seen: _Seen
) -> None:
    from privcore import inputs

    blank = _png(tmp_path / "blank.png", np.zeros((32, 32)))
    with pytest.raises(SystemExit) as exit_:
        main(["release", "--dataset", "digits", str(blank), "--epsilon", "1"])
    cap = capsys.readouterr()
    assert exit_.value.code == 2 and cap.out == "" and seen.image is None  # refused: nothing released
    lines = cap.err.splitlines()
    assert lines[0] == "Note: resized from 32×32 to 8×8, the model's input size."
    assert lines[1] == "Warning: " + inputs.concern_heading(str(blank), "digits")
    assert lines[2].startswith("* The upload is blank: its pixels are nearly one value")
    assert inputs.CONCERN_CONSEQUENCE in lines and "--force" in lines[-1]
    assert lines[-1].startswith("error: Nothing is computed or released for this image until you confirm it")

    one = _png(tmp_path / "one.png", np.ones((1, 1)))
    with pytest.raises(SystemExit) as exit_:
        main(["release", "--dataset", "digits", str(one), "--epsilon", "1"])
    assert exit_.value.code == 2 and seen.image is None
    assert "* The upload is only 1×1 pixels" in capsys.readouterr().err
    main(["release", "--dataset", "digits", str(one), "--epsilon", "1", "--force"])
    cap = capsys.readouterr()
    assert "Note: resized from 1×1 to 8×8, the model's input size." in cap.err.splitlines()
    assert "* The upload is only 1×1 pixels" in cap.err and inputs.CONFIRMED in cap.err
    assert seen.image is not None and json.loads(cap.out)["outcome"] == "released"


def test_a_colour_photo_and_rendered_text_are_refused_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seen: _Seen
) -> None:
    """The measured domain check (privcore.inputs.domain.check) on the file: exit 2, the reasons on stderr."""
    from privcore.experiments.domain import photo_uploads, text_uploads

    for name, data in (("photo.jpg", photo_uploads(2)[1]), ("text.png", text_uploads(1)[0])):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(SystemExit) as exit_:
            main(["release", "--dataset", "digits", str(path), "--epsilon", "1"])
        cap = capsys.readouterr()
        assert exit_.value.code == 2 and cap.out == "" and seen.image is None, name
        assert "* The model was trained on scikit-learn's 8×8 handwritten digits" in cap.err
    main(["release", "--dataset", "digits", str(tmp_path / "photo.jpg"), "--epsilon", "1", "--force"])
    cap = capsys.readouterr()
    assert "* The upload is in colour" in cap.err and seen.image is not None


def test_a_resized_image_gets_the_dashboards_notes_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seen: _Seen
) -> None:
    """A real digit at four times the model's size: resized, as the dashboard says, and released."""
    from PIL import Image
    from sklearn.datasets import load_digits

    from privcore.inputs import note_text
    from privcore.inputs.images import decode_image

    big = np.kron(load_digits().images[3] / 16, np.ones((4, 4)))  # 32×32
    path = tmp_path / "big.png"
    Image.fromarray(np.rint(big * 255).astype(np.uint8)).save(path)
    main(["release", "--dataset", "digits", str(path), "--epsilon", "1"])
    cap = capsys.readouterr()
    expected = [note_text(n) for n in decode_image(path.read_bytes(), target_shape=(1, 8, 8)).notes]
    assert expected == ["Note: resized from 32×32 to 8×8, the model's input size."]
    assert cap.err.splitlines() == expected and json.loads(cap.out)["outcome"] == "released"


def test_invert_and_digit_style_change_the_model_input_as_on_the_dashboard(
    capsys: pytest.CaptureFixture[str], seen: _Seen
) -> None:
    import torch

    from privcore.inputs import digit_styled
    from privcore.inputs.images import decode_image

    data = SAMPLE.read_bytes()
    plain = decode_image(data, target_shape=(1, 8, 8)).tensor
    main(["release", "--dataset", "digits", str(SAMPLE), "--epsilon", "1"])
    assert torch.equal(torch.as_tensor(seen.image), plain) and capsys.readouterr().err == ""

    with pytest.raises(SystemExit):  # inverted, the light-on-dark sample looks out of domain
        main(["release", "--dataset", "digits", str(SAMPLE), "--epsilon", "1", "--invert"])
    err = capsys.readouterr().err
    assert err.startswith("Note: inverted (v ↦ 1 − v).\nWarning: ") and "--force" in err
    main(["release", "--dataset", "digits", str(SAMPLE), "--epsilon", "1", "--invert", "--force"])
    capsys.readouterr()
    assert torch.allclose(torch.as_tensor(seen.image), 1.0 - plain)

    main(["release", "--dataset", "digits", str(SAMPLE), "--epsilon", "1", "--digit-style", "--force"])
    err = capsys.readouterr().err
    styled = digit_styled(data, (1, 8, 8))
    assert torch.equal(torch.as_tensor(seen.image), styled.tensor)
    assert not torch.equal(styled.tensor, plain) and "Note: digit-style: cropped to the ink" in err


def test_ranges_are_the_apis_and_the_dashboards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """δ, ε (the guarantee's total) and R: one definition, the same refusals before the image is read."""
    import privcore.api as api
    from privcore import ranges
    from privlens.settings import PARAMS

    assert api.DELTA_RANGE == ranges.DELTA_RANGE == (PARAMS["delta"].low, PARAMS["delta"].high)
    assert ranges.EPSILON_RANGE == (PARAMS["epsilon"].low, PARAMS["epsilon"].high)
    assert ranges.RADIUS_RANGE == (PARAMS["radius"].low, PARAMS["radius"].high)
    missing = str(tmp_path / "none.png")  # parameters are checked first: the file is never read
    image = np.zeros((8, 8))
    for argv, kwargs, message in (
        (["--delta", "0.6"], {"delta": 0.6}, "delta must be in [1e-12, 0.5], got 0.6"),
        (["--delta", "1e-13"], {"delta": 1e-13}, "delta must be in [1e-12, 0.5], got 1e-13"),
        (["--epsilon", "200"], {"epsilon": 200.0}, "epsilon must be in [0.01, 100], got 200"),
        (["--mechanism", "ptr", "--epsilon", "200"], {"mechanism": "ptr", "epsilon": 200.0},
         "epsilon must be in [0.01, 100], got 200"),  # ε is the total for PTR too
        (["--radius", "3"], {"radius": 3.0}, "radius must be in [0.001, 2], got 3"),
    ):
        args = {"epsilon": 1.0, **kwargs}
        with pytest.raises(ParameterError) as api_err:
            privcore.release(image, **args)
        assert message in str(api_err.value)
        code, err = _fails(["release", "--dataset", "digits", missing, "--epsilon", "1", *argv], capsys)
        assert code == 2 and err == f"error: bad parameter: {api_err.value}\n"


def test_json_is_the_apis_document_in_utf8_with_the_guarantee_text(tmp_path: Path) -> None:
    import torch

    from privcore.inputs.images import decode_image

    env = {**os.environ, "PYTHONPATH": str(ROOT), "PRIVLENS_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-m", "privcore", "release", "--dataset", "digits", str(SAMPLE),
                          "--epsilon", "2"],
                         cwd=tmp_path, env=env, capture_output=True, timeout=600)
    assert out.returncode == 0 and out.stderr == b"", out.stderr.decode()
    text = out.stdout.decode("utf-8")
    assert "ℓ∞" in text and "\\u" not in text  # UTF-8 characters, not \u escapes
    doc = json.loads(text)
    x = decode_image(SAMPLE.read_bytes(), target_shape=(1, 8, 8)).tensor
    ref = privcore.release(torch.as_tensor(x), epsilon=2.0, dataset="digits").document()

    def keys(d: Any) -> Any:
        return {k: keys(v) for k, v in d.items()} if isinstance(d, dict) else None

    assert keys(doc) == keys(ref)
    assert doc["guarantee"]["text"] == ref["guarantee"]["text"] and "e^ε" in doc["guarantee"]["text"]
    assert doc["parameters"]["global_lipschitz"] == ref["parameters"]["global_lipschitz"]


def test_an_unusable_file_is_called_the_image_argument(tmp_path: Path, capsys) -> None:
    pdf = tmp_path / "paper.pdf"
    pdf.write_bytes(b"%PDF-1.4 not an image")
    code, err = _fails(["release", "--dataset", "digits", str(pdf), "--epsilon", "1"], capsys)
    assert code == 2 and err == (
        "error: bad parameter: the IMAGE argument is a PDF file; allowed formats: PNG, JPEG\n"
    )
    assert "upload" not in err


def test_a_directory_given_as_the_image_is_said_to_be_one(tmp_path: Path, capsys, seen: _Seen) -> None:
    folder = tmp_path / "digits.png"  # a directory, whatever its name
    folder.mkdir()
    for command in (["release", "--epsilon", "1"], ["certify"]):
        code, err = _fails([*command, "--dataset", "digits", str(folder)], capsys)
        assert code == 2 and err == (
            f"error: bad parameter: the IMAGE argument must be a file, got {str(folder)!r}, which is a "
            "directory\n"
        ), command
        assert "not found" not in err
    assert seen.image is None
    with pytest.raises(ParameterError, match=r"image must be a file, got .*, which is a directory"):
        privcore.certify(folder, dataset="digits")
    with pytest.raises(FileNotFoundError):  # nothing there: still "file not found"
        privcore.certify(tmp_path / "none.png", dataset="digits")


@pytest.mark.parametrize("where", ["missing directory", "under a file", "a directory"])
def test_out_must_be_a_file_in_an_existing_directory_before_anything_is_released(
    tmp_path: Path, capsys, seen: _Seen, where: str
) -> None:
    """--out is checked before the image is read and anything released: no directory is created, no
    noise drawn (privcore.api.release is never called)."""
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    out, wrong = {
        "missing directory": (tmp_path / "missing" / "dir" / "x.json",
                              f"the directory {str(tmp_path / 'missing' / 'dir')!r} does not exist"),
        "under a file": (plain / "x.json", f"{str(plain)!r} is not a directory"),
        "a directory": (tmp_path, "which is a directory"),
    }[where]
    code, err = _fails(["release", "--dataset", "digits", str(SAMPLE), "--epsilon", "1", "--out", str(out)],
                       capsys)
    assert code == 2 and err.startswith("error: bad parameter: --out must ") and f"got {str(out)!r}" in err
    assert wrong in err, err
    assert seen.image is None and not (tmp_path / "missing").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.txt"]


def test_a_missing_model_lists_only_datasets_with_such_models(tmp_path: Path, capsys) -> None:
    code, err = _fails(["release", "--dataset", "digits", str(SAMPLE), "--epsilon", "1", "--model", "NOPE"],
                       capsys)
    assert code == 1 and "no obfuscator 'NOPE' for dataset 'digits'" in err
    listed = err.split("(datasets with such models: ", 1)[1].split(";", 1)[0].split(", ")
    assert "digits" in listed and "lab" not in listed and "pattern-tables" not in listed
    assert "digits has: " in err and "ARL-C-N" in err


def _entry(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``code`` run before :func:`privcore.cli.run` in a fresh interpreter (argv: ``version``)."""
    script = f"import sys, threading, time, atexit, pathlib\nsys.argv = ['privcore', 'version']\n{code}\n" \
             "import privcore.cli\nprivcore.cli.run()\n"
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "MARK": str(tmp_path / "mark")})


def test_process_entry_keeps_exit_codes_output_and_exit_handlers(tmp_path: Path) -> None:
    """The entry skips only the interpreter's teardown: the atexit handlers still run, the output is all
    there and the exit codes are main's."""
    out = _entry("atexit.register(lambda: pathlib.Path(__import__('os').environ['MARK']).write_text('ran'))",
                 tmp_path)
    assert (out.returncode, out.stdout.strip()) == (0, privcore.__version__), out.stderr
    assert (tmp_path / "mark").read_text() == "ran"
    bad = subprocess.run([sys.executable, "-m", "privcore", "release", str(SAMPLE), "--dataset", "digits",
                          "--epsilon", "0"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "epsilon" in bad.stderr, bad.stderr


def test_process_entry_waits_for_a_running_thread(tmp_path: Path) -> None:
    """With a non-daemon thread still running the exit is the ordinary one, which waits for it."""
    code = ("def later():\n    time.sleep(0.5)\n"
            "    pathlib.Path(__import__('os').environ['MARK']).write_text('done')\n"
            "threading.Thread(target=later).start()")
    out = _entry(code, tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "mark").read_text() == "done"


def test_mechanisms_lists_the_registry_with_guarantees_and_parameters() -> None:
    from typer.testing import CliRunner

    from privcore.cli import app
    from privcore.mechanisms import registry

    res = CliRunner().invoke(app, ["mechanisms"])
    assert res.exit_code == 0, res.output
    for m in registry.MECHANISMS:
        (line,) = [row for row in res.output.splitlines() if row.startswith(m.name.lower() + " ")]
        assert m.guarantee in line and ", ".join(m.parameter_names) in line
