"""The scale-told attacker and the live attack reading (privcore.mechanisms.live_attack): the loader
refuses a forged or mismatched card, the reading's intervals hold their means, the attacker beats the
no-release baseline where the release carries the image, every mechanism gets a reading or a clear
"no attacker", and the Attack page shows the reading at the defaults."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from privcore.errors import CheckpointError
from privcore.mechanisms import live_attack, registry
from privcore.mechanisms.attack_live import METRICS, attack_release, noise_free_attack
from privcore.models.told_attacker import load_told_attacker, told_attacker_stem

DATASET, MODEL, N = "mnist", "N-global", 200


@pytest.fixture(scope="module")
def pipe():
    return registry.get("Global").load(dataset=DATASET, model=MODEL, models_dir=None)


def _copy(tmp_path: Path) -> Path:
    src = told_attacker_stem(DATASET, MODEL)
    dst = tmp_path / DATASET
    dst.mkdir(parents=True)
    for suffix in (".json", ".safetensors"):
        shutil.copy(src.with_suffix(suffix), dst / (src.name + suffix))
    return dst / src.name


def test_the_shipped_attacker_loads_and_says_how_it_was_trained(pipe) -> None:
    att = load_told_attacker(pipe)
    assert att is not None
    card = att.card
    assert card["device"] == "cpu" and card["train_seconds"] > 0
    assert card["command"].startswith("python -m privcore train told-attacker")
    assert card["selection"]["split"] == "validation" and card["metrics"]["validation"]["inf"]["ssim"] > 0


@pytest.mark.parametrize("field", ["obfuscator", "embedder", "weights"])
def test_the_loader_refuses_a_forged_or_mismatched_card(pipe, tmp_path: Path, field: str) -> None:
    stem = _copy(tmp_path)
    card_file = stem.with_suffix(".json")
    card = json.loads(card_file.read_text())
    card[field]["sha256"] = "0" * 64  # another model's digest, or weights that are not these
    card_file.write_text(json.dumps(card))
    with pytest.raises(CheckpointError):
        load_told_attacker(pipe, tmp_path)


def test_the_loader_refuses_tampered_weights(pipe, tmp_path: Path) -> None:
    stem = _copy(tmp_path)
    blob = bytearray(stem.with_suffix(".safetensors").read_bytes())
    blob[-1] ^= 0xFF
    stem.with_suffix(".safetensors").write_bytes(bytes(blob))
    with pytest.raises(CheckpointError):
        load_told_attacker(pipe, tmp_path)


def test_a_model_without_attacker_gets_a_reason_not_an_error(pipe, tmp_path: Path) -> None:
    mech = registry.get("Global")
    r = live_attack(mech, pipe, mech.setting(epsilon=2.0), dataset=DATASET, model=MODEL, n=20, draws=1,
                    models_dir=str(tmp_path))
    assert not r.available and "no attacker is shipped" in r.reason and not r.metrics


def test_intervals_hold_their_means_and_the_release_beats_the_baseline(pipe) -> None:
    # fixed seed; at total ε = 20 and without noise the validation MSE was 0.041 and 0.035 against the
    # mean image's 0.073: intervals over 200 images are ±0.004, so the ordering is far outside them
    mech = registry.get("Global")
    for r in (live_attack(mech, pipe, mech.setting(epsilon=20.0), dataset=DATASET, model=MODEL, n=N, seed=0),
              noise_free_attack(mech, pipe, dataset=DATASET, model=MODEL, n=N, seed=0)):
        assert r.available and r.n == N
        for k in METRICS:
            for iv in (r.metrics[k], r.baseline[k]):
                assert iv.low <= iv.mean <= iv.high and math.isfinite(iv.mean)
        assert r.metrics["l2"].high < r.baseline["l2"].low
        assert r.metrics["psnr"].low > r.baseline["psnr"].high


@pytest.mark.parametrize("name", registry.names())
def test_every_mechanism_gets_a_reading_or_a_clear_no_attacker(pipe, name: str) -> None:
    mech = registry.get(name)
    target = pipe if mech.family == "posthoc" else None
    alpha = 0.1 if "alpha" in mech.parameter_names else None
    setting = mech.setting(epsilon=3.0, delta=1e-5, alpha=alpha)  # an ε no table was measured at
    r = live_attack(mech, target, setting, dataset=DATASET, model=MODEL, n=20, draws=1)
    if mech.family == "posthoc" and "radius" in mech.parameter_names:  # noise on f's output, over R
        assert r.available and r.told_scale > 0 and set(r.metrics) == set(METRICS)
        assert r.given_release == mech.needs_certificate  # PTR: read given a release, ⊥ = baseline
    else:
        assert not r.available and r.reason.startswith("no attacker for this model")


def test_a_sent_release_gets_its_reconstruction_and_metrics(pipe) -> None:
    from privcore.data import load_dataset

    mech = registry.get("Global")
    x = load_dataset(DATASET).x_test[0]
    z = mech.prepare(pipe, x)
    from privcore.mechanisms.protocol import Options

    release = mech.release(pipe, z, mech.setting(epsilon=10.0), Options(rng=0))
    sent = attack_release(mech, pipe, release, x)
    assert sent is not None and tuple(sent.reconstruction.shape) == tuple(x.shape)
    assert set(sent.metrics) == set(METRICS) and sent.told_scale == pytest.approx(release.noise_scale)


def test_a_release_the_attacker_does_not_read_gets_no_told_reconstruction(pipe) -> None:
    from privcore.data import load_dataset
    from privcore.mechanisms.protocol import Options

    mech = registry.get("ldp-embedding")  # its noise enters before f: the attacker is told no scale it sees
    x = load_dataset(DATASET).x_test[0]
    release = mech.release(pipe, mech.prepare(pipe, x), mech.setting(epsilon=10.0), Options(rng=0))
    assert release.released and mech.attack_unavailable()
    assert attack_release(mech, pipe, release, x) is None


def test_the_attack_page_shows_the_live_reading_at_the_defaults() -> None:
    from tests._dashboard import app

    at = app("attack", dataset=None)  # the embedded default: MNIST, N-global, Global
    assert not at.exception
    frames = [d.value for d in at.dataframe]
    table = next(f for f in frames if "attacker, from a release" in f.columns)
    assert list(table["metric"])[:2] == ["SSIM", "PSNR (dB)"]
    assert table["attacker, from a release"].str.contains(r"\[").all()
    captions = " ".join(c.value for c in at.caption)
    assert "n = 300 test images × 3 draws" in captions and "95 % bootstrap" in captions
    assert any("Measured for ARL-C-N under PTR" in h.value for h in at.subheader)


def test_a_sent_release_on_the_release_page_shows_its_reconstruction_metrics() -> None:
    from tests._dashboard import app, send

    at = app("release", dataset=None)  # MNIST, N-global, Global: its scale-told attacker is shipped
    assert not any("Against your image" in c.value for c in at.caption)  # nothing before Send
    send(at)
    shown = [c.value for c in at.caption if c.value.startswith("Against your image: SSIM")]
    assert len(shown) == 1 and "PSNR" in shown[0] and "ℓ1" in shown[0] and "ℓ2" in shown[0]


@pytest.mark.parametrize("name", registry.names())
def test_the_attack_on_one_image_agrees_with_the_reading_or_says_why(pipe, name: str) -> None:
    """Without noise, the attack on one image is the live reading's on that image alone (the same clipping,
    the attacker told b = 0); a mechanism no attacker reads says why, the words the Attack page shows."""
    from privcore.data import load_dataset
    from privcore.mechanisms import image_noise_free_attack

    mech = registry.get(name)
    x = load_dataset(DATASET).x_test[0]
    reason = mech.attack_unavailable()
    # class scores, or LDP-Embedding's noise that enters before f: nothing the attackers were trained on
    assert bool(reason) == (mech.family != "posthoc" or name == "LDP-Embedding")
    if reason:
        with pytest.raises(NotImplementedError, match="attacker"):
            image_noise_free_attack(mech, pipe, x, x)
        return
    one = image_noise_free_attack(mech, pipe, mech.prepare(pipe, x), x)
    assert one is not None and one.told_scale == 0.0 and tuple(one.reconstruction.shape) == tuple(x.shape)
    ref = noise_free_attack(mech, pipe, dataset=DATASET, model=MODEL, n=1)
    for k in METRICS:
        assert one.metrics[k] == pytest.approx(ref.metrics[k].mean, rel=1e-4, abs=1e-5)
