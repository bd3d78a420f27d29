"""``experiment fig4``: runtime of exact local-Lipschitz certification (posthoc paper, Fig. 4 / E3).

Three sweeps around the paper's setting (obfuscator = small ReLU MLP on the latent space, ℓ∞ ball
in, ℓ1 out): (a) the radius r of the ball, (b) the input (latent) dimension, (c) the number of
hidden layers. Each point times :func:`privcore.lipschitz.local_lipschitz` (LipMIP solved to
optimality on Gurobi or HiGHS, ``solver="auto"``) on seeded random networks — PyTorch's default
initialisation, width 10 as the authors' obfuscators; base latent → 10 → latent at r = 0.2, the
network and calls of ``bench/lipschitz.py``'s Fig. 4 — at centres drawn from N(0, I) like VAE
latents; the time is the certificate's own ``seconds`` (the engine's timing, not ours). A solve
that reaches the time limit is counted in ``n_timeouts`` and enters the mean at the limit (so the
mean is a lower bound).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.seeds import row_seed

__all__ = ["COLUMNS", "run", "time_certificates"]

COLUMNS = (
    "dataset",
    "sweep",
    "value",
    "seconds_mean",
    "seconds_std",
    "n",
    "n_timeouts",
    "solver",
    "input_dim",
    "depth",
    "width",
    "radius",
)
KEY = ("sweep", "value")
WIDTH = 10


def time_certificates(
    *, input_dim: int, depth: int, width: int, radius: float, n: int, seed: int, time_limit: float
) -> dict[str, Any]:
    """Certify ``n`` (network, centre) pairs exactly; return mean/std seconds, time-outs, solvers."""
    import torch

    from privcore.lipschitz import local_lipschitz
    from privcore.nets.blocks import relu_mlp

    seconds, timeouts, solvers = [], 0, set()
    for rep in range(n):
        torch.manual_seed(seed * 7919 + rep)
        net = relu_mlp([input_dim] + [width] * depth + [input_dim]).double()
        centre = np.random.default_rng(seed * 7919 + rep).standard_normal(input_dim)
        cert = local_lipschitz(net, centre, radius, solver="auto", time_limit=time_limit)
        seconds.append(float(cert.seconds))
        timeouts += not cert.exact
        solvers.add(cert.solver)
    return {
        "seconds_mean": float(np.mean(seconds)),
        "seconds_std": float(np.std(seconds)),
        "n": n,
        "n_timeouts": timeouts,
        "solver": "+".join(sorted(solvers)),
    }


def _figure(frame: Any, dataset: str) -> Any:
    from plotly.subplots import make_subplots

    titles = {"radius": "(a) radius r", "input_dim": "(b) input dimension", "depth": "(c) hidden layers"}
    fig = make_subplots(rows=1, cols=3, subplot_titles=list(titles.values()))
    for col, sweep in enumerate(titles, start=1):
        part = frame[frame["sweep"] == sweep].sort_values("value")
        fig.add_scatter(
            x=part["value"],
            y=part["seconds_mean"],
            mode="lines+markers",
            row=1,
            col=col,
            showlegend=False,
            error_y={"type": "data", "array": part["seconds_std"]},
        )
        fig.update_xaxes(title_text=titles[sweep].split(" ", 1)[1], row=1, col=col)
    fig.update_yaxes(title_text="seconds per exact certificate", type="log", row=1, col=1)
    fig.update_layout(
        title=f"Exact local Lipschitz certification (LipMIP), random width-{WIDTH} ReLU nets ({dataset})",
        template="plotly_white",
        height=420,
    )
    return fig


def run(ctx: RunContext) -> Any:
    """Time exact certificates along the three sweeps of Fig. 4; write ``fig4.csv`` + figure."""
    from privcore.data import get_spec

    latent = int(get_spec(ctx.dataset).latent_dim)
    # base network as in bench/lipschitz.py's Fig. 4 (latent → 10 → latent, r = 0.2)
    base = {"input_dim": latent, "depth": 1, "width": WIDTH, "radius": 0.2}
    radii = ctx.pick(full=(0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0), quick=(0.05, 0.2, 0.5, 1.0), tiny=(0.05, 0.1))
    dims = ctx.pick(full=(2, 4, 6, 8, 10, 12, 16), quick=(2, 4, 8, 12), tiny=(2, 4))
    depths = ctx.pick(full=(1, 2, 3, 4, 5), quick=(1, 2, 3), tiny=(1, 2))
    n = ctx.pick(full=10, quick=2, tiny=1)
    time_limit = ctx.pick(full=300.0, quick=30.0, tiny=10.0)
    settings = [("radius", r, {**base, "radius": r}) for r in radii]
    settings += [("input_dim", d, {**base, "input_dim": d}) for d in dims]
    settings += [("depth", k, {**base, "depth": k}) for k in depths]
    config = {
        "base": base,
        "radii": list(radii),
        "dims": list(dims),
        "depths": list(depths),
        "n": n,
        "time_limit": time_limit,
    }
    table = ctx.table("fig4", columns=COLUMNS, key=KEY, config=config)
    with ctx.progress("fig4 certification runtime") as progress:
        for i, (sweep, value, s) in enumerate(settings):
            progress(i, len(settings), f"{sweep}={value}")
            if table.done(sweep=sweep, value=value):
                continue
            seed = row_seed(ctx.seed, "fig4", sweep, value) % 2**31
            stats = time_certificates(n=n, seed=seed, time_limit=time_limit, **s)
            table.add({"dataset": ctx.dataset, "sweep": sweep, "value": value, **stats, **s})
        progress(len(settings), len(settings), "done")
    frame = table.frame()
    return table.finish(figures=save_figure(_figure(frame, ctx.dataset), ctx.dataset_dir / "fig4"))
