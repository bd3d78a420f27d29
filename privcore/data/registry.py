"""Dataset registry: every dataset privcore knows, as train/test tensors with its metadata.

The posthoc-PTR paper (Sec. 5, App. E) evaluates on MNIST, Fashion-MNIST and UTKFace; the
inference-privacy paper (Sec. V) on CIFAR-10. ``digits`` (scikit-learn's 8×8 digits, shipped
inside scikit-learn) is the embedded default that always works offline. A dataset whose files
are missing raises :class:`privcore.errors.DatasetUnavailableError` whose message says how to
get them; no loader ever downloads unless asked to.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from privcore.data.dataset import Dataset, DatasetSpec
from privcore.data.loaders import SPECS
from privcore.errors import DatasetUnavailableError, ParameterError
from privcore.validation import check_choice

__all__ = [
    "Dataset",
    "DatasetSpec",
    "dataset_names",
    "default_data_root",
    "get_spec",
    "load_dataset",
]


def _table(specs: tuple[DatasetSpec, ...]) -> dict[str, DatasetSpec]:
    table: dict[str, DatasetSpec] = {}
    for spec in specs:
        if spec.name in table:
            raise ValueError(f"dataset {spec.name!r} is listed twice")
        table[spec.name] = spec
    return table


_REGISTRY = _table(SPECS)


def dataset_names() -> tuple[str, ...]:
    """Names of every registered dataset."""
    return tuple(_REGISTRY)


def get_spec(name: str) -> DatasetSpec:
    """The registry entry of ``name`` (a :class:`ParameterError`, a ``ValueError``, naming the
    known names otherwise)."""
    if isinstance(name, str) and name not in _REGISTRY:
        raise ParameterError(f"unknown dataset {name!r} (known: {', '.join(_REGISTRY)})")
    check_choice("dataset", name, tuple(_REGISTRY))
    return _REGISTRY[name]


def default_data_root() -> Path:
    """Where datasets live: ``$PRIVCORE_DATA_DIR`` if set, else ``<repository>/data/raw``."""
    env = os.environ.get("PRIVCORE_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2] / "data" / "raw"


def load_dataset(name: str, *, root: str | os.PathLike[str] | None = None, **options: Any) -> Dataset:
    """Load dataset ``name`` from ``root`` (default :func:`default_data_root`).

    Loader options (e.g. ``download=True`` for MNIST/CIFAR-10, ``image_size`` for folders) are
    passed through. Raises :class:`DatasetUnavailableError` with instructions when files are missing.
    """
    spec = get_spec(name)
    root_path = Path(root).expanduser() if root is not None else default_data_root()
    try:
        return spec.loader(root=root_path, **options)
    except DatasetUnavailableError:
        raise
    except (FileNotFoundError, RuntimeError, OSError) as exc:
        raise DatasetUnavailableError(
            f"dataset {name!r} could not be read from {root_path}: {exc}\n{spec.how_to_get}"
        ) from exc
