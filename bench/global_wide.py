"""G for wide obfuscators: the certified bound over a public box against the best verified witness.

Per hidden width h, ``--nets`` untrained 8→h→h→8 obfuscators (PyTorch's default initialisation,
``bench/lipschitz.py``'s ``paper_net``, seeds 0, 1, …) on the box [−3, 3]^8: G from
:func:`~privcore.lipschitz.global_box.compute_global_constant` (``--limit`` seconds, one thread), which
evidence gave it, its wall and CPU seconds, the verified witness it carries (a Jacobian norm
re-evaluated in float64 inside its region, in the box), the best witness of a further
:func:`~privcore.lipschitz.global_box.box_witness` run at other seeds (``--extra`` seeds), and the
ratio G / best witness (the target: ≤ 1.2 at h = 64, ≤ 2 at h = 128).

Also the *floor* of every bound that ignores which patterns the box realises: the largest exact
‖J_D‖ found, by coordinate ascent over both layers per vertex pair (each layer set to its best given
the other, from random patterns), among the patterns the box's interval bounds allow. The
all-pattern bound can never go below it, so floor / best witness is the least ratio such a bound
can reach. Not a test: it prints timings and ratios from one run; the 1-minute load average is
printed before and after.

``--halves``: whether splitting the box can help a bound that is exact on the patterns a sub-box's
bounds allow. The box is cut in two along every coordinate (2^8 sub-boxes); per sub-box, its neurons
left unstable by CROWN bounds (:meth:`~privcore.lipschitz.clarke.ClarkeBounds.preactivation_bounds`)
and its own pattern floor (the largest ‖J_D‖ coordinate ascent finds among the patterns those
bounds allow, :func:`~privcore.lipschitz.pattern_bnb.pattern_norm_floor`). A sub-box whose floor is
above 1.2 × the best witness cannot be pruned at that level by any such bound; the count of those is
printed.

``--levels K``: the same at finer cuts, sampled: for k = 1 … K, ``--level-boxes`` sub-boxes of side
2w/2^k (one cell of the grid that cuts every coordinate 2^k times, drawn at random), their unstable
neurons and floors / best witness, and the share above 1.2: how many sub-boxes a bound that splits the
input box would need before its leaves can all be pruned.

``--cpu-clock``: every deadline in this process counts its own CPU seconds (``time.perf_counter`` is
replaced by ``time.process_time`` here), so ``--limit`` is CPU seconds: the figures of a quiet machine,
whatever else runs beside.

    .venv/bin/python bench/global_wide.py                      # h = 16, 32, 64, 128; 3 nets each; 60 s
    .venv/bin/python bench/global_wide.py --widths 64 --nets 1 --limit 30
    .venv/bin/python bench/global_wide.py --widths 64 --nets 1 --halves
    .venv/bin/python bench/global_wide.py --widths 64 --nets 1 --levels 4 --cpu-clock
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from privcore.lipschitz.bounds import forward_bounds
from privcore.lipschitz.global_box import ClipBox, box_witness, compute_global_constant
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import DEFAULT_NORMS
from privcore.lipschitz.patterns import stable_masks

_WALL = time.perf_counter  # the wall clock, also under --cpu-clock


def pattern_floor(net: ReluNetwork, box: ClipBox, *, restarts: int = 2, seed: int = 0) -> float:
    """The largest exact ‖J_D‖ that coordinate ascent finds among the patterns D of a two-hidden-layer
    ``net`` the box's interval bounds allow (module docstring): a lower bound on the all-pattern maximum."""
    w1, w2, w3 = net.weights
    on, off = stable_masks(forward_bounds(net, box.lower, box.upper))
    n1 = w1.shape[0]
    S, C = DEFAULT_NORMS.dual_vertices(net.in_dim, net.out_dim)
    U, A = S @ w1.T, C @ w3
    rng = np.random.default_rng(seed)
    best = 0.0
    for a in A:
        for _ in range(restarts):
            d1 = rng.random(U.shape) < 0.5
            for _ in range(50):
                d1 = (d1 | on[:n1]) & ~off[:n1]
                d2 = (a * ((d1 * U) @ w2.T) > 0) | on[n1:]
                d2 &= ~off[n1:]
                new = (((d2 * a) @ w2) * U > 0) | on[:n1]
                new &= ~off[:n1]
                if np.array_equal(new, d1):
                    break
                d1 = new
            values = (np.maximum(a * ((d1 * U) @ w2.T), 0.0) * ~off[n1:]).sum(axis=1)
            k = int(np.argmax(values))
            pattern = np.concatenate([d1[k], d2[k]]).astype(np.float64)
            jac = net.jacobians(np.zeros((1, net.in_dim)), net.split_pattern(pattern))
            best = max(best, float(np.atleast_1d(DEFAULT_NORMS.of(jac))[0]))
    return best


def halves(net: ReluNetwork, box: ClipBox, best: float) -> str:
    """The ``--halves`` line of one net (module docstring)."""
    import itertools

    import torch

    from privcore.lipschitz.clarke import clarke_bounds
    from privcore.lipschitz.pattern_bnb import pattern_norm_floor

    mid = (box.lower + box.upper) / 2.0
    corners = np.array(list(itertools.product((0, 1), repeat=box.dim)), dtype=bool)
    lo = np.where(corners, mid, box.lower)
    hi = np.where(corners, box.upper, mid)
    cb = clarke_bounds(net, DEFAULT_NORMS, device="cpu")
    lows, ups = cb.preactivation_bounds(torch.tensor(lo), torch.tensor(hi))
    act = np.concatenate([(x > 0).numpy() for x in lows], axis=1)
    ina = np.concatenate([(x < 0).numpy() for x in ups], axis=1)
    unstable = (~(act | ina)).sum(axis=1)
    floors = np.array([pattern_norm_floor(net, on=a, off=i, norms=DEFAULT_NORMS)
                       for a, i in zip(act, ina, strict=True)])
    above = int(np.count_nonzero(floors > 1.2 * best))
    return (f"       halves: {lo.shape[0]} sub-boxes, unstable neurons median {np.median(unstable):.0f} "
            f"(min {unstable.min()}, of {net.n_hidden}); sub-box floors / best witness median "
            f"{np.median(floors) / best:.3f} (min {floors.min() / best:.3f}); {above} of {lo.shape[0]} "
            "above 1.2")


def levels(net: ReluNetwork, box: ClipBox, best: float, depth: int, count: int) -> list[str]:
    """The ``--levels`` lines of one net (module docstring)."""
    import torch

    from privcore.lipschitz.clarke import clarke_bounds
    from privcore.lipschitz.pattern_bnb import pattern_norm_floor

    cb = clarke_bounds(net, DEFAULT_NORMS, device="cpu")
    rng = np.random.default_rng(0)
    lines = []
    for k in range(1, depth + 1):
        side = (box.upper - box.lower) / 2**k
        lo = box.lower + rng.integers(0, 2**k, (count, box.dim)) * side
        lows, ups = cb.preactivation_bounds(torch.tensor(lo), torch.tensor(lo + side))
        act = np.concatenate([(x > 0).numpy() for x in lows], axis=1)
        ina = np.concatenate([(x < 0).numpy() for x in ups], axis=1)
        unstable = (~(act | ina)).sum(axis=1)
        floors = np.array([pattern_norm_floor(net, on=a, off=i, norms=DEFAULT_NORMS)
                           for a, i in zip(act, ina, strict=True)]) / best
        lines.append(f"       level {k}: side {float(side.max()):.3g} ({2.0 ** (box.dim * k):.2g} cells), "
                     f"{count} drawn: unstable median {np.median(unstable):.0f} (min {unstable.min()}, max "
                     f"{unstable.max()}); floor / best median {np.median(floors):.3f}, "
                     f"max {floors.max():.3f}; share above 1.2: {np.mean(floors > 1.2):.2f}")
    return lines


def main() -> None:
    from lipschitz import paper_net

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="16,32,64,128", help="hidden widths h of 8→h→h→8")
    ap.add_argument("--nets", type=int, default=3, help="nets per width (seeds 0 … nets − 1)")
    ap.add_argument("--limit", type=float, default=60.0, help="seconds for each G")
    ap.add_argument("--half-width", type=float, default=3.0, help="the box is [−w, w]^8")
    ap.add_argument("--extra", type=int, default=2, help="further witness searches (seeds 1 …) per net")
    ap.add_argument("--halves", action="store_true", help="also the sub-box analysis of each net")
    ap.add_argument("--levels", type=int, default=0, help="also sampled sub-boxes at cuts 1 … K")
    ap.add_argument("--level-boxes", type=int, default=64, help="sub-boxes drawn per level")
    ap.add_argument("--cpu-clock", action="store_true", help="deadlines count this process's CPU seconds")
    args = ap.parse_args()
    if args.cpu_clock:
        time.perf_counter = time.process_time  # every deadline of the library reads this clock
    import torch

    torch.set_num_threads(1)
    box = ClipBox(np.full(8, -args.half_width), np.full(8, args.half_width))
    clock = "CPU" if args.cpu_clock else "wall"
    print(f"box [−{args.half_width:g}, {args.half_width:g}]^8, {args.limit:g} {clock} s per G, threads 1, "
          f"1-min load {os.getloadavg()[0]:.2f}")
    print(f"{'h':>4} {'seed':>4} {'G':>9} {'how':>13} {'wall s':>7} {'cpu s':>7} {'G wit':>8} "
          f"{'best wit':>8} {'G/best':>7} {'floor':>8} {'floor/best':>10}")
    ratios: dict[int, list[float]] = {}
    floors: dict[int, list[float]] = {}
    for h in (int(w) for w in args.widths.split(",")):
        for seed in range(args.nets):
            net = paper_net((8, h, h, 8), seed=seed)
            wall, cpu = _WALL(), time.process_time()
            with threadpool_limits(limits=1):
                g = compute_global_constant(net, box, time_limit=args.limit, threads=1)
            wall, cpu = _WALL() - wall, time.process_time() - cpu
            best = g.lower
            for extra in range(1, args.extra + 1):
                with threadpool_limits(limits=1):
                    best = max(best, box_witness(net, box, seed=extra)[0])
            with threadpool_limits(limits=1):
                floor = pattern_floor(net, box)
            ratio = g.value / best
            ratios.setdefault(h, []).append(ratio)
            floors.setdefault(h, []).append(floor / best)
            print(f"{h:>4} {seed:>4} {g.value:>9.5g} {g.how.value:>13} {wall:>7.1f} {cpu:>7.1f} "
                  f"{g.lower:>8.5g} {best:>8.5g} {ratio:>7.3f} {floor:>8.5g} {floor / best:>10.3f}",
                  flush=True)
            if args.halves:
                with threadpool_limits(limits=1):
                    print(halves(net, box, best), flush=True)
            if args.levels:
                with threadpool_limits(limits=1):
                    print("\n".join(levels(net, box, best, args.levels, args.level_boxes)), flush=True)
    print("per h: G / best witness and floor / best witness (median, max; n nets):")
    for h, rs in ratios.items():
        fl = floors[h]
        print(f"  h = {h:>3}: G/best median {statistics.median(rs):.3f}, max {max(rs):.3f}; "
              f"floor/best median {statistics.median(fl):.3f}, max {max(fl):.3f} (n = {len(rs)})")
    print(f"1-min load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
