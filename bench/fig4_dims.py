"""Fig. 4's input-dimension sweep past paper size: the engine and the portfolio against LipMIP's MILP
(not a test: it prints timings, and with ``--csv`` writes them).

The lab's Fig. 4 shape: untrained d → 10 → d ReLU nets (PyTorch's default initialisation), r = 0.2,
ℓ∞→ℓ1, centres z ~ N(0, I). Two sets of nets:

* ``benchmark``: the seeds of ``bench/inf_to_one.py --engine`` (one net per d, ``torch.manual_seed(d)``;
  its ``--n`` centres from ``numpy.random.default_rng(d)``);
* ``fresh``: a new net and centre per pair (seed ``FRESH_SEED + 100·d + pair``), seen by nothing
  that was tuned.

Each (net, centre) pair is certified three ways, in rotating order, each with every process-level memo
cleared first and ``--limit`` seconds: the engine (``local_lipschitz(solver="auto")``), the portfolio
(``portfolio_lipschitz``) and LipMIP's MILP alone (``local_lipschitz(solver="gurobi")``), one thread
each. Per set and d: mean seconds with a 95 % Student-t interval and the time-outs of each, and the
median over pairs of MILP ÷ engine and MILP ÷ portfolio with a 95 % percentile-bootstrap interval (a
time-out enters at its seconds, so a ratio against a MILP time-out is a lower bound). Values that
two ways both give exactly must agree (the largest relative difference is printed).

    .venv/bin/python bench/fig4_dims.py --dims 2-32:2 --n 10 --limit 15 --csv /tmp/fig4-dims.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: the fresh nets' seeds start here (disjoint from the benchmark's, which are d itself)
FRESH_SEED = 4_400_000
WAYS = ("engine", "portfolio", "milp")
COLUMNS = ("nets", "d", "n", "way", "mean", "lo", "hi", "timeouts", "ratio_median", "ratio_lo", "ratio_hi",
           "load")


def parse_dims(text: str) -> list[int]:
    """``"2-32:2"`` (start-stop:step, inclusive) or ``"2,8,16"``."""
    if "-" in text:
        span, _, step = text.partition(":")
        lo, hi = (int(v) for v in span.split("-"))
        return list(range(lo, hi + 1, int(step or 1)))
    return [int(v) for v in text.split(",")]


def pairs(nets: str, d: int, n: int) -> list[tuple[object, np.ndarray]]:
    import torch

    from privcore.nets.blocks import relu_mlp

    out = []
    if nets == "benchmark":
        torch.manual_seed(d)
        net = relu_mlp((d, 10, d))
        rng = np.random.default_rng(d)
        return [(net, rng.standard_normal(d)) for _ in range(n)]
    for rep in range(n):
        seed = FRESH_SEED + 100 * d + rep
        torch.manual_seed(seed)
        out.append((relu_mlp((d, 10, d)), np.random.default_rng(seed).standard_normal(d)))
    return out


def certify(way: str, net: object, z: np.ndarray, limit: float) -> tuple[float, bool, float]:
    from bench.inf_to_one import clear_memos
    from privcore.lipschitz import local_lipschitz, portfolio_lipschitz

    clear_memos()
    t0 = time.perf_counter()
    if way == "portfolio":
        cert = portfolio_lipschitz(net, z, 0.2, time_limit=limit, threads=1)
    else:
        cert = local_lipschitz(net, z, 0.2, solver="auto" if way == "engine" else "gurobi", time_limit=limit,
                               threads=1)
    return time.perf_counter() - t0, bool(cert.exact), float(cert.upper)


def bootstrap_median(values: list[float], seed: int = 0) -> tuple[float, float, float]:
    arr = np.asarray(values)
    boots = np.median(np.random.default_rng(seed).choice(arr, size=(2000, arr.size)), axis=1)
    return float(np.median(arr)), float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def sweep(nets: str, dims: list[int], n: int, limit: float, rows: list[dict], out: Path | None) -> None:
    from privcore.experiments.fig4 import t_interval

    print(f"\n{nets} nets: seconds, mean [95 % t-interval] (time-outs); MILP ÷ engine and MILP ÷ portfolio, "
          "median [95 % bootstrap]")
    print(f"{'d':>3} {'engine s':>24} {'portfolio s':>24} {'MILP s':>24} {'MILP÷engine':>20} "
          f"{'MILP÷portfolio':>20} {'max rel Δ':>9} {'load':>5}")
    for d in dims:
        secs: dict[str, list[float]] = {w: [] for w in WAYS}
        outs = {w: 0 for w in WAYS}
        diff = 0.0
        for i, (net, z) in enumerate(pairs(nets, d, n)):
            order = WAYS[i % 3:] + WAYS[: i % 3]
            vals = {}
            for way in order:
                t, exact, value = certify(way, net, z, limit)
                secs[way].append(t)
                outs[way] += not exact
                if exact:
                    vals[way] = value
            if len(vals) > 1:
                ref = max(vals.values())
                diff = max(diff, (ref - min(vals.values())) / ref)
        load = os.getloadavg()[0]
        cells, ratios = {}, {}
        for way in WAYS:
            lo, hi = t_interval(secs[way])
            mean = statistics.fmean(secs[way])
            cells[way] = f"{mean:7.3f} [{lo:6.3f}, {hi:6.3f}] ({outs[way]})"
            row = dict(nets=nets, d=d, n=n, way=way, mean=mean, lo=lo, hi=hi, timeouts=outs[way], load=load)
            if way != "milp":
                r = bootstrap_median([m / e for m, e in zip(secs["milp"], secs[way], strict=True)])
                ratios[way] = f"{r[0]:6.2f}× [{r[1]:.2f}, {r[2]:.2f}]"
                row.update(ratio_median=r[0], ratio_lo=r[1], ratio_hi=r[2])
            rows.append(row)
        print(f"{d:>3} {cells['engine']:>24} {cells['portfolio']:>24} {cells['milp']:>24} "
              f"{ratios['engine']:>20} {ratios['portfolio']:>20} {diff:>9.1e} {load:>5.1f}", flush=True)
        if out is not None:  # after every d: an interrupted run keeps what it measured
            with out.open("w", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=COLUMNS, restval="")
                writer.writeheader()
                writer.writerows(rows)


def write_meta(out: Path, rows: list[dict], *, command: str, config: dict, complete: bool) -> None:
    """The JSON beside the CSV that the report's provenance line reads (command, mode, rows, git)."""
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout.strip() or "?"
    meta = {"columns": list(COLUMNS), "command": command, "complete": complete,
            "config": {"mode": "bench", **config}, "rows": len(rows), "git_revision": rev}
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", default="2-32:2", help="start-stop:step (inclusive) or a list")
    parser.add_argument("--n", type=int, default=10, help="(net, centre) pairs per d and set")
    parser.add_argument("--limit", type=float, default=15.0, help="seconds per certificate")
    parser.add_argument("--nets", default="benchmark,fresh")
    parser.add_argument("--csv", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    print(f"load {'/'.join(f'{v:.2f}' for v in os.getloadavg())}, one thread per certificate, "
          f"limit {args.limit:g} s, n = {args.n}")
    rows: list[dict] = []
    with threadpool_limits(limits=1, user_api="blas"):
        for nets in args.nets.split(","):
            sweep(nets, parse_dims(args.dims), args.n, args.limit, rows, args.csv)
    if args.csv is not None:
        config = {"dims": parse_dims(args.dims), "n": args.n, "time_limit": args.limit, "nets": args.nets}
        command = "python bench/fig4_dims.py " + " ".join(sys.argv[1:])
        command = "python bench/fig4_dims.py " + " ".join(sys.argv[1:])
        write_meta(args.csv, rows, command=command, config=config, complete=True)
    print(f"load {'/'.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
