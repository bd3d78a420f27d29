"""Stage ii of the posthoc-PTR pipeline (Sec. 4–5, App. E): train an obfuscator f on the
frozen embedder's latent means together with its task classifier h and proxy adversary a.

ARL min-max (the adversarial representation learning of Table 1): every step,
h minimises CE(h(z̃ + n), y) and a minimises MSE(a(z̃), x) on the detached z̃ = f(z); then f
minimises ``(1 − α)·CE(h(f(z) + n), y) − α·MSE(a(f(z)), x) + λ·C(f(z), y)``. Optional warm-up
epochs train f with α = 0 first (a task-trained start for the game). The authors' public code
added α·MSE up to abc903c (training f to help the adversary; 66a8d35 subtracts it) and
applies C to z computed under no_grad (no gradient reaches f); this module follows the
paper's loss instead. After the joint phase, h is refitted for
a few epochs on the final, frozen f so that the shipped classifier matches the shipped f.

The noise n of the "N" variants is the paper's Lap(σ = 0.01) with ``noise_mode="paper"``, or by
default the release noise itself, Δ̂·R/ε·Lap(1) with Δ̂ the batch's μ + 3σ of ‖J_f‖∞→1 over the
R-ball, differentiable in f (:mod:`privcore.train.release_aware`; see the recipe for the extra
release-rate and contrastive-unit terms of that mode).

With ``recipe.select_on_validation`` (the authors'-code twin, :mod:`privcore.train.authors`) f and h
are those of the epoch with the best noise-free validation accuracy; the test set is read only by
the final evaluation.
"""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from privcore.data import Dataset, get_spec
from privcore.nets.checkpoint import Architecture, build_module, load_checkpoint, save_checkpoint
from privcore.nets.groupsort import bake, construction_bound, maxmin_relu_mlp, relu_form_widths
from privcore.train.common import (
    ResumableRun,
    batched_apply,
    epoch_bar,
    minibatches,
    resolve_device,
    seed_everything,
)
from privcore.train.embedder import dataset_card
from privcore.train.losses import contrastive_loss
from privcore.train.recipes import ObfuscatorRecipe
from privcore.train.release_aware import (
    ball_jacobian_norms,
    box_jacobian_norms,
    delta_hat,
    layer_bound,
    release_noise,
    spread_penalty,
    standard_laplace,
)

__all__ = ["obfuscator_architectures", "train_obfuscator"]


def obfuscator_architectures(
    ds: Dataset, recipe: ObfuscatorRecipe, latent_dim: int
) -> dict[str, Architecture]:
    """Architectures of the obfuscator, classifier and proxy adversary a recipe describes."""
    widths = [latent_dim, *recipe.obfuscator_hidden, recipe.out_dim]
    if recipe.obfuscator_activation == "maxmin":  # saved in its ReLU form (privcore.nets.groupsort)
        widths = relu_form_widths(widths)
    archs = {
        "obfuscator": Architecture("relu_mlp", {"widths": widths}),
        "classifier": Architecture(
            "relu_mlp", {"widths": [recipe.out_dim, *recipe.classifier_hidden, ds.num_classes]}
        ),
    }
    if recipe.adversary == "image":
        archs["adversary"] = Architecture(
            "proxy_image_adversary",
            {
                "in_dim": recipe.out_dim,
                "image_shape": list(ds.image_shape),
                "arch": "mlp",
                "hidden": recipe.adversary_hidden,
            },
        )
    else:
        archs["adversary"] = Architecture(
            "latent_adversary", {"in_dim": recipe.out_dim, "out_dim": latent_dim}
        )
    return archs


def _build(archs: dict[str, Architecture], key: str, recipe: ObfuscatorRecipe, latent_dim: int) -> nn.Module:
    """The module ``key`` of ``archs``; a MaxMin obfuscator is trained through its free GroupSort
    weights (:func:`~privcore.nets.groupsort.maxmin_relu_mlp`) and saved baked, as ``archs`` says."""
    if key == "obfuscator" and recipe.obfuscator_activation == "maxmin":
        return maxmin_relu_mlp([latent_dim, *recipe.obfuscator_hidden, recipe.out_dim],
                               linf=recipe.noise_bound == "construction")
    return build_module(archs[key])


def _noisy(z: torch.Tensor, sigma: float, on: bool) -> torch.Tensor:
    if not on:
        return z
    # Laplace(0, σ) i.i.d. (the release noise's family); training noise, not a release.
    return z + sigma * standard_laplace(z.shape, dtype=z.dtype, device=z.device)


class _Regulariser:
    """The "N" noise of a recipe applied to z̃ = f(z) before the classifier: the paper's
    Lap(σ), the release-aware Δ̂·R/ε·Lap(1), or the global-aware Ĝ·R/ε·Lap(1)
    (:mod:`privcore.train.release_aware`)."""

    def __init__(self, recipe: ObfuscatorRecipe, radius: float, generator: torch.Generator,
                 box: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        self.recipe, self.radius, self.gen = recipe, radius, generator
        self.release = recipe.noise and recipe.noise_mode in ("release", "global")
        self.global_aware = recipe.noise and recipe.noise_mode == "global"
        self.box = box if self.global_aware and recipe.noise_box_samples else None

    def scale(self, norms: torch.Tensor) -> torch.Tensor:
        """The sensitivity the training noise is calibrated to: Δ̂ = μ + nσ of the batch's norms
        (PTR's Δp rule), or their maximum Ĝ for the global mechanism."""
        return norms.amax() if self.global_aware else delta_hat(norms, n_sigma=self.recipe.noise_n_sigma)

    def norms(self, f: nn.Module, z: torch.Tensor) -> torch.Tensor:
        """Per-sample ‖J_f‖∞→1 estimates over the R-ball (differentiable in f), followed in global mode
        with ``noise_box_samples`` by the norms at that many points of the public box; with
        ``noise_bound="layers"`` the layer-wise upper bound instead, one value for every point."""
        if self.recipe.noise_bound == "layers":  # one bound for every point: no sampling
            return layer_bound(f)
        if self.recipe.noise_bound == "construction":  # the normalised GroupSort weights' product
            return construction_bound(f)
        n_ball = self.recipe.noise_ball_samples
        norms = ball_jacobian_norms(f, z, self.radius, n_ball=n_ball, generator=self.gen)
        if self.box is None:
            return norms
        # the global mechanism's G bounds the whole public box, not only the data's balls
        lower, upper = self.box
        return torch.cat([norms, box_jacobian_norms(f, lower, upper, n=self.recipe.noise_box_samples,
                                                    generator=self.gen)])

    def __call__(self, zt: torch.Tensor, norms: torch.Tensor | None) -> torch.Tensor:
        """Noisy z̃ for the classifier (``norms`` only used in release mode)."""
        if not self.release:
            return _noisy(zt, self.recipe.sigma, self.recipe.noise)
        assert norms is not None
        return release_noise(
            zt,
            self.scale(norms),
            self.radius,
            epsilons=self.recipe.noise_epsilons,
            clean_fraction=self.recipe.noise_clean_fraction,
            generator=self.gen,
        )


def _f_step(f: nn.Module, h: nn.Module, a: nn.Module, z: torch.Tensor, y: torch.Tensor, t: torch.Tensor,
            opt_f: Any, *, reg: Any, recipe: ObfuscatorRecipe, alpha: float, rho: float, lam: float,
            radius: float, gen: torch.Generator, sums: dict[str, float], epoch: int) -> None:
    """One step of f: task utility against the adversary (weight ``alpha``), the release-aware terms
    (spread ``rho``, the excess over the release margin) and the contrastive regulariser ``lam``; the
    running ``sums`` of the logged terms are updated."""
    # f: task utility against the adversary, plus the contrastive regulariser
    zt = f(z)
    norms = reg.norms(f, z) if reg.release else None
    zn = reg(zt, norms) if recipe.noise_on_f else zt
    loss = (1.0 - alpha) * F.cross_entropy(h(zn), y)
    if norms is not None:
        dh_now = float(reg.scale(norms.detach()))
        sums["delta_hat"] += dh_now * len(z)
        if rho > 0:
            spread = spread_penalty(norms)
            loss = loss + rho * spread
            sums["spread"] += spread.item() * len(z)
    if alpha > 0:  # arl_sign −1: f fights the adversary; +1 (abc903c's code): f helps it
        loss = loss + recipe.arl_sign * alpha * F.mse_loss(a(zt), t)
    if (norms is not None and not reg.global_aware and recipe.release_weight > 0
            and recipe.release_radius_factor > 0):
        big = ball_jacobian_norms(
            f,
            z,
            recipe.release_radius_factor * radius,
            n_ball=recipe.release_samples,
            generator=gen,
        )
        dh = delta_hat(norms, n_sigma=recipe.noise_n_sigma).clamp_min(1e-6)
        excess = torch.relu(big / dh - (1.0 - recipe.release_margin))
        loss = loss + recipe.release_weight * excess.mean()
    if lam > 0:
        zc = zt
        if norms is not None and recipe.contrastive_units == "release":
            # distances in units of the smallest training release-noise scale Δ̂·R/max ε
            unit = reg.scale(norms).clamp_min(1e-6) * radius
            zc = zt * (max(recipe.noise_epsilons) / unit)
        if recipe.contrastive_grad:
            con = contrastive_loss(zc, y, margin=recipe.margin)
        else:  # the authors' code: C on f's input z under no_grad (a constant for f)
            with torch.no_grad():
                con = contrastive_loss(z, y, margin=recipe.margin)
        loss = loss + lam * con
        sums["contrastive"] += con.item() * len(z)
    if not torch.isfinite(loss):
        raise FloatingPointError(
            f"obfuscator {recipe.name}: the loss became {float(loss)} in epoch {epoch + 1} "
            "(lower lr or the regulariser weights); nothing was saved"
        )
    opt_f.zero_grad(set_to_none=True)
    loss.backward()
    opt_f.step()


def train_obfuscator(
    ds: Dataset,
    recipe: ObfuscatorRecipe,
    *,
    embedder: str | os.PathLike[str],
    out: str | os.PathLike[str],
    device: str | torch.device | None = "auto",
    seed: int = 0,
    progress: bool = True,
    resume: bool = True,
    keep_adversary: bool = False,
    command: str | None = None,
) -> dict[str, Any]:
    """Train one obfuscator variant on the latent means of the embedder checkpoint ``embedder``
    and write checkpoint ``out`` (obfuscator + classifier, and the proxy adversary when
    ``keep_adversary``). Returns the card (Δp statistics are added later by
    :func:`privcore.train.delta_p.compute_delta_p`)."""
    dev = resolve_device(device)
    emb_ck = load_checkpoint(embedder, kind="embedder", dataset=ds.name)
    if emb_ck.card["dataset"]["fingerprint"] != ds.fingerprint:
        raise ValueError(
            f"embedder {embedder} was trained on different {ds.name!r} data (fingerprint mismatch)"
        )
    vae = emb_ck["vae"].to(dev)
    latent_dim = int(emb_ck.card["architecture"]["vae"]["kwargs"]["latent_dim"])
    x_fit, y_tr, val = ds.x_train, ds.y_train, None
    if recipe.select_on_validation:
        from privcore.data.split import VALIDATION_FRACTION, validation_split

        split = validation_split(ds, fraction=VALIDATION_FRACTION, seed=0)
        x_fit, y_tr = split.dataset.x_train, split.dataset.y_train
        val = _Selection(batched_apply(lambda b: vae.encode(b)[0], split.x_val, device=dev), split.y_val,
                         recipe.patience, split.record())
    z_tr = batched_apply(lambda b: vae.encode(b)[0], x_fit, device=dev)
    target_tr = x_fit if recipe.adversary == "image" else z_tr

    gen = seed_everything(seed)
    archs = obfuscator_architectures(ds, recipe, latent_dim)
    f, h, a = (_build(archs, k, recipe, latent_dim).to(dev)
               for k in ("obfuscator", "classifier", "adversary"))
    opt_f = torch.optim.Adam(f.parameters(), lr=recipe.lr)
    opt_h = torch.optim.Adam(h.parameters(), lr=recipe.lr)
    opt_a = torch.optim.Adam(a.parameters(), lr=recipe.adversary_lr or recipe.lr)
    mods: dict[str, nn.Module] = {"f": f, "h": h, "a": a}
    opts = {"f": opt_f, "h": opt_h, "a": opt_a}
    warm, joint_end = recipe.warmup_epochs, recipe.warmup_epochs + recipe.epochs
    total_epochs = joint_end + recipe.classifier_refit_epochs
    run = ResumableRun(
        out,
        enabled=resume and val is None,  # the best-so-far state is not in the resume file
        config={
            "recipe": recipe.to_json(),
            "seed": seed,
            "data": ds.fingerprint,
            "embedder": emb_ck.card["weights"]["sha256"],
        },
    )
    start, history = run.restore(mods, opts, gen)
    alpha, lam = recipe.alpha, (recipe.lam if recipe.contrastive else 0.0)
    spec = get_spec(ds.name)
    box = None
    if recipe.noise and recipe.noise_mode == "global" and recipe.noise_box_samples:
        from privcore.lipschitz.global_box import ClipBox
        from privcore.train.global_card import DEFAULT_MARGIN

        # the box the global mechanism will clip to (the training embeddings' range plus its margin)
        clip = ClipBox.from_points(z_tr.double().cpu().numpy(), margin=DEFAULT_MARGIN)
        box = (torch.as_tensor(clip.lower, dtype=z_tr.dtype, device=dev),
               torch.as_tensor(clip.upper, dtype=z_tr.dtype, device=dev))
    reg = _Regulariser(recipe, spec.radius, gen, box)
    rho = recipe.spread_weight if reg.release else 0.0
    t0 = time.perf_counter()
    bar = epoch_bar(
        total_epochs, desc=f"obfuscator {recipe.name} {ds.name}", progress=progress, initial=start
    )
    for epoch in range(start, total_epochs):
        phase = "warmup" if epoch < warm else "joint" if epoch < joint_end else "classifier-refit"
        train_f = phase != "classifier-refit"
        if val is not None and (val.stopped or not train_f):
            if val.stopped and train_f:
                continue  # early-stopped: skip to the refit on the selected f
            val.restore(mods)
        alpha_now = alpha if phase == "joint" else 0.0
        f.train(), h.train(), a.train()
        sums = {"ce": 0.0, "adv_mse": 0.0, "contrastive": 0.0, "delta_hat": 0.0, "spread": 0.0}
        n_seen = 0
        for idx in minibatches(z_tr.shape[0], recipe.batch_size, gen):
            z, y, t = z_tr[idx].to(dev), y_tr[idx].to(dev), target_tr[idx].to(dev)
            with torch.no_grad():
                zt = f(z)
                norms = reg.norms(f, z) if reg.release else None
            # h and a: best responses to the current f (on detached z̃)
            ce = F.cross_entropy(h(reg(zt, norms)), y)
            if not torch.isfinite(ce):
                raise FloatingPointError(
                    f"obfuscator {recipe.name}: the classifier loss became {float(ce)} in epoch {epoch + 1}; "
                    "nothing was saved"
                )
            opt_h.zero_grad(set_to_none=True)
            ce.backward()
            opt_h.step()
            if train_f:
                adv = F.mse_loss(a(zt), t)
                opt_a.zero_grad(set_to_none=True)
                adv.backward()
                opt_a.step()
                sums["adv_mse"] += adv.item() * len(idx)
                _f_step(f, h, a, z, y, t, opt_f, reg=reg, recipe=recipe, alpha=alpha_now, rho=rho, lam=lam,
                        radius=spec.radius, gen=gen, sums=sums, epoch=epoch)
            sums["ce"] += ce.item() * len(idx)
            n_seen += len(idx)
        row = {"epoch": epoch + 1, "phase": phase, **{k: v / n_seen for k, v in sums.items()}}
        if val is not None and train_f:
            row["validation_accuracy"] = val.update(epoch + 1, mods, dev)
        history.append(row)
        run.save(epoch + 1, mods, opts, gen, history)
        bar.update(1)
        bar.set_postfix(ce=f"{row['ce']:.3f}", adv=f"{row['adv_mse']:.4f}")
    bar.close()
    if val is not None and recipe.classifier_refit_epochs == 0:
        val.restore(mods)
    seconds = time.perf_counter() - t0
    metrics = _evaluate(f, h, a, vae, z_tr, y_tr, ds, recipe, dev)
    metrics["history"] = history
    card = {
        "kind": "obfuscator",
        "name": recipe.name,
        "variant": recipe.variant,
        "dataset": dataset_card(ds),
        "embedder": {"file": Path(emb_ck.path).name, "sha256": emb_ck.card["weights"]["sha256"]},
        "radius": {"value": spec.radius, "note": spec.radius_note, "input_norm": "linf", "output_norm": "l1"},
        "recipe": recipe.to_json(),
        "loss": recipe.loss_terms(),
        "metrics": metrics,
        "delta_p": None,
        "seed": seed,
        "device": str(dev),
        "train_seconds": round(seconds, 1),
        "command": command,
    }
    if val is not None:
        card["selection"] = val.card()
    if recipe.authors_code:
        from privcore.train.authors import authors_code

        card["authors_code"] = {**authors_code(recipe.authors_commit),
                                "note": "authors'-code twin of ARL-C-N (docs/RESULTS.md)"}
    modules = {"obfuscator": (archs["obfuscator"], bake(f.cpu())),  # MaxMin: its plain ReLU form
               "classifier": (archs["classifier"], h.cpu())}
    if keep_adversary:
        modules["adversary"] = (archs["adversary"], a.cpu())
    written = save_checkpoint(out, modules=modules, card=card)
    run.finish()
    return written


class _Selection:
    """Checkpoint selection on the validation split: keeps the state of f and h of the epoch with
    the best noise-free accuracy h(f(z_val)) and counts the epochs since (early stopping)."""

    def __init__(
        self, z_val: torch.Tensor, y_val: torch.Tensor, patience: int, split: dict[str, Any]
    ) -> None:
        self.z_val, self.y_val, self.patience, self.split = z_val, y_val, patience, split
        self.best, self.epoch, self.last, self.state = -1.0, 0, 0, {}
        self.stopped = False

    @torch.no_grad()
    def update(self, epoch: int, mods: dict[str, nn.Module], dev: torch.device) -> float:
        """Score epoch ``epoch``; keep f and h when it is the best so far (ties: the earlier)."""
        f, h = mods["f"], mods["h"]
        f.eval(), h.eval()
        pred = batched_apply(lambda b: h(f(b)), self.z_val, device=dev).argmax(1).cpu()
        acc = float((pred == self.y_val).float().mean())
        self.last = epoch
        if acc > self.best:
            self.best, self.epoch = acc, epoch
            self.state = {k: copy.deepcopy(mods[k].state_dict()) for k in ("f", "h")}
        elif self.patience and epoch - self.epoch >= self.patience:
            self.stopped = True
        return acc

    def restore(self, mods: dict[str, nn.Module]) -> None:
        """Load the selected epoch's f and h (once)."""
        for k, sd in self.state.items():
            mods[k].load_state_dict(sd)
        self.state = {}

    def card(self) -> dict[str, Any]:
        """What the card records: criterion, split, chosen epoch and its accuracy, stopping."""
        return {
            "criterion": "max noise-free validation accuracy of h(f(z)) after each training epoch",
            "validation_split": {k: v for k, v in self.split.items() if k != "fit_fingerprint"},
            "epoch": self.epoch,
            "validation_accuracy": self.best,
            "epochs_run": self.last,
            "patience": self.patience or None,
            "early_stopped": self.stopped,
        }


@torch.no_grad()
def _evaluate(
    f: nn.Module,
    h: nn.Module,
    a: nn.Module,
    vae: nn.Module,
    z_tr: torch.Tensor,
    y_tr: torch.Tensor,
    ds: Dataset,
    recipe: ObfuscatorRecipe,
    dev: torch.device,
) -> dict[str, Any]:
    """Card metrics of the trained f and h: the only place where the test set is read."""
    f.eval(), h.eval(), a.eval()
    z_te, y_te = batched_apply(lambda b: vae.encode(b)[0], ds.x_test, device=dev), ds.y_test
    zt_tr = batched_apply(f, z_tr, device=dev)
    zt_te = batched_apply(f, z_te, device=dev)
    acc_tr = float((batched_apply(h, zt_tr, device=dev).argmax(1) == y_tr).float().mean())
    acc_te = float((batched_apply(h, zt_te, device=dev).argmax(1) == y_te).float().mean())
    target_te = ds.x_test if recipe.adversary == "image" else z_te
    adv = batched_apply(a, zt_te, device=dev)
    g = torch.Generator().manual_seed(0)
    sub = z_tr[torch.randperm(z_tr.shape[0], generator=g)[:2000]].to(dev)
    norms = ball_jacobian_norms(f, sub, get_spec(ds.name).radius, n_ball=16, generator=g).double().cpu()
    return {
        "train_accuracy": acc_tr,
        "test_accuracy": acc_te,
        "proxy_adversary_test_mse": float(F.mse_loss(adv, target_te)),
        "proxy_adversary_target": recipe.adversary,
        "z_tilde_train_std": [round(float(v), 4) for v in zt_tr.std(0)],
        "z_tilde_train_linf_mean": float(zt_tr.abs().amax(1).mean()),
        # sampled (lower-bound) estimate of the local ∞→1 constants at R on 2000 training points:
        # a training diagnostic only; the shipped Δp comes from the exact certifier (delta_p.py)
        "sampled_linf_l1_at_radius": {
            "mean": float(norms.mean()),
            "std": float(norms.std()),
            "mean_plus_3std": float(norms.mean() + 3 * norms.std()),
        },
    }
