"""The lazy pattern search and the engine/MILP portfolio against brute force on tiny nets."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from privcore.lipschitz import lazy_patterns, local_lipschitz, portfolio, portfolio_lipschitz
from privcore.lipschitz.deadline import cancel_on, check_deadline
from privcore.lipschitz.sign_norm import inf_to_one_bnb
from tests._nets import random_net
from tests._reference import brute_force_lipschitz

_CASES = [(11, (4, 6, 3), 0.3), (12, (3, 5, 4, 2), 0.5), (13, (5, 7, 4), 0.2), (14, (4, 8, 5), 1.0)]


def test_the_cheap_sign_norm_bound_is_above_every_norm() -> None:
    """min(Σ|a|, √(md)·σ_max) ≥ ‖A‖_{∞→1} (exact by branch and bound), also for low-rank and zero
    matrices, and within √(md) of it."""
    rng = np.random.default_rng(5)
    mats = [rng.standard_normal((m, d)) for m, d in ((3, 4), (7, 5), (12, 12), (20, 22))]
    mats += [rng.standard_normal((15, 2)) @ rng.standard_normal((2, 15)), np.zeros((4, 6))]
    bound = [lazy_patterns.sign_norm_bound(a[None])[0] for a in mats]
    for a, b in zip(mats, bound, strict=True):
        exact = inf_to_one_bnb(a)
        assert exact.exact and b >= exact.value
        assert b <= np.sqrt(a.size) * exact.value + 1e-300


@pytest.mark.parametrize(("seed", "dims", "radius"), _CASES)
def test_the_lazy_search_is_brute_force(monkeypatch: pytest.MonkeyPatch, seed: int, dims: tuple[int, ...],
                                        radius: float) -> None:
    """With every ∞→1 norm taken as wide, the engine answers by the lazy search, and its value is the
    brute-force maximum over realised patterns."""
    monkeypatch.setattr(lazy_patterns, "MAX_ENUMERATED_SIGN_DIM", 0)
    calls = []
    real = lazy_patterns.lazy_pattern_value

    def spy(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    import privcore.lipschitz.engine as engine

    monkeypatch.setattr(engine, "lazy_pattern_value", spy)
    net = random_net(seed, dims)
    center = np.random.default_rng(seed).standard_normal(dims[0])
    truth = brute_force_lipschitz(net, center, radius)
    cert = local_lipschitz(net, center, radius, threads=1)
    if cert.solver != "closed-form":
        assert calls and cert.solver == "enumeration"
    assert cert.exact and cert.upper == pytest.approx(truth, rel=1e-9)
    assert cert.lower <= cert.upper


@pytest.mark.parametrize("engine_first", [True, False])
def test_the_portfolio_in_either_order_is_brute_force(monkeypatch: pytest.MonkeyPatch,
                                                      engine_first: bool) -> None:
    """Whichever peer the prediction puts first, the answer is exact and the brute-force value."""
    real = portfolio.predict_costs

    def forced(ball):
        est = real(ball)
        lo, hi = sorted((est.engine, est.milp))
        engine, milp = (lo, hi) if engine_first else (hi, lo)
        return portfolio.CostEstimate(engine=engine, milp=milp, patterns=est.patterns,
                                      norm_seconds=est.norm_seconds, binaries=est.binaries)

    monkeypatch.setattr(portfolio, "predict_costs", forced)
    for seed, dims, radius in _CASES:
        net = random_net(seed, dims)
        center = np.random.default_rng(seed).standard_normal(dims[0])
        cert = portfolio_lipschitz(net, center, radius, time_limit=60, race=False)
        truth = brute_force_lipschitz(net, center, radius)
        assert cert.exact and cert.upper == pytest.approx(truth, rel=1e-6)
        if cert.solver != "closed-form":
            assert (cert.solver == "enumeration") == engine_first


def test_a_portfolio_out_of_time_brackets_the_value() -> None:
    """A tiny limit: not exact, and the bracket holds the brute-force value."""
    seed, dims, radius = _CASES[3]
    net = random_net(seed, dims)
    center = np.random.default_rng(seed).standard_normal(dims[0])
    truth = brute_force_lipschitz(net, center, radius)
    cert = portfolio_lipschitz(net, center, radius, time_limit=1e-4, race=False)
    assert not cert.exact and cert.status == "time_limit"
    assert cert.lower <= truth * (1 + 1e-9) and cert.upper >= truth * (1 - 1e-9)


def test_a_cancelled_search_stops_at_its_next_check() -> None:
    stop = threading.Event()
    with cancel_on(stop):
        check_deadline("the test")
        stop.set()
        with pytest.raises(Exception, match="another peer answered first"):
            check_deadline("the test")
    check_deadline("the test")  # outside the block the event is not seen


def test_a_race_the_milp_wins_stops_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The MILP in its own process answers first; the engine here, stuck until cancelled, is stopped,
    and the answer is the MILP's exact value (brute force), checked against this query."""
    seed, dims, radius = _CASES[0]
    net = random_net(seed, dims)
    center = np.random.default_rng(seed).standard_normal(dims[0])
    stuck = []

    def engine_never_done(*args, **kw):
        import time

        while True:  # until the MILP's answer sets the event the portfolio passed in
            try:
                check_deadline("the stuck engine")
            except Exception:
                stuck.append(1)
                return local_lipschitz(*args, **{**kw, "time_limit": 1e-4})
            time.sleep(0.01)

    monkeypatch.setattr(portfolio, "local_lipschitz", engine_never_done)
    cert = portfolio_lipschitz(net, center, radius, time_limit=120, race=True)
    assert stuck, "the engine was not stopped"
    assert cert.exact and cert.solver in ("gurobi", "highs")
    assert cert.upper == pytest.approx(brute_force_lipschitz(net, center, radius), rel=1e-6)


def test_a_race_the_engine_wins_is_brute_force() -> None:
    seed, dims, radius = _CASES[1]
    net = random_net(seed, dims)
    center = np.random.default_rng(seed).standard_normal(dims[0])
    cert = portfolio_lipschitz(net, center, radius, time_limit=120, race=True)
    assert cert.exact and cert.upper == pytest.approx(brute_force_lipschitz(net, center, radius), rel=1e-6)


def test_a_worker_answer_for_another_query_is_refused() -> None:
    """The spawned peer's certificate counts only for this model, radius and norms."""
    from dataclasses import asdict

    from privcore.lipschitz.ball import Ball

    seed, dims, radius = _CASES[0]
    net = random_net(seed, dims)
    center = np.random.default_rng(seed).standard_normal(dims[0])
    cert = local_lipschitz(net, center, radius, threads=1)
    ball = Ball.of(net, center, radius)
    raw = asdict(cert)
    raw["argmax"] = None

    import json

    assert portfolio._from_worker(json.dumps(raw).encode(), ball) is not None
    other = Ball.of(net, center, radius / 2)
    assert portfolio._from_worker(json.dumps(raw).encode(), other) is None
    assert portfolio._from_worker(b"not json", ball) is None


def test_the_certifier_values_come_from_the_portfolio_and_are_brute_force(monkeypatch: pytest.MonkeyPatch
                                                                            ) -> None:
    """An exact Certifier with a time limit asks the portfolio (never racing) for its values, which are the
    brute-force L; without a time limit, or another kind, it asks the engine alone."""
    import privcore.lipschitz.certifier as certifier_module
    from privcore.lipschitz import Certifier

    calls: list[dict] = []
    real = certifier_module.portfolio_lipschitz

    def spy(*args, **kw):
        calls.append(kw)
        return real(*args, **kw)

    monkeypatch.setattr(certifier_module, "portfolio_lipschitz", spy)
    for seed, dims, radius in _CASES:
        net = random_net(seed, dims)
        center = np.random.default_rng(seed).standard_normal(dims[0])
        truth = brute_force_lipschitz(net, center, radius)
        value = Certifier(kind="exact", time_limit=60, threads=1)(net, center, radius)
        assert value == pytest.approx(truth, rel=1e-6) and value >= truth * (1 - 1e-9)
    assert len(calls) == len(_CASES) and all(kw["race"] is False for kw in calls)
    seed, dims, radius = _CASES[0]
    net, center = random_net(seed, dims), np.random.default_rng(seed).standard_normal(dims[0])
    Certifier(kind="exact", time_limit=None)(net, center, radius)
    Certifier(kind="lp", time_limit=60)(net, center, radius)
    Certifier(kind="exact", solver="highs", time_limit=60)(net, center, radius)
    assert len(calls) == len(_CASES)


def test_the_certifier_answers_where_only_the_milp_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine predicted first but never finishing (its every call out of time): the Certifier's value is
    still exact, from the MILP, and the brute-force L."""
    from privcore.lipschitz import Certifier

    real = portfolio.local_lipschitz

    def engine_never_done(*args, **kw):
        if kw.get("solver") == "auto":
            return real(*args, **{**kw, "time_limit": 1e-6})
        return real(*args, **kw)

    def engine_first(ball):
        return portfolio.CostEstimate(engine=0.0, milp=1.0, patterns=1, norm_seconds=0.0, binaries=1)

    monkeypatch.setattr(portfolio, "local_lipschitz", engine_never_done)
    monkeypatch.setattr(portfolio, "predict_costs", engine_first)
    seed, dims, radius = _CASES[1]
    net = random_net(seed, dims)
    center = np.random.default_rng(seed).standard_normal(dims[0])
    cert = Certifier(kind="exact", time_limit=60, threads=1).certify(net, center, radius)
    assert cert.exact and cert.solver in ("gurobi", "highs")
    assert cert.upper == pytest.approx(brute_force_lipschitz(net, center, radius), rel=1e-6)
