"""Training the scale-told reconstruction attacker (posthoc-PTR paper, Sec. 6 and Tables 3–6, told the
noise scale as the release classifier is).

One attacker per posthoc model attacks every mechanism that releases that model's embedding: the
certified global mechanism (f(clip z) + Lap(b)), Global-Gauss (f(clip z) + N(0, σ²), told b = σ/√2,
the Laplace scale of the same variance) and PTR (f(z) + Lap(b)). Training data, per training image and
step: b log-uniform over the trained range (below), a share ``clean_fraction`` at b = 0, Gaussian noise
for a share ``gaussian_fraction`` and the clipped embedding for a share ``clipped_fraction``; the
attacker (:class:`privcore.nets.attacker.ScaleToldAttacker`) is told b and the noise kind. Plain torch
sampling: training data is not a release.

The trained range of b is the part of the product's range (ε and R over their whole ranges, G and 2Δp
of the card) where the release carries some signal and some noise: from 10⁻³ to 10² times the
noise-free outputs' RMS spread. Below it the noise is under 0.1 % of the signal (read like b = 0's
neighbours); above it the signal is under 1 % of the noise and the attacker reads b as the largest
trained scale (its reconstruction is then the mean it learned there).

Choices on the validation split (:func:`privcore.data.validation_split`: MNIST's fixed 1 000 images,
otherwise a seeded 10 % of the training set): the hidden width among ``recipe.hiddens`` and the epoch
(checked every ``eval_every`` epochs), by the mean validation MSE over the global mechanism's noise
at total ε ∈ :data:`VALIDATION_EPSILONS` and no noise. The test split is not read.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from privcore.nets.checkpoint import Architecture, build_module, save_checkpoint
from privcore.ranges import EPSILON_RANGE, RADIUS_RANGE
from privcore.train.common import batched_apply, minibatches, seed_everything

__all__ = ["VALIDATION_EPSILONS", "ToldAttackerRecipe", "told_attacker_recipe", "train_told_attacker"]

#: total ε of the global mechanism at which validation scores a candidate (and ∞: no noise)
VALIDATION_EPSILONS = (1.0, 2.0, 4.0, 10.0, 20.0)


@dataclass(frozen=True, kw_only=True)
class ToldAttackerRecipe:
    """Hyperparameters; ``hiddens`` are the candidate widths, ``epochs`` the most epochs, both chosen on
    validation (module docstring)."""

    hiddens: tuple[int, ...] = (256, 512)
    epochs: int = 10
    eval_every: int = 2
    batch_size: int = 128
    lr: float = 1e-3
    clean_fraction: float = 0.1
    gaussian_fraction: float = 0.5
    clipped_fraction: float = 0.5
    span_below: float = 1e-3
    span_above: float = 1e2
    arch: str = "mlp"

    def to_json(self) -> dict[str, Any]:
        """The recipe as recorded in the card."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}


def told_attacker_recipe(dataset: str, *, epochs: int | None = None,
                         hiddens: tuple[int, ...] | None = None) -> ToldAttackerRecipe:
    """The recipe for ``dataset``: small training sets (MNIST's 3 000) get more epochs."""
    small = dataset in ("mnist", "digits")
    base = ToldAttackerRecipe(epochs=60, eval_every=5) if small else ToldAttackerRecipe()
    out = base if epochs is None else ToldAttackerRecipe(**{**asdict(base), "epochs": int(epochs)})
    if hiddens is not None:
        out = ToldAttackerRecipe(**{**asdict(out), "hiddens": tuple(int(h) for h in hiddens)})
    return out


def _product_scales(card: dict[str, Any]) -> tuple[float, float]:
    """The smallest and largest Laplace(-equivalent) scale the product's ranges give this model, from the
    card's G and Δp (a training range only: no privacy decision reads it)."""
    consts = [float(card["delta_p"]["proposed"]) * 2.0]  # PTR runs at ε/2
    g = (card.get("global_lipschitz") or {}).get("value")
    if g:
        consts.append(float(g))
    return min(consts) * RADIUS_RANGE[0] / EPSILON_RANGE[1], max(consts) * RADIUS_RANGE[1] / EPSILON_RANGE[0]


def _clip(z: torch.Tensor, card: dict[str, Any]) -> torch.Tensor:
    box = (card.get("global_lipschitz") or {}).get("clip_box")
    if not box:
        return z
    lo = torch.tensor(box["lower"], dtype=z.dtype)
    hi = torch.tensor(box["upper"], dtype=z.dtype)
    return torch.clamp(z, lo, hi)


@dataclass(frozen=True, kw_only=True)
class _Data:
    out_train: torch.Tensor
    clip_train: torch.Tensor
    x_train: torch.Tensor
    clip_val: torch.Tensor
    x_val: torch.Tensor


def _noisy(out: torch.Tensor, clip: torch.Tensor, recipe: ToldAttackerRecipe, span: tuple[float, float],
           gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = out.shape[0]
    lo, hi = math.log(span[0]), math.log(span[1])
    b = torch.exp(lo + (hi - lo) * torch.rand(n, 1, generator=gen))
    b = torch.where(torch.rand(n, 1, generator=gen) < recipe.clean_fraction, torch.zeros_like(b), b)
    gauss = (torch.rand(n, 1, generator=gen) < recipe.gaussian_fraction).float()
    u = torch.rand(out.shape, generator=gen) - 0.5
    laplace = -torch.sign(u) * torch.log1p(-2.0 * u.abs())  # Lap(1) by the inverse CDF, seeded
    normal = torch.randn(out.shape, generator=gen) * math.sqrt(2.0)  # variance 2, as Lap(1)'s
    unit = torch.where(gauss.bool(), normal, laplace)
    base = torch.where(torch.rand(n, 1, generator=gen) < recipe.clipped_fraction, clip, out)
    return base + b * unit, b[:, 0], gauss[:, 0]


def _val_releases(data: _Data, scales: list[float], seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    outs = []
    for b in scales:
        u = torch.rand(data.clip_val.shape, generator=gen) - 0.5
        outs.append(data.clip_val - b * torch.sign(u) * torch.log1p(-2.0 * u.abs()))
    return outs


@torch.no_grad()
def _val_mse(att: torch.nn.Module, releases: list[torch.Tensor], scales: list[float],
             x: torch.Tensor) -> float:
    att.eval()
    errs = [float(F.mse_loss(att(v, b), x)) for v, b in zip(releases, scales, strict=True)]
    att.train()
    return sum(errs) / len(errs)


def _fit(data: _Data, hidden: int, recipe: ToldAttackerRecipe, span: tuple[float, float], seed: int,
         val: tuple[list[torch.Tensor], list[float]], shape: list[int]) -> tuple[Any, Architecture, dict]:
    gen = seed_everything(seed)
    arch = Architecture("scale_told_attacker", {
        "in_dim": int(data.out_train.shape[1]), "image_shape": shape, "max_scale": float(span[1]),
        "arch": recipe.arch, "hidden": int(hidden)})
    att = build_module(arch)
    att.fit_normalisation(data.out_train)
    opt = torch.optim.Adam(att.parameters(), lr=recipe.lr)
    best: tuple[float, int, dict] = (math.inf, 0, {})
    history = []
    for epoch in range(1, recipe.epochs + 1):
        for idx in minibatches(data.out_train.shape[0], recipe.batch_size, gen):
            v, b, g = _noisy(data.out_train[idx], data.clip_train[idx], recipe, span, gen)
            loss = F.mse_loss(att(v, b, g), data.x_train[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if epoch % recipe.eval_every == 0 or epoch == recipe.epochs:
            mse = _val_mse(att, val[0], val[1], data.x_val)
            history.append({"epoch": epoch, "validation_mse": mse})
            if mse < best[0]:
                best = (mse, epoch, copy.deepcopy(att.state_dict()))
    att.load_state_dict(best[2])
    att.eval()
    return att, arch, {"hidden": hidden, "epoch": best[1], "validation_mse": best[0], "history": history}


def train_told_attacker(dataset: str, model: str, *, models_dir: str | Path,
                        recipe: ToldAttackerRecipe | None = None, seed: int = 0,
                        command: str | None = None) -> dict[str, Any]:
    """Train ``attacker-told-<model>`` for ``dataset``/``model`` on the CPU and write it beside the model
    (module docstring); returns the card."""
    from privcore.attacks.metrics import image_metrics
    from privcore.data import load_dataset, validation_split
    from privcore.models.pipeline import load_pipeline
    from privcore.train.embedder import dataset_card

    recipe = recipe if recipe is not None else told_attacker_recipe(dataset)
    pipe = load_pipeline(dataset, model, models_dir=models_dir, device="cpu")
    obf_card = dict(pipe.cards["obfuscator"])
    ds = validation_split(load_dataset(dataset), fraction=0.1, seed=0).dataset
    emb = {k: batched_apply(pipe.embedder, x, device=torch.device("cpu")) for k, x in
           (("train", ds.x_train), ("val", ds.x_test))}
    f = pipe.obfuscator
    with torch.no_grad():
        data = _Data(out_train=f(emb["train"]), clip_train=f(_clip(emb["train"], obf_card)),
                     x_train=ds.x_train.float(), clip_val=f(_clip(emb["val"], obf_card)),
                     x_val=ds.x_test.float())
    rms = float(data.out_train.std(0).pow(2).mean().sqrt())
    product = _product_scales(obf_card)
    span = (max(product[0], recipe.span_below * rms), min(product[1], recipe.span_above * rms))
    g = float((obf_card.get("global_lipschitz") or {}).get("value") or 2.0 * pipe.delta_p.proposed)
    eps_val = [*VALIDATION_EPSILONS, math.inf]
    scales = [0.0 if math.isinf(e) else g * pipe.radius / e for e in eps_val]
    val = (_val_releases(data, scales, seed + 1), scales)
    t0 = time.perf_counter()
    fits = [_fit(data, h, recipe, span, seed, val, list(ds.image_shape)) for h in recipe.hiddens]
    seconds = time.perf_counter() - t0
    att, arch, chosen = min(fits, key=lambda t: t[2]["validation_mse"])
    validation = {}
    with torch.no_grad():
        for e, b, v in zip(eps_val, scales, val[0], strict=True):
            m = image_metrics(data.x_val, att(v, b)).summary()
            validation["inf" if math.isinf(e) else f"{e:g}"] = {
                "noise_scale": b, **{k: m[k] for k in ("ssim", "psnr", "l1", "l2")}}
    card = {
        "kind": "told-attacker",
        "name": f"attacker-told-{model}",
        "dataset": dataset_card(ds),
        "obfuscator": {"file": f"obfuscator-{model}.safetensors", "name": model,
                       "sha256": obf_card["weights"]["sha256"]},
        "embedder": obf_card["embedder"],
        "trained_scales": {"min": span[0], "max": span[1], "product_min": product[0],
                           "product_max": product[1],
                           "output_rms": rms, "rule": "b log-uniform in [max(product_min, 1e-3·rms), "
                           "min(product_max, 1e2·rms)]; told b = σ/√2 for Gaussian noise"},
        "recipe": recipe.to_json(),
        "selection": {"split": "validation", "n_validation": int(ds.x_test.shape[0]),
                      "criterion": "mean validation MSE over the global mechanism at total ε "
                                   f"{', '.join(f'{e:g}' for e in VALIDATION_EPSILONS)} and ∞ "
                                   "(card's G and R)",
                      "candidates": [t[2] for t in fits], "chosen": {k: chosen[k] for k in
                                                                   ("hidden", "epoch", "validation_mse")}},
        "metrics": {"validation": validation},
        "seed": seed,
        "device": "cpu",
        "train_seconds": round(seconds, 1),
        "command": command,
    }
    return save_checkpoint(Path(models_dir) / dataset / f"attacker-told-{model}",
                           modules={"attacker": (arch, att)}, card=card)
