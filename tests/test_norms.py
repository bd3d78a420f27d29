"""`Norms`: the operator norm, its interval form and its dual vertices against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privcore.lipschitz.norms import MAX_ENUMERATED_SIGN_DIM, Norms

PAIRS = [Norms(input=i, output=o) for i in ("linf", "l1") for o in ("l1", "linf")]


def _unit_ball_vertices(norm: str, k: int) -> np.ndarray:
    if norm == "linf":
        return np.array(list(itertools.product((1.0, -1.0), repeat=k)))
    return np.vstack([np.eye(k), -np.eye(k)])


def _brute(norms: Norms, a: np.ndarray) -> float:
    """max ‖A s‖_q over the input ball's vertices s, with ‖y‖_q itself a maximum over its dual ball."""
    dual = "linf" if norms.output == "l1" else "l1"
    S = _unit_ball_vertices(norms.input, a.shape[1])
    C = _unit_ball_vertices(dual, a.shape[0])
    return float((C @ a @ S.T).max())


@pytest.mark.parametrize("norms", PAIRS, ids=lambda n: f"{n.input}->{n.output}")
def test_norm_and_dual_vertices_match_brute_force(norms: Norms) -> None:
    rng = np.random.default_rng(0)
    for m, d in ((1, 1), (2, 3), (4, 2), (3, 5)):
        a = rng.standard_normal((m, d))
        truth = _brute(norms, a)
        assert norms.of(a) == pytest.approx(truth, rel=1e-12)
        assert norms.upper(a) == pytest.approx(truth, rel=1e-12)
        S, C = norms.dual_vertices(d, m)
        assert float((C @ a @ S.T).max()) == pytest.approx(truth, rel=1e-12)
        assert norms.pair_count(d, m) == S.shape[0] * C.shape[0]
        stack = rng.standard_normal((5, m, d))
        assert np.allclose(norms.of(stack), [_brute(norms, x) for x in stack], rtol=1e-12)


@pytest.mark.parametrize("norms", PAIRS, ids=lambda n: f"{n.input}->{n.output}")
def test_interval_norm_is_the_maximum_over_the_interval(norms: Norms) -> None:
    """A norm is convex, so its maximum over an interval matrix is at one of its corner matrices."""
    rng = np.random.default_rng(1)
    for m, d in ((2, 2), (2, 3), (3, 2)):
        mid, rad = rng.standard_normal((m, d)), rng.uniform(0.0, 0.5, (m, d))
        signs = itertools.product((1.0, -1.0), repeat=m * d)
        corners = [mid + rad * np.array(s).reshape(m, d) for s in signs]
        truth = max(_brute(norms, c) for c in corners)
        assert norms.of_interval(mid, rad) == pytest.approx(truth, rel=1e-12)
        assert norms.of_interval(mid, np.zeros_like(rad)) == pytest.approx(norms.of(mid), rel=1e-12)


def test_past_the_sign_enumeration_the_norm_is_searched_not_refused() -> None:
    norms = Norms()
    a = np.random.default_rng(2).standard_normal((MAX_ENUMERATED_SIGN_DIM + 1, MAX_ENUMERATED_SIGN_DIM + 2))
    low, up = norms.bracket(a)
    assert low == up == norms.of(a) == norms.upper(a)
    s = np.sign(np.random.default_rng(3).standard_normal((64, a.shape[1])))
    sampled = float(np.abs(a @ s.T).sum(axis=0).max())  # ‖A s‖₁ ≤ ‖A‖_{∞→1}
    assert norms.of(a) >= sampled
    assert norms.of_interval(a, np.zeros_like(a)) == pytest.approx(norms.of(a), rel=1e-12)
    stack = np.stack([a, 2.0 * a])
    assert np.allclose(norms.of(stack), [norms.of(a), 2.0 * norms.of(a)], rtol=1e-12)


@pytest.mark.parametrize(("field", "value"), [("input", "l2"), ("output", "inf")])
def test_a_bad_norm_names_the_parameter(field: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"{field}_norm"):
        Norms(**{field: value})
    with pytest.raises(TypeError):
        Norms("linf", "l1")  # keyword-only
    assert Norms() == Norms(input="linf", output="l1") and hash(Norms()) == hash(Norms())
