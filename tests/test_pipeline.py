"""The loading entry points (load_pipeline, load_ip_models, list_models), the reconstruction
attacker and the CLI, on a tiny models directory trained by the fixture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from privcore.cli import app
from privcore.data import load_dataset
from privcore.errors import CheckpointError
from privcore.models.pipeline import list_models, load_ip_models, load_pipeline
from privcore.nets.checkpoint import card_path
from privcore.train.attacker import train_reconstruction_attacker
from privcore.train.delta_p import compute_delta_p
from privcore.train.embedder import train_embedder
from privcore.train.ip import train_ip_classifier
from privcore.train.obfuscator import train_obfuscator
from privcore.train.recipes import attacker_recipe, embedder_recipe, ip_recipe, obfuscator_recipe
from privcore.train.release_aware import laplace_release_noise

FAST = {"progress": False, "device": "cpu"}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("models")
    d = root / "digits"
    ds = load_dataset("digits").subset(n_train=200, n_test=60, seed=1)
    train_embedder(
        ds, embedder_recipe("digits", epochs=3, hidden=32, batch_size=32), out=d / "embedder", **FAST
    )
    rec = obfuscator_recipe(
        "digits",
        "ARL-C-N",
        warmup_epochs=1,
        epochs=2,
        batch_size=50,
        adversary_hidden=16,
        classifier_refit_epochs=1,
    )
    train_obfuscator(ds, rec, embedder=d / "embedder", out=d / "obfuscator-ARL-C-N", **FAST)
    compute_delta_p(d / "obfuscator-ARL-C-N", n=4, workers=1, progress=False, certifier="interval")
    train_reconstruction_attacker(
        d / "obfuscator-ARL-C-N",
        recipe=attacker_recipe("digits", epochs=2, hidden=32),
        out=d / "attacker-ARL-C-N",
        **FAST,
    )
    train_ip_classifier(ds, ip_recipe("digits", "lipschitz-l1", epochs=1, hidden=(16,)), out_dir=d, **FAST)
    (root / "digits" / "notes.json").write_text(json.dumps({"not": "a card"}))  # foreign JSON is ignored
    return root


def test_load_pipeline_gives_inference_only_modules_and_card_info(models: Path) -> None:
    p = load_pipeline("digits", "ARL-C-N", models_dir=models, device="cpu")
    assert p.image_shape == (1, 8, 8) and p.latent_dim == 8 and len(p.class_names) == 10
    assert p.radius == p.cards["obfuscator"]["radius"]["value"]
    assert p.delta_p is not None and p.proposed_delta_p == pytest.approx(p.delta_p.mu + 3 * p.delta_p.sigma)
    assert isinstance(p.obfuscator, torch.nn.Sequential)
    for m in (p.embedder, p.decoder, p.obfuscator, p.classifier, p.attacker):
        assert not m.training and not any(q.requires_grad for q in m.parameters())
    x = load_dataset("digits").x_test[:5]
    z = p.embed(x)
    assert z.shape == (5, 8) and torch.allclose(p.embed(x[0]), z[0], atol=1e-6)
    assert p.decode(z).shape == (5, 1, 8, 8) and p.reconstruct(p.obfuscate(z)).shape == (5, 1, 8, 8)
    assert torch.equal(p.predict(x), p.classify(p.obfuscate(z)).argmax(1))


def test_pipeline_refuses_mismatched_parts(models: Path, tmp_path: Path) -> None:
    other = tmp_path / "m"
    shutil.copytree(models, other)
    ds = load_dataset("digits").subset(n_train=200, n_test=60, seed=1)
    # a retrained embedder no longer matches the obfuscator trained on the old one
    train_embedder(
        ds, embedder_recipe("digits", epochs=1, hidden=32), out=other / "digits" / "embedder", seed=9, **FAST
    )
    with pytest.raises(CheckpointError, match="another embedder"):
        load_pipeline("digits", "ARL-C-N", models_dir=other)
    with pytest.raises(CheckpointError, match="no obfuscator 'ARL'"):
        load_pipeline("digits", "ARL", models_dir=models)
    with pytest.raises(CheckpointError, match="train all --dataset fashion-mnist"):
        load_pipeline("fashion-mnist", models_dir=models)


def test_attacker_card_and_noise(models: Path) -> None:
    card = json.loads(card_path(models / "digits" / "attacker-ARL-C-N").read_text())
    obf = json.loads(card_path(models / "digits" / "obfuscator-ARL-C-N").read_text())
    assert card["release_noise"]["delta_p"] == obf["delta_p"]["proposed"]
    assert card["release_noise"]["radius"] == obf["radius"]["value"]
    assert set(card["metrics"]["test"]) == {"1", "2", "5", "10", "inf"}
    # the attacker is worse (larger MSE) on noisier releases: ε = 1 versus noise-free
    assert card["metrics"]["test"]["1"]["mse"] >= card["metrics"]["test"]["inf"]["mse"]
    with pytest.raises(ValueError, match="delta_p"):
        train_reconstruction_attacker(
            models / "digits" / "obfuscator-ARL-C-N", out=models / "x", delta_p=-1.0, **FAST
        )


def test_laplace_release_noise_has_the_laplace_scale() -> None:
    g = torch.Generator().manual_seed(0)
    x = laplace_release_noise((200_000,), 0.7, generator=g)
    # E|X| = b for Lap(0, b); std of the mean of |X| is b/sqrt(n) ≈ 0.0016: 6σ band, false alarm < 1e-8
    assert abs(float(x.abs().mean()) - 0.7) < 6 * 0.7 / 200_000**0.5
    assert abs(float(x.mean())) < 6 * 0.7 * 2**0.5 / 200_000**0.5


def test_list_models_reads_cards_only(models: Path) -> None:
    infos = list_models(models)
    kinds = {(m.kind, m.name) for m in infos}
    assert kinds == {
        ("embedder", "embedder"),
        ("obfuscator", "ARL-C-N"),
        ("attacker", "attacker-ARL-C-N"),
        ("ip-classifier", "ip-lipschitz-l1"),
    }
    assert all("history" not in m.metrics for m in infos)


def test_list_models_skips_a_tampered_card_with_a_warning(models: Path, tmp_path: Path) -> None:
    shutil.copytree(models, tmp_path / "m")
    bad = next((tmp_path / "m").glob("*/obfuscator-*.json"))
    card = json.loads(bad.read_text())
    card["dataset"] = 5
    bad.write_text(json.dumps(card))
    with pytest.warns(RuntimeWarning, match="dataset"):
        infos = list_models(tmp_path / "m")
    assert {(m.kind, m.name) for m in infos} == {
        ("embedder", "embedder"), ("attacker", "attacker-ARL-C-N"), ("ip-classifier", "ip-lipschitz-l1")
    }


def test_load_ip_models_recomputes_and_checks_certified_constants(models: Path, tmp_path: Path) -> None:
    ip = load_ip_models("digits", models_dir=models)
    m = ip["ip-lipschitz-l1"]
    assert m.lipschitz is not None and m.lipschitz["l1"] <= 1.0
    assert m.lipschitz["l1"] == m.model.lipschitz_bound(1)
    assert m(torch.rand(2, 1, 8, 8)).shape == (2, 10)
    with pytest.raises(KeyError):
        ip["ip-cnn"]
    other = tmp_path / "m"
    shutil.copytree(models, other)
    c = card_path(other / "digits" / "ip-lipschitz-l1")
    card = json.loads(c.read_text())
    card["lipschitz"]["l1"] = card["lipschitz"]["l1"] / 2  # a card that understates μ
    c.write_text(json.dumps(card))
    with pytest.raises(CheckpointError, match="exceeds the card"):
        load_ip_models("digits", models_dir=other)


def test_cli_help_and_evaluate(models: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["train", "--help"])
    assert res.exit_code == 0 and "delta-p" in res.output and "alpha-sweep" in res.output
    res = runner.invoke(app, ["evaluate", "--dataset", "digits", "--models-dir", str(models), "--json"])
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.output)
    (o,) = out["obfuscators"]
    card = json.loads(card_path(models / "digits" / "obfuscator-ARL-C-N").read_text())
    assert o["accuracy_eps_inf"] == card["metrics"]["test_accuracy"]
    assert set(o["noise_only_accuracy"]) == {"1", "2", "5", "10"}
    assert out["ip"][0]["name"] == "ip-lipschitz-l1"
    res = runner.invoke(app, ["evaluate", "--dataset", "mnist", "--models-dir", str(models)])
    assert res.exit_code == 2 and "no models for dataset 'mnist'" in res.output


def test_cli_alpha_sweep_trains_named_sweep_members(models: Path, tmp_path: Path) -> None:
    other = tmp_path / "m"
    shutil.copytree(models, other)
    args = [
        "train",
        "alpha-sweep",
        "--dataset",
        "digits",
        "--alphas",
        "0,0.9",
        "--epochs",
        "1",
        "--warmup-epochs",
        "0",
        "--refit-epochs",
        "0",
        "--models-dir",
        str(other),
        "--no-progress",
        "--device",
        "cpu",
        "--threads",
        "1",
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    for a in ("0", "0.9"):
        card = json.loads(card_path(other / "digits" / f"obfuscator-ARL-alpha{a}").read_text())
        assert card["recipe"]["alpha"] == float(a) and card["recipe"]["sweep"]
        assert card["command"].startswith("python -m privcore train alpha-sweep")
    p = load_pipeline("digits", "ARL-alpha0.9", models_dir=other)
    assert p.attacker is None and p.delta_p is None
    # sweep members are Fig. 2's: marked fig2_only, and the dashboard's model picker leaves them out
    infos = {m.name: m for m in list_models(other) if m.dataset == "digits" and m.kind == "obfuscator"}
    assert infos["ARL-alpha0.9"].fig2_only and not infos["ARL-C-N"].fig2_only
    assert infos["ARL-alpha0.9"].study_only and not infos["ARL-C-N"].study_only
    from privlens import pipelines

    picker = pipelines._catalogue(str(other))["digits"]
    assert "ARL-C-N" in picker and not any("alpha" in n for n in picker)
