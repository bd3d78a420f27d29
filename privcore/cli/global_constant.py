"""``python -m privcore global ...``: the certified global mechanism's box and constant G per obfuscator.

``compute`` fixes the public clipping box of an obfuscator from its TRAINING embeddings (the VAE means
of the card's training split, as Δp uses: per-coordinate min/max widened by ``--margin``, chosen
without test data) and certifies G over it (:func:`~privcore.lipschitz.global_box.compute_global_constant`),
then writes both into the card's ``global_lipschitz`` block with how G was obtained and the command.
``verify`` times what every process does before a release uses a card's G: verify it from the weights.

A card's G is a hint (docs/TRUST.md): :func:`privcore.mechanisms.global_mechanism.card_global_constant`
verifies it in every process and recomputes it when it does not verify.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer

from privcore.train.cli_common import DATASET, MODELS
from privcore.train.global_card import DEFAULT_MARGIN, training_embeddings, write_global_constant

global_app = typer.Typer(
    name="global",
    help="The certified global mechanism: public clipping box and certified constant G per obfuscator "
    "(compute and write into the card, or verify the card's).",
    no_args_is_help=True,
    add_completion=False,
)

VARIANTS = typer.Option(
    ["all"], "--variant", "-v", help="obfuscator name (repeat for several; 'all': every obfuscator-*.json)"
)


def _stems(models_dir: Path | None, dataset: str, variants: list[str]) -> list[Path]:
    from privcore.models.pipeline import default_models_dir

    folder = (Path(models_dir) if models_dir is not None else default_models_dir()) / dataset
    if variants == ["all"]:
        stems = sorted(p.with_suffix("") for p in folder.glob("obfuscator-*.json"))
        if not stems:
            raise typer.BadParameter(f"no obfuscator-*.json in {folder}", param_hint="--dataset")
        return stems
    return [folder / f"obfuscator-{v}" for v in variants]


@global_app.command()
def compute(
    dataset: str = DATASET,
    variant: list[str] = VARIANTS,
    margin: float = typer.Option(DEFAULT_MARGIN, help="public margin around the training embeddings' range"),
    time_limit: float = typer.Option(
        60.0, "--time-limit", help="seconds for G per model (a bound is certified whenever it stops)"
    ),
    models_dir: Path = MODELS,
) -> None:
    """Fix each obfuscator's clipping box from its training embeddings, certify G over it, write the card."""
    from privcore.nets.checkpoint import read_card

    cache: dict[str, Any] = {}
    for stem in _stems(models_dir, dataset, variant):
        card = read_card(stem)
        key = json.dumps([card["embedder"]["sha256"], card["dataset"]], sort_keys=True)
        if key not in cache:
            cache[key] = training_embeddings(stem)
        block = write_global_constant(stem, margin=margin, time_limit=time_limit, embeddings=cache[key])
        typer.echo(f"{dataset}/{stem.name}: G = {block['value']:.7g} ({block['how']}, witness "
                   f"{block['lower']:.6g}, {block['seconds']:.2f} s)")


@global_app.command()
def verify(
    dataset: str = DATASET,
    variant: list[str] = VARIANTS,
    time_limit: float = typer.Option(60.0, "--time-limit", help="seconds for the verification per model"),
    models_dir: Path = MODELS,
) -> None:
    """Verify each card's G from the weights, as a release does first, and time it (nothing is written)."""
    from privcore.lipschitz.global_box import verify_global_constant
    from privcore.mechanisms.global_mechanism import card_clip_box, card_global_hint
    from privcore.nets.checkpoint import load_checkpoint

    failed = 0
    for stem in _stems(models_dir, dataset, variant):
        obf = load_checkpoint(stem, kind="obfuscator")
        box, hint = card_clip_box(obf.card), card_global_hint(obf.card)
        if box is None or hint is None:
            what = "no global_lipschitz block" if box is None else "no usable G (a finite number > 0)"
            typer.echo(f"{dataset}/{stem.name}: {what} (run `privcore global compute`)")
            failed += 1
            continue
        start = time.perf_counter()
        got = verify_global_constant(obf["obfuscator"], box, hint, time_limit=time_limit)
        secs = time.perf_counter() - start
        failed += got is None
        verdict = f"verified ({got.how.value})" if got is not None else "NOT verified: a release recomputes G"
        typer.echo(f"{dataset}/{stem.name}: G = {hint:.7g} {verdict} in {secs:.2f} s")
    if failed:
        raise typer.Exit(1)
