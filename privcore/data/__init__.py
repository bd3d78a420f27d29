"""Dataset registry and loaders (``digits``, ``fashion-mnist``, ``mnist``, ``cifar10``, ``utkface``,
``folder``): train/test tensors in [0, 1], image shape, class names; :func:`validation_split`
holds out a seeded, stratified validation part of the training set for model selection.

>>> from privcore.data import load_dataset
>>> ds = load_dataset("digits")
>>> ds.image_shape
(1, 8, 8)
"""

from privcore.data.registry import (
    Dataset,
    DatasetSpec,
    dataset_names,
    default_data_root,
    get_spec,
    load_dataset,
)
from privcore.data.split import ValidationSplit, held_out_fingerprint, validation_split

__all__ = [
    "Dataset",
    "DatasetSpec",
    "ValidationSplit",
    "dataset_names",
    "default_data_root",
    "get_spec",
    "held_out_fingerprint",
    "load_dataset",
    "validation_split",
]
