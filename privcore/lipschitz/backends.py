"""MILP backends: Gurobi (gurobipy matrix API) and HiGHS (highspy), and the ``auto`` choice.

Both receive the same :class:`~privcore.lipschitz.milp.LipschitzMILP` (sparse, one-sided rows)
and return a :class:`SolveResult` whose ``upper`` is the solver's *proven* bound — Gurobi's
``ObjBound``, HiGHS's ``mip_dual_bound`` (for an LP: the optimal value, a dual-feasible
objective) — never the incumbent, also on a time-out (docs/DESIGN.md, "maths contract").

Early stops for decisions "L ≤ τ?": ``stop_bound_at=τ`` ends the solve as soon as the proven
bound is ≤ τ (Gurobi ``BestBdStop``; HiGHS by a MIP-interrupt callback on the dual bound) and
``stop_objective_at=τ'`` as soon as an incumbent reaches τ' (Gurobi ``BestObjStop``; HiGHS
``objective_target``). ``solver="auto"`` runs Gurobi when the model fits its licence (the pip
licence allows 2000 variables and 2000 constraints; a full licence has no limit) and HiGHS
otherwise.
"""

from __future__ import annotations

import math
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from privcore.lipschitz.milp import LipschitzMILP
from privcore.validation import check_choice, check_positive

__all__ = [
    "SOLVERS",
    "SolveResult",
    "choose_solver",
    "gurobi_available",
    "gurobi_size_limit",
    "solve",
    "worker_solver_info",
]

SOLVERS = ("auto", "gurobi", "highs")


@dataclass(frozen=True)
class SolveResult:
    """Outcome of one MILP/LP solve (maximisation).

    ``status``: "optimal", "bound_stop" (proven bound reached ``stop_bound_at``),
    "objective_stop" (incumbent reached ``stop_objective_at``), "time_limit", or "error".
    ``upper`` is a proven upper bound (``inf`` if none); ``lower`` the incumbent's objective
    (``-inf`` if none) with its variable values in ``solution``.
    """

    status: str
    upper: float
    lower: float
    solution: np.ndarray | None
    seconds: float
    solver: str
    nodes: float = 0.0


# ---------------------------------------------------------------------------------------------
# Gurobi
# ---------------------------------------------------------------------------------------------

_GRB_LOCK = threading.Lock()
_GRB_ENV: dict[int, object] = {}
_GRB_LIMIT: dict[str, int | None] = {}


def gurobi_available() -> bool:
    """True when gurobipy imports and a licence (pip's size-limited one at least) starts."""
    try:
        _gurobi_env()
    except Exception:
        return False
    return True


def _gurobi_env():
    """One silent Gurobi environment per process (``Env(empty=True)`` hides the licence banner)."""
    import gurobipy as gp

    pid = os.getpid()
    with _GRB_LOCK:
        env = _GRB_ENV.get(pid)
        if env is None:
            env = gp.Env(empty=True)
            env.setParam("OutputFlag", 0)
            env.start()
            _GRB_ENV.clear()  # an environment inherited through fork must not be reused
            _GRB_ENV[pid] = env
        return env


def gurobi_size_limit() -> int | None:
    """The licence's limit on variables and on constraints (2000 for the pip licence), or
    ``None`` for an unlimited licence. Probed once per process by a 2001-variable model."""
    if "limit" in _GRB_LIMIT:
        return _GRB_LIMIT["limit"]
    import gurobipy as gp

    limit: int | None = None
    with gp.Model(env=_gurobi_env()) as model:
        model.addMVar(2001, lb=0.0, ub=1.0)
        try:
            model.optimize()
        except gp.GurobiError as exc:
            if getattr(exc, "errno", None) != 10010:  # "Model too large for size-limited license"
                raise
            limit = 2000
    _GRB_LIMIT["limit"] = limit
    return limit


def _solve_gurobi(
    milp: LipschitzMILP,
    *,
    relax: bool,
    time_limit: float | None,
    stop_bound_at: float | None,
    stop_objective_at: float | None,
    mip_gap: float,
    threads: int | None,
    strict: bool = False,
) -> SolveResult:
    import gurobipy as gp
    from gurobipy import GRB

    start = time.perf_counter()
    with gp.Model(env=_gurobi_env()) as model:
        if time_limit is not None:
            model.Params.TimeLimit = time_limit
        if threads is not None:
            model.Params.Threads = threads
        model.Params.MIPGap = mip_gap
        model.Params.MIPGapAbs = 1e-9
        if strict:
            model.Params.IntFeasTol = 1e-9
            model.Params.FeasibilityTol = 1e-9
            model.Params.NumericFocus = 3
        if stop_bound_at is not None:
            model.Params.BestBdStop = stop_bound_at
        if stop_objective_at is not None:
            model.Params.BestObjStop = stop_objective_at
        vtype = np.where(milp.integer & (not relax), GRB.BINARY, GRB.CONTINUOUS)
        integral = milp.integer & (not relax)
        lb = np.where(integral, np.ceil(milp.col_lower - 1e-9), milp.col_lower)
        ub = np.where(integral, np.floor(milp.col_upper + 1e-9), milp.col_upper)
        v = model.addMVar(milp.n_variables, lb=lb, ub=ub, vtype=vtype)
        if milp.n_constraints:
            eq = milp.row_lower == milp.row_upper
            ge = ~eq & np.isfinite(milp.row_lower)
            sense = np.where(eq, GRB.EQUAL, np.where(ge, GRB.GREATER_EQUAL, GRB.LESS_EQUAL))
            rhs = np.where(eq | ge, milp.row_lower, milp.row_upper)
            model.addMConstr(milp.A, v, sense, rhs)
        model.setObjective(milp.objective @ v, GRB.MAXIMIZE)
        model.optimize()
        st = model.Status
        has_sol = model.SolCount > 0
        lower = float(model.ObjVal) if has_sol else -math.inf
        sol = np.array(v.X) if has_sol else None
        if relax or not integral.any():
            upper = float(model.ObjVal) if st == GRB.OPTIMAL else math.inf
            nodes = 0.0
        else:
            upper = float(model.ObjBound)
            nodes = float(model.NodeCount)
    seconds = time.perf_counter() - start
    if st == GRB.OPTIMAL:
        status = "optimal"
    elif st == GRB.USER_OBJ_LIMIT:
        status = "bound_stop" if stop_bound_at is not None and upper <= stop_bound_at else "objective_stop"
    elif st == GRB.TIME_LIMIT:
        status = "time_limit"
    else:
        status = "error"
        upper = math.inf if not math.isfinite(upper) or st in (GRB.INFEASIBLE, GRB.INF_OR_UNBD) else upper
    if not math.isfinite(upper) and status != "error":
        status = "error" if status == "optimal" else status
    return SolveResult(status=status, upper=upper, lower=lower, solution=sol, seconds=seconds,
                       solver="gurobi", nodes=nodes)


# ---------------------------------------------------------------------------------------------
# HiGHS
# ---------------------------------------------------------------------------------------------


def _solve_highs(
    milp: LipschitzMILP,
    *,
    relax: bool,
    time_limit: float | None,
    stop_bound_at: float | None,
    stop_objective_at: float | None,
    mip_gap: float,
    threads: int | None,
    strict: bool = False,
) -> SolveResult:
    import highspy

    start = time.perf_counter()
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("mip_rel_gap", float(mip_gap))
    h.setOptionValue("mip_abs_gap", 1e-9)
    if strict:
        h.setOptionValue("mip_feasibility_tolerance", 1e-9)
        h.setOptionValue("primal_feasibility_tolerance", 1e-9)
    if stop_objective_at is not None:
        h.setOptionValue("objective_target", float(stop_objective_at))
    lp = highspy.HighsLp()
    n, k = milp.n_variables, milp.n_constraints
    lp.num_col_, lp.num_row_ = n, k
    lp.col_cost_ = np.asarray(milp.objective, dtype=np.float64)
    inf = highspy.kHighsInf
    lp.col_lower_ = np.where(np.isfinite(milp.col_lower), milp.col_lower, -inf)
    lp.col_upper_ = np.where(np.isfinite(milp.col_upper), milp.col_upper, inf)
    lp.row_lower_ = np.where(np.isfinite(milp.row_lower), milp.row_lower, -inf)
    lp.row_upper_ = np.where(np.isfinite(milp.row_upper), milp.row_upper, inf)
    csc = milp.A.tocsc()
    csc.sort_indices()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = csc.indptr.astype(np.int32)
    lp.a_matrix_.index_ = csc.indices.astype(np.int32)
    lp.a_matrix_.value_ = csc.data.astype(np.float64)
    is_mip = bool(milp.integer.any()) and not relax
    if is_mip:
        kinds = highspy.HighsVarType
        lp.integrality_ = [kinds.kInteger if flag else kinds.kContinuous for flag in milp.integer]
    lp.sense_ = highspy.ObjSense.kMaximize
    h.passModel(lp)

    if is_mip and stop_bound_at is not None:
        target = float(stop_bound_at)

        def on_interrupt(event) -> None:
            if event.data_out.mip_dual_bound <= target:
                event.data_in.user_interrupt = True

        h.cbMipInterrupt.subscribe(on_interrupt)
    h.run()
    ms = h.getModelStatus()
    info = h.getInfo()
    sol_status = info.primal_solution_status
    has_sol = sol_status == 2  # kSolutionStatusFeasible
    lower = float(info.objective_function_value) if has_sol else -math.inf
    sol = np.array(h.getSolution().col_value) if has_sol else None
    S = highspy.HighsModelStatus
    if is_mip:
        upper = float(info.mip_dual_bound)
        nodes = float(info.mip_node_count)
    else:
        upper = float(info.objective_function_value) if ms == S.kOptimal else math.inf
        nodes = 0.0
    if ms == S.kOptimal:
        status = "optimal"
    elif ms in (S.kInterrupt, S.kHighsInterrupt) and stop_bound_at is not None and upper <= stop_bound_at:
        status = "bound_stop"
    elif ms == S.kObjectiveTarget:
        status = "objective_stop"
    elif ms == S.kTimeLimit:
        status = "time_limit"
    else:
        status = "error"
    if not (math.isfinite(upper) or upper == math.inf) or math.isnan(upper):
        upper, status = math.inf, "error"
    seconds = time.perf_counter() - start
    return SolveResult(status=status, upper=upper, lower=lower, solution=sol, seconds=seconds,
                       solver="highs", nodes=nodes)


# ---------------------------------------------------------------------------------------------
# dispatch
# ---------------------------------------------------------------------------------------------


def choose_solver(milp: LipschitzMILP, solver: str = "auto") -> str:
    """Resolve ``solver``: ``auto`` is Gurobi when the model fits the licence, else HiGHS."""
    check_choice("solver", solver, SOLVERS)
    if solver != "auto":
        return solver
    if not gurobi_available():
        return "highs"
    limit = gurobi_size_limit()
    if limit is None or (milp.n_variables <= limit and milp.n_constraints <= limit):
        return "gurobi"
    return "highs"


def solve(
    milp: LipschitzMILP,
    *,
    solver: str = "auto",
    relax: bool = False,
    time_limit: float | None = None,
    stop_bound_at: float | None = None,
    stop_objective_at: float | None = None,
    mip_gap: float = 1e-6,
    threads: int | None = None,
    strict: bool = False,
) -> SolveResult:
    """Maximise the LipMIP objective (or its LP relaxation) with the chosen backend.

    ``upper`` of the result is the backend's proven bound (Jordan & Dimakis 2020 use Gurobi's
    ObjBound); a time-out returns ``status="time_limit"`` with that bound, never the incumbent.
    ``strict`` tightens integrality and feasibility tolerances to 1e-9 (default solver tolerances
    let a binary be 1e-5 from integral, which through a big-M constant can move a region's
    boundary by ~1e-4 and turn a near-tie into a conservative "fail"; strict mode referees that).
    """
    if time_limit is not None:
        time_limit = check_positive("time_limit", time_limit)
    name = choose_solver(milp, solver)
    kwargs = dict(relax=relax, time_limit=time_limit, stop_bound_at=stop_bound_at,
                  stop_objective_at=stop_objective_at, mip_gap=mip_gap, threads=threads, strict=strict)
    if name == "gurobi":
        return _solve_gurobi(milp, **kwargs)
    return _solve_highs(milp, **kwargs)


_SOLVER_INFO: dict[int, dict[str, Any]] = {}


def worker_solver_info() -> dict[str, Any]:
    """What ``solver="auto"`` can use in *this* process (checked on the worker, once per process):
    host, pid, whether Gurobi imports and starts a licence, and the licence's size limit (None =
    unlimited). Gurobi runs a model only when it fits; HiGHS otherwise."""
    pid = os.getpid()
    info = _SOLVER_INFO.get(pid)
    if info is None:
        gurobi = gurobi_available()
        limit = gurobi_size_limit() if gurobi else None
        info = {"host": socket.gethostname(), "pid": pid, "python": sys.version.split()[0],
                "gurobi": gurobi, "gurobi_size_limit": limit}
        _SOLVER_INFO.clear()
        _SOLVER_INFO[pid] = info
    return dict(info)
