"""Side by side with the peer: exact local Lipschitz values, our engine against LipMIP (not a test).

LipMIP (Jordan & Dimakis, NeurIPS 2020; github.com/revbucket/lipMIP, MIT licence) is not part of
this project and is never committed or built here: pass a checkout of it with ``--lipmip DIR`` (its
modules import matplotlib for plotting only; put a matplotlib on ``PYTHONPATH`` if the venv has
none). It is run unmodified, so the comparison uses the norm both support: ℓ∞ on the input and ℓ∞
on the output, i.e. LipMIP's ``c_vector='l1Ball1'`` (the dual ℓ1 ball) against
``local_lipschitz(input_norm="linf", output_norm="linf")``. The product's default ℓ∞→ℓ1 needs
c ∈ [−1, 1]^m, which unmodified LipMIP does not offer.

For each untrained net of the grid (He-initialised, seeded; latent z ~ N(0, I), the β-VAE prior) and
each radius (R = 0.2 and 5R), ``--n`` centres are certified by both, in alternating order, each
with ``--time-limit`` seconds and one solver thread:

* per centre: LipMIP's value and seconds (``compute_max_lipschitz``: one MILP, Gurobi) and ours
  (``local_lipschitz``, exact certifier: closed form, pattern enumeration or the MILP);
* per setting: how many each decided exactly within the limit; the per-image ratio LipMIP seconds /
  our seconds (median, p90, min) over the centres both decided, and over every centre we decided
  with a LipMIP time-out counted at the limit (a lower bound); the largest relative difference of
  the two values where both decided (they must agree: LipMIP evaluates the float32 net, so ~1e-5
  is expected).

The load average is printed before and after: absolute seconds move with it; ratios are side by side.

    .venv/bin/python bench/peers.py --lipmip /path/to/lipMIP --quick      # 3 nets, 4 centres
    .venv/bin/python bench/peers.py --lipmip /path/to/lipMIP              # the full grid, 8 centres
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privcore.lipschitz import local_lipschitz

GRID = (
    (8, 10, 10, 8),
    (8, 16, 16, 8),
    (8, 32, 32, 8),
    (8, 64, 64, 8),
    (16, 64, 64, 16),
    (8, 10, 10, 10, 8),
    (8, 32, 32, 32, 8),
)
QUICK_GRID = ((8, 10, 10, 8), (8, 16, 16, 8), (8, 10, 10, 10, 8))
R = 0.2


def untrained(widths: tuple[int, ...], seed: int = 0) -> torch.nn.Sequential:
    """A He-initialised ReLU MLP in float32 (LipMIP's dtype), seeded."""
    gen = torch.Generator().manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        lin = torch.nn.Linear(a, b)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(b, a, generator=gen) * (2.0 / a) ** 0.5)
            lin.bias.copy_(torch.randn(b, generator=gen) * 0.1)
        layers.append(lin)
        if i < len(widths) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


class LipMIPPeer:
    """LipMIP from a checkout, unmodified: ``value(seq, z, r, limit)`` → (value, exact, seconds)."""

    def __init__(self, directory: Path) -> None:
        sys.path.insert(0, str(directory))
        import lipMIP
        import relu_nets
        from hyperbox import Hyperbox

        self._lipmip, self._relu_nets, self._box = lipMIP, relu_nets, Hyperbox

    def value(
        self, seq: torch.nn.Sequential, z: np.ndarray, r: float, limit: float
    ) -> tuple[float, bool, float]:
        net = self._relu_nets.ReLUNet.from_sequential(seq)
        start = time.perf_counter()
        prob = self._lipmip.LipMIP(net, self._box.build_linf_ball(z, r), "l1Ball1", primal_norm="linf",
                                   verbose=False, timeout=limit, num_threads=1)
        with contextlib.redirect_stdout(io.StringIO()) as out:  # it prints "TIME LIMIT"
            res = prob.compute_max_lipschitz()
        seconds = time.perf_counter() - start
        return float(res.value), "TIME LIMIT" not in out.getvalue() and seconds < limit, seconds


def ours(seq: torch.nn.Sequential, z: np.ndarray, r: float, limit: float) -> tuple[float, bool, float]:
    start = time.perf_counter()
    cert = local_lipschitz(seq, z, r, input_norm="linf", output_norm="linf", time_limit=limit, threads=1)
    seconds = time.perf_counter() - start
    return cert.upper, cert.exact and seconds < limit, seconds


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def setting(peer: LipMIPPeer, widths: tuple[int, ...], r: float, n: int, limit: float) -> None:
    seq = untrained(widths)
    rng = np.random.default_rng(1)
    rows = []
    for i in range(n):
        z = rng.standard_normal(widths[0])
        runs = [("lipmip", peer.value), ("ours", ours)]
        got = dict((name, fn(seq, z, r, limit)) for name, fn in (runs if i % 2 == 0 else runs[::-1]))
        rows.append(got)
    both = [g for g in rows if g["lipmip"][1] and g["ours"][1]]
    ratios = sorted(g["lipmip"][2] / max(g["ours"][2], 1e-6) for g in both)
    # over every centre we decided, a LipMIP time-out counted at the limit: a lower bound on the ratio
    floor = sorted(g["lipmip"][2] / max(g["ours"][2], 1e-6) for g in rows if g["ours"][1])
    diffs = [abs(g["lipmip"][0] - g["ours"][0]) / max(abs(g["ours"][0]), 1e-12) for g in both]
    diff = max(diffs, default=0.0)
    decided = {k: sum(g[k][1] for g in rows) for k in ("lipmip", "ours")}
    med = {k: statistics.median(g[k][2] for g in rows) for k in ("lipmip", "ours")}
    arch = "→".join(map(str, widths))

    def summary(xs: list[float]) -> str:
        if not xs:
            return "—"
        return f"median {statistics.median(xs):.1f}× p90 {float(np.quantile(xs, 0.9)):.1f}× min {xs[0]:.1f}×"

    print(
        f"{arch:>16} r={r:<4g} decided ≤{limit:g}s: "
        f"LipMIP {decided['lipmip']}/{n}, ours {decided['ours']}/{n}"
        f" | median s: LipMIP {med['lipmip']:.3f}, ours {med['ours']:.3f}"
        f" | ratio, both decided: {summary(ratios)} | ratio ≥, ours decided: {summary(floor)}"
        f" | max rel. diff {diff:.1e}",
        flush=True,
    )
    if diff > 1e-3:
        print(f"{'':>16} WARNING: values differ by more than 1e-3 on {arch} r={r:g}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lipmip", type=Path, required=True, help="a checkout of revbucket/lipMIP")
    parser.add_argument("--quick", action="store_true", help="3 nets, 4 centres")
    parser.add_argument("--n", type=int, default=None, help="centres per setting (default 8, quick 4)")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per certificate (default 10)")
    args = parser.parse_args()
    if not (args.lipmip / "lipMIP.py").is_file():
        parser.error(f"--lipmip {args.lipmip}: no lipMIP.py there (a checkout of revbucket/lipMIP)")
    n = args.n or (4 if args.quick else 8)
    peer = LipMIPPeer(args.lipmip)
    print(f"load before: {load()} | ℓ∞→ℓ∞, {n} centres, {args.time_limit:g} s limit, 1 thread each",
          flush=True)
    for widths in QUICK_GRID if args.quick else GRID:
        for r in (R, 5 * R):
            setting(peer, widths, r, n, args.time_limit)
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
