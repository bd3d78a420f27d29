"""Decisions "L(f, B(z, r)) ≤ τ?" past paper size: the split search on Clarke-Jacobian bounds beside
LipMIP's MILP with early stops, per query, in one run (issue 17; not a test: it prints timings).

For each net of the issue's grid (untrained, the product's PyTorch initialisation as in
``bench/lipschitz.py``), ``--n`` centres z ~ N(0, I) and radii R and 5R (R = 0.2), the threshold is
τ = (1 + κ)·ℓ with ℓ the float64-verified sampled lower bound on L at that ball, so the truth is
unknown to both and lies near τ (κ = 0.1 by default; the hard case for a pass). Each query is asked

* ``split``: :func:`privcore.lipschitz.splitting.split_decide` (a pattern hill climb for a witness,
  then a branch and bound over neurons and sub-boxes: CROWN pre-activation bounds, the interval and
  linear bounds per vertex pair of :mod:`privcore.lipschitz.clarke`, region LPs), ``--limit`` s;
* ``milp``: the chain's last step alone, LipMIP's MILP (interval big-M) with early stops on Gurobi,
  one thread, ``--limit`` s (``decide_exact(steps=("milp",))``),

alternating which runs first. Printed per net and radius: how many each decided within the limit,
whether they agree wherever both decided, and the median per-query ratio milp s / split s over the
queries both decided (time-outs are not in the ratio; a time-out counted at the limit gives the
"≥" column, a lower bound on the ratio).

    .venv/bin/python bench/split_vs_milp.py --quick     # 8→16→16→8 and 8→32→32→8, 2 centres
    .venv/bin/python bench/split_vs_milp.py             # the grid, 3 centres
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from privcore.errors import CertificationError
from privcore.lipschitz import decide_exact, sampled_lower_bound
from privcore.lipschitz.splitting import split_decide

GRID = ((8, 10, 10, 8), (8, 16, 16, 8), (8, 32, 32, 8), (8, 64, 64, 8), (16, 64, 64, 16),
        (8, 10, 10, 10, 8), (8, 32, 32, 32, 8))
QUICK = ((8, 16, 16, 8), (8, 32, 32, 8))


def ask(way: str, net, z: np.ndarray, r: float, tau: float, limit: float) -> tuple[bool | None, float]:
    t = time.perf_counter()
    if way == "split":
        res = split_decide(net, z, r, tau, max_seconds=limit, device="cpu")
        return (None if res is None else res.passed), time.perf_counter() - t
    try:
        dec = decide_exact(net, z, r, tau, steps=("milp",), solver="gurobi", time_limit=limit, threads=1)
        return dec.passed, time.perf_counter() - t
    except CertificationError:
        return None, time.perf_counter() - t


def main() -> None:
    from lipschitz import load, paper_net

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n", type=int, default=None, help="centres per net and radius")
    ap.add_argument("--limit", type=float, default=10.0, help="seconds per query, each way")
    ap.add_argument("--kappa", type=float, default=0.1, help="τ = (1 + κ)·sampled lower bound")
    args = ap.parse_args()
    nets = QUICK if args.quick else GRID
    n = args.n or (2 if args.quick else 3)
    print(f"split vs LipMIP's MILP (early stops), limit {args.limit:g} s, τ = (1 + {args.kappa:g})·ℓ, "
          f"{n} centres, load {load()}")
    print("| net | r | decided ≤ limit: split / milp | agree | median ratio milp/split (both decided) "
          "| ≥ ratio (milp time-outs at the limit) | split median s |")
    print("|---|---|---|---|---|---|---|")
    for widths in nets:
        net = paper_net(widths)
        rng = np.random.default_rng(sum(widths))
        for r in (0.2, 1.0):
            rows = []
            for i in range(n):
                z = rng.standard_normal(widths[0])
                tau = (1.0 + args.kappa) * sampled_lower_bound(net, z, r).value
                order = ("split", "milp") if i % 2 == 0 else ("milp", "split")
                got = {way: ask(way, net, z, r, tau, args.limit) for way in order}
                rows.append(got)
            ds = sum(g["split"][0] is not None for g in rows)
            dm = sum(g["milp"][0] is not None for g in rows)
            both = [g for g in rows if g["split"][0] is not None and g["milp"][0] is not None]
            agree = all(g["split"][0] == g["milp"][0] for g in both)
            ratio = statistics.median(g["milp"][1] / g["split"][1] for g in both) if both else math.nan
            split_done = [g for g in rows if g["split"][0] is not None]
            low = (statistics.median(min(g["milp"][1], args.limit) / g["split"][1] for g in split_done)
                   if split_done else math.nan)
            med = statistics.median(g["split"][1] for g in rows)
            name = "→".join(map(str, widths))
            print(f"| {name} | {r:g} | {ds}/{n} / {dm}/{n} | {'yes' if agree else 'NO'} ({len(both)}) | "
                  f"{ratio:.1f}× | {low:.1f}× | {med:.2f} |", flush=True)
    print(f"load {load()}")


if __name__ == "__main__":
    main()
