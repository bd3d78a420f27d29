"""The certified global mechanism through the one-call API and the CLI, and the mechanism registry
(issue 31, items 2 and 3)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import privcore
from privcore.errors import ParameterError
from privcore.mechanisms import registry

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    from sklearn.datasets import load_digits

    return load_digits().images[3] / 16


def test_global_is_the_default_and_its_document_carries_the_public_constant_and_box(image) -> None:
    out = privcore.release(image, dataset="digits", epsilon=2.0, rng=np.random.default_rng(0))
    assert out.mechanism == "Global" and out.released and out.certification is None
    doc = json.loads(json.dumps(out.document()))
    params = doc["parameters"]
    g, box = params["global_lipschitz"], params["clip_box"]
    assert set(box) == {"lower", "upper"} and len(box["lower"]) == len(box["upper"]) == 8
    assert all(lo <= hi for lo, hi in zip(box["lower"], box["upper"], strict=True))
    assert doc["mechanism"] == "Global" and doc["outcome"] == "released" and len(doc["value"]) == 8
    assert doc["guarantee"]["epsilon"] == 2.0 and doc["guarantee"]["delta"] == 0.0 and params["delta"] == 0.0
    assert doc["guarantee"]["radius"] == params["radius"] == 0.25 and doc["guarantee"]["text"]
    assert params["release_noise_scale"] == pytest.approx(g * 0.25 / 2.0)
    assert out.predicted_class in range(10)


def test_the_predicted_class_is_the_release_classifiers_class_of_the_released_value(image) -> None:
    """The class comes with the release, computed on first read: the noise-aware classifier's argmax
    for the released vector told its noise scale, whichever posthoc mechanism released it."""
    import torch

    from privcore.api import _pipeline
    from privcore.api.core import release_embedding
    from privcore.defaults import default_model

    pipe = _pipeline("digits", default_model("digits"), None)
    z = pipe.embed(torch.as_tensor(image, dtype=torch.float32)[None, None]).double().numpy().reshape(-1)
    for k in range(3):
        out = release_embedding(pipe, z, epsilon=1.0, mechanism="global", rng=np.random.default_rng(k))
        doc = out.document()
        logits = pipe.classify(torch.tensor([out.value], dtype=torch.float32), out.noise_scale)
        assert out.predicted_class == int(logits.argmax(-1)[0]) == out.predicted_class
        assert out.document() == doc


def test_global_uses_the_constant_this_process_certified_never_the_cards(tmp_path: Path, image) -> None:
    """A card whose G was lowered (a forged hint) does not lower the noise: the hint fails to verify
    and G is computed here."""
    honest = privcore.release(image, dataset="digits",
                              epsilon=2.0).document()["parameters"]["global_lipschitz"]
    models = tmp_path / "models"
    shutil.copytree(REPO / "models" / "digits", models / "digits")
    card_path = models / "digits" / "obfuscator-ARL-C-N.json"
    card = json.loads(card_path.read_text())
    card["global_lipschitz"]["value"] = honest / 10
    card_path.write_text(json.dumps(card))
    out = privcore.release(image, dataset="digits", epsilon=2.0, models_dir=models)
    assert out.document()["parameters"]["global_lipschitz"] == pytest.approx(honest)


@pytest.mark.parametrize("hint", [0, -3.5, float("nan"), float("inf"), "20.3", True, [1.0],
                                  pytest.param(10**400, id="huge-int")])
def test_a_bad_g_hint_is_ignored_never_fatal_and_never_trusted(tmp_path: Path, image, hint) -> None:
    """A card's G that is no finite number > 0 is no hint: the card loads, and the release computes G
    from the weights, as for a card without one."""
    honest = privcore.release(image, dataset="digits", epsilon=2.0).document()["parameters"]
    models = tmp_path / "models"
    (models / "digits").mkdir(parents=True)
    for f in (REPO / "models" / "digits").glob("*"):
        if f.name.startswith(("embedder.", "obfuscator-ARL-C-N.", "classifier-ARL-C-N.")):
            shutil.copyfile(f, models / "digits" / f.name)
    card_path = models / "digits" / "obfuscator-ARL-C-N.json"
    card = json.loads(card_path.read_text())
    card["global_lipschitz"]["value"] = hint
    card_path.write_text(json.dumps(card))  # json writes NaN / Infinity as such
    out = privcore.release(image, dataset="digits", epsilon=2.0, models_dir=models)
    params = out.document()["parameters"]
    assert out.released and params["global_lipschitz"] == honest["global_lipschitz"]
    assert params["release_noise_scale"] == honest["release_noise_scale"]


def test_bad_mechanism_arguments_are_refused(image) -> None:
    with pytest.raises(ParameterError, match="mechanism must be one of Global, PTR"):
        privcore.release(image, dataset="digits", epsilon=1.0, mechanism="laplace")
    with pytest.raises(ParameterError, match="needs alpha"):
        privcore.release(image, dataset="digits", epsilon=1.0, mechanism="gauss-input")
    with pytest.raises(ParameterError, match="takes no alpha"):
        privcore.release(image, dataset="digits", epsilon=1.0, alpha=0.5)
    cert = privcore.certify(image, dataset="digits")
    with pytest.raises(ParameterError, match="certification applies to mechanism 'PTR' only"):
        privcore.release(image, dataset="digits", epsilon=1.0, certification=cert)
    with pytest.raises(ParameterError, match="epsilon must be in"):
        privcore.release(image, dataset="digits", epsilon=-1.0)


def test_registry_lists_every_mechanism_once_with_its_guarantee() -> None:
    assert registry.names() == ("Global", "PTR", "Gauss-Input", "Gauss-Output", "Lap-Output", "Global-Gauss",
                                "LDP-Image", "LDP-Embedding")
    assert registry.names(page="release") == ("Global", "PTR", "Global-Gauss", "LDP-Embedding")
    assert registry.get("global") is registry.get("GLOBAL") is registry.MECHANISMS[0]
    ptr = registry.get("ptr")
    assert ptr.guarantee == "(ε, δ/2, R)" and ptr.mechanism_epsilon(4.0) == 2.0 and ptr.uses_delta
    assert registry.get("Global").mechanism_epsilon(4.0) == 4.0 and not registry.get("Global").uses_delta
    with pytest.raises(ParameterError, match="got 'nope'"):
        registry.get("nope")


def test_cli_releases_with_the_global_mechanism_as_utf8_json(tmp_path: Path, image) -> None:
    from PIL import Image

    from privcore.cli import app

    png = tmp_path / "digit.png"
    Image.fromarray((image * 255).astype(np.uint8)).save(png)
    out = tmp_path / "release.json"
    res = CliRunner().invoke(app, ["release", "--dataset", "digits", str(png), "--epsilon", "2",
                             "--out", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text(encoding="utf-8")
    doc = json.loads(text)
    assert doc["mechanism"] == "Global" and "global_lipschitz" in doc["parameters"]
    assert "ℓ∞" in text and "\\u2113" not in text  # UTF-8, not escaped
    res = CliRunner().invoke(app, ["release", "--dataset", "digits", str(png), "--epsilon", "2",
                             "--mechanism", "ptr"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["mechanism"] == "PTR"
    res = CliRunner().invoke(app, ["release", "--dataset", "digits", str(png), "--epsilon", "2",
                             "--mechanism", "nope"])
    assert res.exit_code != 0
