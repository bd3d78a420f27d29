"""The embedder recipe's later options (issue 33): ``augment_shift`` (pixel-shift augmentation) and
``label_weight`` (a supervised CE term on μ). Both default to 0 and then leave a run bit-identical
to one made before they existed; set, they change the weights and keep the card loadable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from privcore.data import load_dataset
from privcore.nets.checkpoint import load_checkpoint
from privcore.train.embedder import shift_images, train_embedder
from privcore.train.ensure import _same_recipe
from privcore.train.recipes import embedder_recipe

FAST = {"progress": False, "device": "cpu", "seed": 0}


@pytest.fixture(scope="module")
def tiny() -> Any:
    return load_dataset("digits").subset(n_train=96, n_test=32, seed=0)


def test_shift_images_moves_each_image_by_at_most_s_pixels_with_zero_fill() -> None:
    x = torch.zeros(200, 1, 7, 7)
    x[:, 0, 3, 3] = 1.0
    out = shift_images(x, 2, torch.Generator().manual_seed(0))
    assert out.shape == x.shape and torch.equal(out.sum((1, 2, 3)), torch.ones(200))
    where = out[:, 0].flatten(1).argmax(1)
    dy, dx = where // 7 - 3, where % 7 - 3
    assert dy.abs().max() == 2 and dx.abs().max() == 2  # every offset in [−2, 2], both ends drawn
    assert len(set(zip(dy.tolist(), dx.tolist(), strict=True))) == 25
    edge = torch.ones(1, 1, 4, 4)
    assert shift_images(edge, 1, torch.Generator().manual_seed(1)).sum() <= 16  # zero fill, no wrap


def test_new_options_default_to_the_old_recipe_and_card(tiny: Any, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    rec = embedder_recipe("digits", epochs=2, hidden=32, batch_size=32)
    assert (rec.augment_shift, rec.label_weight) == (0, 0.0)
    base = train_embedder(tiny, rec, out=tmp_path / "base", **FAST)
    new = ("augment_shift", "label_weight")
    old_card = {**base, "recipe": {k: v for k, v in base["recipe"].items() if k not in new}}
    assert _same_recipe(old_card, rec)  # a card written before the options still matches

    small = {"epochs": 2, "hidden": 32, "batch_size": 32}
    aug_rec = embedder_recipe("digits", **small, augment_shift=1)
    aug = train_embedder(tiny, aug_rec, out=tmp_path / "aug", **FAST)
    sup_rec = embedder_recipe("digits", **small, label_weight=1.0)
    sup = train_embedder(tiny, sup_rec, out=tmp_path / "sup", **FAST)
    shas = {c["weights"]["sha256"] for c in (base, aug, sup)}
    assert len(shas) == 3
    assert sup["recipe"]["label_weight"] == 1.0 and aug["recipe"]["augment_shift"] == 1
    assert set(load_checkpoint(tmp_path / "sup").modules) == {"vae"}  # the head is not saved
    with pytest.raises(ValueError, match="label_weight"):
        embedder_recipe("digits", label_weight=-1.0)
    with pytest.raises(ValueError, match="augment_shift"):
        embedder_recipe("digits", augment_shift=-1)


def test_the_cli_sets_both_options_and_refuses_bad_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`privcore train embedder --augment-shift S --label-weight G` writes them into the card's recipe
    (the feasibility study in docs/RESULTS.md, "MNIST", is reproducible from the CLI); a negative value
    is a parameter error naming it (exit 2), and nothing is written."""
    import json

    from privcore.cli import main

    base = ["train", "embedder", "--dataset", "digits", "--models-dir", str(tmp_path), "--epochs", "1",
            "--n-train", "64", "--no-progress", "--device", "cpu"]
    with pytest.raises(SystemExit) as bad:
        main([*base, "--label-weight", "-1"])
    err = capsys.readouterr().err
    card = tmp_path / "digits" / "embedder.json"
    assert bad.value.code == 2 and "label_weight" in err and not card.exists()
    main([*base, "--augment-shift", "1", "--label-weight", "2.5"])
    recipe = json.loads(card.read_text())["recipe"]
    assert recipe["augment_shift"] == 1 and recipe["label_weight"] == 2.5
