"""Training plumbing shared by every recipe: device choice, seeding, threads, mini-batches,
progress bars and resumable training state.

The same code path runs on CUDA when present and on CPU otherwise (``device="auto"``).
Training randomness (initialisation, shuffling, augmentation noise) is seeded explicitly: a
training run is reproducible from its card. None of it is a privacy release.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from privcore._atomic import atomic_path
from privcore.validation import check_choice, check_int

__all__ = [
    "ResumableRun",
    "batched_apply",
    "epoch_bar",
    "minibatches",
    "resolve_device",
    "seed_everything",
    "set_threads",
]


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """``"auto"``/``None`` → CUDA when available, else CPU; ``"cuda"`` without a GPU is an error."""
    if isinstance(device, torch.device):
        return device
    name = check_choice(
        "device", "auto" if device is None else str(device).split(":")[0], ("auto", "cpu", "cuda")
    )
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device must be 'cpu' or 'auto' on this machine: CUDA is not available, got 'cuda'")
    return torch.device(str(device))


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


def config_hash(config: Mapping[str, Any]) -> str:
    """SHA-256 of a JSON-able configuration (resume only continues the same configuration)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


class ResumableRun:
    """Per-epoch training state in ``<stem>.resume.pt`` so an interrupted run continues where
    it stopped: module and optimizer states, the shuffling generator, the epoch count and the
    loss history. A state written for a different configuration is ignored (and replaced).
    ``config`` should leave out the epoch count, so a run can be stopped early (``--epochs``
    lower) or extended (higher) and still continue from its state. The file is deleted once the
    final checkpoint is written."""

    def __init__(
        self, stem: str | os.PathLike[str], *, config: Mapping[str, Any], enabled: bool = True
    ) -> None:
        self.path = Path(str(stem) + ".resume.pt")
        self.hash = config_hash(config)
        self.enabled = enabled

    def restore(
        self,
        modules: Mapping[str, nn.Module],
        optimizers: Mapping[str, torch.optim.Optimizer],
        generator: torch.Generator,
    ) -> tuple[int, list[dict[str, float]]]:
        """Load a matching saved state into the given objects; returns (epochs done, history)."""
        if not (self.enabled and self.path.is_file()):
            return 0, []
        try:
            state = torch.load(self.path, map_location="cpu", weights_only=False)
        except Exception:  # a torn file from a kill mid-write: start over
            return 0, []
        if state.get("config_hash") != self.hash:
            return 0, []
        for k, m in modules.items():
            m.load_state_dict(state["modules"][k])
        for k, o in optimizers.items():
            o.load_state_dict(state["optimizers"][k])
        generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        return int(state["epoch"]), list(state["history"])

    def save(
        self,
        epoch: int,
        modules: Mapping[str, nn.Module],
        optimizers: Mapping[str, torch.optim.Optimizer],
        generator: torch.Generator,
        history: list[dict[str, float]],
    ) -> None:
        """Write the state after ``epoch`` epochs (atomically)."""
        if not self.enabled:
            return
        state = {
            "config_hash": self.hash,
            "epoch": epoch,
            "modules": {k: m.state_dict() for k, m in modules.items()},
            "optimizers": {k: o.state_dict() for k, o in optimizers.items()},
            "generator": generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "history": history,
        }
        with atomic_path(self.path) as tmp:
            torch.save(state, tmp)

    def finish(self) -> None:
        """Remove the state file (the run completed)."""
        self.path.unlink(missing_ok=True)
