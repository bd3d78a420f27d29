"""Shavit & Gjura (2019) Fig. 4, summarised: a learned exponential mechanism's response laws
for the median beside the standard quantile exponential mechanism on the same datasets.

The paper's Fig. 4 shows the response distribution of a median mechanism (k = 10, quantile
loss) on a few fresh datasets and says it "consistently approximates the true median" and
"learned to generate symmetric noise" (Sec. 5). This module turns those pictures into numbers,
computed exactly over the mechanisms' randomness (both laws live on the same 50-point grid):

* :func:`law_summary` — mode, E|r − truth|, mass within ±radius of the truth, mass below and
  above it and the expected quantile loss (records strictly between truth and response) of one
  discrete law;
* :func:`fig4_comparison` — that summary per dataset for the learned law (from the Fig. 4
  CSVs) and the quantile exponential mechanism (McSherry & Talwar 2007) on the same records;
* :func:`fig4_aggregate` — the same over many fresh datasets: mean E|r − truth| of each
  mechanism and of the paired difference with a 95 % Student-t interval over datasets.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from privcore.lab.data import DEFAULT_DOMAIN, DataDomain, TruncatedGaussianMixture
from privcore.lab.fig1 import t_interval
from privcore.lab.mechanisms import LearnedExponentialMechanism, QuantileExponentialMechanism
from privcore.lab.queries import loss_matrix, query_values

__all__ = ["AGGREGATE_SEED", "fig4_aggregate", "fig4_comparison", "law_summary"]

AGGREGATE_SEED = 2_000_002  # fresh datasets, disjoint from training (0), evaluation and Fig. 4's seeds


def law_summary(support: np.ndarray, probs: np.ndarray, truth: float, records: np.ndarray, *,
                radius: float = 0.5) -> dict[str, float]:
    """Exact summary of a law P(r = support[j]) = probs[j] against the true statistic ``truth``.

    ``mean``, ``sd``, ``skewness``: moments of the law (skewness 0 for a law symmetric about its mean);
    ``mode_low``/``mode_high``: smallest and largest response of maximal probability (they differ
    when the law is flat at its top, as the quantile exponential mechanism's often is);
    ``abs_error``: E|r − truth|; ``mass_within``: P(|r − truth| ≤ radius); ``mass_below``/``mass_above``:
    P(r < truth), P(r > truth); ``quantile_loss``: E #{records strictly between truth and r} (Sec. 4.2).
    """
    r = np.asarray(support, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    if r.shape != p.shape or r.ndim != 1:
        raise ValueError(f"support and probs must be vectors of one shape, got {r.shape} and {p.shape}")
    if np.any(p < 0) or not np.isclose(p.sum(), 1.0, atol=1e-9):
        raise ValueError(f"probs must be a probability vector (sum {p.sum():.12g})")
    top = r[p >= p.max() * (1 - 1e-9)]
    x = torch.tensor(np.asarray(records, dtype=np.float64)[None, :])
    q = torch.as_tensor([float(truth)], dtype=torch.float64)
    ql = loss_matrix("quantile", x, q, torch.tensor(r)).numpy()[0]
    mean = float(np.sum(p * r))
    sd = float(np.sqrt(np.sum(p * (r - mean) ** 2)))
    return {
        "mean": mean,
        "sd": sd,
        "skewness": float(np.sum(p * (r - mean) ** 3) / sd**3) if sd > 0 else float("nan"),
        "mode_low": float(top.min()),
        "mode_high": float(top.max()),
        "abs_error": float(np.sum(p * np.abs(r - truth))),
        "mass_within": float(p[np.abs(r - truth) <= radius].sum()),
        "mass_below": float(p[r < truth].sum()),
        "mass_above": float(p[r > truth].sum()),
        "quantile_loss": float(np.sum(p * ql)),
    }


def _baseline(query: str, epsilon: float, support: np.ndarray,
              domain: DataDomain) -> QuantileExponentialMechanism:
    return QuantileExponentialMechanism(query=query, epsilon=epsilon, responses=support, domain=domain)


def fig4_comparison(responses: pd.DataFrame, datasets: pd.DataFrame, *, query: str = "median",
                    epsilon: float = 1.0, radius: float = 0.5,
                    domain: DataDomain = DEFAULT_DOMAIN) -> pd.DataFrame:
    """One row per (dataset, mechanism) from the Fig. 4 CSVs (``fig4_<model>_responses.csv`` and
    ``_datasets.csv``): the learned law as written there, and the quantile exponential mechanism at
    the same ε on the same grid and records, each summarised by :func:`law_summary`;
    ``records_below``/``records_above`` count the records in [truth − 1, truth) and (truth, truth + 1]
    (where a miss is cheap in quantile loss: the paper says misses go "in a direction with relatively
    small quantile loss")."""
    rows = []
    for i, grp in responses.groupby("dataset", sort=True):
        support = grp["response"].to_numpy(dtype=np.float64)
        records = datasets.loc[datasets["dataset"] == i, "value"].to_numpy(dtype=np.float64)
        truth = float(grp["truth"].iloc[0])
        if not np.isclose(truth, float(query_values(query, records[None, :])[0]), atol=1e-9):
            raise ValueError(f"dataset {i}: the recorded truth does not match the records' {query}")
        base = _baseline(query, epsilon, support, domain).output(records[None, :]).probs[0]
        learned = grp["probability"].to_numpy(dtype=np.float64)
        for name, probs in (("learned exponential", learned), ("quantile exponential", base)):
            rows.append({"dataset": int(i), "mechanism": name, "truth": truth,
                         "records_below": int(np.sum((records >= truth - 1.0) & (records < truth))),
                         "records_above": int(np.sum((records > truth) & (records <= truth + 1.0))),
                         **law_summary(support, probs, truth, records, radius=radius)})
    return pd.DataFrame(rows)


def fig4_aggregate(mechanism: LearnedExponentialMechanism, *, n_datasets: int = 1000, components: int = 4,
                   seed: int = AGGREGATE_SEED, radius: float = 0.5) -> pd.DataFrame:
    """E|r − truth|, P(|r − truth| ≤ radius) and the expected quantile loss of the learned mechanism
    and the quantile exponential mechanism (same ε, grid and records) on ``n_datasets`` fresh
    datasets of a ``components``-Gaussian mixture (4: training distribution, 2: test): per statistic and
    mechanism, and for the paired difference learned − baseline, the mean over datasets, sd, n and
    95 % Student-t interval (each dataset's value is exact over the mechanisms' randomness)."""
    mixture = TruncatedGaussianMixture(n_components=components, domain=mechanism.domain)
    data = mixture.sample(n_datasets, seed=seed)
    truth = np.asarray(query_values(mechanism.query, data))
    support = mechanism.responses
    laws = {"learned exponential": mechanism.output(data).probs,
            "quantile exponential": _baseline(mechanism.query, mechanism.epsilon, support,
                                              mechanism.domain).output(data).probs}
    dist = np.abs(support[None, :] - truth[:, None])
    ql = loss_matrix("quantile", torch.tensor(data), torch.tensor(truth), torch.tensor(support)).numpy()
    stats = {}
    for name, p in laws.items():
        stats[name] = {"abs_error": (p * dist).sum(axis=1), "mass_within": (p * (dist <= radius)).sum(axis=1),
                       "quantile_loss": (p * ql).sum(axis=1)}
    stats["learned − quantile (paired)"] = {
        key: stats["learned exponential"][key] - stats["quantile exponential"][key]
        for key in ("abs_error", "mass_within", "quantile_loss")}
    rows = []
    for name, per in stats.items():
        for stat, values in per.items():
            mean, sd, low, high, n = t_interval(values)
            rows.append({"mechanism": name, "statistic": stat, "mean": mean, "sd": sd, "ci_low": low,
                         "ci_high": high, "n_datasets": n, "components": components, "seed": seed,
                         "epsilon": mechanism.epsilon, "k": mechanism.k, "radius": radius})
    return pd.DataFrame(rows)
