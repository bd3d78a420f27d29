"""Exact local Lipschitz values on nets the engine has never seen: the engine beside LipMIP's MILP
(not a test: it prints timings).

Two shapes past paper size, each at its radius: 8→16→16→8 at r = 1 and 8→32→32→8 at r = 0.2,
‖J‖∞→1 over the ℓ∞ ball B(z, r) (the posthoc mechanism's norm). Three initialisations per shape:

* ``he``: weights N(0, 2/fan_in), biases N(0, 0.1²);
* ``uniform``: PyTorch's default ``nn.Linear`` initialisation (the product's ``relu_mlp``);
* ``trained``: ``uniform``, then 300 Adam steps (lr 1e-2, batch 128) on a random regression target
  (a fixed random 8→64→8 tanh net on z ~ N(0, I)), one thread.

Every net and centre comes from seeds ``UNSEEN_SEED + …``, used by no test or other benchmark. Each
(net, centre) is certified by

* ``engine``: :func:`privcore.lipschitz.local_lipschitz` with ``solver="auto"``;
* ``milp``: LipMIP's MILP alone, ``solver="gurobi"``;
* ``portfolio``: :func:`privcore.lipschitz.portfolio_lipschitz` (with ``--ways``);

each with ``--limit`` seconds, one thread, the engine's process memos cleared first, alternating which
runs first. Printed per query: seconds (wall, and this process's CPU: one thread, so the CPU seconds are
what a quiet core would take), exact or not, the bracket; per shape: exact counts, median seconds with a
95 % bootstrap interval, and the median engine ÷ MILP ratio of wall seconds (a MILP time-out enters at
the limit, so the ratio is then an upper bound). Values that two ways both give exactly must agree.

    .venv/bin/python bench/unseen_nets.py                          # 2 nets × 2 centres per init
    .venv/bin/python bench/unseen_nets.py --nets 1 --centres 1 --ways engine --limit 60
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: seeds of this benchmark's nets and centres start here (no test or other benchmark uses them)
UNSEEN_SEED = 9_044_000
SHAPES = (((8, 16, 16, 8), 1.0), ((8, 32, 32, 8), 0.2))
INITS = ("he", "uniform", "trained")
#: relative gap at which a bracket counts as exact (the MILP's optimality gap)
RTOL = 1e-6


def build(widths: tuple[int, ...], init: str, seed: int):
    """The net for (shape, init, seed) as a float32 torch ``Sequential``."""
    import torch

    from privcore.nets.blocks import relu_mlp

    torch.manual_seed(seed)
    net = relu_mlp(widths)
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    if init == "he":
        with torch.no_grad():
            for lin in linears:
                lin.weight.normal_(0.0, (2.0 / lin.in_features) ** 0.5)
                lin.bias.normal_(0.0, 0.1)
    elif init == "trained":
        _train(net, widths, seed)
    return net.eval()


def _train(net, widths: tuple[int, ...], seed: int) -> None:
    """300 Adam steps on a random regression target (module docstring)."""
    import torch

    gen = torch.Generator().manual_seed(seed + 1)
    d, m = widths[0], widths[-1]
    w1, w2 = torch.randn(d, 64, generator=gen) / d**0.5, torch.randn(64, m, generator=gen) / 8.0
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(300):
        x = torch.randn(128, d, generator=gen)
        loss = torch.nn.functional.mse_loss(net(x), torch.tanh(x @ w1) @ w2)
        opt.zero_grad()
        loss.backward()
        opt.step()


def queries(n_nets: int, n_centres: int):
    """(label, net, centre, radius) for every shape, init, net and centre."""
    for s, (widths, r) in enumerate(SHAPES):
        for k, init in enumerate(INITS):
            for j in range(n_nets):
                seed = UNSEEN_SEED + 1000 * s + 100 * k + j
                net = build(widths, init, seed)
                rng = np.random.default_rng(seed)
                for c in range(n_centres):
                    name = "→".join(map(str, widths))
                    z = rng.standard_normal(widths[0])
                    yield f"{name} r={r:g} {init} net{j} z{c}", (widths, r), net, z


def certify(way: str, net, z: np.ndarray, r: float, limit: float
            ) -> tuple[float, bool, float, float, str, float]:
    from bench.inf_to_one import clear_memos
    from privcore.lipschitz import local_lipschitz, portfolio_lipschitz

    clear_memos()
    t0, c0 = time.perf_counter(), time.process_time()
    if way == "portfolio":
        cert = portfolio_lipschitz(net, z, r, time_limit=limit, threads=1)
    else:
        cert = local_lipschitz(net, z, r, solver="auto" if way == "engine" else "gurobi", time_limit=limit,
                               threads=1)
    return (time.perf_counter() - t0, bool(cert.exact), float(cert.lower), float(cert.upper), cert.solver,
            time.process_time() - c0)


def bootstrap_median(values: list[float], seed: int = 0) -> tuple[float, float, float]:
    arr = np.asarray(values)
    boots = np.median(np.random.default_rng(seed).choice(arr, size=(2000, arr.size)), axis=1)
    return float(np.median(arr)), float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def load() -> str:
    return "/".join(f"{v:.2f}" for v in os.getloadavg())


def summary(ways: list[str], rows: list[dict], limit: float) -> None:
    print("\n| shape | way | exact | median s [95 % bootstrap] | median CPU s [95 % bootstrap] | n |")
    print("|---|---|---|---|---|---|")
    for shape, group in itertools.groupby(rows, key=lambda row: row["shape"]):
        group = list(group)
        name = f"{'→'.join(map(str, shape[0]))}, r = {shape[1]:g}"
        for way in ways:
            secs = [g[way][0] for g in group]
            med, lo, hi = bootstrap_median(secs)
            cpu = bootstrap_median([g[way][5] for g in group])
            ex = sum(g[way][1] for g in group)
            print(f"| {name} | {way} | {ex}/{len(group)} | {med:.2f} [{lo:.2f}, {hi:.2f}] | "
                  f"{cpu[0]:.2f} [{cpu[1]:.2f}, {cpu[2]:.2f}] | {len(group)} |")
        if "engine" in ways and "milp" in ways:
            ratio = bootstrap_median([g["engine"][0] / min(g["milp"][0], limit) for g in group])
            print(f"| {name} | engine ÷ MILP | | {ratio[0]:.3f} [{ratio[1]:.3f}, {ratio[2]:.3f}] | "
                  f"| {len(group)} |")
    both = [g for g in rows if all(g[w][1] for w in ways)]
    if len(ways) > 1 and both:
        diff = max(abs(g[w][3] - g[ways[0]][3]) / g[ways[0]][3] for g in both for w in ways)
        print(f"largest relative difference where all ways are exact: {diff:.1e} (n = {len(both)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nets", type=int, default=2, help="nets per shape and initialisation")
    parser.add_argument("--centres", type=int, default=2, help="centres per net")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds per certificate")
    parser.add_argument("--ways", default="engine,milp", help="comma-separated: engine, milp, portfolio")
    parser.add_argument("--only", default="", help="run only queries whose label contains this")
    args = parser.parse_args()
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    ways = args.ways.split(",")
    print(f"load {load()}, one thread per certificate, limit {args.limit:g} s, ℓ∞→ℓ1, ways {ways}")
    rows: list[dict] = []
    with threadpool_limits(limits=1, user_api="blas"):
        for i, (label, shape, net, z) in enumerate(queries(args.nets, args.centres)):
            if args.only not in label:
                continue
            row: dict = {"shape": shape}
            for way in ways[i % len(ways):] + ways[: i % len(ways)]:
                row[way] = certify(way, net, z, shape[1], args.limit)
            cells = "  ".join(f"{w} {row[w][0]:6.2f}s ({row[w][5]:.2f} CPU s) "
                              f"{'exact' if row[w][1] else 'open '} [{row[w][2]:.5g}, {row[w][3]:.5g}] "
                              f"({row[w][4]})" for w in ways)
            print(f"{label:34s} {cells}  load {os.getloadavg()[0]:.1f}", flush=True)
            rows.append(row)
    summary(ways, rows, args.limit)
    print(f"load {load()}")


if __name__ == "__main__":
    main()
