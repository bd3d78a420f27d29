"""Mechanism lab: training, the re-initialisation trick, storage, verification, experiments."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from privcore.errors import CheckpointError
from privcore.lab.data import DataDomain
from privcore.lab.experiments import (
    evaluation_sets,
    fig4_tables,
    fig5_summary,
    fig5_sweep,
    response_distribution,
)
from privcore.lab.mechanisms import (
    DataBlindMechanism,
    LearnedLaplaceMechanism,
    expert_mechanism,
    fit_data_blind,
)
from privcore.lab.queries import query_spec
from privcore.lab.store import list_cards, load_mechanism, save_mechanism
from privcore.lab.train import LabConfig, resolve_device, train_data, train_mechanism


@pytest.fixture(scope="module")
def mean_result():
    torch.set_num_threads(1)
    cfg = LabConfig(mechanism="laplace", query="mean", k=0.01, epochs=2, num_train=2000, max_restarts=0,
                    hidden=32)
    return train_mechanism(cfg, device="cpu")


def test_short_training_beats_the_data_blind_baseline_on_the_mean(mean_result) -> None:
    """A few seconds of training: learned Laplace ERL ≪ data-blind ERL on fresh datasets of
    both distributions, and ≥ the Laplace noise floor 2(kc/ε)² (an exact ERL cannot beat it)."""
    res = mean_result
    mech = res.mechanism
    assert isinstance(mech, LearnedLaplaceMechanism) and mech.certified_bound <= 0.01
    train = train_data(res.config.distribution, res.config.num_train, res.config.data_seed)
    blind = fit_data_blind("mean", "squared", train, candidates=query_spec("mean").grid(101))
    evals = evaluation_sets(num=500)
    for split, data in evals.items():
        learned = mech.expected_loss(data, "squared").mean()
        blind_erl = blind.expected_loss(data, "squared").mean()
        assert 2 * (0.01 * 10 / 1.0) ** 2 <= learned < 0.2 * blind_erl, (split, learned, blind_erl)
    assert res.history[-1] <= res.history[0]
    assert res.device == "cpu"


def test_reinitialisation_when_the_first_epoch_does_not_beat_data_blind() -> None:
    """k far too small: the network cannot beat the best constant, so every allowed restart
    is used; with a sensible k none is."""
    tiny = LabConfig(mechanism="laplace", query="mean", k=1e-5, epochs=1, num_train=320, max_restarts=2,
                     hidden=8)
    assert train_mechanism(tiny, device="cpu").restarts == 2
    ok = LabConfig(mechanism="laplace", query="mean", k=0.01, epochs=1, num_train=2000, max_restarts=2,
                   hidden=8)
    assert train_mechanism(ok, device="cpu").restarts == 0


def test_exponential_training_runs_and_is_calibrated() -> None:
    cfg = LabConfig(mechanism="exponential", query="median", k=1.0, epochs=1, num_train=640, max_restarts=0,
                    hidden=16, latent=4, n_responses=20)
    assert cfg.loss == "quantile" and cfg.lr == 1e-2
    res = train_mechanism(cfg, device="cpu")
    mech = res.mechanism
    assert mech.certified_bound <= 1.0
    assert mech.responses.shape == (20,) and mech.temperature == pytest.approx(20.0)
    data = evaluation_sets(num=500)["train"][:50]
    probs = mech.output(data).probs
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-12)


def test_config_checks_and_device() -> None:
    assert LabConfig(mechanism="laplace", query="variance", k=1.0).loss == "squared"
    assert LabConfig(mechanism="exponential", query="percentile10", k=1.0).loss == "quantile"
    with pytest.raises(ValueError, match="mechanism"):
        LabConfig(mechanism="gaussian", query="mean", k=1.0)
    with pytest.raises(ValueError, match="k must be"):
        LabConfig(mechanism="laplace", query="mean", k=0.0)
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            resolve_device("cuda")


def test_store_round_trip_and_tampering(mean_result, tmp_path) -> None:
    mech = mean_result.mechanism
    card_path = save_mechanism(mech, tmp_path / "laplace-mean-k0.01", card={"command": "test"})
    loaded, card = load_mechanism(card_path)
    data = evaluation_sets(num=500)["test"][:20]
    np.testing.assert_array_equal(loaded.predict(data), mech.predict(data))
    assert card["k"] == 0.01 and card["command"] == "test" and card["kind"] == "laplace"
    assert [c["query"] for _, c in list_cards(tmp_path)] == ["mean"]
    weights = tmp_path / "laplace-mean-k0.01.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 0xFF
    weights.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="SHA-256"):
        load_mechanism(card_path)
    # A card claiming a smaller k than the stored network has is refused.
    save_mechanism(mech, tmp_path / "m2", card={})
    card2 = json.loads((tmp_path / "m2.json").read_text())
    card2["k"] = 0.001
    (tmp_path / "m2.json").write_text(json.dumps(card2))
    with pytest.raises(CheckpointError, match="not a valid k-Lipschitz"):
        load_mechanism(tmp_path / "m2.json")


def test_response_distribution_masses() -> None:
    data = evaluation_sets(num=500)["train"][3]
    mechs = {
        "expert": expert_mechanism("median", epsilon=1.0),
        "blind": DataBlindMechanism(query="median", value=4.0),
        "laplace": expert_mechanism("mean", epsilon=0.5),
    }
    df = response_distribution(mechs, data, query="median")
    for label, grp in df.groupby("mechanism"):
        total = grp["mass"].sum() + grp["outside"].iloc[0]
        assert total == pytest.approx(1.0, abs=1e-12), label
    blind = df[df.mechanism == "blind"]
    assert blind.loc[blind["mass"].idxmax(), "response"] == pytest.approx(4.1)  # the bin [4.0, 4.2)
    responses, points = fig4_tables(mechs["expert"], n_datasets=3)
    assert set(responses.dataset) == {0, 1, 2} and len(points) == 300
    assert responses.groupby("dataset").probability.sum().to_numpy() == pytest.approx(np.ones(3))


def test_tiny_sweep_and_summary(tmp_path) -> None:
    df = fig5_sweep(mechanisms=["laplace"], queries=["mean"], ks=[0.003, 0.01], runs=2, epochs=1,
                    max_restarts=0, num_eval=200, num_train=640, save_dir=tmp_path,
                    save_ks={"laplace": [0.01]}, command="pytest")
    learned = df[df.method == "learned"]
    assert len(learned) == 2 * 2 * 2  # ks × runs × splits
    assert set(df.method) == {"learned", "data-blind", "expert"}
    expert = df[(df.method == "expert") & (df.split == "train")].erl.iloc[0]
    assert expert == pytest.approx(2 * (10 / 100) ** 2)  # Lap(c/(nε)) has MSE 2b²
    summary = fig5_summary(df)
    best = summary[summary.best_k]
    assert len(best) == 2 and best.k.nunique() == 1  # one best k, flagged on both splits
    row = summary[(summary.method == "learned") & (summary.split == "train")]
    assert set(row.runs) == {2}
    cards = list_cards(tmp_path)
    assert [c["k"] for _, c in cards] == [0.01] and cards[0][1]["command"] == "pytest"
    baselines = pd.DataFrame(cards[0][1]["metrics"]["baselines"])
    assert set(baselines.method) == {"data-blind", "expert"}


def test_engine_verifies_trained_networks() -> None:
    """The exact engine's certified bound is ≤ k and ≥ sampled gradient norms (small nets)."""
    from privcore.lab.verify import verify_mechanism

    dom = DataDomain(n=6)
    for mech_name, k in (("laplace", 0.2), ("exponential", 0.5)):
        cfg = LabConfig(mechanism=mech_name, query="median", k=k, epochs=1, num_train=320, max_restarts=0,
                        hidden=8, latent=3, n_responses=5, domain=dom)
        mech = train_mechanism(cfg, device="cpu").mechanism
        rep = verify_mechanism(mech, time_limit=30)
        assert rep.passed and rep.upper <= k * (1 + 1e-6)
        assert len(rep.checks) == (1 if mech_name == "laplace" else 5)
        # Sampled gradients (ℓ1→ℓ1 of a scalar = max |∂f/∂x_i|) never exceed the certificate.
        gen = np.random.default_rng(0)
        for net in mech.sequentials():
            x = torch.tensor(gen.uniform(0, 10, (64, 6)), requires_grad=True)
            net(x).sum().backward()
            assert float(x.grad.abs().max()) <= rep.upper * (1 + 1e-9)
