"""``python -m privcore experiment NAME --dataset D [--quick]``: regenerate a paper table or figure.

``NAME`` is one of :data:`privcore.experiments.EXPERIMENTS` or ``all``. Results go to
``data/results/<D>/<NAME>.csv`` (+ ``.json`` provenance, ``.html``/``.png`` figure); an interrupted
run resumes when the same command is run again.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from privcore.data.options import dataset_option
from privcore.executors import ADDRESS_HELP, EXECUTOR_HELP

experiment_app = typer.Typer(
    name="experiment",
    help="Regenerate the papers' tables and figures as CSV + plotly figures under data/results/.",
    add_completion=False,
    invoke_without_command=True,
    # options may follow NAME (`experiment table1 --dataset digits --quick`)
    context_settings={"allow_interspersed_args": True},
)


@experiment_app.callback(invoke_without_command=True)
def experiment(
    name: Annotated[
        str,
        typer.Argument(
            help="table1, table1-global, table1-weights, mechanisms, table2, attack, attack-global, "
            "attack-frontier, fig2, fig3, fig4, ip, audit, calibration, ceiling, neighbours, select, "
            "select-global, select-frontier, frontier-groupsort, all, or report"
        ),
    ],
    dataset: Annotated[
        str,
        typer.Option(help="digits, fashion-mnist, mnist, cifar10, utkface, folder", callback=dataset_option),
    ] = "digits",
    quick: Annotated[bool, typer.Option("--quick", help="subsample: every experiment in minutes")] = False,
    tiny: Annotated[
        bool, typer.Option("--tiny", help="smallest settings (seconds; used by the tests)")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(help="results root (default: data/results; --quick/--tiny: .cache/results-quick, so a "
                     "quick run never overwrites the committed full results)"),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the experiment's noise and subsamples")] = 0,
    device: Annotated[str, typer.Option(help="auto (CUDA when present), cpu or cuda")] = "auto",
    certifier: Annotated[
        str, typer.Option(help="Lipschitz certifier for φ: exact, lp or interval")
    ] = "exact",
    fresh: Annotated[
        bool, typer.Option("--fresh", help="ignore (overwrite) earlier results of this config")
    ] = False,
    workers: Annotated[int, typer.Option(help="solver processes for Lipschitz certificates")] = 2,
    executor: Annotated[str, typer.Option(help=EXECUTOR_HELP)] = "local",
    address: Annotated[str | None, typer.Option(help=ADDRESS_HELP)] = None,
    n_test: Annotated[int, typer.Option(help="test images per setting (0 = the mode's default)")] = 0,
    obfuscators: Annotated[
        str, typer.Option(help="table1, table1-weights: only these obfuscators, comma-separated")
    ] = "",
    models_dir: Annotated[Path | None, typer.Option(help="checkpoints (default: models/)")] = None,
    threads: Annotated[int, typer.Option(help="torch CPU threads (0 = torch's default)")] = 0,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="no progress bars (logs)")] = False,
    report_file: Annotated[
        Path | None,
        typer.Option(help="report: write the markdown to this file (atomically) instead of printing it"),
    ] = None,
) -> None:
    """Run one experiment (or ``all``) for one dataset and print where its results are."""
    from privcore.executors import RayExecutor, executor_from_options
    from privcore.experiments import EXPERIMENTS, NOT_IN_ALL, run_experiment
    from privcore.experiments.runner import DEFAULT_RESULTS_DIR, RunContext, default_command

    if tiny and quick:
        raise typer.BadParameter("--tiny and --quick are exclusive")
    try:
        runner = executor_from_options(executor, address=address, workers=workers)
    except (ValueError, ImportError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    if threads:
        import torch

        torch.set_num_threads(threads)
    if name == "report":  # markdown of our results beside the papers' tables
        from privcore.experiments.report import render_report

        text = render_report(dataset, out or DEFAULT_RESULTS_DIR)
        if report_file is None:
            typer.echo(text)
        else:  # a failed render or a full disk leaves the previous file, never a truncated one
            from privcore._atomic import atomic_write_text

            atomic_write_text(report_file, text + "\n")
            typer.echo(f"wrote {report_file}")
        return
    names = [n for n in EXPERIMENTS if n not in NOT_IN_ALL] if name == "all" else [name]
    if name != "all" and name not in EXPERIMENTS:
        raise typer.BadParameter(f"NAME must be one of {', '.join(EXPERIMENTS)}, all or report, got {name!r}")
    mode = "tiny" if tiny else ("quick" if quick else "full")
    if out is None:
        from privcore._paths import quick_results_dir

        out = DEFAULT_RESULTS_DIR if mode == "full" else quick_results_dir()
        if mode != "full":
            typer.echo(f"{mode} run: results go to {out} (--out chooses; committed results are untouched)",
                       err=True)
    ctx = RunContext(
        dataset=dataset,
        mode=mode,
        out_dir=out,
        seed=seed,
        device=device,
        certifier=certifier,
        workers=workers,
        executor=None if runner.name == "local" else runner,
        models_dir=models_dir,
        fresh=fresh,
        show_progress=not no_progress,
        command=default_command(),
        options={k: v for k, v in {"n_test": n_test, "obfuscators": obfuscators}.items() if v},
    )
    failures: list[str] = []
    try:
        for n in names:
            start = time.perf_counter()
            typer.echo(f"== {n} on {dataset} ({ctx.mode})")
            try:
                frame = run_experiment(n, ctx)
            except Exception as exc:  # `all` goes on; a single experiment re-raises below
                if name != "all":
                    raise
                failures.append(f"{n}: {type(exc).__name__}: {exc}")
                typer.echo(f"   FAILED: {type(exc).__name__}: {exc}", err=True)
                continue
            rows = 0 if frame is None else len(frame)
            typer.echo(
                f"   {rows} rows → {ctx.dataset_dir / (n + '.csv')} ({time.perf_counter() - start:.1f} s)"
            )
    finally:
        if isinstance(runner, RayExecutor):
            runner.close()  # a Ray runtime this command started
    if failures:
        typer.echo("failed: " + "; ".join(failures), err=True)
        raise typer.Exit(code=1)
