"""Trade-offs over the total ε: curves of live readings, and the solver's smallest ε with its interval,
checked by brute force on a dense grid, with the monotonicity guard."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from privcore.errors import ParameterError
from privcore.mechanisms import Metric, accuracy_curve, accuracy_metric, registry, smallest_epsilon
from privcore.mechanisms.tradeoff import NOT_MONOTONE, REACHED, UNREACHABLE


def _synthetic(f, *, half: float = 0.02, increasing: bool = True) -> tuple[Metric, list[float]]:
    """A metric reading ``f(ε)`` ± ``half`` and the ε it was read at."""
    asked: list[float] = []

    def read(e: float) -> SimpleNamespace:
        asked.append(e)
        v = f(e)
        return SimpleNamespace(value=v, low=v - half, high=v + half, n=100)

    return Metric(name="m", read=read, increasing=increasing), asked


def _grid(lo: float, hi: float, steps: int) -> list[float]:
    return [lo * (hi / lo) ** (i / steps) if i < steps else hi for i in range(steps + 1)]


def test_bisection_agrees_with_the_dense_grid_on_a_monotone_metric() -> None:
    def f(e: float) -> float:
        return 1 - math.exp(-e / 5)

    metric, asked = _synthetic(f)
    c = smallest_epsilon(metric, 0.8, eps_min=0.1, eps_max=100.0, steps=256)
    grid = _grid(0.1, 100.0, 256)
    first = next(e for e in grid if f(e) >= 0.8)  # brute force over every grid point
    assert c.status == REACHED and c.epsilon == pytest.approx(first)
    assert c.low == pytest.approx(next(e for e in grid if f(e) + 0.02 >= 0.8))
    assert c.high == pytest.approx(next(e for e in grid if f(e) - 0.02 >= 0.8))
    assert c.low < c.epsilon < c.high and c.at.value >= 0.8 and c.at.n == 100
    assert len(set(asked)) < 30  # three bisections of 256 intervals, sharing readings
    assert "from total ε = " in c.text() and "n = 100" in c.text()


def test_a_metric_that_falls_with_epsilon_and_the_ends_of_the_range() -> None:
    metric, _ = _synthetic(lambda e: 1 / e, increasing=False)  # e.g. an attacker's ℓ2 error
    c = smallest_epsilon(metric, 0.1, eps_min=0.1, eps_max=100.0)
    assert c.status == REACHED and c.epsilon == pytest.approx(10.0, rel=0.02) and c.relation == "≤"
    assert smallest_epsilon(metric, 20.0, eps_min=0.1).epsilon == pytest.approx(0.1)  # reached at ε_min
    c = smallest_epsilon(metric, 1e-3, eps_min=0.1, eps_max=100.0)
    assert c.status == UNREACHABLE and c.epsilon is None and c.at.epsilon == 100.0
    assert "Not reachable within ε ∈ [0.1, 100]" in c.text()


def test_readings_that_contradict_monotonicity_name_no_epsilon() -> None:
    metric, _ = _synthetic(lambda e: 0.9 if e < 1 else (0.2 if e < 30 else 0.95))
    c = smallest_epsilon(metric, 0.5, eps_min=0.1, eps_max=100.0)
    assert c.status == NOT_MONOTONE and c.epsilon is None
    earlier, later = c.violation
    assert earlier.epsilon < later.epsilon and later.high < earlier.low
    assert "not monotone" in c.text()


def test_parameters_are_checked() -> None:
    metric, _ = _synthetic(lambda e: e)
    with pytest.raises(ParameterError, match="eps_min"):
        smallest_epsilon(metric, 0.5, eps_min=0.0)
    with pytest.raises(ParameterError, match="eps_max"):
        smallest_epsilon(metric, 0.5, eps_min=1.0, eps_max=0.5)
    with pytest.raises(ValueError, match="bound"):
        smallest_epsilon(metric, math.nan)


def test_live_solver_on_the_global_mechanism_matches_a_dense_grid() -> None:
    """Global on digits, fixed seed: every grid point read (brute force). The live readings are noisy,
    so the first crossing on the grid need not be the only one: bisection must return a grid ε whose
    reading reaches the target right after one that does not, between the first and the last crossing."""
    mech = registry.get("Global")
    target = mech.load(dataset="digits", model=None, models_dir=None)
    setting = mech.setting(epsilon=1.0)
    metric = accuracy_metric(mech, target, setting, dataset="digits", model="default", n=200, seed=3)
    steps, bound = 32, 0.6
    grid = _grid(0.1, 100.0, steps)
    values = [metric.at(e).value for e in grid]
    assert values[-1] >= bound > values[0]
    c = smallest_epsilon(metric, bound, eps_min=0.1, eps_max=100.0, steps=steps)
    assert c.status == REACHED
    i = grid.index(c.epsilon)
    assert values[i] >= bound > values[i - 1]
    first = next(k for k, v in enumerate(values) if v >= bound)
    last = max(k for k, v in enumerate(values) if v < bound)
    assert first <= i <= last + 1 and c.low <= c.epsilon and (c.high is None or c.epsilon <= c.high)
    curve = accuracy_curve(mech, target, setting, epsilons=[10.0, 1.0, 0.1], dataset="digits",
                           model="default", n=200, seed=3)
    assert [p.epsilon for p in curve.points] == [0.1, 1.0, 10.0]
    assert all(p.n == 200 and p.draws == 3 and p.low <= p.value <= p.high for p in curve.points)



def test_attack_metric_reads_the_live_attack_and_names_a_missing_attacker() -> None:
    """The attacker's ℓ2 error as a solver metric: it falls with ε on MNIST's default model (far outside
    the intervals over 100 images), and a mechanism no attacker reads raises ValueError naming why."""
    from privcore.defaults import default_model
    from privcore.mechanisms import attack_metric
    from privcore.mechanisms.posthoc import load_pipeline_cached
    from privcore.models.catalogue import default_models_dir

    mech = registry.get("Global")
    model = default_model("mnist")
    pipe = load_pipeline_cached("mnist", model, str(default_models_dir()))
    metric = attack_metric(mech, pipe, mech.setting(epsilon=1.0), dataset="mnist", model=model, metric="l2",
                           n=100, draws=1)
    assert metric.increasing is False
    noisy, clear = metric.at(0.1), metric.at(100.0)
    assert noisy.n == 100 and clear.low <= clear.value <= clear.high
    assert clear.high < noisy.low
    ip = registry.get("Gauss-Output")
    target = ip.load(dataset="mnist", model=None, models_dir=str(default_models_dir()))
    blind = attack_metric(ip, target, ip.setting(epsilon=1.0, alpha=0.1), dataset="mnist", model="ip", n=10)
    with pytest.raises(ValueError, match="no attacker"):
        blind.at(1.0)
    with pytest.raises(ValueError, match="metric must be one of"):
        attack_metric(mech, pipe, mech.setting(epsilon=1.0), dataset="mnist", model=model, metric="mse")
