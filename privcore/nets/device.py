"""Where torch runs: CUDA when present (or asked for), else the CPU, on one code path."""

from __future__ import annotations

import torch

from privcore.validation import check_choice

__all__ = ["resolve_device"]


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
