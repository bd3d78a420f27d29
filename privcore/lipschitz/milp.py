"""LipMIP's mixed-integer formulation of the local Lipschitz constant, in sparse matrix form.

Jordan & Dimakis, "Exactly computing the local Lipschitz constant of ReLU networks",
NeurIPS 2020, §3–4. For ``f = A_L ∘ σ ∘ … ∘ σ ∘ A_1`` and a box ``B``::

    L(f, B) = max  ‖ Jᵀ c ‖_{p*}         (p* = dual of the input norm: ℓ1 for ℓ∞ input, ℓ∞ for ℓ1)
              s.t. x ∈ B,  c ∈ C_q       (C_q = unit ball of the dual output norm: the box
                                          [−1, 1]^m for ℓ1 output, the ℓ1 ball for ℓ∞ output)
                   Jᵀ c = W_1ᵀ D_1 W_2ᵀ … D_{L−1} W_Lᵀ c,  D_i = diag(ReLU'(pre_i(x)))

since ``‖J‖_{p→q} = max_{c ∈ C_q} ‖Jᵀc‖_{p*}``. **Output ℓ1 needs the box** [−1, 1]^m: LipMIP's
ready-made ``'l1Ball1'`` set is the ℓ1 ball, which gives ‖J‖_{∞→∞}, up to m times smaller than
‖J‖_{∞→1} (docs/DESIGN.md; the seed authors' code under-calibrated its noise this way).

Encoding (only unstable neurons get variables; everything stable is an affine expression):

* forward, unstable neuron with pre-activation bounds ``l < 0 < u`` and binary ``δ``:
  ``a ≥ pre``, ``a ≥ 0``, ``a ≤ u δ``, ``a ≤ pre − l (1 − δ)``  (exact big-M encoding of ReLU);
* backward, the same ``δ`` gates the backward signal ``q`` with ``|q| ≤ B`` (interval bounds):
  ``p ≤ q + B (1 − δ)``, ``p ≥ q − B (1 − δ)``, ``|p| ≤ B δ``  (so ``p = δ q``; ``δ`` is free
  when ``pre = 0``, which is exactly the Clarke generalized Jacobian's choice);
* objective for ℓ∞ input: ``Σ_j |t_j|`` with ``t = Jᵀc``, each ``|t_j|`` by a variable ``s_j``
  and a sign binary; for ℓ1 input: ``max_j t_j`` with a one-hot binary (the sets are
  symmetric under ``c ↦ −c``, so ``max_j |t_j| = max_j t_j``).

The same :class:`LipschitzMILP` (objective, CSR constraint matrix, row/column bounds,
integrality) is handed to every backend; ``relax=True`` drops integrality, giving the LP
relaxation used by the ``lp`` certifier. Its value is monotone under ball inclusion when the
big-M constants come from interval bounds of the same ball (see :mod:`privcore.lipschitz.bounds`):
a feasible point of the smaller ball's relaxation is feasible for the larger one (chords of
ReLU over a sub-interval lie below the chord over the interval; stable neurons take δ ∈ {0, 1}).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from privcore.lipschitz.bounds import (
    BackwardBounds,
    ForwardBounds,
    backward_bounds,
    box_around,
    forward_bounds,
)
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms

__all__ = ["LipschitzMILP", "build_milp"]


@dataclass(frozen=True, eq=False)
class LipschitzMILP:
    """``max objective·v  s.t.  row_lower ≤ A v ≤ row_upper, col_lower ≤ v ≤ col_upper,
    v_j ∈ ℤ for integer[j]`` — every row is one-sided (one of its bounds is infinite)."""

    objective: np.ndarray
    A: sp.csr_matrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    integer: np.ndarray
    x_index: np.ndarray
    delta_index: tuple[np.ndarray, ...]
    unstable: tuple[np.ndarray, ...]
    n_unstable: int
    norms: Norms
    trivial_upper: float
    pre_expr: tuple[tuple[sp.csr_matrix, np.ndarray], ...] = ()
    signal_expr: tuple[sp.csr_matrix, ...] = ()
    active: tuple[np.ndarray, ...] = ()

    def pattern(self, solution: np.ndarray) -> list[np.ndarray]:
        """The activation pattern of a solution: stable neurons as fixed, binaries rounded."""
        pats = []
        for act, un, idx in zip(self.active, self.unstable, self.delta_index, strict=True):
            p = act.astype(np.float64)
            p[un] = np.round(solution[idx])
            pats.append(p)
        return pats

    @property
    def n_variables(self) -> int:
        """Number of variables (columns)."""
        return int(self.objective.shape[0])

    @property
    def n_constraints(self) -> int:
        """Number of linear constraints (rows)."""
        return int(self.A.shape[0])

    @property
    def n_binary(self) -> int:
        """Number of binary variables."""
        return int(self.integer.sum())


class _Builder:
    """Accumulates variables and one-sided rows; expressions are (sparse k×N, constant k)."""

    def __init__(self, n_vars: int) -> None:
        self.n = n_vars
        self.next = 0
        self.lower = np.zeros(n_vars)
        self.upper = np.zeros(n_vars)
        self.integer = np.zeros(n_vars, dtype=bool)
        self.blocks: list[sp.csr_matrix] = []
        self.rlo: list[np.ndarray] = []
        self.rhi: list[np.ndarray] = []

    def variables(self, lower: np.ndarray, upper: np.ndarray, *, integer: bool = False) -> np.ndarray:
        k = len(lower)
        idx = np.arange(self.next, self.next + k)
        self.next += k
        self.lower[idx], self.upper[idx] = lower, upper
        self.integer[idx] = integer
        return idx

    def unit(self, idx: np.ndarray, coef: float | np.ndarray = 1.0) -> sp.csr_matrix:
        k = len(idx)
        data = np.broadcast_to(np.asarray(coef, dtype=np.float64), (k,))
        return sp.csr_matrix((data, (np.arange(k), idx)), shape=(k, self.n))

    def rows(self, mat: sp.spmatrix, lower: np.ndarray | float, upper: np.ndarray | float) -> None:
        mat = sp.csr_matrix(mat)
        k = mat.shape[0]
        if k == 0:
            return
        self.blocks.append(mat)
        self.rlo.append(np.broadcast_to(np.asarray(lower, dtype=np.float64), (k,)).copy())
        self.rhi.append(np.broadcast_to(np.asarray(upper, dtype=np.float64), (k,)).copy())


def build_milp(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    *,
    input_norm: str = "linf",
    output_norm: str = "l1",
    fwd: ForwardBounds | None = None,
    bwd: BackwardBounds | None = None,
    signal_bounds: tuple[np.ndarray, ...] | None = None,
    break_symmetry: bool = True,
    objective_cap: float | None = None,
) -> LipschitzMILP:
    """LipMIP's MILP for ``L(f, B(center, radius))`` with the given norms (Jordan & Dimakis 2020).

    ``fwd`` may carry any valid pre-activation bounds over the box (tighter bounds give a
    smaller, faster MILP with the same optimum); by default they are interval bounds.
    ``signal_bounds[i]`` may likewise replace the interval bounds ``|q_i| ≤ B_i`` on the backward
    signal before hidden layer ``i`` (index 0: ``|t| = |Jᵀc|``). ``objective_cap`` adds the valid
    cut ``objective ≤ cap`` for a cap known to bound L (e.g. the interval or pattern bound).
    """
    norms = Norms(input=input_norm, output=output_norm)
    lo, hi = box_around(center, radius)
    if fwd is None:
        fwd = forward_bounds(net, lo, hi)
    if bwd is None:
        bwd = backward_bounds(net, fwd)
    n_layers = len(net.weights) - 1
    unstable = tuple(np.flatnonzero(fwd.unstable(i)) for i in range(n_layers))
    n_unst = int(sum(len(u) for u in unstable))
    d, m = net.in_dim, net.out_dim
    if signal_bounds is None:
        signal_bounds = tuple(bwd.signal_bound(i, norms) for i in range(n_layers + 1))
    t_bound = signal_bounds[0]
    t_free = np.flatnonzero(t_bound > 0)
    n_c = m if norms.output == "l1" else 2 * m
    n_obj = 2 * len(t_free) if norms.input == "linf" else len(t_free) + 1
    b = _Builder(d + 3 * n_unst + n_c + n_obj)

    # ---- forward pass -------------------------------------------------------------------
    x = b.variables(lo, hi)
    post = b.unit(x)  # expression of the current layer's input, no constant
    post_c = np.zeros(d)
    deltas: list[np.ndarray] = []
    pre_exprs: list[tuple[sp.csr_matrix, np.ndarray]] = []
    signal_exprs: list[sp.csr_matrix] = [sp.csr_matrix((0, 0))] * (n_layers + 1)
    for i in range(n_layers):
        w, bias = net.weights[i], net.biases[i]
        pre = sp.csr_matrix(w @ post) if post.nnz else sp.csr_matrix((w.shape[0], b.n))
        pre_c = w @ post_c + bias
        pre_exprs.append((pre, pre_c))
        l, u = fwd.lower[i], fwd.upper[i]
        act = fwd.active(i)
        un = unstable[i]
        a = b.variables(np.zeros(len(un)), u[un])
        dl = b.variables(np.zeros(len(un)), np.ones(len(un)), integer=True)
        deltas.append(dl)
        pre_u = pre[un]
        ua = b.unit(a)
        b.rows(ua - pre_u, pre_c[un], np.inf)  # a ≥ pre
        b.rows(ua - b.unit(dl, u[un]), -np.inf, 0.0)  # a ≤ u δ
        b.rows(ua - pre_u - b.unit(dl, l[un]), -np.inf, pre_c[un] - l[un])  # a ≤ pre − l(1−δ)
        keep = sp.diags(act.astype(np.float64))
        scatter = sp.csr_matrix((np.ones(len(un)), (un, np.arange(len(un)))), shape=(w.shape[0], len(un)))
        post = sp.csr_matrix(keep @ pre + scatter @ ua)
        post_c = np.where(act, pre_c, 0.0)

    # ---- backward pass through the generalized Jacobian ---------------------------------------
    if norms.output == "l1":
        cv = b.variables(-np.ones(m), np.ones(m))
        c_expr = b.unit(cv)
    else:
        cp = b.variables(np.zeros(m), np.ones(m))
        cn = b.variables(np.zeros(m), np.ones(m))
        c_expr = b.unit(cp) - b.unit(cn)
        b.rows(b.unit(cp).sum(axis=0) + b.unit(cn).sum(axis=0), -np.inf, 1.0)  # ‖c‖₁ ≤ 1
    q = sp.csr_matrix(net.weights[-1].T @ c_expr)
    for i in range(n_layers, 0, -1):  # hidden layer i (1-based)
        un = unstable[i - 1]
        act = fwd.active(i - 1)
        bound = signal_bounds[i][un]
        signal_exprs[i] = q
        pv = b.variables(-bound, bound)
        up = b.unit(pv)
        q_u = q[un]
        b.rows(up - q_u + b.unit(deltas[i - 1], bound), -np.inf, bound)  # p ≤ q + B(1−δ)
        b.rows(up - q_u - b.unit(deltas[i - 1], bound), -bound, np.inf)  # p ≥ q − B(1−δ)
        b.rows(up - b.unit(deltas[i - 1], bound), -np.inf, 0.0)  # p ≤ Bδ
        b.rows(up + b.unit(deltas[i - 1], bound), 0.0, np.inf)  # p ≥ −Bδ
        keep = sp.diags(act.astype(np.float64))
        scatter = sp.csr_matrix((np.ones(len(un)), (un, np.arange(len(un)))), shape=(len(act), len(un)))
        p = sp.csr_matrix(keep @ q + scatter @ up)
        q = sp.csr_matrix(net.weights[i - 1].T @ p)
    t = q  # Jᵀc, one row per input coordinate
    signal_exprs[0] = t

    # ---- objective: the dual input norm of t ---------------------------------------------------
    objective = np.zeros(b.n)
    tb = t_bound[t_free]
    t_f = t[t_free]
    if norms.input == "linf":  # Σ_j |t_j|
        s = b.variables(np.zeros(len(t_free)), tb)
        e_lo = np.zeros(len(t_free))
        if break_symmetry and len(t_free):  # (c, t) ↦ (−c, −t) is a symmetry: fix one sign
            e_lo[int(np.argmax(tb))] = 1.0
        e = b.variables(e_lo, np.ones(len(t_free)), integer=True)
        us = b.unit(s)
        b.rows(us - t_f + b.unit(e, 2 * tb), -np.inf, 2 * tb)  # s ≤ t + 2B(1 − e)
        b.rows(us + t_f - b.unit(e, 2 * tb), -np.inf, 0.0)  # s ≤ −t + 2Be
        objective[s] = 1.0
    else:  # max_j t_j
        top = float(tb.max(initial=0.0))
        y = b.variables(np.array([-top]), np.array([top]))
        h = b.variables(np.zeros(len(t_free)), np.ones(len(t_free)), integer=True)
        big = top + tb
        yy = sp.csr_matrix((np.ones(len(t_free)), (np.arange(len(t_free)), np.full(len(t_free), y[0]))),
                           shape=(len(t_free), b.n))
        b.rows(yy - t_f + b.unit(h, big), -np.inf, big)  # y ≤ t_j + M(1 − h_j)
        if len(t_free):
            b.rows(b.unit(h).sum(axis=0), 1.0, 1.0)  # one-hot
        else:
            b.upper[y] = 0.0
            b.lower[y] = 0.0
        objective[y] = 1.0
    assert b.next == b.n, (b.next, b.n)
    if objective_cap is not None and np.isfinite(objective_cap):
        b.rows(sp.csr_matrix(objective[None, :]), -np.inf, float(objective_cap))

    if b.blocks:
        A = sp.vstack(b.blocks, format="csr")
        rlo, rhi = np.concatenate(b.rlo), np.concatenate(b.rhi)
    else:
        A = sp.csr_matrix((0, b.n))
        rlo = rhi = np.zeros(0)
    A.eliminate_zeros()

    return LipschitzMILP(
        objective=objective,
        A=A,
        row_lower=rlo,
        row_upper=rhi,
        col_lower=b.lower,
        col_upper=b.upper,
        integer=b.integer,
        x_index=x,
        delta_index=tuple(deltas),
        unstable=unstable,
        n_unstable=n_unst,
        norms=norms,
        trivial_upper=float(norms.of_interval(bwd.mid[0].T, bwd.rad[0].T)),
        pre_expr=tuple(pre_exprs),
        signal_expr=tuple(signal_exprs),
        active=tuple(fwd.active(i).copy() for i in range(n_layers)),
    )
