"""The closed-form pre-activation ranges of the split search's nodes (privcore.lipschitz.halfspace):
certified against sampled feasible points, exact for one cut (scipy's LP), never looser than the box."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from privcore.lipschitz.halfspace import halfspace_range


def _feasible(rng: np.random.Generator, G: np.ndarray, h: np.ndarray, lo: np.ndarray, hi: np.ndarray
              ) -> np.ndarray:
    pts = lo + (hi - lo) * rng.random((20_000, lo.size))
    vertices = np.where(rng.random((4_000, lo.size)) < 0.5, lo, hi)
    pts = np.vstack([pts, vertices])
    return pts[np.all(pts @ G.T <= h, axis=1)]


def test_ranges_contain_every_feasible_point_and_one_cut_is_exact() -> None:
    rng = np.random.default_rng(23)
    checked = 0
    for trial in range(40):
        d = int(rng.integers(2, 6))
        lo = rng.standard_normal(d) - 1.0
        hi = lo + rng.random(d) * 2.0 + 0.1
        n_cuts = 1 if trial % 2 == 0 else int(rng.integers(2, 5))
        G = rng.standard_normal((n_cuts, d))
        h = G @ (lo + (hi - lo) * rng.random(d)) + rng.random(n_cuts) * 0.3
        P, p0 = rng.standard_normal((4, d)), rng.standard_normal(4)
        low, up = halfspace_range(G, h, lo, hi, P, p0)
        box_low = p0 + np.minimum(P * lo, P * hi).sum(axis=1)
        box_up = p0 + np.maximum(P * lo, P * hi).sum(axis=1)
        assert np.all(low >= box_low - 1e-6) and np.all(up <= box_up + 1e-6)
        inside = _feasible(rng, G, h, lo, hi)
        vals = inside @ P.T + p0
        assert np.all(vals >= low[None]) and np.all(vals <= up[None])
        if n_cuts == 1:
            bounds = list(zip(lo, hi, strict=True))
            for j in range(4):
                best = [linprog(s * P[j], A_ub=G, b_ub=h, bounds=bounds).fun for s in (1.0, -1.0)]
                assert abs(low[j] - (best[0] + p0[j])) <= 1e-6 and abs(up[j] - (p0[j] - best[1])) <= 1e-6
        checked += 1
    assert checked == 40


def test_a_cut_that_misses_the_box_empties_the_set() -> None:
    lo, hi = -np.ones(2), np.ones(2)
    G, h = np.array([[1.0, 1.0]]), np.array([-2.5])  # x + y ≤ -2.5 misses [-1, 1]²
    assert halfspace_range(G, h, lo, hi, np.eye(2), np.zeros(2)) is None
    touching = halfspace_range(G, np.array([-2.0]), lo, hi, np.eye(2), np.zeros(2))  # one corner
    assert touching is not None
    low, up = touching
    assert np.allclose(low, -1.0) and np.allclose(up, -1.0, atol=1e-6)


def test_no_cut_is_the_interval_bound() -> None:
    lo, hi = np.array([-1.0, 0.5]), np.array([2.0, 1.0])
    P, p0 = np.array([[1.0, -2.0]]), np.array([0.25])
    low, up = halfspace_range(np.zeros((0, 2)), np.zeros(0), lo, hi, P, p0)
    assert abs(low[0] - (0.25 - 1.0 - 2.0)) < 1e-8 and abs(up[0] - (0.25 + 2.0 - 1.0)) < 1e-8
