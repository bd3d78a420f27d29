"""The one place where privcore checks its parameters.

Every check raises ``ValueError`` (bad value) or ``TypeError`` (bad type) with a message
that names the parameter, the value it got and the allowed range, so a user never has to
guess what went wrong; a file to read that does not exist is a ``FileNotFoundError`` naming it.
Nothing is released after a failed check.
"""

from __future__ import annotations

import errno
import math
import numbers
import os
from pathlib import Path
from typing import Any

import numpy as np

from privcore.errors import ParameterError, ParameterTypeError
from privcore.ranges import ALPHA_RANGE, DELTA_RANGE, EPSILON_RANGE, RADIUS_RANGE  # defined there only

__all__ = [
    "ALPHA_RANGE",
    "DELTA_RANGE",
    "EPSILON_RANGE",
    "RADIUS_RANGE",
    "check_bool",
    "check_choice",
    "check_delta",
    "check_epsilon",
    "check_finite_array",
    "check_in_range",
    "check_input_file",
    "check_int",
    "check_nonnegative",
    "check_output_file",
    "check_positive",
    "check_range",
    "check_real",
]


def check_real(name: str, value: Any) -> float:
    """Return ``value`` as a float; TypeError unless it is a real number (bool excluded)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if isinstance(value, np.ndarray) and value.ndim == 0 and np.issubdtype(value.dtype, np.number):
            value = value.item()
        elif hasattr(value, "item") and getattr(value, "ndim", None) == 0:
            value = value.item()
        else:
            raise ParameterTypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    if isinstance(value, bool):
        raise ParameterTypeError(f"{name} must be a real number, got bool {value!r}")
    return float(value)


def check_positive(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """A real number > 0 (finite unless ``allow_inf``)."""
    if type(value) is float and 0.0 < value < math.inf:  # the common case, without the general checks
        return value
    v = check_real(name, value)
    upper = "∞]" if allow_inf else "∞)"
    if math.isnan(v) or v <= 0 or (math.isinf(v) and not allow_inf):
        raise ParameterError(f"{name} must be in (0, {upper}, got {value!r}")
    return v


def check_nonnegative(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """A real number ≥ 0 (finite unless ``allow_inf``)."""
    v = check_real(name, value)
    upper = "∞]" if allow_inf else "∞)"
    if math.isnan(v) or v < 0 or (math.isinf(v) and not allow_inf):
        raise ParameterError(f"{name} must be in [0, {upper}, got {value!r}")
    return v


def check_in_range(
    name: str,
    value: Any,
    low: float,
    high: float,
    *,
    low_open: bool = True,
    high_open: bool = True,
) -> float:
    """A real number in the interval (low, high), ends open or closed as asked."""
    if type(value) is float and (value > low if low_open else value >= low) and (
        value < high if high_open else value <= high
    ):  # the common case, without the general checks (NaN fails every comparison)
        return value
    v = check_real(name, value)
    ok = not math.isnan(v)
    ok = ok and (v > low if low_open else v >= low)
    ok = ok and (v < high if high_open else v <= high)
    if not ok:
        lo = "(" if low_open else "["
        hi = ")" if high_open else "]"
        raise ParameterError(f"{name} must be in {lo}{low:g}, {high:g}{hi}, got {value!r}")
    return v


def check_range(name: str, value: Any, bounds: tuple[float, float]) -> float:
    """A real number in the closed interval ``bounds`` (one of the ranges above)."""
    return check_in_range(name, value, bounds[0], bounds[1], low_open=False, high_open=False)


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """Privacy parameter ε: finite and > 0."""
    return check_positive(name, value)


def check_delta(value: Any, name: str = "delta") -> float:
    """Privacy parameter δ: in the open interval (0, 1)."""
    return check_in_range(name, value, 0.0, 1.0)


def check_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """An integer (bool excluded), at least ``minimum`` when given."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterTypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    v = int(value)
    if minimum is not None and v < minimum:
        raise ParameterError(f"{name} must be an integer ≥ {minimum}, got {value!r}")
    return v


def check_bool(name: str, value: Any) -> bool:
    """A boolean (Python or numpy); TypeError for anything else, 0/1 and strings such as 'no' included."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise ParameterTypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """One of a fixed set of strings."""
    if not isinstance(value, str) or value not in choices:
        raise ParameterError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


_FLOAT64 = np.dtype(np.float64)


def check_finite_array(name: str, value: Any) -> np.ndarray:
    """A real array (numpy, torch or nested lists) with no NaN or infinity, as float64.

    TypeError for booleans, complex numbers, strings and ragged nested lists (never silently
    converted: numpy would drop an imaginary part or parse "1.5")."""
    if type(value) is np.ndarray and value.dtype == _FLOAT64:  # already float64: only finiteness to check
        if not np.isfinite(value).all():
            bad = int(np.size(value) - np.count_nonzero(np.isfinite(value)))
            raise ParameterError(
                f"{name} must contain only finite numbers; {bad} entries are NaN or infinite")
        return value
    if hasattr(value, "detach"):  # torch tensor, without importing torch here
        t = value.detach().cpu()
        value = t.double().numpy() if t.is_floating_point() else t.numpy()  # bfloat16 has no numpy dtype
    if isinstance(value, bool):
        raise ParameterTypeError(f"{name} must be an array of real numbers, got booleans")
    try:
        src = np.asarray(value)
    except ValueError as exc:  # ragged nested sequences
        msg = f"{name} must be an array of real numbers with a regular shape: {exc}"
        raise ParameterTypeError(msg) from exc
    if src.dtype.kind == "b":
        raise ParameterTypeError(f"{name} must be an array of real numbers, got booleans")
    if src.dtype.kind not in "fiuO":
        raise ParameterTypeError(f"{name} must be an array of real numbers, got dtype {src.dtype}")
    try:
        arr = src.astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        msg = f"{name} must be an array of real numbers, got {type(value).__name__}"
        raise ParameterTypeError(msg) from exc
    if not np.isfinite(arr).all():
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ParameterError(f"{name} must contain only finite numbers; {bad} entries are NaN or infinite")
    return arr


def check_input_file(name: str, path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path to an existing regular file to read: FileNotFoundError naming it when
    nothing is there, ParameterError naming ``name`` when it is a directory or not a regular file
    (a pipe or a device, whose reading could block)."""
    p = Path(path)
    if p.is_file():
        return p
    if p.is_dir():
        raise ParameterError(f"{name} must be a file, got {str(p)!r}, which is a directory")
    if p.exists():
        raise ParameterError(f"{name} must be a regular file, got {str(p)!r}, which is not one "
                             "(a pipe, a socket or a device)")
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(p))


def check_output_file(name: str, path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path a file can be written to: not a directory, in a directory that exists
    (nothing creates it) and is writable. ParameterError naming ``name``, the path and what is wrong,
    so that a caller checks it before computing, or releasing, what it would write there."""
    p = Path(path)
    shown = repr(str(p))
    if p.is_dir():
        raise ParameterError(f"{name} must name a file, got {shown}, which is a directory")
    parent = p.parent
    if not parent.exists():
        raise ParameterError(f"{name} must be in an existing directory, got {shown}: the directory "
                             f"{str(parent)!r} does not exist (create it first)")
    if not parent.is_dir():
        raise ParameterError(f"{name} must be in an existing directory, got {shown}: {str(parent)!r} "
                             "is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ParameterError(f"{name} must be in a directory you can write, got {shown}: the directory "
                             f"{str(parent)!r} is not writable")
    return p
