"""The Trade-offs page's curves and solver: every mechanism of the registry on every shipped model of
the dataset, on the total-ε axis. View glue: the maths is :mod:`privcore.mechanisms.tradeoff`.

* :func:`pairs` — the (mechanism, model) pairs of a dataset: a posthoc mechanism on every obfuscator
  of the catalogue, any other on the model its :meth:`Mechanism.load` picks;
* :func:`line` — one pair's accuracy curve: live (:func:`privcore.mechanisms.accuracy_curve`, n test
  images × draws, 95 % intervals) for a mechanism that simulates its noise, else the committed table
  that measures it, labelled "measured (<table>)"; computed once per setting per server process;
* :func:`solve` — the smallest total ε reaching a target of a :data:`METRICS` entry, live, with its
  interval; for a mechanism read from a table, the smallest measured ε and the interpolated estimate,
  labelled as such (:func:`solve_soon`: the same in a background worker, for a page drawn meanwhile).
  Adding a metric (an attacker's SSIM) is one :class:`MetricSpec` in :data:`METRICS`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from privcore.errors import PrivcoreError
from privcore.mechanisms import (
    Crossing,
    Curve,
    Estimate,
    Mechanism,
    Metric,
    Setting,
    accuracy_curve,
    accuracy_metric,
    attack_metric,
    registry,
    smallest_epsilon,
)
from privlens import attack_view, live, pipelines
from privlens import mechanism_text as mt
from privlens.results import EpsilonSolution, load_results
from privlens.results import smallest_epsilon as measured_smallest_epsilon
from privlens.settings import EPSILON_GRID

__all__ = ["GRID", "METRICS", "Line", "MetricSpec", "Pair", "Solution", "frame", "line", "pairs", "solve",
           "solve_soon", "target"]

#: the total ε of every curve: the sidebar's grid and beyond it to the ε range's end
GRID: tuple[float, ...] = tuple(sorted({*EPSILON_GRID, 50.0, 100.0}))
#: the range the solver searches
SOLVER_RANGE = (min(EPSILON_GRID), 100.0)

Pair = tuple[str, str]  # (mechanism, model)


@dataclass(frozen=True, kw_only=True)
class MetricSpec:
    """A metric the solver answers targets for: ``name``, whether a target is a lower bound
    (``at_least``: accuracy) or an upper one (an attacker's SSIM at most 0.4), its ``default`` target,
    and ``make(mechanism, target, setting, dataset, model)`` → :class:`~privcore.mechanisms.Metric`."""

    name: str
    at_least: bool
    default: float
    make: Callable[..., Metric]


def _accuracy(mech: Mechanism, target: Any, setting: Setting, dataset: str, model: str) -> Metric:
    return accuracy_metric(mech, target, setting, dataset=dataset, model=model, n=mt.LIVE_IMAGES)


def _attack(metric: str) -> Callable[..., Metric]:
    def make(mech: Mechanism, target: Any, setting: Setting, dataset: str, model: str) -> Metric:
        return attack_metric(mech, target, setting, dataset=dataset, model=model, metric=metric,
                             n=attack_view.LIVE_IMAGES)

    return make


#: the metrics the solver answers for, by name: the accuracy kept, and what the model's scale-told
#: attacker rebuilds — its SSIM against the image (at most a target), its mean squared pixel error ℓ2
#: (at least a target: ℓ2 falls steadily with ε, where SSIM near the no-release baseline need not rise)
METRICS: dict[str, MetricSpec] = {
    "accuracy": MetricSpec(name="accuracy", at_least=True, default=0.9, make=_accuracy),
    "attacker's SSIM": MetricSpec(name="attacker's SSIM", at_least=False, default=0.4, make=_attack("ssim")),
    "attacker's ℓ2 error": MetricSpec(name="attacker's ℓ2 error", at_least=True, default=0.06,
                                      make=_attack("l2")),
}


def target(mech: Mechanism, dataset: str, model: str | None) -> Any:
    """What ``mech`` releases with for ``model`` (None: the one :meth:`Mechanism.load` picks): the
    process-wide pipeline of a posthoc mechanism, the loaded classifier of any other."""
    if mech.family == "posthoc" and model is not None:
        return pipelines.load(dataset, model, pipelines.models_dir())
    return mech.load(dataset=dataset, model=model, models_dir=pipelines.models_dir())


def model_name(mech: Mechanism, target_: Any, fallback: str) -> str:
    """The model a loaded target names (the posthoc pipeline's obfuscator, a classifier's name)."""
    inner = getattr(target_, "model", None)
    return str(getattr(inner, "name", fallback)) if mech.family != "posthoc" else fallback


def pairs(dataset: str) -> tuple[Pair, ...]:
    """Every (mechanism, model) of ``dataset``: each registered mechanism on each model it runs on."""
    return _pairs(dataset, pipelines.models_dir(), tuple(pipelines.catalogue().get(dataset, ())))


@functools.lru_cache(maxsize=16)
def _pairs(dataset: str, directory: str, obfuscators: tuple[str, ...]) -> tuple[Pair, ...]:
    out: list[Pair] = []
    for mech in registry.MECHANISMS:
        if mech.family == "posthoc":
            out += [(mech.name, m) for m in obfuscators]
            continue
        try:
            out.append((mech.name, model_name(mech, target(mech, dataset, None), "")))
        except (PrivcoreError, OSError, ValueError):
            continue  # no model shipped for it here
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class Line:
    """One pair's curve: ``source`` "live" or "measured (<table>)", the δ it was read at (None: not
    recorded) and ``note`` (why there is none, when ``curve`` is None)."""

    mechanism: str
    model: str
    curve: Curve | None
    source: str
    delta: float | None
    note: str = ""

    @property
    def is_live(self) -> bool:
        """Computed now from the mechanism's noise (not read from a table)."""
        return self.source == "live"


def frame(ln: Line) -> Any:
    """The line's points as a pandas DataFrame (the chart's CSV download): one row per ε."""
    import pandas as pd

    points = () if ln.curve is None else ln.curve.points
    return pd.DataFrame([{"mechanism": ln.mechanism, "model": ln.model, "source": ln.source,
                          "delta": ln.delta, "epsilon": p.epsilon, "accuracy": p.value, "low": p.low,
                          "high": p.high, "n": p.n, "draws": p.draws} for p in points])


def line(mech: Mechanism, model: str, setting: Setting, *, dataset: str) -> Line:
    """``mech``'s accuracy curve on ``model`` at ``setting``'s δ, R or α over :data:`GRID` (module
    docstring): live where the mechanism simulates, else its measuring table, else a note why none."""
    return _line(mech.name, model, _any_epsilon(setting), dataset, pipelines.models_dir())


def _any_epsilon(setting: Setting) -> Setting:
    """``setting`` without its ε (the curve and the solver cover every ε): one cache entry per δ, R, α."""
    return replace(setting, epsilon=1.0)


@functools.lru_cache(maxsize=512)
def _line(name: str, model: str, setting: Setting, dataset: str, directory: str) -> Line:
    mech = registry.get(name)
    try:
        loaded = target(mech, dataset, model)
        curve = accuracy_curve(mech, loaded, setting, epsilons=GRID, dataset=dataset, model=model,
                               n=mt.LIVE_IMAGES)
        return Line(mechanism=name, model=model, curve=curve, source="live", delta=setting.delta)
    except NotImplementedError:
        return _measured_line(mech, model, setting, dataset)
    except (PrivcoreError, OSError, ValueError) as exc:
        return Line(mechanism=name, model=model, curve=None, source="live", delta=setting.delta,
                    note=pipelines.public_text(exc, limit=200))


def _measured_line(mech: Mechanism, model: str, setting: Setting, dataset: str) -> Line:
    """The committed table measuring ``mech`` (its own ε column, turned into the total), each point with
    its 95 % Wilson interval over its n test images, at the δ nearest the setting's."""
    table = mt.measuring(mech)
    frame = None if table is None else load_results(dataset, table)
    source = f"measured ({table})"
    if frame is None or not {"obfuscator", "epsilon", "accuracy"} <= set(frame.columns):
        return Line(mechanism=mech.name, model=model, curve=None, source=source, delta=None,
                    note=f"{mech.label} does not simulate its noise and no table measures it here")
    eps = frame["epsilon"].astype(float)
    rows = frame[(frame["obfuscator"].astype(str) == model) & (eps > 0) & (eps < math.inf)]
    rows, delta = live.at_delta(rows, setting.delta if mech.uses_delta else None)
    points = []
    for _, r in rows.sort_values("epsilon").iterrows() if not rows.empty else ():
        n = int(r["n_test"]) if "n_test" in r and r["n_test"] == r["n_test"] else None
        acc = float(r["accuracy"])
        low, high = live.wilson(acc, n) if n else (math.nan, math.nan)
        total = float(r["epsilon"]) / mech.epsilon_share  # the table's ε is the mechanism's own
        points.append(Estimate(epsilon=total, value=acc, low=low, high=high, n=n))
    curve = (Curve(mechanism=mech.name, model=model, metric="accuracy", points=tuple(points))
             if points else None)
    return Line(mechanism=mech.name, model=model, curve=curve, source=source, delta=delta,
                note="" if points else f"{table} has no row for {model}")


@dataclass(frozen=True, kw_only=True)
class Solution:
    """The solver's answer for one pair: ``crossing`` (live) or ``measured`` (from a table: the
    smallest measured ε and an interpolated estimate without interval), and ``text``."""

    crossing: Crossing | None
    measured: EpsilonSolution | None
    text: str

    @property
    def epsilon(self) -> float | None:
        """The total ε to use: the live crossing's, else the smallest measured one (never interpolated)."""
        if self.crossing is not None:
            return self.crossing.epsilon
        return None if self.measured is None else self.measured.measured


def solve(mech: Mechanism, model: str, setting: Setting, *, dataset: str, metric: str,
          bound: float) -> Solution:
    """The smallest total ε at which ``metric`` of ``mech`` on ``model`` reaches ``bound`` (an upper
    bound for a metric whose :attr:`MetricSpec.at_least` is False: then the largest ε keeping it)."""
    return _solve(mech.name, model, _any_epsilon(setting), dataset, pipelines.models_dir(), metric,
                  float(bound))


def solve_soon(mech: Mechanism, model: str, setting: Setting, *, dataset: str, metric: str, bound: float,
               wait_s: float = 0.0) -> tuple[Solution | None, bool]:
    """:func:`solve`, computed in a background thread once per question (:func:`privlens.background.soon`)
    for a page that must not wait for it: the answer and False once it is in (None where it failed), else
    None and True (pending: "computing…"). With background work off it is computed here."""
    from privlens import background

    if not background.enabled():
        return solve(mech, model, setting, dataset=dataset, metric=metric, bound=bound), False
    args = (mech.name, model, _any_epsilon(setting), dataset, pipelines.models_dir(), metric, float(bound))
    job = background.soon(("tradeoff-solve", *args), lambda: _solve(*args),
                          name=f"privlens-solve-{mech.name}", wait_s=wait_s)
    return (job.value, False) if job.done.is_set() else (None, True)


@functools.lru_cache(maxsize=256)
def _solve(name: str, model: str, setting: Setting, dataset: str, directory: str, metric: str,
           bound: float) -> Solution:
    mech = registry.get(name)
    spec = METRICS[metric]
    try:
        read = spec.make(mech, target(mech, dataset, model), setting, dataset, model)
        crossing = smallest_epsilon(read, bound, eps_min=SOLVER_RANGE[0], eps_max=SOLVER_RANGE[1])
    except NotImplementedError:
        return _measured_solution(mech, model, setting, dataset, metric, bound)
    except (PrivcoreError, OSError, ValueError) as exc:
        return Solution(crossing=None, measured=None, text=f"No answer for {mech.label} on {model}: "
                        f"{pipelines.public_text(exc, limit=200)}.")
    return Solution(crossing=crossing, measured=None, text=answer_text(crossing, at_least=spec.at_least))


def answer_text(c: Crossing, *, at_least: bool) -> str:
    """The crossing as the answer to "the metric at least (or at most) the bound": for a target on the
    side the metric moves towards, from the crossing ε on; for the other side, below it."""
    if c.status != "reached" or at_least == c.increasing:
        return c.text()
    high = "beyond" if c.high is None else f"{c.high:.3g}"
    return (f"{c.metric} stays {'≥' if at_least else '≤'} {c.bound:g} below total ε = {c.epsilon:.3g} "
            f"[{c.low:.3g}, {high}]: there it has reached {c.at.value:.3f} [{c.at.low:.3f}, "  # type: ignore[union-attr]
            f"{c.at.high:.3f}].")  # type: ignore[union-attr]


def _measured_solution(mech: Mechanism, model: str, setting: Setting, dataset: str, metric: str,
                       bound: float) -> Solution:
    ln = _measured_line(mech, model, setting, dataset)
    if metric != "accuracy" or ln.curve is None:
        return Solution(crossing=None, measured=None,
                        text=f"No {metric} reading for {mech.label} on {model}: {ln.note or 'not measured'}.")
    pts = ln.curve.points
    sol = measured_smallest_epsilon([p.epsilon for p in pts], [p.value for p in pts], target=bound,
                                    lows=[p.low for p in pts], highs=[p.high for p in pts],
                                    ns=[p.n for p in pts])
    where = f"{ln.source}, δ = {ln.delta:g}" if ln.delta is not None else ln.source
    return Solution(crossing=None, measured=sol, text=f"{sol.note} Total ε, {where}.")
