"""``experiment attack-frontier``: the reconstruction attack (posthoc paper Tables 3–6) on releases of
the certified global mechanism, f(clip z) + Lap(G·R/ε), at equal total ε for every obfuscator of
:data:`OBFUSCATORS` the dataset ships.

A formal guarantee (ε, 0, R) hides the style within R; what an attacker recovers of the image is a
separate question, asked here at the card's R for each model: its shipped attacker (trained on its
own release noise by ``train global-model`` or ``train attacker``) rebuilds every test image from one
release per total ε of :data:`EPSILONS_TOTAL` (ε = ∞: the noise-free obfuscated vector), and SSIM,
PSNR, ℓ1 and ℓ2 against the original are averaged over the test images, with n and a 95 %
percentile-bootstrap interval, beside the no-release floor (the training mean image as the guess).
ARL-C-N, the paper's model, is measured the same way, so every row compares at the same mechanism,
R and total ε; its PTR rows are in ``attack.csv``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from privcore.experiments.attack import METRICS, _reconstruct, cell_statistics
from privcore.experiments.ptr_common import embed, test_indices
from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.seeds import row_seed
from privcore.experiments.select_frontier import GRIDS

__all__ = ["COLUMNS", "EPSILONS_TOTAL", "OBFUSCATORS", "run"]

#: the models compared, where the dataset ships them with a global card and an attacker: the paper's
#: ARL-C-N and every candidate of ``select-frontier``'s grids
OBFUSCATORS = ("ARL-C-N", *dict.fromkeys(name for grid in GRIDS.values() for name in grid))
EPSILONS_TOTAL = (1.0, 2.0, 4.0, 10.0)
COLUMNS = (
    "dataset",
    "obfuscator",
    "mechanism",
    "radius",
    "epsilon_total",
    "global_lipschitz",
    "noise_scale",
    *METRICS,
    "psnr_paper",
    *(f"{m}_{s}" for s in ("std",) for m in METRICS),
    *(f"{m}_{s}" for m in METRICS for s in ("lo", "hi")),
    *(f"{m}_floor" for m in METRICS),
    "n_eval",
    "seed",
)
KEY = ("obfuscator", "epsilon_total")


def _shipped(ctx: RunContext) -> list[str]:
    """The models of :data:`OBFUSCATORS` this dataset ships with a global card and an attacker."""
    cards = {(m.kind, m.name): m.card for m in ctx.model_infos()}
    return [n for n in OBFUSCATORS if (cards.get(("obfuscator", n)) or {}).get("global_lipschitz")
            and ("attacker", f"attacker-{n}") in cards]


def run(ctx: RunContext) -> Any:
    """The attack on global releases of every shipped model; write ``attack-frontier.csv`` + figure."""
    import torch

    from privcore.attacks.metrics import image_metrics
    from privcore.data import load_dataset
    from privcore.mechanisms.global_mechanism import card_global_constant, global_release

    ds = load_dataset(ctx.dataset)
    names = ctx.pick(full=_shipped(ctx), quick=_shipped(ctx), tiny=_shipped(ctx)[:2])
    epsilons = ctx.pick(full=EPSILONS_TOTAL, quick=EPSILONS_TOTAL, tiny=(2.0,))
    idx = test_indices(ds.x_test.shape[0], ctx.n_test(full=None if ds.x_test.shape[0] <= 2000 else 2000,
                                                     quick=100, tiny=4), ctx.seed)
    x = ds.x_test[idx]
    pipes = {n: ctx.pipeline(n) for n in names}
    config = {"obfuscators": names, "epsilons_total": list(epsilons), "n_test": len(idx),
              "weights": {n: p.cards["obfuscator"]["weights"]["sha256"] for n, p in pipes.items()},
              "attackers": {n: p.cards["attacker"]["weights"]["sha256"] for n, p in pipes.items()}}
    table = ctx.table("attack-frontier", columns=COLUMNS, key=KEY, config=config)
    mean_guess = torch.as_tensor(ds.x_train, dtype=torch.float32).mean(dim=0, keepdim=True)
    floor = image_metrics(x, mean_guess.expand(len(idx), -1, -1, -1))
    for name, pipe in pipes.items():
        todo = [e for e in (*epsilons, math.inf) if not table.done(obfuscator=name, epsilon_total=e)]
        if not todo:
            continue
        constant = card_global_constant(pipe.obfuscator, pipe.cards["obfuscator"])  # verified here
        z = embed(pipe, x)
        for eps in todo:
            seed = row_seed(ctx.seed, "attack-frontier", name, eps)
            if math.isinf(eps):
                rel = pipe.obfuscate(torch.as_tensor(z, dtype=torch.float32)).double().cpu().numpy()
            else:
                rng = np.random.default_rng(seed)
                rel = np.stack([global_release(pipe.obfuscator, zi, epsilon=eps, radius=pipe.radius,
                                               constant=constant, rng=rng).value for zi in z])
            metrics = image_metrics(x, _reconstruct(pipe.attacker, rel))
            table.add({
                "dataset": ctx.dataset, "obfuscator": name, "mechanism": "Global", "radius": pipe.radius,
                "epsilon_total": eps, "global_lipschitz": constant.value,
                "noise_scale": 0.0 if math.isinf(eps) else constant.value * pipe.radius / eps,
                "n_eval": len(idx), "seed": seed, **cell_statistics(metrics, floor, seed=seed),
            })
    frame = table.frame()
    return table.finish(figures=save_figure(_figure(frame, ctx.dataset), ctx.dataset_dir / "attack-frontier"))


def _figure(frame: Any, dataset: str) -> Any:
    from plotly.subplots import make_subplots

    metrics = (("ssim", "SSIM"), ("psnr", "PSNR (dB, range 1)"), ("l1", "ℓ1 (MAE)"), ("l2", "ℓ2 (MSE)"))
    fig = make_subplots(rows=1, cols=4, subplot_titles=[t for _, t in metrics])
    finite = frame[np.isfinite(frame["epsilon_total"].astype(float))]
    for col, (m, _) in enumerate(metrics, start=1):
        for name, part in finite.groupby("obfuscator", sort=False):
            part = part.sort_values("epsilon_total")
            fig.add_scatter(x=part["epsilon_total"], y=part[m], mode="lines+markers", row=1, col=col,
                            name=str(name), legendgroup=str(name), showlegend=col == 1,
                            error_y={"type": "data", "symmetric": False, "array": part[f"{m}_hi"] - part[m],
                                     "arrayminus": part[m] - part[f"{m}_lo"]})
        fig.update_xaxes(title_text="total ε", type="log", row=1, col=col)
    fig.update_layout(title=f"Reconstruction attack on global-mechanism releases ({dataset}, R of each card)",
                      template="plotly_white", height=400, width=1300)
    return fig
