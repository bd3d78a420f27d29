"""The argument checks: plain floats and float64 arrays (the release path's common case) get exactly
the answers and messages of the general checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privcore.errors import ParameterError
from privcore.validation import check_finite_array, check_in_range, check_positive, check_range

ODD = [math.nan, math.inf, -math.inf, 0.0, -0.0, -1.0, 5e-324, 1e308]


@pytest.mark.parametrize("value", [*ODD, 2.5, 1, np.float64(3.0)])
def test_check_positive_accepts_exactly_the_finite_positive_reals(value: float) -> None:
    if isinstance(value, float | int) and 0 < value < math.inf:
        out = check_positive("x", value)
        assert out == value and type(out) is float
    else:
        with pytest.raises(ParameterError, match=r"x must be in \(0, ∞\)"):
            check_positive("x", value)
    assert check_positive("x", math.inf, allow_inf=True) == math.inf


@pytest.mark.parametrize("low_open", [True, False])
@pytest.mark.parametrize("high_open", [True, False])
@pytest.mark.parametrize("value", [*ODD, 0.5, 1.0, 2.0, 2])
def test_check_in_range_honours_open_and_closed_ends(value: float, low_open: bool, high_open: bool) -> None:
    inside = not math.isnan(value) and (value > 0.0 if low_open else value >= 0.0) and (
        value < 2.0 if high_open else value <= 2.0)
    if inside:
        assert check_in_range("x", value, 0.0, 2.0, low_open=low_open, high_open=high_open) == value
    else:
        with pytest.raises(ParameterError, match="x must be in"):
            check_in_range("x", value, 0.0, 2.0, low_open=low_open, high_open=high_open)
    if value == 2.0:
        assert check_range("x", value, (0.0, 2.0)) == 2.0


def test_bools_are_refused_whatever_the_path() -> None:
    with pytest.raises(TypeError, match="real number"):
        check_positive("x", True)
    with pytest.raises(TypeError, match="real number"):
        check_in_range("x", True, 0.0, 2.0)


def test_a_float64_array_is_returned_as_is_and_any_nan_or_inf_is_refused() -> None:
    a = np.array([1.0, -2.0, 3.5])
    assert check_finite_array("z", a) is a
    for bad in (math.nan, math.inf):
        b = a.copy()
        b[1] = bad
        with pytest.raises(ParameterError, match="z must contain only finite numbers; 1 entries"):
            check_finite_array("z", b)
    out = check_finite_array("z", a.astype(np.float32))  # another dtype: converted, as always
    assert out.dtype == np.float64 and np.array_equal(out, a)
