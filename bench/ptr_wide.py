"""PTR's φ on an obfuscator past paper size (issue 17's target; not a test: it prints timings).

An untrained obfuscator with the product's initialisation (``bench/lipschitz.py``'s ``paper_net``),
Δp = μ + 3σ of the exact L(f, B(z, R)) at 10 "training" centres z ~ N(0, I) (each
``local_lipschitz`` with ``--limit`` seconds; how many were exact is printed), then φ per test
centre with the exact certifier (``Certifier(kind="exact")``; R_max = 10R and the bench's tol, or
with ``--grid dashboard`` the dashboard's R_max and tol = R/16), its seconds and which evidence
decided its questions; φ = None means a question was not decided and nothing would be released.

    .venv/bin/python bench/ptr_wide.py                          # 8→32→32→8, R = 0.2, 5 centres
    .venv/bin/python bench/ptr_wide.py --widths 8,64,64,8 --radius 0.1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from privcore.lipschitz import Certifier, local_lipschitz


def main() -> None:
    from lipschitz import TOL, load, paper_net, timed_phi

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="8,32,32,8")
    ap.add_argument("--radius", type=float, default=0.2)
    ap.add_argument("--n", type=int, default=5, help="test centres")
    ap.add_argument("--limit", type=float, default=30.0, help="seconds per training constant and per MILP")
    ap.add_argument("--grid", choices=("bench", "dashboard"), default="bench",
                    help="φ's bisection grid: bench/lipschitz.py's (R_max = 10R, tol 1e-3) or the "
                         "dashboard's (ptr_search_range at its smallest ε and δ: tol = R/16)")
    args = ap.parse_args()
    widths = tuple(int(w) for w in args.widths.split(","))
    net = paper_net(widths)
    rng = np.random.default_rng(0)
    train = rng.standard_normal((10, net.in_dim))
    test = rng.standard_normal((args.n, net.in_dim))
    if args.grid == "dashboard":
        from privcore.mechanisms.search_range import ptr_search_range

        r_max, tol = ptr_search_range(args.radius)  # the library's defaults: the dashboard's
    else:
        r_max, tol = 10 * args.radius, TOL
    print(f"{'→'.join(map(str, widths))}, R = {args.radius:g}, grid {args.grid} (R_max {r_max:.4g}, "
          f"tol {tol:.4g}), load {load()}")
    start = time.perf_counter()
    certs = [local_lipschitz(net, z, args.radius, time_limit=args.limit, threads=1) for z in train]
    values = np.array([c.upper for c in certs])
    delta_p = float(values.mean() + 3.0 * values.std(ddof=1))
    print(f"  Δp = μ + 3σ = {delta_p:.4f} from 10 training centres, {sum(c.exact for c in certs)} exact, "
          f"{time.perf_counter() - start:.1f} s")
    seconds, decided = [], 0
    for i, z in enumerate(test):
        cert = Certifier(kind="exact", time_limit=args.limit)
        phi, secs = timed_phi(net, z, cert, radius=args.radius, delta_p=delta_p, r_max=r_max, tol=tol)
        seconds.append(secs)
        decided += phi is not None
        evidence = {str(k): v for k, v in cert.stats.items()}
        shown = None if phi is None else round(phi.phi, 4)
        print(f"  centre {i}: φ = {shown}, {secs:.2f} s, {evidence}", flush=True)
    print(f"  φ decided {decided}/{len(test)}, median {statistics.median(seconds):.2f} s; load {load()}")


if __name__ == "__main__":
    main()
