"""Array plumbing shared by the mechanisms: torch tensor in → torch tensor out, numpy in → numpy out.

Noise is always computed in float64 numpy; converting the grid value back to the caller's dtype
is post-processing (a deterministic function of the released integer), so it keeps the guarantee.
torch is imported only when a tensor is actually passed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["as_float64"]


def _is_torch_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def as_float64(name: str, x: Any) -> tuple[np.ndarray, Callable[[np.ndarray], Any]]:
    """Validate ``x`` (real, finite, not bool) and return (float64 copy, function restoring its type).

    Raises TypeError for non-numeric, bool or complex input and ValueError (naming ``name`` and
    the number of bad entries) for NaN or infinity.
    """
    if _is_torch_tensor(x):
        import torch

        if x.dtype == torch.bool or x.is_complex():
            raise TypeError(f"{name} must be a real-valued tensor, got dtype {x.dtype}")
        arr = x.detach().to(device="cpu", dtype=torch.float64).numpy().copy()
        out_dtype = x.dtype if x.is_floating_point() else torch.get_default_dtype()
        device = x.device

        def restore_torch(out: np.ndarray) -> Any:
            return torch.from_numpy(np.ascontiguousarray(out)).to(device=device, dtype=out_dtype)

        restore: Callable[[np.ndarray], Any] = restore_torch
    else:
        if isinstance(x, bool | np.bool_):
            raise TypeError(f"{name} must be real numbers, got bool")
        src = np.asarray(x)
        if src.dtype == np.bool_ or src.dtype.kind not in "fiu":
            raise TypeError(f"{name} must be an array of real numbers, got dtype {src.dtype}")
        arr = src.astype(np.float64, copy=True)
        if isinstance(x, np.ndarray) and src.dtype.kind == "f":
            out_dtype_np = src.dtype

            def restore_numpy(out: np.ndarray) -> Any:
                return out.astype(out_dtype_np, copy=False)

            restore = restore_numpy
        elif np.ndim(x) == 0 and not isinstance(x, np.ndarray):

            def restore_scalar(out: np.ndarray) -> Any:
                return float(out)

            restore = restore_scalar
        else:

            def restore_plain(out: np.ndarray) -> Any:
                return out

            restore = restore_plain
    if not np.all(np.isfinite(arr)):
        bad = int(arr.size - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{name} must contain only finite numbers; {bad} entries are NaN or infinite")
    return arr, restore
