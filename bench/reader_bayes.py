"""How far is each release classifier from the Bayes reader of its own obfuscator? (not a test: it
prints numbers, on the validation split only).

Under the certified global mechanism a release is y = f(clip z) + Lap(b) per coordinate, b = G·R/ε.
The noise is known exactly, so given f the Bayes-optimal class reader for the fit split's empirical
distribution of f(clip z) is the mixture decoder

    p(c | y) ∝ Σ_{i in class c} exp(−‖y − f(clip z_i)‖₁ / b)

over the fit split's embeddings (the exact Laplace likelihood; a kernel density with the noise as
kernel). It needs no training, so it tells apart what the obfuscator loses from what the server's
reader loses: where the release classifier reads as well as the decoder, no reader of these releases
gains much (up to the decoder's plug-in error from a finite fit split), and only a better f can.

For each model: G certified (or the card's G verified) by this process
(:func:`privcore.mechanisms.global_mechanism.card_global_constant`), f(clip z) of the fit part and of
the validation images of :func:`privcore.data.validation_split` (the dataset's own fixed split where
it has one), ``--draws`` Laplace draws per validation image at each total ε (seeded torch sampling:
the release distribution, not the release path's sampler), both readers on the same releases. Rows:
accuracy of each reader and the paired difference (decoder − classifier), each with n and a 95 %
percentile-bootstrap interval over images.

    .venv/bin/python bench/reader_bayes.py --dataset mnist --models N-global,N-global-e2o2
    .venv/bin/python bench/reader_bayes.py --dataset fashion-mnist --models C-N,ARL-C-N,N
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privcore.data import load_dataset, validation_split
from privcore.data.split import VALIDATION_FRACTION
from privcore.experiments.ptr_common import embed
from privcore.experiments.table1_global import _bootstrap
from privcore.mechanisms.global_mechanism import card_global_constant
from privcore.models.pipeline import load_pipeline


def mixture_logits(y: torch.Tensor, outputs: torch.Tensor, labels: torch.Tensor, b: float, *,
                   classes: int, chunk: int = 256) -> torch.Tensor:
    """log Σ_{i in c} exp(−‖y − outputs_i‖₁/b) per class c (rows of ``y``), chunked over ``y``; −∞ for a
    class without fit points."""
    order = torch.argsort(labels, stable=True)
    outputs, counts = outputs[order].double(), torch.bincount(labels, minlength=classes).tolist()
    rows = []
    for start in range(0, y.shape[0], chunk):
        log_k = torch.cdist(y[start:start + chunk].double(), outputs, p=1) / -b
        rows.append(torch.stack([blk.logsumexp(1) for blk in log_k.split(counts, dim=1)], dim=1))
    return torch.cat(rows)


def laplace(shape: torch.Size, b: float, gen: torch.Generator) -> torch.Tensor:
    """Lap(b) as the difference of two Exp(1/b) draws (float64)."""
    e1 = torch.empty(shape, dtype=torch.float64).exponential_(generator=gen)
    e2 = torch.empty(shape, dtype=torch.float64).exponential_(generator=gen)
    return b * (e1 - e2)


def interval(per_image: np.ndarray, *, signed: bool = False) -> str:
    """Mean [95 % percentile bootstrap over images]."""
    low, high = _bootstrap(per_image, 1)
    fmt = "+.3f" if signed else ".3f"
    return f"{per_image.mean():{fmt}} [{low:{fmt}}, {high:{fmt}}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="mnist")
    p.add_argument("--models", default="N-global", help="comma-separated shipped obfuscator variants")
    p.add_argument("--epsilons", default="1,2,4,10", help="total ε values")
    p.add_argument("--draws", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    ds = load_dataset(args.dataset)
    split = validation_split(ds, fraction=VALIDATION_FRACTION, seed=0)
    x_fit, y_fit = split.dataset.x_train, split.dataset.y_train.long()
    x_val, y_val = split.x_val, split.y_val.long()
    classes = len(ds.class_names)
    print(f"{args.dataset}: fit n = {len(y_fit)}, validation n = {len(y_val)}, {args.draws} draws per image")
    print("| model | G | total ε | release classifier | mixture decoder | decoder − classifier |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.models.split(","):
        t0 = time.perf_counter()
        pipe = load_pipeline(args.dataset, name, device="cpu")
        constant = card_global_constant(pipe.obfuscator, pipe.cards["obfuscator"])
        box = constant.box
        with torch.no_grad():
            f_fit, f_val = (pipe.obfuscator(torch.as_tensor(np.clip(embed(pipe, x), box.lower, box.upper),
                                                            dtype=torch.float32)).double()
                            for x in (x_fit, x_val))
        for eps in (float(e) for e in args.epsilons.split(",")):
            b = constant.value * pipe.radius / eps
            gen = torch.Generator().manual_seed(args.seed * 1_000_003 + int(eps * 1000))
            clf, mix = np.zeros((args.draws, len(y_val))), np.zeros((args.draws, len(y_val)))
            for d in range(args.draws):
                y = f_val + laplace(f_val.shape, b, gen)
                with torch.no_grad():
                    clf[d] = (pipe.classify(y.float(), float(b)).argmax(-1).cpu() == y_val).numpy()
                mix[d] = (mixture_logits(y, f_fit, y_fit, b, classes=classes).argmax(-1) == y_val).numpy()
            a, m = clf.mean(0), mix.mean(0)
            print(f"| {name} | {constant.value:.4g} | {eps:g} | {interval(a)} | {interval(m)} "
                  f"| {interval(m - a, signed=True)} |", flush=True)
        print(f"<!-- {name}: {time.perf_counter() - t0:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
