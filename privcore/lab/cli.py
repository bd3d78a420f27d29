"""``python -m privcore lab ...``: train, verify and evaluate learned DP mechanisms.

Shavit & Gjura (2019). Commands: ``train`` (one mechanism, saved with a card), ``fig1`` (the toy
k-Lipschitz fit beside the optimal one), ``fig5``
(the ERL-vs-k sweep as CSV, optionally saving the dashboard's models), ``fig4`` (response
distributions of a saved mechanism), ``fig4-summary`` (those laws in numbers beside the quantile
exponential mechanism), ``verify`` (the Lipschitz engine on a saved model),
``release`` (one ε-DP release on a fresh synthetic dataset).
"""

from __future__ import annotations

import json
import shlex
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from privcore._atomic import atomic_open, atomic_write_text

lab_app = typer.Typer(name="lab", help="Mechanism lab: learned ε-DP mechanisms with Lipschitz networks.",
                      no_args_is_help=True, add_completion=False)

MODELS_DIR = Path("models/lab")
RESULTS_DIR = Path("data/results/lab")


def _command() -> str:
    return "python -m privcore " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _write_csv(frame, path: Path) -> None:  # frame: pandas.DataFrame
    """``frame.to_csv(path)`` atomically (a failed write leaves the previous file)."""
    with atomic_open(path, "w", newline="") as fh:
        frame.to_csv(fh, index=False)


@contextmanager
def _bar(description: str):  # yields a progress callback
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), transient=False, console=Console(stderr=True)) as prog:
        task = prog.add_task(description, total=None)

        def update(done: int, total: int, message: str) -> None:
            prog.update(task, completed=done, total=total, description=f"{description}: {message}")

        yield update


def _threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


@lab_app.command()
def train(
    mechanism: Annotated[str, typer.Option(help="laplace or exponential")],
    query: Annotated[str, typer.Option(help="mean, median, variance or percentile10")],
    k: Annotated[float, typer.Option(help="Lipschitz bound of the network (sensitivity k·c)")],
    epsilon: Annotated[float, typer.Option(help="privacy parameter ε (exponential: trained for it)")] = 1.0,
    epochs: Annotated[int, typer.Option(help="passes over the 10⁴ training datasets")] = 10,
    loss: Annotated[str, typer.Option(help="squared or quantile ('' = the default for the query)")] = "",
    seed: Annotated[int, typer.Option(help="network seed")] = 0,
    device: Annotated[str, typer.Option(help="auto (cuda if present), cpu or cuda")] = "auto",
    out: Annotated[Path, typer.Option(help="directory for the .safetensors + .json card")] = MODELS_DIR,
    verify: Annotated[bool, typer.Option(help="check the network with the exact Lipschitz engine")] = True,
    time_limit: Annotated[float, typer.Option(help="seconds per MIP (the bound stays certified)")] = 30.0,
    threads: Annotated[int, typer.Option(help="torch CPU threads (0 = torch's default)")] = 0,
) -> None:
    """Train one learned mechanism by its expected response loss and save it with a card."""
    from privcore.lab.experiments import _save, evaluation_sets
    from privcore.lab.train import LabConfig, train_mechanism

    _threads(threads)
    cfg = LabConfig(mechanism=mechanism, query=query, k=k, epsilon=epsilon, epochs=epochs, loss=loss,
                    seed=seed)
    with _bar("training") as update:
        res = train_mechanism(cfg, device=device, progress=update)
    evals = evaluation_sets()
    metrics = {s: float(res.mechanism.expected_loss(d, cfg.loss).mean()) for s, d in evals.items()}
    extra = {}
    if verify:
        from privcore.lab.experiments import _verify

        extra = _verify(res, time_limit)
        if not extra["engine_passed"]:
            msg = f"Lipschitz check FAILED: engine upper {extra['engine_upper']:.9g} > k={k:g}"
            typer.echo(msg, err=True)
            raise typer.Exit(2)
    path = _save(res, out, metrics, [], extra, _command())
    typer.echo(f"ERL train-dist {metrics['train']:.5g}, test-dist {metrics['test']:.5g}; "
               f"certified layer product {res.mechanism.certified_bound:.9g} ≤ k={k:g}; card {path}")


@lab_app.command()
def fig1(
    out: Annotated[Path | None, typer.Option(help="output directory (default: data/results/lab; with "
                                             "--quick the git-ignored quick-results directory)")] = None,
    quick: Annotated[bool, typer.Option(help="k ∈ {1, 10}, 300 steps, 2 seeds")] = False,
    seeds: Annotated[int | None, typer.Option(help="network seeds per k (default 5; --quick 2); the "
                                              "data draw stays fixed (seed 0)")] = None,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda")] = "auto",
    threads: Annotated[int, typer.Option(help="torch CPU threads (0 = default)")] = 0,
) -> None:
    """Fig. 1: k-Lipschitz networks fitted to sin x + ½ cos 10x, beside the optimal k-Lipschitz fit."""
    from privcore.experiments.runner import save_figure
    from privcore.lab.fig1 import Fig1Config, fig1_figure, fig1_tables
    from privcore.lab.train import resolve_device

    _threads(threads)
    n_seeds = seeds if seeds is not None else (2 if quick else 5)
    config = Fig1Config(ks=(1.0, 10.0), steps=300, seeds=n_seeds) if quick else Fig1Config(seeds=n_seeds)
    if out is None:
        from privcore._paths import quick_results_dir

        out = quick_results_dir() / "lab" if quick else RESULTS_DIR
    summary, runs, curves = fig1_tables(config, device=str(resolve_device(device)))
    summary.insert(0, "command", _command())
    runs.insert(0, "command", _command())
    out.mkdir(parents=True, exist_ok=True)
    _write_csv(summary, out / "fig1_summary.csv")
    _write_csv(runs, out / "fig1_runs.csv")
    _write_csv(curves, out / "fig1_curves.csv")
    save_figure(fig1_figure(curves, summary), out / "fig1")
    typer.echo(f"wrote {out / 'fig1_summary.csv'}, fig1_runs.csv, fig1_curves.csv and the figure")


@lab_app.command()
def fig5(
    out: Annotated[Path | None, typer.Option(help="directory for fig5_runs.csv and fig5_summary.csv "
                                             "(default: data/results/lab; with --quick the git-ignored "
                                             "quick-results directory)")] = None,
    runs: Annotated[int, typer.Option(help="training runs per point (paper: 5)")] = 5,
    ks: Annotated[str, typer.Option(help="comma-separated k values")] = "0.003,0.01,0.03,0.1,0.3,1,10",
    mechanisms: Annotated[str, typer.Option(help="comma-separated")] = "laplace,exponential",
    queries: Annotated[str, typer.Option(help="comma-separated")] = "mean,median,variance,percentile10",
    epsilon: Annotated[float, typer.Option(help="privacy parameter ε")] = 1.0,
    epochs: Annotated[int, typer.Option(help="epochs per run")] = 10,
    quick: Annotated[bool, typer.Option(help="2 epochs, 1 restart, 1000 evaluation datasets")] = False,
    num_eval: Annotated[int, typer.Option(help="fresh evaluation datasets per distribution")] = 2000,
    save_models: Annotated[Path | None, typer.Option(help="save run 0 of the --ship-* models here")] = None,
    ship_laplace: Annotated[str, typer.Option(help="k values of Laplace models to save")] = "",
    ship_exponential: Annotated[str, typer.Option(help="k values of exponential models to save")] = "",
    verify: Annotated[bool, typer.Option(help="check every network with the Lipschitz engine")] = False,
    time_limit: Annotated[float, typer.Option(help="seconds per MIP")] = 10.0,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda")] = "auto",
    threads: Annotated[int, typer.Option(help="torch CPU threads (0 = default)")] = 0,
) -> None:
    """Fig. 5: expected response loss against k (train and test distributions, several runs)."""
    from privcore.lab.experiments import fig5_summary, fig5_sweep

    _threads(threads)
    if out is None:  # quick runs never overwrite the committed results
        from privcore._paths import quick_results_dir

        out = quick_results_dir() / "lab" if quick else RESULTS_DIR
    if quick:
        epochs, num_eval = 2, 1000
    restarts = 1 if quick else 3
    fl = [float(v) for v in ks.split(",") if v.strip()]
    ship = {"laplace": [float(v) for v in ship_laplace.split(",") if v.strip()],
            "exponential": [float(v) for v in ship_exponential.split(",") if v.strip()]}
    with _bar("fig5") as update:
        df = fig5_sweep(mechanisms=[m.strip() for m in mechanisms.split(",")],
                        queries=[q.strip() for q in queries.split(",")], ks=fl, runs=runs, epsilon=epsilon,
                        epochs=epochs, max_restarts=restarts, num_eval=num_eval, device=device, verify=verify,
                        time_limit=time_limit, save_dir=save_models, save_ks=ship, command=_command(),
                        progress=update)
    out.mkdir(parents=True, exist_ok=True)
    _write_csv(df, out / "fig5_runs.csv")
    summary = fig5_summary(df)
    _write_csv(summary, out / "fig5_summary.csv")
    atomic_write_text(out / "fig5_command.txt", _command() + "\n")
    typer.echo(f"wrote {out / 'fig5_runs.csv'} ({len(df)} rows) and {out / 'fig5_summary.csv'}")


@lab_app.command()
def fig4(
    model: Annotated[Path, typer.Option(help="a lab model card (.json)")] = MODELS_DIR
    / "exponential-median-k1.json",
    out: Annotated[Path, typer.Option(help="output directory")] = RESULTS_DIR,
    datasets: Annotated[int, typer.Option(help="number of fresh datasets")] = 6,
    seed: Annotated[int, typer.Option(help="dataset seed")] = 2_000_001,
) -> None:
    """Fig. 4: a saved mechanism's response distribution on fresh datasets, with the truth."""
    from privcore.lab.experiments import fig4_tables
    from privcore.lab.store import load_mechanism

    mech, _card = load_mechanism(model)
    responses, points = fig4_tables(mech, n_datasets=datasets, seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"fig4_{model.stem}"
    _write_csv(responses, out / f"{stem}_responses.csv")
    _write_csv(points, out / f"{stem}_datasets.csv")
    typer.echo(f"wrote {out / (stem + '_responses.csv')} and {out / (stem + '_datasets.csv')}")


@lab_app.command("fig4-summary")
def fig4_summary(
    model: Annotated[Path, typer.Option(help="the lab model card whose fig4 CSVs to summarise")] = MODELS_DIR
    / "exponential-median-k10.json",
    results: Annotated[Path, typer.Option(help="directory holding fig4_<model>_{responses,datasets}.csv "
                                          "(the summaries are written there)")] = RESULTS_DIR,
    datasets: Annotated[int, typer.Option(help="fresh datasets per distribution for the aggregate")] = 1000,
) -> None:
    """Fig. 4 in numbers: the learned law beside the quantile exponential mechanism per dataset, and
    E|r − truth| over many fresh datasets with 95 % t-intervals."""
    import pandas as pd

    from privcore.lab.fig4 import AGGREGATE_SEED, fig4_aggregate, fig4_comparison
    from privcore.lab.store import load_mechanism

    mech, _card = load_mechanism(model)
    stem = f"fig4_{model.stem}"
    responses = pd.read_csv(results / f"{stem}_responses.csv")
    points = pd.read_csv(results / f"{stem}_datasets.csv")
    per_dataset = fig4_comparison(responses, points, query=mech.query, epsilon=mech.epsilon,
                                  domain=mech.domain)
    aggregate = pd.concat([fig4_aggregate(mech, n_datasets=datasets, components=comps,
                                          seed=AGGREGATE_SEED + i)  # 4 components: seed 2000002; 2: 2000003
                           for i, comps in enumerate((4, 2))], ignore_index=True)
    for frame in (per_dataset, aggregate):
        frame.insert(0, "command", _command())
    _write_csv(per_dataset, results / f"{stem}_summary.csv")
    _write_csv(aggregate, results / f"{stem}_aggregate.csv")
    typer.echo(f"wrote {results / (stem + '_summary.csv')} and {results / (stem + '_aggregate.csv')}")


@lab_app.command()
def verify(
    model: Annotated[Path, typer.Option(help="a lab model card (.json), or a directory of them")],
    pattern: Annotated[str, typer.Option(help="with a directory: glob of the cards to check")] = "*.json",
    certifier: Annotated[str, typer.Option(help="exact (LipMIP), lp or interval")] = "exact",
    time_limit: Annotated[float, typer.Option(help="seconds per MIP (the bound stays certified)")] = 30.0,
    write_card: Annotated[bool, typer.Option(help="record the result in the card")] = False,
) -> None:
    """Certify saved models' global Lipschitz bounds with the Lipschitz engine (exit 2 if any > k)."""
    from privcore.lab.store import card_file, list_cards, load_mechanism
    from privcore.lab.verify import verify_mechanism

    paths = [p for p, _ in list_cards(model) if p.match(pattern)] if model.is_dir() else [card_file(model)]
    failed = False
    for path in paths:
        mech, card = load_mechanism(path)
        rep = verify_mechanism(mech, time_limit=time_limit, certifier=certifier)
        summary = rep.to_dict()
        summary.pop("checks")
        typer.echo(f"{path.name}: engine upper {rep.upper:.9g} (lower {rep.lower:.9g}, "
                   f"{'exact' if rep.exact else 'certified bound'}) vs k={mech.k:g}: "
                   f"{'PASSED' if rep.passed else 'FAILED'} in {summary['seconds']:.1f}s")
        failed |= not rep.passed
        if write_card:
            card["verification"] = {
                "engine_upper": rep.upper, "engine_lower": rep.lower, "engine_exact": rep.exact,
                "engine_passed": rep.passed, "engine_seconds": summary["seconds"], "certifier": certifier,
                "solvers": summary["solvers"], "time_limit": time_limit, "n_networks": summary["n_networks"],
                "command": _command(),
            }
            atomic_write_text(path, json.dumps(card, indent=2, sort_keys=True, default=str) + "\n")
    if failed:
        raise typer.Exit(2)


@lab_app.command()
def release(
    model: Annotated[Path, typer.Option(help="a lab model card (.json)")],
    epsilon: Annotated[float | None, typer.Option(help="release at this ε instead of the card's")] = None,
    data_seed: Annotated[int, typer.Option(help="seed of the synthetic dataset")] = 0,
    components: Annotated[int, typer.Option(help="mixture components of the synthetic dataset")] = 4,
) -> None:
    """One ε-DP release (OS randomness) on a fresh synthetic dataset, next to the true value."""
    from privcore.lab.data import TruncatedGaussianMixture
    from privcore.lab.queries import query_values
    from privcore.lab.store import load_mechanism

    mech, _card = load_mechanism(model)
    if epsilon is not None:
        mech = mech.with_epsilon(epsilon)
    data = TruncatedGaussianMixture(n_components=components, domain=mech.domain).sample(1, seed=data_seed)
    value = mech.release(data[0])
    typer.echo(f"{mech.name} ({mech.query}, ε={mech.epsilon:g}, k={mech.k:g}): released {value:.6g}; "
               f"true {float(query_values(mech.query, data)[0]):.6g}")
