"""Exact values L(f, B(z, r)) several ways, per centre, in one run (issue 17's value target; not a test).

* ``milp``: LipMIP's MILP alone (:func:`privcore.lipschitz.local_lipschitz` with ``solver="gurobi"``:
  no enumeration, no splitting), one solver thread, ``--limit`` seconds.
* ``chain``: ``local_lipschitz`` as shipped (closed form, pattern enumeration, else the split step
  maximising for ``SPLIT_SHARE`` of the limit, :func:`~privcore.lipschitz.splitting.split_value`,
  and where it does not finish the MILP for the rest), same limit.
* ``bnb``: a branch and bound over activation patterns with region feasibility, built only from the
  engine's decision pieces (:func:`~privcore.lipschitz.max_pattern_norm` as the node bound, region
  LPs as the feasibility test, float64-verified Jacobians as the lower bound), same limit; an
  earlier candidate, kept for comparison (``--ways milp,chain,bnb``).

Each reports a bracket ``lower ≤ L ≤ upper``: ``upper`` certified, ``lower`` a Jacobian norm verified
in float64 at a point of the ball; "exact" means ``upper ≤ lower·(1 + 1e-6)`` within the limit. Nets
are ``bench/peers.py``'s untrained He-initialised MLPs (seed 0), centres z ~ N(0, I) (seed 0); the
ways alternate order per centre.

    .venv/bin/python bench/value_paths.py                       # 8→16→16→8 at r = 1, ℓ∞→ℓ1, 4 centres
    .venv/bin/python bench/value_paths.py --widths 8,10,10,8 --radius 1 --output-norm linf --n 3
"""

from __future__ import annotations

import argparse
import heapq
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import linprog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privcore.lipschitz import local_lipschitz, max_pattern_norm, sampled_lower_bound
from privcore.lipschitz.bounds import box_around, forward_bounds, jacobian_norms
from privcore.lipschitz.network import ReluNetwork, as_network
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.patterns import stable_masks
from privcore.lipschitz.regions import strict_point_for_pattern

#: relative gap at which a bracket counts as the exact value (the MILP's optimality gap)
RTOL = 1e-6
#: a node is dropped only when its region misses the box by more than this (normalised LP margin)
_PRUNE_MARGIN = 1e-7


@dataclass(frozen=True)
class Bracket:
    """``lower ≤ L ≤ upper``; ``complete`` when the search ended within its budget."""

    upper: float
    lower: float
    seconds: float
    nodes: int
    complete: bool


def _fix_affine(net: ReluNetwork, on: np.ndarray, off: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """Layer by layer, while the earlier layers are fully fixed (so pre-activations are affine in x):
    fix the neurons whose affine pre-activation keeps one sign on the box, and collect the rows
    ``G x ≤ h`` of the fixed neurons' closed half-spaces. Returns (on, off, G, h, first open layer,
    that layer's affine map)."""
    on, off = on.copy(), off.copy()
    offs = net.hidden_offsets
    A, a = np.eye(net.in_dim), np.zeros(net.in_dim)
    mid, rad = (lo + hi) / 2.0, (hi - lo) / 2.0
    rows, rhs = [], []
    k, P, p0 = 0, A, a
    for k, (w, b) in enumerate(zip(net.weights[:-1], net.biases[:-1], strict=True)):
        P, p0 = w @ A, w @ a + b
        sl = slice(offs[k], offs[k + 1])
        c, r = P @ mid + p0, np.abs(P) @ rad
        free = ~(on[sl] | off[sl])
        on[sl] |= free & (c - r > 0)
        off[sl] |= free & (c + r < 0)
        fixed = on[sl] | off[sl]
        s = np.where(on[sl], 1.0, -1.0)
        rows.append((-(s[:, None] * P))[fixed])
        rhs.append((s * p0)[fixed])
        if not fixed.all():
            break
        d = on[sl].astype(np.float64)
        A, a = d[:, None] * P, d * p0
    return on, off, np.vstack(rows), np.concatenate(rhs), k, (P, p0)


def _margin(G: np.ndarray, h: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """max η with ``G_i x + η‖G_i‖₁ ≤ h_i`` for x in the box: < 0 means the closed region misses it."""
    if G.shape[0] == 0:
        return math.inf
    norms = np.abs(G).sum(axis=1) + 1e-300
    res = linprog(np.r_[np.zeros(lo.size), -1.0], A_ub=np.hstack([G, norms[:, None]]), b_ub=h,
                  bounds=[*zip(lo, hi, strict=True), (None, 1.0)], method="highs")
    return -res.fun if res.status == 0 else math.inf  # not solved: keep the node (never a proof)


def _closest_point(net: ReluNetwork, layers: list[np.ndarray], lo: np.ndarray, hi: np.ndarray):
    """The point of the box that maximises the smallest normalised signed margin of ``layers``'
    pre-activations (negative when the pattern is not realised there), or None."""
    A, a = np.eye(net.in_dim), np.zeros(net.in_dim)
    rows, rhs = [], []
    for w, b, p in zip(net.weights[:-1], net.biases[:-1], layers, strict=True):
        P, p0 = w @ A, w @ a + b
        s = np.where(p > 0.5, 1.0, -1.0)
        rows.append(-(s[:, None] * P))
        rhs.append(s * p0)
        A, a = p[:, None] * P, p * p0
    G, h = np.vstack(rows), np.concatenate(rhs)
    norms = np.abs(G).sum(axis=1) + 1e-300
    res = linprog(np.r_[np.zeros(lo.size), -1.0], A_ub=np.hstack([G, norms[:, None]]), b_ub=h,
                  bounds=[*zip(lo, hi, strict=True), (None, 1.0)], method="highs")
    return np.clip(res.x[: lo.size], lo, hi) if res.status == 0 else None


def region_bnb(net: ReluNetwork, center: np.ndarray, radius: float, *, input_norm: str, output_norm: str,
               max_seconds: float) -> Bracket:
    """Best-first branch and bound over activation patterns realised in the box.

    A node fixes some neurons (the box's stable ones, those whose affine pre-activation keeps one
    sign, and branched ones). Its bound is ``max ‖J_D‖`` over the patterns consistent with them
    (:func:`max_pattern_norm`: a certified upper bound on every pattern of the node); it is dropped
    when that bound ≤ the best verified value, or when the fixed neurons' closed region misses the
    box (LP margin below −1e-7, normalised). When the bound's best pattern has an interior point in
    the box, its float64-verified Jacobian norm is a lower bound and, being the node's maximum,
    closes the node (the point that comes closest to realising it is tried as a witness too).
    Otherwise the most ambiguous free neuron of the first open layer is branched. Sound for L's
    upper bound: every realised pattern stays in some open or closed node."""
    start = time.perf_counter()
    norms = {"input_norm": input_norm, "output_norm": output_norm}
    lo, hi = box_around(center, radius)
    best = sampled_lower_bound(net, center, radius, **norms).value
    on0, off0 = stable_masks(forward_bounds(net, lo, hi))
    heap: list[tuple[float, int, np.ndarray, np.ndarray]] = [(-math.inf, 0, on0, off0)]
    closed, tick, nodes = -math.inf, 1, 0
    offs = net.hidden_offsets
    mid, rad = (lo + hi) / 2.0, (hi - lo) / 2.0
    while heap and -heap[0][0] > best * (1.0 + RTOL):
        if time.perf_counter() - start > max_seconds:
            break
        _, _, on, off = heapq.heappop(heap)
        nodes += 1
        on, off, G, h, k, (P, p0) = _fix_affine(net, on, off, lo, hi)
        if _margin(G, h, lo, hi) < -_PRUNE_MARGIN:
            continue
        res = max_pattern_norm(net, on=on, off=off, **norms)
        if res is None or not res.complete:
            closed = math.inf  # no bound for this node: the bracket stays open
            continue
        up = res.upper
        if up > best * (1.0 + RTOL) and res.pattern is not None:
            # the bound's best pattern: at its interior point (if any) and at the point of the box
            # closest to realising it (the max-margin LP's), float64 Jacobians are lower bounds
            layers = [d.astype(np.float64) for d in net.split_pattern(res.pattern)]
            pts = [p for p in (strict_point_for_pattern(net, lo, hi, layers),
                               _closest_point(net, layers, lo, hi)) if p is not None]
            if pts:
                v, ok = jacobian_norms(net, np.array(pts), Norms(input=input_norm, output=output_norm))
                if ok.any():
                    best = max(best, float(v[ok].max()) * (1.0 - 1e-12))
        free = np.flatnonzero(~(on | off))
        if up <= best * (1.0 + RTOL) or free.size == 0:
            closed = max(closed, up)  # settled, or a full pattern without an interior point
            continue
        first = free[free < offs[k + 1]]
        first = first if first.size else free
        local = first - offs[k]
        score = np.abs(P[local] @ mid + p0[local]) / (np.abs(P[local]) @ rad + 1e-300)
        j = int(first[int(np.argmin(score))])
        for value in (bool(res.pattern[j]), not bool(res.pattern[j])):
            on2, off2 = on.copy(), off.copy()
            (on2 if value else off2)[j] = True
            heapq.heappush(heap, (-up, tick, on2, off2))
            tick += 1
    upper = max(closed, best, -heap[0][0] if heap else -math.inf)
    return Bracket(upper=upper, lower=best, seconds=time.perf_counter() - start, nodes=nodes,
                   complete=upper <= best * (1.0 + RTOL))


def main() -> None:
    from peers import load, untrained

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="8,16,16,8")
    ap.add_argument("--radius", type=float, default=1.0)
    ap.add_argument("--output-norm", default="l1", choices=("l1", "linf"))
    ap.add_argument("--n", type=int, default=4, help="centres")
    ap.add_argument("--limit", type=float, default=30.0, help="seconds per value, each way")
    ap.add_argument("--ways", default="milp,chain", help="comma-separated: milp, chain, bnb")
    args = ap.parse_args()
    ways = [w.strip() for w in args.ways.split(",")]
    widths = tuple(int(w) for w in args.widths.split(","))
    net = as_network(untrained(widths, 0).double())
    rng = np.random.default_rng(0)
    norms = {"input_norm": "linf", "output_norm": args.output_norm}
    name = "→".join(map(str, widths))
    print(f"{name}, r = {args.radius:g}, ℓ∞→{args.output_norm}, limit {args.limit:g} s, load {load()}")
    times: dict[str, list[float]] = {w: [] for w in ways}
    for i in range(args.n):
        z = rng.standard_normal(widths[0])
        order = ways if i % 2 == 0 else ways[::-1]
        row = {}
        for way in order:
            if way in ("milp", "chain"):
                t = time.perf_counter()
                c = local_lipschitz(net, z, args.radius, time_limit=args.limit, threads=1,
                                    solver="gurobi" if way == "milp" else "auto", **norms)
                secs = time.perf_counter() - t
                row[way] = (c.upper, c.lower, c.exact and secs < args.limit * 1.05, secs)
            else:
                b = region_bnb(net, z, args.radius, max_seconds=args.limit, **norms)
                row[way] = (b.upper, b.lower, b.complete, b.seconds)
        for way in ways:
            times[way].append(row[way][3] if row[way][2] else math.inf)
        print(f"  centre {i}: " + " | ".join(
            f"{w} [{row[w][1]:.6g}, {row[w][0]:.6g}] {'exact' if row[w][2] else 'open '} {row[w][3]:6.2f} s"
            for w in ways), flush=True)
    for way, ts in times.items():
        done = [t for t in ts if math.isfinite(t)]
        med = statistics.median(ts)
        print(f"  {way}: exact {len(done)}/{len(ts)}, median {med:.2f} s" if math.isfinite(med)
              else f"  {way}: exact {len(done)}/{len(ts)}, median > limit")
    print(f"load {load()}")


if __name__ == "__main__":
    main()
