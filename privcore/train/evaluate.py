"""Test-set evaluation of shipped pipelines (``python -m privcore evaluate``).

For each obfuscator: the noise-free (ε = ∞) accuracy of classifier(f(g(x))) on the dataset's
test set (Table 1's "Informal" / ε = ∞ column), and the accuracy when every test point is
released with the PTR release noise Lap(Δp·R/ε) i.i.d. per coordinate, *ignoring* PTR's test
(no ⊥): an upper bound on what the full mechanism's released points can reach, not Table 1's
numbers (those come from :mod:`privcore.experiments`, which runs the full PTR). For IP
classifiers: clean test accuracy.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import torch

from privcore.errors import CheckpointError
from privcore.models.pipeline import default_models_dir, list_models, load_ip_models, load_pipeline
from privcore.train.common import batched_apply
from privcore.train.embedder import dataset_from_card
from privcore.train.release_aware import laplace_release_noise

__all__ = ["evaluate_dataset", "evaluate_obfuscator"]


@torch.no_grad()
def evaluate_obfuscator(
    dataset: str,
    obfuscator: str,
    *,
    epsilons: Sequence[float] = (1.0, 2.0, 5.0, 10.0),
    models_dir: str | os.PathLike[str] | None = None,
    device: str | torch.device | None = None,
    seed: int = 0,
    data: Any = None,
) -> dict[str, Any]:
    """ε = ∞ test accuracy of one pipeline and its accuracy under release noise at ``epsilons``."""
    pipe = load_pipeline(dataset, obfuscator, models_dir=models_dir, device=device)
    dcard = pipe.cards["obfuscator"]["dataset"]
    ds = data if data is not None and data.fingerprint == dcard["fingerprint"] else dataset_from_card(dcard)
    zt = batched_apply(lambda b: pipe.obfuscate(pipe.embed(b)), ds.x_test, device=pipe.device)

    def acc(v: torch.Tensor, scale: float = 0.0) -> float:
        logits = batched_apply(lambda t: pipe.classify(t, scale), v, device=pipe.device)
        return float((logits.argmax(1) == ds.y_test).float().mean())

    out: dict[str, Any] = {
        "dataset": dataset,
        "obfuscator": obfuscator,
        "n_test": int(ds.x_test.shape[0]),
        "accuracy_eps_inf": acc(zt),
        "classifier": pipe.classifier_source,
        "radius": pipe.radius,
    }
    if pipe.delta_p is not None:
        g = torch.Generator().manual_seed(seed)
        dp = pipe.delta_p.proposed
        out["delta_p"] = dp
        out["noise_only_accuracy"] = {
            f"{e:g}": acc(
                zt + laplace_release_noise(zt.shape, dp * pipe.radius / e, generator=g), dp * pipe.radius / e
            )
            for e in epsilons
            if math.isfinite(e)
        }
    return out


def evaluate_dataset(
    dataset: str,
    *,
    obfuscators: Sequence[str] | None = None,
    epsilons: Sequence[float] = (1.0, 2.0, 5.0, 10.0),
    models_dir: str | os.PathLike[str] | None = None,
    device: str | torch.device | None = None,
    include_ip: bool = True,
    seed: int = 0,
) -> dict[str, Any]:
    """Evaluate every shipped obfuscator (or those named) and IP classifier of ``dataset``."""
    infos = [m for m in list_models(models_dir) if m.dataset == dataset]
    if not infos:
        raise CheckpointError(
            f"no models for dataset {dataset!r} in {models_dir or default_models_dir()}; "
            f"train them with `python -m privcore train all --dataset {dataset}`"
        )
    names = list(obfuscators) if obfuscators else [m.name for m in infos if m.kind == "obfuscator"]
    cache: dict[str, Any] = {}

    def data(dcard: dict[str, Any]) -> Any:
        if dcard["fingerprint"] not in cache:
            cache[dcard["fingerprint"]] = dataset_from_card(dcard)
        return cache[dcard["fingerprint"]]

    res: dict[str, Any] = {"dataset": dataset, "obfuscators": [], "ip": []}
    for m in infos:
        if m.kind == "obfuscator" and m.name in names:
            r = evaluate_obfuscator(
                dataset,
                m.name,
                epsilons=epsilons,
                models_dir=models_dir,
                device=device,
                seed=seed,
                data=data(m.card["dataset"]),
            )
            res["obfuscators"].append(r)
    missing = sorted(set(names) - {r["obfuscator"] for r in res["obfuscators"]})
    if missing:
        raise CheckpointError(f"no obfuscator {', '.join(missing)} for {dataset!r} in the models directory")
    if include_ip and any(m.kind == "ip-classifier" for m in infos):
        ip = load_ip_models(dataset, models_dir=models_dir, device=device)
        for name, model in ip.models.items():
            ds = data(model.card["dataset"])
            logits = batched_apply(model.model, ds.x_test, device=next(model.model.parameters()).device)
            acc = float((logits.argmax(1) == ds.y_test).float().mean())
            res["ip"].append(
                {
                    "name": name,
                    "accuracy": acc,
                    "lipschitz": dict(model.lipschitz) if model.lipschitz else None,
                }
            )
    return res
