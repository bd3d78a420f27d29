"""The largest Jacobian norm over activation patterns, by branch and bound per vertex pair.

For a ReLU network ``f = W_L ∘ ReLU ∘ … ∘ ReLU ∘ W_1`` (biases do not enter the Jacobian) every
generalised Jacobian is ``J_D = W_L D_{L−1} W_{L−1} … D_1 W_1`` for a 0/1 activation pattern D, and
LipMIP's value over a box is the largest ``‖J_D‖`` over the patterns realised in the box (Jordan &
Dimakis, NeurIPS 2020, Thm. 3.2; :mod:`privcore.lipschitz.patterns`). Dropping "realised" gives

    G(on, off) = max { ‖J_D‖ : D_i = 1 on ``on``, D_i = 0 on ``off`` },

a certified upper bound on L over every box whose interval bounds make ``on`` active and ``off``
inactive, monotone under inclusion (a smaller box fixes more neurons), and with nothing fixed a
bound on the global Lipschitz constant that is often an order of magnitude below the product of
the layers' operator norms. It is the bound the enumeration of :mod:`privcore.lipschitz.patterns`
computes for narrow networks; this module computes it for wide ones (8→32→32→8: 2^64 patterns).

Both operator norms are maxima over vertices: ``‖J‖ = max cᵀ J s`` over the vertices s of the input
ball (half of them: (c, s) and (−c, −s) give the same value) and c of the dual output ball
(``{±1}^m`` for ℓ1 output, ±e_k for ℓ∞). For one vertex pair the objective
``cᵀ W_L D_{L−1} … D_1 W_1 s`` is multilinear in the pattern, and

* its last hidden layer is maximised in closed form: with ``a = W_Lᵀ c`` and the pre-activation
  signal ``u`` of that layer, ``max over D of Σ_i D_i a_i u_i = Σ_i max(0, a_i u_i)``;
* earlier layers are branched neuron by neuron (breadth first, all nodes of a chunk of pairs in
  one array): a node has fixed the first neurons of a layer, so the next signal lies in an interval
  (the free neurons' contributions taken at their extremes), which interval arithmetic carries to
  the last hidden layer and the closed form above turns into an upper bound on every completion.
  A node whose bound is at most the target is pruned; a leaf is a full pattern and its exact value.

This is the bilinear 0/1 program ``max d₂ᵀ diag(a) W₂ diag(W₁s) d₁`` for two hidden layers: hard in
general, but per vertex pair the bound above prunes it to a few hundred nodes on the networks of
this product. Measured on a random 8→32→32→8 (2^64 patterns, 32 768 pairs; two cores): G ≤ 4.81
decided in about a second, G = 3.51698 itself in about 25 s, where LipMIP's all-pattern MILP on
Gurobi still had a bound of 9.0 after 120 s (the product of the layers' norms is 60.2). Decisions
"G ≤ τ?" stop at the first leaf above τ; :func:`max_pattern_norm` without a threshold prunes against
the best leaf (seeded by coordinate ascent) and returns G itself.
Floating point: every bound is inflated by 1e-9 of the pair's absolute scale (far above the
rounding of its sums) before it prunes anything, so a pruned node is a proof.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from privcore.lipschitz.deadline import check_deadline
from privcore.lipschitz.network import ReluNetwork, as_network
from privcore.lipschitz.norms import DEFAULT_NORMS, Norms
from privcore.validation import check_int, check_real

__all__ = ["MAX_PAIRS", "PatternNormBound", "global_pattern_bound", "max_pattern_norm", "pattern_norm_floor"]

#: most vertex pairs (input-ball vertices × dual output vertices) the search enumerates
MAX_PAIRS = 1 << 18
#: relative inflation of every bound before it may prune (rounding of float64 sums is ~1e-15)
_SAFETY = 1e-9
#: pairs processed together (their frontiers share arrays)
_CHUNK_PAIRS = 256
#: open nodes kept in one array before a frontier is split
_MAX_FRONTIER = 1 << 13


@dataclass(frozen=True)
class PatternNormBound:
    """Result of :func:`max_pattern_norm`.

    ``upper``: certified, every pattern consistent with the fixed neurons has ``‖J_D‖ ≤ upper``
    (``inf`` when the search stopped at a leaf above the threshold; when it ran out of nodes, the
    largest bound of a node still open, finite).
    ``lower``: ``‖J_D‖`` of the best pattern found (consistent with the fixed neurons; not
    necessarily realised anywhere, so it is *not* a lower bound on a local Lipschitz constant).
    ``pattern``: that pattern (0/1 per hidden neuron). ``nodes``: branch-and-bound nodes visited.
    ``complete``: the search ended (False: ``max_nodes`` was reached; ``upper`` is then the open
    nodes' bound, looser than the exact maximum).
    """

    upper: float
    lower: float
    nodes: int
    complete: bool
    pattern: np.ndarray | None = None

    def at_most(self, threshold: float) -> bool | None:
        """True if ``G ≤ threshold`` is proven, False if a pattern above it was found, else None."""
        if self.upper <= threshold:
            return True
        if self.lower > threshold:
            return False
        return None


def _vertex_pairs(net: ReluNetwork, norms: Norms) -> tuple[np.ndarray, np.ndarray]:
    """``(U, A)``: ``U[p] = W_1 s_p`` and ``A[p] = W_Lᵀ c_p`` over all vertex pairs p."""
    S, C = norms.dual_vertices(net.in_dim, net.out_dim)
    U = S @ net.weights[0].T  # (k_s, n_1)
    A = C @ net.weights[-1]  # (k_c, n_{L-1})
    ks, kc = U.shape[0], A.shape[0]
    return np.repeat(U, kc, axis=0), np.tile(A, (ks, 1))


def _last_layer(
    a: np.ndarray, lo: np.ndarray, hi: np.ndarray, on: np.ndarray, free: np.ndarray
) -> np.ndarray:
    """``max over D of Σ_i D_i a_i u_i`` for ``u ∈ [lo, hi]`` (rows are nodes): free neurons take
    ``max(0, a_i u_i)``, active ones ``a_i u_i``, inactive ones nothing."""
    best = np.maximum(a * lo, a * hi)
    return (np.where(free, np.maximum(best, 0.0), 0.0) + np.where(on, best, 0.0)).sum(axis=1)


@dataclass
class _Frontier:
    """Open nodes that have fixed the first ``t`` neurons (in each node's ``order``) of hidden layer
    ``k``: pair id, exact signal ``x`` of layer k, partial next signal ``y``, the free neurons' still
    unassigned contributions to it (``pos``/``neg`` parts), branching order and the pattern so far."""

    k: int
    t: int
    pid: np.ndarray
    x: np.ndarray
    y: np.ndarray
    pos: np.ndarray
    neg: np.ndarray
    order: np.ndarray
    n_free: np.ndarray
    pats: np.ndarray

    def take(self, sel: np.ndarray) -> _Frontier:
        return _Frontier(
            self.k,
            self.t,
            *(
                v[sel]
                for v in (self.pid, self.x, self.y, self.pos, self.neg, self.order, self.n_free, self.pats)
            ),
        )

    @property
    def size(self) -> int:
        return int(self.pid.size)


class _Search:
    """Branch and bound over the patterns of hidden layers 1 … L−2, all pairs of a chunk at once;
    breadth first within a frontier, which is split (depth first) when it exceeds
    :data:`_MAX_FRONTIER` nodes, so memory stays bounded."""

    def __init__(
        self, net: ReluNetwork, on: np.ndarray, off: np.ndarray, A: np.ndarray, slack: np.ndarray
    ) -> None:
        self.w = net.weights
        self.widths = net.hidden_widths
        offs = net.hidden_offsets
        self.on, self.off = net.split_pattern(on), net.split_pattern(off)
        self.free = [~(a | b) for a, b in zip(self.on, self.off, strict=True)]
        self.offs = offs
        self.A, self.slack = A, slack
        self.nodes = 0
        self.pruned_max = -math.inf
        #: when the node budget runs out: the largest bound of a node still open (a certified bound on
        #: every pattern below it), so the search still returns a finite upper bound
        self.open_max = -math.inf
        self.best, self.best_pat = -math.inf, None

    def completion(self, layer: int, a: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Upper bound on every completion, given the pre-activation signal of hidden layer
        ``layer`` in ``[lo, hi]`` (interval arithmetic to the last hidden layer, then exact)."""
        last = len(self.widths) - 1
        for k in range(layer, last):
            vlo = np.where(self.on[k], lo, np.where(self.free[k], np.minimum(lo, 0.0), 0.0))
            vhi = np.where(self.on[k], hi, np.where(self.free[k], np.maximum(hi, 0.0), 0.0))
            mid, rad = (vlo + vhi) / 2.0 @ self.w[k + 1].T, (vhi - vlo) / 2.0 @ np.abs(self.w[k + 1]).T
            lo, hi = mid - rad, mid + rad
        return _last_layer(a, lo, hi, self.on[last], self.free[last])

    def start_layer(self, k: int, pid: np.ndarray, x: np.ndarray, pats: np.ndarray) -> _Frontier:
        """Nodes whose layers before k are fixed (``x`` exact): set layer k's stable neurons."""
        w, free = self.w[k + 1], self.free[k]
        xf = x * free
        wp, wn = np.maximum(w, 0.0).T, np.minimum(w, 0.0).T
        pos = np.maximum(xf, 0.0) @ wp + np.minimum(xf, 0.0) @ wn
        neg = np.maximum(xf, 0.0) @ wn + np.minimum(xf, 0.0) @ wp
        last = len(self.widths) - 1
        reach = np.abs(w).sum(axis=0) if k + 1 < last else np.abs(self.A[pid]) @ np.abs(w)
        weight = np.abs(xf) * reach  # branch on the most influential neuron first
        order = np.argsort(-weight, axis=1).astype(np.int32)
        pats = pats.copy()
        pats[:, self.offs[k] : self.offs[k + 1]] = self.on[k]
        return _Frontier(
            k, 0, pid, x, (x * self.on[k]) @ w.T, pos, neg, order, (weight > 0).sum(axis=1), pats
        )

    def leaves(
        self, pid: np.ndarray, x: np.ndarray, pats: np.ndarray, target: float, stop_above: bool
    ) -> tuple[float, bool]:
        """Complete patterns up to the last hidden layer (``x`` its exact signal): exact values."""
        k = len(self.widths) - 1
        a = self.A[pid]
        vals = _last_layer(a, x, x, self.on[k], self.free[k])
        self.nodes += vals.size
        if vals.size:
            i = int(np.argmax(vals))
            if vals[i] > self.best:
                self.best = float(vals[i])
                self.best_pat = pats[i].copy()
                self.best_pat[self.offs[k] : self.offs[k + 1]] = self.on[k][:] | (
                    self.free[k] & (a[i] * x[i] > 0)
                )
                if stop_above and self.best > target:
                    return target, True
                if not stop_above:
                    target = max(target, self.best)
        return target, False

    def _frontier_bound(self, f: _Frontier) -> float:
        if not f.size:
            return -math.inf
        ub = self.completion(f.k + 1, self.A[f.pid], f.y + f.neg, f.y + f.pos) + self.slack[f.pid]
        return float(ub.max())

    def run(self, U: np.ndarray, target: float, stop_above: bool, max_nodes: int,
            root: np.ndarray | None = None) -> tuple[bool, bool]:
        """Search every pair (rows of ``U``/``A``); prune nodes whose bound ≤ ``target`` (raised to the
        best leaf when ``stop_above`` is False). Returns (stopped at a leaf above target, ran out of
        nodes). Out of nodes, :attr:`open_max` bounds every pattern not yet settled: the open
        frontier's bounds and, for pairs not started, their ``root`` bounds."""
        last = len(self.widths) - 1
        for s0 in range(0, U.shape[0], _CHUNK_PAIRS):
            pid = np.arange(s0, min(s0 + _CHUNK_PAIRS, U.shape[0]))
            pats = np.zeros((pid.size, int(self.offs[-1])), dtype=bool)
            stack = [self.start_layer(0, pid, U[pid], pats)] if last > 0 else []
            if last == 0:
                target, above = self.leaves(pid, U[pid], pats, target, stop_above)
                if above:
                    return True, False
            while stack:
                f = stack.pop()
                while f.size:
                    check_deadline("the pattern branch and bound")
                    # bound every open node of this frontier, prune, then branch its next neuron
                    ub = self.completion(f.k + 1, self.A[f.pid], f.y + f.neg, f.y + f.pos) + self.slack[f.pid]
                    self.nodes += ub.size
                    keep = ub > target
                    if not keep.all():
                        self.pruned_max = max(self.pruned_max, float(ub[~keep].max()))
                        f = f.take(keep)
                    if self.nodes > max_nodes:
                        rest = root[s0 + _CHUNK_PAIRS:] if root is not None else np.full(1, math.inf)
                        self.open_max = max([float(ub[keep].max()) if keep.any() else -math.inf,
                                             *(self._frontier_bound(g) for g in stack),
                                             float(rest.max()) if rest.size else -math.inf])
                        return False, True
                    if not f.size:
                        break
                    done = f.n_free <= f.t
                    if done.any():  # layer k fully fixed for these nodes: y is the next exact signal
                        g = f.take(done)
                        if f.k + 1 == last:
                            target, above = self.leaves(g.pid, g.y, g.pats, target, stop_above)
                            if above:
                                return True, False
                        else:
                            stack.append(self.start_layer(f.k + 1, g.pid, g.y, g.pats))
                        f = f.take(~done)
                        if not f.size:
                            break
                    if f.size > _MAX_FRONTIER:  # depth first on halves: bounded memory
                        half = f.size // 2
                        stack.append(f.take(np.arange(half, f.size)))
                        f = f.take(np.arange(half))
                    idx = np.arange(f.size)
                    j = f.order[idx, f.t]
                    col = self.w[f.k + 1][:, j].T * f.x[idx, j][:, None]
                    pos = f.pos - np.maximum(col, 0.0)
                    neg = f.neg - np.minimum(col, 0.0)
                    on_pats = f.pats.copy()
                    on_pats[idx, self.offs[f.k] + j] = True
                    f = _Frontier(
                        f.k,
                        f.t + 1,
                        np.concatenate([f.pid, f.pid]),
                        np.concatenate([f.x, f.x]),
                        np.concatenate([f.y, f.y + col]),
                        np.concatenate([pos, pos]),
                        np.concatenate([neg, neg]),
                        np.concatenate([f.order, f.order]),
                        np.concatenate([f.n_free, f.n_free]),
                        np.concatenate([f.pats, on_pats]),
                    )
        return False, False


def _coordinate_ascent(
    net: ReluNetwork,
    U: np.ndarray,
    A: np.ndarray,
    starts: np.ndarray,
    on: np.ndarray,
    off: np.ndarray,
    rng: np.random.Generator,
    rounds: int = 8,
) -> np.ndarray:
    """A good pattern for the pairs ``starts``: each layer in turn set to its best given the others
    (``D_i = [left_i · right_i > 0]``), from random patterns. Its value is a lower bound on G."""
    widths = net.hidden_widths
    offs = net.hidden_offsets
    n = starts.size
    pat = rng.random((n, offs[-1])) < 0.5
    pat = (pat | on) & ~off
    free = ~(on | off)
    for _ in range(rounds):
        for k in range(len(widths)):
            right = U[starts]  # signal into layer k
            for i in range(k):
                right = (right * pat[:, offs[i] : offs[i + 1]]) @ net.weights[i + 1].T
            left = A[starts]  # row vector out of layer k
            for i in range(len(widths) - 1, k, -1):
                left = (left * pat[:, offs[i] : offs[i + 1]]) @ net.weights[i]
            sl = slice(offs[k], offs[k + 1])
            pat[:, sl] = np.where(free[sl], left * right > 0, pat[:, sl])
    return pat


def max_pattern_norm(
    net: ReluNetwork | Any,
    *,
    threshold: float | None = None,
    on: np.ndarray | None = None,
    off: np.ndarray | None = None,
    input_norm: str = "linf",
    output_norm: str = "l1",
    max_nodes: int = 20_000_000,
    seed: int = 0,
) -> PatternNormBound | None:
    """``G = max ‖J_D‖`` over activation patterns with ``on`` active and ``off`` inactive (module
    docstring; LipMIP's value with the realisability of D dropped: a certified upper bound on the
    local Lipschitz constant over any box whose stable neurons include these).

    With ``threshold`` it decides ``G ≤ threshold`` (stops at the first pattern above it; ``upper``
    ≤ threshold when it holds); without, it returns G (``upper`` = ``lower`` up to the 1e-9 safety
    margin). None when there are more than :data:`MAX_PAIRS` vertex pairs. ``seed`` only drives the
    coordinate-ascent heuristic that finds a good first pattern, never the proof. ``net`` is a
    :class:`ReluNetwork` or a torch module of Linear and ReLU layers (:func:`as_network`).
    """
    norms = Norms(input=input_norm, output=output_norm)
    if threshold is not None:
        threshold = check_real("threshold", threshold)
        if math.isnan(threshold):
            raise ValueError("threshold must be a real number in [−∞, ∞], got nan")
    max_nodes = check_int("max_nodes", max_nodes, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    net = as_network(net)
    n = net.n_hidden
    on = np.zeros(n, dtype=bool) if on is None else np.asarray(on, dtype=bool)
    off = np.zeros(n, dtype=bool) if off is None else np.asarray(off, dtype=bool)
    if on.shape != (n,) or off.shape != (n,) or (on & off).any():
        raise ValueError(f"on/off must be disjoint boolean masks over the {n} hidden neurons")
    if norms.pair_count(net.in_dim, net.out_dim) > MAX_PAIRS:
        return None
    U, A = _vertex_pairs(net, norms)
    if len(net.weights) == 1:  # affine: one Jacobian
        g = float(np.einsum("pi,pi->p", A, U).max())
        return PatternNormBound(
            upper=g, lower=g, nodes=U.shape[0], complete=True, pattern=np.zeros(0, dtype=bool)
        )
    # the absolute scale of each pair (bounds every partial sum): |a|ᵀ|W_{L−1}|…|W_2||u|
    scale = np.abs(U)
    for w in net.weights[1:-1]:
        scale = scale @ np.abs(w).T
    slack = _SAFETY * (1.0 + (scale * np.abs(A)).sum(axis=1))
    search = _Search(net, on, off, A, slack)
    # the root bound of every pair at once, to order them (most promising first) and drop the rest
    root = search.completion(0, A, U, U) + slack
    search.nodes += root.size
    order = np.argsort(-root, kind="stable")
    search.best, search.best_pat = _incumbent(net, U, A, order, on, off, seed)
    stop_above = threshold is not None
    target = float(threshold) if stop_above else search.best
    above, exhausted = stop_above and search.best > target, False
    if not above:
        pruned = root <= target
        if pruned.any():
            search.pruned_max = float(root[pruned].max())
        live = order[~pruned[order]]
        search.A, search.slack = A[live], slack[live]
        above, exhausted = search.run(U[live], target, stop_above, max_nodes, root=root[live])
    found = dict(lower=search.best, nodes=search.nodes, pattern=search.best_pat)
    if above:
        return PatternNormBound(upper=math.inf, complete=True, **found)
    upper = max(search.pruned_max, search.open_max, search.best + _SAFETY * (1.0 + abs(search.best)))
    return PatternNormBound(upper=upper, complete=not exhausted, **found)


def _incumbent(net: ReluNetwork, U: np.ndarray, A: np.ndarray, order: np.ndarray, on: np.ndarray,
               off: np.ndarray, seed: int) -> tuple[float, np.ndarray]:
    """Coordinate ascent from the 2048 most promising pairs (``order``): the best ``cᵀ J_D s`` found and
    its pattern D (on active, off inactive). A lower bound on G(on, off), a heuristic's, proving nothing."""
    top = order[: min(order.size, 2048)]
    pats = _coordinate_ascent(net, U, A, top, on, off, np.random.default_rng(seed))
    vals = _pattern_values(net, U[top], A[top], pats)
    i = int(np.argmax(vals))
    return float(vals[i]), pats[i]


def pattern_norm_floor(net: ReluNetwork, *, on: np.ndarray, off: np.ndarray, norms: Norms = DEFAULT_NORMS,
                       seed: int = 0) -> float:
    """A value of ``cᵀ J_D s`` for a pattern D with ``on`` active and ``off`` inactive, found by the
    coordinate ascent that seeds :func:`max_pattern_norm` (from the pairs with the largest root bounds),
    so G(on, off) is at least it: no decision "G(on, off) ≤ τ" below it can pass. For schedules of
    thresholds only; it proves no bound. 0 with more than :data:`MAX_PAIRS` vertex pairs or no hidden
    layer."""
    if norms.pair_count(net.in_dim, net.out_dim) > MAX_PAIRS or len(net.weights) < 2:
        return 0.0
    U, A = _vertex_pairs(net, norms)
    root = _Search(net, on, off, A, np.zeros(A.shape[0])).completion(0, A, U, U)
    return max(0.0, _incumbent(net, U, A, np.argsort(-root, kind="stable"), on, off, seed)[0])


def _pattern_values(net: ReluNetwork, U: np.ndarray, A: np.ndarray, pats: np.ndarray) -> np.ndarray:
    """``cᵀ J_D s`` for rows of (U = W_1 s, A = W_Lᵀ c, pattern D)."""
    layers = net.split_pattern(pats)
    val = U
    for i, d in enumerate(layers[:-1]):
        val = (val * d) @ net.weights[i + 1].T
    return (val * layers[-1] * A).sum(axis=1)


_MEMO: OrderedDict[tuple, PatternNormBound | None] = OrderedDict()
_LOCK = threading.Lock()


def global_pattern_bound(
    net: ReluNetwork,
    threshold: float | None,
    norms: Norms = DEFAULT_NORMS,
    *,
    max_nodes: int = 2_000_000,
) -> PatternNormBound | None:
    """:func:`max_pattern_norm` with no neuron fixed, deciding ``G ≤ threshold`` (or, with ``threshold``
    None, bounding G itself), memoised per model hash, norms and threshold (PTR asks once per model and
    Δp: when it holds, every ball passes). The node budget keeps a first answer within seconds; an
    undecided result (``upper`` = inf) is remembered too."""
    key = (net.digest, norms, None if threshold is None else float(threshold))
    with _LOCK:
        if key in _MEMO:
            _MEMO.move_to_end(key)
            return _MEMO[key]
    res = max_pattern_norm(net, threshold=threshold, max_nodes=max_nodes, **norms.kwargs)
    with _LOCK:
        _MEMO[key] = res
        while len(_MEMO) > 64:
            _MEMO.popitem(last=False)
    return res
