"""``experiment ip``: inference-privacy paper, Figs 3–5 and its CIFAR table, on the shipped IP models.

Mechanisms (privcore.mechanisms, δ = 1e-5, analytic Gaussian calibration of Balle & Wang 2018 —
valid for every ε, unlike the classic formula the paper states, whose proof needs ε < 1):

* ``Gauss-Input`` on the standard CNN ``ip-cnn`` and on the Lipschitz MLP ``ip-lipschitz-l2``;
* ``Gauss-Input (tuned)`` on ``ip-cnn-gauss-input``, the CNN fine-tuned on Gauss-Input noise at
  one target level (its card says which; the paper grid-searched one model per level);
* ``Gauss-Output`` on ``ip-lipschitz-l2`` with its certified global ℓ2 constant μ₂;
* ``Lap-Output`` on ``ip-lipschitz-l1`` with its certified global ℓ1 constant μ₁ (α then is an
  ℓ1 distance; the Gaussian mechanisms' α is ℓ2, pixels in [0, 1]).

The output mechanisms release the models' float64 scores (``IPModel.scores``) with noise
calibrated to μ·α + 2η, η the certified rounding bound of that evaluation
(:mod:`privcore.lipschitz.rounding`).

Where ε < 1 the Gaussian mechanisms are also run with the classic calibration the paper states
(σ = √(2 ln(1.25/δ))·Δ/ε), in rows of their own (``calibration = classic``) beside the analytic ones.

Sweeps: ``alpha`` (ε = 1, Fig. 3), ``epsilon`` (α = 0.1, Fig. 4), ``grid`` (ε ∈ {0.1, 1, 10} ×
α ∈ {0.001, 0.01, 0.1, 0.2}, the CIFAR table), ``fig5`` (Gauss-Output only, as the paper's Fig. 5:
accuracy against ε for each α of the grid, full mode nine ε from 0.1 to 10 per α), ``clean`` (no
mechanism). Each accuracy is the mean (and standard deviation) over ``n_draws`` seeded noise draws
(15 in the paper), with a 95 % percentile-bootstrap interval over the test images
(``accuracy_lo``/``_hi``: each image's correctness averaged over the draws, images resampled), the
interval a different sample of test images would move the mean within.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from privcore.experiments.attack import bootstrap_interval
from privcore.experiments.ptr_common import test_indices
from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.seeds import row_seed

__all__ = ["COLUMNS", "FIG5_EPS", "run"]

COLUMNS = (
    "dataset",
    "sweep",
    "model",
    "mechanism",
    "epsilon",
    "delta",
    "alpha",
    "calibration",
    "noise",
    "lipschitz",
    "accuracy_mean",
    "accuracy_std",
    "accuracy_lo",
    "accuracy_hi",
    "n_draws",
    "n_test",
)
KEY = ("sweep", "model", "mechanism", "epsilon", "alpha", "calibration")
DELTA = 1e-5
GRID_EPS = (0.1, 1.0, 10.0)
GRID_ALPHA = (0.001, 0.01, 0.1, 0.2)
#: ε of the ``fig5`` sweep in full mode (the grid's three among them), for each α of GRID_ALPHA
FIG5_EPS = (0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)
#: the mechanism the paper's Fig. 5 draws (on its SLL network; here ip-lipschitz-l2)
FIG5_MECHANISM = "Gauss-Output"

#: (mechanism label, model name, which certified constant it needs or None)
PAIRS = (
    ("Gauss-Input", "ip-cnn", None),
    ("Gauss-Input (tuned)", "ip-cnn-gauss-input", None),
    ("Gauss-Input", "ip-lipschitz-l2", None),
    ("Gauss-Output", "ip-lipschitz-l2", "l2"),
    ("Lap-Output", "ip-lipschitz-l1", "l1"),
)


def _mechanism(
    label: str, *, epsilon: float, alpha: float, mu: float | None, eta: float = 0.0,
    calibration: str = "analytic",
) -> Any:
    from privcore.mechanisms import GaussInput, GaussOutput, LapOutput

    if label.startswith("Gauss-Input"):
        return GaussInput(epsilon=epsilon, delta=DELTA, alpha=alpha, calibration=calibration)
    if label == "Gauss-Output":
        return GaussOutput(
            epsilon=epsilon, delta=DELTA, alpha=alpha, lipschitz=mu, rounding=eta, calibration=calibration
        )
    return LapOutput(epsilon=epsilon, alpha=alpha, lipschitz=mu, rounding=eta)


def _rounding(label: str, model: Any) -> float:
    """η of the output the mechanism releases (0 for Gauss-Input: its noise is on the pixels)."""
    if label.startswith("Gauss-Input"):
        return 0.0
    return float(model.rounding["l2" if label == "Gauss-Output" else "l1"])


def _logits(model: Any, x: np.ndarray, batch: int = 1024, *, released: bool = False) -> np.ndarray:
    """Model scores of ``x``; ``released``: the certified float64 scores an output mechanism releases."""
    import torch

    apply = model.scores if released else model
    out = [
        apply(torch.as_tensor(x[s : s + batch], dtype=torch.float64 if released else torch.float32))
        .double()
        .cpu()
        .numpy()
        for s in range(0, len(x), batch)
    ]
    return np.concatenate(out)


def noisy_accuracy(
    label: str,
    model: Any,
    x: np.ndarray,
    y: np.ndarray,
    *,
    epsilon: float,
    alpha: float,
    mu: float | None,
    n_draws: int,
    seed: int,
    calibration: str = "analytic",
) -> tuple[float, float, float, np.ndarray]:
    """(mean, sd) of accuracy over ``n_draws`` seeded releases, the noise scale drawn, and each
    image's correctness averaged over the draws (for the interval over images)."""
    mech = _mechanism(
        label, epsilon=epsilon, alpha=alpha, mu=mu, eta=_rounding(label, model), calibration=calibration
    )
    rng = np.random.default_rng(seed)
    accs, correct = [], np.zeros(len(y))
    clean_logits = None if label.startswith("Gauss-Input") else _logits(model, x, released=True)
    for _ in range(n_draws):
        if clean_logits is None:
            logits = _logits(model, mech(x, rng=rng))
        else:
            logits = mech(clean_logits, rng=rng)
        hit = logits.argmax(1) == y
        accs.append(float(hit.mean()))
        correct += hit
    size = x.size if clean_logits is None else clean_logits.size
    return (float(np.mean(accs)), float(np.std(accs)), float(mech.noise_plan(size).effective),
            correct / n_draws)


def _error_bars(part: Any) -> dict[str, Any]:
    """Plotly error bars of the 95 % bootstrap interval over images (the draw sd for old CSVs)."""
    if {"accuracy_lo", "accuracy_hi"} <= set(part.columns):
        return {"type": "data", "symmetric": False,
                "array": part["accuracy_hi"] - part["accuracy_mean"],
                "arrayminus": part["accuracy_mean"] - part["accuracy_lo"]}
    return {"type": "data", "array": part["accuracy_std"]}


def _figure(frame: Any, dataset: str) -> Any:
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=1,
        cols=3,
        horizontal_spacing=0.07,
        subplot_titles=("Fig. 3: ε = 1, vs α", "Fig. 4: α = 0.1, vs ε",
                        f"Fig. 5: {FIG5_MECHANISM}, vs ε per α"),
    )
    colours = {}
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
    frame = frame[frame["calibration"] != "classic"] if "calibration" in frame else frame  # analytic curves
    for col, (sweep, xcol) in enumerate((("alpha", "alpha"), ("epsilon", "epsilon")), start=1):
        for (model, mech), part in frame[frame["sweep"] == sweep].groupby(["model", "mechanism"], sort=False):
            name = f"{mech} · {model}"
            colours.setdefault(name, palette[len(colours) % len(palette)])
            part = part.sort_values(xcol)
            fig.add_scatter(
                x=part[xcol],
                y=part["accuracy_mean"],
                error_y=_error_bars(part),
                mode="lines+markers",
                name=name,
                legendgroup=name,
                showlegend=col == 1,
                line_color=colours[name],
                row=1,
                col=col,
            )
    sweep5 = "fig5" if (frame["sweep"] == "fig5").any() else "grid"  # CSVs from before the fig5 sweep
    grid = frame[(frame["sweep"] == sweep5) & (frame["mechanism"] == FIG5_MECHANISM)]
    for (model, a), part in grid.groupby(["model", "alpha"]):
        part = part.sort_values("epsilon")
        fig.add_scatter(
            x=part["epsilon"], y=part["accuracy_mean"], error_y=_error_bars(part), mode="lines+markers",
            name=f"{FIG5_MECHANISM} · {model}, α = {a:g}", row=1, col=3,
        )
    fig.update_xaxes(title_text="α", row=1, col=1)
    fig.update_xaxes(title_text="ε", type="log", row=1, col=2)
    fig.update_xaxes(title_text="ε", type="log", row=1, col=3)
    noisy = frame[frame["sweep"] != "clean"]
    sizes = ""
    if {"n_test", "n_draws"} <= set(noisy.columns) and not noisy.empty:
        n_test = ", ".join(str(int(v)) for v in sorted(noisy["n_test"].unique()))
        draws = ", ".join(str(int(v)) for v in sorted(noisy["n_draws"].unique()))
        sizes = f"mean over {draws} noise draws on n = {n_test} test images; "
    bars = ("error bars: 95 % bootstrap interval over the test images" if "accuracy_lo" in frame
            else "error bars: sd over noise draws")
    fig.update_yaxes(title_text="test accuracy", row=1, col=1)
    fig.update_layout(
        title=f"Inference privacy ({dataset}): accuracy under IP mechanisms, δ = 1e-5<br>"
        f"<sup>{sizes}{bars}</sup>",
        template="plotly_white",
        height=620,
        width=1400,
        margin={"t": 110},
        legend={"orientation": "h", "yanchor": "top", "y": -0.2, "xanchor": "left", "x": 0},
    )
    return fig


def run(ctx: RunContext) -> Any:
    """The IP experiments for one dataset; write ``ip.csv`` + figure."""
    from privcore.data import load_dataset
    from privcore.models.pipeline import load_ip_models

    ip = load_ip_models(ctx.dataset, models_dir=ctx.models_dir, device=ctx.torch_device())
    pairs = [(label, name, need) for label, name, need in PAIRS if name in ip.models]
    if not pairs:
        raise FileNotFoundError(f"no IP classifier for {ctx.dataset}")
    ds = load_dataset(ctx.dataset)
    n_test = ctx.n_test(full=None if ds.x_test.shape[0] <= 2000 else 2000, quick=300, tiny=30)
    idx = test_indices(ds.x_test.shape[0], n_test, ctx.seed)
    x, y = ds.x_test[idx].numpy().astype(np.float64), ds.y_test[idx].numpy()
    alphas = ctx.pick(
        full=(0.001, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2), quick=(0.01, 0.05, 0.1, 0.2), tiny=(0.1,)
    )
    epsilons = ctx.pick(full=(0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0), quick=(0.25, 1.0, 5.0), tiny=(1.0,))
    grid = [(e, a) for e in GRID_EPS for a in GRID_ALPHA] if ctx.mode != "tiny" else [(0.5, 0.01)]
    fig5_eps = ctx.pick(full=FIG5_EPS, quick=(0.1, 0.3, 1.0, 3.0, 10.0), tiny=(0.5, 2.0))
    fig5 = [(e, a) for a in ctx.pick(full=GRID_ALPHA, quick=GRID_ALPHA, tiny=(0.01,)) for e in fig5_eps]
    n_draws = ctx.pick(full=15, quick=5, tiny=2)
    settings = [("clean", math.inf, 0.0)]
    settings += [("alpha", 1.0, a) for a in alphas] + [("epsilon", e, 0.1) for e in epsilons]
    settings += [("grid", e, a) for e, a in grid]
    settings += [("fig5", e, a) for e, a in fig5]
    config = {
        "pairs": pairs,
        "n_test": len(idx),
        "n_draws": n_draws,
        "alphas": list(alphas),
        "epsilons": list(epsilons),
        "grid": grid,
        "fig5": fig5,
        "weights": {name: ip[name].card["weights"]["sha256"] for _, name, _ in pairs},
    }
    table = ctx.table("ip", columns=COLUMNS, key=KEY, config=config)
    def calibrations(sweep: str, label: str, eps: float) -> tuple[str | None, ...]:
        if sweep == "clean" or label == "Lap-Output":
            return (None,)
        return ("analytic", "classic") if eps < 1.0 else ("analytic",)  # classic: its proof needs ε < 1

    steps = [(s, p, c) for s in settings for p in pairs for c in calibrations(s[0], p[0], s[1])
             if s[0] != "fig5" or p[0] == FIG5_MECHANISM]
    with ctx.progress("ip mechanisms") as progress:
        for i, ((sweep, eps, alpha), (label, name, need), calibration) in enumerate(steps):
            progress(i, len(steps), f"{sweep} {label} {name}")
            mech_label = "none" if sweep == "clean" else label
            if sweep == "clean" and any(p[1] == name for p in pairs[: pairs.index((label, name, need))]):
                continue  # one clean row per model
            if table.done(sweep=sweep, model=name, mechanism=mech_label, epsilon=eps, alpha=alpha,
                          calibration=calibration):
                continue
            model = ip[name]
            mu = None if need is None else float(model.lipschitz[need])
            if sweep == "clean":
                per_image = (_logits(model, x).argmax(1) == y).astype(np.float64)
                acc, sd, noise = float(per_image.mean()), 0.0, 0.0
                draws, mu = 1, None
            else:
                acc, sd, noise, per_image = noisy_accuracy(
                    label,
                    model,
                    x,
                    y,
                    epsilon=eps,
                    alpha=alpha,
                    mu=mu,
                    n_draws=n_draws,
                    seed=row_seed(ctx.seed, "ip", sweep, name, label, eps, alpha, *(
                        [calibration] if calibration == "classic" else [])),
                    calibration=calibration or "analytic",
                )
                draws = n_draws
            lo, hi = bootstrap_interval(per_image, seed=row_seed(
                ctx.seed, "ip-bootstrap", sweep, name, mech_label, eps, alpha, calibration))
            table.add(
                {
                    "dataset": ctx.dataset,
                    "sweep": sweep,
                    "model": name,
                    "mechanism": mech_label,
                    "epsilon": eps,
                    "delta": None if sweep == "clean" or label == "Lap-Output" else DELTA,
                    "alpha": alpha,
                    "calibration": calibration,
                    "noise": noise,
                    "lipschitz": mu,
                    "accuracy_mean": acc,
                    "accuracy_std": sd,
                    "accuracy_lo": lo,
                    "accuracy_hi": hi,
                    "n_draws": draws,
                    "n_test": len(y),
                }
            )
        progress(len(steps), len(steps), "done")
    frame = table.frame()
    return table.finish(figures=save_figure(_figure(frame, ctx.dataset), ctx.dataset_dir / "ip"))
