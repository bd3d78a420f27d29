"""Shavit & Gjura (2019) Fig. 1: k-Lipschitz networks fitted to f(x) = sin x + ½·cos(10x).

The paper trains Lipschitz networks (weights re-parameterised per column, Sec. 3, eq. 1) to
minimise the MSE to f for increasing k and observes that they "fail to recover the optimal
k-Lipschitz fit". Here both are computed:

* the **network**: :class:`~privcore.nets.lipschitz_layers.LipschitzMLP` (1 → 100 → 100 → 1,
  ReLU, ℓ1 column norms, each layer k^{1/3}-Lipschitz), full-batch Adam on the training points;
  the step count is chosen on a validation set (the step of lowest validation MSE is kept);
* the **optimal k-Lipschitz fit** on the training points: min Σ (g_i − f(x_i))² subject to
  |g_{i+1} − g_i| ≤ k·(x_{i+1} − x_i), a bounded least-squares problem in the increments
  (scipy's BVLS, solved exactly); its piecewise-linear interpolation is k-Lipschitz on the
  whole interval, and no k-Lipschitz function has a lower training MSE.

f is 6-Lipschitz (|f'| = |cos x − 5 sin 10x| ≤ 6): for k ≥ 6 the optimal fit is f itself. The
paper gives no domain or sample size; this module uses x ∈ [0, 2π] (stated in every output).
Every MSE is reported on fresh test points, read once after the validation choice.

Each network is trained with ``seeds`` initialisation/training seeds on one fixed data draw
(``data_seed``): the question is whether the network family reaches the optimum on a given
problem, so the spread reported (mean, sd, 95 % Student-t interval over seeds) is the
optimiser's; the optimal fit is deterministic given the data.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch

from privcore.validation import check_int, check_positive

__all__ = [
    "DOMAIN",
    "MSE_COLUMNS",
    "Fig1Config",
    "fig1_runs",
    "fig1_summary",
    "fig1_tables",
    "fit_network",
    "optimal_lipschitz_fit",
    "t_interval",
    "target",
]

DOMAIN = (0.0, 2.0 * math.pi)
MSE_COLUMNS = ("network_mse_train", "network_mse_val", "network_mse_test")


def target(x: np.ndarray) -> np.ndarray:
    """f(x) = sin x + ½·cos(10x) (Shavit & Gjura, Fig. 1)."""
    return np.sin(x) + 0.5 * np.cos(10.0 * x)


def optimal_lipschitz_fit(x: np.ndarray, y: np.ndarray, *, k: float) -> np.ndarray:
    """Values g at the sorted points ``x`` minimising Σ (g_i − y_i)² over every k-Lipschitz g.

    Written as g = g_0 + cumsum(d) with d_i ∈ [−k·Δx_i, k·Δx_i], a bounded least-squares problem
    solved by scipy's BVLS (exact active-set method).
    """
    from scipy.optimize import lsq_linear

    k = check_positive("k", k)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2 or np.any(np.diff(x) <= 0):
        raise ValueError(f"x must be 1-D, strictly increasing, at least 2 points and match y, got {x.shape}")
    n = x.size
    step = k * np.diff(x)
    design = np.tril(np.ones((n, n)))  # column 0: g_0; column j: increment d_{j-1}
    lower = np.concatenate([[-np.inf], -step])
    upper = np.concatenate([[np.inf], step])
    res = lsq_linear(design, y, bounds=(lower, upper), method="bvls", tol=1e-12)
    if not res.success:
        raise RuntimeError(f"the optimal k-Lipschitz fit did not converge (k={k:g}): {res.message}")
    return design @ res.x


@dataclass(frozen=True, kw_only=True)
class Fig1Config:
    """The toy problem's fixed setting (every choice here is recorded in the output)."""

    ks: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 6.0, 10.0, 20.0)
    n_train: int = 400
    n_val: int = 200
    n_test: int = 1000
    hidden: int = 100
    steps: int = 3000
    lr: float = 1e-2
    seeds: int = 5  # network seeds 0 … seeds − 1 (initialisation and training)
    data_seed: int = 0  # one fixed draw of the training/validation points

    def __post_init__(self) -> None:
        for k in self.ks:
            check_positive("ks[i]", k)
        for name in ("n_train", "n_val", "n_test", "hidden", "steps"):
            check_int(name, getattr(self, name), minimum=2)
        check_int("seeds", self.seeds, minimum=1)
        check_int("data_seed", self.data_seed, minimum=0)
        check_positive("lr", self.lr)


def _points(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(rng.uniform(*DOMAIN, size=n))
    return x, target(x)


def fit_network(
    x: np.ndarray, y: np.ndarray, *, k: float, x_val: np.ndarray, y_val: np.ndarray, hidden: int = 100,
    steps: int = 3000, lr: float = 1e-2, seed: int = 0, device: str = "cpu",
) -> tuple[torch.nn.Module, int, float]:
    """A k-Lipschitz MLP fitted by full-batch Adam; returns the net at the step of lowest
    validation MSE, that step and the network's certified bound (product of layer norms)."""
    from privcore.nets.lipschitz_layers import LipschitzMLP

    torch.manual_seed(seed)
    net = LipschitzMLP((1, hidden, hidden, 1), bound=k, norm="l1").to(device)
    centre = 0.5 * (DOMAIN[0] + DOMAIN[1])
    xt = torch.as_tensor(x - centre, dtype=torch.float32, device=device)[:, None]
    yt = torch.as_tensor(y, dtype=torch.float32, device=device)
    xv = torch.as_tensor(x_val - centre, dtype=torch.float32, device=device)[:, None]
    yv = torch.as_tensor(y_val, dtype=torch.float32, device=device)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    best, best_step, best_state = math.inf, 0, None
    for step in range(1, steps + 1):
        opt.zero_grad()
        loss = torch.mean((net(xt).squeeze(-1) - yt) ** 2)
        loss.backward()
        opt.step()
        if step % 25 == 0 or step == steps:
            with torch.no_grad():
                val = float(torch.mean((net(xv).squeeze(-1) - yv) ** 2))
            if val < best:
                best, best_step = val, step
                best_state = {n: p.detach().clone() for n, p in net.state_dict().items()}
    if best_state is not None:
        net.load_state_dict(best_state)
    return net, best_step, float(net.lipschitz_bound(1))


def _predict(net: torch.nn.Module, x: np.ndarray) -> np.ndarray:
    centre = 0.5 * (DOMAIN[0] + DOMAIN[1])
    dev = next(net.parameters()).device
    with torch.no_grad():
        out = net(torch.as_tensor(x - centre, dtype=torch.float32, device=dev)[:, None]).squeeze(-1)
    return out.double().cpu().numpy()


def t_interval(values: object, *, level: float = 0.95) -> tuple[float, float, float, float, int]:
    """(mean, sample sd, low, high, n): the Student-t interval of the mean (scipy.stats.t); sd and
    interval are NaN for fewer than two values."""
    from scipy.stats import t as student_t

    v = np.asarray(values, dtype=np.float64)
    n = int(v.size)
    mean = float(v.mean()) if n else math.nan
    if n < 2:
        return mean, math.nan, math.nan, math.nan, n
    sd = float(v.std(ddof=1))
    half = float(student_t.ppf(0.5 + level / 2.0, n - 1)) * sd / math.sqrt(n)
    return mean, sd, mean - half, mean + half, n


def _config_columns(config: Fig1Config) -> dict[str, object]:
    return {**{f"config_{name}": v for name, v in asdict(config).items() if name != "ks"},
            "domain": f"[{DOMAIN[0]:g}, {DOMAIN[1]:.6g}]"}


def fig1_runs(config: Fig1Config = Fig1Config(), *, device: str = "cpu"):  # -> (runs, curves)
    """Fig. 1 per seed: one row per (k, network seed) with the network's train/val/test MSE, its
    certified bound, steepest test-grid slope and chosen step, and the (deterministic) optimal
    fit's MSEs; the curves (f, optimal fit, the seed-0 network) on the test grid."""
    import pandas as pd

    rng = np.random.default_rng(config.data_seed)
    x_tr, y_tr = _points(config.n_train, rng)
    x_va, y_va = _points(config.n_val, rng)
    x_te = np.linspace(*DOMAIN, config.n_test)
    y_te = target(x_te)
    rows, curves = [], [pd.DataFrame({"k": math.nan, "x": x_te, "curve": "f", "y": y_te})]
    for k in config.ks:
        g = optimal_lipschitz_fit(x_tr, y_tr, k=k)
        g_te = np.interp(x_te, x_tr, g)  # piecewise linear: k-Lipschitz on [x_0, x_n], constant outside
        for seed in range(config.seeds):
            net, step, bound = fit_network(x_tr, y_tr, k=k, x_val=x_va, y_val=y_va, hidden=config.hidden,
                                           steps=config.steps, lr=config.lr, seed=seed, device=device)
            net_te = _predict(net, x_te)
            rows.append({
                "k": k,
                "seed": seed,
                "network_mse_train": float(np.mean((_predict(net, x_tr) - y_tr) ** 2)),
                "network_mse_val": float(np.mean((_predict(net, x_va) - y_va) ** 2)),
                "network_mse_test": float(np.mean((net_te - y_te) ** 2)),
                "optimal_mse_train": float(np.mean((g - y_tr) ** 2)),
                "optimal_mse_test": float(np.mean((g_te - y_te) ** 2)),
                "network_bound": bound,
                "network_slope_max": float(np.max(np.abs(np.diff(net_te) / np.diff(x_te)))),
                "chosen_step": step,
                **_config_columns(config),
            })
            if seed == 0:
                curves.append(pd.DataFrame({"k": k, "x": x_te, "curve": "network", "y": net_te}))
        curves.append(pd.DataFrame({"k": k, "x": x_te, "curve": "optimal", "y": g_te}))
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True)


def fig1_summary(runs, config: Fig1Config):  # runs: DataFrame from fig1_runs -> DataFrame
    """One row per k: for each network MSE (train/val/test) and the steepest slope, the mean over
    seeds, sd, n and 95 % Student-t interval of the mean (``<col>``, ``<col>_sd``, ``<col>_ci_low``,
    ``<col>_ci_high``; ``n_seeds``); the optimal fit's MSEs (one value: deterministic); the largest
    certified bound over seeds and the range of chosen steps."""
    import pandas as pd

    rows = []
    for k, grp in runs.groupby("k", sort=True):
        row: dict[str, object] = {"k": float(k)}
        for col in (*MSE_COLUMNS, "network_slope_max"):
            mean, sd, low, high, n = t_interval(grp[col].to_numpy())
            row.update({col: mean, f"{col}_sd": sd, f"{col}_ci_low": low, f"{col}_ci_high": high})
        row["n_seeds"] = n
        row["optimal_mse_train"] = float(grp["optimal_mse_train"].iloc[0])
        row["optimal_mse_test"] = float(grp["optimal_mse_test"].iloc[0])
        row["network_bound_max"] = float(grp["network_bound"].max())
        row["chosen_step_min"] = int(grp["chosen_step"].min())
        row["chosen_step_max"] = int(grp["chosen_step"].max())
        rows.append({**row, **_config_columns(config)})
    return pd.DataFrame(rows)


def fig1_tables(config: Fig1Config = Fig1Config(), *, device: str = "cpu"):  # -> (summary, runs, curves)
    """:func:`fig1_runs` and its :func:`fig1_summary`: (summary, runs, curves)."""
    runs, curves = fig1_runs(config, device=device)
    return fig1_summary(runs, config), runs, curves


def fig1_figure(curves, summary=None):  # -> plotly Figure
    """Top: one panel per k with f, the seed-0 network and the optimal k-Lipschitz fit. Bottom
    (with ``summary``): test MSE against k, the networks' mean over seeds with 95 % t-interval
    error bars beside the optimal fit."""
    from plotly.subplots import make_subplots

    ks = sorted(k for k in curves["k"].unique() if not math.isnan(k))
    titles = [f"k = {k:g}" for k in ks]
    if summary is None:
        fig = make_subplots(rows=1, cols=len(ks), subplot_titles=titles, shared_yaxes=True)
    else:
        n = int(summary["n_seeds"].max())
        specs = [[{} for _ in ks], [{"colspan": len(ks)}] + [None] * (len(ks) - 1)]
        fig = make_subplots(rows=2, cols=len(ks), specs=specs, row_heights=[0.45, 0.55],
                            vertical_spacing=0.14,
                            subplot_titles=[*titles, f"test MSE against k (network: mean over n = {n} "
                                            "seeds, 95 % t-interval)"])
    f = curves[curves["curve"] == "f"]
    for col, k in enumerate(ks, start=1):
        fig.add_scatter(x=f["x"], y=f["y"], mode="lines", name="f", line={"color": "#bbbbbb"},
                        showlegend=col == 1, legendgroup="f", row=1, col=col)
        for curve, colour in (("optimal", "#2ca02c"), ("network", "#1f77b4")):
            part = curves[(curves["k"] == k) & (curves["curve"] == curve)]
            name = "optimal k-Lipschitz fit" if curve == "optimal" else "k-Lipschitz network (seed 0)"
            fig.add_scatter(x=part["x"], y=part["y"], mode="lines", name=name, line={"color": colour},
                            showlegend=col == 1, legendgroup=curve, row=1, col=col)
        if col > 1 and summary is not None:
            fig.update_yaxes(matches="y", showticklabels=False, row=1, col=col)
    if summary is not None:
        s = summary.sort_values("k")
        mid = s["network_mse_test"]
        err = {"type": "data", "symmetric": False, "array": s["network_mse_test_ci_high"] - mid,
               "arrayminus": mid - s["network_mse_test_ci_low"]}
        fig.add_scatter(x=s["k"], y=s["network_mse_test"], error_y=err, mode="lines+markers",
                        line={"color": "#1f77b4"}, showlegend=False, legendgroup="network", row=2, col=1)
        fig.add_scatter(x=s["k"], y=s["optimal_mse_test"], mode="lines+markers", line={"color": "#2ca02c"},
                        showlegend=False, legendgroup="optimal", row=2, col=1)
        fig.update_xaxes(type="log", title_text="k", row=2, col=1)
        fig.update_yaxes(type="log", title_text="test MSE", row=2, col=1)
    fig.update_layout(title="Shavit & Gjura Fig. 1: fitting sin x + ½ cos 10x with k-Lipschitz functions",
                      template="plotly_white", height=360 if summary is None else 720)
    return fig
