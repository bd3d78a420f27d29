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

import itertools
import math
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from privcore.nets.checkpoint import (
    Architecture,
    Checkpoint,
    CheckpointWarning,
    build_module,
    card_path,
    load_checkpoint,
    read_card,
    save_checkpoint,
    update_card,
)
from privcore.nets.models import NoiseAwareClassifier, ToldScale
from privcore.nets.registry import code_fingerprint
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

__all__ = [
    "CLEAN_NOISE_FRACTION",
    "EVAL_EPSILONS",
    "TOLD_SCALE_LEVELS_PER_DECADE",
    "TOLD_SCALE_Z",
    "ObfuscatedData",
    "calibrate_told_scale",
    "load_obfuscated_data",
    "recalibrate_told_scale",
    "train_release_classifier",
    "trained_scale_range",
]

#: ε values at which the card records test accuracy under release noise (plus ε = ∞).
EVAL_EPSILONS: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0)
#: Told scales per decade at which :func:`calibrate_told_scale` measures the training accuracy.
TOLD_SCALE_LEVELS_PER_DECADE = 100
#: A rise of the noise-free training accuracy from one told scale to a larger one is corrected when it
#: exceeds this many standard errors of the paired difference (McNemar: (n01 − n10)/√(n01 + n10)).
TOLD_SCALE_Z = 2.0
#: Below the trained scales, a told b whose Laplace noise has standard deviation √2·b at most this
#: fraction of the smallest spread σ_j is read as no noise (the features differ from b = 0's by < 3 %).
CLEAN_NOISE_FRACTION = 0.25


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
    if recipe.low_scale_fraction > 0.0:  # the scales between 0 and the range
        below = lo - recipe.low_scale_decades * math.log(10.0) * torch.rand(n, generator=gen)
        low = torch.rand(n, generator=gen) < recipe.low_scale_fraction
        inv_eps = torch.where(low, torch.exp(below), inv_eps)
    return torch.where(clean, torch.zeros(n), data.delta_p * data.radius * inv_eps)


def trained_scale_range(delta_p: float, radius: float, recipe: Any) -> tuple[float, float]:
    """The smallest and largest nonzero Laplace scale a classifier with ``recipe`` (a
    :class:`ReleaseClassifierRecipe` or a card's ``recipe`` block) was trained on at Δp, R."""
    rec = recipe.to_json() if isinstance(recipe, ReleaseClassifierRecipe) else dict(recipe)
    lo, hi = (float(v) for v in rec["inv_epsilon_range"])
    if float(rec.get("low_scale_fraction", 0.0)) > 0.0:
        lo *= 10.0 ** -float(rec["low_scale_decades"])
    return delta_p * radius * lo, delta_p * radius * hi


@torch.no_grad()
def calibrate_told_scale(
    clf: NoiseAwareClassifier,
    z_tilde: torch.Tensor,
    y: torch.Tensor,
    *,
    min_scale: float,
    max_scale: float,
    levels_per_decade: int = TOLD_SCALE_LEVELS_PER_DECADE,
    z_score: float = TOLD_SCALE_Z,
    clean_noise_fraction: float = CLEAN_NOISE_FRACTION,
    device: torch.device | str = "cpu",
) -> ToldScale:
    """The :class:`~privcore.nets.models.ToldScale` of ``clf``, from its predictions on the
    noise-free training outputs ``z_tilde`` (labels ``y``) told each of a log grid of scales over
    the trained range [``min_scale``, ``max_scale``] (``levels_per_decade``, ends included).

    From the largest scale down, a grid scale is kept unless some kept larger scale is right on
    significantly more of these points (paired: n01 − n10 > ``z_score``·√(n01 + n10)); told scales
    between two kept ones that are not neighbours on the grid are read as the larger (so the
    noise-free accuracy is non-increasing along what is read, up to ``z_score``). Below
    ``min_scale``, told scales up to ``clean_noise_fraction``·σ_min/√2 are read as 0. Uses only
    training data, which the service holds (the classifier's own), never test data.
    """
    dev = torch.device(device)
    lo, hi = check_positive("min_scale", min_scale), check_positive("max_scale", max_scale)
    n_levels = max(2, math.ceil(math.log10(hi / lo) * levels_per_decade) + 1)
    levels = torch.logspace(math.log10(lo), math.log10(hi), n_levels, dtype=torch.float64).tolist()
    levels[0], levels[-1] = lo, hi
    yy = y.long().cpu()
    right = torch.stack(
        [batched_apply(lambda t, b=b: clf.logits(t, b).argmax(-1), z_tilde, device=dev) == yy for b in levels]
    )
    kept = [n_levels - 1]
    for k in range(n_levels - 2, -1, -1):
        above = right[kept]
        n01 = (above & ~right[k]).sum(1).double()
        n10 = (~above & right[k]).sum(1).double()
        if not bool(((n01 - n10) > z_score * torch.sqrt(n01 + n10)).any()):
            kept.append(k)
    kept.sort()
    clean_below = min(clean_noise_fraction * float(clf.std.min()) / math.sqrt(2.0), lo)
    raised = [(levels[a], levels[c]) for a, c in itertools.pairwise(kept) if c - a > 1]
    if kept[0] > 0:  # the smallest trained scale is itself read as the first kept one
        raised.insert(0, (clean_below, levels[kept[0]]))
    return ToldScale(min_scale=lo, max_scale=hi, clean_below=clean_below, raised=tuple(raised))


def _told_scale_card(ts: ToldScale, n: int, command: str | None) -> dict[str, Any]:
    return {
        **ts.to_json(),
        "levels_per_decade": TOLD_SCALE_LEVELS_PER_DECADE,
        "z": TOLD_SCALE_Z,
        "clean_noise_fraction": CLEAN_NOISE_FRACTION,
        "n": n,
        "source": "noise-free outputs f(g(x)) of the classifier's training split (no test data)",
        "is": "the map from the told Laplace scale to the one the features use (architecture kwargs "
        "told_scale; privcore.nets.models.ToldScale)",
        "command": command,
    }


def recalibrate_told_scale(
    classifier_ckpt: str | os.PathLike[str],
    *,
    device: str | torch.device | None = "cpu",
    command: str | None = None,
) -> dict[str, Any]:
    """Calibrate the told-scale map of a fitted release classifier (weights untouched) and record
    it in its card: the architecture's ``told_scale`` kwargs, the current code fingerprint, and a
    ``told_scale`` block saying how. Returns the updated card.

    For classifiers fitted before the map existed; :func:`train_release_classifier` calibrates its
    own. Predictions at b = 0 and at every told scale that the map keeps are unchanged."""
    dev = resolve_device(device)
    card = read_card(classifier_ckpt)
    if card["kind"] != "release-classifier":
        raise ValueError(f"{card_path(classifier_ckpt)} is a {card['kind']!r} card, not a release classifier")
    arch_json = card["architecture"]["classifier"]
    kwargs = {k: v for k, v in arch_json["kwargs"].items() if k != "told_scale"}
    with warnings.catch_warnings():  # the card predates the map: its code fingerprint is the old one
        warnings.simplefilter("ignore", CheckpointWarning)
        ck = load_checkpoint(classifier_ckpt, kind="release-classifier")
    clf = ck["classifier"].to(dev)
    clf.told_scale = None
    data = load_obfuscated_data(
        Path(classifier_ckpt).with_name(card["obfuscator"]["file"]).with_suffix(""),
        delta_p=card["release_noise"]["delta_p"],
        radius=card["release_noise"]["radius"],
        device=dev,
    )
    if data.obfuscator.card["weights"]["sha256"] != card["obfuscator"]["sha256"]:
        raise ValueError(f"{card_path(classifier_ckpt)} was fitted on another obfuscator")
    lo, hi = trained_scale_range(data.delta_p, data.radius, card["recipe"])
    ts = calibrate_told_scale(
        clf, data.z_tilde_train, data.dataset.y_train, min_scale=lo, max_scale=hi, device=dev
    )
    new_kwargs = {**kwargs, "told_scale": ts.to_json()}
    build_module(Architecture(arch_json["type"], new_kwargs))  # refuse a card it could not rebuild
    arch = {**card["architecture"], "classifier": {**arch_json, "kwargs": new_kwargs}}
    fingerprints = {**card["code_fingerprint"], arch_json["type"]: code_fingerprint(arch_json["type"])}
    return update_card(
        classifier_ckpt,
        {
            "architecture": arch,
            "code_fingerprint": fingerprints,
            "told_scale": _told_scale_card(ts, int(data.z_tilde_train.shape[0]), command),
        },
    )


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
            loss = F.cross_entropy(clf.logits(v.to(dev), b.to(dev)), y_tr[idx].to(dev))
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
    lo, hi = trained_scale_range(data.delta_p, data.radius, recipe)
    clf.told_scale = calibrate_told_scale(clf, zt_tr, y_tr, min_scale=lo, max_scale=hi, device=dev)
    arch = Architecture(arch.type, {**arch.kwargs, "told_scale": clf.told_scale.to_json()})
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
        "told_scale": _told_scale_card(clf.told_scale, int(zt_tr.shape[0]), command),
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
