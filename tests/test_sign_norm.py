"""The ∞→1 branch and bound against exhaustive enumeration of sign vectors (tiny matrices)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from privcore.lipschitz import sign_norm
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.sign_norm import inf_to_one_bnb


def _every_value(a: np.ndarray) -> np.ndarray:
    """‖A s‖₁ for every s ∈ {±1}^d (d = columns)."""
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=a.shape[1])))
    return np.abs(a @ signs.T).sum(axis=0)


def _check(a: np.ndarray, **kw: int) -> None:
    res = inf_to_one_bnb(a, **kw)
    every = _every_value(a)
    truth = float(every.max())
    tol = 1e-12 * (1.0 + float(np.abs(a).sum()))
    assert res.value >= truth - tol  # ≥ every sign vector's value
    assert res.lower <= truth + tol  # reached by some sign vector
    if res.exact:
        assert res.value == pytest.approx(truth, rel=1e-12, abs=1e-300)
        assert res.lower == pytest.approx(truth, rel=1e-12, abs=1e-300)


@pytest.fixture
def small_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leaves of 2 columns, so that matrices up to 12 wide exercise the branching and the dolls."""
    monkeypatch.setattr(sign_norm, "LEAF_BITS", 2)


@pytest.mark.usefixtures("small_leaves")
def test_random_matrices_match_enumeration() -> None:
    rng = np.random.default_rng(0)
    for m, d in [(3, 3), (5, 4), (4, 7), (8, 8), (6, 10), (12, 12), (12, 9), (2, 12)]:
        for scale in (1.0, 1e-3, 1e6):
            _check(scale * rng.standard_normal((m, d)))
        _check(-np.abs(rng.standard_normal((m, d))))  # all negative
        _check(rng.integers(-2, 3, (m, d)).astype(float))  # small integers: many ties


@pytest.mark.usefixtures("small_leaves")
def test_degenerate_matrices_match_enumeration() -> None:
    rng = np.random.default_rng(1)
    u, v = rng.standard_normal(11), rng.standard_normal(10)
    a = rng.standard_normal((11, 10))
    a[[2, 5]] = 0.0  # zero rows
    a[:, 3] = 0.0  # a zero column
    cases = [
        np.outer(u, v),  # rank 1
        rng.standard_normal((11, 2)) @ rng.standard_normal((2, 10)),  # rank 2
        a,
        np.eye(10),  # every sign vector ties
        np.ones((9, 10)),  # identical columns
        np.hstack([a[:, :5], -a[:, :5]]),  # columns in opposite pairs
        np.zeros((4, 10)),
        np.zeros((0, 5)),
    ]
    for c in cases:
        if c.size == 0:
            res = inf_to_one_bnb(c)
            assert res.value == 0.0 and res.exact
            continue
        _check(c)


@pytest.mark.usefixtures("small_leaves")
def test_the_node_limit_gives_a_certified_upper_bound() -> None:
    rng = np.random.default_rng(2)
    stopped = 0
    for _ in range(12):
        a = rng.standard_normal((12, 12))
        res = inf_to_one_bnb(a, max_nodes=8)
        _check(a, max_nodes=8)
        stopped += not res.exact
        if not res.exact:
            assert res.value >= float(_every_value(a).max())
            assert res.lower < res.value
    assert stopped  # the limit was reached at least once


def test_past_the_enumeration_norms_bracket_holds_when_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Norms.bracket keeps the lower end (a reached ‖A s‖₁) apart from the certified upper end."""
    monkeypatch.setattr("privcore.lipschitz.norms.MAX_ENUMERATED_SIGN_DIM", 4)
    monkeypatch.setattr(sign_norm, "LEAF_BITS", 2)
    monkeypatch.setattr(sign_norm, "DEFAULT_MAX_NODES", 4)
    monkeypatch.setattr(inf_to_one_bnb, "__kwdefaults__", {"max_nodes": 4})
    a = np.random.default_rng(3).standard_normal((3, 10, 10))
    low, up = Norms().bracket(a)
    truth = np.array([_every_value(x).max() for x in a])
    assert np.all(low <= truth * (1 + 1e-12)) and np.all(up >= truth * (1 - 1e-12))
    assert np.any(low < up)
    assert np.array_equal(Norms().of(a), up)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 9), st.integers(1, 9)),
                  elements=st.floats(-100, 100, allow_nan=False, allow_subnormal=False)))
def test_property_value_bounds_every_sign_vector(a: np.ndarray) -> None:
    old = sign_norm.LEAF_BITS
    sign_norm.LEAF_BITS = 2
    try:
        _check(a)
    finally:
        sign_norm.LEAF_BITS = old


def test_default_sizes_are_exact_and_fast() -> None:
    """At the engine's sizes (16 to 32 columns, rank ≤ 10 as a d → 10 → d net's Jacobians) the
    default search finishes."""
    rng = np.random.default_rng(4)
    for d in (16, 24, 32):
        a = rng.standard_normal((d, 10)) @ rng.standard_normal((10, d))
        res = inf_to_one_bnb(a)
        assert res.exact and res.value == pytest.approx(res.lower, rel=1e-12)
        s = np.sign(rng.standard_normal((256, d)))
        assert res.value >= float(np.abs(a @ s.T).sum(axis=0).max())


def test_jacobian_norms_per_pattern_equal_the_direct_ones() -> None:
    """Memoised per activation pattern (every call, also the second), as computed point by point."""
    from privcore.lipschitz.bounds import jacobian_norms
    from privcore.lipschitz.network import ReluNetwork

    rng = np.random.default_rng(5)
    ws = [rng.standard_normal((6, 20)), rng.standard_normal((5, 6)), rng.standard_normal((20, 5))]
    net = ReluNetwork.from_arrays(ws, [rng.standard_normal(w.shape[0]) for w in ws])
    pts = rng.standard_normal((64, 20))
    direct = Norms().of(net.jacobians(pts))
    for _ in range(2):
        vals, ok = jacobian_norms(net, pts, Norms())
        assert np.allclose(vals, direct, rtol=1e-12) and ok.all()
