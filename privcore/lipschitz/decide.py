"""Exactly decide ``L(f, B(z, r)) ≤ τ``: posthoc PTR's bisection step, as one ordered chain.

:func:`decide_exact` runs the steps of :data:`STEPS` in order on one :class:`~privcore.lipschitz.ball.Ball`;
each returns a :class:`Decision` or None (not settled), and the first answer wins. Cheap, certified
evidence comes first, the MILP last:

====================  =========================================================================
step                  answers, and why it is sound
====================  =========================================================================
interval              pass if the interval bound ≤ τ (a certified upper bound on L).
closed_form           pass if no neuron is unstable and the constant Jacobian's norm ≤ τ.
global_patterns       pass if no activation pattern at all has ‖J_D‖ > τ
                      (:mod:`~privcore.lipschitz.pattern_bnb`, once per model and τ): every radius.
box_patterns          pass if no pattern the box's stable neurons allow has ‖J_D‖ > τ
                      (enumerated, or read from a realised-pattern table).
split                 too many unstable neurons to enumerate and no sampled witness: a branch
                      and bound over neurons and sub-boxes (:mod:`~privcore.lipschitz.splitting`,
                      ≤ ``SPLIT_SECONDS``): a pattern hill climb for a witness, then nodes bounded
                      per vertex pair by CROWN-style bounds on the Clarke Jacobian
                      (:mod:`~privcore.lipschitz.clarke`) and dropped when their split neurons'
                      region misses the box (LP); a cover by cleared or empty nodes passes, a
                      float64-verified point fails.
nearest_violation     the exact distance d* from z to the nearest region with ‖J_D‖ > τ (region
                      LPs, pruned by the sampled witness): r < d* passes, r ≥ d* fails, for every
                      r ≤ radius (returned as facts); a radius inside the LP tolerance band of d*
                      goes on. Too large a search with a witness: the witness fails.
region_enumeration    every region meeting the box, each by an LP (small boxes).
sampled               fail if a sampled point's Jacobian norm, verified in float64, exceeds τ.
lp                    pass if the LP relaxation of LipMIP (interval big-M) ≤ τ.
lp_tightened          from ``TIGHTEN_MIN_UNSTABLE`` unstable neurons: big-M tightened by LPs
                      (OBBT, within half the time limit), then the same relaxation.
milp                  LipMIP with early stops: pass when the proven bound ≤ τ (Gurobi
                      ``BestBdStop``, HiGHS dual-bound interrupt); fail when an incumbent > τ is
                      confirmed in float64 at a point of its region. An unconfirmed incumbent is
                      re-solved with 1e-9 tolerances and decided by its proven bound at
                      optimality ("mip-strict"; a τ still inside the gap raises
                      :class:`CertificationError`: never guessed either way). A time-out
                      (the decision's ``time_limit`` spent) raises it too: never a decision.
====================  =========================================================================

Every step uses only certified bounds on the same L (every pass an upper bound ≤ τ, every fail a
point verified in float64), so the answer is the same whichever step gives it (docs/DESIGN.md).
``Decision.how`` names the evidence (:class:`How`). A fail's witness is moved to the point of its
activation region nearest z and on to nearer adjacent regions still above τ
(:mod:`~privcore.lipschitz.witnesses`, each point re-verified), so ``Decision.lower_radius`` is the
smallest radius those regions fail: PTR's bisection asks next just below it
(:func:`~privcore.mechanisms.phi.compute_phi`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any

import numpy as np

from privcore.errors import CertificationError
from privcore.lipschitz.backends import SolveResult, solve
from privcore.lipschitz.ball import Ball
from privcore.lipschitz.blas import blas_threads, query_threads
from privcore.lipschitz.bounds import nearest_sampled_violation, sampled_lower_bound
from privcore.lipschitz.deadline import deadline_after
from privcore.lipschitz.milp import LipschitzMILP, build_milp
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.pattern_bnb import global_pattern_bound
from privcore.lipschitz.pattern_search import (
    in_table_domain,
    pattern_decide,
    pattern_nearest_violation,
    pattern_upper_bound,
)
from privcore.lipschitz.regions import verified_lower_bound
from privcore.lipschitz.tighten import tighten_bounds
from privcore.lipschitz.witnesses import descend_violation, nearest_region_point
from privcore.validation import check_real

__all__ = ["MIP_GAP", "SPLIT_SECONDS", "STEPS", "TIGHTEN_MIN_UNSTABLE", "Decision", "How", "decide_exact"]

#: relative gap at which a MILP counts as solved to optimality
MIP_GAP = 1e-6
#: the exact MILP first tightens its big-M constants by LP (OBBT) from this many unstable neurons
TIGHTEN_MIN_UNSTABLE = 16
#: seconds the split search may spend on a decision too wide to enumerate before it falls
#: through to LPs and the MILP (at most half the decision's time limit)
SPLIT_SECONDS = 10.0
#: relative width of the band around a computed violation distance inside which a decision is
#: re-checked directly (LP feasibility tolerances are ~1e-7)
_BAND = 1e-6


class How(StrEnum):
    """The evidence behind a :class:`Decision` (a str: compares equal to its value)."""

    INTERVAL = "interval"
    CLOSED_FORM = "closed-form"
    GLOBAL_PATTERNS = "global-patterns"
    ENUMERATION = "enumeration"
    BOX_PATTERNS = "box-patterns"
    SPLIT = "split"
    SAMPLED = "sampled"
    LP = "lp"
    LP_TIGHTENED = "lp-tightened"
    MIP_BOUND = "mip-bound"
    MIP_INCUMBENT = "mip-incumbent"
    MIP_STRICT = "mip-strict"
    MIP_OPTIMAL = "mip-optimal"


@dataclass(frozen=True, kw_only=True)
class Decision:
    """The answer to "L ≤ τ?" on one ball, with the evidence that settled it (``how``, a :class:`How`).

    ``upper``/``lower`` are certified bounds on L at this radius learnt on the way (``lower_radius``
    is the distance from the centre of the point behind ``lower``: the lower bound holds for every
    ball of at least that radius). ``upper_facts`` ``(r, u)`` (L ≤ u on every ball of radius ≤ r) and
    ``lower_facts`` ``(ρ, v)`` (L ≥ v on every ball of radius ≥ ρ) are further certified facts about
    other radii.
    """

    passed: bool
    how: How
    upper: float = math.inf
    lower: float = 0.0
    lower_radius: float = 0.0
    seconds: float = 0.0
    solver: str = ""
    upper_facts: tuple[tuple[float, float], ...] = ()
    lower_facts: tuple[tuple[float, float], ...] = ()
    extra: dict = field(default_factory=dict)


class _Query:
    """One decision in progress: the ball, τ, the solver options, and the evidence gathered so far
    (computed on first use, shared by the steps)."""

    def __init__(self, ball: Ball, threshold: float, *, solver: str, time_limit: float | None,
                 threads: int | None, use_lp: bool) -> None:
        self.ball, self.tau = ball, threshold
        self.solver, self.time_limit, self.threads, self.use_lp = solver, time_limit, threads, use_lp
        self.start = time.perf_counter()
        self.upper = ball.interval  # best certified upper bound so far
        self._milp: LipschitzMILP | None = None

    @property
    def milp(self) -> LipschitzMILP:
        """LipMIP's MILP on the ball (interval big-M, capped by the best upper bound when built);
        the ``lp_tightened`` step replaces it with the LP-tightened one."""
        if self._milp is None:
            b = self.ball
            self._milp = build_milp(*self.args, fwd=b.fwd, objective_cap=self.upper, **b.norms.kwargs)
        return self._milp

    @milp.setter
    def milp(self, milp: LipschitzMILP) -> None:
        self._milp = milp

    def remaining(self) -> float | None:
        """Seconds left of the decision's ``time_limit`` (None: no limit; at least 1 ms, so a solver
        called late times out at once instead of running unlimited)."""
        if self.time_limit is None:
            return None
        return max(1e-3, self.time_limit - (time.perf_counter() - self.start))

    def out(self, passed: bool, how: How, **kw: Any) -> Decision:
        return Decision(passed=passed, how=how, seconds=time.perf_counter() - self.start, **kw)

    @property
    def args(self) -> tuple[ReluNetwork, np.ndarray, float]:
        return self.ball.net, self.ball.center, self.ball.radius

    @cached_property
    def box_pattern_bound(self) -> float | None:
        """max ‖J_D‖ over the patterns the box allows (None: too many to enumerate)."""
        b = self.ball
        realised = in_table_domain(b.center, b.radius)
        return pattern_upper_bound(b.net, b.fwd, b.norms, threshold=self.tau, realised=realised)

    @cached_property
    def witness(self) -> Any:
        """The closest sampled point with a float64 Jacobian norm > τ (milliseconds), or None."""
        if not self.ball.n_unstable:
            return None
        return nearest_sampled_violation(*self.args, self.tau, self.ball.norms)

    @cached_property
    def sampled(self) -> Any:
        """The best float64-verified sampled lower bound on L."""
        return sampled_lower_bound(*self.args, **self.ball.norms.kwargs)

    @property
    def lower_kw(self) -> dict[str, Any]:
        low = self.sampled
        if low.point is not None and low.value > self.tau:
            return self.witness_kw(low.value, low.point)
        dist = float(np.max(np.abs(low.point - self.ball.center))) if low.point is not None else 0.0
        return {"lower": low.value, "lower_radius": dist}

    def witness_kw(self, value: float, point: np.ndarray) -> dict[str, Any]:
        """``lower``/``lower_radius`` of a verified witness ``value > τ`` at ``point``, moved to its
        region's point nearest the centre and then to nearer adjacent regions still above τ
        (:func:`~privcore.lipschitz.witnesses.nearest_region_point`,
        :func:`~privcore.lipschitz.witnesses.descend_violation`), so the fact "L > τ from that
        radius on" settles every later question at a radius ≥ it."""
        b = self.ball
        near = nearest_region_point(b.net, b.center, point, b.norms)
        if near is not None and near[1] > self.tau:
            near = descend_violation(b.net, b.center, near, self.tau, b.norms)
            return {"lower": near[1], "lower_radius": near[0]}
        return {"lower": value, "lower_radius": float(np.max(np.abs(point - b.center)))}


Step = Callable[[_Query], Decision | None]


def _interval(q: _Query) -> Decision | None:
    return q.out(True, How.INTERVAL, upper=q.upper) if q.upper <= q.tau else None


def _closed_form(q: _Query) -> Decision | None:
    if q.ball.n_unstable:
        return None
    value = q.ball.closed_form()
    return q.out(True, How.CLOSED_FORM, upper=value) if value <= q.tau else None


def _global_patterns(q: _Query) -> Decision | None:
    glob = global_pattern_bound(q.ball.net, q.tau, q.ball.norms)
    if glob is None or glob.upper > q.tau:
        return None
    return q.out(True, How.GLOBAL_PATTERNS, upper=min(q.upper, glob.upper), solver="enumeration",
                 upper_facts=((math.inf, glob.upper),), extra={"nodes": glob.nodes})


def _box_patterns(q: _Query) -> Decision | None:
    u = q.box_pattern_bound
    if u is None or u > q.tau:
        return None
    return q.out(True, How.ENUMERATION, upper=min(q.upper, u), solver="enumeration")


def _split(q: _Query) -> Decision | None:
    if q.box_pattern_bound is not None or q.witness is not None:
        return None
    from privcore.lipschitz.splitting import split_decide  # torch, only when a ball is this wide

    budget = SPLIT_SECONDS if q.time_limit is None else min(SPLIT_SECONDS, q.time_limit / 2.0)
    split = split_decide(*q.args, q.tau, norms=q.ball.norms, max_seconds=budget)
    if split is None:
        return None
    if split.passed:
        how = How.BOX_PATTERNS if split.boxes == 1 else How.SPLIT
        return q.out(True, how, upper=min(q.upper, split.upper), solver="enumeration",
                     extra={"boxes": split.boxes})
    return q.out(False, How.SPLIT, upper=q.upper, **q.witness_kw(split.lower, split.point),
                 solver="enumeration", extra={"boxes": split.boxes})


def _nearest_violation(q: _Query) -> Decision | None:
    wit, radius = q.witness, q.ball.radius
    hint = None if wit is None else wit.distance
    nv = pattern_nearest_violation(*q.args, q.tau, q.ball.fwd, q.ball.norms, max_lps=4096, hint=hint)
    if nv is None:  # the exact search is too large; a witness still settles it
        if wit is None:
            return None
        return q.out(False, How.SAMPLED, upper=q.upper, **q.witness_kw(wit.norm, wit.point))
    # every decision at r' ≤ radius follows: fail iff r' ≥ distance (up to the LP tolerance band)
    band = _BAND * (1.0 + (nv.distance if math.isfinite(nv.distance) else radius))
    below = nv.distance - band
    facts = {
        "upper_facts": ((min(radius, below), nv.upper_below),) if below >= 0 else (),
        "lower_facts": ((nv.distance + band, nv.norm),) if math.isfinite(nv.distance) else (),
        "extra": {"lps": nv.n_lps, "distance": nv.distance},
        "solver": "enumeration",
    }
    if radius < nv.distance - band or not math.isfinite(nv.distance):
        return q.out(True, How.ENUMERATION, upper=nv.upper_below, **facts)
    if radius >= nv.distance + band:
        return q.out(False, How.ENUMERATION, upper=q.upper, lower=nv.norm, lower_radius=nv.distance + band,
                     **facts)
    return None  # inside the tolerance band: the region LPs below decide this radius directly


def _region_enumeration(q: _Query) -> Decision | None:
    pat = pattern_decide(*q.args, q.tau, q.ball.fwd, q.ball.norms)
    if pat is None:
        return None
    return q.out(bool(pat.passed), How.ENUMERATION, upper=min(q.upper, pat.upper), lower=pat.lower,
                 lower_radius=pat.lower_radius, solver="enumeration", extra={"lps": pat.n_lps})


def _sampled(q: _Query) -> Decision | None:
    if q.sampled.value > q.tau:
        return q.out(False, How.SAMPLED, upper=q.upper, **q.lower_kw)
    if not q.ball.n_unstable and q.ball.closed_form_bracket[0] > q.tau:
        # one pattern on the whole box (its Jacobian, in float64, is L); sampling missed it only by
        # rounding at the centre
        return q.out(False, How.CLOSED_FORM, upper=q.upper, **q.lower_kw)
    return None


def _relaxation(q: _Query, how: How) -> Decision | None:
    if not q.use_lp:
        return None
    lp = solve(q.milp, solver=q.solver, relax=True, time_limit=q.remaining(), threads=q.threads)
    if lp.status == "optimal" and math.isfinite(lp.upper):
        q.upper = min(q.upper, lp.upper)
        if q.upper <= q.tau:
            return q.out(True, how, upper=q.upper, solver=lp.solver, **q.lower_kw)
    return None


def _lp(q: _Query) -> Decision | None:
    return _relaxation(q, How.LP)


def _lp_tightened(q: _Query) -> Decision | None:
    b = q.ball
    if b.n_unstable < TIGHTEN_MIN_UNSTABLE:
        return None
    deadline = None if q.time_limit is None else q.start + q.time_limit / 2.0
    tight = tighten_bounds(*q.args, b.fwd, b.norms, objective_cap=q.upper, deadline=deadline)
    q.milp = build_milp(*q.args, fwd=tight.fwd, signal_bounds=tight.signal, objective_cap=q.upper,
                        **b.norms.kwargs)
    return _relaxation(q, How.LP_TIGHTENED)


def _confirmed_incumbent(q: _Query, res: SolveResult, info: dict) -> Decision | None:
    """Fail on the MILP's incumbent > τ once float64 confirms it at a point of its region."""
    if res.solution is None or res.lower <= q.tau:
        return None
    cand = [(res.solution[q.milp.x_index], q.milp.pattern(res.solution))]
    v, p = verified_lower_bound(*q.args, cand, q.ball.norms)
    if v <= q.tau:
        return None
    return q.out(False, How.MIP_INCUMBENT, upper=min(q.upper, res.upper), **q.witness_kw(v, p), **info)


def _milp(q: _Query) -> Decision:
    milp, tau, opts = q.milp, q.tau, dict(solver=q.solver, threads=q.threads)
    stop_obj = tau + max(1e-9, 1e-7 * abs(tau))
    res = solve(milp, stop_bound_at=tau, stop_objective_at=stop_obj, mip_gap=MIP_GAP,
                time_limit=q.remaining(), **opts)
    info: dict[str, Any] = dict(solver=res.solver, extra={"nodes": res.nodes, "mip_seconds": res.seconds})
    if res.status in ("bound_stop", "optimal") and res.upper <= tau:
        return q.out(True, How.MIP_BOUND, upper=min(q.upper, res.upper), **q.lower_kw, **info)
    dec = _confirmed_incumbent(q, res, info)
    if dec is not None:
        return dec
    if res.status in ("objective_stop", "optimal"):
        # an incumbent above τ that float64 does not confirm exploits the solver's tolerances (a
        # binary 1e-5 from integral through a big-M constant): re-solve with 1e-9 tolerances and
        # decide by that proven bound, so a near-tie is not failed for a numerical artefact
        res = solve(milp, mip_gap=MIP_GAP, strict=True, time_limit=q.remaining(), **opts)
        info = dict(solver=res.solver, extra={"nodes": res.nodes, "mip_seconds": res.seconds, "strict": True})
        if res.status == "optimal" and res.upper <= tau:
            return q.out(True, How.MIP_STRICT, upper=min(q.upper, res.upper), **q.lower_kw, **info)
        dec = _confirmed_incumbent(q, res, info)
        if dec is not None:
            return dec
    if res.status == "optimal" and res.upper <= tau:
        return q.out(True, How.MIP_OPTIMAL, upper=min(q.upper, res.upper), **q.lower_kw, **info)
    if res.status == "optimal":
        # proven bound above τ, yet no point above τ confirmed in float64: L lies within the solver's
        # tolerance of τ. A fail here would be a guess (no verified point), and a guessed answer can
        # break φ's stability |φ(z) − φ(z')| ≤ R + ζ; so, like a time-out, it decides nothing
        raise CertificationError(
            f"L ≤ {tau:g} at radius {q.ball.radius:g} is within the MILP's tolerance of the threshold "
            f"(proven bound {res.upper:.9g}, no point above it confirmed in float64; {res.solver}): "
            "undecidable here, so the query fails and nothing is released"
        )
    raise CertificationError(
        f"the MILP deciding L ≤ {tau:g} at radius {q.ball.radius:g} ended with status {res.status!r} "
        f"after {res.seconds:.2f} s ({res.solver}; proven bound {res.upper:.6g}, incumbent {res.lower:.6g}); "
        "a time-out cannot become a privacy decision, so the query fails and nothing is released "
        "(a longer time limit may decide it; the `lp` or `interval` certifier, chosen before any query, "
        "always decides, with fewer releases)"
    )


#: the chain, in order (module docstring); the first step that answers decides
STEPS: tuple[tuple[str, Step], ...] = (
    ("interval", _interval),
    ("closed_form", _closed_form),
    ("global_patterns", _global_patterns),
    ("box_patterns", _box_patterns),
    ("split", _split),
    ("nearest_violation", _nearest_violation),
    ("region_enumeration", _region_enumeration),
    ("sampled", _sampled),
    ("lp", _lp),
    ("lp_tightened", _lp_tightened),
    ("milp", _milp),
)


def decide_exact(
    net: Any,
    center: Any,
    radius: float,
    threshold: float,
    *,
    input_norm: str = "linf",
    output_norm: str = "l1",
    solver: str = "auto",
    time_limit: float | None = None,
    threads: int | None = None,
    use_lp: bool = True,
    steps: Sequence[str] | None = None,
) -> Decision:
    """Exactly decide ``L(f, B(center, radius)) ≤ threshold`` by the chain of :data:`STEPS`
    (module docstring: which step runs when, and why each is sound). ``solver`` ("auto", "gurobi"
    or "highs") and ``threads`` (None: :data:`~privcore.lipschitz.blas.DEFAULT_THREADS`) apply to the LPs,
    the MILP and numpy's BLAS; ``time_limit`` bounds the whole
    decision (the split step and bound tightening get at most half of it, each solver call what is
    left); ``use_lp=False``
    skips the two LP relaxations. ``steps`` runs only the named steps, still in chain order (to
    study or test one step); when none of them settles it, :class:`CertificationError`. A MILP
    time-out raises :class:`CertificationError`."""
    names = tuple(name for name, _ in STEPS)
    if steps is not None:
        if isinstance(steps, str) or not all(isinstance(s, str) for s in steps):
            raise TypeError(f"steps must be a sequence of step names from {names}, got {steps!r}")
        unknown = sorted(set(steps) - set(names))
        if unknown:
            raise ValueError(f"steps: unknown step(s) {unknown}; the chain is {names}")
    ball = Ball.of(net, center, radius, input_norm=input_norm, output_norm=output_norm)
    tau = check_real("threshold", threshold)
    if math.isnan(tau):
        raise ValueError("threshold must be a real number, got nan")
    threads = query_threads(threads)
    q = _Query(ball, tau, solver=solver, time_limit=time_limit, threads=threads, use_lp=use_lp)
    with blas_threads(threads), deadline_after(time_limit, start=q.start):
        for name, step in STEPS:
            if steps is not None and name not in steps:
                continue
            dec = step(q)
            if dec is not None:
                return dec
    raise CertificationError(f"none of the steps {tuple(steps or ())} settled L ≤ {tau:g}; nothing decided")
