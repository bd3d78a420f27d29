"""LP-based bound tightening (OBBT) for LipMIP's big-M constants.

Interval bounds over-approximate pre-activations and backward signals more and more with depth,
which makes big-M constants loose and the MILP slow. Optimisation-based bound tightening (the
standard remedy in MIP verification of ReLU networks, e.g. Tjeng et al. 2019, and suggested for
LipMIP by Jordan & Dimakis 2020, §4) replaces each bound by the optimum of the LP relaxation:
``max / min pre_j`` for every unstable neuron of the deeper layers, then ``max |q_j|`` for every
backward signal that multiplies a binary. Each LP is a relaxation of the true set, so its optimum
(padded by the LP tolerance) is a valid bound; neurons whose tightened interval no longer contains
0 become stable. The MILP built from the tightened bounds has the same optimum (its feasible set
still contains every generalized Jacobian of the box) and is smaller and tighter.

Used only by the ``exact`` certifier: its value does not depend on the bounds. The ``lp``
certifier keeps interval big-M constants, whose monotonicity under ball inclusion it needs.
"""

from __future__ import annotations

import time

import numpy as np

from privcore.lipschitz.bounds import BackwardBounds, ForwardBounds, backward_bounds
from privcore.lipschitz.milp import LipschitzMILP, build_milp
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms

__all__ = ["TightBounds", "tighten_bounds"]

_PAD_REL = 1e-6
_PAD_ABS = 1e-7


class TightBounds:
    """Tightened forward bounds and backward signal bounds (arguments of :func:`build_milp`)."""

    def __init__(self, fwd: ForwardBounds, signal: tuple[np.ndarray, ...], n_lps: int) -> None:
        self.fwd = fwd
        self.signal = signal
        self.n_lps = n_lps


class _LP:
    """One HiGHS LP (the MILP's relaxation) re-solved with changing objectives (warm starts)."""

    def __init__(self, milp: LipschitzMILP) -> None:
        import highspy

        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        lp = highspy.HighsLp()
        n, k = milp.n_variables, milp.n_constraints
        inf = highspy.kHighsInf
        lp.num_col_, lp.num_row_ = n, k
        lp.col_cost_ = np.zeros(n)
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
        lp.sense_ = highspy.ObjSense.kMaximize
        self.h.passModel(lp)
        self.n = n
        self.idx = np.arange(n, dtype=np.int32)
        self.count = 0

    def maximize(self, row: np.ndarray) -> float | None:
        import highspy

        self.h.changeColsCost(self.n, self.idx, np.ascontiguousarray(row, dtype=np.float64))
        self.h.run()
        self.count += 1
        if self.h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        return float(self.h.getInfo().objective_function_value)


def _pad(v: float) -> float:
    return _PAD_ABS + _PAD_REL * abs(v)


def tighten_bounds(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    fwd: ForwardBounds,
    norms: Norms,
    *,
    objective_cap: float | None = None,
    deadline: float | None = None,
) -> TightBounds:
    """OBBT of the deeper layers' pre-activation bounds, then of the backward signal bounds
    (module docstring). Layer 1's interval bounds are already exact for a box. At ``deadline``
    (a ``time.perf_counter()`` value) it stops and keeps what it has: every bound, tightened or
    not, is valid on its own."""

    def late() -> bool:
        return deadline is not None and time.perf_counter() > deadline

    n_layers = len(net.weights) - 1
    lower, upper = [np.array(v) for v in fwd.lower], [np.array(v) for v in fwd.upper]
    n_lps = 0
    cur = fwd
    for i in range(1, n_layers):  # forward, layer by layer (each LP uses the bounds found so far)
        un = np.flatnonzero(cur.unstable(i))
        if un.size == 0 or late():
            continue
        milp = build_milp(net, center, radius, fwd=cur, objective_cap=objective_cap, break_symmetry=False,
                          **norms.kwargs)
        lp = _LP(milp)
        pre, const = milp.pre_expr[i]
        for j in un:
            if late():
                break
            row = pre[j].toarray().ravel()
            hi = lp.maximize(row)
            lo = lp.maximize(-row)
            if hi is not None:
                upper[i][j] = min(upper[i][j], hi + const[j] + _pad(hi + const[j]))
            if lo is not None:
                lower[i][j] = max(lower[i][j], -lo + const[j] - _pad(-lo + const[j]))
        n_lps += lp.count
        cur = ForwardBounds(lower=tuple(lower), upper=tuple(upper))
    bwd: BackwardBounds = backward_bounds(net, cur)
    signal = [bwd.signal_bound(i, norms).copy() for i in range(n_layers + 1)]
    # backward: the last hidden layer's signal W_Lᵀc has exact interval bounds; tighten the others
    for i in range(n_layers - 1, -1, -1):
        need = np.flatnonzero(signal[i] > 0) if i == 0 else np.flatnonzero(cur.unstable(i - 1))
        if need.size == 0 or late():
            continue
        milp = build_milp(net, center, radius, fwd=cur, signal_bounds=tuple(signal),
                          objective_cap=objective_cap, break_symmetry=False, **norms.kwargs)
        lp = _LP(milp)
        q = milp.signal_expr[i]
        # without the sign fix the relaxation is symmetric under (c, p, t, e) ↦ (−c, −p, −t, 1 − e),
        # so max q_j = max |q_j|
        for j in need:
            if late():
                break
            v = lp.maximize(q[j].toarray().ravel())
            if v is not None:
                signal[i][j] = min(signal[i][j], max(v, 0.0) + _pad(v))
        n_lps += lp.count
    return TightBounds(fwd=cur, signal=tuple(signal), n_lps=n_lps)
