"""Experiments of the mechanism lab: Fig. 4 and Fig. 5 of Shavit & Gjura (2019) as CSV.

* :func:`fig5_sweep` — expected response loss (ERL) of learned Laplace and exponential
  mechanisms against k, for every query, averaged over runs, on the training distribution
  (4-component mixtures) and the test distribution (2-component mixtures), with the
  data-blind baseline (Fig. 5's dotted line) and the hand-designed experts' mechanisms.
  Every ERL is exact over the mechanism's randomness and a mean over ``num_eval`` fresh
  datasets (fixed seeds, disjoint from training) for the datasets.
* :func:`fig4_tables` — a mechanism's response distribution on a few fresh datasets, with
  the data and the true statistic (Fig. 4: the exponential mechanism for the median).
* :func:`response_distribution` — any mechanisms' response law on one dataset as masses on
  common bins (used by the dashboard page).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from privcore.lab.data import DEFAULT_DOMAIN, DataDomain, TruncatedGaussianMixture
from privcore.lab.mechanisms import (
    DiscreteOutput,
    LaplaceOutput,
    Mechanism,
    expert_mechanism,
    fit_data_blind,
)
from privcore.lab.queries import QUERIES, default_loss, query_spec, query_values
from privcore.lab.store import save_mechanism
from privcore.lab.train import MECHANISMS, LabConfig, TrainResult, train_data, train_mechanism
from privcore.validation import check_int

__all__ = [
    "DEFAULT_KS",
    "evaluation_sets",
    "fig4_tables",
    "fig5_summary",
    "fig5_sweep",
    "model_stem",
    "response_distribution",
]

DEFAULT_KS: tuple[float, ...] = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 10.0)
EVAL_SEEDS = {"train": 1_000_001, "test": 1_000_002}
SweepProgress = Callable[[int, int, str], None]


@functools.lru_cache(maxsize=4)
def evaluation_sets(domain: DataDomain = DEFAULT_DOMAIN, num: int = 1000) -> dict[str, np.ndarray]:
    """Fresh evaluation datasets: ``train`` (4-component, the training distribution) and
    ``test`` (2-component, generalisation), fixed seeds disjoint from every training seed."""
    out = {}
    for split, comps in (("train", 4), ("test", 2)):
        x = TruncatedGaussianMixture(n_components=comps, domain=domain).sample(num, seed=EVAL_SEEDS[split])
        x.setflags(write=False)
        out[split] = x
    return out


def model_stem(mechanism: str, query: str, k: float) -> str:
    """File stem of a shipped lab model, e.g. ``laplace-median-k0.03``."""
    return f"{mechanism}-{query}-k{k:g}"


def _baseline_rows(mechanism: str, query: str, loss: str, epsilon: float, config: LabConfig,
                   evals: dict[str, np.ndarray]) -> list[dict[str, object]]:
    spec = query_spec(query, config.domain)
    train = train_data(config.distribution, config.num_train, config.data_seed)
    cands = spec.grid(1001 if mechanism == "laplace" else config.n_responses)
    blind = fit_data_blind(query, loss, train, candidates=cands, domain=config.domain)
    expert = expert_mechanism(query, epsilon=epsilon, domain=config.domain, n_responses=config.n_responses)
    rows: list[dict[str, object]] = []
    for method, mech in (("data-blind", blind), ("expert", expert)):
        for split, data in evals.items():
            rows.append({"mechanism": mechanism, "method": method, "baseline": mech.name, "query": query,
                         "loss": loss, "k": math.nan, "epsilon": epsilon, "run": 0, "split": split,
                         "erl": float(mech.expected_loss(data, loss).mean())})
    return rows


def fig5_sweep(
    *,
    mechanisms: Sequence[str] = MECHANISMS,
    queries: Sequence[str] = QUERIES,
    ks: Sequence[float] = DEFAULT_KS,
    runs: int = 5,
    epsilon: float = 1.0,
    epochs: int = 2,
    max_restarts: int = 1,
    num_eval: int = 1000,
    num_train: int = 10_000,
    device: str | None = None,
    verify: bool = False,
    time_limit: float | None = None,
    save_dir: str | Path | None = None,
    save_ks: dict[str, Sequence[float]] | None = None,
    command: str = "",
    progress: SweepProgress | None = None,
) -> pd.DataFrame:
    """Fig. 5: ERL against k for every mechanism × query, ``runs`` seeds each, on the train and
    test distributions, plus baseline rows (``method`` = data-blind / expert).

    Run 0 of every (mechanism, query, k in ``save_ks[mechanism]``) is saved to ``save_dir``
    with a card (the dashboard's models).
    With ``verify`` every trained network is checked by the Lipschitz engine (columns
    ``engine_upper``, ``engine_exact``, ``engine_passed``).
    """
    runs = check_int("runs", runs, minimum=1)
    evals = evaluation_sets(DEFAULT_DOMAIN, num_eval)
    rows: list[dict[str, object]] = []
    total = len(mechanisms) * len(queries) * len(ks) * runs
    done = 0
    for mech_name in mechanisms:
        for query in queries:
            loss = default_loss(mech_name, query)
            base_cfg = LabConfig(mechanism=mech_name, query=query, k=1.0, epsilon=epsilon, epochs=epochs,
                                 max_restarts=max_restarts, num_train=num_train)
            baselines = _baseline_rows(mech_name, query, loss, epsilon, base_cfg, evals)
            rows.extend(baselines)
            for k in ks:
                for run in range(runs):
                    cfg = LabConfig(mechanism=mech_name, query=query, k=float(k), epsilon=epsilon,
                                    epochs=epochs, max_restarts=max_restarts, seed=run, num_train=num_train)
                    res = train_mechanism(cfg, device=device)
                    extra = _verify(res, time_limit) if verify else {}
                    metrics = {}
                    for split, data in evals.items():
                        erl = float(res.mechanism.expected_loss(data, loss).mean())
                        metrics[split] = erl
                        rows.append({"mechanism": mech_name, "method": "learned", "baseline": "",
                                     "query": query, "loss": loss, "k": float(k), "epsilon": epsilon,
                                     "run": run,
                                     "split": split, "erl": erl, "restarts": res.restarts,
                                     "train_seconds": res.seconds,
                                     "certified_bound": res.mechanism.certified_bound, **extra})
                    ship = (save_ks or {}).get(mech_name, ())
                    if save_dir is not None and run == 0 and any(math.isclose(k, s) for s in ship):
                        _save(res, Path(save_dir), metrics, baselines, extra, command)
                    done += 1
                    if progress is not None:
                        progress(done, total, f"{mech_name}/{query} k={k:g} run {run}")
    return pd.DataFrame(rows)


def _verify(res: TrainResult, time_limit: float | None) -> dict[str, object]:
    """Engine check of a freshly trained network: exact LipMIP for the Laplace network (one MIP,
    ~1 s), the certified LP relaxation for the exponential one (50 networks, one per response)."""
    from privcore.lab.verify import verify_mechanism

    certifier = "exact" if res.config.mechanism == "laplace" else "lp"
    rep = verify_mechanism(res.mechanism, time_limit=time_limit, certifier=certifier)
    return {"engine_upper": rep.upper, "engine_lower": rep.lower, "engine_exact": rep.exact,
            "engine_passed": rep.passed, "engine_seconds": sum(c.seconds for c in rep.checks),
            "engine_certifier": certifier}


def _save(res: TrainResult, directory: Path, metrics: dict[str, float], baselines: list[dict[str, object]],
          extra: dict[str, object], command: str) -> Path:
    cfg = res.config
    card = {
        "title": f"learned {cfg.mechanism} mechanism for the {cfg.query} "
                 f"(k={cfg.k:g}, trained at ε={cfg.epsilon:g})",
        "paper": "Shavit & Gjura 2019, Exploring the use of Lipschitz neural networks for automating the "
                 "design of differentially private mechanisms",
        "privacy": "ε-DP for datasets of n records in [low, high] (one-record changes): "
                   + ("f(x) + Lap(k·c/ε)" if cfg.mechanism == "laplace" else "P(r) ∝ exp(ε·u(x,r)/(2·k·c))"),
        "config": cfg.to_dict(),
        "train_distribution": cfg.distribution.describe(),
        "test_distribution": TruncatedGaussianMixture(n_components=2, domain=cfg.domain).describe(),
        "loss": cfg.loss,
        "metrics": {
            "erl_train_distribution": metrics.get("train"),
            "erl_test_distribution": metrics.get("test"),
            "train_history": list(res.history),
            "restarts": res.restarts,
            "train_seconds": res.seconds,
            "device": res.device,
            "baselines": [{key: b[key] for key in ("method", "baseline", "split", "erl")} for b in baselines],
        },
        "verification": extra or None,
        "command": command,
        "created": time.strftime("%Y-%m-%d"),
    }
    return save_mechanism(res.mechanism, directory / model_stem(cfg.mechanism, cfg.query, cfg.k), card=card)


def fig5_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation of the ERL over runs per (mechanism, method, query, k, split),
    the 95 % Student-t interval of the mean over the ``runs`` seeds (``erl_ci_low``/``erl_ci_high``;
    empty for one run: each run's ERL is exact, the spread is over training seeds), and ``best_k``
    marking the k of lowest mean ERL on the training distribution (Fig. 5's blue circle)."""
    from scipy.stats import t as student_t

    keys = ["mechanism", "method", "baseline", "query", "loss", "k", "epsilon", "split"]
    g = df.groupby(keys, dropna=False)["erl"]
    out = g.agg(erl_mean="mean", erl_std="std", runs="count").reset_index()
    n = out["runs"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        quantile = student_t.ppf(0.975, np.maximum(n - 1, 1))
        half = np.where(n > 1, quantile * out["erl_std"] / np.sqrt(n), np.nan)
    out["erl_ci_low"], out["erl_ci_high"] = out["erl_mean"] - half, out["erl_mean"] + half
    out["best_k"] = False
    learned_train = out[(out.method == "learned") & (out.split == "train")]
    for (mech, query), grp in learned_train.groupby(["mechanism", "query"]):
        best = float(grp.loc[grp.erl_mean.idxmin(), "k"])
        mask = (out.mechanism == mech) & (out["query"] == query) & (out.method == "learned") & (out.k == best)
        out.loc[mask, "best_k"] = True
    return out


def response_distribution(mechanisms: dict[str, Mechanism], data: np.ndarray, *, query: str,
                          domain: DataDomain = DEFAULT_DOMAIN, bins: int = 50) -> pd.DataFrame:
    """Each mechanism's response law on one dataset as the mass of ``bins`` equal bins
    spanning the query's range (a discrete law's mass sits in the bin of each response; a
    Laplace law's is integrated exactly). Columns: mechanism, response (bin centre), mass,
    and ``outside`` (mass beyond the range, Laplace only)."""
    spec = query_spec(query, domain)
    edges = np.linspace(spec.low, spec.high, bins + 1)
    centres = (edges[:-1] + edges[1:]) / 2.0
    frames = []
    for label, mech in mechanisms.items():
        out = mech.output(data)
        if isinstance(out, LaplaceOutput):
            loc, b = float(out.loc[0]), float(out.scale)
            z = (edges - loc) / b
            cdf = np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0)), 1 - 0.5 * np.exp(-np.maximum(z, 0)))
            mass = np.diff(cdf)
            outside = float(cdf[0] + 1 - cdf[-1])
        elif isinstance(out, DiscreteOutput):
            idx = np.clip(np.searchsorted(edges, out.support, side="right") - 1, 0, bins - 1)
            mass = np.bincount(idx, weights=out.probs[0], minlength=bins)
            outside = 0.0
        else:  # pragma: no cover - the two output kinds are exhaustive
            raise TypeError(type(out).__name__)
        frame = {"mechanism": label, "response": centres, "mass": mass, "outside": outside}
        frames.append(pd.DataFrame(frame))
    return pd.concat(frames, ignore_index=True)


def fig4_tables(mechanism: Mechanism, *, n_datasets: int = 6, components: int = 4, seed: int = 2_000_001,
                domain: DataDomain = DEFAULT_DOMAIN) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig. 4: the mechanism's response law on ``n_datasets`` fresh datasets.

    Returns (responses, datasets): ``responses`` has dataset, response, probability, truth —
    a discrete law's own responses and probabilities, a Laplace law's mass on 50 equal bins
    (response = bin centre); ``datasets`` has dataset, value (the records).
    """
    data = TruncatedGaussianMixture(n_components=components, domain=domain).sample(n_datasets, seed=seed)
    truth = np.asarray(query_values(mechanism.query, data))
    resp, pts = [], []
    for i in range(n_datasets):
        out = mechanism.output(data[i])
        if isinstance(out, DiscreteOutput):
            support, probs = out.support, out.probs[0]
        else:
            dist = response_distribution({"m": mechanism}, data[i], query=mechanism.query, domain=domain)
            support, probs = dist.response.to_numpy(), dist.mass.to_numpy()
        frame = {"dataset": i, "response": support, "probability": probs, "truth": truth[i]}
        resp.append(pd.DataFrame(frame))
        pts.append(pd.DataFrame({"dataset": i, "value": data[i]}))
    return pd.concat(resp, ignore_index=True), pd.concat(pts, ignore_index=True)
