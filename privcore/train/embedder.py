"""Stage i of the posthoc-PTR pipeline (App. E): train the β-VAE embedder."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from privcore.data import Dataset, get_spec
from privcore.nets.checkpoint import Architecture, build_module, save_checkpoint
from privcore.nets.embedder import BetaVAE, beta_vae_loss
from privcore.train.common import (
    ResumableRun,
    batched_apply,
    epoch_bar,
    minibatches,
    resolve_device,
    seed_everything,
)
from privcore.train.recipes import EmbedderRecipe

__all__ = [
    "dataset_card",
    "dataset_from_card",
    "embedder_architecture",
    "latent_neighbour_stats",
    "shift_images",
    "train_embedder",
]


def dataset_card(ds: Dataset) -> dict[str, Any]:
    """The dataset part of a checkpoint card (name, fingerprint, sizes, shape, classes, source)."""
    return {
        "name": ds.name,
        "fingerprint": ds.fingerprint,
        "n_train": int(ds.x_train.shape[0]),
        "n_test": int(ds.x_test.shape[0]),
        "image_shape": list(ds.image_shape),
        "class_names": list(ds.class_names),
        "source": ds.source,
        "options": ds.options,
        **({"split": ds.split} if ds.split else {}),
    }


def dataset_from_card(dcard: dict[str, Any]) -> Dataset:
    """Reload the exact data a card was trained on (loader options, any recorded subset, then any
    validation split: :func:`privcore.data.validation_split`) and check its fingerprint
    (ValueError when the data on this machine differ)."""
    from privcore.data import load_dataset, validation_split

    opts = dict(dcard.get("options") or {})
    subset = opts.pop("subset", None)
    validation = opts.pop("validation", None)
    root = opts.pop("root", None)
    ds = load_dataset(dcard["name"], root=root, **opts)
    if subset:
        ds = ds.subset(**subset)
    if validation:
        ds = validation_split(ds, fraction=validation["fraction"], seed=validation["seed"]).dataset
    if ds.fingerprint != dcard["fingerprint"]:
        raise ValueError(
            f"the {dcard['name']!r} data on this machine differ from the data the checkpoint was trained on "
            f"(fingerprint {ds.fingerprint[:12]}… != {dcard['fingerprint'][:12]}…)"
        )
    return ds


def embedder_architecture(ds: Dataset, recipe: EmbedderRecipe) -> Architecture:
    """The β-VAE architecture a recipe describes for a dataset."""
    return Architecture(
        "beta_vae",
        {
            "image_shape": list(ds.image_shape),
            "latent_dim": recipe.latent_dim,
            "arch": recipe.arch,
            "width": recipe.width,
            "hidden": recipe.hidden,
        },
    )


def shift_images(x: torch.Tensor, shift: int, generator: torch.Generator) -> torch.Tensor:
    """Each image of ``x`` (N, C, H, W) translated by its own uniform integer offsets in
    [−``shift``, ``shift``] along rows and columns, vacated pixels set to 0 (the offsets are drawn
    from ``generator`` on the CPU)."""
    n, _, h, w = x.shape
    s = int(shift)
    d = torch.randint(-s, s + 1, (2, n), generator=generator)
    padded = F.pad(x, (s, s, s, s)).permute(0, 2, 3, 1)  # (N, H+2s, W+2s, C)
    rows = torch.arange(h)[None, :] + s - d[0][:, None]  # (N, H): output row i reads row i − dy
    cols = torch.arange(w)[None, :] + s - d[1][:, None]
    out = padded[torch.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]  # (N, H, W, C)
    return out.permute(0, 3, 1, 2).contiguous()


def latent_neighbour_stats(
    z: torch.Tensor, y: torch.Tensor, *, max_points: int = 2000, seed: int = 0
) -> dict[str, float]:
    """ℓ∞ distances between training embeddings, to choose the neighbourhood radius R the way
    the paper did (App. E: "how far similar looking samples lie in the embedding space"):
    quantiles of the distance to the nearest same-class and nearest other-class neighbour."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(z.shape[0], generator=g)[:max_points]
    zz, yy = z[idx].double(), y[idx]
    d = torch.cdist(zz, zz, p=float("inf"))
    d.fill_diagonal_(float("inf"))
    same = yy[:, None] == yy[None, :]
    nn_same = torch.where(same, d, torch.full_like(d, float("inf"))).min(1).values
    nn_other = torch.where(~same, d, torch.full_like(d, float("inf"))).min(1).values
    q = lambda t, p: float(np.quantile(t[torch.isfinite(t)].numpy(), p))  # noqa: E731
    return {
        "nn_same_class_linf_median": q(nn_same, 0.5),
        "nn_same_class_linf_q90": q(nn_same, 0.9),
        "nn_other_class_linf_q05": q(nn_other, 0.05),
        "nn_other_class_linf_median": q(nn_other, 0.5),
        "n_points": int(zz.shape[0]),
    }


def train_embedder(
    ds: Dataset,
    recipe: EmbedderRecipe,
    *,
    out: str | os.PathLike[str],
    device: str | torch.device | None = "auto",
    seed: int = 0,
    progress: bool = True,
    resume: bool = True,
    command: str | None = None,
) -> dict[str, Any]:
    """Train a β-VAE (β·KL + Bernoulli reconstruction, Adam at a constant lr; App. E) on ``ds``
    and write the checkpoint ``out`` (``out.safetensors`` + ``out.json``). Returns the card.

    The card's metrics: test reconstruction (BCE per image) and KL, active latent dimensions,
    a 10-NN accuracy of test embeddings against training embeddings (how much class
    information z keeps), and neighbour-distance statistics for choosing R.
    """
    dev = resolve_device(device)
    gen = seed_everything(seed)
    full = ds
    if recipe.n_train is not None:
        ds = ds.subset(n_train=recipe.n_train, seed=seed)
    arch = embedder_architecture(ds, recipe)
    vae = build_module(arch).to(dev)
    assert isinstance(vae, BetaVAE)
    modules: dict[str, torch.nn.Module] = {"vae": vae}
    if recipe.label_weight > 0:
        # the label-aware (supervised) option: a linear head on μ, trained with the VAE, not saved
        modules["head"] = torch.nn.Linear(recipe.latent_dim, ds.num_classes).to(dev)
    opt = torch.optim.Adam([p for m in modules.values() for p in m.parameters()], lr=recipe.lr)
    run = ResumableRun(
        out,
        config={"recipe": {**recipe.to_json(), "epochs": None}, "seed": seed, "data": full.fingerprint},
        enabled=resume,
    )
    start, history = run.restore(modules, {"opt": opt}, gen)
    x, y = ds.x_train, ds.y_train
    t0 = time.perf_counter()
    bar = epoch_bar(recipe.epochs, desc=f"embedder {ds.name}", progress=progress, initial=start)
    for epoch in range(start, recipe.epochs):
        vae.train()
        tot = rec_t = kl_t = 0.0
        n_batches = -(-x.shape[0] // recipe.batch_size)
        for b, idx in enumerate(minibatches(x.shape[0], recipe.batch_size, gen)):
            xb = x[idx]
            if recipe.augment_shift:
                xb = shift_images(xb, recipe.augment_shift, gen)
            xb = xb.to(dev)
            logits, mu, logvar = vae(xb)
            ramp = (
                1.0
                if recipe.kl_warmup_epochs == 0
                else min(1.0, (epoch + b / n_batches) / recipe.kl_warmup_epochs)
            )
            loss, rec, kl = beta_vae_loss(logits, xb, mu, logvar, beta=recipe.beta * ramp)
            if recipe.label_weight > 0:
                loss = loss + recipe.label_weight * F.cross_entropy(modules["head"](mu), y[idx].to(dev))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            n = xb.shape[0]
            tot, rec_t, kl_t = tot + loss.item() * n, rec_t + rec.item() * n, kl_t + kl.item() * n
        n_all = x.shape[0]
        history.append({"epoch": epoch + 1, "loss": tot / n_all, "rec": rec_t / n_all, "kl": kl_t / n_all})
        run.save(epoch + 1, modules, {"opt": opt}, gen, history)
        bar.update(1)
        bar.set_postfix(loss=f"{tot / n_all:.2f}", kl=f"{kl_t / n_all:.2f}")
    bar.close()
    seconds = time.perf_counter() - t0
    metrics = evaluate_embedder(vae, full, device=dev, beta=recipe.beta)
    metrics["epochs_trained"] = len(history)
    metrics["history"] = history
    spec = get_spec(ds.name) if ds.name in _names() else None
    card = {
        "kind": "embedder",
        "name": os.path.basename(os.fspath(out)),
        "dataset": dataset_card(full),
        "radius": {"value": spec.radius, "note": spec.radius_note} if spec else None,
        "recipe": recipe.to_json(),
        "metrics": metrics,
        "seed": seed,
        "device": str(dev),
        "train_seconds": round(seconds, 1),
        "command": command,
    }
    written = save_checkpoint(out, modules={"vae": (arch, vae.cpu())}, card=card)
    run.finish()
    return written


def _names() -> tuple[str, ...]:
    from privcore.data import dataset_names

    return dataset_names()


@torch.no_grad()
def evaluate_embedder(vae: BetaVAE, ds: Dataset, *, device: torch.device, beta: float) -> dict[str, Any]:
    """Test-set ELBO parts, active dimensions, 10-NN accuracy in latent space, neighbour stats."""
    from sklearn.neighbors import KNeighborsClassifier

    vae.eval()
    mu_tr = batched_apply(lambda b: vae.encode(b)[0], ds.x_train, device=device)
    rec_sum = kl_sum = 0.0
    kl_dim = torch.zeros(vae.latent_dim, dtype=torch.float64)
    mus = []
    for i in range(0, ds.x_test.shape[0], 1000):
        xb = ds.x_test[i : i + 1000].to(device)
        mu, logvar = vae.encode(xb)
        _, rec, kl = beta_vae_loss(vae.decode_logits(mu), xb, mu, logvar, beta=beta)
        rec_sum += rec.item() * xb.shape[0]
        kl_sum += kl.item() * xb.shape[0]
        kl_dim += (-0.5 * (1 + logvar - mu.pow(2) - logvar.exp())).sum(0).double().cpu()
        mus.append(mu.cpu())
    mu_te = torch.cat(mus)
    n = ds.x_test.shape[0]
    knn = KNeighborsClassifier(n_neighbors=10).fit(mu_tr.numpy(), ds.y_train.numpy())
    return {
        "test_reconstruction_bce": rec_sum / n,
        "test_kl": kl_sum / n,
        "active_dims": int((kl_dim / n > 0.01).sum()),
        "kl_per_dim": [round(float(v), 4) for v in (kl_dim / n)],
        "latent_std_train": [round(float(v), 4) for v in mu_tr.std(0)],
        "knn10_test_accuracy": float(knn.score(mu_te.numpy(), ds.y_test.numpy())),
        "neighbours": latent_neighbour_stats(mu_tr, ds.y_train),
    }
