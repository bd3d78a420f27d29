"""The authors'-code twin of ARL-C-N (issue 32.2; :mod:`privcore.train.authors`): its recipe and
name, a contrastive term that reaches f with no gradient (as in their adversarial_training.py:232),
and checkpoint selection on the validation split that never reads the test set."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch

from privcore.data import load_dataset
from privcore.nets.checkpoint import load_checkpoint
from privcore.train import obfuscator as obf_mod
from privcore.train.embedder import train_embedder
from privcore.train.obfuscator import train_obfuscator
from privcore.train.recipes import (
    AUTHORS_RECIPE_SUFFIX,
    obfuscator_recipe,
    parse_obfuscator_name,
    table1_order,
)

FAST = {"progress": False, "device": "cpu", "resume": False}
TINY = {"epochs": 3, "batch_size": 32, "adversary_hidden": 16}


@pytest.fixture(scope="module")
def tiny() -> Any:
    return load_dataset("digits").subset(n_train=200, n_test=60, seed=0)


@pytest.fixture(scope="module")
def embedder(tiny: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from privcore.train.recipes import embedder_recipe

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("models") / "embedder"
    rec = embedder_recipe("digits", epochs=3, hidden=32, batch_size=32)
    train_embedder(tiny, rec, out=out, seed=0, **FAST)
    return out


def test_the_twin_has_the_authors_settings_and_its_own_name() -> None:
    mnist = obfuscator_recipe("mnist", "ARL-C-N-authors")
    fmnist = obfuscator_recipe("fashion-mnist", "ARL-C-N-authors")
    assert AUTHORS_RECIPE_SUFFIX == "-authors" and mnist.name == fmnist.name == "ARL-C-N-authors"
    assert parse_obfuscator_name("ARL-C-N-authors") == ("ARL-C-N", "authors")
    assert table1_order(["ARL-C-N-authors", "ARL-C-N-paper", "ARL-C-N"])[-1] == "ARL-C-N-authors"
    # experiment_automation.py:89 (MNIST) and :91 (Fashion-MNIST) at 66a8d35
    assert (mnist.alpha, mnist.lam, fmnist.alpha, fmnist.lam) == (0.99, 100.0, 0.995, 50.0)
    for r in (mnist, fmnist):
        assert r.authors_code and r.variant == "ARL-C-N" and r.contrastive and r.noise
        assert (r.noise_mode, r.sigma, r.margin) == ("paper", 0.01, 25.0)
        assert not r.noise_on_f and not r.contrastive_grad
        assert (r.obfuscator_hidden, r.lr, r.adversary_lr, r.batch_size) == ((10,), 1e-4, 1e-3, 128)
        assert (r.epochs, r.warmup_epochs, r.classifier_refit_epochs) == (500, 0, 0)
        assert r.select_on_validation and r.loss_terms()["paper_weights"] is False
    assert (mnist.classifier_hidden, fmnist.classifier_hidden) == ((50,), (10, 10, 10, 10))
    assert obfuscator_recipe("mnist", "ARL-C-N-authors", epochs=7).epochs == 7  # CLI overrides win
    with pytest.raises(ValueError):
        parse_obfuscator_name("ARL-authors")
    with pytest.raises(ValueError):
        obfuscator_recipe("mnist", "ARL-C-N", patience=3)  # patience without validation selection


def test_the_abc903c_twin_has_that_commits_settings() -> None:
    """adversarial_training.py:56, 78–80, 223, 297–304, utils.py:100, models/fc.py:4–49 at abc903c."""
    mnist = obfuscator_recipe("mnist", "ARL-C-N-authors-abc903c")
    fmnist = obfuscator_recipe("fashion-mnist", "ARL-C-N-authors-abc903c")
    assert mnist.name == fmnist.name == "ARL-C-N-authors-abc903c"
    assert parse_obfuscator_name("ARL-C-N-authors-abc903c") == ("ARL-C-N", "authors")
    assert table1_order(["ARL-C-N-authors-abc903c", "ARL-C-N-authors"])[-1] == "ARL-C-N-authors-abc903c"
    assert (mnist.alpha, mnist.lam, fmnist.alpha, fmnist.lam) == (0.99, 100.0, 0.995, 50.0)
    for r in (mnist, fmnist):
        assert r.authors_code and r.authors_commit == "abc903c"
        assert not r.noise_on_f and not r.contrastive_grad
        assert (r.obfuscator_hidden, r.classifier_hidden) == ((8, 8), (10, 10, 10, 10))
        assert (r.lr, r.adversary_lr, r.batch_size, r.epochs, r.arl_sign) == (1e-3, 1e-3, 64, 50, 1.0)
        assert "+ α·MSE" in r.loss_terms()["formula"] and r.select_on_validation
    assert obfuscator_recipe("mnist", "ARL-C-N-authors").arl_sign == -1.0


def test_the_arl_sign_decides_whether_f_fights_or_helps_the_adversary(tiny: Any, embedder: Path,
                                                                      tmp_path: Path) -> None:
    """One step from the same start: −α·MSE and +α·MSE move f apart (the sign reaches the loss)."""
    kw = {**TINY, "epochs": 1, "lam": 0.0}

    def run(name: str, sign: float) -> list[torch.Tensor]:
        rec = obfuscator_recipe("digits", "ARL-C-N-authors", arl_sign=sign, **kw)
        train_obfuscator(tiny, rec, embedder=embedder, out=tmp_path / name, seed=1, **FAST)
        return _f_weights(tmp_path / name)

    fight, help_ = run("fight", -1.0), run("help", 1.0)
    assert not all(torch.equal(a, b) for a, b in zip(fight, help_, strict=True))
    with pytest.raises(ValueError, match="arl_sign"):
        obfuscator_recipe("digits", "ARL-C-N-authors", arl_sign=0.5)


def _f_weights(path: Path) -> list[torch.Tensor]:
    return [p.detach().clone() for p in load_checkpoint(path)["obfuscator"].parameters()]


def test_the_detached_contrastive_term_gives_f_no_gradient(tiny: Any, embedder: Path, tmp_path: Path) -> None:
    kw = {**TINY, "epochs": 1}

    def run(name: str, **over: Any) -> list[torch.Tensor]:
        rec = obfuscator_recipe("digits", "ARL-C-N-authors", **{**kw, **over})
        train_obfuscator(tiny, rec, embedder=embedder, out=tmp_path / name, seed=1, **FAST)
        return _f_weights(tmp_path / name)

    zero, fifty = run("l0", lam=0.0), run("l50", lam=50.0)
    assert all(torch.equal(a, b) for a, b in zip(zero, fifty, strict=True))
    # control: the same λ with the gradient on (App. E's C on f(z)) moves f
    on = run("l50-grad", lam=50.0, contrastive_grad=True)
    assert not all(torch.equal(a, b) for a, b in zip(zero, on, strict=True))


class _Guarded(torch.Tensor):
    """A tensor that raises on any use while ``armed`` (the test set during training)."""

    armed = False

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if cls.armed:
            raise AssertionError(f"the test set was read during training ({func})")
        return super().__torch_function__(func, types, args, kwargs or {})


def test_selection_reads_validation_only_and_keeps_the_best_epoch(
    tiny: Any, embedder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = dataclasses.replace(tiny, x_test=tiny.x_test.as_subclass(_Guarded))
    ds.__dict__["fingerprint"] = tiny.fingerprint  # cached: the embedder's data
    real = obf_mod._evaluate

    def evaluate(*args: Any, **kwargs: Any) -> Any:
        _Guarded.armed = False  # training and selection are over
        return real(*args, **kwargs)

    monkeypatch.setattr(obf_mod, "_evaluate", evaluate)
    _Guarded.armed = True
    with pytest.raises(AssertionError, match="test set was read"):
        ds.x_test[:2].sum()  # the guard works
    try:
        rec = obfuscator_recipe("digits", "ARL-C-N-authors", **{**TINY, "epochs": 4, "lr": 1e-2})
        card = train_obfuscator(ds, rec, embedder=embedder, out=tmp_path / "sel", seed=0, **FAST)
    finally:
        _Guarded.armed = False
    sel, hist = card["selection"], card["metrics"]["history"]
    accs = [row["validation_accuracy"] for row in hist]
    assert len(accs) == 4 and sel["epochs_run"] == 4 and not sel["early_stopped"]
    assert sel["validation_accuracy"] == max(accs) and sel["epoch"] == accs.index(max(accs)) + 1
    assert sel["validation_split"]["n_val"] == 20 and sel["validation_split"]["n_fit"] == 180
    assert card["name"] == "ARL-C-N-authors" and "231-236" in card["authors_code"]["contrastive"]
    # the shipped f and h are the selected epoch's: they give its validation accuracy again
    from privcore.data import validation_split

    split = validation_split(tiny, fraction=0.1, seed=0)
    ck = load_checkpoint(tmp_path / "sel")
    vae = load_checkpoint(embedder)["vae"].eval()
    with torch.no_grad():
        pred = ck["classifier"](ck["obfuscator"](vae.encode(split.x_val)[0])).argmax(1)
    assert float((pred == split.y_val).float().mean()) == pytest.approx(sel["validation_accuracy"])


def test_the_report_reads_the_papers_row_for_the_twin() -> None:
    from privcore.experiments.report import _paper_ref

    assert _paper_ref({"ARL-C-N": (0.5,)}, "ARL-C-N-authors") == (0.5,)
