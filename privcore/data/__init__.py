"""Dataset registry and loaders (``digits``, ``fashion-mnist``, ``mnist``, ``cifar10``, ``utkface``,
``folder``): train/test tensors in [0, 1], image shape, class names.

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

__all__ = ["Dataset", "DatasetSpec", "dataset_names", "default_data_root", "get_spec", "load_dataset"]
