"""Certificates of the local Lipschitz constant: exact (LipMIP), LP relaxation, interval.

``local_lipschitz`` is the engine's entry point (Jordan & Dimakis, NeurIPS 2020): it parses the
network, bounds it over the box, and, for the exact certifier, either enumerates activation
patterns (small networks: :mod:`privcore.lipschitz.pattern_search`) or solves LipMIP's MILP with Gurobi
or HiGHS (after LP bound tightening when it is large); with a time limit the decision chain's split
step maximises first, for :data:`SPLIT_SHARE` of it (:func:`~privcore.lipschitz.splitting.split_value`:
a branch and bound over neurons and sub-boxes on CROWN-style Clarke-Jacobian bounds after Shi et
al., NeurIPS 2022), and where it does not finish the MILP has the rest, the bracket being the tighter
of the two. "L ≤ τ?" is answered by
the chain of :mod:`privcore.lipschitz.decide` (re-exported here), which backs the PTR oracle in
:mod:`privcore.lipschitz.certifier`. Both take the query as a :class:`~privcore.lipschitz.ball.Ball`.

Region and norms (docs/DESIGN.md): the region is always the ℓ∞ box ``B(center, r) = [center − r,
center + r]``; ``input_norm``/``output_norm`` only choose the operator norm of the Jacobian:
ℓ∞→ℓ1 (default; the product's d_X = ℓ∞, d_Y = ℓ1), ℓ∞→ℓ∞ (max row ℓ1 norm), ℓ1→ℓ1 (max column
ℓ1 norm, used to verify a global bound on a box) and ℓ1→ℓ∞ (max entry).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from privcore.errors import CertificationError
from privcore.lipschitz.backends import SOLVERS, solve
from privcore.lipschitz.ball import MAX_PREACTIVATION, MAX_RADIUS, Ball
from privcore.lipschitz.blas import blas_threads, query_threads
from privcore.lipschitz.bounds import sampled_lower_bound
from privcore.lipschitz.deadline import TimeLimitReached, deadline_after, no_deadline
from privcore.lipschitz.decide import MIP_GAP, Decision, decide_exact
from privcore.lipschitz.decide import TIGHTEN_MIN_UNSTABLE as TIGHTEN_MIN_UNSTABLE
from privcore.lipschitz.lazy_patterns import lazy_applies, lazy_pattern_value
from privcore.lipschitz.milp import build_milp
from privcore.lipschitz.milp_cost import milp_seconds
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.pattern_bnb import global_pattern_bound
from privcore.lipschitz.pattern_search import pattern_value
from privcore.lipschitz.regions import verified_lower_bound
from privcore.lipschitz.tighten import tighten_bounds
from privcore.ranges import CERTIFIERS
from privcore.validation import check_choice, check_positive

__all__ = [
    "CERTIFIERS",
    "ENGINE_SOLVERS",
    "ENUMERATION_RTOL",
    "MAX_PREACTIVATION",
    "MAX_RADIUS",
    "RELAXATION_VERSION",
    "Certificate",
    "Decision",
    "decide_exact",
    "global_bound",
    "local_lipschitz",
    "lp_upper_bound",
    "relaxed_upper_bound",
    "verified_lower_bound",
]

#: the definition of the ``lp``/``interval`` certifiers' U, part of their cache keys: a φ from one U
#: must never meet a φ from another (2: the interval term includes the per-pair interval bound)
RELAXATION_VERSION = 2
#: with a time limit, the share of it the split step's maximum gets before the MILP takes the rest
SPLIT_SHARE = 0.5
#: ... and where the MILP is predicted to need more than HOPELESS_FACTOR times the whole limit
#: (:func:`~privcore.lipschitz.milp_cost.milp_seconds`), the split step's share
HOPELESS_SHARE = 0.9
HOPELESS_FACTOR = 4.0
#: the enumeration's bracket counts as closed (``exact``) within this relative width: the ∞→1 branch
#: and bound ends within 1e-13 of its incumbent (:data:`~privcore.lipschitz.sign_norm.TIE_RTOL`), and two
#: realised patterns may tie up to rounding; ``upper`` is the certified end either way
ENUMERATION_RTOL = 1e-12
#: "enumeration" is the exact activation-pattern search of :mod:`privcore.lipschitz.pattern_search`
ENGINE_SOLVERS = (*SOLVERS, "enumeration")

@dataclass(frozen=True, kw_only=True)
class Certificate:
    """A certified bracket ``lower ≤ L(f, B(center, radius)) ≤ upper``.

    ``upper`` is what mechanisms use: a proven bound (the solver's dual bound on a time-out,
    never its incumbent). ``exact`` is True when ``upper`` is the certifier's exact value (the
    MILP solved to optimality, the enumeration's bracket closed to :data:`ENUMERATION_RTOL`, the split
    search complete, or the closed form; for
    ``lp``/``interval`` the relaxation's value itself). ``solver`` says what answered ("gurobi",
    "highs", "closed-form", "interval", "enumeration", "split");
    ``status`` is the solver's status; the model size is reported as unstable neurons,
    variables and constraints (0 when no MILP was built).
    """

    upper: float
    lower: float
    exact: bool
    solver: str
    status: str
    seconds: float
    certifier: str
    radius: float
    input_norm: str
    output_norm: str
    n_unstable: int
    n_variables: int
    n_constraints: int
    argmax: tuple[float, ...] | None = None
    model_hash: str = ""


def lp_upper_bound(
    net: Any,
    center: Any,
    radius: float,
    *,
    input_norm: str = "linf",
    output_norm: str = "l1",
    solver: str = "highs",
) -> float:
    """The ``lp`` certifier's value: ``min(LP relaxation of LipMIP with interval big-M, interval
    bound)`` (:attr:`~privcore.lipschitz.ball.Ball.relaxed_interval`). Both terms are monotone under
    ball inclusion (see :mod:`privcore.lipschitz.milp`),
    hence so is their minimum. The relaxation is built without the MILP's sign fix (which picks
    a coordinate depending on the ball and would break the inclusion argument) and without any
    tightening. Raises CertificationError if the LP is not solved."""
    ball = Ball.of(net, center, radius, input_norm=input_norm, output_norm=output_norm)
    net, c, r, fwd, interval = ball.net, ball.center, ball.radius, ball.fwd, ball.relaxed_interval
    if fwd.n_unstable == 0:
        return interval
    milp = build_milp(net, c, r, input_norm=input_norm, output_norm=output_norm, fwd=fwd,
                      break_symmetry=False)
    res = solve(milp, solver=solver, relax=True)
    if res.status != "optimal" or not math.isfinite(res.upper):
        raise CertificationError(f"LP relaxation not solved ({res.solver}: {res.status})")
    return min(interval, res.upper)


def global_bound(net: ReluNetwork, *, input_norm: str = "linf", output_norm: str = "l1") -> float:
    """G, a certified bound on ``‖J_D‖`` over every activation pattern (inf when the budgeted branch and
    bound of :func:`~privcore.lipschitz.pattern_bnb.global_pattern_bound` does not finish).

    G bounds L(f, B) for every ball B and is one constant per model and norms, so ``min(U, G)`` keeps
    the inclusion monotonicity of any monotone U (docs/DESIGN.md, "Certifier choice"): the ``lp`` and
    ``interval`` certifiers use it, and stay private."""
    res = global_pattern_bound(net, None, Norms(input=input_norm, output=output_norm))
    return math.inf if res is None else float(res.upper)


def relaxed_upper_bound(
    net: Any,
    center: Any,
    radius: float,
    *,
    kind: str,
    input_norm: str = "linf",
    output_norm: str = "l1",
    solver: str = "highs",
) -> float:
    """The ``interval`` or ``lp`` certifier's U(center, radius): the interval bound (and, for ``lp``,
    :func:`lp_upper_bound`), capped by :func:`global_bound`. Each term is monotone under ball
    inclusion, so their minimum is too (docs/DESIGN.md)."""
    check_choice("kind", kind, ("interval", "lp"))
    ball = Ball.of(net, center, radius, input_norm=input_norm, output_norm=output_norm)
    net, norms = ball.net, ball.norms.kwargs
    if kind == "interval":
        u = ball.relaxed_interval
    else:
        u = lp_upper_bound(net, ball.center, ball.radius, solver=solver, **norms)
    return min(u, global_bound(net, **norms))


def local_lipschitz(
    net: Any,
    center: Any,
    radius: float,
    *,
    input_norm: str = "linf",
    output_norm: str = "l1",
    solver: str = "auto",
    time_limit: float | None = None,
    certifier: str = "exact",
    threads: int | None = None,
) -> Certificate:
    """Local Lipschitz constant of a ReLU network over the ℓ∞ box ``B(center, radius)``.

    ``certifier="exact"``: LipMIP (Jordan & Dimakis 2020) solved to optimality (relative gap
    1e-6). With ``time_limit`` and ``solver="auto"`` the split step maximises first, for
    :data:`SPLIT_SHARE` of it (``solver="split"`` when its bracket closes to 1e-6 plus its bounds'
    float64 margin, ``ValueResult.slack``), then the MILP has the rest; on a time-out
    ``exact=False``, ``upper`` the smaller proven bound, ``lower`` the larger verified one.
    ``"lp"``/``"interval"``: the monotone relaxations of docs/DESIGN.md (``upper`` is their value).
    ``net`` is a torch module made of Linear and ReLU layers (anything else is refused) or a
    :class:`~privcore.lipschitz.network.ReluNetwork`. ``solver`` is "auto" (Gurobi when the
    model fits its licence, else HiGHS), "gurobi" or "highs"; with "auto" a network with no
    unstable neuron on the box is answered in closed form without a solver. ``threads`` bounds the
    solvers' threads and numpy's BLAS threads (:func:`~privcore.lipschitz.blas.blas_threads`; None:
    :data:`~privcore.lipschitz.blas.DEFAULT_THREADS`). ``time_limit`` holds on every path, the
    engine's own searches included (:mod:`~privcore.lipschitz.deadline`)."""
    start = time.perf_counter()
    check_choice("certifier", certifier, CERTIFIERS)
    check_choice("solver", solver, ENGINE_SOLVERS)
    if time_limit is not None:
        time_limit = check_positive("time_limit", time_limit)
    threads = query_threads(threads)
    ball = Ball.of(net, center, radius, input_norm=input_norm, output_norm=output_norm)
    with blas_threads(threads):
        try:
            with deadline_after(time_limit, start=start):
                return _local_lipschitz(ball, solver=solver, time_limit=time_limit, certifier=certifier,
                                        threads=threads, start=start)
        except TimeLimitReached:
            return _timed_out(ball, certifier, start)


def _timed_out(ball: Ball, certifier: str, start: float) -> Certificate:
    """The certificate of a query whose time limit ran out inside the engine's own search: not
    exact, ``upper`` the interval bound (certified; computed after the limit, in microseconds to
    milliseconds), ``lower`` 0 (trivially certified)."""
    with no_deadline():
        upper = ball.interval
    return Certificate(upper=upper, lower=0.0, exact=False, solver="enumeration", status="time_limit",
                       seconds=time.perf_counter() - start, certifier=certifier, radius=ball.radius,
                       n_unstable=ball.n_unstable, n_variables=0, n_constraints=0, model_hash=ball.net.digest,
                       **ball.norms.kwargs)


def _local_lipschitz(
    ball: Ball, *, solver: str, time_limit: float | None, certifier: str, threads: int | None, start: float,
) -> Certificate:
    net, c, r, fwd = ball.net, ball.center, ball.radius, ball.fwd
    norms = ball.norms
    lower = sampled_lower_bound(net, c, r, **norms.kwargs)
    base = dict(certifier=certifier, radius=r, n_unstable=fwd.n_unstable, model_hash=net.digest,
                **norms.kwargs)

    def done(**kw: Any) -> Certificate:
        kw.setdefault("n_variables", 0)
        kw.setdefault("n_constraints", 0)
        return Certificate(seconds=time.perf_counter() - start, **base, **kw)

    argmax = None if lower.point is None else tuple(float(v) for v in lower.point)
    if certifier == "interval" or (certifier == "lp" and fwd.n_unstable == 0):
        # the relaxations' U exactly as relaxed_upper_bound defines it (one definition, cached as such)
        return done(upper=min(ball.relaxed_interval, global_bound(net, **norms.kwargs)), lower=lower.value,
                    exact=True, solver="interval", status="optimal", argmax=argmax)
    if fwd.n_unstable == 0 and solver == "auto":
        low, value = ball.closed_form_bracket
        return done(upper=value, lower=min(max(lower.value, low), value), exact=low == value,
                    solver="closed-form", status="optimal" if low == value else "node-limit", argmax=argmax)
    if certifier == "exact" and solver in ("auto", "enumeration"):
        pv = lazy_pattern_value(net, c, r, fwd, norms) if lazy_applies(net, norms) else None
        if pv is None:
            pv = pattern_value(net, c, r, fwd, norms)
        if pv is not None:
            exact = pv.value - pv.lower <= ENUMERATION_RTOL * abs(pv.value)
            return done(upper=pv.value, lower=max(pv.lower, min(lower.value, pv.value)), exact=exact,
                        solver="enumeration", status="optimal" if exact else "node-limit",
                        argmax=tuple(float(v) for v in pv.point))
        if solver == "enumeration":
            raise ValueError(
                "solver='enumeration' applies to networks with ≤ 16 hidden neurons or boxes with ≤ 14 "
                "unstable neurons whose search stays small; use 'auto', 'gurobi' or 'highs'"
            )
    if certifier == "lp":
        return _lp_certificate(ball, lower.value, argmax, solver=solver, time_limit=time_limit,
                               threads=threads, done=done)
    split, best_lower, best_arg = None, lower.value, lower.point
    if time_limit is not None and solver == "auto":  # the split step's maximum first, for its share
        split = _split_value(ball, best_lower, best_arg, time_limit * split_share(ball, time_limit))
        if split is not None:
            if split.lower > best_lower:
                best_lower, best_arg = split.lower, split.point
            if split.complete:
                arg = None if best_arg is None else tuple(float(v) for v in best_arg)
                return done(upper=split.upper, lower=min(best_lower, split.upper), exact=True, solver="split",
                            status="optimal", argmax=arg)
    try:
        return _milp_certificate(ball, split, best_lower, best_arg, solver=solver, time_limit=time_limit,
                                 threads=threads, start=start, done=done)
    except TimeLimitReached:
        if split is None:
            raise
    # the limit ran out in the MILP's own steps: the split step's bracket stands (certified on its own)
    with no_deadline():
        upper = min(split.upper, ball.interval)
    return done(upper=upper, lower=min(best_lower, upper), exact=False, solver="split", status="time_limit",
                argmax=None if best_arg is None else tuple(float(v) for v in best_arg))


def split_share(ball: Ball, time_limit: float) -> float:
    """The split step's share of a value query's time limit: :data:`SPLIT_SHARE`, or
    :data:`HOPELESS_SHARE` where the MILP is not predicted to finish in it by far (it then keeps the
    rest, for a bound). Orders work only: either peer's answer is certified on its own."""
    hopeless = milp_seconds(ball) > HOPELESS_FACTOR * time_limit
    return HOPELESS_SHARE if hopeless else SPLIT_SHARE


def _lp_certificate(ball: Ball, lower: float, argmax: Any, *, solver: str, time_limit: float | None,
                    threads: int | None, done: Any) -> Certificate:
    """The plain relaxation (interval big-M), then the minimum with the interval and global bounds."""
    net, norms = ball.net, ball.norms
    milp = build_milp(net, ball.center, ball.radius, fwd=ball.fwd, break_symmetry=False, **norms.kwargs)
    size = dict(n_variables=milp.n_variables, n_constraints=milp.n_constraints)
    lp_solver = "highs" if solver in ("auto", "enumeration") else solver
    res = solve(milp, solver=lp_solver, relax=True, time_limit=time_limit, threads=threads)
    relaxed = ball.relaxed_interval
    if res.status != "optimal":
        return done(upper=relaxed, lower=lower, exact=False, solver=res.solver, status=res.status,
                    argmax=argmax, **size)
    upper = min(relaxed, res.upper, global_bound(net, **norms.kwargs))
    return done(upper=upper, lower=lower, exact=True, solver=res.solver, status=res.status, argmax=argmax,
                **size)


def _milp_certificate(ball: Ball, split: Any, best_lower: float, best_arg: Any, *, solver: str,
                      time_limit: float | None, threads: int | None, start: float, done: Any) -> Certificate:
    """LipMIP on the ball (tightened bounds past TIGHTEN_MIN_UNSTABLE unstable neurons), its upper bound
    capped by the interval bound and the split step's, its solution verified as a lower bound."""
    net, c, r, fwd, interval, norms = ball.net, ball.center, ball.radius, ball.fwd, ball.interval, ball.norms
    milp_limit = None if time_limit is None else max(1e-3, time_limit - (time.perf_counter() - start))
    if fwd.n_unstable >= TIGHTEN_MIN_UNSTABLE:
        # at most half the MILP's time on tightening, so the MILP keeps the other half
        deadline = None if milp_limit is None else time.perf_counter() + milp_limit / 2.0
        tight = tighten_bounds(net, c, r, fwd, norms, objective_cap=interval, deadline=deadline)
        milp = build_milp(net, c, r, fwd=tight.fwd, signal_bounds=tight.signal, objective_cap=interval,
                          **norms.kwargs)
    else:
        milp = build_milp(net, c, r, fwd=fwd, objective_cap=interval, **norms.kwargs)
    size = dict(n_variables=milp.n_variables, n_constraints=milp.n_constraints)
    remaining = None if time_limit is None else max(1e-3, time_limit - (time.perf_counter() - start))
    res = solve(milp, solver=solver, time_limit=remaining, mip_gap=MIP_GAP, threads=threads)
    upper = min(res.upper, interval) if math.isfinite(res.upper) else interval
    if split is not None:
        upper = min(upper, split.upper)
    if res.solution is not None:
        cand = [(res.solution[milp.x_index], milp.pattern(res.solution))]
        v, p = verified_lower_bound(net, c, r, cand, norms)
        if v > best_lower:
            best_lower, best_arg = v, p
    return done(
        upper=upper,
        lower=min(best_lower, upper),
        exact=res.status == "optimal",
        solver=res.solver,
        status=res.status,
        argmax=None if best_arg is None else tuple(float(v) for v in best_arg),
        **size,
    )




def _split_value(ball: Ball, lower: float, point: Any, seconds: float) -> Any:
    """The split step's maximum (:func:`~privcore.lipschitz.splitting.split_value`) within ``seconds``,
    from the verified ``lower`` at ``point``; None without time or where it does not apply."""
    if seconds <= 0.0:
        return None
    from privcore.lipschitz.splitting import split_value  # torch, only for balls with unstable neurons

    return split_value(ball.net, ball.center, ball.radius, lower=lower, point=point, rtol=MIP_GAP,
                       max_seconds=seconds, norms=ball.norms)
