"""``privcore train global-model`` (issue 33): the embedded default's recipe as one command — a label-aware
embedder under its own name, an N-global obfuscator for a target ε whose card names that embedder, its
Δp, certified G, release classifier and attacker — and the pipeline loads the embedder the card names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import privcore
from privcore.cli import main
from privcore.models.pipeline import load_pipeline

SMOKE = ["--dataset", "digits", "--epochs", "1", "--arch", "mlp", "--augment-shift", "0", "--delta-p-n", "3",
         "--no-progress", "--device", "cpu", "--threads", "1"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("models")
    main(["train", "global-model", "--models-dir", str(out), "--target-epsilon", "5", *SMOKE])
    return out


def test_every_step_is_written_and_its_card_names_the_command(trained: Path) -> None:
    d = trained / "digits"
    cards = {n: json.loads((d / f"{n}.json").read_text()) for n in
             ("embedder-label", "obfuscator-N-global", "classifier-N-global", "attacker-N-global")}
    assert cards["embedder-label"]["name"] == "embedder-label"
    assert cards["embedder-label"]["recipe"]["label_weight"] == 10.0
    obf = cards["obfuscator-N-global"]
    assert obf["embedder"]["file"] == "embedder-label.safetensors"
    assert obf["recipe"]["noise_epsilons"] == [5.0, 10.0] and obf["recipe"]["noise_mode"] == "global"
    assert obf["delta_p"]["n"] == 3 and obf["global_lipschitz"]["value"] > 0
    # the attacker trains on the release's noise, G·R/ε
    g = obf["global_lipschitz"]["value"]
    assert cards["attacker-N-global"]["release_noise"]["delta_p"] == pytest.approx(g)
    for card in cards.values():
        assert "train global-model" in card["command"] and "--target-epsilon 5.0" in card["command"]
    assert not (d / "embedder.json").exists()  # the dataset's plain embedder is left alone


def test_the_pipeline_loads_the_embedder_its_obfuscator_names_and_releases(trained: Path) -> None:
    p = load_pipeline("digits", "N-global", models_dir=trained, device="cpu")
    assert p.cards["embedder"]["name"] == "embedder-label" and p.attacker is not None
    r = privcore.release(np.zeros((8, 8), np.float32) + 0.5, epsilon=5.0, dataset="digits", model="N-global",
                         models_dir=trained, rng=np.random.default_rng(0))
    assert r.released and r.document()["model"]["obfuscator"] == "N-global"


@pytest.mark.parametrize(
    ("args", "named"),
    [(["--name", "N"], "name"), (["--target-epsilon", "0"], "target_epsilon"),
     (["--embedder-name", "../x"], "embedder_name"), (["--out-dim", "0"], "out_dim"),
     (["--name", "C-global-e2"], "name"), (["--obfuscator-hidden", "10,x"], "obfuscator_hidden"),
     (["--obfuscator-hidden", "0,10"], "obfuscator_hidden"), (["--noise-bound", "exact"], "noise_bound")],
)
def test_bad_arguments_name_the_parameter_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], named: str
) -> None:
    with pytest.raises(SystemExit) as bad:
        main(["train", "global-model", "--models-dir", str(tmp_path), *SMOKE, *args])
    assert bad.value.code == 2 and named in capsys.readouterr().err
    assert not any(tmp_path.rglob("*.json"))
