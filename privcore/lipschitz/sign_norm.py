"""The ℓ∞→ℓ1 operator norm ``‖A‖_{∞→1} = max_{s ∈ {±1}^k} ‖A s‖₁``: exact by branch and bound.

The maximum of a convex function over the cube is at a vertex, and ``‖A‖_{∞→1} = ‖Aᵀ‖_{∞→1} =
max_{s, t} tᵀAs`` (NP-hard in general, Rohn 2000), so the search runs over the signs of the smaller
side. Columns are sorted by decreasing ℓ1 norm; a node fixes the signs of the first ``j`` of them,
``p = Σ_{i<j} s_i a_i``, and its completions are worth ``‖p + B u‖₁`` over the free columns ``B``
and their signs ``u``. With ``R_r = Σ_i |b_ri|`` and σ = sign(p), every row satisfies
``|p_r + q_r| ≤ |p_r| + σ_r q_r + 2(R_r − |p_r|)₊`` (exact when ``|p_r| ≥ R_r``: the row keeps its
sign) and ``|p_r + q_r| ≤ |p_r| + |q_r|``. Taking the first for the rows of a set S (here
``|p_r| ≥ θR_r`` for θ ∈ {1, ½, 0}) and collapsing them into the one row ``c = Σ_{r∈S} σ_r b_r``,

    max_u ‖p + B u‖₁ ≤ ‖p‖₁ + 2 Σ_{r∈S} (R_r − |p_r|)₊ + Σ_i (|c_i| + Σ_{r∉S} |b_ri|),

and ``max_u ‖p + B u‖₁ ≤ ‖p‖₁ + ‖B‖_{∞→1}``, where the suffix norms ``‖B‖`` are solved exactly
first, from the right (Russian doll search, Verfaillie et al. 1996; the last ``LEAF_BITS`` columns by
enumeration). The incumbent comes from alternating maximisation (``t = sign(As)``, ``s = sign(Aᵀt)``,
the standard heuristic) with single sign flips, from several starts. Nodes are expanded in
vectorised blocks, depth first, and the last ``LEAF_BITS`` columns are enumerated at once.

Floating point: every value reported as reached is ``‖A s‖₁`` of a sign vector evaluated in
float64, as the plain enumeration evaluates it (:attr:`SignNorm.lower`). A node is pruned when its
bound is within ``TIE_RTOL`` (relative) of the incumbent, and the largest pruned bound is carried
into the result: a complete search returns ``max(incumbent, pruned bounds)``, the enumeration's
value up to 1e-13 and rounding. A search stopped by its node limit returns the largest bound still
open plus ``(k + m + 2)·2⁻⁵²·Σ|a_ij|`` (each partial sum's rounding error is below
``k·2⁻⁵³·Σ_i|a_ri|``), a certified upper bound, with ``exact=False``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from privcore.lipschitz.deadline import check_deadline

__all__ = ["DEFAULT_MAX_NODES", "LEAF_BITS", "TIE_RTOL", "SignNorm", "inf_to_one_bnb"]

#: columns enumerated together at the leaves of the search (2^LEAF_BITS sign vectors per node)
LEAF_BITS = 8
#: relative slack within which a node bound counts as tied with the incumbent (and is pruned)
TIE_RTOL = 1e-13
#: nodes a search bounds before it stops with a certified upper bound
DEFAULT_MAX_NODES = 1 << 18
#: most nodes bounded together (one block of matrix products)
_BLOCK = 2048
#: most leaf nodes enumerated together
_LEAF_BLOCK = 256


@dataclass(frozen=True)
class SignNorm:
    """``lower ≤ ‖A‖_{∞→1} ≤ value`` (up to float64 rounding of ``lower``, see module docstring);
    ``exact`` when the search completed, ``nodes`` the nodes it bounded."""

    value: float
    lower: float
    exact: bool
    nodes: int


@functools.lru_cache(maxsize=8)
def _all_signs(n: int) -> np.ndarray:
    """All of {±1}^n as columns ``(n, 2^n)``."""
    codes = np.arange(1 << n, dtype=np.int64)
    out = 1.0 - 2.0 * ((codes[None, :] >> np.arange(n, dtype=np.int64)[:, None]) & 1)
    out.setflags(write=False)
    return out


def _local_search(a: np.ndarray, starts: np.ndarray, rounds: int = 64) -> np.ndarray:
    """The best sign vector reached from ``starts`` (n, k) by alternating maximisation and single
    sign flips (each round: to a fixed point of ``s = sign(Aᵀ sign(As))``, then the best flip)."""
    s = np.where(starts >= 0.0, 1.0, -1.0)
    tol = 1e-12 * (1.0 + float(np.abs(a).sum()))
    for _ in range(rounds):
        for _ in range(rounds):
            nxt = np.where(np.where(s @ a.T >= 0.0, 1.0, -1.0) @ a >= 0.0, 1.0, -1.0)
            if np.array_equal(nxt, s):
                break
            s = nxt
        y = s @ a.T  # (n, m); flipping s_i moves y by −2 s_i a_i
        flip = np.abs(y[:, :, None] - 2.0 * s[:, None, :] * a[None, :, :]).sum(axis=1)  # (n, k)
        best = flip.argmax(axis=1)
        rows = np.flatnonzero(flip[np.arange(s.shape[0]), best] > np.abs(y).sum(axis=1) + tol)
        if rows.size == 0:
            break
        s = s.copy()
        s[rows, best[rows]] *= -1.0
    return s[int(np.abs(s @ a.T).sum(axis=1).argmax())]


def _starts(a: np.ndarray, rng_seed: int = 0) -> np.ndarray:
    """Start sign vectors: the top right singular vector, each column's own direction, random ones."""
    k = a.shape[1]
    out = [np.ones(k)]
    try:
        _, _, vt = np.linalg.svd(a, full_matrices=False)
        out.append(vt[0])
    except np.linalg.LinAlgError:
        pass
    cols = np.argsort(-np.abs(a).sum(axis=0))[: min(k, 8)]
    out.extend(np.sign(a[:, j]) @ a for j in cols)  # s = sign(Aᵀ sign(a_j))
    rng = np.random.default_rng(rng_seed)
    out.extend(rng.choice((-1.0, 1.0), size=(8, k)))
    return np.array(out)


def inf_to_one_bnb(a: np.ndarray, *, max_nodes: int = DEFAULT_MAX_NODES) -> SignNorm:
    """``‖A‖_{∞→1}`` of one matrix by branch and bound over sign vectors (module docstring)."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"expected a matrix, got shape {a.shape}")
    if a.shape[0] < a.shape[1]:
        a = a.T
    a = a[np.abs(a).sum(axis=1) > 0.0]  # zero rows and columns add nothing
    a = a[:, np.abs(a).sum(axis=0) > 0.0]
    a = a[:, np.argsort(-np.abs(a).sum(axis=0), kind="stable")]
    k = a.shape[1]
    if k <= LEAF_BITS + 1:  # s_0 = +1 (s and −s tie), the rest enumerated
        val = float(np.abs(a[:, :1] + a[:, 1:] @ _all_signs(k - 1)).sum(axis=0).max()) if k else 0.0
        return SignNorm(value=val, lower=val, exact=True, nodes=1)
    search = _Search(a, max_nodes)
    best_s = _local_search(a, _starts(a))
    res = SignNorm(value=0.0, lower=0.0, exact=True, nodes=0)
    for j in range(search.depth - 1, -1, -1):  # Russian dolls: ‖A_{j:}‖ exactly, from the right
        # a doll's incumbent: the incumbent's restriction, or the next doll's value (‖A_{j:}‖ ≥
        # ‖A_{j+1:}‖ by convexity in s_j); only the whole matrix's must be a reached ‖A s‖₁
        start = float(np.abs(a[:, j:] @ best_s[j:]).sum())
        res = search.run(j, start if j == 0 else max(start, res.lower))
        if not res.exact:
            return res if j == 0 else _rest_bound(search, res, j, float(np.abs(a @ best_s).sum()))
        search.suffix[j] = res.value
    return res


class _Search:
    """The branch and bound over the columns ``j, j+1, …`` of ``a`` (sorted), sharing the suffix data."""

    def __init__(self, a: np.ndarray, max_nodes: int) -> None:
        m, k = a.shape
        self.a, self.absa, self.max_nodes, self.nodes = a, np.abs(a), max_nodes, 0
        self.margin = (k + m + 2) * 2.0**-52 * float(self.absa.sum())
        self.depth = k - LEAF_BITS  # columns fixed by branching; the rest enumerated at the leaves
        self.rows = np.hstack([np.cumsum(self.absa[:, ::-1], axis=1)[:, ::-1], np.zeros((m, 1))])
        self.leaf_vals = a[:, self.depth :] @ _all_signs(LEAF_BITS)  # (m, 2^LEAF_BITS)
        # ‖A_{j:}‖_{∞→1}: exact for the leaf block; ≤ ‖a_j‖₁ + ‖A_{j+1:}‖ until solved
        self.suffix = np.zeros(k + 1)
        self.suffix[self.depth] = float(np.abs(self.leaf_vals).sum(axis=0).max())
        for j in range(self.depth - 1, -1, -1):
            self.suffix[j] = self.suffix[j + 1] + self.absa[:, j].sum()

    def bound(self, j: int, p: np.ndarray) -> np.ndarray:
        """Upper bound on ``max_u ‖p + A_{j:} u‖₁`` for each partial sum ``p`` (N, m)."""
        return _node_bound(p, self.a[:, j:], self.absa[:, j:], self.rows[:, j], self.suffix[j])

    def run(self, first: int, best: float) -> SignNorm:
        """``‖A_{first:}‖_{∞→1}`` from the verified value ``best``, within the node budget left."""
        pruned = -np.inf
        stack: list[tuple[int, np.ndarray]] = [(first + 1, self.a[:, first][None, :].copy())]  # s = +1
        while stack:
            check_deadline("the ∞→1 norm's branch and bound")
            j, p = stack.pop()
            self.nodes += p.shape[0]
            ub = self.bound(j, p)
            keep = ub > best * (1.0 + TIE_RTOL)
            if not keep.all():
                pruned = max(pruned, float(ub[~keep].max()))
                p, ub = p[keep], ub[keep]
            if p.shape[0] == 0:
                continue
            if j == self.depth:  # every completion of the last LEAF_BITS columns at once
                for s0 in range(0, p.shape[0], _LEAF_BLOCK):
                    vals = np.abs(p[s0 : s0 + _LEAF_BLOCK, :, None] + self.leaf_vals[None]).sum(axis=1)
                    best = max(best, float(vals.max()))
                continue
            if self.nodes > self.max_nodes:
                left = [float(ub.max())] + [float(self.bound(jj, q).max()) for jj, q in stack]
                upper = max(best, pruned, *left) + self.margin
                return SignNorm(value=upper, lower=best, exact=False, nodes=self.nodes)
            children = np.concatenate([p - self.a[:, j], p + self.a[:, j]])  # the + child is popped first
            for s0 in range(0, children.shape[0], _BLOCK):
                stack.append((j + 1, children[s0 : s0 + _BLOCK]))
        return SignNorm(value=max(best, pruned), lower=best, exact=True, nodes=self.nodes)


def _rest_bound(search: _Search, res: SignNorm, j: int, lower: float) -> SignNorm:
    """A certified bound on the whole norm when the doll for the columns ``j:`` ran out of nodes:
    ``‖A‖ ≤ Σ_{i<j} ‖a_i‖₁ + ‖A_{j:}‖``."""
    upper = res.value + float(search.absa[:, :j].sum()) + search.margin
    return SignNorm(value=max(lower, upper), lower=lower, exact=False, nodes=search.nodes)


def _node_bound(
    p: np.ndarray, b: np.ndarray, absb: np.ndarray, rows: np.ndarray, norm_b: float
) -> np.ndarray:
    """Upper bound on ``max_u ‖p + B u‖₁`` for each partial sum ``p`` (N, m) (module docstring)."""
    absp = np.abs(p)
    sign = np.where(p >= 0.0, 1.0, -1.0)
    out = np.full(p.shape[0], np.inf)
    base = absp.sum(axis=1)
    for theta in (1.0, 0.5, 0.0):
        inside = absp >= theta * rows  # rows taken at p's sign: |p + q| ≤ |p| + σq + 2(R − |p|)₊
        slack = 2.0 * np.where(inside, np.maximum(rows - absp, 0.0), 0.0).sum(axis=1)
        collapsed = np.abs(np.where(inside, sign, 0.0) @ b).sum(axis=1)
        outside = ((~inside).astype(np.float64) @ absb).sum(axis=1)
        out = np.minimum(out, base + slack + collapsed + outside)
    return np.minimum(out, base + norm_b)
