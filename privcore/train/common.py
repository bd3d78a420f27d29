"""Training plumbing shared by every recipe: device choice, seeding, threads, mini-batches,
progress bars; resumable training state is :mod:`privcore.train.resume` (re-exported here).

The same code path runs on CUDA when present and on CPU otherwise (``device="auto"``).
Training randomness (initialisation, shuffling, augmentation noise) is seeded explicitly: a
training run is reproducible from its card. None of it is a privacy release.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch

from privcore.nets.device import resolve_device
from privcore.train.resume import ResumableRun, config_hash
from privcore.validation import check_int

__all__ = [
    "ResumableRun",  # privcore.train.resume: safetensors + JSON, no pickle
    "batched_apply",
    "config_hash",
    "epoch_bar",
    "minibatches",
    "resolve_device",
    "seed_everything",
    "set_threads",
]


def seed_everything(seed: int) -> torch.Generator:
    """Seed torch's global generators (initialisation) and return a CPU generator for shuffling."""
    seed = check_int("seed", seed, minimum=0)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    return torch.Generator().manual_seed(seed)


def set_threads(threads: int | None) -> None:
    """Limit torch's intra-op CPU threads (``None`` leaves the default)."""
    if threads is not None:
        torch.set_num_threads(check_int("threads", threads, minimum=1))


def minibatches(
    n: int, batch_size: int, generator: torch.Generator, *, shuffle: bool = True
) -> Iterator[torch.Tensor]:
    """Index tensors covering ``range(n)`` in batches (a seeded permutation when ``shuffle``)."""
    idx = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
    for i in range(0, n, batch_size):
        yield idx[i : i + batch_size]


@torch.no_grad()
def batched_apply(
    fn: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    *,
    device: torch.device,
    batch_size: int = 1024,
) -> torch.Tensor:
    """``fn`` over ``x`` in batches on ``device``; result on CPU."""
    outs = [fn(x[i : i + batch_size].to(device)).cpu() for i in range(0, x.shape[0], batch_size)]
    return torch.cat(outs) if outs else torch.empty(0)


def epoch_bar(total: int, *, desc: str, progress: bool, initial: int = 0) -> Any:
    """A tqdm bar over epochs (silent when ``progress`` is False)."""
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit="epoch",
        disable=not progress,
        file=sys.stderr,
        dynamic_ncols=True,
        leave=True,
    )
