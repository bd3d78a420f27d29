"""Benchmark of the local Lipschitz engine for posthoc PTR (not a test: it prints timings).

For the shipped digits and Fashion-MNIST obfuscators (8→10→10→8, trained by the models issue;
their card's R and Δp, test-split embeddings; the full run adds R = 0.5 with the card's Δp), for
untrained obfuscators of the paper's size (latent 8, hidden widths 8–10: 8→10→8 and 8→8→8→8) and
a wider 8→32→32→8, at R = 0.2 and 0.5, on embeddings z ~ N(0, I) (the β-VAE prior):

* Δp = μ + 3σ of L(f, B(z_i, R)) over separate "training" embeddings (posthoc paper, Sec. 5);
* φ(z) per image with the engine (``Certifier(kind="exact")``: bounds, pattern enumeration,
  nearest-violation search, early-stopped MILPs, monotone memo) and the straightforward way
  (a fresh full LipMIP solve at every bisection step, no bounds, no cache), measured side by side
  in this run on the same images; φ, R* and the answer at every radius both asked must agree (the
  engine's bisection may ask other radii: it follows the witnesses' fail radius); per image the
  ratio straightforward s / engine s, summarised as median, p90 and min with n;
* for each certifier kind (exact, lp, interval): median seconds per image and the release rate,
  i.e. the exact probability that PTR's test passes, averaged over the images, for ε ∈ {1, 2, 5},
  δ = 0.05 (posthoc paper's δ);
* a summary: median / 90th percentile / max seconds per image for φ per model and radius, with the
  load average (the machine is shared, so absolute times move with it; ratios are side by side);
* Fig. 4 of the paper: runtime of one exact L(f, B(z, r)) against the radius, the input
  dimension and the depth, for the MILP (Gurobi) and for the engine's choice.

R_max = 10·R: with δ = 0.05 and ε = 1 the test passes with probability 1 − 1e-3 once
φ ≥ (ln(1/δ) + ln 500)·R ≈ 9.2·R (docs/DESIGN.md: bisecting beyond that buys nothing). tol = 1e-3.

    .venv/bin/python bench/lipschitz.py            # full run (tens of minutes)
    .venv/bin/python bench/lipschitz.py --quick    # ~2 minutes; last line "speedup: N", the
                                                   # median per-image ratio over the shipped models
    .venv/bin/python bench/lipschitz.py --first-phi --n 20   # first φ per ARL-C-N model, fresh processes

``--first-phi`` runs each shipped ARL-C-N obfuscator in a fresh process (nothing in memory) and
times its first φ (pattern table included) and the median of the next ``--n`` images, with the
bench's R_max and with the dashboard's, side by side with an empty cache and with a warm one that
holds the table's region certificates (filled first, in this run, by a process that resolves the
table and stores them: its line gives the stored size and the time to read and verify them).
Pattern codes are always enumerated in the process; a stored label is used only once verified.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privcore.errors import CertificationError
from privcore.lipschitz import (
    Certifier,
    as_network,
    build_milp,
    certify_batch,
    global_upper_bound,
    local_lipschitz,
    max_pattern_norm,
)
from privcore.lipschitz.backends import solve
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.pattern_bnb import global_pattern_bound
from privcore.lipschitz.pattern_search import nonempty_threshold_table
from privcore.lipschitz.patterns import global_pattern_table, threshold_pattern_table
from privcore.mechanisms.ptr import PhiResult, compute_phi

DELTA = 0.05
EPSILONS = (1.0, 2.0, 5.0)
TOL = 1e-3
#: --quick: images per shipped model timed both ways (the headline's per-image ratios)
QUICK_PAIRED = 3


def paper_net(widths: tuple[int, ...], seed: int = 0) -> ReluNetwork:
    """An untrained obfuscator with PyTorch's default initialisation (as built by the product)."""
    import torch

    from privcore.nets.blocks import relu_mlp

    torch.manual_seed(seed)
    return as_network(relu_mlp(widths))


def pass_probability(phi: float, zeta: float, radius: float, epsilon: float, delta: float) -> float:
    """P[φ + Lap(b) > ln(1/δ)·b], b = (R + ζ)/ε: PTR's test (Laplace tail, exact)."""
    b = (radius + zeta) / epsilon
    x = math.log(1.0 / delta) * b - phi
    return 0.5 * math.exp(-x / b) if x >= 0 else 1.0 - 0.5 * math.exp(x / b)


@dataclass
class Row:
    net: str
    radius: float
    delta_p: float
    rule: str
    engine_s: list[float] = field(default_factory=list)
    straight_s: list[float] = field(default_factory=list)
    paired: list[tuple[float, float]] = field(default_factory=list)
    identical: int = 0
    compared: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, tuple[float, dict[float, float], int]] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)
    how: dict[str, int] = field(default_factory=dict)
    precompute: tuple[float, bool | None] = (0.0, None)


def straightforward_oracle(time_limit: float):
    """A fresh full LipMIP solve at every bisection step: no bounds, no enumeration, no cache."""

    def oracle(f: ReluNetwork, center: np.ndarray, radius: float) -> float:
        res = solve(build_milp(f, center, radius), solver="auto", time_limit=time_limit)
        if res.status != "optimal":
            raise CertificationError(f"straightforward MILP: {res.status}")
        return res.upper

    return oracle


def same_phi(mine: PhiResult, theirs: PhiResult) -> bool:
    """The two bisections agree: the same R* and φ, and the same answer at every radius both asked
    (the engine orders its questions by the witnesses' fail radius, so it may ask other radii)."""
    theirs_at = dict(theirs.evaluations)
    return (mine.r_star, mine.phi) == (theirs.r_star, theirs.phi) and all(
        theirs_at[r] == ok for r, ok in mine.evaluations if r in theirs_at)


def ratio_summary(pairs: list[tuple[float, float]]) -> str:
    """Per-image ratios straightforward s / engine s: median, p90, min and n."""
    if not pairs:
        return "no image paired"
    xs = sorted(b / max(a, 1e-9) for a, b in pairs)
    p90 = xs[min(len(xs) - 1, math.ceil(0.9 * len(xs)) - 1)]
    return (f"per-image ratio median {statistics.median(xs):.1f}× p90 {p90:.1f}× min {xs[0]:.1f}× "
            f"(n = {len(xs)})")


def referee(net: ReluNetwork, z: np.ndarray, mine: PhiResult, theirs: PhiResult, delta_p: float) -> str:
    """At the first differing decision, re-solve with 1e-9 integrality/feasibility tolerances on
    both solvers and say which side had the exact answer."""
    theirs_at = dict(theirs.evaluations)
    for r, a in mine.evaluations:
        b = theirs_at.get(r, a)
        if a != b:
            milp = build_milp(net, z, r)
            vals = [solve(milp, solver=s, strict=True, mip_gap=1e-9).upper for s in ("gurobi", "highs")]
            truth = max(vals) <= delta_p
            who = "engine" if truth == a else "straightforward"
            said = f"engine {'pass' if a else 'fail'}, straightforward {'pass' if b else 'fail'}"
            return (f"r={r:.6g}: {said}; strict-tolerance L = {vals[0]:.7g} (Gurobi) / {vals[1]:.7g} "
                    f"(HiGHS) vs Δp {delta_p:.7g}: {who} exact")
    return f"same answers at every common radius, but R* {mine.r_star!r} vs {theirs.r_star!r}"


def timed_phi(net: ReluNetwork, z: np.ndarray, oracle: Any, *, radius: float, delta_p: float,
              r_max: float | None = None, tol: float = TOL) -> tuple[PhiResult | None, float]:
    """φ(z) and its seconds (None: a question was not decided); R_max = 10R unless given."""
    start = time.perf_counter()
    try:
        phi = compute_phi(net, z, radius=radius, delta_p=delta_p,
                          r_max=10 * radius if r_max is None else r_max, tol=tol, lipschitz=oracle)
    except CertificationError:
        phi = None
    return phi, time.perf_counter() - start


def trained_obfuscators(
    specs: tuple[str, ...], n_test: int
) -> list[tuple[str, ReluNetwork, float, float, Any]]:
    """Shipped obfuscators (models issue), ``"dataset/variant"`` (e.g. ``"digits/N"``,
    ``"fashion-mnist/ARL"``; ``"digits/*"`` for every one): their card's R and Δp (μ + 3σ over
    training embeddings, computed by the models engineer) and the test-split embeddings."""
    import warnings

    import torch

    from privcore.nets.checkpoint import load_checkpoint
    from privcore.train.embedder import dataset_from_card

    models = Path(__file__).resolve().parents[1] / "models"
    out = []
    embedded: dict[str, Any] = {}
    for spec in specs:
        dataset, variant = spec.split("/")
        root = models / dataset
        if variant == "*":
            names = sorted(p.stem.removeprefix("obfuscator-") for p in root.glob("obfuscator-*.json"))
        else:
            names = [variant]
        for name in names:
            stem = root / f"obfuscator-{name}"
            if not stem.with_suffix(".json").is_file():
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                obf = load_checkpoint(stem, kind="obfuscator")
            dp = obf.card.get("delta_p") or {}
            if "proposed" not in dp:
                continue
            if dataset not in embedded:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    emb = load_checkpoint(root / "embedder", kind="embedder")
                ds = dataset_from_card(obf.card["dataset"])
                with torch.no_grad():
                    embedded[dataset] = emb["vae"].encode(ds.x_test[:n_test])[0].double().numpy()
            radius = float(obf.card["radius"]["value"])
            out.append((f"{dataset} {name}", as_network(obf["obfuscator"]), radius, float(dp["proposed"]),
                        embedded[dataset]))
    return out


def run_config(
    name: str, net: ReluNetwork, radius: float, *, n_train: int, n_test: int, n_straight: int,
    time_limit: float, kinds: tuple[str, ...], seed: int, n_sigma: float,
    given: tuple[float, np.ndarray] | None = None,
) -> Row:
    rng = np.random.default_rng(seed)
    if given is None:
        train = rng.standard_normal((n_train, net.in_dim))
        test = rng.standard_normal((n_test, net.in_dim))
        certs = certify_batch(net, train, radius, Certifier(time_limit=time_limit), workers=2, progress=False)
        values = np.array([c.upper for c in certs])
        delta_p = float(values.mean() + n_sigma * values.std(ddof=1))
        rule = f"μ+{n_sigma:g}σ"
    else:
        delta_p, test = given
        test = test[:n_test]
        certs, rule = [], "card"
    row = Row(net=name, radius=radius, delta_p=delta_p, rule=rule)
    t = time.perf_counter()  # once per model and Δp, amortised over images like the pattern tables
    glob = global_pattern_bound(net, delta_p)
    row.precompute = (time.perf_counter() - t, None if glob is None else glob.at_most(delta_p))
    if not all(c.exact for c in certs):
        row.failed["train-inexact"] = sum(not c.exact for c in certs)
    engine_phis: list[PhiResult | None] = []
    for z in test:
        cert = Certifier(kind="exact", time_limit=time_limit)
        phi, secs = timed_phi(net, z, cert, radius=radius, delta_p=delta_p)
        engine_phis.append(phi)
        row.engine_s.append(secs)
        for how, k in cert.stats.items():
            row.how[how] = row.how.get(how, 0) + k
        if phi is None:
            row.failed["engine"] = row.failed.get("engine", 0) + 1
    straight = straightforward_oracle(time_limit)
    for z, mine, mine_s in zip(test[:n_straight], engine_phis, row.engine_s, strict=False):
        phi, secs = timed_phi(net, z, straight, radius=radius, delta_p=delta_p)
        if phi is None:
            row.failed["straightforward"] = row.failed.get("straightforward", 0) + 1
            continue
        row.straight_s.append(secs)
        row.paired.append((mine_s, secs))
        if mine is not None:
            row.compared += 1
            row.identical += same_phi(mine, phi)
            if not same_phi(mine, phi):
                row.mismatches.append(referee(net, z, mine, phi, delta_p))
    for kind in kinds:
        times, rates, fails = [], {e: 0.0 for e in EPSILONS}, 0
        for z, exact_phi, exact_s in zip(test, engine_phis, row.engine_s, strict=True):
            if kind == "exact":
                phi, secs = exact_phi, exact_s
            else:
                phi, secs = timed_phi(net, z, Certifier(kind=kind, time_limit=time_limit), radius=radius,
                                      delta_p=delta_p)
            times.append(secs)
            if phi is None:
                fails += 1
                continue
            for e in EPSILONS:
                rates[e] += pass_probability(phi.phi, phi.zeta, radius, e, DELTA) / len(test)
        row.kinds[kind] = (statistics.median(times), rates, fails)
    return row


def print_row(row: Row) -> None:
    med = statistics.median(row.engine_s)
    line = f"{row.net:>11} R={row.radius:<4g} Δp={row.rule}={row.delta_p:7.4f}  engine median {med:8.4f} s"
    if row.straight_s:
        eng = statistics.median(a for a, _ in row.paired)
        st = statistics.median(b for _, b in row.paired)
        line += (f" | straightforward median {st:8.3f} s on {len(row.paired)} images "
                 f"(engine {eng:.4f} s on the same) | {ratio_summary(row.paired)}"
                 f" | identical {row.identical}/{row.compared}")
    if row.failed:
        line += f" | failed {row.failed}"
    print(line)
    for text in row.mismatches:
        print(f"{'':>15}mismatch {text}")
    secs, holds = row.precompute
    said = {True: "holds: every radius passes", False: "does not hold", None: "undecided"}[holds]
    print(f"{'':>15}once per model and Δp, untimed: every pattern's ‖J_D‖ ≤ Δp? {said} ({secs:.3f} s)")
    print(f"{'':>15}evidence per decision: {dict(sorted(row.how.items()))}")
    for kind, (secs, rates, fails) in row.kinds.items():
        rr = "  ".join(f"ε={e:g}: {rates[e]:.3f}" for e in EPSILONS)
        extra = f"  ({fails} queries failed)" if fails else ""
        print(f"{'':>15}{kind:>8}: median {secs:8.4f} s/image, release rate {rr}{extra}")


def fig4(quick: bool, time_limit: float) -> None:
    """Runtime of one exact L(f, B(z, r)) (median over centres) vs radius, input dim and depth."""
    rng = np.random.default_rng(1)
    n_centres = 2 if quick else 5

    def median_time(net: ReluNetwork, r: float, solver: str) -> str:
        times = []
        for z in rng.standard_normal((n_centres, net.in_dim)):
            cert = local_lipschitz(net, z, r, solver=solver, time_limit=time_limit)
            if not cert.exact:
                return f">{time_limit:g}"
            times.append(cert.seconds)
        return f"{statistics.median(times):.4f}"

    print("\nFig. 4 (posthoc paper): seconds for one exact L(f, B(z, r)), median over centres; "
          "MILP = Gurobi via auto-licence, engine = solver='auto'")
    radii = (0.05, 0.2, 0.5, 1.0) if quick else (0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0)
    net = paper_net((8, 10, 8))
    def line(label: str, net: ReluNetwork, r: float) -> None:
        milp, engine = median_time(net, r, "gurobi"), median_time(net, r, "auto")
        print(f"      {label:<8} MILP {milp:>9}  engine {engine:>9}")

    print("  (a) radius, net 8→10→8:")
    for r in radii:
        line(f"r={r:g}", net, r)
    print("  (b) input dimension, net d→10→8, r=0.2:")
    for d in ((2, 8, 16) if quick else (2, 4, 8, 16, 32)):
        line(f"d={d}", paper_net((d, 10, 8)), 0.2)
    print("  (c) depth, net 8→(8×k)→8, r=0.2:")
    for k in ((1, 2, 3) if quick else (1, 2, 3, 4)):
        line(f"k={k}", paper_net((8, *([8] * k), 8)), 0.2)


def first_phi_child(spec: str, n_more: int, setting: str) -> None:
    """In this (fresh) process: load one shipped obfuscator, then time the first φ (everything the
    engine does once per process — pattern table, HiGHS/Gurobi start — is inside it) and the median
    of the next ``n_more`` images. ``setting``: "bench" (R_max = 10·R, tol 1e-3) or "dashboard"
    (the dashboard's R_max and tol, :func:`privcore.mechanisms.ptr_search_range`)."""
    t0 = time.perf_counter()
    found = trained_obfuscators((spec,), n_more + 1)
    loaded = time.perf_counter() - t0
    for name, net, radius, delta_p, z in found:
        _first_phi_one(name, net, radius, delta_p, z, setting, loaded)


def _first_phi_one(name: str, net: ReluNetwork, radius: float, delta_p: float, z: np.ndarray, setting: str,
                   loaded: float) -> None:
    from privcore.mechanisms import ptr_search_range
    from privlens.mechanism_view import DELTA_MIN, EPSILON_MIN

    if setting == "dashboard":
        r_max, tol = ptr_search_range(radius, epsilon_min=EPSILON_MIN, delta_min=DELTA_MIN)
    else:
        r_max, tol = 10 * radius, TOL
    times = []
    for zi in z:
        t = time.perf_counter()
        compute_phi(net, zi, radius=radius, delta_p=delta_p, r_max=r_max, tol=tol,
                    lipschitz=Certifier(kind="exact", time_limit=30.0))
        times.append(time.perf_counter() - t)
    rest = statistics.median(times[1:]) if len(times) > 1 else float("nan")
    print(f"  {name:<22} {setting:<9} load+embed {loaded:6.2f} s | first φ {times[0]:7.3f} s | "
          f"median of the next {len(times) - 1} {rest:7.4f} s | max {max(times[1:], default=0):7.4f} s")


def fill_store_child(spec: str) -> None:
    """In this process: enumerate, resolve and certify one shipped obfuscator's table at its Δp,
    store the certificates in ``$PRIVLENS_CACHE_DIR``, then time reading and verifying them back."""
    from privcore.lipschitz import pattern_store as ps
    from privcore.lipschitz.cache import LipschitzCache, _canonical

    ((_, net, dp),) = [s for s in ps.shipped_obfuscators() if s[0] == spec]
    t0 = time.perf_counter()
    table = ps.realised_pattern_table(net, dp, Norms())
    t1 = time.perf_counter()
    ps.resolve_regions(net, table, Norms())
    t2 = time.perf_counter()
    certs = ps.store_certificates(net, table)
    t3 = time.perf_counter()
    value = LipschitzCache().get(ps.CERT_KIND, ps.region_certificate_key(net.digest, dp, Norms()))
    ps.clear_pattern_tables()
    previous = ps.use_certificate_store(False)
    fresh = ps.realised_pattern_table(net, dp, Norms())  # enumerated, nothing loaded
    ps.use_certificate_store(previous)
    t4 = time.perf_counter()
    filled = ps.load_certificates(net, fresh)
    t5 = time.perf_counter()
    print(f"  {spec:<22} store: {table.codes.size} patterns enumerated {t1 - t0:.2f} s, "
          f"resolved {t2 - t1:.2f} s, certified {t3 - t2:.2f} s ({certs.empty_codes.size} EMPTY, "
          f"{certs.boxed_codes.size} boxed, "
          f"{certs.side_codes.size} box sides); {len(_canonical(value)) / 2**20:.2f} MiB stored | "
          f"read + verify {t5 - t4:.3f} s: {filled}/{fresh.codes.size} labels verified")


def first_phi(n_more: int, specs: tuple[str, ...]) -> None:
    """First φ per shipped obfuscator, each in a fresh Python process (nothing memoised in memory),
    with an empty cache and with one holding the table's region certificates."""
    import subprocess
    import tempfile

    print(f"first φ in a fresh process (load average {load()})")
    models = Path(__file__).resolve().parents[1] / "models"
    expanded = []
    for spec in specs:
        dataset, variant = spec.split("/")
        if variant == "*":
            expanded += [f"{dataset}/{p.stem.removeprefix('obfuscator-')}"
                         for p in sorted((models / dataset).glob("obfuscator-*.json"))]
        else:
            expanded.append(spec)
    with tempfile.TemporaryDirectory() as cold, tempfile.TemporaryDirectory() as warm:
        for spec in expanded:
            subprocess.run([sys.executable, __file__, "--fill-store", spec], check=True,
                           env={**os.environ, "PRIVLENS_CACHE_DIR": warm})
        for spec in expanded:
            for setting in ("bench", "dashboard"):
                for label, directory in (("empty cache", cold), ("warm store", warm)):
                    print(f"  [{label}]", end="", flush=True)
                    subprocess.run([sys.executable, __file__, "--first-phi-child", spec, "--setting", setting,
                                    "--n", str(n_more)], check=True,
                                   env={**os.environ, "PRIVLENS_CACHE_DIR": directory})


def load() -> str:
    """The 1/5/15-minute load averages (the machine is shared: absolute times depend on them)."""
    try:
        return "/".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a small run (about two minutes)")
    parser.add_argument("--n", type=int, default=50, help="test embeddings per configuration")
    parser.add_argument("--n-straight", type=int, default=None, help="images for the straightforward way")
    parser.add_argument("--time-limit", type=float, default=30.0, help="seconds per MILP")
    parser.add_argument("--no-fig4", action="store_true")
    parser.add_argument("--first-phi", action="store_true",
                        help="only time the first φ per shipped obfuscator (--specs), each in a new process")
    parser.add_argument("--specs", default="digits/ARL-C-N,fashion-mnist/ARL-C-N",
                        help="--first-phi: comma-separated dataset/variant (variant * = every shipped one)")
    parser.add_argument("--trained", default="digits/*,fashion-mnist/*",
                        help="full run: shipped obfuscators to include (dataset/variant, comma-separated; "
                             "empty for none)")
    parser.add_argument("--first-phi-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--fill-store", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--setting", default="bench", choices=("bench", "dashboard"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill_store:
        fill_store_child(args.fill_store)
        return
    if args.first_phi_child:
        first_phi_child(args.first_phi_child, args.n, args.setting)
        return
    if args.first_phi:
        first_phi(args.n, tuple(args.specs.split(",")))
        return
    start = time.perf_counter()
    print(f"privlens Lipschitz benchmark — {os.cpu_count()} CPUs (load average {load()}), time limit "
          f"{args.time_limit:g} s per MILP, R_max = 10·R, tol = {TOL:g}, δ = {DELTA}")
    if args.quick:
        nets = [("8→10→8", paper_net((8, 10, 8))), ("8→8→8→8", paper_net((8, 8, 8, 8)))]
        plan = dict(n_train=8, n_test=10, n_straight=2, kinds=("exact", "lp", "interval"))
    else:
        nets = [("8→10→8", paper_net((8, 10, 8))), ("8→8→8→8", paper_net((8, 8, 8, 8))),
                ("8→32→32→8", paper_net((8, 32, 32, 8)))]
        n_straight = args.n if args.n_straight is None else args.n_straight
        plan = dict(n_train=20, n_test=args.n, n_straight=n_straight, kinds=("exact", "lp", "interval"))
    # --quick: the shipped digits models compared side by side image by image (the headline), one
    # Fashion-MNIST model
    specs = (("digits/ARL", "digits/ARL-C-N", "digits/N", "digits/Encoder", "fashion-mnist/Encoder")
             if args.quick else tuple(s for s in args.trained.split(",") if s))
    trained = trained_obfuscators(specs, plan["n_test"])
    for name, net in nets:  # per-model precomputation, reported separately (amortised over images)
        t = time.perf_counter()
        table = global_pattern_table(net, Norms())
        if table is not None:
            secs = time.perf_counter() - t
            print(f"  {name}: pattern table of {table.codes.size} patterns in {secs:.3f} s "
                  f"(once per model; max pattern norm {table.norms[0]:.4f})")
        else:  # too many patterns to list: their largest norm G by branch and bound (pattern_bnb)
            g = max_pattern_norm(net, max_nodes=100_000_000)
            secs = time.perf_counter() - t
            print(f"  {name}: max norm over all 2^{net.n_hidden} patterns G = {g.upper:.6f} (best pattern "
                  f"{g.lower:.6f}; {g.nodes} nodes) in {secs:.2f} s; product of layer norms "
                  f"{global_upper_bound(net):.2f}. A Δp ≥ G passes every radius without a solve")
    for name, net, _, delta_p, _ in trained:
        t = time.perf_counter()
        above = threshold_pattern_table(net, delta_p, Norms())
        table = nonempty_threshold_table(net, delta_p, Norms())
        secs = time.perf_counter() - t
        found = (f"{len(above.codes)} patterns above Δp = {delta_p:.4g}, {len(table.codes)} of them realised "
                 "(non-empty region, with its bounding box),") if table is not None else "no pattern table"
        print(f"  {name} ({net.describe()}): {found} in {secs:.2f} s (once per model and Δp: built, "
              "in this process: never read from disk)")
    rows = []
    trained_runs = [(name, net, radius, delta_p, z, "card") for name, net, radius, delta_p, z in trained]
    if not args.quick:  # the benchmark's other radius with the card's Δp: a timing of a harder bisection
        trained_runs += [(name, net, 0.5, delta_p, z, f"card(R={radius:g})")
                         for name, net, radius, delta_p, z in trained if radius != 0.5]
    for name, net, radius, delta_p, z, rule in trained_runs:
        cfg = dict(plan)
        # the straightforward way bisects with a full MILP over 20 unstable neurons per step:
        # about a minute per image when the bisection runs (Encoder), seconds when it does not
        cheap = name.endswith(("ARL-C-N", " ARL"))
        if args.quick:
            # the straightforward way takes ~35 s per digits Encoder image (its bisection runs)
            cfg.update(n_straight=1 if name == "digits Encoder" else QUICK_PAIRED)
        else:
            cfg.update(n_straight=min(cfg["n_straight"], 50 if cheap else 10))
        row = run_config(name, net, radius, time_limit=args.time_limit, seed=0, n_sigma=3.0,
                         given=(delta_p, z), **cfg)
        row.rule = rule
        print_row(row)
        rows.append(row)
        sys.stdout.flush()
    # Δp = μ + 3σ is the paper's rule; μ + 0σ (about half the points fail at R) exercises the bisection.
    rules = (3.0,) if args.quick else (3.0, 0.0)
    for name, net in nets:
        for radius in (0.2, 0.5):
            for n_sigma in rules:
                cfg = dict(plan)
                if args.quick and name == "8→8→8→8":  # ~5 s per straightforward image here
                    cfg.update(n_straight=1)
                if name == "8→32→32→8":  # minutes per MILP here: fewer images, the paper's rule only
                    if n_sigma != 3.0:
                        continue
                    cfg.update(n_straight=min(cfg["n_straight"], 3), n_test=min(cfg["n_test"], 10),
                               n_train=10)
                row = run_config(name, net, radius, time_limit=args.time_limit, seed=int(radius * 100),
                                 n_sigma=n_sigma, **cfg)
                print_row(row)
                rows.append(row)
                sys.stdout.flush()
    if not args.quick and not args.no_fig4:
        fig4(False, args.time_limit)
    print(f"\nmedian seconds per image for φ (exact certifier; load average {load()}):")
    print(f"  {'model':<24} {'R':>5} {'Δp':>9} {'images':>6} {'median':>8} {'p90':>8} {'max':>8}  failed")
    for row in rows:
        t = sorted(row.engine_s)
        p90 = t[min(len(t) - 1, math.ceil(0.9 * len(t)) - 1)]
        print(f"  {row.net:<24} {row.radius:>5g} {row.delta_p:>9.4g} {len(t):>6} "
              f"{statistics.median(t):>8.4f} {p90:>8.4f} {t[-1]:>8.4f}  {row.failed.get('engine', 0)}")
    paired = [p for row in rows for p in row.paired]
    shipped = [p for row in rows if row.rule.startswith("card") for p in row.paired]
    identical = sum(r.identical for r in rows)
    compared = sum(r.compared for r in rows)
    print(f"\nall configurations: {ratio_summary(paired)}; identical φ {identical}/{compared}; "
          f"total {time.perf_counter() - start:.1f} s; load average {load()}")
    print(f"shipped models: {ratio_summary(shipped)}")
    ratios = [b / max(a, 1e-9) for a, b in shipped]
    print(f"speedup: {statistics.median(ratios):.1f}" if ratios else "speedup: n/a (no shipped image paired)")


if __name__ == "__main__":
    main()
