"""ℓ∞→ℓ1 norms: sign enumeration against the branch and bound, and the engine against the MILP
(not a test: it prints timings).

Part 1, per size k: ``--n`` random k×k matrices, Gaussian and of rank 10 (as the Jacobians of a
d → 10 → d net), each timed with the enumeration of 2^(k−1) sign vectors (k ≤ 20) and with
:func:`privcore.lipschitz.sign_norm.inf_to_one_bnb`; medians and their ratio side by side, and the
largest relative difference of the values (both exact).

Part 2 (``--engine``): the exact local constant of untrained d → 10 → d nets (PyTorch's default
initialisation, as ``bench/lipschitz.py`` builds them) at ``--n`` centres z ~ N(0, I), r = 0.2, ℓ∞→ℓ1,
one thread each: ``local_lipschitz(solver="auto")`` (the engine: pattern enumeration, else the split
step and the MILP) beside ``solver="highs"`` / ``"gurobi"`` (LipMIP's MILP alone), alternating
which runs first. Every process-level memo is cleared before each call, so each query pays for its
own tables.

    .venv/bin/python bench/inf_to_one.py                 # norms only
    .venv/bin/python bench/inf_to_one.py --engine --milp highs
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privcore.lipschitz import norms as norms_mod
from privcore.lipschitz.sign_norm import inf_to_one_bnb


def enumerate_norm(a: np.ndarray) -> float:
    """The enumeration of :mod:`privcore.lipschitz.norms` for any size (its limit lifted)."""
    old = norms_mod.MAX_ENUMERATED_SIGN_DIM
    norms_mod.MAX_ENUMERATED_SIGN_DIM = 64
    try:
        return float(norms_mod._inf_to_one(a)[1])
    finally:
        norms_mod.MAX_ENUMERATED_SIGN_DIM = old


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


def norms_part(n: int, sizes: list[int], brute_max: int) -> None:
    rng = np.random.default_rng(0)
    print(f"{'k':>3} {'kind':>8} {'enum s':>9} {'B&B s':>9} {'enum/B&B':>9} {'B&B nodes':>10} "
          f"{'exact':>6} {'max rel diff':>12}")
    for k in sizes:
        for kind in ("gaussian", "rank 10"):
            te, tb, nodes, exact, diff = [], [], [], 0, 0.0
            for _ in range(n):
                if kind == "gaussian":
                    a = rng.standard_normal((k, k))
                else:
                    a = rng.standard_normal((k, 10)) @ rng.standard_normal((10, k))
                res, t = timed(inf_to_one_bnb, a)
                tb.append(t)
                nodes.append(res.nodes)
                exact += res.exact
                if k <= brute_max:
                    v, t = timed(enumerate_norm, a)
                    te.append(t)
                    diff = max(diff, abs(res.value - v) / v)
            med_b = statistics.median(tb)
            med_e = statistics.median(te) if te else float("nan")
            print(f"{k:>3} {kind:>8} {med_e:>9.4f} {med_b:>9.4f} {med_e / med_b:>8.2f}× "
                  f"{int(statistics.median(nodes)):>10} {exact:>3}/{n:<2} "
                  f"{diff if te else float('nan'):>12.1e}", flush=True)


def clear_memos() -> None:
    """Forget every process-level memo of the engine (pattern tables, pattern norms, G's branch and
    bound), so that the next query pays for its own tables."""
    from privcore.lipschitz import pattern_bnb
    from privcore.lipschitz.bounds import _PATTERN_NORMS
    from privcore.lipschitz.pattern_store import clear_pattern_tables

    clear_pattern_tables()
    _PATTERN_NORMS.clear()
    pattern_bnb._MEMO.clear()


def engine_part(n: int, dims: list[int], milp: str, limit: float | None) -> None:
    import torch

    from privcore.lipschitz import local_lipschitz
    from privcore.lipschitz.network import as_network
    from privcore.nets.blocks import relu_mlp

    fresh = clear_memos

    print(f"\n{'d':>3} {'engine s (median)':>18} {milp + ' s (median)':>18} {'ratio milp/engine':>18} "
          f"{'engine how':>24} {'max |Δvalue|/value':>18}")
    for d in dims:
        torch.manual_seed(d)
        net = as_network(relu_mlp((d, 10, d)))
        rng = np.random.default_rng(d)
        te, tm, hows, diff = [], [], {}, 0.0
        for i in range(n):
            z = rng.standard_normal(d)
            runs = {}
            for way in (("engine", milp) if i % 2 == 0 else (milp, "engine")):
                fresh()
                solver = "auto" if way == "engine" else milp
                t0 = time.perf_counter()
                cert = local_lipschitz(net, z, 0.2, solver=solver, threads=1, time_limit=limit)
                t = time.perf_counter() - t0
                runs[way] = (cert, t)
            (ce, t_e), (cm, t_m) = runs["engine"], runs[milp]
            te.append(t_e)
            tm.append(t_m)
            key = f"{ce.solver}{'' if ce.exact else ' (bound)'}"
            hows[key] = hows.get(key, 0) + 1
            if ce.exact and cm.exact:
                diff = max(diff, abs(ce.upper - cm.upper) / cm.upper)
        how = ", ".join(f"{k} {v}" for k, v in hows.items())
        ratios = [m / e for e, m in zip(te, tm, strict=True)]
        print(f"{d:>3} {statistics.median(te):>18.3f} {statistics.median(tm):>18.3f} "
              f"{statistics.median(ratios):>17.1f}× {how:>24} {diff:>18.1e}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10, help="matrices per size (and centres per net)")
    parser.add_argument("--sizes", default="12,16,20,24,32")
    parser.add_argument("--brute-max", type=int, default=20, help="largest size also enumerated")
    parser.add_argument("--engine", action="store_true", help="also the engine against the MILP")
    parser.add_argument("--dims", default="16,24,32")
    parser.add_argument("--milp", default="highs", choices=("highs", "gurobi"))
    parser.add_argument("--limit", type=float, default=None, help="time limit per certificate (s; none)")
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    print(f"load {'/'.join(f'{v:.2f}' for v in os.getloadavg())}, one BLAS thread")
    with threadpool_limits(limits=1, user_api="blas"):
        norms_part(args.n, [int(k) for k in args.sizes.split(",")], args.brute_max)
        if args.engine:
            engine_part(args.n, [int(d) for d in args.dims.split(",")], args.milp, args.limit)
    print(f"load {'/'.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
