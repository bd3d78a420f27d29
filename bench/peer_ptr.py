"""PTR's questions side by side with LipMIP, in the product's ℓ∞→ℓ1 norm (not a test: it prints timings).

LipMIP (Jordan & Dimakis, NeurIPS 2020; github.com/revbucket/lipMIP, MIT licence) is not part of
this project and is never committed or built here: pass a checkout with ``--lipmip DIR`` and put a
matplotlib on ``PYTHONPATH`` (its modules import it for plotting). Its code is run unmodified:

* **The correct output set.** ‖J‖∞→1 = max over c ∈ [−1, 1]^m of ‖Jᵀc‖₁, so c must range over the
  box, not the ℓ1 ball of LipMIP's ``'l1Ball1'`` (which gives ‖J‖∞→∞, up to m times smaller).
  LipMIP's own ``gurobi_backprop_domain`` has a branch for a ``Hyperbox`` c-set (continuous
  c ∈ [lo, hi]); two asserts that list the named c-sets guard it, so this script must run under
  ``python -O``, and it refuses to run otherwise.
* **With and without an early stop.** ``lipmip`` is its ``compute_max_lipschitz`` (the MILP to
  Gurobi's default gap, decision: proven bound ≤ τ). ``lipmip-stop`` builds the same model
  (``build_gurobi_squire``) and sets Gurobi's ``BestBdStop = τ`` (a proven bound ≤ τ passes) and
  ``BestObjStop`` just above τ (an incumbent > τ fails): the fastest LipMIP can answer one question.
* **Ours** is the product's oracle, ``Certifier(kind="exact")``, a fresh one per question (no memo
  from earlier questions), with the pattern tables and region memos a new model builds on its first
  question (the run uses an empty ``PRIVLENS_CACHE_DIR`` unless one is given).

Two parts, each with ``--time-limit`` seconds per question and one solver thread per side:

1. ``decisions`` (the issue's grid of untrained nets in float32, the product's initialisation or
   with ``--init he`` bench/peers.py's; z ~ N(0, I)):
   Δp = μ + 3σ of our L(f, B(z_i, R)) over ``--n-train`` "training" centres (our certified upper
   bounds; how many were exact is printed); then for ``--n`` test centres the questions
   "L(f, B(z, r)) ≤ Δp?" at r = R and 5R, asked by the three in rotating order. Per net and radius:
   how many each decided within the limit, the median seconds per question, the per-question ratio
   peer / ours (median, p90, min) over the questions both decided, and over every question we
   decided with a peer time-out counted at the limit (a lower bound), and whether the answers agree.
2. ``phi`` (the shipped obfuscators, their card's R and Δp, test-split embeddings; and new
   paper-size nets with Δp = μ + 3σ): φ per image by the product's bisection
   (:func:`~privcore.mechanisms.phi.compute_phi`, R_max = 10R, tol 1e-3) with ``lipmip-stop`` as
   the oracle against ours (a fresh ``Certifier`` per image); per model the per-image ratio of
   seconds (median, p90, min), n, and whether every decision agreed. The first image of a new net
   includes our pattern-table builds.

The load average is printed before and after: absolute seconds move with it; ratios are side by side.

    PYTHONPATH=/path/to/matplotlib .venv/bin/python -O bench/peer_ptr.py --lipmip DIR --quick
    PYTHONPATH=/path/to/matplotlib .venv/bin/python -O bench/peer_ptr.py --lipmip DIR --part decisions
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from lipschitz import paper_net, same_phi, trained_obfuscators
from peers import GRID, QUICK_GRID, R, load, untrained

from privcore.errors import CertificationError
from privcore.lipschitz import Certifier, as_network, local_lipschitz
from privcore.mechanisms.phi import compute_phi

TOL = 1e-3
#: answer of one side to one question: (passed or None when undecided, seconds)
Answer = tuple[bool | None, float]


class LipMIPPeer:
    """LipMIP from a checkout, unmodified, with the c-set c ∈ [−1, 1]^m (its Hyperbox branch)."""

    def __init__(self, directory: Path) -> None:
        if not sys.flags.optimize:
            raise SystemExit("run under python -O: LipMIP's Hyperbox c-set branch sits behind two asserts "
                             "that list only its named c-sets (see the module docstring)")
        sys.path.insert(0, str(directory))
        import gurobipy
        import lipMIP
        import relu_nets
        from hyperbox import Hyperbox

        self._gb, self._lipmip, self._relu_nets, self._box = gurobipy, lipMIP, relu_nets, Hyperbox

    def _problem(self, seq: torch.nn.Sequential, z: np.ndarray, r: float, limit: float) -> Any:
        net = self._relu_nets.ReLUNet.from_sequential(seq)
        m = seq[-1].out_features
        c_set = self._box.build_linf_ball(torch.zeros(m), 1.0)  # c ∈ [−1, 1]^m: the ℓ∞→ℓ1 norm
        return self._lipmip.LipMIP(net, self._box.build_linf_ball(z, r), c_set,
                                   primal_norm="linf", verbose=False, timeout=limit, num_threads=1)

    def value(self, seq: torch.nn.Sequential, z: np.ndarray, r: float, limit: float) -> tuple[float, bool]:
        """``compute_max_lipschitz``: (its value, the proven bound; solved to optimality)."""
        prob = self._problem(seq, z, r, limit)
        with contextlib.redirect_stdout(io.StringIO()) as out:  # it prints "TIME LIMIT"
            res = prob.compute_max_lipschitz()
        return float(res.value), "TIME LIMIT" not in out.getvalue()

    def decide(self, seq: torch.nn.Sequential, z: np.ndarray, r: float, tau: float, limit: float,
               *, early: bool) -> bool | None:
        """L ≤ τ? None when the limit ran out first (or Gurobi refused the model)."""
        start = time.perf_counter()
        try:
            if not early:
                value, solved = self.value(seq, z, r, limit)
                return (value <= tau) if solved else None
            prob = self._problem(seq, z, r, limit)
            with contextlib.redirect_stdout(io.StringIO()):
                squire, _ = prob.build_gurobi_squire()
            model = squire.model
            model.setParam("TimeLimit", max(limit - (time.perf_counter() - start), 1e-3))
            model.setParam("Threads", 1)
            model.setParam("BestBdStop", tau)
            model.setParam("BestObjStop", tau * (1.0 + 1e-9) + 1e-12)
            model.optimize()
        except self._gb.GurobiError as exc:  # e.g. the pip licence's size limit
            print(f"      lipmip: {exc}", flush=True)
            return None
        if model.SolCount and model.ObjVal > tau:
            return False
        if model.ObjBound <= tau:
            return True
        return None


class LipMIPOracle:
    """PTR's sensitivity oracle answered by LipMIP with the early stop (``decide``) or to optimality
    (``__call__``); a time-out raises CertificationError like ours."""

    input_norm, output_norm = "linf", "l1"

    def __init__(self, peer: LipMIPPeer, seq: torch.nn.Sequential, limit: float) -> None:
        self.peer, self.seq, self.limit = peer, seq, limit

    def __call__(self, f: Any, center: np.ndarray, radius: float, /) -> float:
        value, solved = self.peer.value(self.seq, center, radius, self.limit)
        if not solved:
            raise CertificationError(f"LipMIP: time limit at r = {radius:g}")
        return value

    def decide(self, f: Any, center: np.ndarray, radius: float, threshold: float, /) -> bool:
        answer = self.peer.decide(self.seq, center, radius, threshold, self.limit, early=True)
        if answer is None:
            raise CertificationError(f"LipMIP: undecided at r = {radius:g}")
        return answer


def timed(fn: Callable[[], bool | None]) -> Answer:
    start = time.perf_counter()
    try:
        answer = fn()
    except CertificationError:
        answer = None
    return answer, time.perf_counter() - start


def ours_decide(seq: torch.nn.Sequential, z: np.ndarray, r: float, tau: float, limit: float) -> bool:
    return Certifier(kind="exact", time_limit=limit, threads=1).decide(seq, z, r, tau)


def asker(peer: LipMIPPeer) -> Callable[..., bool | None]:
    """``ask(side, seq, z, r, τ, limit)``: one side's answer to "L(f, B(z, r)) ≤ τ?"."""

    def ask(side: str, seq: Any, z: np.ndarray, r: float, tau: float, limit: float) -> bool | None:
        if side == "ours":
            return ours_decide(seq, z, r, tau, limit)
        return peer.decide(seq, z, r, tau, limit, early=side == "lipmip-stop")

    return ask


def ratios(pairs: list[tuple[float, float]]) -> str:
    """Per-question (or per-image) ratios peer s / our s: median, p90, min and n."""
    if not pairs:
        return "—"
    xs = sorted(a / max(b, 1e-6) for a, b in pairs)
    return (f"median {statistics.median(xs):.1f}× p90 {float(np.quantile(xs, 0.9)):.1f}× "
            f"min {xs[0]:.2f}× (n = {len(xs)})")


def training_delta_p(seq: torch.nn.Sequential, n_train: int, limit: float, seed: int) -> tuple[float, int]:
    """Δp = μ + 3σ of our certified L(f, B(z_i, R)) over n_train centres z_i ~ N(0, I); and how
    many of those were exact (a time-out's upper bound is still certified, so Δp only grows)."""
    rng = np.random.default_rng(seed)
    certs = [local_lipschitz(seq, rng.standard_normal(seq[0].in_features), R, time_limit=limit, threads=1)
             for _ in range(n_train)]
    values = np.array([c.upper for c in certs])
    return float(values.mean() + 3.0 * values.std(ddof=1)), sum(c.exact for c in certs)


def decisions(
    peer: LipMIPPeer, grid: tuple[tuple[int, ...], ...], n: int, n_train: int, limit: float, init: str
) -> None:
    sides = ("lipmip", "lipmip-stop", "ours")
    ask = asker(peer)
    table = []
    for widths in grid:
        seq = grid_net(widths, init)
        arch = "→".join(map(str, widths))
        start = time.perf_counter()
        delta_p, exact = training_delta_p(seq, n_train, limit, seed=2)
        print(f"{arch}: Δp = μ + 3σ = {delta_p:.4f} ({exact}/{n_train} training constants exact, "
              f"{time.perf_counter() - start:.1f} s)", flush=True)
        rng = np.random.default_rng(3)
        centres = rng.standard_normal((n, widths[0]))
        for r in (R, 5 * R):
            rows: list[dict[str, Answer]] = []
            for i, z in enumerate(centres):
                order = sides[i % 3:] + sides[:i % 3]  # rotate who goes first
                rows.append({name: timed(partial(ask, name, seq, z, r, delta_p, limit)) for name in order})
            decided = {s: sum(g[s][0] is not None and g[s][1] <= limit for g in rows) for s in sides}
            med = {s: statistics.median(g[s][1] for g in rows) for s in sides}
            disagree = sum(len({g[s][0] for s in sides if g[s][0] is not None}) > 1 for g in rows)
            passed = sum(g["ours"][0] is True for g in rows)
            line = (f"  r = {r:<4g} decided ≤ {limit:g} s: "
                    + ", ".join(f"{s} {decided[s]}/{n}" for s in sides)
                    + f" | ours passed {passed} | median s: " + ", ".join(f"{s} {med[s]:.3f}" for s in sides))
            for s in ("lipmip", "lipmip-stop"):
                both = [(g[s][1], g["ours"][1]) for g in rows
                        if g[s][0] is not None and g["ours"][0] is not None]
                # over every question we decided, a peer time-out counted at the limit: a lower bound
                floor = [(min(g[s][1], limit) if g[s][0] is None else g[s][1], g["ours"][1]) for g in rows
                         if g["ours"][0] is not None]
                line += f"\n      {s} / ours, both decided: {ratios(both)} | ours decided, ≥: {ratios(floor)}"
            if disagree:
                line += f"\n      WARNING: the answers differ on {disagree} centre(s)"
            print(line, flush=True)
            table.append((arch, r, decided, med))
    print(f"\nwhich sizes each decides within {limit:g} s ({n} centres; Δp from R; median s per question):")
    print(f"  {'net':>16} {'r':>5} " + " ".join(f"{s:>18}" for s in sides))
    for arch, r, decided, med in table:
        cells = " ".join(f"{decided[s]:>3}/{n} {med[s]:>9.3f} s " for s in sides)
        print(f"  {arch:>16} {r:>5g} {cells}")


def sequential(net: Any) -> torch.nn.Sequential:
    """A parsed :class:`~privcore.lipschitz.ReluNetwork` as a float32 Linear/ReLU Sequential (LipMIP's
    input); its weights are float32 already, so both sides certify the same function."""
    layers: list[torch.nn.Module] = []
    for i, (w, b) in enumerate(zip(net.weights, net.biases, strict=True)):
        lin = torch.nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            lin.weight.copy_(torch.tensor(w, dtype=torch.float32))
            lin.bias.copy_(torch.tensor(b, dtype=torch.float32))
        layers += [lin] if i == len(net.weights) - 1 else [lin, torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def grid_net(widths: tuple[int, ...], init: str) -> torch.nn.Sequential:
    """An untrained net of the grid: the product's initialisation (PyTorch's default, as
    bench/lipschitz.py's ``paper_net``) or He's (bench/peers.py's ``untrained``)."""
    return sequential(paper_net(widths)) if init == "default" else untrained(widths)


def shipped(specs: tuple[str, ...], n: int) -> list[tuple[str, torch.nn.Sequential, float, float, Any]]:
    """The shipped obfuscators as bench/lipschitz.py reads them, as float32 torch Sequentials."""
    return [(name, sequential(net), radius, delta_p, z[:n])
            for name, net, radius, delta_p, z in trained_obfuscators(specs, n)]


def run_phi(net: Any, z: np.ndarray, oracle: Any, *, radius: float, delta_p: float) -> tuple[Any, float]:
    """φ(z) by the product's bisection with this oracle, and its seconds (None: a question undecided)."""
    start = time.perf_counter()
    try:
        phi = compute_phi(net, z, radius=radius, delta_p=delta_p, r_max=10 * radius, tol=TOL,
                          lipschitz=oracle)
    except CertificationError:
        phi = None
    return phi, time.perf_counter() - start


def phis(peer: LipMIPPeer, specs: tuple[str, ...], new: tuple[tuple[int, ...], ...], n: int, n_train: int,
         limit: float, init: str) -> None:
    models = shipped(specs, n)
    for widths in new:
        seq = grid_net(widths, init)
        delta_p, exact = training_delta_p(seq, n_train, limit, seed=2)
        centres = np.random.default_rng(3).standard_normal((n, widths[0]))
        arch = "→".join(map(str, widths))
        models.append((f"new {arch} (Δp from {exact}/{n_train} exact)", seq, R, delta_p,
                       centres))
    everything = []
    for name, seq, radius, delta_p, centres in models:
        net = as_network(seq)  # the same float32 weights, read in float64 by our engine
        pairs, agree, firsts, failed = [], 0, [], {"lipmip-stop": 0, "ours": 0}
        for i, z in enumerate(centres):
            timed_phi = partial(run_phi, net, z, radius=radius, delta_p=delta_p)
            sides = {"lipmip-stop": partial(timed_phi, LipMIPOracle(peer, seq, limit)),
                     "ours": partial(timed_phi, Certifier(kind="exact", time_limit=limit, threads=1))}
            order = list(sides) if i % 2 == 0 else list(sides)[::-1]
            got = {s: sides[s]() for s in order}
            for s, (phi, _) in got.items():
                failed[s] += phi is None
            if i == 0:
                firsts.append(got["ours"][1])
            (theirs, t_s), (mine, m_s) = got["lipmip-stop"], got["ours"]
            if theirs is not None and mine is not None:
                pairs.append((t_s, m_s))
                agree += same_phi(mine, theirs)
        print(f"{name:>40} R={radius:<4g} Δp={delta_p:8.4f}: φ per image lipmip-stop / ours {ratios(pairs)}"
              f" | identical decisions {agree}/{len(pairs)} | undecided φ {failed}"
              f" | our first image {firsts[0]:.2f} s", flush=True)
        if name.startswith(("digits", "fashion")):
            everything += pairs
    print(f"\nshipped models, per image: {ratios(everything)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lipmip", type=Path, required=True, help="a checkout of revbucket/lipMIP")
    parser.add_argument("--part", choices=("decisions", "phi", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="3 nets, 3 centres, 2 shipped models")
    parser.add_argument("--n", type=int, default=None,
                        help="test centres / images per setting (default 6, quick 3)")
    parser.add_argument("--n-train", type=int, default=8, help="training centres for Δp (default 8)")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per question (default 10)")
    parser.add_argument("--init", choices=("default", "he"), default="default",
                        help="untrained nets: the product's (PyTorch default) or He initialisation")
    parser.add_argument("--shipped", default="digits/*,fashion-mnist/ARL-C-N,fashion-mnist/Encoder",
                        help="shipped obfuscators for the φ part, dataset/variant (default %(default)s)")
    args = parser.parse_args()
    if not (args.lipmip / "lipMIP.py").is_file():
        parser.error(f"--lipmip {args.lipmip}: no lipMIP.py there (a checkout of revbucket/lipMIP)")
    if not math.isfinite(args.time_limit) or args.time_limit <= 0:
        parser.error(f"--time-limit must be a positive number of seconds, got {args.time_limit}")
    n = args.n or (3 if args.quick else 6)
    peer = LipMIPPeer(args.lipmip)
    os.environ.setdefault("PRIVLENS_CACHE_DIR", tempfile.mkdtemp(prefix="peer-ptr-cache-"))
    print(f"load before: {load()} | ℓ∞→ℓ1, {args.init} init, {args.time_limit:g} s per question, "
          "1 thread each, cache "
          f"{os.environ['PRIVLENS_CACHE_DIR']}", flush=True)
    if args.part in ("decisions", "both"):
        decisions(peer, QUICK_GRID if args.quick else GRID, n, args.n_train, args.time_limit, args.init)
    if args.part in ("phi", "both"):
        specs = ("digits/ARL-C-N", "digits/Encoder") if args.quick else tuple(args.shipped.split(","))
        new = ((8, 10, 10, 8),) if args.quick else ((8, 10, 10, 8), (8, 10, 10, 10, 8))
        print()
        phis(peer, specs, new, n, args.n_train, args.time_limit, args.init)
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
