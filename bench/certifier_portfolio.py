"""The product's Certifier with the portfolio against the engine alone on the shipped obfuscators
(not a test: it prints timings).

``Certifier(kind="exact", time_limit=…)`` answers an exact value from
:func:`privcore.lipschitz.portfolio_lipschitz` (never racing); before, it asked
:func:`privcore.lipschitz.local_lipschitz` (``solver="auto"``) alone. Per shipped obfuscator (``--specs``),
``--n`` test embeddings at the card's radius R are certified both ways, one thread each, every
process-level memo cleared first, alternating which runs first, ``--limit`` seconds. Printed: exact
counts, median seconds, the median per-image ratio certifier ÷ engine with a 95 % bootstrap interval,
and the largest relative difference of the two values.

    .venv/bin/python bench/certifier_portfolio.py --n 20
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from unseen_nets import bootstrap_median, load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20, help="test embeddings per obfuscator")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds per certificate")
    parser.add_argument("--specs", default="digits/ARL-C-N,fashion-mnist/ARL-C-N")
    args = parser.parse_args()
    import torch
    from lipschitz import trained_obfuscators
    from threadpoolctl import threadpool_limits

    from bench.inf_to_one import clear_memos
    from privcore.lipschitz import Certifier, local_lipschitz

    torch.set_num_threads(1)
    print(f"load {load()}, one thread, limit {args.limit:g} s, n = {args.n}")
    print("| obfuscator | R | exact: certifier / engine | median s: certifier / engine "
          "| certifier ÷ engine, median [95 % bootstrap] | max rel Δ value |")
    print("|---|---|---|---|---|---|")
    with threadpool_limits(limits=1, user_api="blas"):
        for name, net, radius, _, zs in trained_obfuscators(tuple(args.specs.split(",")), args.n):
            secs: dict[str, list[float]] = {"certifier": [], "engine": []}
            exact = {"certifier": 0, "engine": 0}
            diff = 0.0
            for i, z in enumerate(zs[: args.n]):
                vals = {}
                for way in (("certifier", "engine") if i % 2 == 0 else ("engine", "certifier")):
                    clear_memos()
                    t0 = time.perf_counter()
                    if way == "certifier":
                        oracle = Certifier(kind="exact", time_limit=args.limit, threads=1)
                        cert = oracle.certify(net, z, radius)
                    else:
                        cert = local_lipschitz(net, z, radius, time_limit=args.limit, threads=1)
                    secs[way].append(time.perf_counter() - t0)
                    exact[way] += cert.exact
                    vals[way] = cert.upper
                if all(v > 0 for v in vals.values()):
                    diff = max(diff, abs(vals["certifier"] - vals["engine"]) / vals["engine"])
            ratio = bootstrap_median([c / e for c, e in zip(secs["certifier"], secs["engine"], strict=True)])
            med = {w: bootstrap_median(s)[0] for w, s in secs.items()}
            n = len(secs["engine"])
            print(f"| {name} | {radius:g} | {exact['certifier']}/{n} / {exact['engine']}/{n} | "
                  f"{med['certifier']:.4f} / {med['engine']:.4f} | "
                  f"{ratio[0]:.3f} [{ratio[1]:.3f}, {ratio[2]:.3f}] | {diff:.1e} |", flush=True)
    print(f"load {'/'.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
