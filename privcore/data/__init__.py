"""Dataset registry and loaders (``digits``, ``fashion-mnist``, ``mnist``, ``cifar10``, ``utkface``,
``folder``): train/test tensors in [0, 1], image shape, class names; :func:`validation_split`
holds out a seeded, stratified validation part of the training set for model selection.

>>> from privcore.data import load_dataset
>>> ds = load_dataset("digits")
>>> ds.image_shape
(1, 8, 8)

Names are exported lazily (:mod:`privcore._lazy`): reading a spec never imports torch.
"""

from privcore._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "Dataset": "registry",
        "DatasetSpec": "registry",
        "ValidationSplit": "split",
        "dataset_names": "registry",
        "default_data_root": "registry",
        "get_spec": "registry",
        "held_out_fingerprint": "split",
        "load_dataset": "registry",
        "validation_split": "split",
    },
)
