"""``python -m privcore train told-attacker``: the scale-told reconstruction attacker of one posthoc model
(:mod:`privcore.train.told_attacker`), written as ``<models-dir>/<dataset>/attacker-told-<model>``."""

from __future__ import annotations

from pathlib import Path

import typer

from privcore.train.cli_common import DATASET, MODELS, SEED, THREADS, command_line, setup, summary

__all__ = ["told_attacker_cmd"]


def told_attacker_cmd(
    ctx: typer.Context,
    dataset: str = DATASET,
    model: str = typer.Option(None, help="the posthoc model (obfuscator) to attack (default: the dataset's)",
                              show_default=False),
    epochs: int = typer.Option(None, help="most epochs, the best on validation kept (default: the recipe's)",
                               show_default=False),
    hiddens: str = typer.Option(None, help="candidate hidden widths, comma-separated, chosen on validation "
                                "(default: the recipe's)", show_default=False),
    seed: int = SEED,
    models_dir: Path = MODELS,
    threads: int = THREADS,
) -> None:
    """Train the attacker told the noise scale, for every mechanism releasing the model's embedding (CPU)."""
    from privcore.defaults import default_model
    from privcore.train.told_attacker import told_attacker_recipe, train_told_attacker

    mdir = setup(models_dir, threads)
    name = default_model(dataset) if model is None else model
    widths = None if hiddens is None else tuple(int(h) for h in hiddens.split(","))
    recipe = told_attacker_recipe(dataset, epochs=epochs, hiddens=widths)
    summary(train_told_attacker(dataset, name, models_dir=mdir, recipe=recipe, seed=seed,
                                command=command_line(ctx)))
