"""``experiment fig4``: runtime of exact local-Lipschitz certification (posthoc paper, Fig. 4 / E3).

Three sweeps around the paper's setting (obfuscator = small ReLU MLP on the latent space, ℓ∞ ball
in, ℓ1 out): (a) the radius r of the ball, (b) the input (latent) dimension, (c) the number of
hidden layers, on seeded random networks (PyTorch's default initialisation, width 10 as the
authors' obfuscators; base latent → 10 → latent at r = 0.2) at centres drawn from N(0, I) like VAE
latents. Each (network, centre) is certified two ways, in alternating order:

* ``lipmip_*``: the paper's method as it stands — LipMIP's MILP (Jordan & Dimakis 2020) built fresh
  with interval big-M constants and solved to optimality (relative gap 1e-6) by Gurobi, nothing
  else (our formulation of it, :func:`privcore.lipschitz.build_milp`);
* ``seconds_*``: this product's engine, :func:`privcore.lipschitz.local_lipschitz` (closed form,
  pattern enumeration, or the MILP after bound tightening; ``solver`` says which ran).

A solve that reaches the time limit is counted in ``*_timeouts`` and enters the mean at the limit
(so the mean is a lower bound). Each mean carries a 95 % Student-t interval over its ``n``
(network, centre) pairs (``*_lo``/``*_hi``; the lower end clipped at 0 s, NaN for n < 2).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.seeds import row_seed

__all__ = ["COLUMNS", "run", "t_interval", "time_certificates"]

COLUMNS = (
    "dataset",
    "sweep",
    "value",
    "seconds_mean",
    "seconds_std",
    "seconds_lo",
    "seconds_hi",
    "n",
    "n_timeouts",
    "solver",
    "lipmip_seconds_mean",
    "lipmip_seconds_std",
    "lipmip_seconds_lo",
    "lipmip_seconds_hi",
    "lipmip_timeouts",
    "input_dim",
    "depth",
    "width",
    "radius",
)
KEY = ("sweep", "value")
WIDTH = 10


def t_interval(values: Any, *, level: float = 0.95) -> tuple[float, float]:
    """Two-sided ``level`` Student-t interval for the mean of ``values`` (sample sd, n − 1 degrees
    of freedom), its lower end clipped at 0 (a time is never negative); NaNs for fewer than 2."""
    from scipy import stats

    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        return math.nan, math.nan
    mean = float(v.mean())
    half = float(stats.t.ppf(0.5 + level / 2.0, v.size - 1)) * float(v.std(ddof=1)) / math.sqrt(v.size)
    return max(0.0, mean - half), mean + half


def time_certificates(
    *, input_dim: int, depth: int, width: int, radius: float, n: int, seed: int, time_limit: float
) -> dict[str, Any]:
    """Certify ``n`` (network, centre) pairs exactly, by the engine and by the plain LipMIP MILP
    (module docstring); return each one's mean/std seconds, 95 % t-interval of the mean and
    time-outs, and the engine's solvers."""
    import time

    import torch

    from privcore.lipschitz import as_network, build_milp, local_lipschitz
    from privcore.lipschitz.backends import solve
    from privcore.lipschitz.decide import MIP_GAP
    from privcore.nets.blocks import relu_mlp

    seconds, timeouts, solvers = [], 0, set()
    plain, plain_timeouts = [], 0
    for rep in range(n):
        torch.manual_seed(seed * 7919 + rep)
        net = relu_mlp([input_dim] + [width] * depth + [input_dim]).double()
        centre = np.random.default_rng(seed * 7919 + rep).standard_normal(input_dim)

        for which in ("engine", "lipmip") if rep % 2 == 0 else ("lipmip", "engine"):
            if which == "engine":
                cert = local_lipschitz(net, centre, radius, solver="auto", time_limit=time_limit)
                seconds.append(float(cert.seconds))
                timeouts += not cert.exact
                solvers.add(cert.solver)
            else:
                start = time.perf_counter()
                milp = build_milp(as_network(net), centre, radius)
                res = solve(milp, solver="gurobi", mip_gap=MIP_GAP, time_limit=time_limit)
                plain.append(time.perf_counter() - start)
                plain_timeouts += res.status != "optimal"
    lo, hi = t_interval(seconds)
    plain_lo, plain_hi = t_interval(plain)
    return {
        "seconds_mean": float(np.mean(seconds)),
        "seconds_std": float(np.std(seconds)),
        "seconds_lo": lo,
        "seconds_hi": hi,
        "n": n,
        "n_timeouts": timeouts,
        "solver": "+".join(sorted(solvers)),
        "lipmip_seconds_mean": float(np.mean(plain)),
        "lipmip_seconds_std": float(np.std(plain)),
        "lipmip_seconds_lo": plain_lo,
        "lipmip_seconds_hi": plain_hi,
        "lipmip_timeouts": plain_timeouts,
    }


def _error_bars(part: Any, prefix: str) -> dict[str, Any]:
    """The 95 % t-interval as plotly error bars (the sd for CSVs from before the intervals)."""
    if f"{prefix}_lo" not in part:
        return {"type": "data", "array": part[f"{prefix}_std"]}
    mean = part[f"{prefix}_mean"]
    return {"type": "data", "symmetric": False, "array": part[f"{prefix}_hi"] - mean,
            "arrayminus": mean - part[f"{prefix}_lo"]}


def _figure(frame: Any, dataset: str) -> Any:
    from plotly.subplots import make_subplots

    titles = {"radius": "(a) radius r", "input_dim": "(b) input dimension", "depth": "(c) hidden layers"}
    fig = make_subplots(rows=1, cols=3, subplot_titles=list(titles.values()))
    lines = (
        ("lipmip_seconds", "LipMIP's MILP, fresh (Gurobi)", "#d62728"),
        ("seconds", "privlens engine", "#1f77b4"),
    )
    for col, sweep in enumerate(titles, start=1):
        part = frame[frame["sweep"] == sweep].sort_values("value")
        for prefix, label, colour in lines:
            if f"{prefix}_mean" not in part:
                continue
            fig.add_scatter(
                x=part["value"],
                y=part[f"{prefix}_mean"],
                mode="lines+markers",
                name=label,
                line={"color": colour},
                legendgroup=prefix,
                row=1,
                col=col,
                showlegend=col == 1,
                error_y=_error_bars(part, prefix),
            )
        fig.update_xaxes(title_text=titles[sweep].split(" ", 1)[1], row=1, col=col)
    with_ci = "seconds_lo" in frame
    ns = ", ".join(str(int(v)) for v in sorted(frame["n"].unique())) if "n" in frame else "?"
    bars = "error bars: 95 % t-interval of the mean" if with_ci else "error bars: sd"
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text="seconds per exact certificate", row=1, col=1)
    fig.update_layout(
        title=f"Exact local Lipschitz certification: LipMIP's MILP vs our engine, random width-{WIDTH} "
        f"ReLU nets ({dataset})<br><sup>mean over n = {ns} (network, centre) pairs per point; {bars}</sup>",
        template="plotly_white",
        height=480,
        width=1300,
        margin={"t": 100},
        legend={"orientation": "h", "yanchor": "top", "y": -0.2, "xanchor": "left", "x": 0},
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
    n = ctx.pick(full=10, quick=2, tiny=2)  # tiny: 2, the fewest a t-interval needs
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
