"""The certified global mechanism per shipped obfuscator (issue 31; not a test: it prints timings).

Per model: G over the card's clipping box computed afresh (``compute_global_constant``, ``--limit``
seconds) and how; the seconds to verify the card's stored G (what every process does before its first
release); Δp and G/(2Δp), the noise of the global mechanism at total ε against PTR's at the same total
guarantee (PTR's (2ε, δ/2, R) costs Lap(Δp·R/ε), the global one at 2ε costs Lap(G·R/(2ε))); and the
median seconds of one release f(clip z) + noise beyond the embedding (secure noise, G already
certified). Then an untrained 8→64→64→8 (``bench/ptr_wide.py``'s constructor; ``--widths``) on the box of
60 000 N(0, I) "embeddings" + 0.5: its certified bound within ``--limit`` seconds (wall and CPU), its best
verified witness in the box and the ratio (issue 31's target: ≤ 2 in ≤ 60 s), the seconds to verify that G
in this process, and the one-layer all-pattern search's best pattern (no box).

    .venv/bin/python bench/global_mechanism.py                 # every obfuscator of both datasets + wide
    .venv/bin/python bench/global_mechanism.py --quick         # ARL-C-N of each dataset + wide
    .venv/bin/python bench/global_mechanism.py --wide-only     # 8→64→64→8 only
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
from privcore.models.pipeline import default_models_dir
from privcore.nets.checkpoint import load_checkpoint


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
    print(f"{'model':34s} {'G':>10s} {'how':>9s} {'s':>6s} {'verify s':>8s} {'witness':>10s} {'G/wit':>7s} "
          f"{'Δp':>9s} {'G/(2Δp)':>8s} {'release ms':>10s}")
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
                  f"{verdict:>8s} {g.lower:10.6g} {g.value / g.lower:7.4f} "
                  f"{'—' if dp is None else f'{dp:9.4g}':>9s} {ratio:>8s} {ms:10.3f}", flush=True)


def wide(limit: float, widths: tuple[int, ...]) -> None:
    from lipschitz import load, paper_net

    from privcore.lipschitz.pattern_bnb import max_pattern_norm

    net = paper_net(widths)
    z = np.random.default_rng(0).standard_normal((60000, widths[0]))
    box = ClipBox.from_points(z, margin=0.5)
    name = "→".join(map(str, widths))
    print(f"untrained {name} on [{box.lower.min():.2f}, {box.upper.max():.2f}]^{widths[0]}, load {load()}")
    cpu = time.process_time()
    g = compute_global_constant(net, box, time_limit=limit)
    cpu = time.process_time() - cpu
    print(f"  G = {g.value:.7g} ({g.how.value}), verified witness in the box {g.lower:.6g}: "
          f"G/witness = {g.value / g.lower:.4f}; {g.seconds:.1f} s ({cpu:.1f} s CPU); "
          f"bounds {({k: round(v, 4) for k, v in g.bounds.items()})}")
    start = time.perf_counter()
    ok = verify_global_constant(net, box, g.value, time_limit=limit)
    verdict = "FAILED" if ok is None else f"{ok.how.value}, {time.perf_counter() - start:.1f} s"
    print(f"  verifying G = {g.value:.7g} in this process: {verdict}")
    start = time.perf_counter()
    ap = max_pattern_norm(net, max_nodes=2_000_000)
    ap_s = time.perf_counter() - start
    print(f"  one-layer all-pattern search's best pattern (no box; not necessarily realised) {ap.lower:.4f} "
          f"(complete: {ap.complete}, {ap_s:.1f} s): G/pattern = {g.value / ap.lower:.2f}; load {load()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="ARL-C-N of each dataset, then the wide net")
    ap.add_argument("--datasets", default="digits,fashion-mnist")
    ap.add_argument("--limit", type=float, default=60.0, help="seconds for G (and for a verification)")
    ap.add_argument("--no-wide", action="store_true")
    ap.add_argument("--widths", default="8,64,64,8", help="the untrained wide net's layer widths")
    ap.add_argument("--wide-only", action="store_true", help="only the untrained wide net")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from lipschitz import load

    print(f"load {load()} (1/5/15 min; 2 shared cores)")
    if not args.wide_only:
        shipped(default_models_dir(), args.datasets.split(","), args.quick, args.limit)
    if not args.no_wide:
        wide(args.limit, tuple(int(w) for w in args.widths.split(",")))


if __name__ == "__main__":
    main()
