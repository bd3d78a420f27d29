"""Training recipes end to end on tiny data: losses fall, runs are reproducible from the seed,
an interrupted run resumes to the very same weights, checkpoints reload to identical outputs,
obfuscators pass through the exact Lipschitz engine, Δp statistics follow their formula."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from privcore.data import load_dataset
from privcore.nets.checkpoint import load_checkpoint, read_card
from privcore.train import common
from privcore.train import embedder as embedder_mod
from privcore.train.delta_p import compute_delta_p, delta_p_statistics
from privcore.train.embedder import evaluate_embedder, train_embedder
from privcore.train.losses import contrastive_loss
from privcore.train.obfuscator import train_obfuscator
from privcore.train.recipes import (
    VARIANTS,
    embedder_recipe,
    ip_recipe,
    obfuscator_recipe,
    parse_variant,
)
from tests._interrupt import Interrupt, bar_that_dies

FAST = {"progress": False, "device": "cpu"}


@pytest.fixture(scope="module")
def tiny() -> Any:
    return load_dataset("digits").subset(n_train=240, n_test=80, seed=0)


@pytest.fixture(scope="module")
def trained(tiny: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("models") / "digits"
    rec = embedder_recipe("digits", epochs=6, hidden=64, batch_size=32)
    emb = train_embedder(tiny, rec, out=d / "embedder", seed=0, **FAST)
    orec = obfuscator_recipe(
        "digits",
        "ARL-C-N",
        warmup_epochs=2,
        epochs=6,
        batch_size=32,
        adversary_hidden=32,
        classifier_refit_epochs=1,
        lr=1e-2,
    )
    obf = train_obfuscator(tiny, orec, embedder=d / "embedder", out=d / "obfuscator-ARL-C-N", seed=0, **FAST)
    return {"dir": d, "emb": emb, "obf": obf, "rec": rec, "orec": orec}


def test_variant_names_map_to_the_papers_regularisers() -> None:
    assert VARIANTS == ("Encoder", "ARL", "C", "N", "ARL-C", "ARL-N", "C-N", "ARL-C-N")
    assert parse_variant("Encoder") == (False, False, False)
    assert parse_variant("ARL-C-N") == (True, True, True)
    assert parse_variant("C-N") == (False, True, True)
    r = obfuscator_recipe("fashion-mnist", "ARL-C-N")
    assert (r.alpha, r.lam, r.margin, r.sigma, r.lr) == (0.99, 1.0, 25.0, 0.01, 1e-3)
    assert obfuscator_recipe("fashion-mnist", "C").alpha == 0.0
    sweep = obfuscator_recipe("digits", "ARL", alpha=0.9)
    assert sweep.name == "ARL-alpha0.9" and sweep.alpha == 0.9
    with pytest.raises(ValueError, match="alpha can only be set for a variant with ARL"):
        obfuscator_recipe("digits", "C", alpha=0.5)
    e = embedder_recipe("fashion-mnist")
    assert (e.beta, e.latent_dim, e.lr) == (5.0, 8, 1e-3)
    assert embedder_recipe("utkface").latent_dim == 10
    with pytest.raises(ValueError, match="variant must be one of"):
        obfuscator_recipe("digits", "ARL-X")


def test_the_papers_recipe_ships_under_its_own_name_with_app_e_weights() -> None:
    from privcore.train.recipes import PAPER_WEIGHTS, parse_obfuscator_name, table1_order

    paper = obfuscator_recipe("fashion-mnist", "ARL-C-N-paper")
    assert paper == obfuscator_recipe("fashion-mnist", "ARL-C-N", noise_mode="paper")
    assert paper.name == "ARL-C-N-paper" and paper.variant == "ARL-C-N" and paper.noise_mode == "paper"
    assert paper.contrastive_units == "raw"  # no release-noise units: the paper's contrastive term
    terms = paper.loss_terms()
    assert terms["paper_weights"] is True and "release_weight" not in terms
    assert {k: terms[k] for k in PAPER_WEIGHTS} == PAPER_WEIGHTS == {
        "alpha": 0.99, "sigma": 0.01, "lambda": 1.0, "margin": 25.0}
    ours = obfuscator_recipe("fashion-mnist", "ARL-C-N")
    assert ours.name == "ARL-C-N" and ours.loss_terms()["paper_weights"] is False
    assert obfuscator_recipe("digits", "ARL").loss_terms()["paper_weights"] is True  # no N: same recipe
    assert obfuscator_recipe("digits", "ARL", alpha=0.5).loss_terms()["paper_weights"] is False
    assert parse_obfuscator_name("N-paper") == ("N", "paper") and parse_obfuscator_name("C") == ("C", None)
    for bad in ("C-paper", "ARL-C-N-paper-paper", "ARL-alpha0.5"):
        with pytest.raises(ValueError, match="variant must be one of"):
            parse_obfuscator_name(bad)
    with pytest.raises(ValueError, match="contradicts"):
        obfuscator_recipe("digits", "ARL-C-N-paper", noise_mode="release")
    weights = obfuscator_recipe("fashion-mnist", "ARL-C", alpha=0.9)
    assert weights.name == "ARL-C-alpha0.9" and not weights.sweep and weights.alpha == 0.9
    assert weights.loss_terms()["paper_weights"] is False
    noisy = obfuscator_recipe("fashion-mnist", "N-paper", sigma=0.1)
    assert noisy.name == "N-paper-sigma0.1" and noisy.sigma == 0.1 and noisy.noise_mode == "paper"
    assert obfuscator_recipe("fashion-mnist", "ARL", alpha=0.9).name == "ARL-alpha0.9"  # Fig. 2's
    assert parse_obfuscator_name("ARL-C-alpha0.9") == ("ARL-C", "weights")
    assert parse_obfuscator_name("N-paper-sigma0.1") == ("N", "weights")
    for bad in ("C-alpha0.9", "N-sigma0.1"):  # no ARL to weigh; σ is the paper noise's
        with pytest.raises(ValueError, match="variant must be one of"):
            parse_obfuscator_name(bad)
    for bad, kw in (("C", {"alpha": 0.9}), ("N", {"sigma": 0.1}), ("ARL-C-alpha0.9", {})):
        with pytest.raises(ValueError):
            obfuscator_recipe("digits", bad, **kw)
    names = ["ARL-alpha0.5", "ARL-C-N-paper", "ARL-C-N", "Encoder", "N-paper"]
    assert table1_order(names) == ["Encoder", "N-paper", "ARL-C-N", "ARL-C-N-paper"]


def test_contrastive_loss_formula_on_a_hand_example() -> None:
    z = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])
    y = torch.tensor([0, 0, 1])
    # pairs: (0,1) same d=5; (0,2) diff d=1 -> 10-1=9; (1,2) diff d=sqrt(9+9)=4.243 -> 5.757
    expect = 2 * (5.0 + 9.0 + (10.0 - math.sqrt(18.0))) / 6
    assert contrastive_loss(z, y, margin=10.0).item() == pytest.approx(expect, rel=1e-6)
    far = torch.tensor([[0.0], [100.0]])
    assert contrastive_loss(far, torch.tensor([0, 1]), margin=10.0).item() == 0.0


def test_embedder_loss_falls_and_checkpoint_reloads_to_identical_outputs(
    tiny: Any, trained: dict[str, Any]
) -> None:
    hist = trained["emb"]["metrics"]["history"]
    assert len(hist) == 6 and hist[-1]["loss"] < hist[0]["loss"]
    ck = load_checkpoint(trained["dir"] / "embedder", kind="embedder", dataset="digits")
    again = evaluate_embedder(ck["vae"], tiny, device=torch.device("cpu"), beta=trained["rec"].beta)
    for k in ("test_reconstruction_bce", "test_kl", "knn10_test_accuracy", "kl_per_dim"):
        assert again[k] == trained["emb"]["metrics"][k]
    assert trained["emb"]["dataset"]["fingerprint"] == tiny.fingerprint
    assert trained["emb"]["command"] is None and trained["emb"]["seed"] == 0


def test_embedder_training_is_reproducible_and_resumes_exactly(
    tiny: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch.set_num_threads(1)
    rec = embedder_recipe("digits", epochs=4, hidden=32, batch_size=32)
    full = train_embedder(tiny, rec, out=tmp_path / "a", seed=3, **FAST)

    real_bar = common.epoch_bar
    monkeypatch.setattr(embedder_mod, "epoch_bar", bar_that_dies(real_bar))
    with pytest.raises(Interrupt):
        train_embedder(tiny, rec, out=tmp_path / "b", seed=3, **FAST)
    assert (tmp_path / "b.resume.safetensors").is_file() and not (tmp_path / "b.json").exists()
    monkeypatch.setattr(embedder_mod, "epoch_bar", real_bar)
    resumed = train_embedder(tiny, rec, out=tmp_path / "b", seed=3, **FAST)
    assert resumed["weights"]["sha256"] == full["weights"]["sha256"]
    assert [h["loss"] for h in resumed["metrics"]["history"]] == [
        h["loss"] for h in full["metrics"]["history"]
    ]
    assert not (tmp_path / "b.resume.safetensors").exists()
    other = train_embedder(tiny, rec, out=tmp_path / "c", seed=4, **FAST)
    assert other["weights"]["sha256"] != full["weights"]["sha256"]


def test_obfuscator_trains_and_reloads_identically(tiny: Any, trained: dict[str, Any]) -> None:
    card = trained["obf"]
    hist = card["metrics"]["history"]
    assert [h["phase"] for h in hist] == ["warmup"] * 2 + ["joint"] * 6 + ["classifier-refit"]
    trained_f = [h for h in hist if h["phase"] != "classifier-refit"]
    assert trained_f[-1]["contrastive"] < trained_f[0]["contrastive"]
    assert hist[-1]["ce"] < hist[0]["ce"]
    assert card["embedder"]["sha256"] == trained["emb"]["weights"]["sha256"]
    assert card["radius"]["value"] > 0 and card["delta_p"] is None
    assert set(card["architecture"]) == {"obfuscator", "classifier"}  # proxy adversary not shipped by default
    obf = load_checkpoint(trained["dir"] / "obfuscator-ARL-C-N", kind="obfuscator")
    emb = load_checkpoint(trained["dir"] / "embedder")
    with torch.no_grad():
        pred = obf["classifier"](obf["obfuscator"](emb["vae"].encode(tiny.x_test)[0])).argmax(1)
    assert float((pred == tiny.y_test).float().mean()) == card["metrics"]["test_accuracy"]


@pytest.mark.parametrize("variant", ["Encoder", "ARL-N", "C"])
def test_other_variants_run(tiny: Any, trained: dict[str, Any], tmp_path: Path, variant: str) -> None:
    rec = obfuscator_recipe(
        "digits",
        variant,
        warmup_epochs=1,
        epochs=2,
        batch_size=64,
        adversary_hidden=16,
        classifier_refit_epochs=0,
    )
    card = train_obfuscator(
        tiny,
        rec,
        embedder=trained["dir"] / "embedder",
        out=tmp_path / variant,
        seed=1,
        keep_adversary=True,
        **FAST,
    )
    assert card["name"] == variant and "adversary" in card["architecture"]
    assert card["recipe"]["alpha"] == (0.99 if "ARL" in variant else 0.0)
    con = [h["contrastive"] for h in card["metrics"]["history"] if h["phase"] == "joint"]
    assert all(c == 0.0 for c in con) == ("C" not in variant.split("-"))


def test_delta_p_statistics_formula() -> None:
    v = np.array([1.0, 2.0, 3.0, 4.0])
    s = delta_p_statistics(v, n_sigma=3.0)
    sd = math.sqrt(((v - 2.5) ** 2).sum() / 3)
    assert s["mu"] == 2.5 and s["sigma"] == pytest.approx(sd) and s["proposed"] == pytest.approx(2.5 + 3 * sd)
    assert s["fraction_above_proposed"] == 0.0
    with pytest.raises(ValueError, match="at least 2"):
        delta_p_statistics([1.0])


def test_delta_p_step_certifies_training_embeddings_and_updates_the_card(trained: dict[str, Any]) -> None:
    from privcore.lipschitz import local_lipschitz

    stem = trained["dir"] / "obfuscator-ARL-C-N"
    card = compute_delta_p(stem, n=6, workers=1, seed=0, progress=False, command="test", cache=None)
    dp, cert = card["delta_p"], card["certification"]
    assert dp["n"] == 6 and dp["n_sigma"] == 3.0 and dp["all_exact"]
    assert dp["proposed"] == pytest.approx(dp["mu"] + 3 * dp["sigma"])
    assert dp["radius"] == card["radius"]["value"] and {"seconds_mean", "seconds_max"} <= set(cert)
    assert read_card(stem)["delta_p_command"] == "test"
    # the statistics are those of L(f, B(z_i, R)) at TRAINING embeddings, recomputed independently
    tiny = load_dataset("digits").subset(n_train=240, n_test=80, seed=0)
    idx = torch.randperm(240, generator=torch.Generator().manual_seed(0))[:6].sort().values
    ck, emb = load_checkpoint(stem), load_checkpoint(trained["dir"] / "embedder")
    with torch.no_grad():
        z = emb["vae"].encode(tiny.x_train[idx])[0].double().numpy()
    ups = [local_lipschitz(ck["obfuscator"], zi, dp["radius"]).upper for zi in z]
    assert dp["mu"] == pytest.approx(float(np.mean(ups)), rel=1e-6)


def test_delta_p_rerun_solves_only_the_points_not_yet_cached(
    trained: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README: a rerun after an interruption recomputes only what is missing (issue 19)."""
    from privcore.lipschitz import batch as batch_mod
    from privcore.lipschitz.cache import LipschitzCache

    stem = trained["dir"] / "obfuscator-ARL-C-N"
    first = compute_delta_p(stem, n=4, workers=1, seed=0, progress=False, cache=tmp_path)["delta_p"]
    assert len(LipschitzCache(tmp_path)) == 4
    calls: list[bytes] = []
    real = batch_mod.local_lipschitz

    def counting(net: Any, c: np.ndarray, r: float, **kw: Any) -> Any:
        calls.append(np.asarray(c).tobytes())
        return real(net, c, r, **kw)

    monkeypatch.setattr(batch_mod, "local_lipschitz", counting)
    again = compute_delta_p(stem, n=4, workers=1, seed=0, progress=False, cache=tmp_path)["delta_p"]
    assert calls == [] and again["mu"] == first["mu"]  # all four read back, none solved
    more = compute_delta_p(stem, n=7, workers=1, seed=0, progress=False, cache=tmp_path)["delta_p"]
    assert len(calls) == 3 and more["n"] == 7  # the same seed's first 4 points are cached: 3 solved


def test_ip_recipes_write_certified_cards(tiny: Any, tmp_path: Path) -> None:
    from privcore.mechanisms import GaussInput
    from privcore.train.ip import train_ip_classifier

    torch.set_num_threads(1)
    cnn = train_ip_classifier(
        tiny,
        ip_recipe("digits", "cnn", epochs=1, finetune_epochs=1, batch_size=64),
        out_dir=tmp_path,
        seed=0,
        **FAST,
    )
    assert [c["name"] for c in cnn] == ["ip-cnn", "ip-cnn-gauss-input"]
    ft = cnn[1]["finetune"]
    assert ft["sigma"] == GaussInput(epsilon=ft["epsilon"], delta=ft["delta"], alpha=ft["alpha"]).sigma
    (l2,) = train_ip_classifier(
        tiny, ip_recipe("digits", "lipschitz-l2", epochs=1, hidden=(16,)), out_dir=tmp_path, seed=0, **FAST
    )
    assert l2["lipschitz"]["native_norm"] == "l2" and l2["lipschitz"]["l2"] <= 1.0
    model = load_checkpoint(tmp_path / "ip-lipschitz-l2")["model"]
    assert model.lipschitz_bound(2) == l2["lipschitz"]["l2"]
