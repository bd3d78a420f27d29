"""``experiment ceiling``: how much accuracy any obfuscator could keep under the certified global mechanism.

The global mechanism releases f(clip z) + Lap(G·R/ε) per output coordinate with G ≥ sup over the box
of ‖J_f‖_{∞→1}. Whatever f is, ‖f(clip z) − f(clip z')‖₁ ≤ G·‖clip z − clip z'‖∞, so the release is
(ε/R)·ℓ∞-metric private on z: for every pair of embeddings and every event S,
P[M(z) ∈ S] ≤ exp(ε·‖clip z − clip z'‖∞/R)·P[M(z') ∈ S] — whatever the obfuscator, so the classifier
reading the release obeys the same inequality. Per embedder (the dataset's default model's, and
ARL-C-N's where it differs, :func:`~privcore.experiments.neighbours.embedder_models`) and total ε,
four estimators:

``identity-global`` (achievable)
    f = identity (a ReLU network equal to z on the box; G = d, certified by this process) under the
    real mechanism :func:`~privcore.mechanisms.global_mechanism.global_release`: clip z + Lap(d·R/ε)
    per coordinate, classified by an MLP trained on such releases. A point any user can have.
``per-coordinate`` (optimistic estimate)
    clip z + Lap(R/ε) on *each* coordinate, classified by an MLP trained on such data: every
    coordinate gets the whole budget that one scaled coordinate projection (‖J‖_{∞→1} = 1) would
    get. Its ℓ1-metric privacy ε·‖Δz‖₁/R lies between the ℓ∞ one of every f and d times it, so it is
    more informative than any obfuscator on pairs that differ in several coordinates: an estimate of
    the ceiling, not a proof.
``metric-dp-bound`` (upper bound)
    A linear programme over the test images: with q_i = P[class of image i predicted], the inequality
    above gives, for every image j and one test image i_c of each other class c,
    q_j + Σ_c exp(−ε‖z_j − z_{i_c}‖∞/R)·q_{i_c} ≤ 1 (the class probabilities of j sum to 1). Its
    maximum of mean q over the test images, with the ``neighbours`` nearest i_c of each class, bounds
    the (noise-averaged) test accuracy of *every* obfuscator and classifier at this ε, R and
    embedder (of every (ε/R)·ℓ∞-metric private mechanism, in fact); dropping constraints only raises
    it. ``high`` adds the one-sided Hoeffding margin √(ln 20/(2n)): a 95 % upper bound on the
    population accuracy of any one obfuscator fixed without the test set.
``clean`` (reference, ε = ∞)
    the same MLP on clip z without noise: what the embedding itself carries.

Classifiers: two-hidden-layer ReLU MLPs trained on the fit part of the dataset's validation split
(:func:`~privcore.data.split.validation_split`), fresh noise every batch; the width and the number of
epochs are chosen on the validation images (noisy releases, ``draws`` draws each; rows with
``split = validation``, ``selected`` marks the choice); the chosen one is then scored once on the test
set (``split = test``). ``accuracy`` is the mean over images and draws, ``low``/``high`` a 95 %
percentile bootstrap over images. ``shipped`` rows copy, for the models on the same embedder, the test
rows of ``table1-global.csv`` and the δ = 0 rows of ``mechanisms.csv`` under the same results root.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from privcore.experiments.neighbours import embedder_models, embedder_of
from privcore.experiments.runner import RunContext, save_figure
from privcore.experiments.seeds import row_seed
from privcore.experiments.table1_global import _bootstrap

__all__ = ["COLUMNS", "EPSILONS_TOTAL", "identity_network", "metric_dp_bound", "run"]

COLUMNS = ("dataset", "embedder", "embedder_sha256", "estimator", "kind", "split", "epsilon_total", "radius",
           "latent_dim", "noise_scale", "classifier", "accuracy", "low", "high", "n", "draws", "selected",
           "seed", "source")
KEY = ("embedder", "estimator", "split", "epsilon_total", "classifier")
EPSILONS_TOTAL = (1.0, 2.0, 4.0, 10.0)
KINDS = {"identity-global": "achievable", "per-coordinate": "estimate", "metric-dp-bound": "upper-bound",
         "clean": "reference", "shipped": "shipped"}
#: one-sided 95 %: P(mean − population mean > t) ≤ exp(−2nt²) = 0.05
_ALPHA = 0.05


def identity_network(box: Any) -> Any:
    """A ReLU network equal to the identity on ``box``: ReLU(z − lower + 1) + lower − 1 (every unit
    active on the box, so its certified G is exactly d, the ∞→1 norm of the identity)."""
    from privcore.lipschitz.network import ReluNetwork

    lower = np.asarray(box.lower, dtype=np.float64)
    d = lower.size
    return ReluNetwork.from_arrays([np.eye(d), np.eye(d)], [1.0 - lower, lower - 1.0])


def metric_dp_bound(z: Any, y: Any, *, epsilon: float, radius: float, neighbours: int = 10) -> float:
    """Upper bound on the mean over (z, y) of P[predicted class = y] for every (ε/R)·ℓ∞-metric private
    mechanism followed by any classifier (module docstring): the LP over q ∈ [0, 1]ⁿ with, for each
    point j and m < ``neighbours``, q_j + Σ_{c ≠ y_j} exp(−ε·d(z_j, i_c^m)/R)·q_{i_c^m} ≤ 1, i_c^m the
    m-th nearest point of class c to z_j (ℓ∞). Coefficients below 1e-9 are dropped (a relaxation)."""
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix
    from scipy.spatial import cKDTree

    z = np.asarray(z, dtype=np.float64).reshape(len(y), -1)
    y = np.asarray(y).reshape(-1)
    n = y.size
    rows, cols, vals = [], [], []
    classes = np.unique(y)
    near: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for c in classes:
        members = np.flatnonzero(y == c)
        k = min(neighbours, members.size)
        d, i = cKDTree(z[members]).query(z, k=k, p=np.inf)
        near[int(c)] = (d.reshape(n, k), members[i.reshape(n, k)])
    m_max = max(v[0].shape[1] for v in near.values())
    r = 0
    for m in range(m_max):
        block_rows = [np.arange(n)]
        block_cols = [np.arange(n)]
        block_vals = [np.ones(n)]
        for c, (d, i) in near.items():
            if m >= d.shape[1]:
                continue
            w = np.exp(-epsilon * d[:, m] / radius)
            keep = (y != c) & (w > 1e-9)
            block_rows.append(np.flatnonzero(keep))
            block_cols.append(i[keep, m])
            block_vals.append(w[keep])
        rows.append(np.concatenate(block_rows) + r)
        cols.append(np.concatenate(block_cols))
        vals.append(np.concatenate(block_vals))
        r += n
    a = csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r, n))
    res = linprog(-np.full(n, 1.0 / n), A_ub=a, b_ub=np.ones(r), bounds=(0.0, 1.0), method="highs-ipm")
    if res.status != 0:
        raise RuntimeError(f"the metric-privacy LP did not solve: {res.message}")
    # HiGHS's primal tolerance: a bound is rounded up, never down
    return float(min(1.0, -res.fun + 1e-7))


def _subsample(n: int, k: int | None, seed: int) -> np.ndarray:
    """All of range(n), or a seeded sorted sample of k (splits may be ordered by class)."""
    if k is None or k >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).permutation(n)[:k])


class _Data:
    """Clipped embeddings (clip_B z, as the mechanism clips) of one embedder: fit, validation, test."""

    def __init__(self, ctx: RunContext, pipe: Any, box: Any, n_fit: int | None, n_test: int | None) -> None:
        from privcore.data import load_dataset
        from privcore.data.split import validation_split
        from privcore.experiments.ptr_common import embed

        ds = load_dataset(ctx.dataset)
        fit = validation_split(ds).dataset
        xf, yf = fit.x_train, fit.y_train
        if n_fit is not None and n_fit < xf.shape[0]:
            pick = _subsample(xf.shape[0], n_fit, row_seed(ctx.seed, "ceiling-fit"))
            xf, yf = xf[pick], yf[pick]
        iv = _subsample(fit.x_test.shape[0], n_test, row_seed(ctx.seed, "ceiling-validation"))
        it = _subsample(ds.x_test.shape[0], n_test, row_seed(ctx.seed, "ceiling-test"))
        lo, hi = box.lower, box.upper
        self.fit = (np.clip(embed(pipe, xf), lo, hi), yf.numpy())
        self.validation = (np.clip(embed(pipe, fit.x_test[iv]), lo, hi), fit.y_test[iv].numpy())
        self.test = (np.clip(embed(pipe, ds.x_test[it]), lo, hi), ds.y_test[it].numpy())
        self.classes = int(ds.num_classes)


def _has(table: Any, **setting: Any) -> bool:
    """Whether the table has a row with these values (a subset of its key: a test row's classifier is
    chosen on validation, so it is not known before)."""
    if table.n_rows == 0:
        return False
    frame = table.frame()
    mask = np.ones(len(frame), dtype=bool)
    for k, v in setting.items():
        mask &= (frame[k] == v).to_numpy()
    return bool(mask.any())


def _mlp(d: int, width: int, classes: int) -> Any:
    import torch

    return torch.nn.Sequential(torch.nn.Linear(d, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                               torch.nn.ReLU(), torch.nn.Linear(width, classes))


def _train(z: np.ndarray, y: np.ndarray, *, scale: float, width: int, checkpoints: tuple[int, ...],
           classes: int, seed: int) -> list[tuple[int, Any]]:
    """An MLP trained on z + Lap(scale) (fresh noise every batch); a copy at each checkpoint epoch."""
    import copy

    import torch

    torch.manual_seed(seed)
    gen = np.random.default_rng(seed)
    net = _mlp(z.shape[1], width, classes)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    zt, yt = torch.as_tensor(z, dtype=torch.float32), torch.as_tensor(y, dtype=torch.long)
    out = []
    for epoch in range(1, max(checkpoints) + 1):
        perm = torch.as_tensor(gen.permutation(len(y)))
        for s in range(0, len(y), 256):
            b = perm[s:s + 256]
            x = zt[b]
            if scale > 0:
                x = x + torch.as_tensor(gen.laplace(0.0, scale, size=tuple(x.shape)), dtype=torch.float32)
            loss = torch.nn.functional.cross_entropy(net(x), yt[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if epoch in checkpoints:
            out.append((epoch, copy.deepcopy(net).eval()))
    return out


def _predict(net: Any, values: np.ndarray) -> np.ndarray:
    import torch

    with torch.no_grad():
        return net(torch.as_tensor(values, dtype=torch.float32)).argmax(-1).numpy()


def _releases(estimator: str, z: np.ndarray, *, eps: float, radius: float, draws: int, rng: Any,
              identity: Any, constant: Any) -> list[np.ndarray]:
    """``draws`` noisy versions of z: the real global mechanism for the identity, numpy's Laplace for
    the per-coordinate estimate (evaluation only), z itself for ``clean``."""
    from privcore.mechanisms.global_mechanism import global_release

    if estimator == "identity-global":
        return [np.stack([global_release(identity, zi, epsilon=eps, radius=radius, constant=constant,
                                         rng=rng).value for zi in z]) for _ in range(draws)]
    if estimator == "per-coordinate":
        return [z + rng.laplace(0.0, radius / eps, size=z.shape) for _ in range(draws)]
    return [z]


def _score(net: Any, values: list[np.ndarray], y: np.ndarray, seed: int) -> tuple[float, float, float]:
    per_image = np.mean([_predict(net, v) == y for v in values], axis=0)
    low, high = _bootstrap(per_image, seed)
    return float(per_image.mean()), low, high


def _classifier_rows(ctx: RunContext, table: Any, data: _Data, base: dict[str, Any], *, estimator: str,
                     eps: float, radius: float, widths: tuple[int, ...], checkpoints: tuple[int, ...],
                     draws: int, identity: Any, constant: Any, train_scale: float, scale: float) -> None:
    """Validation rows for every (width, epochs), then the selected classifier's test row."""
    tag = (base["embedder"], estimator, eps)
    if _has(table, embedder=base["embedder"], estimator=estimator, split="test", epsilon_total=eps):
        return
    z_fit, y_fit = data.fit
    rows, nets = [], {}
    val_seed = row_seed(ctx.seed, "ceiling", *tag, "validation")
    rng = np.random.default_rng(val_seed)
    zv, yv = data.validation
    val_values = _releases(estimator, zv, eps=eps, radius=radius, draws=draws, rng=rng, identity=identity,
                           constant=constant)
    for width in widths:
        seed = row_seed(ctx.seed, "ceiling", *tag, "train", width)
        for epochs, net in _train(z_fit, y_fit, scale=train_scale, width=width, checkpoints=checkpoints,
                                  classes=data.classes, seed=seed):
            name = f"mlp {width}x2, {epochs} epochs"
            acc, low, high = _score(net, val_values, yv, val_seed)
            nets[name] = net
            rows.append({**base, "estimator": estimator, "kind": KINDS[estimator], "split": "validation",
                         "epsilon_total": eps, "noise_scale": scale, "classifier": name, "accuracy": acc,
                         "low": low, "high": high, "n": int(yv.size), "draws": len(val_values),
                         "seed": val_seed, "source": f"fit part: {y_fit.size} images"})
    best = max(rows, key=lambda r: r["accuracy"])  # first on ties: grid order
    for row in rows:
        table.add({**row, "selected": row is best})
    test_seed = row_seed(ctx.seed, "ceiling", *tag, "test")
    zt, yt = data.test
    values = _releases(estimator, zt, eps=eps, radius=radius, draws=draws,
                       rng=np.random.default_rng(test_seed), identity=identity, constant=constant)
    acc, low, high = _score(nets[best["classifier"]], values, yt, test_seed)
    table.add({**best, "split": "test", "accuracy": acc, "low": low, "high": high, "n": int(yt.size),
               "draws": len(values), "selected": True, "seed": test_seed})


def _shipped_rows(ctx: RunContext, base: dict[str, Any], epsilons: tuple[float, ...]) -> list[dict[str, Any]]:
    """Test rows of the shipped models on this embedder from ``table1-global.csv`` and ``mechanisms.csv``."""
    import pandas as pd

    shas = {m.name: str(m.card["embedder"]["sha256"]) for m in ctx.model_infos() if m.kind == "obfuscator"}
    out = []
    for name, model_col in (("table1-global", "obfuscator"), ("mechanisms", "model")):
        path = ctx.dataset_dir / f"{name}.csv"
        if not path.is_file():
            continue
        frame = pd.read_csv(path)
        if "split" in frame:
            frame = frame[frame["split"] == "test"]
        frame = frame[(frame["delta"] == 0) & frame["epsilon_total"].isin(epsilons)]
        for _, r in frame.iterrows():
            if shas.get(str(r[model_col])) != base["embedder_sha256"]:
                continue
            n = int(r["n_test"] if "n_test" in r else r["n"])
            label = str(r[model_col]) if name == "table1-global" else f"{r[model_col]} ({r['mechanism']})"
            out.append({**base, "estimator": "shipped", "kind": "shipped", "split": "test",
                        "epsilon_total": float(r["epsilon_total"]), "noise_scale": float(r["noise_scale"]),
                        "classifier": label, "accuracy": float(r["accuracy"]), "low": float(r["low"]),
                        "high": float(r["high"]), "n": n, "draws": int(r["draws"]), "selected": None,
                        "seed": int(r["seed"]), "source": f"{name}.csv"})
    return out


def run(ctx: RunContext) -> Any:
    """The ceiling estimators per embedder and total ε, with the shipped models beside them."""
    from privcore.lipschitz.global_box import certified_global_constant
    from privcore.mechanisms.global_mechanism import card_clip_box, global_scales

    models = embedder_models(ctx)
    epsilons = ctx.pick(full=EPSILONS_TOTAL, quick=EPSILONS_TOTAL, tiny=(2.0,))
    widths = ctx.pick(full=(64, 256), quick=(64,), tiny=(16,))
    checkpoints = ctx.pick(full=(5, 10, 20, 40), quick=(5, 10, 20), tiny=(1, 2))
    draws = ctx.pick(full=3, quick=1, tiny=1)
    n_fit = ctx.pick(full=None, quick=5000, tiny=200)
    n_test = ctx.n_test(full=None, quick=500, tiny=40)
    neighbours = ctx.pick(full=10, quick=5, tiny=3)
    config = {"models": models, "epsilons_total": list(epsilons), "widths": list(widths),
              "checkpoints": list(checkpoints), "draws": draws, "n_fit": n_fit, "n_test": n_test,
              "lp_neighbours": neighbours}
    table = ctx.table("ceiling", columns=COLUMNS, key=KEY, config=config)
    with ctx.progress("ceiling") as progress:
        for i, model in enumerate(models):
            pipe = ctx.pipeline(model)
            box = card_clip_box(pipe.cards["obfuscator"])
            if box is None:
                continue
            name, sha = embedder_of(pipe)
            r, d = float(pipe.radius), int(box.lower.size)
            data = _Data(ctx, pipe, box, n_fit, n_test)
            identity = identity_network(box)
            constant = certified_global_constant(identity, box)
            base = {"dataset": ctx.dataset, "embedder": name, "embedder_sha256": sha, "radius": r,
                    "latent_dim": d}
            noisy = ("identity-global", "per-coordinate", "metric-dp-bound")
            steps = [("clean", math.inf)] + [(e, eps) for eps in epsilons for e in noisy]
            for j, (estimator, eps) in enumerate(steps):
                progress(i * len(steps) + j, len(models) * len(steps), f"{name} {estimator} ε={eps:g}")
                if estimator == "metric-dp-bound":
                    if _has(table, embedder=name, estimator=estimator, split="test", epsilon_total=eps):
                        continue
                    zt, yt = data.test
                    value = metric_dp_bound(zt, yt, epsilon=eps, radius=r, neighbours=neighbours)
                    margin = math.sqrt(math.log(1 / _ALPHA) / (2 * yt.size))
                    table.add({**base, "estimator": estimator, "kind": KINDS[estimator], "split": "test",
                               "epsilon_total": eps, "noise_scale": None,
                               "classifier": f"LP, {neighbours} neighbours per class", "accuracy": value,
                               "low": None, "high": min(1.0, value + margin), "n": int(yt.size),
                               "draws": None, "selected": None, "seed": None,
                               "source": "any (ε/R)·ℓ∞-metric private release"})
                    continue
                if estimator == "identity-global":
                    scales = global_scales(epsilon=eps, radius=r, global_lipschitz=constant.value, numel=d)
                    scale, train_scale = scales.noise_scale, scales.noise_scale_effective
                elif estimator == "per-coordinate":
                    scale = train_scale = r / eps
                else:
                    scale = train_scale = 0.0
                _classifier_rows(ctx, table, data, base, estimator=estimator, eps=eps, radius=r,
                                 widths=widths, checkpoints=checkpoints, draws=draws if scale > 0 else 1,
                                 identity=identity,
                                 constant=constant, train_scale=train_scale, scale=scale)
            for row in _shipped_rows(ctx, base, tuple(epsilons)):
                if not table.done(embedder=name, estimator="shipped", split="test",
                                  epsilon_total=row["epsilon_total"], classifier=row["classifier"]):
                    table.add(row)
        progress(1, 1, "")
    frame = table.frame()
    return table.finish(figures=save_figure(_figure(frame, ctx.dataset), ctx.dataset_dir / "ceiling"))


def _figure(frame: Any, dataset: str) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    test = frame[(frame["split"] == "test") & np.isfinite(frame["epsilon_total"])]
    curve = np.where(test["estimator"] == "shipped", test["classifier"], test["estimator"])
    for (emb, label), part in test.groupby([test["embedder"], curve], sort=False):
        est = part["estimator"].iloc[0]
        label = f"{emb}: {label}"
        part = part.sort_values("epsilon_total")
        err = {"type": "data", "symmetric": False, "array": (part["high"] - part["accuracy"]).fillna(0)}
        if part["low"].notna().all():
            err["arrayminus"] = part["accuracy"] - part["low"]
        fig.add_trace(go.Scatter(x=part["epsilon_total"], y=part["accuracy"], mode="lines+markers",
                                 name=label, error_y=err,
                                 line={"dash": "dot" if est == "shipped" else "solid"}))
    fig.update_xaxes(title_text="total ε of each release's guarantee (ε, 0, R)", type="log")
    fig.update_yaxes(title_text="test accuracy (95 % interval)", range=[0, 1])
    fig.update_layout(title=f"The ceiling of the global mechanism ({dataset})", template="plotly_white",
                      height=460)
    return fig
