"""``python -m privcore train global-model``: one model set for the global mechanism at a target ε.

The Table-1 variants are trained for PTR at ε ≤ 10 on the paper's unsupervised β-VAE. This command
trains what the global mechanism needs to be useful at a high target ε (docs/RESULTS.md, "MNIST"):

1. an embedder ``<embedder-name>`` on the training split (the dataset's fixed validation split held
   out), by default label-aware (``--label-weight``: γ·CE of a linear head on μ, head not shipped)
   with ±``--augment-shift`` pixel shifts: R is then measured in a metric trained with labels;
2. the obfuscator ``obfuscator-<name>``, the N variant with the global noise regulariser
   (``N-global``: Lap(Ĝ·R/ε) over the box, Ĝ estimated from 512 box samples) at the training ε
   ``(target, 2·target)``;
3. its Δp (exact, over ``--delta-p-n`` training embeddings), its certified G over the public box, its
   release classifier and its reconstruction attacker (trained on G·R/ε noise, the release's).

Steps whose checkpoint exists with the same recipe, seed and inputs are reused; every card records
this command line.
"""

from __future__ import annotations

from pathlib import Path

import typer

from privcore.train.cli_common import (
    DATASET,
    DEVICE,
    MODELS,
    PROGRESS,
    SEED,
    THREADS,
    command_line,
    load,
    setup,
)

__all__ = ["global_model_cmd"]


def global_model_cmd(
    ctx: typer.Context,
    dataset: str = DATASET,
    name: str = typer.Option(
        "N-global", help="the obfuscator's name (an N variant with the -global suffix, optionally tagged: "
        "N-global-e2)"
    ),
    embedder_name: str = typer.Option(
        "embedder-label", "--embedder-name", help="the embedder's checkpoint name in <models-dir>/<dataset>/"
    ),
    target_epsilon: float = typer.Option(
        10.0, "--target-epsilon", help="the total ε the model is for: N-global trains at (ε, 2ε)"
    ),
    label_weight: float = typer.Option(
        10.0, "--label-weight", help="γ of the embedder's label head (0 = none)"
    ),
    augment_shift: int = typer.Option(2, "--augment-shift", help="embedder: pixel shifts (0 = none)"),
    arch: str = typer.Option("conv", help="embedder: mlp or conv"),
    width: int = typer.Option(32, help="embedder: conv width"),
    hidden: int = typer.Option(256, help="embedder: hidden units"),
    out_dim: int = typer.Option(
        None, "--out-dim", help="obfuscator: output dimension (default: the latent size)", show_default=False
    ),
    obfuscator_hidden: str = typer.Option(
        "10,10", "--obfuscator-hidden", help="obfuscator: hidden widths, comma-separated"
    ),
    noise_bound: str = typer.Option(
        "sampled", "--noise-bound", help="obfuscator: Ĝ of the training noise, sampled over the box or "
        "'layers' (the layer-wise upper bound on ‖J_f‖∞→1)"
    ),
    delta_p_n: int = typer.Option(100, "--delta-p-n", help="training embeddings certified for Δp"),
    epochs: int = typer.Option(
        None, help="every step's epochs (a smoke run; default: the recipes', as shipped)", show_default=False
    ),
    device: str = DEVICE,
    seed: int = SEED,
    models_dir: Path = MODELS,
    threads: int = THREADS,
    progress: bool = PROGRESS,
) -> None:
    """Train a label-aware embedder, an N-global obfuscator for a target ε, its Δp, certified G, release
    classifier and attacker (module docstring)."""
    from privcore.data import validation_split
    from privcore.nets.checkpoint import card_path, read_card
    from privcore.ranges import EPSILON_RANGE
    from privcore.train.attacker import train_reconstruction_attacker
    from privcore.train.ensure import (
        ensure_classifier,
        ensure_delta_p,
        ensure_embedder,
        ensure_obfuscator,
    )
    from privcore.train.global_card import write_global_constant
    from privcore.train.recipes import (
        attacker_recipe,
        embedder_recipe,
        global_obfuscator_recipe,
        parse_obfuscator_name,
        release_classifier_recipe,
    )
    from privcore.validation import check_in_range

    try:
        check_in_range("target_epsilon", target_epsilon, *EPSILON_RANGE, low_open=False, high_open=False)
        try:
            mode = parse_obfuscator_name(name)[1]
        except ValueError:
            mode = None
        if mode != "global":
            raise ValueError(f"name must be an N variant with the -global suffix (for the global mechanism), "
                             f"optionally tagged (N-global-e2), got {name!r}")
        if not embedder_name.startswith("embedder") or "/" in embedder_name or "\\" in embedder_name:
            raise ValueError(f"embedder_name must be a plain name starting with 'embedder', "
                             f"got {embedder_name!r}")
        short = {} if epochs is None else {"epochs": epochs}
        emb_rec = embedder_recipe(dataset, arch=arch, width=width, hidden=hidden, augment_shift=augment_shift,
                                  label_weight=label_weight,
                                  **({} if epochs is None else {"epochs": epochs, "kl_warmup_epochs": 0}))
        try:
            hidden_widths = tuple(int(w) for w in obfuscator_hidden.split(","))
        except ValueError:
            raise ValueError(f"obfuscator_hidden must be comma-separated positive integers, got "
                             f"{obfuscator_hidden!r}") from None
        arch_over = {} if hidden_widths == (10, 10) else {"obfuscator_hidden": hidden_widths}
        if noise_bound != "sampled":  # one bound for every point: no box samples
            arch_over.update(noise_bound=noise_bound, noise_box_samples=0)
        obf_rec = global_obfuscator_recipe(dataset, name, target_epsilon=target_epsilon, **arch_over,
                                           **({} if out_dim is None else {"out_dim": out_dim}),
                                           **({} if epochs is None else {"epochs": epochs, "warmup_epochs": 0,
                                                                         "classifier_refit_epochs": epochs}))
        clf_rec, att_rec = release_classifier_recipe(dataset, **short), attacker_recipe(dataset, **short)
    except (TypeError, ValueError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    mdir = setup(models_dir, threads)
    fit = validation_split(load(dataset, None)).dataset
    command = command_line(ctx)
    train = {"seed": seed, "device": device, "progress": progress, "command": command}
    emb = mdir / dataset / embedder_name
    obf = mdir / dataset / f"obfuscator-{name}"
    ensure_embedder(fit, emb_rec, emb, **train)
    ensure_obfuscator(fit, obf_rec, embedder=emb, stem=obf, **train)
    ensure_delta_p(obf, n=delta_p_n, seed=seed, workers=1, executor=None, progress=progress, command=command)
    if not read_card(obf).get("global_lipschitz"):
        write_global_constant(obf, time_limit=60.0)
    ensure_classifier(obf, clf_rec, obf.with_name(f"classifier-{name}"), **train)
    g = float(read_card(obf)["global_lipschitz"]["value"])
    att = obf.with_name(f"attacker-{name}")
    att_card = read_card(att) if card_path(att).is_file() else None
    if att_card is None or att_card["obfuscator"]["sha256"] != read_card(obf)["weights"]["sha256"]:
        att_card = train_reconstruction_attacker(obf, out=att, recipe=att_rec, delta_p=g,
                                                 seed=seed, device=device, progress=progress, command=command)
    clf = read_card(obf.with_name(f"classifier-{name}"))
    dp = read_card(obf)["delta_p"]["proposed"]
    typer.echo(
        f"{dataset}/{name} on {embedder_name}: G = {g:.6g}, Δp = {dp:.6g}, "
        f"noise-free accuracy (validation) {clf['metrics']['test_accuracy']:.4f}"
    )
