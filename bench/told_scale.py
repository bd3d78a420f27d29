"""Is each shipped release classifier monotone in the noise it is told? (issue 32, item 5; not a
test: it prints numbers; tests/test_release_monotone.py checks the same on a fixed subset).

For every shipped classifier: the test images' noise-free f(g(x)), classified when told each Laplace
scale b of a grid from 0 to the largest scale the dashboard can produce (PTR's Δp·R/(ε/2) and the
global mechanism's G·R/ε, ε at its smallest, R at its largest), 40 points between 0 and the smallest
trained scale and 30 per decade above. "before" reads the told b as it is (the shipped weights as
fitted, ``NoiseAwareClassifier.logits``); "after" through the card's told-scale map (``forward``).
For each: accuracy at b = 0, the largest rise of accuracy from a told b to a larger b′ (in images,
and as the paired z = (n01 − n10)/√(n01 + n10)), and the pair.

    .venv/bin/python bench/told_scale.py                        # both datasets, full test sets
    .venv/bin/python bench/told_scale.py --dataset digits --variants ARL-C-N,C-N
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privcore.mechanisms import registry
from privcore.models.pipeline import default_models_dir, list_models, load_pipeline
from privcore.ranges import EPSILON_RANGE, RADIUS_RANGE
from privcore.train.embedder import dataset_from_card


def dashboard_max_scale(obfuscator_card: dict) -> float:
    eps, radius = EPSILON_RANGE[0], RADIUS_RANGE[1]
    scales = [obfuscator_card["delta_p"]["proposed"] * radius / registry.get("PTR").mechanism_epsilon(eps)]
    g = (obfuscator_card.get("global_lipschitz") or {}).get("value")
    if g:
        scales.append(float(g) * radius / registry.get("Global").mechanism_epsilon(eps))
    return max(scales)


def grid(min_scale: float, b_max: float) -> list[float]:
    start = min_scale * 1e-4
    pts = {0.0, *np.linspace(0.0, min_scale, 41)[1:].tolist()}
    pts.update(np.geomspace(start, b_max, int(30 * math.log10(b_max / start))).tolist())
    return sorted(pts)


def worst(right: torch.Tensor, g: list[float]) -> str:
    r = right.double()
    n01 = (1 - r) @ r.T
    diff = torch.triu(n01 - n01.T, diagonal=1)
    z = torch.where(diff > 0, diff / torch.sqrt((n01 + n01.T).clamp_min(1.0)), torch.zeros_like(diff))
    k = int(diff.argmax())
    i, j = k // diff.shape[1], k % diff.shape[1]
    kz = int(z.argmax())
    iz, jz = kz // z.shape[1], kz % z.shape[1]
    acc = r.mean(1)
    rise = "none"
    if diff[i, j] > 0:
        rise = f"{int(diff[i, j])} img ({acc[i]:.4f}→{acc[j]:.4f}, b {g[i]:.3g}→{g[j]:.3g})"
    return f"worst rise {rise}; max z {float(z[iz, jz]):.1f}" + (
        f" (b {g[iz]:.3g}→{g[jz]:.3g})" if z[iz, jz] > 0 else ""
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="digits,fashion-mnist")
    ap.add_argument("--variants", default="", help="comma-separated (default: every shipped classifier)")
    ap.add_argument("--n", type=int, default=0, help="first n test images (default: all)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    models = default_models_dir()
    for ds_name in args.dataset.split(","):
        variants = args.variants.split(",") if args.variants else sorted(
            m.name[len("classifier-"):] for m in list_models(models)
            if m.dataset == ds_name and m.kind == "release-classifier"
        )
        ds = None
        for v in variants:
            p = load_pipeline(ds_name, v, models_dir=models, device="cpu")
            if ds is None:
                ds = dataset_from_card(p.cards["obfuscator"]["dataset"])
            n = args.n or ds.x_test.shape[0]
            zt = torch.cat([p.obfuscate(p.embed(ds.x_test[i : min(i + 2000, n)])) for i in range(0, n, 2000)])
            y = ds.y_test[:n].long()
            clf, ts = p.classifier, p.classifier.told_scale
            g = grid(ts.min_scale, dashboard_max_scale(p.cards["obfuscator"]))
            with torch.no_grad():
                before = torch.stack([clf.logits(zt, b).argmax(-1) == y for b in g])
                after = torch.stack([clf(zt, b).argmax(-1) == y for b in g])
            print(f"{ds_name} {v}: n={n}, {len(g)} told scales in [0, {g[-1]:.4g}], "
                  f"acc(0) {after[0].double().mean():.4f}")
            print(f"   before: {worst(before, g)}")
            print(f"   after : {worst(after, g)}", flush=True)


if __name__ == "__main__":
    main()
