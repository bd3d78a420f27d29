"""Exact L(f, B) by box patterns whose exact norms are computed lazily: wide ∞→1 Jacobians.

:func:`~privcore.lipschitz.pattern_search.pattern_value` lists the box's patterns with their exact
norms, then finds the first, in decreasing norm, whose region meets the ball. Past
:data:`~privcore.lipschitz.norms.MAX_ENUMERATED_SIGN_DIM` an exact ℓ∞→ℓ1 norm is a branch and bound
of tens of milliseconds (d = 28: 256 box patterns took 16 s), yet only the few patterns whose region
meets the ball matter. Here every pattern gets a certified bound in microseconds,

    ‖A‖_{∞→1} ≤ min( Σ_ij |a_ij| ,  √(m·d) · σ_max(A) )

(the first: every |±aᵀs| ≤ Σ|a|; the second: ‖As‖₁ ≤ √m‖As‖₂ ≤ √m σ_max √d, with σ_max² from a
symmetric eigenvalue solve, inflated by 1e-10‖A‖_F² far above its rounding, and the sum by 1e-12),
and the patterns are visited in decreasing bound: screened as the table search screens them, one
region LP each, and an exact norm (:meth:`~privcore.lipschitz.norms.Norms.bracket`) only for a
pattern whose region meets the ball. The visit stops once the next bound is at most the largest
exact norm met: every pattern not visited is below it. So L is exactly the table search's value
(Jordan & Dimakis, NeurIPS 2020, Thm. 3.2: the largest ‖J_D‖ over the patterns realised in the
ball), at the cost of the LPs of the patterns above L's bound and the norms of the realised ones.
"""

from __future__ import annotations

import numpy as np

from privcore.lipschitz.bounds import ForwardBounds
from privcore.lipschitz.codes import codes_from_bits, to_bits
from privcore.lipschitz.deadline import check_deadline
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import MAX_ENUMERATED_SIGN_DIM, Norms
from privcore.lipschitz.pattern_search import PatternResult, _screen
from privcore.lipschitz.patterns import MAX_PATTERNS, PatternTable, _jacobians_of_codes, stable_masks
from privcore.lipschitz.regions import _distance_lp

__all__ = ["lazy_applies", "lazy_pattern_value", "sign_norm_bound"]

#: relative inflation of the eigenvalue (of ‖A‖_F²) and of the entry sum, far above their rounding
_EIG_SLACK = 1e-10
_SUM_SLACK = 1e-12


def lazy_applies(net: ReluNetwork, norms: Norms) -> bool:
    """Is the norm an ℓ∞→ℓ1 norm too wide to enumerate (where exact norms cost milliseconds each)?"""
    return (norms.input, norms.output) == ("linf", "l1") and min(net.in_dim, net.out_dim) > (
        MAX_ENUMERATED_SIGN_DIM
    )


def sign_norm_bound(jac: np.ndarray) -> np.ndarray:
    """A certified upper bound on ``‖A‖_{∞→1}`` for each matrix of the stack ``(P, m, d)`` (module
    docstring)."""
    m, d = jac.shape[-2:]
    total = np.abs(jac).sum(axis=(1, 2)) * (1.0 + _SUM_SLACK)
    gram = np.matmul(np.swapaxes(jac, 1, 2), jac) if d <= m else np.matmul(jac, np.swapaxes(jac, 1, 2))
    top = np.linalg.eigvalsh(gram)[:, -1]
    frob = np.einsum("pij,pij->p", jac, jac)
    spectral = np.sqrt(m * d * (np.maximum(top, 0.0) + _EIG_SLACK * frob))
    return np.minimum(total, spectral)


def lazy_pattern_value(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    fwd: ForwardBounds,
    norms: Norms,
    *,
    max_lps: int = 4096,
) -> PatternResult | None:
    """Exact ``L(f, B(center, radius))`` (module docstring), or None where it does not apply (a box
    with more than MAX_PATTERNS patterns, no realised pattern found, or more than ``max_lps`` LPs).
    ``lower`` < ``value`` only where a realised pattern's ∞→1 search stopped early (then not exact)."""
    on, off = stable_masks(fwd)
    free = np.flatnonzero(~(on | off))
    if (1 << free.size) > MAX_PATTERNS:
        return None
    bits = np.repeat(on[None, :].astype(np.float64), 1 << free.size, axis=0)
    bits[:, free] = to_bits(np.arange(1 << free.size, dtype=np.int64), free.size)
    codes = codes_from_bits(bits)
    jac = _jacobians_of_codes(net, codes)
    bound = sign_norm_bound(jac)
    order = np.argsort(-bound, kind="stable")
    table = PatternTable(codes=codes[order], norms=bound[order], n_hidden=net.n_hidden)
    jac, bound = jac[order], bound[order]
    scr = _screen(net, table, center, radius)
    best_low, best_up, hit_at, n_lps = -np.inf, -np.inf, None, 0
    for pos in range(scr.idx.size):
        k = int(scr.idx[pos])
        if bound[k] <= best_low:
            break  # every pattern from here on is at most the largest exact norm met
        if n_lps >= max_lps:
            return None
        check_deadline("the region LPs of a lazy pattern search")
        n_lps += 1
        hit = _distance_lp(scr.G[pos], scr.h[pos], center, radius)
        if hit is None:
            continue
        low, up = (float(v) for v in norms.bracket(jac[k]))
        best_up = max(best_up, up)
        if low > best_low:
            best_low, hit_at = low, (k, hit)
    if hit_at is None:
        return None
    k, (dist, point) = hit_at
    value = max(best_up, best_low)
    pattern = to_bits(table.codes[k : k + 1], net.n_hidden)[0]
    return PatternResult(passed=None, value=value, upper=value, lower=best_low, lower_radius=dist,
                         n_lps=n_lps, pattern=pattern, point=point)
