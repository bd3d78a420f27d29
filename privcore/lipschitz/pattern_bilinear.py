"""The largest Jacobian norm over activation patterns of a two-hidden-layer network, by branch and
bound on both layers with linear (chord) relaxations.

For ``f = W₃ ∘ ReLU ∘ W₂ ∘ ReLU ∘ W₁`` every generalised Jacobian is ``J = W₃ D₂ W₂ D₁ W₁`` and, for
a vertex pair (c, s) of the norm (:func:`~privcore.lipschitz.norms.Norms.dual_vertices`),
``cᵀ J s = d₂ᵀ M d₁`` with ``M = diag(a) W₂ diag(u)``, ``u = W₁ s``, ``a = W₃ᵀ c``: a bilinear 0/1
program per pair. :func:`~privcore.lipschitz.pattern_bnb.max_pattern_norm` branches on layer 1 only
and bounds layer 2 by intervals. Here a node fixes neurons of either layer (``S₁``, ``S₂`` ∈ {free,
off, on}) and is bounded twice:

* **A** (layer 2 relaxed): with ``t_j(d₁) = Σ_i M_ji d₁_i`` over the node's layer-1 choices, the
  node's value is at most ``Σ_{j free} relu(t_j) + Σ_{j on} t_j``. Over the free d₁ ∈ [0, 1] each
  ``t_j`` lies in ``[l_j, h_j]`` (exact for a linear function on a box), where relu is at most its
  chord ``h_j (t − l_j)/(h_j − l_j)``; the sum of chords is linear in d₁, maximised in closed form.
  This is the LP relaxation's value (the chord is relu's concave envelope on the interval), never
  above the interval bound ``Σ relu(h_j)``, and exact when no free row is unstable;
* **B**: the same with the layers' roles swapped (``Mᵀ``, layer 1 relaxed).

The node's bound is min(A, B) plus a safety margin; a node at or below the threshold is pruned (a
proof for every pattern in it). Otherwise it branches on the unstable row with the largest chord gap
``−l h/(h − l)`` of the relaxation whose gaps are larger in ℓ2 (branching fixes that row, so the
relaxation is exact there; docs/ENGINE.md compares branching rules). Children update ``c, l, h`` in
O(width); pairs are searched depth first in chunks, most promising first, and the search stops at a
deadline or node budget with the open nodes' largest bound (a certified bound, finite).

A node still above the threshold that one relaxation evaluates exactly (no unstable free row) holds
a pattern D whose ``cᵀ J_D s`` (recomputed from the weights) is above the threshold or within rounding
of it: the decision stops there and proves nothing (D is not necessarily realised anywhere, so it is
not a lower bound on a local constant either, only on G over the patterns).

Floating point: every pair's bound carries 1e-9 of its absolute scale
``Σ_j (|W₃|ᵀ|c|)_j Σ_i |W₂|_ji (|W₁||s|)_i`` (which bounds every partial sum, including the rounding
of u and a), far above the rounding of the ≤ 2·width updates behind a node's sums; a chord through
a bound that is off by δ moves by at most δ, so the margin covers it. Pruning compares the inflated
bound with the threshold, so every prune is a proof.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.pattern_bnb import MAX_PAIRS, PatternNormBound
from privcore.validation import check_int, check_real

__all__ = ["bilinear_pattern_decide"]

#: relative inflation of every bound before it may prune (rounding of float64 sums is ~1e-15)
_SAFETY = 1e-9
#: largest absolute scale of a pair: every sum of the search is at most it, so none overflows
_MAX_SCALE = 1e280
#: pairs whose search trees are processed together
_CHUNK_PAIRS = 512
#: open nodes kept in one array before a frontier is split (depth first on halves)
_MAX_FRONTIER = 1 << 12


@dataclass
class _Nodes:
    """Open nodes: pair id, layer states ``s`` (−1 free, 0 off, 1 on; layer 1 then layer 2) and, per
    relaxation, every row's fixed part ``c`` and its range ``[l, h]`` over the free choices, stacked as
    ``fa = [c, h, l]`` (A: layer-2 rows over layer-1 choices) and ``fb`` (B: layer-1 rows over layer-2
    choices), each of shape (3, nodes, rows), so that selecting nodes moves four arrays."""

    pid: np.ndarray
    s: np.ndarray
    fa: np.ndarray
    fb: np.ndarray

    def take(self, sel: np.ndarray) -> _Nodes:
        return _Nodes(self.pid[sel], self.s[sel], self.fa[:, sel], self.fb[:, sel])

    @property
    def size(self) -> int:
        return int(self.pid.size)

    @property
    def n1(self) -> int:
        return int(self.fb.shape[2])

    @property
    def s1(self) -> np.ndarray:
        return self.s[:, : self.n1]

    @property
    def s2(self) -> np.ndarray:
        return self.s[:, self.n1 :]


def _chord(c: np.ndarray, h: np.ndarray, low: np.ndarray, free: np.ndarray, on: np.ndarray,
           lp_free: np.ndarray, coef: np.ndarray, side: np.ndarray, w: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One relaxation for every node: rows ``t_r = c_r + Σ_k m_rk d_k`` over the LP side's free
    variables k (``m_rk = coef_r · w_rk · side_k``), each in ``[low_r, h_r]``; rows ``free``/``on``.
    Returns (bound, chord gap per row, slope per row).

    A free row's slope is ``h/(h − l)`` clipped to [0, 1] (1 when ``l ≥ 0``: relu is the identity
    there; 0 when ``h ≤ 0``; a width below 1e-300, only ever a row with nothing free, gives 1 or 0 by
    the sign of h) and its line ``α (t − min(l, 0))``; an on row's is t, an off row's 0."""
    with np.errstate(over="ignore"):
        alpha = np.maximum(h - low, 1e-300)
        np.divide(h, alpha, out=alpha)
    np.clip(alpha, 0.0, 1.0, out=alpha)
    alpha = np.where(free, alpha, on)
    gap = np.minimum(low, 0.0)
    gap *= alpha
    np.negative(gap, out=gap)
    gap *= free  # −α·min(l, 0): the chord's height above relu at 0 (0 unless the row is unstable)
    g = (alpha * coef) @ w
    g *= side
    np.maximum(g, 0.0, out=g)
    g *= lp_free
    bound = np.einsum("ij,ij->i", alpha, c) + gap.sum(axis=1) + g.sum(axis=1)
    return bound, gap, alpha


class _Search:
    def __init__(self, net: ReluNetwork, U: np.ndarray, A: np.ndarray, slack: np.ndarray, threshold: float,
                 deadline: float | None, max_nodes: int) -> None:
        _, self.w2, _ = net.weights
        self.w2t = np.ascontiguousarray(self.w2.T)
        self.U, self.A, self.slack = U, A, slack
        self.tau = threshold
        self.deadline, self.max_nodes = deadline, max_nodes
        self.nodes = 0
        self.pruned_max = -math.inf
        self.open_max = -math.inf
        self.found: tuple[float, np.ndarray] | None = None

    def bounds(self, f: _Nodes) -> tuple[np.ndarray, ...]:
        """(bound, A's gaps, B's gaps, A's slopes, B's slopes, u, a) per node."""
        u, a = self.U[f.pid], self.A[f.pid]
        free, on = f.s < 0, f.s > 0
        n1 = f.n1
        free1, free2 = free[:, :n1], free[:, n1:]
        ba, gap_a, alpha_a = _chord(*f.fa, free2, on[:, n1:], free1, a, u, self.w2)
        bb, gap_b, alpha_b = _chord(*f.fb, free1, on[:, :n1], free2, u, a, self.w2t)
        np.minimum(ba, bb, out=ba)
        ba += self.slack[f.pid]
        return ba, gap_a, gap_b, alpha_a, alpha_b, u, a

    def root(self, pid: np.ndarray, s1: np.ndarray, s2: np.ndarray) -> _Nodes:
        """Nodes for pairs ``pid`` with the given initial states (the neurons fixed by the caller)."""
        u, a = self.U[pid], self.A[pid]
        n = pid.size

        def sums(x: np.ndarray, y: np.ndarray, w: np.ndarray, st: np.ndarray) -> tuple[np.ndarray, ...]:
            # rows r of y·(w @ (x ∘ d)) over the states st of the columns: fixed part, range
            on, free = (st > 0).astype(np.float64), (st < 0).astype(np.float64)
            wp, wn = np.maximum(w, 0.0).T, np.minimum(w, 0.0).T
            xp, xn = np.maximum(x, 0.0) * free, np.minimum(x, 0.0) * free
            c = y * ((x * on) @ w.T)
            pos = xp @ wp + xn @ wn  # Σ max(0, w x) over free columns
            neg = xn @ wp + xp @ wn
            return c, c + np.where(y >= 0, y * pos, y * neg), c + np.where(y >= 0, y * neg, y * pos)

        states = np.broadcast_to(np.concatenate([s1, s2]), (n, s1.size + s2.size)).astype(np.int8)
        fa = np.stack(sums(u, a, self.w2, states[:, : s1.size]))
        fb = np.stack(sums(a, u, self.w2t, states[:, s1.size :]))
        return _Nodes(pid, states, fa, fb)

    def exact_node(self, f: _Nodes, exact_a: np.ndarray, exact_b: np.ndarray, alpha_a: np.ndarray,
                   alpha_b: np.ndarray) -> None:
        """A node above the threshold that relaxation A (or B) evaluates exactly (no unstable free row):
        its best pattern and that pattern's value, recomputed from the weights, go to :attr:`found`.
        Its value is above the threshold or within rounding of it: either way nothing is proven."""
        k = int(np.flatnonzero(exact_a | exact_b)[0])
        pid = int(f.pid[k])
        u, a = self.U[pid], self.A[pid]
        if exact_a[k]:  # layer 2 settled by the slopes, layer 1's free neurons by the LP's signs
            d2 = alpha_a[k] > 0.5
            d1 = np.where(f.s1[k] < 0, ((d2 * a) @ self.w2) * u > 0.0, f.s1[k] > 0)
        else:
            d1 = alpha_b[k] > 0.5
            d2 = np.where(f.s2[k] < 0, ((d1 * u) @ self.w2t) * a > 0.0, f.s2[k] > 0)
        value = float((((u * d1) @ self.w2t) * d2 * a).sum())
        self.found = (value, np.concatenate([d1, d2]))

    def out_of_budget(self) -> bool:
        late = self.deadline is not None and time.perf_counter() > self.deadline
        return late or self.nodes > self.max_nodes

    def frontier_bound(self, f: _Nodes) -> float:
        return float(self.bounds(f)[0].max()) if f.size else -math.inf

    def run(self, live: _Nodes, root_bound: np.ndarray) -> str:
        """Every root node of ``live`` (most promising first); "pass", "above" (a pattern above the
        threshold, or within rounding of it) or "budget" (:attr:`open_max` then bounds the rest)."""
        for s0 in range(0, live.size, _CHUNK_PAIRS):
            stack = [live.take(np.arange(s0, min(s0 + _CHUNK_PAIRS, live.size)))]
            while stack:
                f = stack.pop()
                while f.size:
                    b, gap_a, gap_b, alpha_a, alpha_b, u, a = self.bounds(f)
                    self.nodes += f.size
                    keep = b > self.tau
                    kept = np.flatnonzero(keep)
                    if kept.size < b.size:
                        self.pruned_max = max(self.pruned_max, float(b[~keep].max()))
                    if not kept.size:
                        break
                    exact_a, exact_b = gap_a.max(axis=1) <= 0.0, gap_b.max(axis=1) <= 0.0
                    if (exact_a | exact_b)[kept].any():
                        self.exact_node(f, exact_a & keep, exact_b & keep, alpha_a, alpha_b)
                        return "above"
                    if self.out_of_budget():
                        rest = root_bound[s0 + _CHUNK_PAIRS :]
                        self.open_max = max([float(b[kept].max()), *(self.frontier_bound(g) for g in stack),
                                             float(rest.max()) if rest.size else -math.inf])
                        return "budget"
                    if kept.size > _MAX_FRONTIER:
                        stack.append(f.take(kept[kept.size // 2 :]))
                        kept = kept[: kept.size // 2]
                    f = self.branch(f, kept, gap_a, gap_b, u, a)
        return "pass"

    def branch(self, f: _Nodes, kept: np.ndarray, gap_a: np.ndarray, gap_b: np.ndarray, u: np.ndarray,
               a: np.ndarray) -> _Nodes:
        """Two children for each node ``kept``: the unstable row with the largest chord gap, in the
        relaxation whose gaps are larger in ℓ2, fixed off (first half of the result) and on (second)."""
        ga, gb = gap_a[kept], gap_b[kept]
        on_a = np.einsum("ij,ij->i", ga, ga) >= np.einsum("ij,ij->i", gb, gb)
        x, y = kept[~on_a], kept[on_a]  # x: a layer-1 neuron is fixed, y: a layer-2 neuron
        i, j = np.argmax(gb[~on_a], axis=1), np.argmax(ga[on_a], axis=1)
        mx, n = x.size, kept.size
        order = np.concatenate([x, y])
        st = np.empty((2 * n, f.s.shape[1]), dtype=np.int8)
        fa = np.empty((3, 2 * n, f.fa.shape[2]))
        fb = np.empty((3, 2 * n, f.fb.shape[2]))
        np.take(f.s, order, axis=0, out=st[:n])
        np.take(f.fa, order, axis=1, out=fa[:, :n])
        np.take(f.fb, order, axis=1, out=fb[:, :n])
        st[n:], fa[:, n:], fb[:, n:] = st[:n], fa[:, :n], fb[:, :n]
        pid = np.concatenate([f.pid[order], f.pid[order]])
        child = _Nodes(pid, st, fa, fb)
        rx, ry = np.arange(mx), np.arange(mx, n)
        st[rx, i], st[n + rx, i] = 0, 1
        st[ry, f.n1 + j], st[n + ry, f.n1 + j] = 0, 1
        if mx:  # column i leaves A's free sums: off child h −= col⁺, l −= col⁻; on child c += col,
            col = a[x] * self.w2t[i]  # h += col⁻, l += col⁺
            col *= u[x, i][:, None]
            cp, cn = np.maximum(col, 0.0), np.minimum(col, 0.0)
            ca, ha, la = fa
            ha[:mx] -= cp
            la[:mx] -= cn
            ca[n : n + mx] += col
            ha[n : n + mx] += cn
            la[n : n + mx] += cp
        if mx < n:  # row j leaves B's free sums, likewise
            row = u[y] * self.w2[j]
            row *= a[y, j][:, None]
            rp, rn = np.maximum(row, 0.0), np.minimum(row, 0.0)
            cb, hb, lb = fb
            hb[mx:n] -= rp
            lb[mx:n] -= rn
            cb[n + mx :] += row
            hb[n + mx :] += rn
            lb[n + mx :] += rp
        return child


def bilinear_pattern_decide(
    net: ReluNetwork,
    threshold: float,
    norms: Norms,
    *,
    on: np.ndarray | None = None,
    off: np.ndarray | None = None,
    deadline: float | None = None,
    max_nodes: int = 1 << 62,
) -> PatternNormBound | None:
    """Decide ``G(on, off) ≤ threshold`` for a network with exactly two hidden layers (module
    docstring): ``upper ≤ threshold`` when proven (the largest pruned bound), ``inf`` when a pattern
    consistent with the fixed neurons has ``‖J_D‖`` above (or within rounding of) the threshold
    (``lower``/``pattern`` that one), and, out of nodes or past ``deadline`` (a
    :func:`time.perf_counter` value), the open nodes' largest bound (``complete`` False; finite,
    certified). None when the network does not have two hidden layers, has too many vertex pairs
    (:data:`~privcore.lipschitz.pattern_bnb.MAX_PAIRS`) or weights so large that a pair's absolute
    scale is not far below float64's range (nothing could overflow then)."""
    threshold = check_real("threshold", threshold)
    if math.isnan(threshold):
        raise ValueError("threshold must be a real number in [−∞, ∞], got nan")
    max_nodes = check_int("max_nodes", max_nodes, minimum=1)
    if len(net.weights) != 3 or norms.pair_count(net.in_dim, net.out_dim) > MAX_PAIRS:
        return None
    n1, n2 = net.hidden_widths
    on = np.zeros(n1 + n2, dtype=bool) if on is None else np.asarray(on, dtype=bool)
    off = np.zeros(n1 + n2, dtype=bool) if off is None else np.asarray(off, dtype=bool)
    if on.shape != (n1 + n2,) or off.shape != (n1 + n2,) or (on & off).any():
        raise ValueError(f"on/off must be disjoint boolean masks over the {n1 + n2} hidden neurons")
    state = np.where(on, 1, np.where(off, 0, -1)).astype(np.int8)
    s1, s2 = state[:n1], state[n1:]
    S, C = norms.dual_vertices(net.in_dim, net.out_dim)
    w1, w2, w3 = net.weights
    U0, A0 = S @ w1.T, C @ w3
    ks, kc = U0.shape[0], A0.shape[0]
    U, A = np.repeat(U0, kc, axis=0), np.tile(A0, (ks, 1))
    su, sa = np.abs(S) @ np.abs(w1).T, np.abs(C) @ np.abs(w3)
    scale = ((np.repeat(su, kc, axis=0) @ np.abs(w2).T) * np.tile(sa, (ks, 1))).sum(axis=1)
    if not np.all(scale < _MAX_SCALE):
        return None
    slack = _SAFETY * (1.0 + scale)
    search = _Search(net, U, A, slack, float(threshold), deadline, max_nodes)
    roots, bounds = [], []
    for k in range(0, U.shape[0], 4096):
        nodes = search.root(np.arange(k, min(k + 4096, U.shape[0])), s1, s2)
        b = search.bounds(nodes)[0]
        search.nodes += b.size
        live = b > threshold
        if (~live).any():
            search.pruned_max = max(search.pruned_max, float(b[~live].max()))
        roots.append(nodes.take(live))
        bounds.append(b[live])
    root = np.concatenate(bounds)
    live_nodes = _Nodes(np.concatenate([r.pid for r in roots]), np.concatenate([r.s for r in roots]),
                        np.concatenate([r.fa for r in roots], axis=1),
                        np.concatenate([r.fb for r in roots], axis=1))
    order = np.argsort(-root, kind="stable")
    outcome = search.run(live_nodes.take(order), root[order])
    lower, pattern = (-math.inf, None) if search.found is None else search.found
    found = dict(lower=lower, nodes=search.nodes, pattern=pattern)
    if outcome == "above":
        return PatternNormBound(upper=math.inf, complete=True, **found)
    if outcome == "budget":
        return PatternNormBound(upper=max(search.open_max, search.pruned_max), complete=False, **found)
    upper = search.pruned_max if math.isfinite(search.pruned_max) else threshold
    return PatternNormBound(upper=min(upper, threshold), complete=True, **found)
