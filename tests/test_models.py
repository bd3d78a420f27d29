"""The shipped checkpoints in models/: they load (weights' SHA-256, architecture, current code),
their cards are complete, and their recorded metrics are what the weights give on the test set."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from privcore.data import get_spec
from privcore.errors import DatasetUnavailableError
from privcore.models.pipeline import default_models_dir, list_models, load_ip_models, load_pipeline
from privcore.nets.checkpoint import card_path, load_checkpoint
from privcore.train.embedder import dataset_from_card
from privcore.train.recipes import PAPER_RECIPE_SUFFIX, PAPER_WEIGHTS, parse_obfuscator_name

MODELS = default_models_dir()
DATASETS = ("digits", "fashion-mnist", "mnist")
SHIPPED = [m for m in list_models(MODELS) if m.dataset in DATASETS]
REQUIRED = ("Encoder", "ARL", "C", "N", "ARL-C", "ARL-N", "C-N", "ARL-C-N")  # Table 1's eight


def _data(card: dict) -> object:
    """The card's dataset; where it is missing, a skip — or, under ``make test``
    (``PRIVLENS_REQUIRE_DATASETS=1``, which installs the datasets first), a failure, so a machine
    without them cannot pass CI with the shipped models unchecked."""
    try:
        return dataset_from_card(card["dataset"])
    except DatasetUnavailableError as exc:
        reason = f"{card['dataset']['name']} not installed here: {str(exc).splitlines()[0]}"
        if os.environ.get("PRIVLENS_REQUIRE_DATASETS", "") not in ("", "0"):
            pytest.fail(f"{reason} (make test requires it: `make fashion-mnist` installs it)")
        pytest.skip(reason)


def test_models_directory_is_small_and_complete() -> None:
    total = sum(p.stat().st_size for p in MODELS.rglob("*") if p.is_file())
    # nine Table-1 pipelines per dataset (the 28×28 datasets' attackers are ~0.9 MiB each, their
    # embedders ~4 MiB), IP models, the α sweeps, MNIST's default model (its convolutional embedder
    # alone is 4.7 MiB), the models at the authors' weights: 55.5 MiB; and one scale-told attacker per
    # posthoc model of MNIST and Fashion-MNIST (up to 2.1 MiB each, 31.8 MiB in all): 87.3 MiB
    assert total < 92 * 2**20, f"models/ holds {total / 2**20:.1f} MiB"
    for ds in DATASETS:
        have = {(m.kind, m.name) for m in SHIPPED if m.dataset == ds}
        assert ("embedder", "embedder") in have
        for v in REQUIRED:
            assert ("obfuscator", v) in have and ("attacker", f"attacker-{v}") in have, (ds, v)
        # issue 15: ARL-C-N with the paper's own recipe ships beside ours on both datasets
        assert ("obfuscator", "ARL-C-N" + PAPER_RECIPE_SUFFIX) in have, ds
        # The rule for obfuscators: every release model (the eight, a paper-recipe twin
        # <variant>-paper, any other) ships with its noise-aware release classifier and attacker;
        # the study models (the α-sweep members ARL-alpha<α>, the Table-1 variants at the authors'
        # weights <variant>-alpha<α> / -sigma<σ> of experiment table1-weights) ship without an attacker.
        for m in SHIPPED:
            if m.dataset == ds and m.kind == "obfuscator" and not m.study_only:
                assert ("release-classifier", f"classifier-{m.name}") in have, (ds, m.name)
                assert ("attacker", f"attacker-{m.name}") in have, (ds, m.name)
        for ip in ("ip-cnn", "ip-cnn-gauss-input", "ip-lipschitz-l1", "ip-lipschitz-l2"):
            assert ("ip-classifier", ip) in have, (ds, ip)


@pytest.mark.parametrize("info", SHIPPED, ids=lambda m: f"{m.dataset}/{m.name}")
def test_shipped_checkpoint_loads_with_current_code_and_has_a_full_card(info: object) -> None:
    ck = load_checkpoint(info.path, strict_code=True)  # hash, strict tensors, unchanged architecture code
    card = ck.card
    assert card["command"].startswith("python -m privcore train "), card["command"]
    assert card["device"] == "cpu" and card["seed"] == 0
    assert len(card["dataset"]["fingerprint"]) == 64 and card["dataset"]["name"] == info.dataset
    if card["kind"] == "obfuscator" and info.fig2_only:
        assert card["recipe"]["sweep"] and card["name"] == f"ARL-alpha{card['recipe']['alpha']:g}"
    elif card["kind"] == "obfuscator":
        dp = card["delta_p"]
        assert dp["n"] >= 100 and dp["all_exact"] and dp["input_norm"] == "linf" and dp["output_norm"] == "l1"
        assert dp["proposed"] == pytest.approx(dp["mu"] + dp["n_sigma"] * dp["sigma"])
        assert dp["radius"] == card["radius"]["value"] == get_spec(info.dataset).radius
        assert "training embeddings" in dp["source"]
        cert = card["certification"]
        assert {"seconds_mean", "seconds_max"} <= set(cert) and cert["n"] == dp["n"] and cert["machine"]
        assert all(isinstance(m, (torch.nn.Linear, torch.nn.ReLU)) for m in ck["obfuscator"])
        variant, mode = parse_obfuscator_name(card["name"])
        assert card["variant"] == variant
        if mode == "paper":  # labelled as the paper's recipe, trained with App. E's weights
            loss = card["loss"]
            assert card["recipe"]["noise_mode"] == "paper" and loss["paper_weights"] is True
            assert loss["sigma"] == PAPER_WEIGHTS["sigma"]
            for k in ("alpha", "lambda", "margin"):  # the terms the variant has, at App. E's weights
                assert loss.get(k, 0.0) in (0.0, PAPER_WEIGHTS[k]), k
    if card["kind"] == "release-classifier":
        obf = load_checkpoint(info.path.with_name(card["obfuscator"]["file"]))
        assert card["obfuscator"]["sha256"] == obf.card["weights"]["sha256"]
        assert card["release_noise"]["delta_p"] == obf.card["delta_p"]["proposed"]
        assert card["release_noise"]["radius"] == obf.card["radius"]["value"]


@pytest.mark.parametrize("dataset", DATASETS)
def test_recorded_accuracies_are_what_the_weights_give(dataset: str) -> None:
    obfs = [m for m in SHIPPED if m.dataset == dataset and m.kind == "obfuscator"]
    data: dict[str, object] = {}  # per dataset block: a model trained with validation is scored on it
    embeddings: dict[str, torch.Tensor] = {}  # per embedder and data: most pipelines share one
    for m in obfs:
        block = json.dumps(m.card["dataset"], sort_keys=True)
        ds = data[block] if block in data else data.setdefault(block, _data(m.card))
        p = load_pipeline(dataset, m.name, models_dir=MODELS, device="cpu")
        key = p.cards["embedder"]["weights"]["sha256"] + block
        if key not in embeddings:
            embeddings[key] = torch.cat([p.embed(ds.x_test[i : i + 2000])
                                         for i in range(0, ds.x_test.shape[0], 2000)])
        pred = p.classify(p.obfuscate(embeddings[key])).argmax(-1)
        assert torch.equal(p.predict(ds.x_test[:200]), pred[:200]), m.name  # the same composition
        acc = float((pred == ds.y_test).float().mean())
        if m.study_only and p.classifier_source == "obfuscator":  # the own head, as its card recorded
            assert p.classifier_source == "obfuscator", m.name
            assert acc == pytest.approx(m.card["metrics"]["test_accuracy"], abs=1e-6), m.name
            continue
        # ε = ∞ accuracy of the pipeline as shipped: through its release classifier
        assert p.classifier_source == "release-classifier", m.name
        assert acc == pytest.approx(p.cards["classifier"]["metrics"]["test_accuracy"], abs=1e-6), m.name
        if dataset == "fashion-mnist":
            # Quality floors of the shipped set (paper, Table 1 informal FMNIST: Encoder 0.779,
            # ARL-C-N 0.706; the models issue asks ARL-C-N ≥ 0.78 at ε = ∞).
            # The other five (C, N, ARL-C, ARL-N, C-N; 0.780–0.804 as shipped) guard at 0.75.
            # The authors'-code twin (issue 32.2) is their recipe as they ran it: its accuracy is a finding
            # (docs/RESULTS.md), guarded against regressions only.
            floor = {"Encoder": 0.78, "ARL-C-N": 0.78, "ARL": 0.65, "ARL-C-N-authors": 0.5,
                     "ARL-C-N-authors-abc903c": 0.1}.get(m.name, 0.75)
            assert acc >= floor, (m.name, acc)
    ip = load_ip_models(dataset, models_dir=MODELS, device="cpu")
    for name, model in ip.models.items():
        block = json.dumps(model.card["dataset"], sort_keys=True)
        ds = data[block] if block in data else data.setdefault(block, _data(model.card))
        with torch.no_grad():
            out = torch.cat([model(ds.x_test[i : i + 2000]) for i in range(0, ds.x_test.shape[0], 2000)])
        acc = float((out.argmax(1) == ds.y_test).float().mean())
        assert acc == pytest.approx(model.card["metrics"]["test_accuracy"], abs=1e-6), name
        if model.lipschitz is not None:
            assert model.lipschitz["l1" if "l1" in name else "l2"] <= 1.0 + 1e-9


def test_shipped_paths_follow_the_layout() -> None:
    for m in SHIPPED:
        assert m.path.parent == MODELS / m.dataset and m.path.is_file()
        assert card_path(m.path).is_file()
    assert Path(MODELS).name == "models"
