"""Release rates of the ``interval`` and ``lp`` certifiers before and after the per-pair interval
bound (issue 17: "the lp and interval certifiers release 2.5 % where the exact one releases 62–99 %").

Per obfuscator and test embedding, φ(z) of posthoc PTR (R_max = 10·R, tol = 1e-3, as
``bench/lipschitz.py``) under four sensitivity oracles, side by side on the same images:

* ``interval (old)``: U = min(interval Jacobian bound, G), the certifier's definition before
  :data:`~privcore.lipschitz.engine.RELAXATION_VERSION` 2;
* ``interval``: the certifier now, U = min(that, the largest per-pair interval bound, G);
* ``lp``: the ``lp`` certifier now (its interval term is the new one);
* ``exact``: the exact certifier (decisions of the engine's chain; 10 s per MILP).

Printed: the mean probability that PTR's test passes (ε ∈ {1, 2, 5}, δ = 0.05) and the median
seconds per φ, per oracle. Shipped ARL-C-N obfuscators use their card's R and Δp; the untrained
8→32→32→8 uses Δp = μ + 3σ of exact constants at 10 training embeddings z ~ N(0, I).

    .venv/bin/python bench/relaxations.py --n 20
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

from privcore.errors import CertificationError
from privcore.lipschitz import Certifier, interval_upper_bound, local_lipschitz
from privcore.lipschitz.engine import global_bound
from privcore.mechanisms.ptr import compute_phi

EPSILONS = (1.0, 2.0, 5.0)
DELTA = 0.05


class OldInterval:
    """The ``interval`` certifier's U before the per-pair bound: min(interval Jacobian bound, G)."""

    input_norm, output_norm = "linf", "l1"

    def __call__(self, f, z, r) -> float:
        return min(interval_upper_bound(f, z, r), global_bound(f))


def rates(net, z_all, radius: float, delta_p: float, oracle) -> tuple[dict[float, float], float, int]:
    from lipschitz import pass_probability

    out, times, failed = dict.fromkeys(EPSILONS, 0.0), [], 0
    for z in z_all:
        t = time.perf_counter()
        try:
            phi = compute_phi(net, z, radius=radius, delta_p=delta_p, r_max=10 * radius, tol=1e-3,
                              lipschitz=oracle)
        except CertificationError:
            failed += 1
            times.append(time.perf_counter() - t)
            continue
        times.append(time.perf_counter() - t)
        for e in EPSILONS:
            out[e] += pass_probability(phi.phi, phi.zeta, radius, e, DELTA) / len(z_all)
    return out, statistics.median(times), failed


def main() -> None:
    from lipschitz import paper_net, trained_obfuscators

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20, help="test embeddings per model")
    args = ap.parse_args()
    shipped = trained_obfuscators(("digits/ARL-C-N", "fashion-mnist/ARL-C-N"), args.n)
    models = [(name, net, radius, dp, z[: args.n]) for name, net, radius, dp, z in shipped]
    wide = paper_net((8, 32, 32, 8))
    rng = np.random.default_rng(20)
    train, test = rng.standard_normal((10, 8)), rng.standard_normal((args.n, 8))
    vals = [local_lipschitz(wide, z, 0.2, time_limit=60, threads=1).upper for z in train]
    models.append(("untrained 8→32→32→8", wide, 0.2, float(np.mean(vals) + 3 * np.std(vals, ddof=1)), test))
    print("| model | R | Δp | oracle | P[pass] ε = 1 / 2 / 5 | median s per φ | failed |")
    print("|---|---|---|---|---|---|---|")
    for name, net, radius, dp, z_all in models:
        oracles = (("interval (old)", OldInterval()), ("interval", Certifier(kind="interval", cache=False)),
                   ("lp", Certifier(kind="lp", cache=False)),
                   ("exact", Certifier(kind="exact", cache=False, time_limit=10, threads=1)))
        for label, oracle in oracles:
            r, med, failed = rates(net, z_all, radius, dp, oracle)
            print(f"| {name} | {radius:g} | {dp:.4g} | {label} | "
                  + " / ".join(f"{r[e]:.3f}" for e in EPSILONS)
                  + f" | {med:.3f} | {failed}/{len(z_all)} |", flush=True)


if __name__ == "__main__":
    main()
