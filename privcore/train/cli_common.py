"""What the ``train`` commands share: their options, the canonical command line a card records,
the models directory and dataset loading with usage errors, and the one-line summary."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import typer

from privcore.data.options import dataset_option
from privcore.executors import ADDRESS_HELP, EXECUTOR_HELP

DATASET = typer.Option(
    "digits", "--dataset", "-d", help="digits, fashion-mnist, mnist, cifar10, utkface, folder",
    callback=dataset_option,
)
DEVICE = typer.Option("auto", help="auto (CUDA when present, else CPU), cpu or cuda")
SEED = typer.Option(0, help="seed of initialisation, shuffling and training noise")
MODELS = typer.Option(None, "--models-dir", help="default: $PRIVCORE_MODELS_DIR or the repository's models/")
DATA_ROOT = typer.Option(None, "--data-root", help="dataset root (default: $PRIVCORE_DATA_DIR or data/raw)")
THREADS = typer.Option(None, help="CPU threads for torch (default: torch's choice)")
PROGRESS = typer.Option(True, "--progress/--no-progress", help="progress bars")
RESUME = typer.Option(
    True,
    "--resume/--no-resume",
    help="continue an interrupted run from its state file (<name>.resume.safetensors, used only if it "
    "matches this run's settings; an old pickled .resume.pt is never loaded)",
)
EXECUTOR = typer.Option("local", help=EXECUTOR_HELP)
ADDRESS = typer.Option(None, help=ADDRESS_HELP)


def executor_option(executor: str, address: str | None, workers: int) -> Any:
    """The executor of ``--executor/--address`` (None for the default local one), or a usage error."""
    from privcore.executors import executor_from_options

    try:
        ex = executor_from_options(executor, address=address, workers=workers)
    except (ValueError, ImportError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    return None if ex.name == "local" else ex


def command_line(ctx: typer.Context) -> str:
    """The canonical command line of the running sub-command: its path and every option whose
    value differs from the default (so it regenerates the artefact, however it was invoked)."""
    names: list[str] = []
    c: Any = ctx
    while c is not None and c.parent is not None:
        names.append(str(c.info_name))
        c = c.parent
    parts = ["python", "-m", "privcore", *reversed(names)]
    for p in ctx.command.params:
        v = ctx.params.get(p.name)
        always = p.name in ("dataset", "variant", "model")
        if v is None or (v == p.default and not always) or getattr(p, "param_type_name", "") != "option":
            continue
        if getattr(p, "is_flag", False):
            parts.append(p.opts[0] if v else p.secondary_opts[0])
            continue
        flag = max(p.opts, key=len)
        for x in v if isinstance(v, (list, tuple)) else [v]:
            parts += [flag, str(x)]
    return shlex.join(parts)


def setup(models_dir: Path | None, threads: int | None) -> Path:
    from privcore.models.pipeline import default_models_dir
    from privcore.train.common import set_threads

    set_threads(threads)
    return Path(models_dir) if models_dir is not None else default_models_dir()


def load(dataset: str, data_root: Path | None) -> Any:
    from privcore.data import load_dataset
    from privcore.errors import DatasetUnavailableError

    try:
        return load_dataset(dataset, root=data_root)
    except DatasetUnavailableError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def load_for_embedder(stem: Path, dataset: str, data_root: Path | None) -> Any:
    """The data the embedder at ``stem`` was trained on (loader options and subset from its card)."""
    from privcore.errors import CheckpointError, DatasetUnavailableError
    from privcore.nets.checkpoint import read_card
    from privcore.train.embedder import dataset_from_card

    if data_root is not None:
        return load(dataset, data_root)
    try:
        return dataset_from_card(read_card(stem)["dataset"])
    except (CheckpointError, DatasetUnavailableError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def summary(card: dict[str, Any]) -> None:
    m = {k: v for k, v in (card.get("metrics") or {}).items() if k != "history"}
    typer.echo(
        f"wrote {card['kind']} {card['name']} ({card['weights']['bytes'] / 1024:.0f} KiB): "
        f"{json.dumps(m, default=str)[:600]}"
    )
