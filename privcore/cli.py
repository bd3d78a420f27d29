"""Command-line interface: ``python -m privcore COMMAND ...``.

Each part of privcore keeps its sub-commands in its own ``cli`` module; this file only
registers them, so it stays a table of contents.
"""

from __future__ import annotations

import typer

from privcore.experiments.cli import experiment_app
from privcore.lab.cli import lab_app
from privcore.lipschitz.cli import cache_app, tables_app
from privcore.train.cli import evaluate, train_app

app = typer.Typer(
    name="privcore",
    help="privlens / privcore: inference-time privacy, certified.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def version() -> None:
    """Print privcore's version."""
    from privcore import __version__

    typer.echo(__version__)


# --- sub-command registrations (one line per part) ---
app.add_typer(train_app, name="train")
app.command("evaluate")(evaluate)
app.add_typer(experiment_app, name="experiment")
app.add_typer(lab_app, name="lab")
app.add_typer(cache_app, name="cache")
app.add_typer(tables_app, name="tables")


def main() -> None:
    """Entry point of ``python -m privcore``."""
    app()
