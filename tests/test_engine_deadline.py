"""A query's time limit holds on the engine's own searches too (pattern tables, the ∞→1 branch and
bound, region LPs), and running out of it decides and releases nothing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privcore.errors import CertificationError
from privcore.lipschitz import Certifier, as_network, local_lipschitz, sampled_lower_bound
from privcore.lipschitz.deadline import TimeLimitReached, check_deadline, deadline_after, seconds_left
from privcore.lipschitz.decide import decide_exact
from privcore.mechanisms.ptr import propose_test_release
from privcore.nets.blocks import relu_mlp

#: a d = 28 Fig. 4 net: its exact value is the pattern enumeration's (seconds of ∞→1 searches)
_D = 28


def _wide_query() -> tuple[torch.nn.Module, np.ndarray]:
    torch.manual_seed(_D)
    module = relu_mlp((_D, 10, _D)).double()
    return module, np.random.default_rng(_D).standard_normal(_D)


def test_deadlines_nest_and_fire_only_when_set() -> None:
    check_deadline("nothing")  # no deadline: never raises
    assert seconds_left() is None
    with deadline_after(100.0):
        left = seconds_left()
        assert left is not None and 0 < left <= 100.0
        with deadline_after(-1.0):  # the earlier deadline wins inside
            with pytest.raises(TimeLimitReached, match="time limit was reached during the test"):
                check_deadline("the test")
        with deadline_after(1000.0):  # a later one does not extend the outer
            assert seconds_left() <= 100.0
        check_deadline("the test")
    assert seconds_left() is None


def test_a_tiny_time_limit_on_a_wide_enumeration_is_a_time_out() -> None:
    """The engine's pattern enumeration stops at the limit: ``exact=False``, status ``time_limit``,
    and a bracket that still holds (``upper`` the certified interval bound)."""
    module, z = _wide_query()
    net = as_network(module)
    cert = local_lipschitz(net, z, 0.2, solver="auto", time_limit=0.05, threads=1)
    assert not cert.exact and cert.status == "time_limit" and cert.solver == "enumeration"
    witness = sampled_lower_bound(net, z, 0.2).value
    assert cert.lower <= witness <= cert.upper


def test_a_time_out_in_the_engine_releases_nothing() -> None:
    """The same limit through the PTR oracle: its value raises, a decision raises, and PTR lets the
    error through, so nothing is released."""
    module, z = _wide_query()
    net = as_network(module)
    tau = 1.01 * sampled_lower_bound(net, z, 0.2).value  # above every witness, below the interval bound
    oracle = Certifier(kind="exact", time_limit=0.05, threads=1)
    with pytest.raises(CertificationError, match="not completed"):
        oracle(net, z, 0.2)
    with pytest.raises(CertificationError, match="time limit was reached during"):
        decide_exact(net, z, 0.2, tau, time_limit=0.05, threads=1)
    with pytest.raises(CertificationError):
        propose_test_release(module, z, epsilon=1.0, delta=0.05, radius=0.2, delta_p=tau, r_max=0.4, tol=0.1,
                             lipschitz=oracle, rng=0)


def test_an_enumeration_bracket_closed_to_rounding_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two realised patterns tied up to rounding (or an ∞→1 search ended within its tie tolerance) give
    a bracket 1e-15 wide: exact, ``upper`` its certified end; a wider bracket is not exact."""
    import dataclasses

    import privcore.lipschitz.engine as engine
    from tests._nets import random_net

    net = random_net(11, (4, 6, 3))
    center = np.random.default_rng(11).standard_normal(4)
    real = engine.pattern_value
    for gap, exact in ((1e-15, True), (1e-9, False)):
        def widened(*args, _gap=gap, **kw):
            pv = real(*args, **kw)
            return dataclasses.replace(pv, value=pv.value * (1 + _gap), upper=pv.value * (1 + _gap))

        monkeypatch.setattr(engine, "pattern_value", widened)
        cert = local_lipschitz(net, center, 0.3, threads=1)
        assert cert.solver == "enumeration" and cert.exact is exact
        assert cert.status == ("optimal" if exact else "node-limit") and cert.lower < cert.upper


def test_a_time_out_in_the_milp_keeps_the_split_steps_bracket(monkeypatch: pytest.MonkeyPatch) -> None:
    """The split step stops open (one sub-box) and the limit runs out in the MILP's own steps: the value is
    not exact, and its bracket is the split step's, certified (it holds the brute-force L), tighter than
    the interval bound the engine falls back to without it."""
    import privcore.lipschitz.engine as engine
    import privcore.lipschitz.splitting as splitting
    from tests._nets import random_net
    from tests._reference import brute_force_lipschitz

    real_split = splitting.split_value

    def one_box(*args, **kw):
        return real_split(*args, **{**kw, "max_boxes": 1})

    def out_of_time(*args, **kw):
        raise TimeLimitReached("the test")

    monkeypatch.setattr(splitting, "split_value", one_box)
    monkeypatch.setattr(engine, "pattern_value", lambda *args, **kw: None)
    monkeypatch.setattr(engine, "lazy_applies", lambda *args, **kw: False)
    monkeypatch.setattr(engine, "_milp_certificate", out_of_time)
    net = random_net(20, (4, 7, 7, 3))  # its root sub-box alone leaves the split step open
    center = np.random.default_rng(20).standard_normal(4)
    truth = brute_force_lipschitz(net, center, 1.5)
    cert = local_lipschitz(net, center, 1.5, time_limit=30, threads=1)
    assert not cert.exact and cert.status == "time_limit" and cert.solver == "split"
    assert 0 < cert.lower <= truth * (1 + 1e-9) and truth <= cert.upper * (1 + 1e-9)
    assert cert.upper < engine.Ball.of(net, center, 1.5).interval  # tighter than the fallback
