"""The two-layer pattern branch and bound with chord relaxations (pattern_bilinear, issue 31).

Decisions against brute force over every activation pattern (tiny nets, every norm pair, neurons fixed
on/off), against the one-layer branch and bound on a wider net, and the budget's open bound: finite and
never below the exact maximum."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms, operator_norm
from privcore.lipschitz.pattern_bilinear import bilinear_pattern_decide
from privcore.lipschitz.pattern_bnb import max_pattern_norm
from privcore.lipschitz.patterns import global_pattern_table

NORMS = (("linf", "l1"), ("l1", "l1"), ("linf", "linf"), ("l1", "linf"))


def random_net(rng: np.random.Generator, dims: list[int], zeros: bool = False) -> ReluNetwork:
    ws = [rng.standard_normal((dims[i + 1], dims[i])) / math.sqrt(dims[i]) for i in range(len(dims) - 1)]
    if zeros:  # exact zeros: rows whose range is a point, ties at 0
        ws[1][rng.random(ws[1].shape) < 0.3] = 0.0
    bs = [0.3 * rng.standard_normal(dims[i + 1]) for i in range(len(dims) - 1)]
    return ReluNetwork.from_arrays(ws, bs)


def pattern_norm(net: ReluNetwork, pattern: np.ndarray, norms: Norms) -> float:
    layers = [d.astype(float) for d in net.split_pattern(pattern)]
    jac = net.jacobians(np.zeros((1, net.in_dim)), layers)[0]
    return float(operator_norm(jac, **norms.kwargs))


def _truth(net: ReluNetwork, norms: Norms, on: np.ndarray | None, off: np.ndarray | None) -> float:
    table = global_pattern_table(net, norms)
    bits = (table.codes[:, None] >> np.arange(net.n_hidden)) & 1
    allowed = np.ones(len(table.codes), dtype=bool)
    if on is not None:
        allowed = (bits[:, on] == 1).all(axis=1) & (bits[:, off] == 0).all(axis=1)
    return float(table.norms[allowed].max())


@pytest.mark.parametrize("seed", range(16))
def test_decisions_match_brute_force(seed: int) -> None:
    """Above the largest ‖J_D‖ over the allowed patterns the decision passes with a bound between the
    truth and the threshold; below it, it stops at a pattern whose norm is at least the value it reports."""
    rng = np.random.default_rng(seed)
    dims = [int(rng.integers(lo, hi)) for lo, hi in ((1, 6), (1, 7), (1, 7), (1, 5))]
    net = random_net(rng, dims, zeros=seed % 4 == 0)
    n = net.n_hidden
    for pair in NORMS:
        norms = Norms(input=pair[0], output=pair[1])
        on = rng.random(n) < 0.2
        off = (rng.random(n) < 0.2) & ~on
        for fix_on, fix_off in ((None, None), (on, off)):
            truth = _truth(net, norms, fix_on, fix_off)
            above = truth * (1 + 1e-6) + 1e-6
            res = bilinear_pattern_decide(net, above, norms, on=fix_on, off=fix_off)
            assert res.complete and truth <= res.upper <= above, (pair, truth, res)
            for below in (truth * (1 - 1e-6) - 1e-9, truth / 3):
                if below <= 0:
                    continue
                res = bilinear_pattern_decide(net, below, norms, on=fix_on, off=fix_off)
                assert res.upper == math.inf and res.complete, (pair, truth, below, res)
                assert res.lower <= truth * (1 + 1e-12) + 1e-12
                if fix_on is not None:
                    assert res.pattern[fix_on].all() and not res.pattern[fix_off].any()
                assert pattern_norm(net, res.pattern, norms) >= res.lower * (1 - 1e-12) - 1e-12


@pytest.mark.parametrize("budget", [1, 10, 100])
def test_out_of_budget_the_open_bound_is_finite_and_above_the_truth(budget: int) -> None:
    rng = np.random.default_rng(5)
    net = random_net(rng, [4, 6, 6, 3])
    norms = Norms()
    truth = _truth(net, norms, None, None)
    res = bilinear_pattern_decide(net, truth / 4, norms, max_nodes=budget)
    if res.complete:  # a small budget may still meet a pattern above truth / 4 first
        assert res.upper == math.inf and res.lower > truth / 4
    else:
        assert math.isfinite(res.upper) and res.upper >= truth
    late = bilinear_pattern_decide(net, truth / 4, norms, deadline=time.perf_counter() - 1.0)
    assert not late.complete and truth <= late.upper < math.inf


def test_agrees_with_the_one_layer_search_on_a_wider_net() -> None:
    """8→24→24→4 (2^48 patterns): the exact G of :func:`max_pattern_norm` decides the same way."""
    rng = np.random.default_rng(7)
    net = random_net(rng, [8, 24, 24, 4])
    g = max_pattern_norm(net)
    assert g.complete
    norms = Norms()
    ok = bilinear_pattern_decide(net, g.upper * (1 + 1e-6), norms)
    assert ok.complete and g.lower <= ok.upper <= g.upper * (1 + 1e-6)
    bad = bilinear_pattern_decide(net, g.lower * (1 - 1e-6), norms)
    assert bad.upper == math.inf and g.lower * (1 - 1e-6) < bad.lower <= g.upper


def test_other_depths_and_too_many_pairs_are_none() -> None:
    rng = np.random.default_rng(0)
    norms = Norms()
    assert bilinear_pattern_decide(random_net(rng, [3, 4, 2]), 1.0, norms) is None
    assert bilinear_pattern_decide(random_net(rng, [3, 4, 4, 4, 2]), 1.0, norms) is None
    assert bilinear_pattern_decide(random_net(rng, [20, 4, 4, 12]), 1.0, norms) is None  # 2^19 · 2^12 pairs


def test_bad_arguments() -> None:
    net = random_net(np.random.default_rng(0), [3, 4, 4, 2])
    with pytest.raises(ValueError, match="disjoint boolean masks over the 8 hidden neurons"):
        bilinear_pattern_decide(net, 1.0, Norms(), on=np.ones(8, bool), off=np.ones(8, bool))
    with pytest.raises(ValueError, match="threshold must be a real number"):
        bilinear_pattern_decide(net, float("nan"), Norms())
    with pytest.raises(ValueError, match="max_nodes"):
        bilinear_pattern_decide(net, 1.0, Norms(), max_nodes=0)
