"""The service's task classifier for posthoc-PTR releases, fitted after Δp is known.

The obfuscator's own classifier h is trained during the min-max game, before Δp exists, on one
mix of noise levels; at ε = ∞ (no noise) it then reads f(z) worse than a classifier fitted on
clean outputs would. This step freezes the embedder g and obfuscator f, takes the card's Δp
and R, and fits a :class:`~privcore.nets.models.NoiseAwareClassifier` on training releases
f(g(x)) + Lap(b) with b = Δp·R/ε drawn over a range of ε (and b = 0), telling the classifier b.

Privacy: b is public (fixed by Δp, R and ε before any query) and the training data are the
obfuscator's training data, which the posthoc threat model treats as known to the service, so the
classifier is post-processing of the release (posthoc paper, Sec. 4; the same knowledge the
reconstruction attacker uses). Training noise is plain seeded torch sampling: training data are
not a release.

The checkpoint ``classifier-<variant>`` sits beside ``obfuscator-<variant>`` and names the
obfuscator's weights by SHA-256, so it is refused if the obfuscator is retrained.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from privcore.nets.checkpoint import Architecture, Checkpoint, build_module, load_checkpoint, save_checkpoint
from privcore.train.common import (
    ResumableRun,
    batched_apply,
    epoch_bar,
    minibatches,
    resolve_device,
    seed_everything,
)
from privcore.train.embedder import dataset_card, dataset_from_card
from privcore.train.recipes import ReleaseClassifierRecipe, release_classifier_recipe
from privcore.train.release_aware import laplace_release_noise
from privcore.validation import check_positive

__all__ = ["EVAL_EPSILONS", "ObfuscatedData", "load_obfuscated_data", "train_release_classifier"]

#: ε values at which the card records test accuracy under release noise (plus ε = ∞).
EVAL_EPSILONS: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0)


@dataclass(frozen=True)
class ObfuscatedData:
    """An obfuscator checkpoint with its verified embedder, its training data and the noise-free
    outputs f(g(x)) of both splits (on the CPU), plus the Δp and R that calibrate its releases."""

    obfuscator: Checkpoint
    embedder: Checkpoint
    dataset: Any
    z_tilde_train: torch.Tensor
    z_tilde_test: torch.Tensor
    delta_p: float
    radius: float

    def scale(self, epsilon: float) -> float:
        """The release's Laplace scale Δp·R/ε per coordinate (0 at ε = ∞)."""
        return 0.0 if math.isinf(epsilon) else self.delta_p * self.radius / epsilon

    def card_fields(self, kind: str, prefix: str) -> dict[str, Any]:
        """Card fields of a model trained on this obfuscator's releases: kind, name
        ``<prefix>-<variant>``, dataset, and the obfuscator (by SHA-256) and embedder it belongs to."""
        obf = self.obfuscator
        return {
            "kind": kind,
            "name": f"{prefix}-{obf.card['name']}",
            "dataset": dataset_card(self.dataset),
            "obfuscator": {
                "file": Path(obf.path).name,
                "name": obf.card["name"],
                "sha256": obf.card["weights"]["sha256"],
            },
            "embedder": obf.card["embedder"],
        }


def load_obfuscated_data(
    obfuscator_ckpt: str | os.PathLike[str],
    *,
    delta_p: float | None = None,
    radius: float | None = None,
    device: torch.device | str | None = "auto",
) -> ObfuscatedData:
    """Load ``obfuscator_ckpt`` and the embedder beside it (checked by SHA-256), reload the data it
    was trained on (fingerprint checked) and compute f(g(x)) for both splits. ``delta_p`` and
    ``radius`` default to the card's proposed Δp and R (ValueError when Δp is not computed yet)."""
    dev = resolve_device(device)
    obf = load_checkpoint(obfuscator_ckpt, kind="obfuscator")
    name = obf.card["dataset"]["name"]
    emb = load_checkpoint(
        Path(obfuscator_ckpt).with_name(obf.card["embedder"]["file"]).with_suffix(""),
        kind="embedder",
        dataset=name,
    )
    if emb.card["weights"]["sha256"] != obf.card["embedder"]["sha256"]:
        raise ValueError(
            f"the embedder beside {obfuscator_ckpt} is not the one its obfuscator was trained on"
        )
    if delta_p is None:
        dp = obf.card.get("delta_p") or {}
        if "proposed" not in dp:
            raise ValueError(
                f"{obfuscator_ckpt} has no Δp statistics yet: run `python -m privcore train delta-p` "
                "first or pass delta_p="
            )
        delta_p = float(dp["proposed"])
    delta_p = check_positive("delta_p", delta_p)
    radius = check_positive("radius", radius if radius is not None else float(obf.card["radius"]["value"]))
    ds = dataset_from_card(obf.card["dataset"])
    g = emb["vae"].to(dev)
    f = obf["obfuscator"].to(dev)
    return ObfuscatedData(
        obfuscator=obf,
        embedder=emb,
        dataset=ds,
        z_tilde_train=batched_apply(lambda b: f(g.encode(b)[0]), ds.x_train, device=dev),
        z_tilde_test=batched_apply(lambda b: f(g.encode(b)[0]), ds.x_test, device=dev),
        delta_p=delta_p,
        radius=radius,
    )


def _sample_scales(
    n: int, data: ObfuscatedData, recipe: ReleaseClassifierRecipe, gen: torch.Generator
) -> torch.Tensor:
    lo, hi = (math.log(v) for v in recipe.inv_epsilon_range)
    inv_eps = torch.exp(lo + (hi - lo) * torch.rand(n, generator=gen))
    clean = torch.rand(n, generator=gen) < recipe.clean_fraction
    return torch.where(clean, torch.zeros(n), data.delta_p * data.radius * inv_eps)


@torch.no_grad()
def _accuracy(
    model: torch.nn.Module, data: ObfuscatedData, epsilon: float, gen: torch.Generator, dev: torch.device
) -> float:
    zt = data.z_tilde_test
    b = data.scale(epsilon)
    v = zt if b == 0.0 else zt + laplace_release_noise(zt.shape, b, generator=gen)
    logits = batched_apply(lambda t: model(t, b), v, device=dev)
    return float((logits.argmax(-1) == data.dataset.y_test).float().mean())


def train_release_classifier(
    obfuscator_ckpt: str | os.PathLike[str],
    *,
    out: str | os.PathLike[str],
    recipe: ReleaseClassifierRecipe | None = None,
    device: str | torch.device | None = "auto",
    seed: int = 0,
    progress: bool = True,
    resume: bool = True,
    command: str | None = None,
) -> dict[str, Any]:
    """Fit a noise-aware classifier on training releases of the frozen obfuscator ``obfuscator_ckpt``
    (Δp and R from its card) and write checkpoint ``out``. Shows a progress bar, resumes from
    ``<out>.resume.safetensors``; returns the card, whose metrics hold test accuracy at ε = ∞ and at
    :data:`EVAL_EPSILONS` (release noise only, no ⊥: the PTR test is not applied here)."""
    dev = resolve_device(device)
    data = load_obfuscated_data(obfuscator_ckpt, device=dev)
    obf, ds = data.obfuscator, data.dataset
    recipe = recipe if recipe is not None else release_classifier_recipe(ds.name)
    gen = seed_everything(seed)
    arch = Architecture(
        "noise_aware_classifier",
        {
            "in_dim": int(data.z_tilde_train.shape[1]),
            "num_classes": ds.num_classes,
            "hidden": list(recipe.hidden),
        },
    )
    clf = build_module(arch)
    clf.fit_normalisation(data.z_tilde_train)
    clf = clf.to(dev)
    opt = torch.optim.Adam(clf.parameters(), lr=recipe.lr)
    run = ResumableRun(
        out,
        enabled=resume,
        config={
            "recipe": {**recipe.to_json(), "epochs": None},
            "seed": seed,
            "delta_p": data.delta_p,
            "radius": data.radius,
            "obf": obf.card["weights"]["sha256"],
        },
    )
    start, history = run.restore({"clf": clf}, {"opt": opt}, gen)
    zt_tr, y_tr = data.z_tilde_train, ds.y_train.long()
    t0 = time.perf_counter()
    bar = epoch_bar(
        recipe.epochs, desc=f"classifier {obf.card['name']} {ds.name}", progress=progress, initial=start
    )
    for epoch in range(start, recipe.epochs):
        for group in opt.param_groups:
            group["lr"] = recipe.lr_at(epoch)
        clf.train()
        tot = 0.0
        for idx in minibatches(zt_tr.shape[0], recipe.batch_size, gen):
            b = _sample_scales(len(idx), data, recipe, gen)
            v = zt_tr[idx] + laplace_release_noise(zt_tr[idx].shape, b[:, None], generator=gen)
            loss = F.cross_entropy(clf(v.to(dev), b.to(dev)), y_tr[idx].to(dev))
            if not torch.isfinite(loss):
                raise FloatingPointError(
                    f"classifier {obf.card['name']}: loss became {float(loss)} in epoch {epoch + 1}"
                )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += loss.item() * len(idx)
        history.append({"epoch": epoch + 1, "loss": tot / zt_tr.shape[0]})
        run.save(epoch + 1, {"clf": clf}, {"opt": opt}, gen, history)
        bar.update(1)
        bar.set_postfix(loss=f"{tot / zt_tr.shape[0]:.4f}")
    bar.close()
    seconds = time.perf_counter() - t0
    clf.eval()
    eval_gen = torch.Generator().manual_seed(seed + 1)
    acc = {
        ("inf" if math.isinf(e) else f"{e:g}"): _accuracy(clf, data, e, eval_gen, dev)
        for e in (math.inf, *EVAL_EPSILONS)
    }
    card = {
        **data.card_fields("release-classifier", "classifier"),
        "release_noise": {
            "delta_p": data.delta_p,
            "radius": data.radius,
            "scale": "delta_p*radius/epsilon (0 = no noise)",
        },
        "recipe": recipe.to_json(),
        "metrics": {
            "history": history,
            "test_accuracy": acc["inf"],
            "test_accuracy_release_noise": {k: v for k, v in acc.items() if k != "inf"},
            "accuracy_is": "test set, one seeded draw of Lap(Δp·R/ε) per image, no PTR test (no ⊥)",
        },
        "seed": seed,
        "device": str(dev),
        "train_seconds": round(seconds, 1),
        "command": command,
    }
    written = save_checkpoint(out, modules={"classifier": (arch, clf.cpu())}, card=card)
    run.finish()
    return written
