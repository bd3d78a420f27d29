"""The noise-aware release classifier: its features, training on tiny data (loss falls, resumes to
identical weights, reloads to identical outputs), and how load_pipeline picks it up or refuses it."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch

from privcore.data import load_dataset
from privcore.errors import CheckpointError
from privcore.models.pipeline import load_pipeline
from privcore.nets.checkpoint import card_path, load_checkpoint
from privcore.nets.models import NoiseAwareClassifier, ToldScale, classify
from privcore.train import release_classifier as rc_mod
from privcore.train.delta_p import compute_delta_p
from privcore.train.embedder import train_embedder
from privcore.train.obfuscator import train_obfuscator
from privcore.train.recipes import embedder_recipe, obfuscator_recipe, release_classifier_recipe
from privcore.train.release_classifier import load_obfuscated_data, train_release_classifier
from tests._interrupt import Interrupt, bar_that_dies

FAST = {"progress": False, "device": "cpu"}
REC = release_classifier_recipe("digits", epochs=4, hidden=(32,), batch_size=32)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("models")
    d = root / "digits"
    ds = load_dataset("digits").subset(n_train=240, n_test=80, seed=2)
    train_embedder(
        ds, embedder_recipe("digits", epochs=3, hidden=32, batch_size=32), out=d / "embedder", **FAST
    )
    rec = obfuscator_recipe(
        "digits",
        "ARL-C-N",
        warmup_epochs=1,
        epochs=2,
        batch_size=40,
        adversary_hidden=16,
        classifier_refit_epochs=1,
    )
    train_obfuscator(ds, rec, embedder=d / "embedder", out=d / "obfuscator-ARL-C-N", **FAST)
    compute_delta_p(d / "obfuscator-ARL-C-N", n=4, workers=1, progress=False, certifier="interval")
    return root


def test_features_standardise_at_zero_noise_and_fade_with_the_noise_scale() -> None:
    torch.manual_seed(0)
    m = NoiseAwareClassifier(in_dim=3, num_classes=4, hidden=(8,))
    zt = torch.randn(500, 3) * torch.tensor([1e-4, 1.0, 5.0]) + torch.tensor([2.0, -1.0, 0.5])
    m.fit_normalisation(zt)
    seen: list[torch.Tensor] = []
    m.net.register_forward_hook(lambda _m, inp, _o: seen.append(inp[0]))
    m(zt[:7])
    u, s = seen[-1][:, :3], seen[-1][:, 3:]
    assert torch.allclose(u, (zt[:7] - zt.mean(0)) / zt.std(0), atol=1e-4) and torch.all(s == 1.0)
    b = 0.3
    m(zt[:7], b)
    u, s = seen[-1][:, :3], seen[-1][:, 3:]
    total = torch.sqrt(zt.std(0) ** 2 + 2 * b**2)  # Var Lap(b) = 2b²
    assert torch.allclose(s[0], zt.std(0) / total, rtol=1e-5)
    assert s[0, 0] < 1e-3 < 0.9 < s[0, 2]  # a tiny-spread coordinate is noise at b = 0.3
    per_row = m(zt[:2], torch.tensor([0.0, b]))  # one scale per release
    assert torch.allclose(per_row[0], m(zt[:1])[0], atol=1e-6) and torch.allclose(
        per_row[1], m(zt[1:2], b)[0], atol=1e-6
    )
    for bad in (-0.1, math.inf, math.nan):
        with pytest.raises(ValueError, match="scale"):
            m(zt[:2], bad)
    plain = torch.nn.Linear(3, 4)
    assert torch.equal(classify(plain, zt[:2], 5.0), plain(zt[:2]))  # other heads ignore the scale


def test_classifier_trains_reloads_and_is_used_by_the_pipeline(models: Path) -> None:
    d = models / "digits"
    card = train_release_classifier(
        d / "obfuscator-ARL-C-N", out=d / "classifier-ARL-C-N", recipe=REC, **FAST
    )
    obf = json.loads(card_path(d / "obfuscator-ARL-C-N").read_text())
    assert card["kind"] == "release-classifier" and card["obfuscator"]["sha256"] == obf["weights"]["sha256"]
    assert card["release_noise"]["delta_p"] == obf["delta_p"]["proposed"]
    hist = [h["loss"] for h in card["metrics"]["history"]]
    assert len(hist) == 4 and hist[-1] < hist[0]
    assert set(card["metrics"]["test_accuracy_release_noise"]) == {"1", "2", "5", "10"}
    # the card's ε = ∞ accuracy is that of the pipeline as load_pipeline assembles it
    p = load_pipeline("digits", "ARL-C-N", models_dir=models, device="cpu")
    assert (
        p.classifier_source == "release-classifier" and p.cards["classifier"]["name"] == "classifier-ARL-C-N"
    )
    data = load_obfuscated_data(d / "obfuscator-ARL-C-N", device="cpu")
    acc = float((p.classify(data.z_tilde_test).argmax(-1) == data.dataset.y_test).float().mean())
    assert acc == pytest.approx(card["metrics"]["test_accuracy"], abs=1e-9)
    # reload gives identical outputs; the noise scale reaches the classifier
    ck = load_checkpoint(d / "classifier-ARL-C-N", kind="release-classifier")
    v = data.z_tilde_test[:5]
    assert torch.equal(ck["classifier"](v, 0.2), p.classify(v, 0.2))
    assert not torch.allclose(p.classify(v, 0.0), p.classify(v, 5.0))
    assert data.scale(math.inf) == 0.0 and data.scale(2.0) == pytest.approx(data.delta_p * data.radius / 2)
    # the told-scale map is calibrated on the training split, recorded in the architecture and the
    # card, and recalibrating the card (as for the classifiers fitted before the map) reproduces it
    ts = ck["classifier"].told_scale
    assert card["architecture"]["classifier"]["kwargs"]["told_scale"] == ts.to_json()
    lo, hi = rc_mod.trained_scale_range(data.delta_p, data.radius, REC)
    assert (ts.min_scale, ts.max_scale) == (pytest.approx(lo), pytest.approx(hi))
    assert card["told_scale"]["raised"] == ts.to_json()["raised"]
    again = rc_mod.recalibrate_told_scale(d / "classifier-ARL-C-N", command="again")
    assert again["architecture"] == card["architecture"] and again["told_scale"]["command"] == "again"
    assert again["weights"] == card["weights"]


def test_classifier_training_resumes_to_identical_weights(
    models: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stem = models / "digits" / "obfuscator-ARL-C-N"
    full = train_release_classifier(stem, out=tmp_path / "a", recipe=REC, seed=5, **FAST)

    real_bar = rc_mod.epoch_bar
    monkeypatch.setattr(rc_mod, "epoch_bar", bar_that_dies(real_bar))
    with pytest.raises(Interrupt):
        train_release_classifier(stem, out=tmp_path / "b", recipe=REC, seed=5, **FAST)
    assert (tmp_path / "b.resume.safetensors").is_file() and not (tmp_path / "b.json").exists()
    monkeypatch.setattr(rc_mod, "epoch_bar", real_bar)
    resumed = train_release_classifier(stem, out=tmp_path / "b", recipe=REC, seed=5, **FAST)
    assert resumed["weights"]["sha256"] == full["weights"]["sha256"]
    assert not (tmp_path / "b.resume.safetensors").exists()


def test_pipeline_refuses_a_classifier_of_another_obfuscator(models: Path, tmp_path: Path) -> None:
    other = tmp_path / "m"
    shutil.copytree(models, other)
    d = other / "digits"
    if not card_path(d / "classifier-ARL-C-N").is_file():
        train_release_classifier(d / "obfuscator-ARL-C-N", out=d / "classifier-ARL-C-N", recipe=REC, **FAST)
    ds = load_dataset("digits").subset(n_train=240, n_test=80, seed=2)
    rec = obfuscator_recipe(
        "digits", "ARL-C-N", warmup_epochs=1, epochs=1, batch_size=40, adversary_hidden=16
    )
    train_obfuscator(ds, rec, embedder=d / "embedder", out=d / "obfuscator-ARL-C-N", seed=7, **FAST)
    with pytest.raises(CheckpointError, match="another obfuscator"):
        load_pipeline("digits", "ARL-C-N", models_dir=other)


def test_classifier_needs_delta_p_first(models: Path, tmp_path: Path) -> None:
    other = tmp_path / "m"
    shutil.copytree(models, other)
    c = card_path(other / "digits" / "obfuscator-ARL-C-N")
    card = json.loads(c.read_text())
    card.pop("delta_p")
    c.write_text(json.dumps(card))
    with pytest.raises(ValueError, match="train delta-p"):
        train_release_classifier(
            other / "digits" / "obfuscator-ARL-C-N", out=tmp_path / "x", recipe=REC, **FAST
        )


def test_told_scale_reads_untrained_scales_as_trained_ones() -> None:
    ts = ToldScale(min_scale=1.0, max_scale=100.0, clean_below=0.1, raised=((2.0, 5.0),))
    told = [0.0, 0.05, 0.1, 0.5, 1.0 - 1e-12, 1.0, 2.0, 3.0, 5.0, 50.0, 100.0, 100.0 + 1e-10, 200.0]
    read = [0.0, 0.0, 0.0, 1.0, 1.0 - 1e-12, 1.0, 2.0, 5.0, 5.0, 50.0, 100.0, 100.0 + 1e-10, 100.0]
    told = torch.tensor(told, dtype=torch.float64)
    assert ts(told).tolist() == read  # the range's ends carry a 1e-9 relative slack (last-bit differences)
    assert ToldScale.from_json(json.loads(json.dumps(ts.to_json()))) == ts
    for bad in (
        {"min_scale": 2.0, "max_scale": 1.0},
        {"min_scale": 1.0, "max_scale": 2.0, "clean_below": 1.5},
        {"min_scale": 1.0, "max_scale": 9.0, "raised": ((3.0, 4.0), (3.5, 5.0))},
        {"min_scale": 1.0, "max_scale": 9.0, "raised": ((3.0, 10.0),)},
    ):
        with pytest.raises(ValueError):
            ToldScale(**bad)
    torch.manual_seed(0)
    m = NoiseAwareClassifier(in_dim=3, num_classes=4, hidden=(8,), told_scale=ts.to_json())
    assert m.told_scale == ts
    v = torch.randn(4, 3)
    per_row = torch.tensor([0.05, 3.0, 0.5, 400.0])
    assert torch.equal(m(v, per_row), m.logits(v, torch.tensor([0.0, 5.0, 1.0, 100.0])))
    assert torch.equal(m(v, 0.0), m.logits(v, 0.0)) and torch.equal(m(v, 7.0), m.logits(v, 7.0))
    with pytest.raises(ValueError, match="scale"):
        m(v, -1.0)


class _StepClassifier(torch.nn.Module):
    """Right on every point for told scales in [2, 3], on half of them below 2, on none above 3."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("std", torch.tensor([0.4, 2.0]))

    def logits(self, v: torch.Tensor, scale: float) -> torch.Tensor:
        right = torch.ones(v.shape[0], dtype=torch.bool)
        if scale < 2.0:
            right[::2] = False
        elif scale > 3.0:
            right[:] = False
        return torch.stack([right.float(), (~right).float()], dim=1)


def test_calibration_raises_told_scales_where_training_accuracy_rises() -> None:
    y = torch.zeros(200, dtype=torch.long)
    ts = rc_mod.calibrate_told_scale(_StepClassifier(), torch.zeros(200, 2), y, min_scale=1.0, max_scale=10.0)
    assert ts.min_scale == 1.0 and ts.max_scale == 10.0
    assert ts.clean_below == pytest.approx(0.25 * 0.4 / math.sqrt(2))  # √2·b ≤ σ_min/4 reads as no noise
    # [1, 2) is right on half the points and 2 on all: it is read as the first grid scale ≥ 2
    (a, c), = ts.raised
    assert a == ts.clean_below and 2.0 <= c < 2.0 * 10 ** (1 / rc_mod.TOLD_SCALE_LEVELS_PER_DECADE)
    assert ts(torch.tensor([0.5, 1.0, 1.9, 2.5, 4.0], dtype=torch.float64)).tolist() == [c, c, c, 2.5, 4.0]


def test_training_draws_scales_below_the_range_too() -> None:
    data = type("D", (), {"delta_p": 2.0, "radius": 0.5})()
    rec = release_classifier_recipe("digits")
    b = rc_mod._sample_scales(20000, data, rec, torch.Generator().manual_seed(0))
    lo, hi = rc_mod.trained_scale_range(2.0, 0.5, rec)
    assert lo == pytest.approx(1.0 * rec.inv_epsilon_range[0] * 1e-4) and hi == pytest.approx(20.0)
    noisy = b[b > 0]
    below = noisy < 1.0 * rec.inv_epsilon_range[0]
    assert float(noisy.min()) >= lo and float(noisy.max()) <= hi
    assert 0.07 < float(below.float().mean()) < 0.13  # low_scale_fraction = 0.1 of the noisy draws
    old = release_classifier_recipe("digits", low_scale_fraction=0.0)
    assert rc_mod.trained_scale_range(2.0, 0.5, old.to_json())[0] == pytest.approx(0.01)
