"""Side by side with the peers: exact local Lipschitz values, ours against LipMIP and LipBaB (not a test).

LipMIP (Jordan & Dimakis, NeurIPS 2020; github.com/revbucket/lipMIP, MIT licence) is not part of
this project and is never committed or built here: pass a checkout of it with ``--lipmip DIR`` (its
modules import matplotlib for plotting only; put a matplotlib on ``PYTHONPATH`` if the venv has
none). It is run unmodified. By default the comparison uses the norm all three support: ℓ∞ on the
input and ℓ∞ on the output, i.e. LipMIP's ``c_vector='l1Ball1'`` (the dual ℓ1 ball) against
``local_lipschitz(input_norm="linf", output_norm="linf")``. ``--output-norm l1`` compares the
product's ℓ∞→ℓ1 instead: c ∈ [−1, 1]^m through the ``Hyperbox`` c-set branch of LipMIP's own
``gurobi_backprop_domain``, which two asserts guard, so that run needs ``python -O`` (as
bench/peer_ptr.py; LipBaB has no ℓ1 output norm and is refused there).

LipBaB (Bhowmick et al., 2021; github.com/pyrobits/LipBaB) is a notebook-style script: pass a checkout
with ``--lipbab DIR``. Its definitions (cells 1–10) are executed unmodified; its last two cells (which
load a saved net and run the search) are replaced by a driver that sets the same globals for our net
and box and runs the same loop (``af = 1``, the exact setting) with the time limit its commented-out
line describes. It needs ``cvxopt`` (GLPK LPs): ``pip install --target DIR cvxopt`` and put DIR on
``PYTHONPATH``. Its ``pnorm = inf`` is the ℓ∞→ℓ∞ operator norm, the norm compared here.

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
    PYTHONPATH=/path/to/cvxopt .venv/bin/python bench/peers.py --lipmip DIR --lipbab /path/to/LipBaB
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import math
import os
import statistics
import sys
import time
from functools import partial
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

    def __init__(self, directory: Path, output_norm: str = "linf") -> None:
        sys.path.insert(0, str(directory))
        import lipMIP
        import relu_nets
        from hyperbox import Hyperbox

        self._lipmip, self._relu_nets, self._box = lipMIP, relu_nets, Hyperbox
        self._output_norm = output_norm

    def _c_set(self, seq: torch.nn.Sequential) -> object:
        """'l1Ball1' (ℓ∞→ℓ∞) or the box c ∈ [−1, 1]^m (ℓ∞→ℓ1, its Hyperbox branch)."""
        if self._output_norm == "linf":
            return "l1Ball1"
        return self._box.build_linf_ball(torch.zeros(seq[-1].out_features), 1.0)

    def value(
        self, seq: torch.nn.Sequential, z: np.ndarray, r: float, limit: float
    ) -> tuple[float, bool, float]:
        net = self._relu_nets.ReLUNet.from_sequential(seq)
        start = time.perf_counter()
        prob = self._lipmip.LipMIP(net, self._box.build_linf_ball(z, r), self._c_set(seq), primal_norm="linf",
                                   verbose=False, timeout=limit, num_threads=1)
        with contextlib.redirect_stdout(io.StringIO()) as out:  # it prints "TIME LIMIT"
            res = prob.compute_max_lipschitz()
        seconds = time.perf_counter() - start
        return float(res.value), "TIME LIMIT" not in out.getvalue() and seconds < limit, seconds


class LipBaBPeer:
    """LipBaB from a checkout: its cells 1–10 unmodified, driven like its cell 12 with a time limit."""

    def __init__(self, directory: Path) -> None:
        source = (directory / "LipBaB.py").read_text()
        cut = source.index("# In[11]:")  # cell 11 loads a saved net; cell 12 runs the search
        self._definitions = compile(source[:cut], str(directory / "LipBaB.py"), "exec")

    def value(
        self, seq: torch.nn.Sequential, z: np.ndarray, r: float, limit: float
    ) -> tuple[float, bool, float]:
        from collections import deque
        from queue import PriorityQueue

        ns: dict = {}
        exec(self._definitions, ns)  # the peer's own definitions, read from its checkout
        linears = [m for m in seq if isinstance(m, torch.nn.Linear)]
        ns["weights"] = [None, *(m.weight.detach().double().numpy().tolist() for m in linears)]
        ns["biases"] = [None, *(m.bias.detach().double().numpy().tolist() for m in linears)]
        sizes = [linears[0].in_features, *(m.out_features for m in linears)]
        ns.update(L=len(sizes) - 1, X=[0] * sizes[0], act_pat=[[[1, 1] for _ in range(e)] for e in sizes],
                  bnds=[[float(c - r), float(c + r)] for c in z], output_bounds=[], ast_neurons=deque(),
                  var=[], pcnt=0, pq=PriorityQueue(), pnorm=np.inf, glb=0.0)
        start = time.perf_counter()
        ns["var"].extend([b[0], b[1]] for b in ns["bnds"])
        hc: list[list] = [[], []]
        for i, (lo, hi) in enumerate(ns["bnds"]):
            for sign, bound in ((-1.0, -lo), (1.0, hi)):
                row = [0.0] * sizes[0]
                row[i] = sign
                hc[0].append(row)
                hc[1].append(bound)
        ns["symprop"]()
        p = ns["LipNet"]()
        ns["pcnt"] += 1
        p.H, p.ast_ns = hc, deque(ns["ast_neurons"])
        p.actvp = [[list(v) for v in layer] for layer in ns["act_pat"]]
        p.tev = [np.identity(sizes[0]), np.zeros(sizes[0])]
        ns["linprop"](p)
        p.Lub = ns["lip_bound"](p)
        ns["pq"].put((-p.Lub, ns["pcnt"], p))
        if len(p.ast_ns) == 0:
            ns["glb"] = p.Lub
        value, exact = math.inf, False
        while time.perf_counter() - start < limit:
            if ns["pq"].empty():
                value, exact = ns["glb"], True
                break
            tp = ns["pq"].get()[2]
            value = tp.Lub
            if tp.Lub <= ns["glb"]:  # af = 1
                exact = True
                break
            ns["branch"](tp, -1)
            ns["branch"](tp, 1)
        seconds = time.perf_counter() - start
        return float(value), exact and seconds < limit, seconds


def ours(
    seq: torch.nn.Sequential, z: np.ndarray, r: float, limit: float, output_norm: str = "linf"
) -> tuple[float, bool, float]:
    start = time.perf_counter()
    cert = local_lipschitz(seq, z, r, input_norm="linf", output_norm=output_norm, time_limit=limit, threads=1)
    seconds = time.perf_counter() - start
    return cert.upper, cert.exact and seconds < limit, seconds


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def setting(peers: dict, widths: tuple[int, ...], r: float, n: int, limit: float, output_norm: str) -> None:
    seq = untrained(widths)
    rng = np.random.default_rng(1)
    rows = []
    for i in range(n):
        z = rng.standard_normal(widths[0])
        runs = [*peers.items(), ("ours", partial(ours, output_norm=output_norm))]
        k = i % len(runs)  # rotate who goes first
        rows.append({name: fn(seq, z, r, limit) for name, fn in runs[k:] + runs[:k]})
    arch = "→".join(map(str, widths))

    def summary(xs: list[float]) -> str:
        if not xs:
            return "—"
        return f"median {statistics.median(xs):.1f}× p90 {float(np.quantile(xs, 0.9)):.1f}× min {xs[0]:.1f}×"

    for name in peers:
        both = [g for g in rows if g[name][1] and g["ours"][1]]
        ratios = sorted(g[name][2] / max(g["ours"][2], 1e-6) for g in both)
        # over every centre we decided, a peer time-out counted at the limit: a lower bound on the ratio
        floor = sorted(g[name][2] / max(g["ours"][2], 1e-6) for g in rows if g["ours"][1])
        diffs = [abs(g[name][0] - g["ours"][0]) / max(abs(g["ours"][0]), 1e-12) for g in both]
        diff = max(diffs, default=0.0)
        decided = {k: sum(g[k][1] for g in rows) for k in (name, "ours")}
        med = {k: statistics.median(g[k][2] for g in rows) for k in (name, "ours")}
        print(
            f"{arch:>16} r={r:<4g} {name:>6} decided ≤{limit:g}s: "
            f"{name} {decided[name]}/{n}, ours {decided['ours']}/{n}"
            f" | median s: {name} {med[name]:.3f}, ours {med['ours']:.3f}"
            f" | ratio, both decided: {summary(ratios)} | ratio ≥, ours decided: {summary(floor)}"
            f" | max rel. diff {diff:.1e}",
            flush=True,
        )
        if diff > 1e-3:
            print(f"{'':>16} WARNING: values differ by more than 1e-3 on {arch} r={r:g} ({name})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lipmip", type=Path, default=None, help="a checkout of revbucket/lipMIP")
    parser.add_argument("--lipbab", type=Path, default=None, help="a checkout of pyrobits/LipBaB")
    parser.add_argument("--quick", action="store_true", help="3 nets, 4 centres")
    parser.add_argument("--n", type=int, default=None, help="centres per setting (default 8, quick 4)")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per certificate (default 10)")
    parser.add_argument("--output-norm", choices=("linf", "l1"), default="linf",
                        help="ℓ∞→ℓ∞ (every peer) or the product's ℓ∞→ℓ1 (LipMIP only, under python -O)")
    args = parser.parse_args()
    if args.output_norm == "l1" and args.lipbab is not None:
        parser.error("--output-norm l1: LipBaB computes only the ℓ∞→ℓ∞ norm; leave --lipbab out")
    if args.output_norm == "l1" and not sys.flags.optimize:
        parser.error("--output-norm l1 runs LipMIP's Hyperbox c-set branch (behind two asserts): "
                     "use python -O")
    if args.lipmip is None and args.lipbab is None:
        parser.error("name at least one peer: --lipmip DIR and/or --lipbab DIR")
    if args.lipmip is not None and not (args.lipmip / "lipMIP.py").is_file():
        parser.error(f"--lipmip {args.lipmip}: no lipMIP.py there (a checkout of revbucket/lipMIP)")
    if args.lipbab is not None and not (args.lipbab / "LipBaB.py").is_file():
        parser.error(f"--lipbab {args.lipbab}: no LipBaB.py there (a checkout of pyrobits/LipBaB)")
    n = args.n or (4 if args.quick else 8)
    peers = {}
    if args.lipmip is not None:
        peers["lipmip"] = LipMIPPeer(args.lipmip, args.output_norm).value
    if args.lipbab is not None:
        peers["lipbab"] = LipBaBPeer(args.lipbab).value
    norm = "ℓ∞→ℓ∞" if args.output_norm == "linf" else "ℓ∞→ℓ1"
    print(f"load before: {load()} | {norm}, {n} centres, {args.time_limit:g} s limit, 1 thread each",
          flush=True)
    for widths in QUICK_GRID if args.quick else GRID:
        for r in (R, 5 * R):
            setting(peers, widths, r, n, args.time_limit, args.output_norm)
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
