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
import os
import platform
import time
from pathlib import Path
from typing import Any

import typer

from privcore.train.cli_common import DATASET, MODELS

global_app = typer.Typer(
    name="global",
    help="The certified global mechanism: public clipping box and certified constant G per obfuscator "
    "(compute and write into the card, or verify the card's).",
    no_args_is_help=True,
    add_completion=False,
)

#: the public margin added to the training embeddings' range (fixed before any private input)
DEFAULT_MARGIN = 0.5
VARIANTS = typer.Option(
    ["all"], "--variant", "-v", help="obfuscator name (repeat for several; 'all': every obfuscator-*.json)"
)


def training_embeddings(obfuscator_stem: str | os.PathLike[str]) -> Any:
    """The VAE means of the obfuscator card's training split (float64 numpy, (n, d)), with the embedder
    beside the card (checked to be the one the obfuscator was trained on)."""
    import torch

    from privcore.nets.checkpoint import load_checkpoint, read_card
    from privcore.train.common import batched_apply
    from privcore.train.embedder import dataset_from_card

    card = read_card(obfuscator_stem)
    emb_stem = Path(obfuscator_stem).with_name(card["embedder"]["file"]).with_suffix("")
    emb = load_checkpoint(emb_stem, kind="embedder", dataset=card["dataset"]["name"])
    if emb.card["weights"]["sha256"] != card["embedder"]["sha256"]:
        raise ValueError(
            f"the embedder beside {obfuscator_stem} is not the one its obfuscator was trained on"
        )
    ds = dataset_from_card(card["dataset"])
    vae = emb["vae"]
    with torch.no_grad():
        z = batched_apply(lambda b: vae.encode(b)[0], ds.x_train, device=torch.device("cpu"))
    return z.double().numpy()


def global_block(
    constant: Any, *, margin: float, n_points: int, command: str, time_limit: float
) -> dict[str, Any]:
    """The card's ``global_lipschitz`` block for a computed :class:`GlobalConstant`."""
    return {
        "value": constant.value,
        "how": constant.how.value,
        "lower": constant.lower,
        "seconds": round(constant.seconds, 3),
        "time_limit": time_limit,
        "bounds": dict(constant.bounds),
        "input_norm": constant.input_norm,
        "output_norm": constant.output_norm,
        "clip_box": {
            **constant.box.to_dict(),
            "margin": margin,
            "n": n_points,
            "source": "training embeddings (VAE means) of the card's training split: per-coordinate "
            "min/max widened by the margin, rounded outwards to 1e-4; fixed without test data",
        },
        "note": "value is a hint: every process verifies it from the weights before a release uses it, "
        "and recomputes it when it does not verify (docs/TRUST.md)",
        "command": command,
        "machine": f"{platform.machine()} {platform.processor() or platform.system()}, "
        f"{os.cpu_count()} logical CPUs",
    }


def _stems(models_dir: Path | None, dataset: str, variants: list[str]) -> list[Path]:
    from privcore.pipeline import default_models_dir

    folder = (Path(models_dir) if models_dir is not None else default_models_dir()) / dataset
    if variants == ["all"]:
        stems = sorted(p.with_suffix("") for p in folder.glob("obfuscator-*.json"))
        if not stems:
            raise typer.BadParameter(f"no obfuscator-*.json in {folder}", param_hint="--dataset")
        return stems
    return [folder / f"obfuscator-{v}" for v in variants]


def write_global_constant(stem: str | os.PathLike[str], *, margin: float = DEFAULT_MARGIN,
                          time_limit: float = 60.0, embeddings: Any = None) -> dict[str, Any]:
    """Fix the box from the training embeddings (or ``embeddings``), compute G over it and write the
    ``global_lipschitz`` block into the obfuscator's card; returns the block."""
    from privcore.lipschitz.global_box import ClipBox, compute_global_constant
    from privcore.nets.checkpoint import load_checkpoint, update_card

    obf = load_checkpoint(stem, kind="obfuscator")
    z = training_embeddings(stem) if embeddings is None else embeddings
    box = ClipBox.from_points(z, margin=margin)
    constant = compute_global_constant(obf["obfuscator"], box, time_limit=time_limit)
    name, dataset = obf.card.get("name", Path(stem).name), obf.card["dataset"]["name"]
    command = f"python -m privcore global compute --dataset {dataset} --variant {name}"
    if margin != DEFAULT_MARGIN:
        command += f" --margin {margin:g}"
    if time_limit != 60.0:
        command += f" --time-limit {time_limit:g}"
    block = global_block(
        constant, margin=margin, n_points=int(z.shape[0]), command=command, time_limit=time_limit
    )
    update_card(stem, {"global_lipschitz": block})
    return block


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
