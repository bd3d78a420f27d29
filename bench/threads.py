"""The engine's ``threads`` under contention: one thread against two, with one competing process
(not a test: it prints timings).

The queries are the lab's Fig. 4 shape (untrained d → 10 → d, PyTorch's default initialisation,
r = 0.2, ℓ∞→ℓ1; ``--dims``, ``--n`` centres each, the benchmark's seeds). Each query runs with
``threads=1`` and ``threads=2`` (alternating which first), for the engine (``solver="auto"``) and for
LipMIP's MILP alone (``solver="gurobi"``), while one competing process spins on a core (a pure Python
loop, started by this script: the other workers of a shared machine). Every memo is cleared before
each call. Printed per dims and way: medians of 1 and 2 threads, the median of the per-query ratios
(2 threads ÷ 1) with a 95 % bootstrap interval, and the load average before and after.

    .venv/bin/python bench/threads.py --dims 8,16 --n 10 --limit 15
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def spin(stop: mp.Event) -> None:  # type: ignore[valid-type]
    """The competing process: a busy loop on one core."""
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def median_ci(values: list[float], seed: int = 0) -> tuple[float, float, float]:
    """The median and a 95 % percentile-bootstrap interval."""
    arr = np.asarray(values)
    rng = np.random.default_rng(seed)
    boots = np.median(rng.choice(arr, size=(2000, arr.size)), axis=1)
    return float(np.median(arr)), float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def run(dims: list[int], n: int, limit: float) -> None:
    import torch

    from bench.inf_to_one import clear_memos
    from privcore.lipschitz import local_lipschitz
    from privcore.lipschitz.network import as_network
    from privcore.nets.blocks import relu_mlp

    print(f"{'d':>3} {'way':>7} {'1 thread s':>11} {'2 threads s':>12} {'2t ÷ 1t (95% CI)':>24} {'n':>3} "
          f"{'exact 1t/2t':>12}")
    for d in dims:
        torch.manual_seed(d)
        net = as_network(relu_mlp((d, 10, d)))
        rng = np.random.default_rng(d)
        centres = [rng.standard_normal(d) for _ in range(n)]
        for way in ("auto", "gurobi"):
            times: dict[int, list[float]] = {1: [], 2: []}
            exact = {1: 0, 2: 0}
            for i, z in enumerate(centres):
                for t in ((1, 2) if i % 2 == 0 else (2, 1)):
                    clear_memos()
                    t0 = time.perf_counter()
                    cert = local_lipschitz(net, z, 0.2, solver=way, threads=t, time_limit=limit)
                    times[t].append(time.perf_counter() - t0)
                    exact[t] += cert.exact
            ratios = [b / a for a, b in zip(times[1], times[2], strict=True)]
            med, lo, hi = median_ci(ratios)
            name = "engine" if way == "auto" else way
            m1, m2 = statistics.median(times[1]), statistics.median(times[2])
            print(f"{d:>3} {name:>7} {m1:>11.3f} {m2:>12.3f} {med:>9.2f} [{lo:.2f}, {hi:.2f}]{'':>5} {n:>3} "
                  f"{exact[1]:>5}/{exact[2]:<5}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", default="8,16")
    parser.add_argument("--n", type=int, default=10, help="centres per net")
    parser.add_argument("--limit", type=float, default=15.0, help="time limit per certificate (s)")
    parser.add_argument("--competitors", type=int, default=1, help="competing busy processes")
    args = parser.parse_args()
    stop = mp.Event()
    procs = [mp.Process(target=spin, args=(stop,), daemon=True) for _ in range(args.competitors)]
    for p in procs:
        p.start()
    try:
        load = "/".join(f"{v:.2f}" for v in os.getloadavg())
        print(f"load {load}, {args.competitors} competing process(es), {os.cpu_count()} cores")
        run([int(d) for d in args.dims.split(",")], args.n, args.limit)
    finally:
        stop.set()
        for p in procs:
            p.join()
    print(f"load {'/'.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
