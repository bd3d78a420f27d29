"""Training the reconstruction attacker (posthoc-PTR paper, Sec. 6 and Tables 3–6).

Training data: for each training image x, the release f(g(x)) + Lap(Δp·R/ε) i.i.d. per
coordinate (the PTR release noise, docs/DESIGN.md; plain torch sampling, since training data is not
a release) at ε drawn from a few values, mixed with noise-free f(g(x)) so the same attacker also
shows what an informal (ε = ∞) obfuscation leaks. The attacker
(:class:`privcore.nets.attacker.ReconstructionAttacker`) never sees ε: it is the
strongest single decoder for that mixture, as the paper's "ML model to reconstruct original
images" from released encodings.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import torch
import torch.nn.functional as F

from privcore.attacks.metrics import ssim
from privcore.nets.checkpoint import Architecture, build_module, save_checkpoint
from privcore.train.common import (
    ResumableRun,
    batched_apply,
    epoch_bar,
    minibatches,
    resolve_device,
    seed_everything,
)
from privcore.train.recipes import attacker_recipe
from privcore.train.release_aware import laplace_release_noise
from privcore.train.release_classifier import load_obfuscated_data
from privcore.validation import check_epsilon

__all__ = ["train_reconstruction_attacker"]


def train_reconstruction_attacker(
    obfuscator_ckpt: str | os.PathLike[str],
    *,
    out: str | os.PathLike[str],
    recipe: Any = None,
    delta_p: float | None = None,
    radius: float | None = None,
    device: str | torch.device | None = "auto",
    seed: int = 0,
    progress: bool = True,
    resume: bool = True,
    command: str | None = None,
) -> dict[str, Any]:
    """Train a :class:`ReconstructionAttacker` against the obfuscator checkpoint
    ``obfuscator_ckpt`` (its embedder is found beside it) and write checkpoint ``out``.

    ``delta_p`` and ``radius`` default to the obfuscator card's proposed Δp and R; the release
    noise scale at privacy level ε is Δp·R/ε per coordinate. Returns the card, whose metrics
    hold test MSE and SSIM of reconstructions at every training ε and at ε = ∞.
    """
    dev = resolve_device(device)
    data = load_obfuscated_data(obfuscator_ckpt, delta_p=delta_p, radius=radius, device=dev)
    obf, ds, delta_p, radius = data.obfuscator, data.dataset, data.delta_p, data.radius
    name = ds.name
    recipe = recipe if recipe is not None else attacker_recipe(name)
    epsilons = [check_epsilon(e, "epsilons[i]") for e in recipe.epsilons]
    zt_tr, zt_te = data.z_tilde_train, data.z_tilde_test
    scales = torch.tensor([delta_p * radius / e for e in epsilons], dtype=torch.float32)

    gen = seed_everything(seed)
    arch = Architecture(
        "reconstruction_attacker",
        {
            "in_dim": int(zt_tr.shape[1]),
            "image_shape": list(ds.image_shape),
            "arch": recipe.arch,
            "width": recipe.width,
            "hidden": recipe.hidden,
        },
    )
    att = build_module(arch).to(dev)
    opt = torch.optim.Adam(att.parameters(), lr=recipe.lr)
    run = ResumableRun(
        out,
        enabled=resume,
        config={
            "recipe": {**recipe.to_json(), "epochs": None},
            "seed": seed,
            "delta_p": delta_p,
            "radius": radius,
            "obf": obf.card["weights"]["sha256"],
        },
    )
    start, history = run.restore({"att": att}, {"opt": opt}, gen)
    t0 = time.perf_counter()
    bar = epoch_bar(
        recipe.epochs, desc=f"attacker {obf.card['name']} {name}", progress=progress, initial=start
    )
    for epoch in range(start, recipe.epochs):
        att.train()
        tot = 0.0
        for idx in minibatches(zt_tr.shape[0], recipe.batch_size, gen):
            zt, x = zt_tr[idx], ds.x_train[idx]
            pick = torch.randint(len(epsilons), (len(idx), 1), generator=gen)
            noise = laplace_release_noise(zt.shape, scales[pick], generator=gen)
            clean = torch.rand(len(idx), 1, generator=gen) < recipe.clean_fraction
            release = torch.where(clean, zt, zt + noise)
            loss = F.mse_loss(att(release.to(dev)), x.to(dev))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += loss.item() * len(idx)
        history.append({"epoch": epoch + 1, "mse": tot / zt_tr.shape[0]})
        run.save(epoch + 1, {"att": att}, {"opt": opt}, gen, history)
        bar.update(1)
        bar.set_postfix(mse=f"{tot / zt_tr.shape[0]:.4f}")
    bar.close()
    seconds = time.perf_counter() - t0
    att.eval()
    metrics: dict[str, Any] = {"history": history, "test": {}}
    eval_gen = torch.Generator().manual_seed(seed + 1)
    for eps in [*epsilons, math.inf]:
        noise = (
            0.0
            if math.isinf(eps)
            else laplace_release_noise(zt_te.shape, delta_p * radius / eps, generator=eval_gen)
        )
        rec = batched_apply(att, zt_te + noise, device=dev)
        metrics["test"]["inf" if math.isinf(eps) else f"{eps:g}"] = _recon_metrics(rec, ds.x_test)
    card = {
        **data.card_fields("attacker", "attacker"),
        "release_noise": {
            "delta_p": delta_p,
            "radius": radius,
            "scale": "delta_p*radius/epsilon",
            "epsilons": epsilons,
            "clean_fraction": recipe.clean_fraction,
        },
        "recipe": recipe.to_json(),
        "metrics": metrics,
        "seed": seed,
        "device": str(dev),
        "train_seconds": round(seconds, 1),
        "command": command,
    }
    written = save_checkpoint(out, modules={"attacker": (arch, att.cpu())}, card=card)
    run.finish()
    return written


@torch.no_grad()
def _recon_metrics(rec: torch.Tensor, x: torch.Tensor) -> dict[str, float]:
    out = {"mse": float(F.mse_loss(rec, x)), "l1": float((rec - x).abs().mean())}
    n = min(2000, x.shape[0])
    out["ssim"] = float(torch.as_tensor(ssim(rec[:n], x[:n])).float().mean())
    return out
