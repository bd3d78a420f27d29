"""What the mechanism-lab dashboard page computes (the page itself holds only widgets).

Shavit & Gjura (2019), Figs. 4 and 5: a shipped learned mechanism's response law on a fresh
dataset against the true statistic, the experts' mechanism and the data-blind answer, and
the precomputed ERL-against-k curves.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from privcore._paths import models_dir, results_dir
from privcore.lab.data import DEFAULT_DOMAIN, TruncatedGaussianMixture
from privcore.lab.experiments import response_distribution
from privcore.lab.mechanisms import (
    DataBlindMechanism,
    DiscreteOutput,
    LaplaceOutput,
    LearnedExponentialMechanism,
    LearnedLaplaceMechanism,
    Mechanism,
    expected_response_loss,
    expert_mechanism,
    fit_data_blind,
    prepare_data,
)
from privcore.lab.queries import default_loss, query_spec, query_values
from privcore.lab.store import list_cards, load_mechanism
from privcore.lab.train import LabConfig, train_data
from privcore.validation import check_epsilon, check_int

__all__ = [
    "MODELS_DIR",
    "RESULTS_DIR",
    "Comparison",
    "available_models",
    "compare",
    "data_blind",
    "fig5_curves",
    "fresh_dataset",
    "load_model",
    "query_label",
]

MODELS_DIR = models_dir() / "lab"
RESULTS_DIR = results_dir() / "lab"


def available_models(directory: str | Path = MODELS_DIR) -> pd.DataFrame:
    """The shipped lab models: kind, query, k, trained ε, loss, verification, card path."""
    rows = []
    for path, card in list_cards(directory):
        ver = card.get("verification") or {}
        rows.append({"kind": card["kind"], "query": card["query"], "k": float(card["k"]),  # type: ignore[arg-type]
                     "epsilon": float(card["epsilon"]), "loss": card.get("loss", ""),  # type: ignore[arg-type]
                     "engine_upper": ver.get("engine_upper"), "engine_exact": ver.get("engine_exact"),
                     "command": card.get("command", ""), "path": str(path)})
    cols = ["kind", "query", "k", "epsilon", "loss", "engine_upper", "engine_exact", "command", "path"]
    return pd.DataFrame(rows, columns=cols)


@functools.lru_cache(maxsize=32)
def load_model(path: str) -> LearnedLaplaceMechanism | LearnedExponentialMechanism:
    """Load (and re-certify) a shipped model once per process."""
    return load_mechanism(path)[0]


def fresh_dataset(*, seed: int, components: int = 4) -> np.ndarray:
    """A fresh dataset of the lab's distribution (4 components: training, 2: test)."""
    seed = check_int("seed", seed, minimum=0)
    return TruncatedGaussianMixture(n_components=components).sample(1, seed=seed)[0]


@dataclass(frozen=True, kw_only=True, eq=False)
class Comparison:
    """Response laws of the learned, expert and data-blind mechanisms on one dataset."""

    query: str
    truth: float
    data: np.ndarray
    masses: pd.DataFrame
    summary: pd.DataFrame
    mechanisms: dict[str, Mechanism]


def _summary_row(label: str, mech: Mechanism, data: np.ndarray, truth: float, loss: str) -> dict[str, object]:
    out = mech.output(data)
    x = prepare_data(data, DEFAULT_DOMAIN, sort=False)
    if isinstance(out, LaplaceOutput):
        mean, sd = float(out.loc[0]), math.sqrt(2.0) * float(out.scale)
        near = _laplace_interval(mean, float(out.scale), truth - 0.5, truth + 0.5)
    else:
        assert isinstance(out, DiscreteOutput)
        p, r = out.probs[0], out.support
        mean = float(p @ r)
        sd = float(np.sqrt(max(p @ (r - mean) ** 2, 0.0)))
        near = float(p[np.abs(r - truth) <= 0.5].sum())
    erl_sq = float(expected_response_loss(out, x, np.array([truth]), "squared")[0])
    erl_q = float(expected_response_loss(out, x, np.array([truth]), "quantile")[0])
    return {"mechanism": label, "mean response": mean, "std": sd, "P(|r − truth| ≤ 0.5)": near,
            "expected squared error": erl_sq, "expected quantile error": erl_q,
            "trained loss": loss}


def _laplace_interval(loc: float, scale: float, a: float, b: float) -> float:
    if scale == 0.0:
        return float(a <= loc <= b)

    def cdf(t: float) -> float:
        z = (t - loc) / scale
        return 0.5 * math.exp(z) if z < 0 else 1.0 - 0.5 * math.exp(-z)

    return cdf(b) - cdf(a)


@functools.lru_cache(maxsize=16)
def data_blind(query: str, loss: str, kind: str) -> DataBlindMechanism:
    """The data-blind baseline fitted on the lab's default training datasets (cached)."""
    cfg = LabConfig(mechanism=kind, query=query, k=1.0, loss=loss)
    train = train_data(cfg.distribution, cfg.num_train, cfg.data_seed)
    cands = query_spec(query).grid(1001 if kind == "laplace" else cfg.n_responses)
    return fit_data_blind(query, loss, train, candidates=cands)


def compare(mechanism: LearnedLaplaceMechanism | LearnedExponentialMechanism, data: np.ndarray, *,
            epsilon: float, loss: str = "") -> Comparison:
    """The learned mechanism at ``epsilon`` next to the experts' mechanism at the same ε and
    the data-blind constant, on one dataset: binned response laws and a summary table
    (mean, spread, mass near the truth, exact expected losses)."""
    eps = check_epsilon(epsilon)
    kind = "laplace" if isinstance(mechanism, LearnedLaplaceMechanism) else "exponential"
    loss = loss or default_loss(kind, mechanism.query)
    learned = mechanism.with_epsilon(eps)
    query = mechanism.query
    mechs: dict[str, Mechanism] = {f"learned ({learned.name})": learned,
                                   f"expert ({expert_mechanism(query, epsilon=eps).name})":
                                       expert_mechanism(query, epsilon=eps, domain=mechanism.domain)}
    if mechanism.domain == DEFAULT_DOMAIN:
        mechs["data-blind"] = data_blind(query, loss, kind)
    truth = float(np.asarray(query_values(query, prepare_data(data, mechanism.domain, sort=False)))[0])
    masses = response_distribution(mechs, data, query=query, domain=mechanism.domain)
    summary = pd.DataFrame([_summary_row(label, m, data, truth, loss if label.startswith("learned") else "")
                            for label, m in mechs.items()])
    return Comparison(query=query, truth=truth, data=np.asarray(data), masses=masses, summary=summary,
                      mechanisms=mechs)


def fig5_curves(directory: str | Path = RESULTS_DIR) -> pd.DataFrame:
    """The precomputed Fig. 5 summary (``fig5_summary.csv``); empty if it is not there."""
    path = Path(directory) / "fig5_summary.csv"
    if not path.is_file():
        return pd.DataFrame()
    return pd.read_csv(path)


def query_label(query: str) -> str:
    """Human name of a query."""
    return query_spec(query).label
