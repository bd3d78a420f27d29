"""Classifiers for the inference-privacy mechanisms (Tian et al., Sec. IV–V).

* ``cnn``: a standard CNN (torchvision ResNet-18 on CIFAR-10) trained on clean images, plus a
  copy fine-tuned on Gauss-Input noise x + N(0, σ²I) at the target privacy level ("optimally
  tuned ResNet-18", Sec. V), σ from :class:`privcore.mechanisms.GaussInput` (training noise is not
  a release, so plain ``torch.randn`` draws it).
* ``lipschitz-l1`` / ``lipschitz-l2``: Lipschitz MLPs on pixels whose certified global ℓ1→ℓ1 /
  ℓ2→ℓ2 constant (every layer, the last included) calibrates Lap-Output / Gauss-Output; the card
  stores the constants, recomputed from the weights by :func:`privcore.models.pipeline.load_ip_models`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from privcore.data import Dataset
from privcore.nets.checkpoint import Architecture, build_module, save_checkpoint
from privcore.train.common import (
    ResumableRun,
    batched_apply,
    epoch_bar,
    minibatches,
    resolve_device,
    seed_everything,
)
from privcore.train.embedder import dataset_card
from privcore.train.recipes import IPRecipe
from privcore.train.release_aware import laplace_release_noise

__all__ = ["gauss_input_sigma", "ip_architecture", "train_ip_classifier"]

IP_DELTA = 1e-5


def gauss_input_sigma(*, epsilon: float, delta: float, alpha: float) -> tuple[float, str]:
    """(σ, calibration) of Gauss-Input at (ε, δ, α) from :class:`privcore.mechanisms.GaussInput`."""
    from privcore.mechanisms import GaussInput

    mech = GaussInput(epsilon=epsilon, delta=delta, alpha=alpha)
    return float(mech.sigma), str(mech.calibration)


def ip_architecture(ds: Dataset, recipe: IPRecipe) -> Architecture:
    """The architecture of an IP classifier recipe on a dataset."""
    if recipe.model == "cnn":
        if ds.name == "cifar10":
            return Architecture(
                "cifar_resnet18", {"num_classes": ds.num_classes, "in_channels": ds.image_shape[0]}
            )
        return Architecture(
            "small_cnn",
            {"image_shape": list(ds.image_shape), "num_classes": ds.num_classes, "width": recipe.width},
        )
    return Architecture(
        "lipschitz_classifier",
        {
            "image_shape": list(ds.image_shape),
            "num_classes": ds.num_classes,
            "norm": recipe.model.split("-")[1],
            "hidden": list(recipe.hidden),
            "bound": recipe.bound,
        },
    )


def _fit(
    model: nn.Module,
    ds: Dataset,
    *,
    epochs: int,
    start: int,
    recipe: IPRecipe,
    gen: torch.Generator,
    dev: torch.device,
    sigma: float,
    temperature: float,
    run: ResumableRun,
    opt: torch.optim.Optimizer,
    history: list[dict[str, float]],
    desc: str,
    progress: bool,
) -> None:
    bar = epoch_bar(epochs, desc=desc, progress=progress, initial=start)
    x, y = ds.x_train, ds.y_train
    for epoch in range(start, epochs):
        model.train()
        tot = 0.0
        for idx in minibatches(x.shape[0], recipe.batch_size, gen):
            xb, yb = x[idx].to(dev), y[idx].to(dev)
            if sigma > 0:
                xb = xb + sigma * torch.randn(xb.shape, generator=gen).to(dev)
            loss = F.cross_entropy(temperature * model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += loss.item() * len(idx)
        history.append({"epoch": epoch + 1, "loss": tot / x.shape[0], "sigma": sigma})
        run.save(epoch + 1, {"model": model}, {"opt": opt}, gen, history)
        bar.update(1)
        bar.set_postfix(loss=f"{tot / x.shape[0]:.3f}")
    bar.close()


@torch.no_grad()
def _accuracy(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    dev: torch.device,
    *,
    input_sigma: float = 0.0,
    output_noise: Any = None,
    seed: int = 0,
) -> float:
    g = torch.Generator().manual_seed(seed)
    xin = x + input_sigma * torch.randn(x.shape, generator=g) if input_sigma > 0 else x
    out = batched_apply(model, xin, device=dev)
    if output_noise is not None:
        out = out + output_noise(out.shape, g)
    return float((out.argmax(1) == y).float().mean())


def _card(
    kind_name: str,
    ds: Dataset,
    recipe: IPRecipe,
    extra: dict[str, Any],
    seed: int,
    dev: torch.device,
    seconds: float,
    command: str | None,
) -> dict[str, Any]:
    return {
        "kind": "ip-classifier",
        "name": kind_name,
        "dataset": dataset_card(ds),
        "recipe": recipe.to_json(),
        **extra,
        "seed": seed,
        "device": str(dev),
        "train_seconds": round(seconds, 1),
        "command": command,
    }


def train_ip_classifier(
    ds: Dataset,
    recipe: IPRecipe,
    *,
    out_dir: str | os.PathLike[str],
    device: str | torch.device | None = "auto",
    seed: int = 0,
    progress: bool = True,
    resume: bool = True,
    command: str | None = None,
) -> list[dict[str, Any]]:
    """Train one IP classifier recipe on ``ds``; writes ``ip-cnn`` and ``ip-cnn-gauss-input``
    (when ``finetune_epochs`` > 0) or ``ip-lipschitz-l1`` / ``ip-lipschitz-l2`` into ``out_dir``.
    Returns the cards written."""
    dev = resolve_device(device)
    out_dir = Path(out_dir)
    train_ds = ds.subset(n_train=recipe.n_train, seed=seed) if recipe.n_train else ds
    gen = seed_everything(seed)
    arch = ip_architecture(ds, recipe)
    model = build_module(arch).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=recipe.lr)
    cards: list[dict[str, Any]] = []
    name = "ip-cnn" if recipe.model == "cnn" else f"ip-{recipe.model}"
    temperature = 1.0 if recipe.model == "cnn" else recipe.temperature
    cfg = {"recipe": recipe.to_json(), "seed": seed, "data": ds.fingerprint}
    run = ResumableRun(out_dir / name, config=cfg, enabled=resume)
    start, history = run.restore({"model": model}, {"opt": opt}, gen)
    t0 = time.perf_counter()
    _fit(
        model,
        train_ds,
        epochs=recipe.epochs,
        start=start,
        recipe=recipe,
        gen=gen,
        dev=dev,
        sigma=0.0,
        temperature=temperature,
        run=run,
        opt=opt,
        history=history,
        desc=f"{name} {ds.name}",
        progress=progress,
    )
    seconds = time.perf_counter() - t0
    model.eval()
    metrics: dict[str, Any] = {
        "test_accuracy": _accuracy(model, ds.x_test, ds.y_test, dev),
        "history": history,
    }
    extra: dict[str, Any] = {
        "metrics": metrics,
        "input": "pixels in [0, 1], no normalisation outside the model",
    }
    if recipe.model != "cnn":
        assert hasattr(model, "lipschitz_bound")
        mu1, mu2 = float(model.lipschitz_bound(1)), float(model.lipschitz_bound(2))
        extra["lipschitz"] = {
            "native_norm": recipe.model.split("-")[1],
            "l1": mu1,
            "l2": mu2,
            "definition": "certified global bound, ℓp→ℓp on flattened pixels, every layer, the last included",
        }
        metrics["mechanism_accuracy"] = _output_mechanism_accuracy(
            model, ds, dev, mu1=mu1, mu2=mu2, seed=seed
        )
    else:
        metrics["mechanism_accuracy"] = _input_mechanism_accuracy(model, ds, dev, seed=seed)
    cards.append(
        save_checkpoint(
            out_dir / name,
            modules={"model": (arch, model.cpu())},
            card=_card(name, ds, recipe, extra, seed, dev, seconds, command),
        )
    )
    run.finish()

    if recipe.model == "cnn" and recipe.finetune_epochs > 0:
        sigma, calibration = gauss_input_sigma(
            epsilon=recipe.target_epsilon, delta=recipe.target_delta, alpha=recipe.target_alpha
        )
        model = model.to(dev)
        for p in model.parameters():
            p.requires_grad_(True)
        opt = torch.optim.Adam(model.parameters(), lr=recipe.lr * 0.5)
        tname = "ip-cnn-gauss-input"
        run = ResumableRun(out_dir / tname, config={**cfg, "finetune": True}, enabled=resume)
        start, history = run.restore({"model": model}, {"opt": opt}, gen)
        t0 = time.perf_counter()
        _fit(
            model,
            train_ds,
            epochs=recipe.finetune_epochs,
            start=start,
            recipe=recipe,
            gen=gen,
            dev=dev,
            sigma=sigma,
            temperature=1.0,
            run=run,
            opt=opt,
            history=history,
            desc=f"{tname} {ds.name}",
            progress=progress,
        )
        seconds = time.perf_counter() - t0
        model.eval()
        metrics = {
            "test_accuracy": _accuracy(model, ds.x_test, ds.y_test, dev),
            "history": history,
            "mechanism_accuracy": _input_mechanism_accuracy(model, ds, dev, seed=seed),
        }
        extra = {
            "metrics": metrics,
            "input": "pixels in [0, 1], no normalisation outside the model",
            "finetune": {
                "mechanism": "Gauss-Input",
                "epsilon": recipe.target_epsilon,
                "delta": recipe.target_delta,
                "alpha": recipe.target_alpha,
                "sigma": sigma,
                "calibration": calibration,
                "from": f"{name}.safetensors",
            },
        }
        cards.append(
            save_checkpoint(
                out_dir / tname,
                modules={"model": (arch, model.cpu())},
                card=_card(tname, ds, recipe, extra, seed, dev, seconds, command),
            )
        )
        run.finish()
    return cards


_EVAL_GRID = ((1.0, 0.01), (1.0, 0.1), (10.0, 0.1))


def _input_mechanism_accuracy(
    model: nn.Module, ds: Dataset, dev: torch.device, *, seed: int
) -> dict[str, float]:
    out = {}
    for eps, alpha in _EVAL_GRID:
        sigma, _ = gauss_input_sigma(epsilon=eps, delta=IP_DELTA, alpha=alpha)
        out[f"gauss-input eps={eps:g} alpha={alpha:g}"] = _accuracy(
            model, ds.x_test, ds.y_test, dev, input_sigma=sigma, seed=seed
        )
    return out


def _output_mechanism_accuracy(
    model: nn.Module, ds: Dataset, dev: torch.device, *, mu1: float, mu2: float, seed: int
) -> dict[str, float]:
    from privcore.mechanisms import GaussOutput

    out = {}
    for eps, alpha in _EVAL_GRID:
        s2 = float(GaussOutput(epsilon=eps, delta=IP_DELTA, alpha=alpha, lipschitz=mu2).sigma)
        out[f"gauss-output eps={eps:g} alpha={alpha:g}"] = _accuracy(
            model,
            ds.x_test,
            ds.y_test,
            dev,
            seed=seed,
            output_noise=lambda shape, g, s=s2: s * torch.randn(shape, generator=g),
        )
        b = mu1 * alpha / eps
        out[f"lap-output eps={eps:g} alpha={alpha:g}"] = _accuracy(
            model,
            ds.x_test,
            ds.y_test,
            dev,
            seed=seed,
            output_noise=lambda shape, g, b=b: laplace_release_noise(shape, b, generator=g),
        )
    return out
