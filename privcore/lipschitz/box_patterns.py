"""The exact local Lipschitz constant over an arbitrary box ``[lo, hi]``, by activation patterns.

The engine's queries are ℓ∞ cubes B(z, r); a public clipping box (:mod:`privcore.lipschitz.global_box`)
has a different width per coordinate (collapsed VAE latents are ten times narrower than the others),
and the smallest cube around it is a much larger region. This module answers on the box itself.

LipMIP's value over a box is the largest ``‖J_D‖`` over the activation patterns D whose (closed) region
meets the box (Jordan & Dimakis, NeurIPS 2020, Thm. 3.2). So, as
:func:`~privcore.lipschitz.pattern_search.pattern_value` does on a cube:

1. the patterns with ``‖J_D‖ > τ`` (:func:`~privcore.lipschitz.patterns.threshold_pattern_table`,
   enumerated here from the weights, never read from disk) that agree with the neurons the box fixes
   (interval bounds, :func:`~privcore.lipschitz.bounds.forward_bounds`), in decreasing norm;
2. each is dropped when a proof shows its region misses the box: a single row ``G_j x ≤ h_j`` that no
   point of the box satisfies (a closed form, relaxed by 1e-7 relative, above the LP's tolerance), an
   LP on the first layer's rows only (a superset of the region, shared by every pattern with that
   first layer), or the LP on all rows (:func:`~privcore.lipschitz.regions.polytope_in_box`, HiGHS
   proving the rows relaxed by 1e-9 infeasible on the box);
3. the first pattern not dropped decides: its region meets the box (the LP found a point), so L over
   the box *is* its norm, or the LP was not solved, and its norm is still an upper bound (every
   pattern above it was proven empty).

A decision "L ≤ τ?" needs only step 2 for every pattern above τ: all dropped is a pass. Every pass and
every value is therefore a certified upper bound on L over the box, exactly as the engine's decisions
on cubes (docs/DESIGN.md). None where the threshold table does not apply (a hidden layer wider than
:data:`~privcore.lipschitz.patterns.MAX_THRESHOLD_LAYER_WIDTH`, or too many patterns above τ).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from privcore.lipschitz.bounds import forward_bounds
from privcore.lipschitz.codes import to_bits
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.patterns import stable_masks, threshold_pattern_table
from privcore.lipschitz.regions import polytope_in_box, region_rows

__all__ = ["BoxSearch", "box_pattern_search", "region_rows"]

#: relative slack before a single row refutes a region on the box (≥ the LPs' 1e-7 tolerance)
_ROW_SLACK = 1e-7
#: patterns whose region rows are built together
_CHUNK = 512


@dataclass(frozen=True)
class BoxSearch:
    """Outcome of :func:`box_pattern_search` at threshold ``threshold``.

    ``passed``: True when every pattern with norm > threshold was proven to miss the box (L ≤ threshold);
    False when one meets it (``value`` its norm, ``point`` the LP's point of its region in the box); None
    when a pattern's LP was not solved or the deadline came first (``value`` the norm of the first
    pattern not proven empty: still an upper bound on L over the box; ``pattern`` its 0/1 pattern).
    ``n_lps`` counts the LPs."""

    passed: bool | None
    value: float
    point: np.ndarray | None
    pattern: np.ndarray | None
    n_candidates: int
    n_lps: int
    seconds: float


def _row_refuted(G: np.ndarray, h: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per pattern: some row ``G_j x ≤ h_j`` fails at every point of the box, by a margin far above
    the rounding of ``min over the box of G_j x = Σ max(G,0)·lo + min(G,0)·hi``."""
    low = (np.maximum(G, 0.0) * lo + np.minimum(G, 0.0) * hi).sum(axis=2)
    scale = 1.0 + np.abs(h) + (np.abs(G) * np.maximum(np.abs(lo), np.abs(hi))).sum(axis=2)
    return (low > h + _ROW_SLACK * scale).any(axis=1)


def box_pattern_search(
    net: ReluNetwork,
    lo: np.ndarray,
    hi: np.ndarray,
    threshold: float,
    norms: Norms,
    *,
    deadline: float | None = None,
) -> BoxSearch | None:
    """Search the patterns with norm > ``threshold`` in decreasing norm for the first whose region
    meets ``[lo, hi]`` (module docstring). None when the threshold table does not apply.
    ``deadline`` is a :func:`time.perf_counter` value after which the search stops undecided."""
    start = time.perf_counter()
    table = threshold_pattern_table(net, float(threshold), norms)
    if table is None:
        return None
    on, off = stable_masks(forward_bounds(net, lo, hi))
    keep = table.consistent(on, off)
    codes, values = table.codes[keep], table.norms[keep]
    lows = values if table.lower is None else table.lower[keep]
    first = net.hidden_widths[0]
    prefix_empty: dict[bytes, bool] = {}
    n_lps = 0

    def out(passed: bool | None, value: float, point: np.ndarray | None = None,
            pattern: np.ndarray | None = None) -> BoxSearch:
        return BoxSearch(passed=passed, value=float(value), point=point, pattern=pattern,
                         n_candidates=int(codes.size), n_lps=n_lps, seconds=time.perf_counter() - start)

    for s0 in range(0, codes.size, _CHUNK):
        bits = to_bits(codes[s0 : s0 + _CHUNK], net.n_hidden)
        G, h = region_rows(net, bits)
        refuted = _row_refuted(G, h, lo, hi)
        for k in range(bits.shape[0]):
            if refuted[k]:
                continue
            if deadline is not None and time.perf_counter() > deadline:
                return out(None, values[s0 + k], pattern=bits[k])
            if len(net.weights) > 2:  # the first layer's rows alone: one LP per first-layer pattern
                key = bits[k, :first].astype(np.uint8).tobytes()
                if key not in prefix_empty:
                    n_lps += 1
                    meets, _ = polytope_in_box(G[k, :first], h[k, :first], lo, hi)
                    prefix_empty[key] = not meets
                if prefix_empty[key]:
                    continue
            n_lps += 1
            meets, point = polytope_in_box(G[k], h[k], lo, hi)
            if not meets:
                continue
            # a norm only bounded from above (its ∞→1 search stopped early) cannot fail the decision
            failed = point is not None and lows[s0 + k] > threshold
            return out(False if failed else None, values[s0 + k], point, bits[k])
    return out(True, threshold)
