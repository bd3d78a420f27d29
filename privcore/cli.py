"""Command-line interface: ``python -m privcore COMMAND ...``.

Each part of privcore registers its own sub-commands below (one line each), so this file
stays a table of contents.
"""

from __future__ import annotations

import typer

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


# --- sub-command registrations (one line per part; keep imports local to each module) ---
app.add_typer(__import__("privcore.lab.cli", fromlist=["lab_app"]).lab_app, name="lab")
app.add_typer(__import__("privcore.experiments.cli", fromlist=["experiment_app"]).experiment_app, name="experiment")
app.add_typer(__import__("privcore.train.cli", fromlist=["train_app"]).train_app, name="train")
app.command("evaluate")(__import__("privcore.train.cli", fromlist=["evaluate"]).evaluate)


def main() -> None:
    """Entry point of ``python -m privcore``."""
    app()
