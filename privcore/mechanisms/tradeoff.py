"""Trade-offs over the total ε: a metric's curve, and the ε at which it crosses a target, live.

A *metric* is any callable ε → reading with an interval (:class:`Metric`): the accuracy a mechanism's
releases keep (:func:`accuracy_metric`, from :func:`~privcore.mechanisms.utility.live_accuracy`), or
what an attacker rebuilds from them (SSIM, PSNR, ℓ1, ℓ2: a reader passed in the same way). ε is the
total of one sent release's guarantee.

* :func:`accuracy_curve` — the live accuracy at each total ε of a grid, each with n, draws and its
  95 % interval;
* :func:`smallest_epsilon` — the smallest total ε in [ε_min, ε_max] at which the metric reaches a
  bound in the direction it moves with ε (accuracy ≥ 0.9; an attacker's SSIM ≥ 0.4, so "SSIM at most
  0.4" holds below it), found on a fixed grid of ``steps`` + 1 points in log ε (readings are reused
  between searches and calls): a scan of :data:`SCAN` + 1 evenly spaced points, then bisection within
  the bracket, with an interval: from the smallest ε whose reading's 95 %
  interval reaches the bound to the smallest ε whose whole interval does. The interval is pointwise
  (each reading's own 95 %), not simultaneous over ε.

Monotonicity. The noise of every mechanism here shrinks as ε grows (Laplace b/ε, Gaussian σ(ε, δ)
decreasing in ε; posthoc Alg. 1, the global mechanism, Tian et al.'s mechanisms), so less noise is
expected to keep more accuracy and let an attacker rebuild more: the metric's expectation is taken to
be monotone in ε. That is an assumption about the models, not a theorem (noise can move a
misclassified image across a boundary), so the solver guards it: among the readings it took (the scan
across the whole range and the bisections), none may
lie significantly on the wrong side of an earlier one (its 95 % interval entirely beyond the earlier
interval, against the metric's direction); otherwise it answers "not monotone" and names no ε.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from privcore.mechanisms.protocol import Mechanism, Setting
from privcore.mechanisms.utility import DRAWS, live_accuracy
from privcore.ranges import EPSILON_RANGE
from privcore.validation import check_range

__all__ = [
    "NOT_MONOTONE",
    "REACHED",
    "UNREACHABLE",
    "Crossing",
    "Curve",
    "Estimate",
    "Metric",
    "accuracy_curve",
    "accuracy_metric",
    "smallest_epsilon",
]

#: :attr:`Crossing.status` values
REACHED, UNREACHABLE, NOT_MONOTONE = "reached", "not reachable", "not monotone"
#: grid intervals of the bisection between ε_min and ε_max (0.1 → 100: 1.4 % apart)
STEPS = 512
#: evenly spaced readings (in log ε) every search takes first: they bracket the crossing and give the
#: monotonicity guard readings across the whole range
SCAN = 8


@dataclass(frozen=True, kw_only=True)
class Estimate:
    """One reading of a metric at total ``epsilon``: ``value`` and its 95 % interval [``low``,
    ``high``] over ``n`` images (× ``draws`` noise draws; None where the reader does not say)."""

    epsilon: float
    value: float
    low: float
    high: float
    n: int | None = None
    draws: int | None = None


@dataclass(frozen=True, kw_only=True)
class Metric:
    """A reading as a function of the total ε: ``read(ε)`` returns an object with ``value``, ``low``
    and ``high`` (and optionally ``n`` and ``draws``) — a :class:`~privcore.mechanisms.utility.Utility`
    or an attack reading. ``increasing``: the direction the metric moves as ε grows (accuracy, SSIM,
    PSNR: True; an attacker's ℓ1 or ℓ2 error: False). ``name`` is what a person reads."""

    name: str
    read: Callable[[float], Any]
    increasing: bool = True

    def at(self, epsilon: float) -> Estimate:
        """The reading at ``epsilon`` as an :class:`Estimate`."""
        r = self.read(float(epsilon))
        return Estimate(epsilon=float(epsilon), value=float(r.value), low=float(r.low), high=float(r.high),
                        n=getattr(r, "n", None), draws=getattr(r, "draws", None))


def accuracy_metric(mechanism: Mechanism, target: Any, setting: Setting, *, dataset: str, model: str,
                    n: int | None = None, draws: int = DRAWS, seed: int = 0) -> Metric:
    """The live accuracy of ``mechanism`` on ``target`` at ``setting`` with its ε replaced by the one
    asked (δ, R and α kept): :func:`~privcore.mechanisms.utility.live_accuracy`, memoised per setting.
    NotImplementedError on reading for a mechanism that does not simulate."""

    def read(epsilon: float) -> Any:
        eps = check_range("epsilon", epsilon, EPSILON_RANGE)
        return live_accuracy(mechanism, target, replace(setting, epsilon=eps), dataset=dataset, model=model,
                             n=n, draws=draws, seed=seed)

    return Metric(name="accuracy", read=read, increasing=True)


def attack_metric(mechanism: Mechanism, target: Any, setting: Setting, *, dataset: str, model: str,
                  metric: str = "ssim", n: int | None = None, draws: int = DRAWS, seed: int = 0) -> Metric:
    """An attacker's ``metric`` (SSIM, PSNR: higher rebuilds more; ℓ1, ℓ2: lower) on ``mechanism``'s
    releases at ``setting`` with its ε replaced by the one asked:
    :func:`~privcore.mechanisms.attack_live.live_attack`, memoised per setting. The attacker recovers
    more as the noise shrinks, so SSIM and PSNR grow with ε and the errors fall (an assumption the
    solver checks on every reading). ValueError, naming why, where no attacker reads the releases."""
    from privcore.mechanisms.attack_live import live_attack

    if metric not in ("ssim", "psnr", "l1", "l2"):
        raise ValueError(f"metric must be one of ssim, psnr, l1, l2, got {metric!r}")

    def read(epsilon: float) -> Estimate:
        eps = check_range("epsilon", epsilon, EPSILON_RANGE)
        r = live_attack(mechanism, target, replace(setting, epsilon=eps), dataset=dataset, model=model, n=n,
                        draws=draws, seed=seed)
        if not r.available:
            raise ValueError(r.reason)
        iv = r.metrics[metric]
        return Estimate(epsilon=eps, value=iv.mean, low=iv.low, high=iv.high, n=r.n, draws=r.draws)

    return Metric(name=metric.upper() if metric in ("ssim", "psnr") else metric, read=read,
                  increasing=metric in ("ssim", "psnr"))


@dataclass(frozen=True, kw_only=True)
class Curve:
    """``metric`` of ``mechanism`` on ``model`` at each total ε of a grid (:class:`Estimate` s, ε
    ascending)."""

    mechanism: str
    model: str
    metric: str
    points: tuple[Estimate, ...]


def accuracy_curve(mechanism: Mechanism, target: Any, setting: Setting, *, epsilons: Sequence[float],
                   dataset: str, model: str, n: int | None = None, draws: int = DRAWS,
                   seed: int = 0) -> Curve:
    """The live accuracy of ``mechanism`` on ``target`` at every total ε of ``epsilons`` (each in the
    ε range; ``setting`` gives δ, R and α). NotImplementedError for a mechanism that does not simulate."""
    metric = accuracy_metric(mechanism, target, setting, dataset=dataset, model=model, n=n, draws=draws,
                             seed=seed)
    grid = sorted({check_range("epsilon", e, EPSILON_RANGE) for e in epsilons})
    return Curve(mechanism=mechanism.name, model=model, metric=metric.name,
                 points=tuple(metric.at(e) for e in grid))


@dataclass(frozen=True, kw_only=True)
class Crossing:
    """Where ``metric`` crosses ``bound`` in the direction it moves with ε (:func:`smallest_epsilon`).

    ``status``: :data:`REACHED` — ``epsilon`` is the smallest grid ε in [``eps_min``, ``eps_max``]
    whose reading has crossed, ``low``/``high`` the smallest ε whose 95 % interval reaches the bound and
    the smallest whose whole interval does (``high`` None: beyond ``eps_max``), ``at`` its reading;
    :data:`UNREACHABLE` — not crossed by ``eps_max`` (``at`` the reading there); :data:`NOT_MONOTONE`
    — the readings contradict the monotonicity the search assumes (``violation``: the two readings).
    ``readings``: every reading taken, ε ascending."""

    metric: str
    bound: float
    increasing: bool
    status: str
    eps_min: float
    eps_max: float
    epsilon: float | None = None
    low: float | None = None
    high: float | None = None
    at: Estimate | None = None
    violation: tuple[Estimate, Estimate] | None = None
    readings: tuple[Estimate, ...] = ()

    @property
    def relation(self) -> str:
        """"≥" for a metric that grows with ε, "≤" for one that shrinks: the crossing's side."""
        return "≥" if self.increasing else "≤"

    def text(self) -> str:
        """The answer in one sentence, with the reading's n and interval."""
        what = f"{self.metric} {self.relation} {self.bound:g}"
        if self.status == NOT_MONOTONE:
            a, b = self.violation  # type: ignore[misc]
            return (f"No answer: the readings are not monotone in ε ({self.metric} {_say(a)} at ε = "
                    f"{a.epsilon:.3g} but {_say(b)} at ε = {b.epsilon:.3g}), which the search assumes.")
        if self.status == UNREACHABLE:
            return (f"Not reachable within ε ∈ [{self.eps_min:g}, {self.eps_max:g}]: {what} is not met at "
                    f"ε = {self.eps_max:g}, where {self.metric} is {_say(self.at)}.")  # type: ignore[arg-type]
        high = "beyond " + f"{self.eps_max:g}" if self.high is None else f"{self.high:.3g}"
        return (f"{what} from total ε = {self.epsilon:.3g} [{self.low:.3g}, {high}] on: there "
                f"{self.metric} is {_say(self.at)}.")  # type: ignore[arg-type]


def _say(e: Estimate) -> str:
    n = "" if e.n is None else f", n = {e.n}" + ("" if e.draws is None else f" × {e.draws} draws")
    return f"{e.value:.3f} [{e.low:.3f}, {e.high:.3f}]{n}"


def _first(passes: Callable[[int], bool], scan: Sequence[int]) -> int | None:
    """The smallest grid index for which ``passes`` holds (taken as monotone): the first of the ``scan``
    indices (ascending, from 0 to the last) that passes, then bisection between it and the one before;
    None when none passes."""
    k = next((k for k, i in enumerate(scan) if passes(i)), None)
    if k is None:
        return None
    if k == 0:
        return scan[0]
    lo, hi = scan[k - 1], scan[k]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _violation(readings: Sequence[Estimate], increasing: bool) -> tuple[Estimate, Estimate] | None:
    """Two readings, ε ascending, whose 95 % intervals put the later one entirely on the wrong side of
    the earlier one (None: none do)."""
    worst: Estimate | None = None  # the earlier reading with the most extreme sure end so far
    for r in readings:
        if worst is not None and (r.high < worst.low if increasing else r.low > worst.high):
            return worst, r
        if worst is None or (r.low > worst.low if increasing else r.high < worst.high):
            worst = r
    return None


def smallest_epsilon(metric: Metric, bound: float, *, eps_min: float = 0.1, eps_max: float = 100.0,
                     steps: int = STEPS) -> Crossing:
    """The smallest total ε at which ``metric`` reaches ``bound`` in the direction it moves with ε, with
    its interval, by bisection in log ε (module docstring; ``steps`` grid intervals)."""
    lo_eps = check_range("eps_min", eps_min, EPSILON_RANGE)
    hi_eps = check_range("eps_max", eps_max, (lo_eps, EPSILON_RANGE[1]))
    if not math.isfinite(float(bound)):
        raise ValueError(f"bound must be a finite number, got {bound!r}")
    steps = max(1, int(steps))
    up = metric.increasing
    taken: dict[int, Estimate] = {}

    def reading(i: int) -> Estimate:
        if i not in taken:
            taken[i] = metric.at(lo_eps * (hi_eps / lo_eps) ** (i / steps) if i < steps else hi_eps)
        return taken[i]

    def crossed(v: float) -> bool:
        return v >= bound if up else v <= bound

    scan = sorted({round(k * steps / SCAN) for k in range(SCAN + 1)})
    for i in scan:  # the whole range first: the bracket and the guard's view across it
        reading(i)
    point = _first(lambda i: crossed(reading(i).value), scan)
    maybe = _first(lambda i: crossed(reading(i).high if up else reading(i).low), scan)
    sure = _first(lambda i: crossed(reading(i).low if up else reading(i).high), scan)
    readings = tuple(taken[i] for i in sorted(taken))
    common = {"metric": metric.name, "bound": float(bound), "increasing": up, "eps_min": lo_eps,
              "eps_max": hi_eps, "readings": readings}
    violation = _violation(readings, up)
    if violation is not None:
        return Crossing(status=NOT_MONOTONE, violation=violation, **common)
    if point is None:
        return Crossing(status=UNREACHABLE, at=reading(steps), **common)
    # under monotonicity the three crossings are ordered; noise between readings can swap neighbours
    low = taken[min(point, maybe if maybe is not None else point)].epsilon
    high = None if sure is None else taken[max(point, sure)].epsilon
    return Crossing(status=REACHED, epsilon=taken[point].epsilon, low=low, high=high, at=taken[point],
                    **common)
