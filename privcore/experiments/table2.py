"""``experiment table2``: posthoc paper Table 2 — local-DP baselines against the adversarial pipeline.

At ε ∈ {1, 2, 5, 7, ∞} on a seeded test subsample, the two baselines release each test image once
through the registry's mechanisms (:meth:`~privcore.mechanisms.protocol.Mechanism.release`, the
API's path, with the row's seeded generator):

* ``LDP-Image`` (:class:`~privcore.mechanisms.ldp.LDPImageRelease`): every pixel clipped to [0, 1]
  plus Lap(d/ε) (d pixels; ε-LDP for every pair of images), classified by the dataset's standard
  pixel classifier (the IP experiments' ``ip-cnn``) after clipping the noisy image back to [0, 1]
  (post-processing). ε = ∞: the clean image.
* ``LDP-Embedding`` (:class:`~privcore.mechanisms.ldp.LDPEmbeddingRelease`): the embedding z clipped
  to [−B, B]^k plus Lap(2Bk/ε) (ε-LDP for every pair), then the ARL-C-N obfuscator and classifier
  (post-processing). B is the 99th percentile of |z| over *training* embeddings (public,
  data-independent of the test points; :func:`~privcore.mechanisms.ldp.embedding_bound`).
* ``Adversarial``: ARL-C-N under extended PTR, exactly as ``table1`` ((2ε, δ/2, R)-private; a
  different, weaker notion than ε-LDP, which is why the paper calls this comparison indicative).

``accuracy_refit`` (LDP-Embedding and Adversarial): the classifier fine-tuned on training-image
releases at that ε (post-processing; :func:`~privcore.experiments.ptr_common.refit_classifier`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from privcore.experiments.ptr_common import embed, refit_classifier, refit_plan, test_indices
from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.seeds import row_seed
from privcore.experiments.table1 import ptr_accuracy_rows
from privcore.mechanisms.protocol import Options

__all__ = ["COLUMNS", "EPSILONS", "run"]

COLUMNS = (
    "dataset",
    "method",
    "epsilon",
    "guarantee",
    "accuracy",
    "accuracy_refit",
    "release_rate",
    "noise_scale",
    "n_test",
    "seed",
)
KEY = ("method", "epsilon")
EPSILONS = (1.0, 2.0, 5.0, 7.0)
OBFUSCATOR = "ARL-C-N"


class _AdversarialRows:
    """Adapter: table1's row writer adds Table-1 columns; keep the Table-2 ones."""

    def __init__(self, table: Any, dataset: str) -> None:
        self.table, self.dataset = table, dataset

    def done(self, *, epsilon: float, method: str) -> bool:
        return self.table.done(method=method, epsilon=epsilon)

    def add(self, row: dict[str, Any]) -> None:
        inf = math.isinf(row["epsilon"])
        self.table.add(
            {
                "dataset": self.dataset,
                "method": "Adversarial",
                "epsilon": row["epsilon"],
                "guarantee": "none (informal)" if inf else "(2eps, delta/2, R)-neighbourhood",
                "accuracy": row["accuracy"],
                "accuracy_refit": row["accuracy_refit"],
                "release_rate": row["release_rate"],
                "noise_scale": row["noise_scale"],
                "n_test": row["n_test"],
                "seed": row["seed"],
            }
        )

    @property
    def meta(self) -> dict[str, Any]:
        return self.table.meta


def _accuracy(logits_fn: Any, x: Any, y: np.ndarray, batch: int = 512) -> float:
    import torch

    hits = 0
    for s in range(0, len(y), batch):
        pred = logits_fn(torch.as_tensor(x[s : s + batch], dtype=torch.float32)).argmax(-1).cpu().numpy()
        hits += int((pred == y[s : s + batch]).sum())
    return hits / len(y)


def _hits(sent: list[Any], y: np.ndarray) -> float:
    """The share of releases whose class is the label."""
    return float(np.mean([r.predicted_class == int(label) for r, label in zip(sent, y, strict=True)]))


def _ldp_row(dataset: str, method: str, eps: float, accuracy: float, refit: float | None, scale: float,
             n: int, seed: int) -> dict[str, Any]:
    inf = math.isinf(eps)
    return {
        "dataset": dataset,
        "method": method,
        "epsilon": eps,
        "guarantee": "none (no noise)" if inf else "eps-LDP",
        "accuracy": accuracy,
        "accuracy_refit": refit,
        "release_rate": 1.0,
        "noise_scale": scale,
        "n_test": n,
        "seed": None if inf else seed,
    }


def _figure(frame: Any, dataset: str) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for method, part in frame.groupby("method", sort=False):
        part = part.sort_values("epsilon")
        labels = ["∞" if math.isinf(e) else f"{e:g}" for e in part["epsilon"]]
        fig.add_bar(x=labels, y=part["accuracy"], name=method)
    fig.update_layout(
        barmode="group",
        title=f"Table 2 ({dataset}): LDP baselines vs ARL-C-N under PTR",
        xaxis_title="ε",
        yaxis_title="test accuracy",
        template="plotly_white",
        height=420,
    )
    return fig


def run(ctx: RunContext) -> Any:
    """Table 2 for one dataset; write ``table2.csv`` + figure."""
    import torch

    from privcore.data import load_dataset
    from privcore.errors import CheckpointError
    from privcore.mechanisms import registry
    from privcore.mechanisms.ldp import embedding_bound

    ds = load_dataset(ctx.dataset)
    pipe = ctx.pipeline(OBFUSCATOR)
    ldp_image, ldp_embedding = registry.get("LDP-Image"), registry.get("LDP-Embedding")
    try:
        pixel = ldp_image.load(dataset=ctx.dataset, model="ip-cnn", models_dir=ctx.models_dir)
    except (KeyError, FileNotFoundError, OSError, CheckpointError) as exc:
        raise FileNotFoundError(f"LDP-Image needs the standard pixel classifier ip-cnn: {exc}") from exc
    pixel_model = pixel.model
    n_test = ctx.n_test(full=None if ds.x_test.shape[0] <= 2000 else 2000, quick=40, tiny=6)
    idx = test_indices(ds.x_test.shape[0], n_test, ctx.seed)
    x, y = ds.x_test[idx], ds.y_test[idx].numpy()
    epsilons = ctx.pick(full=EPSILONS, quick=EPSILONS, tiny=(1.0,))
    bound = embedding_bound(pipe)[0]
    config = {
        "epsilons": list(epsilons),
        "n_test": len(idx),
        "bound": bound,
        "certifier": ctx.certifier,
        "weights": [pipe.cards["obfuscator"]["weights"]["sha256"], pixel_model.card["weights"]["sha256"]],
        "delta_p": pipe.proposed_delta_p,
        "classifiers": ctx.classifier_weights([pipe.obfuscator_name]),
        "refit": "fine-tuned on training releases (ptr_common.refit_plan)",
    }
    table = ctx.table("table2", columns=COLUMNS, key=KEY, config=config)
    z = embed(pipe, x)
    x_refit, y_refit, refit_epochs = refit_plan(ctx, ds)
    z_refit = embed(pipe, x_refit)

    def head(v: torch.Tensor) -> torch.Tensor:
        return pipe.classify(pipe.obfuscate(v))

    for eps in (*epsilons, math.inf):
        seed = row_seed(ctx.seed, "table2", "LDP", eps)
        options = Options(rng=np.random.default_rng(seed))
        if not table.done(method=ldp_image.name, epsilon=eps):
            if math.isinf(eps):
                accuracy, scale = _accuracy(pixel_model, x.numpy(), y), 0.0
            else:
                setting = ldp_image.setting(epsilon=eps)
                sent = [ldp_image.release(pixel, ldp_image.prepare(pixel, xi), setting, options) for xi in x]
                accuracy, scale = _hits(sent, y), sent[0].noise_scale
            table.add(_ldp_row(ctx.dataset, ldp_image.name, eps, accuracy, None, scale, len(y), seed))
        if not table.done(method=ldp_embedding.name, epsilon=eps):
            refit = None
            if math.isinf(eps):
                accuracy, scale = _accuracy(head, np.clip(z, -bound, bound), y), 0.0
            else:
                setting = ldp_embedding.setting(epsilon=eps)
                sent = [ldp_embedding.release(pipe, zi, setting, options) for zi in z]
                accuracy, scale = _hits(sent, y), sent[0].noise_scale
                clf = refit_classifier(
                    pipe,
                    np.clip(z_refit, -bound, bound),
                    y_refit,
                    scale=scale,
                    epochs=refit_epochs,
                    seed=seed,
                    after_noise=pipe.obfuscator,
                )
                # each release is f(noisy z): the refit classifier reads it as it is
                refit = _accuracy(lambda v, c=clf: c(v.to(pipe.device)), np.stack([r.value for r in sent]), y)
            table.add(_ldp_row(ctx.dataset, ldp_embedding.name, eps, accuracy, refit, scale, len(y), seed))
    ptr_accuracy_rows(
        ctx,
        pipe,
        epsilons=epsilons,
        x=x,
        y=y,
        table=_AdversarialRows(table, ctx.dataset),
        key_extra={"method": "Adversarial"},
        seed_key=("table2", "Adversarial"),
        x_train=x_refit,
        y_train=y_refit,
        refit_epochs=refit_epochs,
    )
    frame = table.frame()
    return table.finish(figures=save_figure(_figure(frame, ctx.dataset), ctx.dataset_dir / "table2"))
