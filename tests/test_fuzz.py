"""Property-based fuzz of privcore's public API (issue 18, item 5).

Every public entry point of the mechanisms (inference privacy, LDP baselines, PTR, the exact
samplers and Gaussian calibrations), the Lipschitz engine, image decoding and accounting is called
with values drawn from a mix of sensible inputs and nasty ones (0, negatives, NaN, ±inf, 1e308,
5e-324, booleans, strings, None, wrong shapes, empty arrays, wrong dtypes). The property is the one
of issue 18: each call either

* raises ``ValueError``/``TypeError`` whose message names the offending parameter, or
* returns a finite, correctly shaped result,

and never raises anything else, returns inf/NaN, or accepts a value outside the documented range.
Whether a value is in range is decided here, from the documentation, by the ``*_ok`` predicates,
never by calling the code under test.

Runs are deterministic (``derandomize=True``, no example database) and take a few seconds; set
``PRIVCORE_FUZZ=deep`` for 50× more, randomised examples (e.g. before a release).
"""

from __future__ import annotations

import io
import math
import numbers
import os
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from privcore.inputs.images import decode_image, encode_png, load_image
from privcore.lipschitz import Certifier, as_network, local_lipschitz, max_pattern_norm
from privcore.mechanisms import (
    MIN_EPSILON,
    GaussInput,
    GaussOutput,
    Guarantee,
    LapOutput,
    LDPEmbedding,
    LDPImage,
    NoisePlan,
    PTRResult,
    add_noise,
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    cks_zcdp_delta,
    classic_gaussian_sigma,
    compute_phi,
    discrete_gaussian_integers,
    discrete_gaussian_sigma_floor,
    discrete_laplace_integers,
    gaussian_sigma,
    plan_gaussian,
    plan_laplace,
    propose_delta_p,
    propose_test_release,
    ptr_scales,
)
from privcore.mechanisms.accounting import PrivacyLedger, basic_composition, chaining, group_privacy
from privcore.mechanisms.guarantee import Norm, Space

DEEP = os.environ.get("PRIVCORE_FUZZ", "") == "deep"


def fuzz(n: int) -> settings:
    """``n`` deterministic examples (50·n random ones with PRIVCORE_FUZZ=deep), no deadline."""
    return settings(
        max_examples=n * (50 if DEEP else 1),
        deadline=None,
        derandomize=not DEEP,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )


# -- the property ------------------------------------------------------------------------------------


def expect(fn: Callable[[], Any], *, bad: Iterable[str], names: Iterable[str]) -> Any:
    """Call ``fn``. With out-of-range parameters (``bad``, non-empty) it must raise ValueError/TypeError
    naming one of them; with none, it may still refuse (a combination of parameters) with a message
    naming one of ``names``, or return. Any other exception propagates and fails the test.
    Returns the result, or None after a refusal."""
    bad, names = sorted(set(bad)), sorted(set(names))
    try:
        value = fn()
    except (ValueError, TypeError) as exc:
        event("refused" if bad else "refused (in range)")
        msg = str(exc)
        named = bad or names
        assert any(n in msg for n in named), (
            f"error does not name any of {named}: {type(exc).__name__}: {msg}"
        )
        return None
    assert not bad, f"out-of-range {bad} accepted silently; returned {value!r:.300}"
    event("accepted")
    return value


def finite(x: Any, what: str) -> None:
    """Assert that a number, array or tensor holds only finite values."""
    if isinstance(x, torch.Tensor):
        assert bool(torch.isfinite(x).all()), f"{what} is not finite: {x}"
        return
    arr = np.asarray(x, dtype=np.float64)
    assert np.all(np.isfinite(arr)), f"{what} is not finite: {arr!r:.300}"


def check_guarantee(g: Any) -> None:
    assert isinstance(g, Guarantee)
    finite(g.epsilon, "guarantee.epsilon")
    assert g.epsilon >= 0 and 0 <= g.delta <= 1 and g.radius > 0, g


# -- what counts as in range (from the documentation) ------------------------------------------------


def is_real(v: Any) -> bool:
    if isinstance(v, bool | np.bool_):
        return False
    if isinstance(v, np.ndarray):
        return v.ndim == 0 and v.dtype.kind in "fiu"
    return isinstance(v, numbers.Real)


def real_ok(v: Any, lo: float, hi: float, *, lo_open: bool = True, hi_open: bool = False) -> bool:
    """A real number (not bool, not NaN) in the interval from lo to hi."""
    if not is_real(v):
        return False
    f = float(v)
    if math.isnan(f):
        return False
    return (f > lo if lo_open else f >= lo) and (f < hi if hi_open else f <= hi)


def pos_ok(v: Any) -> bool:
    """Finite and > 0."""
    return real_ok(v, 0.0, math.inf, hi_open=True)


def eps_ok(v: Any) -> bool:
    """ε of the exact samplers: finite and ≥ MIN_EPSILON."""
    return real_ok(v, MIN_EPSILON, math.inf, lo_open=False, hi_open=True)


def delta_ok(v: Any) -> bool:
    return real_ok(v, 0.0, 1.0, hi_open=True)


def int_ok(v: Any, lo: int, hi: int | None = None) -> bool:
    if isinstance(v, bool | np.bool_) or not isinstance(v, numbers.Integral):
        return False
    return int(v) >= lo and (hi is None or int(v) <= hi)


def array_ok(x: Any) -> bool:
    """A real, finite numpy array or torch tensor (any shape, empty included)."""
    if isinstance(x, torch.Tensor):
        return x.dtype != torch.bool and not x.is_complex() and bool(torch.isfinite(x).all())
    if isinstance(x, bool | np.bool_):
        return False
    try:
        arr = np.asarray(x)
    except ValueError:  # ragged
        return False
    return arr.dtype.kind in "fiu" and bool(np.all(np.isfinite(arr)))


def bad_params(**checks: bool) -> list[str]:
    """The names whose check failed."""
    return [name for name, ok in checks.items() if not ok]


# -- strategies ----------------------------------------------------------------------------------------

NASTY = (
    0,
    0.0,
    -0.0,
    -1,
    -1.0,
    -1e-300,
    math.nan,
    math.inf,
    -math.inf,
    1e308,
    -1e308,
    5e-324,
    True,
    False,
    "1",
    None,
    [1.0],
    1j,
    np.float64("nan"),
    np.float32(0.5),
    np.int64(2),
    np.bool_(True),
    np.array([1.0, 2.0]),
)
NASTY_INTS = (
    0,
    -1,
    -3,
    1.5,
    2.0,
    True,
    False,
    "3",
    None,
    math.nan,
    10**30,
    2**62,
    np.int64(3),
    np.float64(2),
)


def mostly(sensible: st.SearchStrategy, *nasty: st.SearchStrategy, weight: int = 12) -> st.SearchStrategy:
    """``sensible`` about ``weight`` times as often as each nasty strategy, so that a good share of the
    examples has every parameter in range (and exercises the result checks), and most of the others
    have exactly one parameter out of range (and exercise the error naming it)."""
    # (one_of would drop the repeated branch: it dedupes strategies by identity)
    return st.integers(0, weight + len(nasty) - 1).flatmap(
        lambda i: sensible if i < weight else nasty[i - weight]
    )


def reals(lo: float, hi: float) -> st.SearchStrategy:
    """Mostly sensible reals in [lo, hi], plus the nasty values and any float at all."""
    return mostly(
        st.floats(min_value=lo, max_value=hi, allow_nan=False),
        st.sampled_from(NASTY),
        st.floats(allow_nan=True, allow_infinity=True),
    )


def ints(lo: int, hi: int) -> st.SearchStrategy:
    return mostly(st.integers(lo, hi), st.sampled_from(NASTY_INTS))


def choices(good: list[Any], bad: list[Any]) -> st.SearchStrategy:
    return mostly(st.sampled_from(good), st.sampled_from(bad), weight=6)


EPS = reals(MIN_EPSILON, 50.0)
DELTA = reals(1e-12, 0.5)
SEEDS = st.integers(0, 2**16)

_SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
_FLOAT_ARRAYS = hnp.arrays(dtype=st.sampled_from([np.float64, np.float32, np.float16]), shape=_SHAPES)
_INT_ARRAYS = hnp.arrays(dtype=st.sampled_from([np.int32, np.uint8, np.int64]), shape=_SHAPES)
_UNIT_ARRAYS = hnp.arrays(
    dtype=st.sampled_from([np.float64, np.float32]),
    shape=_SHAPES,
    elements=st.floats(0.0, 1.0, width=32),
)
_NASTY_ARRAYS = st.sampled_from(
    [
        np.array([True, False]),
        np.array(["a", "b"]),
        np.array([1 + 1j]),
        np.array([None, 1.0], dtype=object),
        "abc",
        None,
        [[1.0, 2.0], [3.0]],
        np.array([1e308, -1e308]),
        np.array([5e-324]),
        torch.tensor([True, False]),
        torch.tensor([1.0 + 1j]),
    ]
)


def arrays(unit: bool = False) -> st.SearchStrategy:
    """numpy arrays of any real dtype and shape (NaN/inf/huge included), torch tensors, and junk."""
    base = (
        st.one_of(_UNIT_ARRAYS, _FLOAT_ARRAYS, _INT_ARRAYS)
        if not unit
        else st.one_of(_UNIT_ARRAYS, _FLOAT_ARRAYS)
    )
    as_torch = base.filter(lambda a: a.dtype != np.float16).map(torch.from_numpy)
    return mostly(base, as_torch, _NASTY_ARRAYS, weight=3)


# -- inference-privacy mechanisms and LDP baselines ------------------------------------------------------


def check_release(out: Any, x: Any) -> None:
    """Same type and shape as the input, finite."""
    if isinstance(x, torch.Tensor):
        assert isinstance(out, torch.Tensor) and out.shape == x.shape
    elif isinstance(x, np.ndarray):
        assert isinstance(out, np.ndarray) and out.shape == x.shape
    finite(out, "released value")


@fuzz(120)
@given(epsilon=EPS, alpha=reals(1e-6, 10.0), lipschitz=reals(1e-6, 1e6), y=arrays(), seed=SEEDS)
@example(epsilon=1.0, alpha=1.0, lipschitz=1e308, y=np.zeros(2), seed=0)  # issue 18: scale = inf
@example(epsilon=1.0, alpha=1e308, lipschitz=1e308, y=np.zeros(2), seed=0)
@example(epsilon=1e6, alpha=1e-300, lipschitz=1e-300, y=np.zeros(2), seed=0)
def test_lap_output(epsilon, alpha, lipschitz, y, seed):
    bad = bad_params(epsilon=eps_ok(epsilon), alpha=pos_ok(alpha), lipschitz=pos_ok(lipschitz))
    names = ("epsilon", "alpha", "lipschitz", "sensitivity")
    mech = expect(lambda: LapOutput(epsilon=epsilon, alpha=alpha, lipschitz=lipschitz), bad=bad, names=names)
    if mech is None:
        return
    finite([mech.scale, mech.sensitivity], "Lap-Output scale/sensitivity")
    assert mech.scale > 0 and mech.sensitivity > 0
    check_guarantee(mech.guarantee)
    out = expect(lambda: mech(y, rng=seed), bad=[] if array_ok(y) else ["y"], names=("y", "value"))
    if out is not None:
        check_release(out, y)


@fuzz(80)
@given(
    epsilon=EPS,
    delta=DELTA,
    alpha=reals(1e-6, 10.0),
    lipschitz=reals(1e-6, 1e6),
    calibration=choices(["analytic", "classic"], ["laplace", "", None, 1]),
    y=arrays(),
    seed=SEEDS,
)
@example(epsilon=1.0, delta=1e-5, alpha=1.0, lipschitz=1e308, calibration="analytic", y=np.zeros(2), seed=0)
@example(
    epsilon=1e6, delta=0.5, alpha=1e-300, lipschitz=1e-300, calibration="analytic", y=np.zeros(2), seed=0
)
def test_gauss_output(epsilon, delta, alpha, lipschitz, calibration, y, seed):
    bad = bad_params(
        epsilon=eps_ok(epsilon),
        delta=delta_ok(delta),
        alpha=pos_ok(alpha),
        lipschitz=pos_ok(lipschitz),
        calibration=calibration in ("analytic", "classic"),
    )
    names = ("epsilon", "delta", "alpha", "lipschitz", "sensitivity", "calibration", "sigma")
    mech = expect(
        lambda: GaussOutput(
            epsilon=epsilon, delta=delta, alpha=alpha, lipschitz=lipschitz, calibration=calibration
        ),
        bad=bad,
        names=names,
    )
    if mech is None:
        return
    finite([mech.sigma, mech.sensitivity], "Gauss-Output σ/sensitivity")
    assert mech.sigma > 0
    check_guarantee(mech.guarantee)
    out = expect(lambda: mech(y, rng=seed), bad=[] if array_ok(y) else ["y"], names=("y", "value", *names))
    if out is not None:
        check_release(out, y)


@fuzz(80)
@given(
    epsilon=EPS,
    delta=DELTA,
    alpha=reals(1e-6, 10.0),
    calibration=choices(["analytic", "classic"], ["Analytic"]),
    x=arrays(unit=True),
    seed=SEEDS,
)
@example(epsilon=1e308, delta=0.5, alpha=1e-300, calibration="analytic", x=np.zeros(2), seed=0)
@example(epsilon=1e3, delta=0.999, alpha=5e-324, calibration="analytic", x=np.zeros(2), seed=0)
def test_gauss_input(epsilon, delta, alpha, calibration, x, seed):
    bad = bad_params(
        epsilon=eps_ok(epsilon),
        delta=delta_ok(delta),
        alpha=pos_ok(alpha),
        calibration=calibration in ("analytic", "classic"),
    )
    names = ("epsilon", "delta", "alpha", "sensitivity", "calibration", "sigma")
    mech = expect(
        lambda: GaussInput(epsilon=epsilon, delta=delta, alpha=alpha, calibration=calibration),
        bad=bad,
        names=names,
    )
    if mech is None:
        return
    finite(mech.sigma, "Gauss-Input σ")
    check_guarantee(mech.guarantee)
    arr = np.asarray(x) if array_ok(x) else None
    in_unit = arr is not None and (arr.size == 0 or (float(arr.min()) >= 0 and float(arr.max()) <= 1))
    out = expect(lambda: mech(x, rng=seed), bad=[] if in_unit else ["x"], names=("x", "value", *names))
    if out is not None:
        check_release(out, x)


@fuzz(80)
@given(epsilon=EPS, values_per_image=st.one_of(st.none(), ints(1, 30)), x=arrays(unit=True), seed=SEEDS)
def test_ldp_image(epsilon, values_per_image, x, seed):
    bad = bad_params(
        epsilon=eps_ok(epsilon),
        values_per_image=values_per_image is None or int_ok(values_per_image, 1, 2**28),
    )
    mech = expect(
        lambda: LDPImage(epsilon=epsilon, values_per_image=values_per_image), bad=bad, names=("epsilon",)
    )
    if mech is None:
        return
    check_guarantee(mech.guarantee)
    # any finite real array is a valid input (values are clipped); the layout may still be refused
    out = expect(lambda: mech(x, rng=seed), bad=[] if array_ok(x) else ["x"], names=("x", "values_per_image"))
    if out is not None:
        check_release(out, x)


@fuzz(80)
@given(epsilon=EPS, bound=reals(1e-6, 1e6), z=arrays(), seed=SEEDS)
@example(epsilon=MIN_EPSILON, bound=1e308, z=np.zeros(3), seed=0)
def test_ldp_embedding(epsilon, bound, z, seed):
    bad = bad_params(epsilon=eps_ok(epsilon), bound=pos_ok(bound))
    mech = expect(lambda: LDPEmbedding(epsilon=epsilon, bound=bound), bad=bad, names=("epsilon", "bound"))
    if mech is None:
        return
    check_guarantee(mech.guarantee)
    out = expect(
        lambda: mech(z, rng=seed), bad=[] if array_ok(z) else ["z"], names=("z", "bound", "sensitivity")
    )
    if out is not None:
        check_release(out, z)


# -- samplers and calibrations ---------------------------------------------------------------------------

RNGS = mostly(SEEDS, st.sampled_from([-1, 1.5, "seed", True, [1, 2]]))


def rng_ok(rng: Any) -> bool:
    return int_ok(rng, 0)


@fuzz(80)
@given(t=ints(1, 2**42), n=ints(0, 40), rng=RNGS)
@example(t=3, n=10**13, rng=0)  # a count that cannot be allocated
def test_discrete_laplace_integers(t, n, rng):
    bad = bad_params(t=int_ok(t, 1, 2**42), n=int_ok(n, 0, 2**28), rng=rng_ok(rng))
    out = expect(lambda: discrete_laplace_integers(t, n, rng), bad=bad, names=("t", "n"))
    if out is not None:
        assert out.dtype == np.int64 and out.shape == (n,)


@fuzz(80)
@given(s=reals(1e-3, 1e9), n=ints(0, 40), rng=RNGS)
@example(s=5e-324, n=3, rng=0)  # s² underflows to 0: used to loop for ever
@example(s=1e-200, n=3, rng=0)
def test_discrete_gaussian_integers(s, n, rng):
    bad = bad_params(s=real_ok(s, 0.0, 2.0**42, hi_open=True), n=int_ok(n, 0, 2**28), rng=rng_ok(rng))
    out = expect(lambda: discrete_gaussian_integers(s, n, rng), bad=bad, names=("s", "n"))
    if out is not None:
        assert out.dtype == np.int64 and out.shape == (n,)


def check_plan(plan: Any) -> None:
    assert isinstance(plan, NoisePlan)
    finite([plan.nominal, plan.effective, plan.grid, plan.grid_scale], "noise plan")
    assert plan.grid > 0 and plan.effective >= plan.nominal > 0, plan


@fuzz(100)
@given(sensitivity=reals(1e-9, 1e9), epsilon=EPS, numel=ints(1, 10_000))
@example(sensitivity=1e308, epsilon=MIN_EPSILON, numel=1)
@example(sensitivity=5e-324, epsilon=1.0, numel=1)
@example(sensitivity=1.0, epsilon=1.0, numel=10**30)
@example(sensitivity=1.0, epsilon=MIN_EPSILON, numel=2**28)
def test_plan_laplace(sensitivity, epsilon, numel):
    bad = bad_params(sensitivity=pos_ok(sensitivity), epsilon=eps_ok(epsilon), numel=int_ok(numel, 1))
    plan = expect(
        lambda: plan_laplace(sensitivity=sensitivity, epsilon=epsilon, numel=numel),
        bad=bad,
        names=("sensitivity", "epsilon", "numel"),
    )
    if plan is not None:
        check_plan(plan)


@fuzz(60)
@given(sigma=reals(1e-6, 1e6), sensitivity=reals(1e-6, 1e6), epsilon=EPS, delta=DELTA, numel=ints(1, 10_000))
@example(sigma=5e-324, sensitivity=1e308, epsilon=1.0, delta=0.5, numel=1)
@example(sigma=1.0, sensitivity=5e-324, epsilon=1.0, delta=0.5, numel=1)
@example(sigma=1e308, sensitivity=1e308, epsilon=MIN_EPSILON, delta=1e-300, numel=1)
def test_plan_gaussian(sigma, sensitivity, epsilon, delta, numel):
    bad = bad_params(
        sigma=pos_ok(sigma),
        sensitivity=pos_ok(sensitivity),
        epsilon=eps_ok(epsilon),
        delta=delta_ok(delta),
        numel=int_ok(numel, 1),
    )
    plan = expect(
        lambda: plan_gaussian(
            sigma=sigma, sensitivity=sensitivity, epsilon=epsilon, delta=delta, numel=numel
        ),
        bad=bad,
        names=("sigma", "sensitivity", "epsilon", "delta", "numel"),
    )
    if plan is not None:
        check_plan(plan)


_PLANS = st.one_of(
    st.builds(
        lambda s, n: plan_laplace(sensitivity=s, epsilon=1.0, numel=n),
        st.floats(1e-6, 1e6),
        st.integers(1, 64),
    ),
    st.builds(
        lambda s, n: plan_gaussian(sigma=s, sensitivity=s, epsilon=1.0, delta=1e-5, numel=n),
        st.floats(1e-6, 1e6),
        st.integers(1, 64),
    ),
    st.sampled_from([None, "laplace", 1.0]),
)


@fuzz(80)
@given(values=arrays(), plan=_PLANS, rng=RNGS)
def test_add_noise(values, plan, rng):
    if isinstance(values, torch.Tensor):
        values = (
            values.numpy() if values.dtype != torch.bool and not values.is_complex() else np.asarray(values)
        )
    ok_values = array_ok(values) and isinstance(plan, NoisePlan) and np.size(values) <= plan.numel
    if ok_values and np.size(values):  # and on the plan's grid: |value| < 2^1000·g (add_noise's docstring)
        ok_values = float(np.max(np.abs(np.asarray(values, dtype=np.float64)))) < 2.0**1000 * plan.grid
    bad = bad_params(values=ok_values, plan=isinstance(plan, NoisePlan), rng=rng_ok(rng))
    out = expect(lambda: add_noise(values, plan, rng), bad=bad, names=("values", "plan"))
    if out is not None:
        assert out.shape == np.shape(values) and out.dtype == np.float64
        finite(out, "add_noise output")


@fuzz(60)
@given(epsilon=reals(1e-3, 50.0), delta=DELTA, sensitivity=reals(1e-6, 1e6))
@example(epsilon=1e308, delta=0.999999, sensitivity=5e-324)
@example(epsilon=5e-324, delta=1e-300, sensitivity=1e308)
@example(epsilon=1e308, delta=1e-300, sensitivity=1e308)
def test_analytic_gaussian_sigma(epsilon, delta, sensitivity):
    bad = bad_params(epsilon=pos_ok(epsilon), delta=delta_ok(delta), sensitivity=pos_ok(sensitivity))
    names = ("epsilon", "delta", "sensitivity", "sigma")
    sigma = expect(
        lambda: analytic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity),
        bad=bad,
        names=names,
    )
    if sigma is not None:
        finite(sigma, "analytic σ")
        assert sigma > 0
        # the σ returned really satisfies the condition it was solved for
        assert analytic_gaussian_delta(epsilon=epsilon, sigma=sigma, sensitivity=sensitivity) <= delta
    for calibration in ("analytic", "classic"):
        bad_c = bad + (["epsilon"] if calibration == "classic" and pos_ok(epsilon) and epsilon >= 1 else [])
        s = expect(
            lambda cal=calibration: gaussian_sigma(
                epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration=cal
            ),
            bad=bad_c,
            names=names,
        )
        if s is not None:
            finite(s, f"{calibration} σ")
            assert s > 0


@fuzz(60)
@given(epsilon=reals(1e-3, 0.999), delta=DELTA, sensitivity=reals(1e-6, 1e6))
@example(epsilon=5e-324, delta=1e-300, sensitivity=1e308)
def test_classic_gaussian_sigma(epsilon, delta, sensitivity):
    bad = bad_params(
        epsilon=real_ok(epsilon, 0.0, 1.0, hi_open=True),
        delta=delta_ok(delta),
        sensitivity=pos_ok(sensitivity),
    )
    sigma = expect(
        lambda: classic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity),
        bad=bad,
        names=("epsilon", "delta", "sensitivity", "sigma"),
    )
    if sigma is not None:
        finite(sigma, "classic σ")
        assert sigma > 0


@fuzz(60)
@given(epsilon=reals(1e-3, 50.0), sigma=reals(1e-6, 1e6), sensitivity=reals(1e-6, 1e6))
@example(epsilon=1e308, sigma=5e-324, sensitivity=1e308)
@example(epsilon=1.0, sigma=1e308, sensitivity=5e-324)
def test_analytic_gaussian_delta(epsilon, sigma, sensitivity):
    bad = bad_params(epsilon=pos_ok(epsilon), sigma=pos_ok(sigma), sensitivity=pos_ok(sensitivity))
    d = expect(
        lambda: analytic_gaussian_delta(epsilon=epsilon, sigma=sigma, sensitivity=sensitivity),
        bad=bad,
        names=("epsilon", "sigma", "sensitivity"),
    )
    if d is not None:
        assert 0.0 <= d <= 1.0, d


@fuzz(30)
@given(epsilon=reals(1e-3, 50.0), delta=DELTA, sensitivity=reals(1e-6, 1e6), rho=reals(1e-6, 1e3))
@example(epsilon=5e-324, delta=1e-300, sensitivity=1e308, rho=1.0)
@example(epsilon=1e308, delta=0.5, sensitivity=1.0, rho=1e308)
@example(epsilon=0.0, delta=0.5, sensitivity=1.0, rho=5e-324)
def test_discrete_gaussian_floor_and_cks(epsilon, delta, sensitivity, rho):
    bad = bad_params(epsilon=pos_ok(epsilon), delta=delta_ok(delta), sensitivity=pos_ok(sensitivity))
    sigma = expect(
        lambda: discrete_gaussian_sigma_floor(epsilon=epsilon, delta=delta, sensitivity=sensitivity),
        bad=bad,
        names=("epsilon", "delta", "sensitivity", "sigma"),
    )
    if sigma is not None:
        finite(sigma, "discrete Gaussian σ floor")
        assert sigma > 0
    nonneg_eps = real_ok(epsilon, 0.0, math.inf, lo_open=False, hi_open=True)
    d = expect(
        lambda: cks_zcdp_delta(rho=rho, epsilon=epsilon),
        bad=bad_params(rho=pos_ok(rho), epsilon=nonneg_eps),
        names=("rho", "epsilon"),
    )
    if d is not None:
        assert 0.0 <= d <= 1.0, d


# -- PTR ---------------------------------------------------------------------------------------------------


def tiny_module(seed: int, scale: float = 1.0) -> torch.nn.Module:
    """A random 2→3→2 ReLU MLP in float64."""
    gen = torch.Generator().manual_seed(seed)
    f = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)).double()
    with torch.no_grad():
        for p in f.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * scale)
    return f.eval()


_MODULE = tiny_module(0)
_INTERVAL = Certifier(kind="interval", cache=None)
_CENTRES = mostly(
    hnp.arrays(np.float64, 2, elements=st.floats(-3, 3)),
    st.sampled_from(
        [
            np.array([True, False]),
            np.zeros(3),
            np.zeros((1, 2)),
            np.array([]),
            np.array([np.nan, 0.0]),
            np.array([np.inf, 0.0]),
            np.array([1e308, -1e308]),
            np.array([1e300, -1e300]),
            np.array(["a", "b"]),
            [0.1, 0.2],
            "ab",
            None,
        ]
    ),
)


def centre_ok(z: Any, *, flat: bool) -> bool:
    """A finite real vector of the network's input size (2); ``flat``: exactly 1-D."""
    if not array_ok(z) or isinstance(z, str):
        return False
    arr = np.asarray(z)
    return arr.size == 2 and (arr.ndim == 1 if flat else True)


def ptr_args(draw: st.DrawFn) -> dict[str, Any]:
    radius = draw(reals(1e-3, 2.0))
    r = float(radius) if pos_ok(radius) else 1.0
    r_max = draw(st.one_of(st.floats(1.0, 8.0).map(lambda k: r * k), reals(1e-3, 10.0)))
    tol = draw(st.one_of(st.floats(1e-3, 1.2).map(lambda k: r * k), reals(1e-6, 1.0)))
    delta_p = draw(reals(1e-3, 10.0))
    return dict(radius=radius, r_max=r_max, tol=tol, delta_p=delta_p)


def grid_bad(radius: Any, r_max: Any, tol: Any, delta_p: Any) -> list[str]:
    """Out-of-range PTR grid parameters: R, Δp, R_max ≥ R finite, 0 < tol < R (issue 18), and at most
    2^52 bisection steps."""
    bad = bad_params(radius=pos_ok(radius), delta_p=pos_ok(delta_p), r_max=pos_ok(r_max), tol=pos_ok(tol))
    if pos_ok(radius) and pos_ok(r_max) and float(r_max) < float(radius):
        bad.append("r_max")
    if pos_ok(radius) and pos_ok(tol) and float(tol) >= float(radius):
        bad.append("tol")
    if not bad and (float(r_max) - float(radius)) / float(tol) > 2.0**52:
        bad.append("tol")
    return bad


@st.composite
def ptr_cases(draw: st.DrawFn) -> dict[str, Any]:
    return {**ptr_args(draw), "epsilon": draw(EPS), "delta": draw(DELTA), "z": draw(_CENTRES)}


def _case(**kw: Any) -> dict[str, Any]:
    base = dict(
        epsilon=1.0, delta=1e-5, radius=0.1, delta_p=2.0, r_max=1.0, tol=0.01, z=np.array([0.1, -0.2])
    )
    return {**base, **kw}


@fuzz(80)
@given(case=ptr_cases(), seed=SEEDS)
@example(case=_case(tol=0.1), seed=0)  # issue 18: tol ≥ R was accepted
@example(case=_case(tol=5.0), seed=0)  # issue 18: tol > R_max was accepted
@example(case=_case(radius=1e6, r_max=1e6, delta_p=1e300, epsilon=MIN_EPSILON), seed=0)
@example(case=_case(r_max=1e308, tol=0.05), seed=0)
def test_propose_test_release(case, seed):
    z = case.pop("z")
    bad = grid_bad(case["radius"], case["r_max"], case["tol"], case["delta_p"])
    bad += bad_params(
        epsilon=eps_ok(case["epsilon"]), delta=delta_ok(case["delta"]), z=centre_ok(z, flat=True)
    )
    if "z" in bad:
        bad.append("center")  # the oracle calls the embedding it is handed "center"
    names = ("epsilon", "delta", "radius", "delta_p", "r_max", "tol", "z", "center", "sensitivity")
    res = expect(
        lambda: propose_test_release(_MODULE, z, lipschitz=_INTERVAL, rng=seed, **case), bad=bad, names=names
    )
    if res is None:
        return
    assert isinstance(res, PTRResult)
    finite(
        [
            res.phi,
            res.phi_noisy,
            res.threshold,
            res.noise_scale,
            res.test_scale,
            res.noise_scale_effective,
            res.test_scale_effective,
        ],
        "PTR numbers",
    )
    assert res.phi >= 0 and (res.value is None) == (not res.released)
    if res.released:
        assert res.value.shape == (2,)
        finite(res.value, "PTR release")
    check_guarantee(res.guarantee)


@fuzz(60)
@given(case=ptr_cases())
@example(case=_case(tol=0.1))
@example(case=_case(tol=5.0))
def test_compute_phi(case):
    z = case.pop("z")
    case.pop("epsilon"), case.pop("delta")
    bad = grid_bad(case["radius"], case["r_max"], case["tol"], case["delta_p"])
    if not centre_ok(z, flat=True):
        bad += ["z", "center"]
    names = ("radius", "delta_p", "r_max", "tol", "z", "center")
    res = expect(lambda: compute_phi(_MODULE, z, lipschitz=_INTERVAL, **case), bad=bad, names=names)
    if res is not None:
        finite([res.phi, res.zeta], "φ, ζ")
        assert 0 <= res.zeta <= float(case["tol"]) and res.phi >= 0


@fuzz(80)
@given(
    epsilon=reals(1e-3, 50.0),
    delta=DELTA,
    radius=reals(1e-3, 10.0),
    delta_p=reals(1e-3, 10.0),
    zeta=st.one_of(st.just(0.0), reals(0.0, 1.0)),
)
@example(epsilon=5e-324, delta=0.5, radius=1e308, delta_p=1e308, zeta=0.0)
@example(epsilon=1.0, delta=0.5, radius=1e308, delta_p=1.0, zeta=1e308)
def test_ptr_scales(epsilon, delta, radius, delta_p, zeta):
    bad = bad_params(
        epsilon=pos_ok(epsilon),
        delta=delta_ok(delta),
        radius=pos_ok(radius),
        delta_p=pos_ok(delta_p),
        zeta=real_ok(zeta, 0.0, math.inf, lo_open=False, hi_open=True),
    )
    s = expect(
        lambda: ptr_scales(epsilon=epsilon, delta=delta, radius=radius, delta_p=delta_p, zeta=zeta),
        bad=bad,
        names=("epsilon", "delta", "radius", "delta_p", "zeta"),
    )
    if s is not None:
        finite([s.test_scale, s.threshold, s.release_scale, s.pass_probability_at_zero], "PTR scales")
        check_guarantee(s.guarantee)


@fuzz(60)
@given(
    values=mostly(
        hnp.arrays(np.float64, st.integers(2, 8), elements=st.floats(0.0, 100.0)), arrays(), weight=3
    ),
    n_sigma=reals(0.0, 10.0),
)
@example(values=np.array([1e308, 1e308, 0.0]), n_sigma=3.0)
@example(values=np.array([1.0, 2.0]), n_sigma=1e308)
def test_propose_delta_p(values, n_sigma):
    arr = np.asarray(values) if array_ok(values) else None
    ok = arr is not None and arr.size >= 2 and bool(np.all(arr >= 0))
    bad = bad_params(
        lipschitz_values=ok, n_sigma=real_ok(n_sigma, 0.0, math.inf, lo_open=False, hi_open=True)
    )
    dp = expect(
        lambda: propose_delta_p(values, n_sigma), bad=bad, names=("lipschitz_values", "n_sigma", "delta_p")
    )
    if dp is not None:
        finite(dp, "Δp")
        assert dp > 0


# -- Lipschitz ---------------------------------------------------------------------------------------------

NORMS_IN = choices(["linf", "l1"], ["l2", "Linf", None])
NORMS_OUT = choices(["l1", "linf"], ["l2", None])
RADII = mostly(reals(1e-3, 3.0), st.sampled_from([1e6, 1e6 + 1, 1e7]), weight=4)
THREADS = st.one_of(st.none(), ints(1, 4))
TIME_LIMITS = st.one_of(st.none(), reals(1.0, 60.0))


def radius_ok(r: Any) -> bool:
    """The engine's documented range (0, 1e6]."""
    return real_ok(r, 0.0, 1e6)


def check_certificate(cert: Any, r: Any) -> None:
    finite([cert.upper, cert.lower], "certificate bounds")
    assert 0 <= cert.lower <= cert.upper, cert
    assert cert.radius == float(r)
    assert cert.argmax is None or len(cert.argmax) == 2


@fuzz(80)
@given(
    seed=SEEDS,
    scale=st.sampled_from([1.0, 1.0, 1e-3, 1e3, 1e150, 1e300]),
    center=_CENTRES,
    radius=RADII,
    certifier=choices(["exact", "lp", "interval"], ["milp"]),
    solver=choices(["auto", "highs", "enumeration"], ["cplex"]),
    input_norm=NORMS_IN,
    output_norm=NORMS_OUT,
    threads=THREADS,
    time_limit=TIME_LIMITS,
)
@example(
    seed=0,
    scale=1.0,
    center=np.zeros(2),
    radius=0.0,
    certifier="exact",
    solver="auto",
    input_norm="linf",
    output_norm="l1",
    threads=None,
    time_limit=None,
)  # issue 18: radius 0
@example(
    seed=0,
    scale=1.0,
    center=np.array([True, False]),
    radius=0.5,
    certifier="exact",
    solver="auto",
    input_norm="linf",
    output_norm="l1",
    threads=None,
    time_limit=None,
)  # issue 18: boolean centre
@example(
    seed=0,
    scale=1.0,
    center=np.zeros(2),
    radius=0.5,
    certifier="lp",
    solver="highs",
    input_norm="linf",
    output_norm="l1",
    threads=-3,
    time_limit=None,
)  # issue 18: threads = −3
@example(
    seed=0,
    scale=1.0,
    center=np.zeros(2),
    radius=1e308,
    certifier="exact",
    solver="auto",
    input_norm="linf",
    output_norm="l1",
    threads=None,
    time_limit=None,
)  # issue 18: OverflowError
@example(
    seed=0,
    scale=1.0,
    center=np.array([1e308, -1e308]),
    radius=1.0,
    certifier="exact",
    solver="auto",
    input_norm="linf",
    output_norm="l1",
    threads=None,
    time_limit=None,
)
@example(
    seed=0,
    scale=1e300,
    center=np.zeros(2),
    radius=0.5,
    certifier="interval",
    solver="auto",
    input_norm="linf",
    output_norm="l1",
    threads=None,
    time_limit=None,
)
def test_local_lipschitz(
    seed, scale, center, radius, certifier, solver, input_norm, output_norm, threads, time_limit
):
    f = tiny_module(seed, scale)
    bad = bad_params(
        center=centre_ok(center, flat=False),
        radius=radius_ok(radius),
        certifier=certifier in ("exact", "lp", "interval"),
        solver=solver in ("auto", "highs", "enumeration"),
        input_norm=input_norm in ("linf", "l1"),
        output_norm=output_norm in ("l1", "linf"),
        threads=threads is None or int_ok(threads, 1),
        time_limit=time_limit is None or pos_ok(time_limit),
    )
    cert = expect(
        lambda: local_lipschitz(
            f,
            center,
            radius,
            certifier=certifier,
            solver=solver,
            input_norm=input_norm,
            output_norm=output_norm,
            threads=threads,
            time_limit=time_limit,
        ),
        bad=bad,
        names=("center", "radius", "solver", "weights", "net", "enumeration"),
    )
    if cert is not None:
        check_certificate(cert, radius)


@fuzz(60)
@given(
    kind=choices(["exact", "lp", "interval"], ["mip"]),
    solver=choices(["auto", "highs"], ["glpk"]),
    time_limit=TIME_LIMITS,
    threads=THREADS,
    input_norm=NORMS_IN,
    output_norm=NORMS_OUT,
    center=_CENTRES,
    radius=RADII,
    threshold=reals(1e-3, 10.0),
)
@example(
    kind="exact",
    solver="auto",
    time_limit=None,
    threads=-3,
    input_norm="linf",
    output_norm="l1",
    center=np.zeros(2),
    radius=0.5,
    threshold=1.0,
)
@example(
    kind="exact",
    solver="auto",
    time_limit=None,
    threads=None,
    input_norm="linf",
    output_norm="l1",
    center=np.zeros(2),
    radius=0.0,
    threshold=1.0,
)
@example(
    kind="interval",
    solver="auto",
    time_limit=None,
    threads=None,
    input_norm="linf",
    output_norm="l1",
    center=np.zeros(2),
    radius=1e308,
    threshold=1.0,
)
@example(  # decide must answer "U ≤ τ" for the same U that certify/__call__ report
    kind="interval",
    solver="auto",
    time_limit=None,
    threads=None,
    input_norm="linf",
    output_norm="linf",
    center=np.zeros(2),
    radius=1.0,
    threshold=5.0,
)
def test_certifier(kind, solver, time_limit, threads, input_norm, output_norm, center, radius, threshold):
    cbad = bad_params(
        kind=kind in ("exact", "lp", "interval"),
        solver=solver in ("auto", "highs"),
        time_limit=time_limit is None or pos_ok(time_limit),
        threads=threads is None or int_ok(threads, 1),
        input_norm=input_norm in ("linf", "l1"),
        output_norm=output_norm in ("l1", "linf"),
    )
    names = ("kind", "solver", "time_limit", "threads", "input_norm", "output_norm")
    cert = expect(
        lambda: Certifier(
            kind=kind,
            solver=solver,
            time_limit=time_limit,
            threads=threads,
            cache=None,
            input_norm=input_norm,
            output_norm=output_norm,
        ),
        bad=cbad,
        names=names,
    )
    if cert is None:
        return
    bad = bad_params(center=centre_ok(center, flat=False), radius=radius_ok(radius))
    passed = expect(
        lambda: cert.decide(_MODULE, center, radius, threshold),
        bad=bad + bad_params(threshold=pos_ok(threshold)),
        names=("center", "radius", "threshold"),
    )
    if passed is not None:
        assert isinstance(passed, bool | np.bool_)
    c = expect(lambda: cert.certify(_MODULE, center, radius), bad=bad, names=("center", "radius"))
    if c is not None:
        check_certificate(c, radius)
        if passed is not None and c.exact:
            assert bool(passed) == (c.upper <= float(threshold)), (passed, c.upper, threshold)


_MASKS = mostly(
    st.one_of(st.none(), hnp.arrays(np.bool_, 3)),
    st.sampled_from(
        [np.zeros(4, dtype=bool), np.array([np.nan, 0.0, 0.0]), np.array(["a", "b", "c"]), [2.5, 0, 0], "abc"]
    ),
)


def mask_ok(m: Any) -> bool:
    """None or a boolean (or 0/1 integer) vector over the 3 hidden neurons."""
    if m is None:
        return True
    if isinstance(m, str):
        return False
    arr = np.asarray(m)
    return arr.shape == (3,) and (
        arr.dtype == np.bool_ or (arr.dtype.kind in "iu" and set(arr.tolist()) <= {0, 1})
    )


@fuzz(60)
@given(
    seed=SEEDS,
    scale=st.sampled_from([1.0, 1.0, 1e-3, 1e150, 1e300]),
    as_module=st.booleans(),
    threshold=st.one_of(st.none(), reals(1e-3, 10.0)),
    on=_MASKS,
    off=_MASKS,
    input_norm=NORMS_IN,
    output_norm=NORMS_OUT,
    max_nodes=ints(1, 10_000),
    mseed=ints(0, 100),
)
@example(
    seed=0,
    scale=1.0,
    as_module=True,
    threshold=None,
    on=None,
    off=None,
    input_norm="linf",
    output_norm="l1",
    max_nodes=1000,
    mseed=0,
)
def test_max_pattern_norm(
    seed, scale, as_module, threshold, on, off, input_norm, output_norm, max_nodes, mseed
):
    f = tiny_module(seed, scale)
    net = f if as_module else expect(lambda: as_network(f), bad=[], names=("net", "weights"))
    if net is None:
        return
    masks_ok = mask_ok(on) and mask_ok(off)
    if masks_ok and on is not None and off is not None:
        masks_ok = not bool((np.asarray(on, dtype=bool) & np.asarray(off, dtype=bool)).any())
    bad = bad_params(
        threshold=threshold is None or (is_real(threshold) and not math.isnan(float(threshold))),
        input_norm=input_norm in ("linf", "l1"),
        output_norm=output_norm in ("l1", "linf"),
        max_nodes=int_ok(max_nodes, 1),
        seed=int_ok(mseed, 0),
    )
    if not masks_ok:
        bad += ["on", "off"]
    res = expect(
        lambda: max_pattern_norm(
            net,
            threshold=threshold,
            on=on,
            off=off,
            input_norm=input_norm,
            output_norm=output_norm,
            max_nodes=max_nodes,
            seed=mseed,
        ),
        bad=bad,
        names=("net", "weights", "threshold", "max_nodes"),
    )
    if res is None:
        return
    finite(res.lower, "max_pattern_norm lower bound")
    if math.isinf(res.upper):  # documented: a pattern above the threshold, or the node budget ran out
        assert not res.complete or (threshold is not None and res.lower > float(threshold)), res
    else:
        assert res.lower <= res.upper, res


# -- image decoding ----------------------------------------------------------------------------------------


@st.composite
def uploads(draw: st.DrawFn) -> tuple[Any, bool, int, int]:
    """(data, clean, byte size, pixel count): a PNG/JPEG made with Pillow, possibly damaged, or junk."""
    from PIL import Image

    h, w = draw(st.integers(1, 24)), draw(st.integers(1, 24))
    mode = draw(st.sampled_from(["L", "RGB", "RGBA", "LA", "P", "I;16", "1"]))
    fmt = draw(st.sampled_from(["PNG", "JPEG"]))
    rgba = np.random.default_rng(draw(SEEDS)).integers(0, 256, size=(h, w, 4), dtype=np.uint8)
    if mode == "I;16":
        im = Image.fromarray(rgba[..., 0].astype(np.uint16) * 257)
        fmt = "PNG"
    else:
        im = Image.fromarray(rgba, "RGBA").convert(mode)
        if fmt == "JPEG" and mode not in ("L", "RGB"):
            im = im.convert("RGB")
    buf = io.BytesIO()
    im.save(buf, format=fmt)
    data = buf.getvalue()
    damage = draw(
        st.sampled_from(["none", "none", "none", "truncate", "flip", "junk", "empty", "gif", "type"])
    )
    if damage == "none":
        return data, True, len(data), h * w
    if damage == "truncate":
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif damage == "flip":
        i = draw(st.integers(0, len(data) - 1))
        data = data[:i] + bytes([data[i] ^ (1 << draw(st.integers(0, 7)))]) + data[i + 1 :]
    elif damage == "junk":
        data = draw(st.binary(max_size=64))
    elif damage == "empty":
        data = b""
    elif damage == "gif":
        data = b"GIF89a" + data[6:]
    else:
        data = draw(st.sampled_from([data.decode("latin-1"), None, 3, [1, 2], np.frombuffer(data, np.uint8)]))
    return data, False, 0, 0


_PNG = encode_png(np.linspace(0.0, 1.0, 20).reshape(4, 5))  # a clean 5×4 grey PNG
_TARGETS = mostly(
    st.tuples(st.sampled_from([1, 3]), st.integers(1, 32), st.integers(1, 32)),
    st.sampled_from(
        [
            (2, 8, 8),
            (0, 8, 8),
            (1, -1, 8),
            (1, 0, 8),
            (1, 8),
            (1, 8, 8, 8),
            (True, 8, 8),
            (1, 8.0, 8),
            (1, "8", 8),
            "abc",
            None,
            8,
            (1, 10**6, 10**6),  # issue 18: MemoryError
            (3, 10**9, 10**9),
            (1, 2**40, 1),
        ]
    ),
)


def target_ok(t: Any) -> bool:
    if not isinstance(t, tuple | list) or len(t) != 3 or not all(int_ok(v, 1) for v in t):
        return False
    c, h, w = (int(v) for v in t)
    return c in (1, 3) and c * h * w <= 10**6


@fuzz(100)
@given(
    upload=uploads(),
    target_shape=_TARGETS,
    max_bytes=st.one_of(st.just(10 * 2**20), ints(1, 4096)),
    max_pixels=st.one_of(st.just(4096 * 4096), ints(1, 600)),
    background=st.one_of(st.sampled_from([0.0, 1.0]), reals(0.0, 1.0)),
    invert=choices([False, True], ["no", 0, 1, None]),
    just_tensor=st.booleans(),
)
@example(
    upload=(_PNG, True, len(_PNG), 20),
    target_shape=(1, 8, 8),
    max_bytes=1024,
    max_pixels=1024,
    background=0.0,
    invert="no",
    just_tensor=False,
)  # issue 18: invert='no' was taken as True
@example(
    upload=(_PNG, True, len(_PNG), 20),
    target_shape=(1, 10**6, 10**6),
    max_bytes=1024,
    max_pixels=1024,
    background=0.0,
    invert=False,
    just_tensor=True,
)  # issue 18: MemoryError
def test_decode_image(upload, target_shape, max_bytes, max_pixels, background, invert, just_tensor):
    data, clean, size, pixels = upload
    shape_names = ["target_shape", "channels", "height", "width"]  # errors may name the component
    bad = bad_params(
        target_shape=target_ok(target_shape),
        max_bytes=int_ok(max_bytes, 1),
        max_pixels=int_ok(max_pixels, 1),
        background=real_ok(background, 0.0, 1.0, lo_open=False),
        invert=isinstance(invert, bool),
    )
    if "target_shape" in bad:
        bad += shape_names
    # refusals of the upload itself name the file, not the parameter `data`
    data_words = ("data", "upload", "file", "image", "PNG", "JPEG")
    if not bad:
        if not isinstance(data, bytes):
            bad = list(data_words)
        elif not clean:
            pass  # damaged bytes may or may not still decode: either is fine, a crash is not
        elif size > max_bytes or pixels > max_pixels:
            bad = ["too large", "limit"]
    names = (
        "target_shape",
        "channels",
        "height",
        "width",
        "max_bytes",
        "max_pixels",
        "background",
        "invert",
        *data_words,
    )
    fn = load_image if just_tensor else decode_image
    out = expect(
        lambda: fn(
            data,
            target_shape=target_shape,
            max_bytes=max_bytes,
            max_pixels=max_pixels,
            background=background,
            invert=invert,
        ),
        bad=bad,
        names=names,
    )
    if out is None:
        assert not (clean and not bad and isinstance(data, bytes)), (
            "a clean image within the limits was refused"
        )
        return
    tensor = out if just_tensor else out.tensor
    assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float32
    assert tuple(tensor.shape) == tuple(int(v) for v in target_shape)
    finite(tensor, "decoded image")
    assert float(tensor.min()) >= 0.0 and float(tensor.max()) <= 1.0


# -- accounting --------------------------------------------------------------------------------------------

_SPACES = choices(["input", "embedding", Space.INPUT], [None, "pixels", 3])
_NORMS = choices(["l1", "l2", "linf", Norm.L2], [None, "l3", 1])


@st.composite
def guarantee_args(draw: st.DrawFn) -> dict[str, Any]:
    return dict(
        epsilon=draw(reals(0.0, 10.0)),
        delta=draw(st.one_of(st.just(0.0), reals(0.0, 1.0))),
        radius=draw(st.one_of(st.just(math.inf), reals(1e-3, 10.0))),
        space=draw(_SPACES),
        norm=draw(_NORMS),
    )


def guarantee_bad(a: dict[str, Any]) -> list[str]:
    """ε ∈ [0, ∞), δ ∈ [0, 1], radius ∈ (0, ∞]; a finite radius needs a space and a norm."""
    space_ok = a["space"] is None or isinstance(a["space"], Space) or a["space"] in ("input", "embedding")
    norm_ok = a["norm"] is None or isinstance(a["norm"], Norm) or a["norm"] in ("l1", "l2", "linf")
    radius_ok = real_ok(a["radius"], 0.0, math.inf)
    bad = bad_params(
        epsilon=real_ok(a["epsilon"], 0.0, math.inf, lo_open=False, hi_open=True),
        delta=real_ok(a["delta"], 0.0, 1.0, lo_open=False),
        radius=radius_ok,
        space=space_ok,
        norm=norm_ok,
    )
    if not bad and not math.isinf(float(a["radius"])) and (a["space"] is None or a["norm"] is None):
        bad = ["space", "norm"]
    return bad


_GOOD_GUARANTEES = st.one_of(
    st.builds(
        Guarantee,
        epsilon=st.one_of(st.floats(0.0, 10.0), st.sampled_from([0.0, 1e308, 5e-324])),
        delta=st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 1.0, 5e-324])),
        radius=st.one_of(st.floats(1e-3, 10.0), st.sampled_from([math.inf, 5e-324, 1e308])),
        space=st.sampled_from(list(Space)),
        norm=st.sampled_from(list(Norm)),
    ),
    st.sampled_from(
        [
            LapOutput(epsilon=1.0, alpha=0.5, lipschitz=2.0).guarantee,
            GaussOutput(epsilon=1.0, delta=1e-5, alpha=0.5, lipschitz=2.0).guarantee,
            GaussInput(epsilon=0.5, delta=1e-6, alpha=0.5).guarantee,
            ptr_scales(epsilon=1.0, delta=1e-5, radius=0.1, delta_p=2.0).guarantee,
            LDPImage(epsilon=3.0).guarantee,
        ]
    ),
)


@fuzz(80)
@given(args=guarantee_args())
def test_guarantee(args):
    g = expect(lambda: Guarantee(**args), bad=guarantee_bad(args), names=())
    if g is not None:
        check_guarantee(g)
        assert isinstance(g.describe(), str)
        assert Guarantee.from_dict(g.to_dict()) == g


def check_composed(total: Any, parts: list[Guarantee]) -> None:
    """Finite, and never less than any one part (composition cannot reduce the loss)."""
    if isinstance(total, Guarantee):
        check_guarantee(total)
    finite(total.epsilon, "composed ε")
    assert 0 <= total.delta <= 1, total
    if parts:
        assert total.epsilon >= max(p.epsilon for p in parts) and total.delta >= max(p.delta for p in parts)


@fuzz(80)
@given(
    gs=st.lists(st.one_of(_GOOD_GUARANTEES, _GOOD_GUARANTEES, st.sampled_from([None, "g", 1.0])), max_size=4),
    as_generator=st.booleans(),
)
@example(
    gs=[Guarantee(epsilon=1e308, delta=0.5, radius=1.0, space="input", norm="l2")] * 2, as_generator=False
)
def test_basic_composition(gs, as_generator):
    bad = bad_params(guarantees=bool(gs) and all(isinstance(g, Guarantee) for g in gs))
    arg = iter(gs) if as_generator else gs
    names = ("guarantees", "epsilon", "delta", "space")
    total = expect(lambda: basic_composition(arg), bad=bad, names=names)
    if total is not None:
        check_composed(total, gs)


@fuzz(80)
@given(g=st.one_of(_GOOD_GUARANTEES, st.sampled_from([None, "g"])), beta=reals(1e-3, 100.0), k=ints(1, 50))
@example(g=Guarantee(epsilon=1.0, delta=1e-5, radius=5e-324, space="input", norm="l2"), beta=1e308, k=1)
@example(g=Guarantee(epsilon=1.0, delta=1e-5, radius=1.0, space="input", norm="l2"), beta=1.0, k=10**400)
@example(g=Guarantee(epsilon=1e-300, delta=0.0, radius=5e-324, space="input", norm="l1"), beta=1e308, k=2**62)
def test_chaining_and_group_privacy(g, beta, k):
    is_g = isinstance(g, Guarantee)
    names = ("guarantee", "beta", "k", "epsilon", "delta", "radius", "hops")
    chained = expect(
        lambda: chaining(g, beta), bad=bad_params(guarantee=is_g, beta=pos_ok(beta)), names=names
    )
    if chained is not None:
        check_composed(chained, [g])
        assert chained.radius == float(beta) or chained.all_pairs
    grouped = expect(lambda: group_privacy(g, k), bad=bad_params(guarantee=is_g, k=int_ok(k, 1)), names=names)
    if grouped is not None:
        check_composed(grouped, [g])


_BAD_LEDGER_DATA = [
    ([{"epsilon": 1.0}], ("label",)),
    (
        [{"label": "a", "epsilon": 1.0, "delta": 0.0, "radius": 1.0, "space": "input", "norm": "l2", "x": 3}],
        ("x",),
    ),
    (["abc"], ("data[0]",)),
    (
        [{"label": "a", "epsilon": -1.0, "delta": 0.0, "radius": 1.0, "space": "input", "norm": "l2"}],
        ("epsilon",),
    ),
    ([{"label": "a", "epsilon": math.nan, "delta": 0.0, "radius": math.inf}], ("epsilon",)),
    ([{"label": "", "epsilon": 1.0, "delta": 0.0, "radius": math.inf}], ("label",)),
    ([{"label": "a", "epsilon": 1.0, "delta": 0.0, "radius": 1.0, "metric": "my own metric"}], ("metric",)),
    (3, ("data",)),
    (None, ("data",)),
]


@fuzz(60)
@given(
    entries=st.lists(
        st.tuples(
            st.one_of(_GOOD_GUARANTEES, st.sampled_from([None, "g"])), st.sampled_from(["a", "", None, 3])
        ),
        max_size=5,
    ),
    broken=st.sampled_from(_BAD_LEDGER_DATA),
)
def test_privacy_ledger(entries, broken):
    ledger = PrivacyLedger()
    for g, label in entries:
        bad = bad_params(guarantee=isinstance(g, Guarantee), label=isinstance(label, str) and bool(label))
        new = expect(lambda g=g, label=label, led=ledger: led.add(g, label=label), bad=bad, names=())
        if new is not None:
            assert len(new) == len(ledger) + 1
            ledger = new
    gs = [e.guarantee for e in ledger.entries]
    total = expect(ledger.total, bad=[], names=("guarantees", "epsilon", "delta", "spaces"))
    if total is not None:
        check_composed(total, gs)
    worst = expect(ledger.worst_case, bad=[], names=("epsilon", "delta"))
    if worst is not None:
        check_composed(worst, gs)  # nothing is left out of the worst case
    for t in expect(ledger.totals_by_relation, bad=[], names=("epsilon", "delta")) or ():
        check_composed(t, [])
        if worst is not None:
            assert t.epsilon <= worst.epsilon and t.delta <= worst.delta
    assert PrivacyLedger.from_dicts(ledger.to_dicts()) == ledger
    data, named = broken
    # from_dicts is how a saved ledger comes back: anything malformed is a clear error naming the field
    expect(lambda: PrivacyLedger.from_dicts(data), bad=named, names=())


pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
