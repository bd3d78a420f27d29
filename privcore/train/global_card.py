"""The certified global mechanism's card block: fix the public clipping box of an obfuscator from its
TRAINING embeddings (the VAE means of the card's training split, as Δp uses: per-coordinate min/max
widened by a public margin, chosen without test data), certify G over it
(:func:`~privcore.lipschitz.global_box.compute_global_constant`) and write both into the card's
``global_lipschitz`` block. A card's G stays a hint (docs/TRUST.md): every process verifies it.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_MARGIN", "global_block", "training_embeddings", "write_global_constant"]

#: the public margin added to the training embeddings' range (fixed before any private input)
DEFAULT_MARGIN = 0.5


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
