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


def _overflow(name: str, dtype: Any) -> None:
    raise ValueError(
        f"the noisy {name} does not fit in {name}'s dtype {dtype} (it would be ±inf); nothing released: "
        f"pass {name} as float64"
    )


def _is_torch_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def as_float64(name: str, x: Any) -> tuple[np.ndarray, Callable[[np.ndarray], Any]]:
    """Validate ``x`` (real, finite, not bool) and return (float64 copy, function restoring its type).

    Raises TypeError for non-numeric, bool or complex input and ValueError (naming ``name`` and
    the number of bad entries) for NaN or infinity. The restoring function raises ValueError when a
    value does not fit the caller's floating dtype (float16 and float32 overflow long before
    float64), rather than return ±inf.
    """
    if _is_torch_tensor(x):
        import torch

        if x.dtype == torch.bool or x.is_complex():
            raise TypeError(f"{name} must be a real-valued tensor, got dtype {x.dtype}")
        arr = x.detach().to(device="cpu", dtype=torch.float64).numpy().copy()
        out_dtype = x.dtype if x.is_floating_point() else torch.get_default_dtype()
        device = x.device

        def restore_torch(out: np.ndarray) -> Any:
            # ascontiguousarray makes a 0-d array 1-d: put the caller's shape back
            back = torch.from_numpy(np.ascontiguousarray(out)).reshape(out.shape).to(dtype=out_dtype)
            if not bool(torch.isfinite(back).all()):
                _overflow(name, out_dtype)
            return back.to(device=device)

        restore: Callable[[np.ndarray], Any] = restore_torch
    else:
        if isinstance(x, bool | np.bool_):
            raise TypeError(f"{name} must be real numbers, got bool")
        try:
            src = np.asarray(x)
        except ValueError as exc:  # ragged nested sequences
            raise TypeError(f"{name} must be an array of real numbers with a regular shape: {exc}") from exc
        if src.dtype == np.bool_ or src.dtype.kind not in "fiu":
            raise TypeError(f"{name} must be an array of real numbers, got dtype {src.dtype}")
        arr = src.astype(np.float64, copy=True)
        if isinstance(x, np.ndarray) and src.dtype.kind == "f":
            out_dtype_np = src.dtype

            def restore_numpy(out: np.ndarray) -> Any:
                with np.errstate(over="ignore"):
                    back = out.astype(out_dtype_np, copy=False)
                if not np.all(np.isfinite(back)):
                    _overflow(name, out_dtype_np)
                return back

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
