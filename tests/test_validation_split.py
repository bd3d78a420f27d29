"""The validation split (issue 15): seeded, stratified, disjoint, and reloadable from a card."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privcore.data import load_dataset, validation_split
from privcore.train.embedder import dataset_card, dataset_from_card


def test_split_is_stratified_disjoint_seeded_and_reloads_from_its_card() -> None:
    ds = load_dataset("digits")
    sp = validation_split(ds, fraction=0.1, seed=3)
    n = ds.x_train.shape[0]
    assert np.intersect1d(sp.fit_indices, sp.val_indices).size == 0
    assert sp.fit_indices.size + sp.val_indices.size == n and sp.val_indices.size == round(0.1 * n)
    # the fit part trains on the rest; its test split is the validation set, never the real test set
    assert torch.equal(sp.dataset.x_train, ds.x_train[sp.fit_indices])
    assert torch.equal(sp.x_val, ds.x_train[sp.val_indices])
    assert torch.equal(sp.y_val, ds.y_train[sp.val_indices])
    per_class = np.bincount(ds.y_train.numpy(), minlength=10) * 0.1
    assert np.all(np.abs(np.asarray(sp.record()["n_val_per_class"]) - per_class) < 1.0)
    again = validation_split(ds, fraction=0.1, seed=3)
    assert sp.record() == again.record()
    other = validation_split(ds, fraction=0.1, seed=4)
    assert sp.record()["held_out_sha256"] != other.record()["held_out_sha256"]
    assert dataset_from_card(dataset_card(sp.dataset)).fingerprint == sp.dataset.fingerprint
    with pytest.raises(ValueError, match="already a validation split"):
        validation_split(sp.dataset)
    with pytest.raises(ValueError, match="fraction"):
        validation_split(ds, fraction=1.0)
