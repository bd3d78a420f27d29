"""The certified global mechanism per shipped obfuscator (issue 31; not a test: it prints timings).

Per model: G over the card's clipping box computed afresh (``compute_global_constant``, ``--limit``
seconds) and how; the seconds to verify the card's stored G (what every process does before its first
release); Δp and G/(2Δp), the noise of the global mechanism at total ε against PTR's at the same total
guarantee (PTR's (2ε, δ/2, R) costs Lap(Δp·R/ε), the global one at 2ε costs Lap(G·R/(2ε))); and the
median seconds of one release f(clip z) + noise beyond the embedding (secure noise, G already
certified). Then an untrained 8→64→64→8 (``bench/ptr_wide.py``'s constructor) on the box of 60 000
N(0, I) "embeddings" + 0.5: its finite certified bound within ``--limit`` seconds against its best
verified witness in the box and the all-pattern search's best pattern.

    .venv/bin/python bench/global_mechanism.py                 # every obfuscator of both datasets + wide
    .venv/bin/python bench/global_mechanism.py --quick         # ARL-C-N of each dataset + wide
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from privcore.lipschitz.global_box import ClipBox, compute_global_constant, verify_global_constant
from privcore.mechanisms.global_mechanism import (
    card_clip_box,
    card_global_constant,
    card_global_hint,
    global_release,
)
from privcore.nets.checkpoint import load_checkpoint
from privcore.pipeline import default_models_dir


def release_seconds(f, constant, box: ClipBox, radius: float, n: int = 200) -> float:
    """Median wall time of one release at ε = 1 (secure randomness), z uniform around the box."""
    rng = np.random.default_rng(0)
    width = box.upper - box.lower
    zs = rng.uniform(box.lower - 0.1 * width, box.upper + 0.1 * width, size=(n, box.dim))
    global_release(f, zs[0], epsilon=1.0, radius=radius, constant=constant)  # first call parses f once
    times = []
    for z in zs:
        start = time.perf_counter()
        global_release(f, z, epsilon=1.0, radius=radius, constant=constant)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def shipped(models: Path, datasets: list[str], quick: bool, limit: float) -> None:
    print(f"{'model':34s} {'G':>10s} {'how':>9s} {'s':>6s} {'verify s':>8s} {'witness':>10s} {'Δp':>9s} "
          f"{'G/(2Δp)':>8s} {'release ms':>10s}")
    for dataset in datasets:
        stems = sorted(p.with_suffix("") for p in (models / dataset).glob("obfuscator-*.json"))
        if quick:
            stems = [s for s in stems if s.name == "obfuscator-ARL-C-N"]
        for stem in stems:
            obf = load_checkpoint(stem, kind="obfuscator")
            f, card = obf["obfuscator"], obf.card
            box, hint = card_clip_box(card), card_global_hint(card)
            if box is None or hint is None:
                print(f"{dataset}/{stem.name}: no global_lipschitz block (run `privcore global compute`)")
                continue
            g = compute_global_constant(f, box, time_limit=limit)
            start = time.perf_counter()
            ok = verify_global_constant(f, box, hint, time_limit=limit)
            verify_s = time.perf_counter() - start
            dp = (card.get("delta_p") or {}).get("proposed")
            ratio = "—" if dp is None else f"{g.value / (2.0 * dp):.3f}"
            constant = card_global_constant(f, card, time_limit=limit)
            ms = 1e3 * release_seconds(f, constant, box, float(card["radius"]["value"]))
            verdict = f"{verify_s:.2f}" if ok is not None else "FAILED"
            print(f"{dataset + '/' + stem.name:34s} {g.value:10.7g} {g.how.value:>9s} {g.seconds:6.2f} "
                  f"{verdict:>8s} {g.lower:10.6g} {'—' if dp is None else f'{dp:9.4g}':>9s} {ratio:>8s} "
                  f"{ms:10.3f}", flush=True)


def wide(limit: float) -> None:
    from lipschitz import paper_net

    from privcore.lipschitz.pattern_bnb import max_pattern_norm

    net = paper_net((8, 64, 64, 8))
    z = np.random.default_rng(0).standard_normal((60000, 8))
    box = ClipBox.from_points(z, margin=0.5)
    g = compute_global_constant(net, box, time_limit=limit)
    start = time.perf_counter()
    ap = max_pattern_norm(net, max_nodes=2_000_000)
    ap_s = time.perf_counter() - start
    print(f"untrained 8→64→64→8 on [{box.lower.min():.2f}, {box.upper.max():.2f}]^8: G = {g.value:.4f} "
          f"({g.how.value}, {g.seconds:.1f} s; bounds {({k: round(v, 4) for k, v in g.bounds.items()})})")
    print(f"  verified witness in the box {g.lower:.4f}: G/witness = {g.value / g.lower:.2f}; all-pattern "
          f"search's best pattern {ap.lower:.4f} (complete: {ap.complete}, {ap_s:.1f} s): "
          f"G/pattern = {g.value / ap.lower:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="ARL-C-N of each dataset, then the wide net")
    ap.add_argument("--datasets", default="digits,fashion-mnist")
    ap.add_argument("--limit", type=float, default=60.0, help="seconds for G (and for a verification)")
    ap.add_argument("--no-wide", action="store_true")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    shipped(default_models_dir(), args.datasets.split(","), args.quick, args.limit)
    if not args.no_wide:
        wide(args.limit)


if __name__ == "__main__":
    main()
