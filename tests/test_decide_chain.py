"""The decision chain (privcore.lipschitz.decide): every named step, run alone, agrees with the plain
LipMIP optimum whenever it answers, on random nets at 0.97·L and 1.03·L; the whole chain does too."""

from __future__ import annotations

import numpy as np
import pytest

from privcore.errors import CertificationError
from privcore.lipschitz import decide_exact
from privcore.lipschitz.decide import STEPS, How
from tests._nets import mip_value, random_net

# (seed, widths, radius): one-region boxes, paper-size boxes, a net whose every pattern is realised
# (global_patterns answers), nets too wide to enumerate (split answers)
CASES = [
    (1, (4, 8, 8, 3), 0.05),
    (2, (4, 8, 8, 3), 0.5),
    (3, (3, 10, 3), 1.0),
    (4, (4, 12, 12, 3), 0.5),
    (5, (3, 6, 3), 50.0),
    (6, (4, 20, 20, 3), 0.3),
    (7, (2, 2, 2), 100.0),
    (10, (6, 40, 4), 0.3),
]


@pytest.mark.parametrize(("seed", "dims", "radius"), CASES)
def test_each_step_alone_agrees_with_the_milp_reference(seed, dims, radius) -> None:
    net = random_net(seed, dims)
    center = np.random.default_rng(seed).standard_normal(dims[0])
    value = mip_value(net, center, radius)
    answered: dict[str, set[bool]] = {}
    for factor in (0.97, 1.03):
        tau = value * factor
        whole = decide_exact(net, center, radius, tau)
        assert whole.passed == (factor > 1) and isinstance(whole.how, How)
        assert whole.lower <= value * (1 + 1e-9) and whole.upper >= value * (1 - 1e-9)
        for name, _ in STEPS:
            try:
                dec = decide_exact(net, center, radius, tau, steps=(name,), solver="gurobi")
            except CertificationError:
                continue  # this step alone does not settle it
            assert dec.passed == (factor > 1), (name, factor, dec)
            assert dec.upper >= value * (1 - 1e-9) and dec.lower <= value * (1 + 1e-9), (name, dec)
            answered.setdefault(name, set()).add(dec.passed)
    assert "milp" in answered and answered["milp"] == {True, False}  # the complete step always answers


def test_steps_are_named_and_checked() -> None:
    net = random_net(0, (3, 5, 2))
    center = np.zeros(3)
    names = [name for name, _ in STEPS]
    assert names[0] == "interval" and names[-1] == "milp" and len(set(names)) == len(names)
    with pytest.raises(ValueError, match="steps: unknown step"):
        decide_exact(net, center, 0.1, 1.0, steps=("interval", "magic"))
    with pytest.raises(TypeError, match="steps must be a sequence"):
        decide_exact(net, center, 0.1, 1.0, steps="interval")
    with pytest.raises(ValueError, match="threshold"):
        decide_exact(net, center, 0.1, float("nan"))
    # the interval step alone cannot fail a ball: below its bound nothing is decided
    with pytest.raises(CertificationError, match="none of the steps"):
        decide_exact(net, center, 0.1, 0.0, steps=("interval",))


def test_the_time_limit_bounds_the_whole_decision(monkeypatch) -> None:
    """``time_limit`` is the decision's budget: each solver call gets what is left of it, so a call
    made later gets less by at least the time spent in between."""
    import time

    import privcore.lipschitz.decide as decide

    calls: list[tuple[float, float]] = []
    real_solve = decide.solve

    def spy(milp, **kw):
        calls.append((time.perf_counter(), kw["time_limit"]))
        return real_solve(milp, **kw)

    monkeypatch.setattr(decide, "solve", spy)
    net = random_net(6, (4, 20, 20, 3))
    center = np.random.default_rng(6).standard_normal(4)
    limit = 30.0
    value = mip_value(net, center, 0.3)
    dec = decide_exact(net, center, 0.3, value * 0.97, steps=("lp", "lp_tightened", "milp"), time_limit=limit)
    assert not dec.passed and len(calls) >= 2  # the LP relaxation, then the MILP
    first = calls[0][0]
    for at, given in calls:
        assert 0 < given <= limit
        assert given + (at - first) <= limit + 1e-9


def test_a_threshold_inside_the_milp_tolerance_is_never_guessed(monkeypatch) -> None:
    """A MILP solved to optimality whose proven bound is above τ, with no point above τ confirmed in
    float64 (the incumbent within the solver's tolerance of τ), decides nothing: a guessed fail
    could break φ's stability |φ(z) − φ(z')| ≤ R + ζ. It raises, as a time-out does."""
    import privcore.lipschitz.decide as decide
    from privcore.lipschitz.backends import SolveResult

    net = random_net(6, (4, 8, 3))
    center = np.random.default_rng(6).standard_normal(4)
    tau = mip_value(net, center, 0.3)

    def tie(milp, **kw):  # proven bound just above τ, incumbent just below: a tie within tolerance
        return SolveResult(status="optimal", upper=tau * (1 + 1e-10), lower=tau * (1 - 1e-10), solution=None,
                           seconds=0.0, solver="stub")

    monkeypatch.setattr(decide, "solve", tie)
    with pytest.raises(CertificationError, match="within the MILP's tolerance"):
        decide_exact(net, center, 0.3, tau, steps=("milp",))
