"""``experiment neighbours``: what the radius R protects, measured on the embedding.

The guarantee (ε, 0, R) covers every pair of inputs whose embeddings are within ℓ∞ distance R. Whether
that hides the *class* or only the *style within a class* depends on how far apart the classes lie in
the embedding. For the dataset's default model's embedder (and, where it differs, ARL-C-N's), every
test image's embedding z is compared with the **training** embeddings (the reference set: the images
the embedder and obfuscator were fitted on; test images are never compared with each other), in ℓ∞:

``other_class_within_r``
    share of test images with a training embedding of another class within R: only for these does
    the guarantee reach a different class (the neighbour relation spans the class boundary);
``nearest_within_r_same_class``
    share whose nearest training embedding lies within R and has the same class;
``any_within_r``, ``same_class_within_r``
    share with any (a same-class) training embedding within R;
``median_other_class_distance_over_r``
    median over test images of (ℓ∞ distance to the nearest other-class training embedding) / R.

Shares carry a 95 % Clopper–Pearson interval (:func:`scipy.stats.binomtest`), the median a 95 %
order-statistic interval (:func:`scipy.stats.quantile_test`). Deterministic: no noise, no seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from privcore.experiments.runner import RunContext, save_figure

__all__ = ["COLUMNS", "QUANTITIES", "NeighbourDistances", "embedder_models", "neighbour_distances",
           "neighbour_rows", "run"]

COLUMNS = ("dataset", "model", "embedder", "embedder_sha256", "reference", "n_reference", "radius",
           "quantity", "value", "low", "high", "k", "n")
KEY = ("embedder", "quantity")
QUANTITIES = ("other_class_within_r", "nearest_within_r_same_class", "any_within_r", "same_class_within_r",
              "median_other_class_distance_over_r")


@dataclass(frozen=True)
class NeighbourDistances:
    """Per query point: ℓ∞ distance to the nearest reference point of another class (``other``), of its
    own class (``same``), and whether the nearest reference point overall has its class
    (``nearest_same``; a tie between classes counts as another class)."""

    other: np.ndarray
    same: np.ndarray

    @property
    def nearest(self) -> np.ndarray:
        return np.minimum(self.other, self.same)

    @property
    def nearest_same(self) -> np.ndarray:
        return self.same < self.other


def neighbour_distances(z_query: Any, y_query: Any, z_ref: Any, y_ref: Any) -> NeighbourDistances:
    """ℓ∞ nearest-neighbour distances from each query point to the reference points of its own class
    and of the other classes (∞ when a class has no reference point)."""
    from scipy.spatial import cKDTree

    zq = np.asarray(z_query, dtype=np.float64).reshape(len(y_query), -1)
    zr = np.asarray(z_ref, dtype=np.float64).reshape(len(y_ref), -1)
    yq, yr = np.asarray(y_query).reshape(-1), np.asarray(y_ref).reshape(-1)
    other = np.full(yq.size, np.inf)
    same = np.full(yq.size, np.inf)
    for c in np.unique(yr):
        d, _ = cKDTree(zr[yr == c]).query(zq, k=1, p=np.inf)
        mine = yq == c
        same[mine] = d[mine]
        other[~mine] = np.minimum(other[~mine], d[~mine])
    return NeighbourDistances(other=other, same=same)


def _share(hits: np.ndarray) -> tuple[float, float, float, int, int]:
    from scipy.stats import binomtest

    k, n = int(np.sum(hits)), int(hits.size)
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return k / n, float(ci.low), float(ci.high), k, n


def neighbour_rows(dist: NeighbourDistances, radius: float) -> list[dict[str, Any]]:
    """The rows of :data:`QUANTITIES` for ``dist`` at radius R (value, 95 % interval, k, n)."""
    from scipy.stats import quantile_test

    r = float(radius)
    rows = []
    for name, hits in (("other_class_within_r", dist.other <= r),
                       ("nearest_within_r_same_class", (dist.nearest <= r) & dist.nearest_same),
                       ("any_within_r", dist.nearest <= r),
                       ("same_class_within_r", dist.same <= r)):
        value, low, high, k, n = _share(hits)
        rows.append({"quantity": name, "value": value, "low": low, "high": high, "k": k, "n": n})
    ratio = dist.other / r
    finite = ratio[np.isfinite(ratio)]
    med = float(np.median(finite)) if finite.size else float("nan")
    if finite.size >= 2:
        ci = quantile_test(finite, q=med, p=0.5).confidence_interval(confidence_level=0.95)
        low, high = float(ci.low), float(ci.high)
    else:
        low = high = med
    rows.append({"quantity": "median_other_class_distance_over_r", "value": med, "low": low, "high": high,
                 "k": None, "n": int(finite.size)})
    return rows


def embedder_models(ctx: RunContext) -> list[str]:
    """The default model, then ARL-C-N when its embedder differs (one model per distinct embedder)."""
    from privcore.defaults import default_model

    names = {m.name: m for m in ctx.model_infos() if m.kind == "obfuscator"}
    out: list[str] = []
    seen: set[str] = set()
    for v in dict.fromkeys((default_model(ctx.dataset), "ARL-C-N")):
        info = names.get(v)
        if info is None:
            continue
        sha = str(info.card["embedder"]["sha256"])
        if sha not in seen:
            seen.add(sha)
            out.append(v)
    if not out:
        raise FileNotFoundError(f"no obfuscator checkpoint of {ctx.dataset} (default model or ARL-C-N)")
    return out


def embedder_of(pipe: Any) -> tuple[str, str]:
    """(name, sha256) of the embedder ``pipe``'s obfuscator card was trained on."""
    block = pipe.cards["obfuscator"]["embedder"]
    return str(block["file"]).rsplit(".", 1)[0], str(block["sha256"])


def run(ctx: RunContext) -> Any:
    """Shares of test images with another class (the same class) within R, per embedder."""
    from privcore.data import load_dataset
    from privcore.experiments.ptr_common import embed

    models = embedder_models(ctx)
    ds = load_dataset(ctx.dataset)
    n_test = ctx.n_test(full=None, quick=1000, tiny=60)
    k = ds.x_test.shape[0] if n_test is None else min(n_test, ds.x_test.shape[0])
    config = {"models": models, "n_test": k, "reference": "training"}
    table = ctx.table("neighbours", columns=COLUMNS, key=KEY, config=config)
    with ctx.progress("neighbours") as progress:
        for i, model in enumerate(models):
            progress(i, len(models), model)
            pipe = ctx.pipeline(model)
            name, sha = embedder_of(pipe)
            if all(table.done(embedder=name, quantity=q) for q in QUANTITIES):
                continue
            z_ref, y_ref = embed(pipe, ds.x_train), ds.y_train.numpy()
            # a seeded sample in quick modes: splits may be ordered by class
            idx = np.arange(ds.x_test.shape[0])
            if k < idx.size:
                idx = np.sort(np.random.default_rng(ctx.seed).permutation(idx.size)[:k])
            z, y = embed(pipe, ds.x_test[idx]), ds.y_test[idx].numpy()
            dist = neighbour_distances(z, y, z_ref, y_ref)
            for row in neighbour_rows(dist, pipe.radius):
                table.add({"dataset": ctx.dataset, "model": model, "embedder": name, "embedder_sha256": sha,
                           "reference": "training", "n_reference": int(y_ref.size), "radius": pipe.radius,
                           **row})
        progress(len(models), len(models), "")
    frame = table.frame()
    return table.finish(figures=save_figure(_figure(frame, ctx.dataset), ctx.dataset_dir / "neighbours"))


def _figure(frame: Any, dataset: str) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    shares = frame[frame["quantity"] != "median_other_class_distance_over_r"]
    for name, part in shares.groupby("embedder", sort=False):
        fig.add_trace(go.Bar(
            x=part["quantity"], y=part["value"], name=f"{name} (R = {part['radius'].iloc[0]:g})",
            error_y={"type": "data", "symmetric": False, "array": part["high"] - part["value"],
                     "arrayminus": part["value"] - part["low"]},
        ))
    n = int(shares["n"].iloc[0]) if len(shares) else 0
    fig.update_yaxes(title_text=f"share of test images (n = {n}, 95 % Clopper–Pearson)", range=[0, 1])
    fig.update_layout(title=f"What R protects ({dataset}): training neighbours within ℓ∞ distance R",
                      template="plotly_white", height=430, barmode="group")
    return fig
