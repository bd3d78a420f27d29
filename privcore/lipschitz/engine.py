"""Certificates of the local Lipschitz constant: exact (LipMIP), LP relaxation, interval.

``local_lipschitz`` is the engine's entry point (Jordan & Dimakis, NeurIPS 2020): it parses the
network, bounds it over the box, and, for the exact certifier, either enumerates activation
patterns (small networks: :mod:`privcore.lipschitz.patterns`) or solves LipMIP's MILP with Gurobi
or HiGHS (after LP bound tightening when it is large). :func:`decide_exact` answers "L ≤ τ?"
exactly, with cheap bounds first; it backs the PTR oracle in :mod:`privcore.lipschitz.certifier`.

Region and norms (DESIGN.md): the region is always the ℓ∞ box ``B(center, r) = [center − r,
center + r]``; ``input_norm``/``output_norm`` only choose the operator norm of the Jacobian:
ℓ∞→ℓ1 (default; the product's d_X = ℓ∞, d_Y = ℓ1), ℓ∞→ℓ∞ (max row ℓ1 norm), ℓ1→ℓ1 (max column
ℓ1 norm, used to verify a global bound on a box) and ℓ1→ℓ∞ (max entry).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privcore.errors import CertificationError
from privcore.lipschitz.backends import SOLVERS, SolveResult, solve
from privcore.lipschitz.bounds import (
    INPUT_NORMS,
    OUTPUT_NORMS,
    box_around,
    forward_bounds,
    interval_upper_bound,
    jacobian_norms,
    nearest_sampled_violation,
    operator_norm,
    sampled_lower_bound,
)
from privcore.lipschitz.milp import build_milp
from privcore.lipschitz.network import ReluNetwork, as_network
from privcore.lipschitz.pattern_bnb import global_pattern_bound
from privcore.lipschitz.patterns import (
    in_table_domain,
    pattern_decide,
    pattern_nearest_violation,
    pattern_upper_bound,
    pattern_value,
)
from privcore.lipschitz.splitting import split_decide
from privcore.lipschitz.tighten import tighten_bounds
from privcore.validation import (
    check_choice,
    check_finite_array,
    check_in_range,
    check_int,
    check_positive,
)

__all__ = [
    "CERTIFIERS",
    "ENGINE_SOLVERS",
    "Certificate",
    "Decision",
    "decide_exact",
    "local_lipschitz",
    "lp_upper_bound",
    "verified_lower_bound",
]

CERTIFIERS = ("exact", "lp", "interval")
#: "enumeration" is the exact activation-pattern search of :mod:`privcore.lipschitz.patterns`
ENGINE_SOLVERS = (*SOLVERS, "enumeration")

#: relative gap at which a MILP counts as solved to optimality
MIP_GAP = 1e-6
#: largest ball radius the engine accepts: latent balls live within a few units of the origin, and
#: far larger boxes make interval bounds overflow float64
MAX_RADIUS = 1e6
#: largest |pre-activation bound| over a box that the engine certifies on: HiGHS reads 1e20 as
#: infinity, and big-M constants far above 1e12 swamp the solvers' feasibility tolerance
MAX_PREACTIVATION = 1e12
#: the exact MILP first tightens its big-M constants by LP (OBBT) from this many unstable neurons
TIGHTEN_MIN_UNSTABLE = 16
#: seconds the input-splitting search may spend on a decision too wide to enumerate before it falls
#: through to LPs and the MILP (at most half the MILP's time limit)
SPLIT_SECONDS = 10.0
#: relative width of the band around a computed violation distance inside which a decision is
#: re-checked directly (LP feasibility tolerances are ~1e-7)
_BAND = 1e-6


@dataclass(frozen=True, kw_only=True)
class Certificate:
    """A certified bracket ``lower ≤ L(f, B(center, radius)) ≤ upper``.

    ``upper`` is what mechanisms use: a proven bound (the solver's dual bound on a time-out,
    never its incumbent). ``exact`` is True when ``upper`` is the certifier's exact value (the
    MILP solved to optimality, or the closed form; for ``lp``/``interval`` the relaxation's
    value itself). ``solver`` says what ran ("gurobi", "highs", "closed-form", "interval");
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


def _check_common(center: Any, radius: Any, input_norm: str, output_norm: str, net: Any) -> tuple:
    """(parsed net, centre, radius): the query's own parameters are checked before the network."""
    c = check_finite_array("center", center).reshape(-1)
    r = check_in_range("radius", radius, 0.0, MAX_RADIUS, high_open=False)
    check_choice("input_norm", input_norm, INPUT_NORMS)
    check_choice("output_norm", output_norm, OUTPUT_NORMS)
    net = as_network(net)
    if c.shape[0] != net.in_dim:
        raise ValueError(f"center must have the network's input dimension {net.in_dim}, got {c.shape[0]}")
    return net, c, r


def box_bounds(net: ReluNetwork, center: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray, Any]:
    """(lo, hi, forward bounds) of the ℓ∞ box; ValueError naming center and radius when a
    pre-activation bound is not finite or exceeds :data:`MAX_PREACTIVATION` in magnitude."""
    lo, hi = box_around(center, radius)
    with np.errstate(over="ignore", invalid="ignore"):
        fwd = forward_bounds(net, lo, hi)
    worst = max((float(np.max(np.abs(b), initial=0.0)) for b in (*fwd.lower, *fwd.upper)), default=0.0)
    if not worst <= MAX_PREACTIVATION:
        raise ValueError(
            f"center (largest |value| {float(np.max(np.abs(center), initial=0.0)):.4g}) and radius "
            f"{radius!r} give hidden pre-activations of magnitude up to {worst:.4g} on this network; "
            f"the engine certifies only where they stay ≤ {MAX_PREACTIVATION:.0e} (solver big-M limits)"
        )
    return lo, hi, fwd


def _strict_point_for_pattern(
    net: ReluNetwork, lo: np.ndarray, hi: np.ndarray, pattern: list[np.ndarray]
) -> np.ndarray | None:
    """A point of the box where every neuron strictly has the sign of ``pattern``, if one exists
    (LP: maximise the smallest signed pre-activation margin), else None."""
    from scipy.optimize import linprog

    d = net.in_dim
    if len(net.weights) == 1:  # affine: every point is interior to the single region
        return (np.asarray(lo) + hi) / 2.0
    rows, rhs = [], []
    A = np.eye(d)
    a = np.zeros(d)
    for w, b, p in zip(net.weights[:-1], net.biases[:-1], pattern, strict=True):
        P, p0 = w @ A, w @ a + b
        s = np.where(p > 0.5, 1.0, -1.0)
        # s·(P x + p0) ≥ η  ⇔  −s·P x + η ≤ s·p0
        rows.append(np.hstack([-(s[:, None] * P), np.ones((len(s), 1))]))
        rhs.append(s * p0)
        A, a = p[:, None] * P, p * p0
    scale = 1.0 + max(float(np.abs(r).max()) for r in rhs)
    res = linprog(
        c=np.r_[np.zeros(d), -1.0],
        A_ub=np.vstack(rows),
        b_ub=np.concatenate(rhs),
        bounds=[*zip(lo, hi, strict=True), (None, scale)],
        method="highs",
    )
    if res.status != 0 or -res.fun <= 1e-9 * scale:
        return None
    return np.clip(res.x[:d], lo, hi)


def verified_lower_bound(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    candidates: list[tuple[np.ndarray, list[np.ndarray] | None]],
    *,
    input_norm: str,
    output_norm: str,
) -> tuple[float, np.ndarray | None]:
    """Largest certified Jacobian norm among candidate (point, pattern) pairs of the box.

    A candidate counts only after a float64 re-evaluation at a point of the box where the network
    is affine nearby (a MILP incumbent often sits on a boundary between regions; then the LP of
    :func:`_strict_point_for_pattern` moves it into the interior of its pattern's region)."""
    lo, hi = box_around(center, radius)
    best, arg = 0.0, None
    for x, pattern in candidates:
        pts = [np.clip(x, lo, hi)]
        if pattern is not None:
            strict = _strict_point_for_pattern(net, lo, hi, pattern)
            if strict is not None:
                pts.append(strict)
        vals, ok = jacobian_norms(net, np.array(pts), input_norm=input_norm, output_norm=output_norm)
        for v, good, p in zip(vals, ok, pts, strict=True):
            inside = bool(np.all(p >= lo) and np.all(p <= hi))
            if good and inside and v * (1 - 1e-12) > best:
                best, arg = float(v * (1 - 1e-12)), p
    return best, arg


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
    bound)``. Both terms are monotone under ball inclusion (see :mod:`privcore.lipschitz.milp`),
    hence so is their minimum. The relaxation is built without the MILP's sign fix (which picks
    a coordinate depending on the ball and would break the inclusion argument) and without any
    tightening. Raises CertificationError if the LP is not solved."""
    net, c, r = _check_common(center, radius, input_norm, output_norm, net)
    _, _, fwd = box_bounds(net, c, r)
    interval = interval_upper_bound(net, c, r, input_norm=input_norm, output_norm=output_norm, fwd=fwd)
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
    the inclusion monotonicity of any monotone U (DESIGN.md, "Certifier choice"): the ``lp`` and
    ``interval`` certifiers use it, and stay private."""
    res = global_pattern_bound(net, None, input_norm=input_norm, output_norm=output_norm)
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
    inclusion, so their minimum is too (DESIGN.md)."""
    check_choice("kind", kind, ("interval", "lp"))
    net, c, r = _check_common(center, radius, input_norm, output_norm, net)
    norms = dict(input_norm=input_norm, output_norm=output_norm)
    if kind == "interval":
        u = interval_upper_bound(net, c, r, **norms)
    else:
        u = lp_upper_bound(net, c, r, solver=solver, **norms)
    return min(u, global_bound(net, **norms))


def _closed_form(net: ReluNetwork, center: np.ndarray, fwd, input_norm: str, output_norm: str) -> float:
    """With no unstable neuron the Jacobian is constant on the box: its exact operator norm."""
    pats = [fwd.active(i).astype(np.float64) for i in range(len(net.weights) - 1)]
    jac = net.jacobians(np.zeros((1, net.in_dim)), pats)[0]
    return float(operator_norm(jac, input_norm=input_norm, output_norm=output_norm))


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
    1e-6); on a time-out ``exact=False`` and ``upper`` is the solver's proven bound.
    ``"lp"``/``"interval"``: the monotone relaxations of DESIGN.md (``upper`` is their value).
    ``net`` is a torch module made of Linear and ReLU layers (anything else is refused) or a
    :class:`~privcore.lipschitz.network.ReluNetwork`. ``solver`` is "auto" (Gurobi when the
    model fits its licence, else HiGHS), "gurobi" or "highs"; with "auto" a network with no
    unstable neuron on the box is answered in closed form without a solver.
    """
    start = time.perf_counter()
    check_choice("certifier", certifier, CERTIFIERS)
    check_choice("solver", solver, ENGINE_SOLVERS)
    if time_limit is not None:
        time_limit = check_positive("time_limit", time_limit)
    if threads is not None:
        threads = check_int("threads", threads, minimum=1)
    net, c, r = _check_common(center, radius, input_norm, output_norm, net)
    norms = dict(input_norm=input_norm, output_norm=output_norm)
    _, _, fwd = box_bounds(net, c, r)
    interval = interval_upper_bound(net, c, r, fwd=fwd, **norms)
    lower = sampled_lower_bound(net, c, r, **norms)
    base = dict(certifier=certifier, radius=r, n_unstable=fwd.n_unstable, model_hash=net.digest, **norms)

    def done(**kw: Any) -> Certificate:
        kw.setdefault("n_variables", 0)
        kw.setdefault("n_constraints", 0)
        return Certificate(seconds=time.perf_counter() - start, **base, **kw)

    argmax = None if lower.point is None else tuple(float(v) for v in lower.point)
    if certifier == "interval" or (fwd.n_unstable == 0 and solver == "auto"):
        if fwd.n_unstable == 0:
            value = _closed_form(net, c, fwd, input_norm, output_norm)
            return done(upper=value, lower=min(lower.value, value), exact=True, solver="closed-form",
                        status="optimal", argmax=argmax)
        return done(upper=min(interval, global_bound(net, **norms)), lower=lower.value, exact=True,
                    solver="interval", status="optimal", argmax=argmax)
    if certifier == "exact" and solver in ("auto", "enumeration"):
        pv = pattern_value(net, c, r, fwd, **norms)
        if pv is not None:
            return done(upper=pv.value, lower=pv.value, exact=True, solver="enumeration", status="optimal",
                        argmax=tuple(float(v) for v in pv.point))
        if solver == "enumeration":
            raise ValueError(
                "solver='enumeration' applies to networks with ≤ 16 hidden neurons or boxes with ≤ 14 "
                "unstable neurons whose search stays small; use 'auto', 'gurobi' or 'highs'"
            )
    if certifier == "lp":  # the plain relaxation (interval big-M), then the minimum with the interval bound
        milp = build_milp(net, c, r, fwd=fwd, break_symmetry=False, **norms)
        size = dict(n_variables=milp.n_variables, n_constraints=milp.n_constraints)
        lp_solver = "highs" if solver in ("auto", "enumeration") else solver
        res = solve(milp, solver=lp_solver, relax=True, time_limit=time_limit, threads=threads)
        if res.status != "optimal":
            return done(upper=interval, lower=lower.value, exact=False, solver=res.solver, status=res.status,
                        argmax=argmax, **size)
        return done(upper=min(interval, res.upper, global_bound(net, **norms)), lower=lower.value, exact=True,
                    solver=res.solver, status=res.status, argmax=argmax, **size)
    if fwd.n_unstable >= TIGHTEN_MIN_UNSTABLE:
        tight = tighten_bounds(net, c, r, fwd, objective_cap=interval, **norms)
        milp = build_milp(net, c, r, fwd=tight.fwd, signal_bounds=tight.signal, objective_cap=interval,
                          **norms)
    else:
        milp = build_milp(net, c, r, fwd=fwd, objective_cap=interval, **norms)
    size = dict(n_variables=milp.n_variables, n_constraints=milp.n_constraints)
    remaining = None if time_limit is None else max(1e-3, time_limit - (time.perf_counter() - start))
    res = solve(milp, solver=solver, time_limit=remaining, mip_gap=MIP_GAP, threads=threads)
    upper = min(res.upper, interval) if math.isfinite(res.upper) else interval
    best_lower, best_arg = lower.value, lower.point
    if res.solution is not None:
        cand = [(res.solution[milp.x_index], milp.pattern(res.solution))]
        v, p = verified_lower_bound(net, c, r, cand, **norms)
        if v > best_lower:
            best_lower, best_arg = v, p
    exact = res.status == "optimal"
    return done(
        upper=upper,
        lower=min(best_lower, upper),
        exact=exact,
        solver=res.solver,
        status=res.status,
        argmax=None if best_arg is None else tuple(float(v) for v in best_arg),
        **size,
    )


@dataclass(frozen=True, kw_only=True)
class Decision:
    """Answer to "L(f, B(center, radius)) ≤ threshold?" and the evidence that settled it.

    ``how`` is one of "interval", "closed-form", "global-patterns", "enumeration", "box-patterns",
    "split", "lp", "lp-tightened", "sampled", "mip-bound",
    "mip-incumbent", "mip-strict", "mip-optimal". ``upper``/``lower`` are certified bounds on L at this radius
    learnt on the way (``lower_radius`` is the distance from the centre of the point behind
    ``lower``: the lower bound holds for every ball of at least that radius). ``upper_facts``
    ``(r, u)`` (L ≤ u on every ball of radius ≤ r) and ``lower_facts`` ``(ρ, v)`` (L ≥ v on every
    ball of radius ≥ ρ) are further certified facts about other radii.
    """

    passed: bool
    how: str
    upper: float = math.inf
    lower: float = 0.0
    lower_radius: float = 0.0
    seconds: float = 0.0
    solver: str = ""
    upper_facts: tuple[tuple[float, float], ...] = ()
    lower_facts: tuple[tuple[float, float], ...] = ()
    extra: dict = field(default_factory=dict)


def decide_exact(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    threshold: float,
    *,
    input_norm: str = "linf",
    output_norm: str = "l1",
    solver: str = "auto",
    time_limit: float | None = None,
    threads: int | None = None,
    use_lp: bool = True,
) -> Decision:
    """Exactly decide ``L(f, B(center, radius)) ≤ threshold`` (posthoc PTR's bisection step).

    In order, stopping at the first that settles it:

    1. the interval bound ≤ τ: pass (a certified upper bound on L);
    2. no activation pattern at all has ``‖J_D‖ > τ`` (:mod:`privcore.lipschitz.pattern_bnb`, once per
       model and τ): pass, at every radius;
    3. activation-pattern enumeration (:mod:`privcore.lipschitz.patterns`; small networks or few
       unstable neurons): the distance d* from the centre to the nearest region whose Jacobian
       norm exceeds τ, found exactly by LPs, pruned by a sampled witness; then r < d* passes and
       r ≥ d* fails for *every* r ≤ radius (returned as facts for the memo; a radius within the
       LP tolerance band of d* is decided by its own region LPs); for networks too wide to
       enumerate, a sampled witness (a point of the box whose Jacobian norm, verified in float64,
       exceeds τ: milliseconds) fails at once, and only without one does a branch and bound over
       the patterns each sub-box's stable neurons allow run, splitting the box while that does not
       settle it (:mod:`privcore.lipschitz.splitting`, within ``SPLIT_SECONDS``): a cover by
       cleared sub-boxes passes, a verified witness fails;
    4. a verified Jacobian norm > τ at a sampled point of the box: fail;
    5. the LP relaxation (interval big-M, then LP-tightened big-M) ≤ τ: pass;
    6. LipMIP with early stops: pass as soon as the proven bound is ≤ τ (Gurobi ``BestBdStop``,
       HiGHS dual-bound interrupt), fail as soon as an incumbent exceeds τ *and* its Jacobian
       norm, re-evaluated in float64 at a point of the box, confirms it. Otherwise the MILP is
       re-solved with 1e-9 integrality/feasibility tolerances (default tolerances can fail a
       near-tie on a numerical artefact) and decided by its proven bound at optimality
       ("mip-strict"; a τ inside the 1e-6 optimality gap fails: never guessed as a pass).

    Every step only uses certified bounds on the same L, so the answer is the same whichever
    step gives it. A time-out raises :class:`CertificationError`: it must never become a
    decision (DESIGN.md).
    """
    start = time.perf_counter()
    norms = dict(input_norm=input_norm, output_norm=output_norm)
    _, _, fwd = box_bounds(net, center, radius)

    def out(passed: bool, how: str, **kw: Any) -> Decision:
        return Decision(passed=passed, how=how, seconds=time.perf_counter() - start, **kw)

    interval = interval_upper_bound(net, center, radius, fwd=fwd, **norms)
    if interval <= threshold:
        return out(True, "interval", upper=interval)
    if fwd.n_unstable == 0:
        value = _closed_form(net, center, fwd, input_norm, output_norm)
        if value <= threshold:
            return out(True, "closed-form", upper=value)
    # no activation pattern at all exceeds τ (once per model and τ): every ball passes, at any radius
    glob = global_pattern_bound(net, threshold, **norms)
    if glob is not None and glob.upper <= threshold:
        return out(True, "global-patterns", upper=min(interval, glob.upper), solver="enumeration",
                   upper_facts=((math.inf, glob.upper),), extra={"nodes": glob.nodes})
    u_pat = pattern_upper_bound(
        net, fwd, threshold=threshold, realised=in_table_domain(center, radius), **norms
    )
    if u_pat is not None and u_pat <= threshold:  # no pattern the box allows exceeds τ: no LP needed
        return out(True, "enumeration", upper=min(interval, u_pat), solver="enumeration")
    # a sampled witness (closest violation found by multi-scale sampling, milliseconds) bounds the
    # distance to the nearest violating region: the exact search then only visits patterns that could
    # be closer, and the costlier split search below is not needed at all
    wit = nearest_sampled_violation(net, center, radius, threshold, **norms) if fwd.n_unstable else None
    if u_pat is None and wit is None:
        # too many unstable neurons to enumerate: branch and bound over the patterns the box's stable
        # neurons allow (the same certified, inclusion-monotone bound, without listing them), on the
        # box and, while that does not settle it, on halves of it (:mod:`privcore.lipschitz.splitting`)
        budget = SPLIT_SECONDS if time_limit is None else min(SPLIT_SECONDS, time_limit / 2.0)
        split = split_decide(net, center, radius, threshold, max_seconds=budget, **norms)
        if split is not None and split.passed:
            how = "box-patterns" if split.boxes == 1 else "split"
            return out(True, how, upper=min(interval, split.upper), solver="enumeration",
                       extra={"boxes": split.boxes})
        if split is not None:
            return out(False, "split", upper=interval, lower=split.lower,
                       lower_radius=float(np.max(np.abs(split.point - center))), solver="enumeration",
                       extra={"boxes": split.boxes})
    hint = None if wit is None else wit.distance
    nv = pattern_nearest_violation(net, center, radius, threshold, fwd, max_lps=4096, hint=hint, **norms)
    if nv is None and wit is not None:  # the exact search is too large, but the witness settles it
        return out(False, "sampled", upper=interval, lower=wit.norm, lower_radius=wit.distance)
    low = None
    if nv is not None:
        # every decision at r' ≤ radius follows: fail iff r' ≥ distance (up to the LP tolerance band)
        band = _BAND * (1.0 + (nv.distance if math.isfinite(nv.distance) else radius))
        facts_up = ((min(radius, nv.distance - band), nv.upper_below),) if nv.distance - band >= 0 else ()
        facts_low = ((nv.distance + band, nv.norm),) if math.isfinite(nv.distance) else ()
        extra = {"lps": nv.n_lps, "distance": nv.distance}
        if radius < nv.distance - band or not math.isfinite(nv.distance):
            return out(True, "enumeration", upper=nv.upper_below, solver="enumeration", upper_facts=facts_up,
                       lower_facts=facts_low, extra=extra)
        if radius >= nv.distance + band:
            return out(False, "enumeration", upper=interval, lower=nv.norm, lower_radius=nv.distance + band,
                       solver="enumeration", upper_facts=facts_up, lower_facts=facts_low, extra=extra)
    pat = pattern_decide(net, center, radius, threshold, fwd, **norms)
    if pat is not None:
        return out(bool(pat.passed), "enumeration", upper=min(interval, pat.upper), lower=pat.lower,
                   lower_radius=pat.lower_radius, solver="enumeration", extra={"lps": pat.n_lps})
    if low is None:
        low = sampled_lower_bound(net, center, radius, **norms)
    lower_r = float(np.max(np.abs(low.point - center))) if low.point is not None else 0.0
    if low.value > threshold:
        return out(False, "sampled", upper=interval, lower=low.value, lower_radius=lower_r)
    if fwd.n_unstable == 0:  # closed form > τ but not verified by sampling (cannot happen in practice)
        return out(False, "closed-form", upper=interval, lower=low.value, lower_radius=lower_r)
    milp = build_milp(net, center, radius, fwd=fwd, objective_cap=interval, **norms)
    upper = interval
    if use_lp:
        lp = solve(milp, solver=solver, relax=True, threads=threads)
        if lp.status == "optimal" and math.isfinite(lp.upper):
            upper = min(upper, lp.upper)
            if upper <= threshold:
                return out(True, "lp", upper=upper, lower=low.value, lower_radius=lower_r, solver=lp.solver)
    if fwd.n_unstable >= TIGHTEN_MIN_UNSTABLE:
        tight = tighten_bounds(net, center, radius, fwd, objective_cap=upper, **norms)
        milp = build_milp(net, center, radius, fwd=tight.fwd, signal_bounds=tight.signal, objective_cap=upper,
                          **norms)
        if use_lp:
            lp = solve(milp, solver=solver, relax=True, threads=threads)
            if lp.status == "optimal" and math.isfinite(lp.upper):
                upper = min(upper, lp.upper)
                if upper <= threshold:
                    return out(True, "lp-tightened", upper=upper, lower=low.value, lower_radius=lower_r,
                               solver=lp.solver)
    stop_obj = threshold + max(1e-9, 1e-7 * abs(threshold))
    res: SolveResult = solve(
        milp, solver=solver, time_limit=time_limit, stop_bound_at=threshold, stop_objective_at=stop_obj,
        mip_gap=MIP_GAP, threads=threads,
    )
    info = dict(solver=res.solver, extra={"nodes": res.nodes, "mip_seconds": res.seconds})
    if res.status in ("bound_stop", "optimal") and res.upper <= threshold:
        return out(True, "mip-bound", upper=min(upper, res.upper), lower=low.value, lower_radius=lower_r,
                   **info)
    if res.solution is not None and res.lower > threshold:
        cand = [(res.solution[milp.x_index], milp.pattern(res.solution))]
        v, p = verified_lower_bound(net, center, radius, cand, **norms)
        if v > threshold:
            return out(False, "mip-incumbent", upper=min(upper, res.upper), lower=v,
                       lower_radius=float(np.max(np.abs(p - center))), **info)
    if res.status in ("objective_stop", "optimal"):
        # an incumbent above τ that float64 does not confirm exploits the solver's tolerances (a
        # binary 1e-5 from integral through a big-M constant): re-solve with 1e-9 tolerances and
        # decide by that proven bound, so a near-tie is not failed for a numerical artefact
        res = solve(milp, solver=solver, time_limit=time_limit, mip_gap=MIP_GAP, threads=threads, strict=True)
        info = dict(solver=res.solver, extra={"nodes": res.nodes, "mip_seconds": res.seconds, "strict": True})
        if res.status in ("optimal",) and res.upper <= threshold:
            return out(True, "mip-strict", upper=min(upper, res.upper), lower=low.value, lower_radius=lower_r,
                       **info)
        if res.solution is not None and res.lower > threshold:
            cand = [(res.solution[milp.x_index], milp.pattern(res.solution))]
            v, p = verified_lower_bound(net, center, radius, cand, **norms)
            if v > threshold:
                return out(False, "mip-incumbent", upper=min(upper, res.upper), lower=v,
                           lower_radius=float(np.max(np.abs(p - center))), **info)
    if res.status == "optimal":
        passed = res.upper <= threshold
        return out(passed, "mip-optimal", upper=min(upper, res.upper), lower=low.value, lower_radius=lower_r,
                   **info)
    raise CertificationError(
        f"the MILP deciding L ≤ {threshold:g} at radius {radius:g} ended with status {res.status!r} "
        f"after {res.seconds:.2f} s ({res.solver}; proven bound {res.upper:.6g}, incumbent {res.lower:.6g}); "
        "a time-out cannot become a privacy decision, so the query fails and nothing is released "
        "(a longer time limit may decide it; the `lp` or `interval` certifier, chosen before any query, "
        "always decides, with fewer releases)"
    )
