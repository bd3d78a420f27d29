"""``python -m privcore train ...`` (``evaluate`` is :mod:`privcore.train.cli_evaluate`).

Every command runs on CUDA when present and on the CPU otherwise (``--device``), shows progress
bars, resumes an interrupted run from its ``*.resume.safetensors`` state (safetensors + JSON,
never a pickle: :mod:`privcore.train.resume`), and writes checkpoints into
``<models-dir>/<dataset>/`` whose cards record the command that regenerates them.
Heavy imports stay inside the commands so that ``python -m privcore --help`` is fast.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import typer

from privcore.train.cli_common import (
    ADDRESS,
    DATA_ROOT,
    DATASET,
    DEVICE,
    EXECUTOR,
    MODELS,
    PROGRESS,
    RESUME,
    SEED,
    THREADS,
    command_line,
    executor_option,
    load,
    load_for_embedder,
    setup,
    summary,
)
from privcore.train.cli_global import global_model_cmd
from privcore.train.cli_told_attacker import told_attacker_cmd

train_app = typer.Typer(
    help="Train embedders, obfuscators (Table 1), α sweeps (Fig. 2), attackers, IP classifiers; compute Δp.",
    no_args_is_help=True,
    add_completion=False,
)


@train_app.command("embedder")
def embedder_cmd(
    ctx: typer.Context,
    dataset: str = DATASET,
    epochs: int = typer.Option(None, help="override the recipe's epochs"),
    n_train: int = typer.Option(None, "--n-train", help="train on a random subset of this size"),
    arch: str = typer.Option(None, help="mlp or conv"),
    hidden: int = typer.Option(None),
    width: int = typer.Option(None),
    beta: float = typer.Option(None, help="β of the β-VAE (paper: 5)"),
    kl_warmup: int = typer.Option(None, "--kl-warmup", help="epochs over which the KL weight ramps 0 → β"),
    augment_shift: int = typer.Option(
        None, "--augment-shift", help="shift each training image by up to this many pixels (0 = none)"
    ),
    label_weight: float = typer.Option(
        None,
        "--label-weight",
        help="γ: add γ·cross-entropy of a linear head on μ (0 = the paper's unsupervised β-VAE; > 0 puts "
        "labels into g: docs/RESULTS.md, MNIST)",
    ),
    validation_fraction: float = typer.Option(
        0.0,
        "--validation-fraction",
        help="hold out this stratified fraction of the training set as validation (0 = none); the "
        "obfuscator, Δp, classifier and attacker trained on this embedder then train on the rest",
    ),
    validation_seed: int = typer.Option(0, "--validation-seed", help="seed of the validation split"),
    device: str = DEVICE,
    seed: int = SEED,
    models_dir: Path = MODELS,
    data_root: Path = DATA_ROOT,
    threads: int = THREADS,
    progress: bool = PROGRESS,
    resume: bool = RESUME,
) -> None:
    """Train the β-VAE embedder (posthoc-PTR App. E); with --validation-fraction on the training
    set minus a held-out validation split (its card's "test" metrics are then validation metrics)."""
    from privcore.train.embedder import train_embedder
    from privcore.train.recipes import embedder_recipe

    mdir = setup(models_dir, threads)
    ds = load(dataset, data_root)
    if validation_fraction:
        from privcore.data import validation_split

        try:
            ds = validation_split(ds, fraction=validation_fraction, seed=validation_seed).dataset
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
    rec = embedder_recipe(
        dataset,
        epochs=epochs,
        n_train=n_train,
        arch=arch,
        hidden=hidden,
        width=width,
        beta=beta,
        kl_warmup_epochs=kl_warmup,
        augment_shift=augment_shift,
        label_weight=label_weight,
    )
    summary(
        train_embedder(
            ds,
            rec,
            out=mdir / dataset / "embedder",
            device=device,
            seed=seed,
            progress=progress,
            resume=resume,
            command=command_line(ctx),
        )
    )


@train_app.command("obfuscator")
def obfuscator_cmd(
    ctx: typer.Context,
    dataset: str = DATASET,
    variant: str = typer.Option(
        "ARL-C-N",
        help="Encoder, ARL, C, N, ARL-C, ARL-N, C-N or ARL-C-N (Table 1); an N variant with the suffix "
        "-paper (e.g. ARL-C-N-paper) is --noise paper, saved under that name; ARL-C-N-authors is the "
        "authors'-code twin (privcore.train.authors)",
    ),
    alpha: float = typer.Option(
        None,
        help="ARL weight α (paper: 0.99). With --variant ARL: an α-sweep member (Fig. 2), ARL-alpha<α>; "
        "another ARL variant is saved as <variant>-alpha<α>",
    ),
    sigma: float = typer.Option(
        None, help="paper-noise scale σ (App. E: 0.01; only an N variant -paper): saved as <name>-sigma<σ>"
    ),
    epochs: int = typer.Option(None),
    warmup_epochs: int = typer.Option(None, "--warmup-epochs", help="task-only epochs before the game"),
    refit_epochs: int = typer.Option(None, "--refit-epochs", help="classifier refit epochs on the final f"),
    noise: str = typer.Option(
        None, help="N regulariser: release (default; noise = the release's Δ̂·R/ε) or paper (Lap σ=0.01)"
    ),
    keep_adversary: bool = typer.Option(False, "--keep-adversary", help="also store the proxy adversary"),
    patience: int = typer.Option(
        None, help="with validation selection (ARL-C-N-authors): stop after this many epochs without a gain"
    ),
    device: str = DEVICE,
    seed: int = SEED,
    models_dir: Path = MODELS,
    data_root: Path = DATA_ROOT,
    threads: int = THREADS,
    progress: bool = PROGRESS,
    resume: bool = RESUME,
) -> None:
    """Train one obfuscator variant with its classifier and proxy adversary (Table 1)."""
    from privcore.train.obfuscator import train_obfuscator
    from privcore.train.recipes import obfuscator_recipe

    mdir = setup(models_dir, threads)
    ds = load_for_embedder(mdir / dataset / "embedder", dataset, data_root)
    try:
        rec = obfuscator_recipe(
            dataset,
            variant,
            alpha=alpha,
            epochs=epochs,
            warmup_epochs=warmup_epochs,
            classifier_refit_epochs=refit_epochs,
            noise_mode=noise,
            sigma=sigma,
            patience=patience,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    summary(
        train_obfuscator(
            ds,
            rec,
            embedder=mdir / dataset / "embedder",
            out=mdir / dataset / f"obfuscator-{rec.name}",
            device=device,
            seed=seed,
            progress=progress,
            resume=resume,
            keep_adversary=keep_adversary,
            command=command_line(ctx),
        )
    )


@train_app.command("alpha-sweep")
def alpha_sweep_cmd(
    ctx: typer.Context,
    dataset: str = DATASET,
    alphas: str = typer.Option("0,0.5,0.9,0.99,0.999", help="comma-separated ARL weights (Fig. 2)"),
    epochs: int = typer.Option(None),
    warmup_epochs: int = typer.Option(None, "--warmup-epochs", help="task-only epochs before the game"),
    refit_epochs: int = typer.Option(None, "--refit-epochs", help="classifier refit epochs on the final f"),
    device: str = DEVICE,
    seed: int = SEED,
    models_dir: Path = MODELS,
    data_root: Path = DATA_ROOT,
    threads: int = THREADS,
    progress: bool = PROGRESS,
    resume: bool = RESUME,
) -> None:
    """Train ARL obfuscators at several α (Fig. 2: higher α, smaller local Lipschitz constants)."""
    from privcore.train.obfuscator import train_obfuscator
    from privcore.train.recipes import obfuscator_recipe

    mdir = setup(models_dir, threads)
    ds = load_for_embedder(mdir / dataset / "embedder", dataset, data_root)
    for a in (float(v) for v in alphas.split(",")):
        rec = obfuscator_recipe(
            dataset,
            "ARL",
            alpha=a,
            epochs=epochs,
            warmup_epochs=warmup_epochs,
            classifier_refit_epochs=refit_epochs,
        )
        summary(
            train_obfuscator(
                ds,
                rec,
                embedder=mdir / dataset / "embedder",
                out=mdir / dataset / f"obfuscator-{rec.name}",
                device=device,
                seed=seed,
                progress=progress,
                resume=resume,
                command=command_line(ctx),
            )
        )


@train_app.command("delta-p")
def delta_p_cmd(
    ctx: typer.Context,
    dataset: str = DATASET,
    variant: str = typer.Option("ARL-C-N", help="obfuscator name (a Table-1 variant or ARL-alpha<α>)"),
    n: int = typer.Option(300, help="training embeddings to certify"),
    n_sigma: float = typer.Option(3.0, help="Δp = μ + n_sigma·σ (paper: 3)"),
    radius: float = typer.Option(None, help="R (default: the card's, i.e. the paper's for the dataset)"),
    certifier: str = typer.Option("exact", help="exact, lp or interval"),
    solver: str = typer.Option("auto", help="auto, gurobi or highs"),
    workers: int = typer.Option(2, help="solver processes"),
    time_limit: float = typer.Option(
        None, help="seconds per solve (a time-out keeps the proven upper bound)"
    ),
    seed: int = SEED,
    models_dir: Path = MODELS,
    progress: bool = PROGRESS,
    executor: str = EXECUTOR,
    address: str = ADDRESS,
) -> None:
    """Certify local Lipschitz constants on training embeddings; store μ, σ, Δp and timings in the card."""
    from privcore.train.delta_p import compute_delta_p

    mdir = setup(models_dir, None)
    runner = executor_option(executor, address, workers)
    card = compute_delta_p(
        mdir / dataset / f"obfuscator-{variant}",
        n=n,
        radius=radius,
        n_sigma=n_sigma,
        certifier=certifier,
        solver=solver,
        workers=workers,
        time_limit=time_limit,
        seed=seed,
        progress=progress,
        command=command_line(ctx),
        executor=runner,
    )
    d, c = card["delta_p"], card["certification"]
    typer.echo(
        f"{dataset}/{variant}: R={d['radius']:g} n={d['n']} μ={d['mu']:.4g} σ={d['sigma']:.4g} "
        f"Δp=μ+{d['n_sigma']:g}σ={d['proposed']:.4g} (all exact: {d['all_exact']}); "
        f"certification {c['seconds_mean']:.3f} s/point mean, {c['seconds_max']:.3f} s max ({c['solvers']})"
    )


@train_app.command("attacker")
def attacker_cmd(
    ctx: typer.Context,
    dataset: str = DATASET,
    variant: str = typer.Option("ARL-C-N", help="obfuscator to attack"),
    epochs: int = typer.Option(None),
    epsilons: str = typer.Option("1,2,5,10", help="release ε values mixed into the training data"),
    device: str = DEVICE,
    seed: int = SEED,
    models_dir: Path = MODELS,
    threads: int = THREADS,
    progress: bool = PROGRESS,
    resume: bool = RESUME,
) -> None:
    """Train the reconstruction attacker on releases f(z) + Lap(Δp·R/ε) and noise-free f(z)."""
    from privcore.train.attacker import train_reconstruction_attacker
    from privcore.train.recipes import attacker_recipe

    mdir = setup(models_dir, threads)
    rec = attacker_recipe(dataset, epochs=epochs, epsilons=tuple(float(e) for e in epsilons.split(",")))
    summary(
        train_reconstruction_attacker(
            mdir / dataset / f"obfuscator-{variant}",
            recipe=rec,
            out=mdir / dataset / f"attacker-{variant}",
            device=device,
            seed=seed,
            progress=progress,
            resume=resume,
            command=command_line(ctx),
        )
    )


@train_app.command("classifier")
def classifier_cmd(
    ctx: typer.Context,
    dataset: str = DATASET,
    variant: str = typer.Option("ARL-C-N", help="obfuscator whose releases the classifier reads"),
    epochs: int = typer.Option(None),
    device: str = DEVICE,
    seed: int = SEED,
    models_dir: Path = MODELS,
    threads: int = THREADS,
    progress: bool = PROGRESS,
    resume: bool = RESUME,
) -> None:
    """Fit the noise-aware release classifier on the frozen obfuscator (needs its Δp)."""
    from privcore.train.recipes import release_classifier_recipe
    from privcore.train.release_classifier import train_release_classifier

    mdir = setup(models_dir, threads)
    try:
        card = train_release_classifier(
            mdir / dataset / f"obfuscator-{variant}",
            recipe=release_classifier_recipe(dataset, epochs=epochs),
            out=mdir / dataset / f"classifier-{variant}",
            device=device,
            seed=seed,
            progress=progress,
            resume=resume,
            command=command_line(ctx),
        )
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    acc = card["metrics"]
    noisy = ", ".join(f"ε={k}: {v:.3f}" for k, v in acc["test_accuracy_release_noise"].items())
    typer.echo(
        f"{dataset}/{card['name']}: test accuracy ε=∞ {acc['test_accuracy']:.4f} | release noise: {noisy}"
    )


@train_app.command("classifier-told-scale")
def classifier_told_scale_cmd(
    ctx: typer.Context,
    dataset: str = DATASET,
    variant: str = typer.Option("ARL-C-N", help="obfuscator whose release classifier is calibrated"),
    device: str = DEVICE,
    models_dir: Path = MODELS,
    threads: int = THREADS,
) -> None:
    """Calibrate a fitted release classifier's told-scale map on its training split and record it in
    its card (weights untouched): for a classifier whose card has no told-scale map."""
    from privcore.train.release_classifier import recalibrate_told_scale

    mdir = setup(models_dir, threads)
    try:
        card = recalibrate_told_scale(
            mdir / dataset / f"classifier-{variant}", device=device, command=command_line(ctx)
        )
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    ts = card["told_scale"]
    raised = ", ".join(f"({a:.3g}, {c:.3g})" for a, c in ts["raised"]) or "none"
    typer.echo(
        f"{dataset}/{card['name']}: trained scales [{ts['min_scale']:.4g}, {ts['max_scale']:.4g}], "
        f"read as 0 up to {ts['clean_below']:.3g}, raised: {raised}"
    )


@train_app.command("ip")
def ip_cmd(
    ctx: typer.Context,
    dataset: str = DATASET,
    model: str = typer.Option("cnn", help="cnn (ResNet-18 on CIFAR-10), lipschitz-l1 or lipschitz-l2"),
    epochs: int = typer.Option(None),
    finetune_epochs: int = typer.Option(None, help="Gauss-Input fine-tuning epochs (cnn only; 0 = none)"),
    target_epsilon: float = typer.Option(None, help="Gauss-Input fine-tuning target ε"),
    target_alpha: float = typer.Option(None, help="Gauss-Input fine-tuning target α (ℓ2, pixels in [0, 1])"),
    n_train: int = typer.Option(None, "--n-train"),
    device: str = DEVICE,
    seed: int = SEED,
    models_dir: Path = MODELS,
    data_root: Path = DATA_ROOT,
    threads: int = THREADS,
    progress: bool = PROGRESS,
    resume: bool = RESUME,
) -> None:
    """Train an inference-privacy classifier (IP paper Sec. V)."""
    from privcore.train.ip import train_ip_classifier
    from privcore.train.recipes import ip_recipe

    mdir = setup(models_dir, threads)
    ds = load(dataset, data_root)
    rec = ip_recipe(
        dataset,
        model,
        epochs=epochs,
        finetune_epochs=finetune_epochs,
        target_epsilon=target_epsilon,
        target_alpha=target_alpha,
        n_train=n_train,
    )
    for card in train_ip_classifier(
        ds,
        rec,
        out_dir=mdir / dataset,
        device=device,
        seed=seed,
        progress=progress,
        resume=resume,
        command=command_line(ctx),
    ):
        summary(card)


@train_app.command("all")
def all_cmd(
    dataset: str = DATASET,
    variants: str = typer.Option(
        "Encoder,ARL,ARL-C-N",
        help="obfuscators to train (Table 1 names; <N variant>-paper: the paper's σ = 0.01 noise "
        "regulariser)",
    ),
    ip_models: str = typer.Option(
        "cnn,lipschitz-l1,lipschitz-l2", "--ip-models", help="IP classifiers ('' = none)"
    ),
    attackers: bool = typer.Option(
        True, "--attackers/--no-attackers", help="train a reconstruction attacker per variant"
    ),
    delta_p_n: int = typer.Option(300, "--delta-p-n", help="training embeddings certified for Δp"),
    workers: int = typer.Option(2, help="solver processes for Δp"),
    executor: str = EXECUTOR,
    address: str = ADDRESS,
    device: str = DEVICE,
    seed: int = SEED,
    models_dir: Path = MODELS,
    data_root: Path = DATA_ROOT,
    threads: int = THREADS,
    progress: bool = PROGRESS,
    resume: bool = RESUME,
    force: bool = typer.Option(False, help="retrain even what already exists"),
) -> None:
    """Everything the dashboard ships for a dataset: embedder, obfuscators (+ Δp, release
    classifier), attackers, IP classifiers. Steps whose checkpoint exists are skipped (unless
    --force); each card records the
    single-step command that regenerates it."""
    from privcore.nets.checkpoint import card_path, read_card
    from privcore.train.attacker import train_reconstruction_attacker
    from privcore.train.delta_p import compute_delta_p
    from privcore.train.embedder import train_embedder
    from privcore.train.ip import train_ip_classifier
    from privcore.train.obfuscator import train_obfuscator
    from privcore.train.recipes import (
        attacker_recipe,
        embedder_recipe,
        ip_recipe,
        obfuscator_recipe,
        release_classifier_recipe,
    )
    from privcore.train.release_classifier import train_release_classifier

    mdir = setup(models_dir, threads)
    runner = executor_option(executor, address, workers)
    ds = load(dataset, data_root)
    d = mdir / dataset
    common = f"--dataset {dataset} --seed {seed} --device {device}" + (
        f" --threads {threads}" if threads else ""
    )
    common += "" if models_dir is None else f" --models-dir {shlex.quote(str(models_dir))}"
    run = dict(device=device, seed=seed, progress=progress, resume=resume)

    def need(stem: Path) -> bool:
        return force or not card_path(stem).is_file()

    if need(d / "embedder"):
        summary(
            train_embedder(
                ds,
                embedder_recipe(dataset),
                out=d / "embedder",
                command=f"python -m privcore train embedder {common}",
                **run,
            )
        )
    for v in [s for s in variants.split(",") if s]:
        stem = d / f"obfuscator-{v}"
        if need(stem):
            summary(
                train_obfuscator(
                    ds,
                    obfuscator_recipe(dataset, v),
                    embedder=d / "embedder",
                    out=stem,
                    command=f"python -m privcore train obfuscator {common} --variant {v}",
                    **run,
                )
            )
        if force or not read_card(stem).get("delta_p"):
            mcommon = f"--dataset {dataset}" + ("" if models_dir is None else f" --models-dir {models_dir}")
            compute_delta_p(
                stem,
                n=delta_p_n,
                workers=workers,
                seed=seed,
                progress=progress,
                command=f"python -m privcore train delta-p {mcommon} --variant {v} --n {delta_p_n} "
                f"--workers {workers} --seed {seed}",
                executor=runner,
            )
            dp = read_card(stem)["delta_p"]
            typer.echo(
                f"Δp {v}: μ={dp['mu']:.4g} σ={dp['sigma']:.4g} proposed={dp['proposed']:.4g} (n={dp['n']})"
            )
        if need(d / f"classifier-{v}"):
            summary(
                train_release_classifier(
                    stem,
                    recipe=release_classifier_recipe(dataset),
                    out=d / f"classifier-{v}",
                    command=f"python -m privcore train classifier {common} --variant {v}",
                    **run,
                )
            )
        if attackers and need(d / f"attacker-{v}"):
            summary(
                train_reconstruction_attacker(
                    stem,
                    recipe=attacker_recipe(dataset),
                    out=d / f"attacker-{v}",
                    command=f"python -m privcore train attacker {common} --variant {v}",
                    **run,
                )
            )
    for m in [s for s in ip_models.split(",") if s]:
        first = d / ("ip-cnn" if m == "cnn" else f"ip-{m}")
        if need(first):
            for card in train_ip_classifier(
                ds,
                ip_recipe(dataset, m),
                out_dir=d,
                command=f"python -m privcore train ip {common} --model {m}",
                **run,
            ):
                summary(card)


# registered here, defined in its own module (this one is long enough)
train_app.command("global-model")(global_model_cmd)
train_app.command("told-attacker")(told_attacker_cmd)
