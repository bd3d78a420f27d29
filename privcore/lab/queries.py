"""Queries and response losses of the mechanism lab (Shavit & Gjura 2019, Secs. 2 and 4.2).

Queries on a dataset x ∈ [low, high]^n: mean, median, (population) variance and the 10th
percentile (numpy's default linear interpolation, ``torch.quantile`` agrees). Response
losses L(x, q(x), r) (Definition 2.1):

* ``squared``: (q(x) − r)²;
* ``quantile``: #{i : min(q(x), r) < x_i < max(q(x), r)}, the number of data points
  strictly between the true and the released statistic (Sec. 4.2).

Expected response losses (ERL, Definitions 2.2 and Sec. 2.2) are computed in closed form
over the mechanism's randomness: for a Laplace output loc + Lap(b),
E(q − loc − Z)² = (q − loc)² + 2b², and the expected quantile loss is
Σ_{x_i > q} P(loc + Z > x_i) + Σ_{x_i < q} P(loc + Z < x_i) with the Laplace CDF
(differentiable in loc, so it also trains); for a distribution on a finite response set
it is Σ_r L(x, q, r)·P(r).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from privcore.lab.data import DEFAULT_DOMAIN, DataDomain
from privcore.validation import check_choice

__all__ = [
    "LOSSES",
    "QUERIES",
    "QuerySpec",
    "default_loss",
    "discrete_erl",
    "laplace_erl",
    "loss_matrix",
    "query_spec",
    "query_values",
]

QUERIES: tuple[str, ...] = ("mean", "median", "variance", "percentile10")
LOSSES: tuple[str, ...] = ("squared", "quantile")


@dataclass(frozen=True, kw_only=True)
class QuerySpec:
    """A query with the interval its answers live in (the exponential mechanism's grid)."""

    name: str
    label: str
    low: float
    high: float

    def grid(self, n_responses: int) -> np.ndarray:
        """``n_responses`` equally spaced responses on [low, high] (Sec. 4.2: 50 on [0, 10])."""
        return np.linspace(self.low, self.high, n_responses)


def query_spec(name: str, domain: DataDomain = DEFAULT_DOMAIN) -> QuerySpec:
    """The query's answer range: the data domain, except the variance, whose answers lie in
    [0, (high − low)²/4] (Popoviciu's inequality); the paper's single [0, 10] grid cannot
    answer variances above 10."""
    check_choice("query", name, QUERIES)
    labels = {"mean": "mean", "median": "median", "variance": "variance", "percentile10": "10th percentile"}
    if name == "variance":
        return QuerySpec(name=name, label=labels[name], low=0.0, high=domain.width**2 / 4.0)
    return QuerySpec(name=name, label=labels[name], low=float(domain.low), high=float(domain.high))


def default_loss(mechanism: str, query: str) -> str:
    """Response loss used unless another is asked for.

    Squared error everywhere except the exponential mechanism for the median and the 10th
    percentile, which uses the quantile error (Fig. 4 trains the median with it). The paper's
    text names the quantile error for "the variance and 10th-percentile queries", but a
    count of data points between two variances has no meaning (a variance is not a location
    in the data), so the variance keeps the squared error.
    """
    check_choice("mechanism", mechanism, ("laplace", "exponential"))
    check_choice("query", query, QUERIES)
    if mechanism == "exponential" and query in ("median", "percentile10"):
        return "quantile"
    return "squared"


def _torch_query(name: str, x: torch.Tensor) -> torch.Tensor:
    if name == "mean":
        return x.mean(dim=-1)
    if name == "median":
        return torch.quantile(x, 0.5, dim=-1)
    if name == "variance":
        return x.var(dim=-1, unbiased=False)
    if name == "percentile10":
        return torch.quantile(x, 0.1, dim=-1)
    raise ValueError(f"query must be one of {', '.join(QUERIES)}, got {name!r}")


def query_values(name: str, data: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
    """q(x) for every dataset (row) of ``data``; numpy in → numpy out, torch in → torch out."""
    check_choice("query", name, QUERIES)
    if isinstance(data, torch.Tensor):
        return _torch_query(name, data)
    return _torch_query(name, torch.tensor(np.asarray(data, dtype=np.float64))).numpy()


def loss_matrix(loss: str, data: torch.Tensor, truth: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
    """L(x_b, q_b, r_j) for every dataset b and response j: shape ``(B, R)``.

    ``responses`` has shape ``(R,)`` (shared grid) or ``(B, R)``.
    """
    check_choice("loss", loss, LOSSES)
    r = responses if responses.ndim == 2 else responses.unsqueeze(0).expand(truth.shape[0], -1)
    q = truth.unsqueeze(1)
    if loss == "squared":
        return (q - r) ** 2
    xs = torch.sort(data, dim=1).values.contiguous()
    lo = torch.minimum(q, r).to(xs.dtype).contiguous()
    hi = torch.maximum(q, r).to(xs.dtype).contiguous()
    below_hi = torch.searchsorted(xs, hi, side="left")  # #{x_i < hi}
    upto_lo = torch.searchsorted(xs, lo, side="right")  # #{x_i ≤ lo}
    return (below_hi - upto_lo).clamp(min=0).to(data.dtype)


def discrete_erl(
    loss: str, data: torch.Tensor, truth: torch.Tensor, responses: torch.Tensor, probs: torch.Tensor
) -> torch.Tensor:
    """Σ_r L(x, q(x), r)·P(r) per dataset (Shavit & Gjura Sec. 2.2): shape ``(B,)``."""
    return (loss_matrix(loss, data, truth, responses) * probs).sum(dim=1)


def _laplace_cdf(t: torch.Tensor, scale: float) -> torch.Tensor:
    if scale == 0.0:
        return (t >= 0).to(t.dtype)
    return 0.5 + 0.5 * torch.sign(t) * (-torch.expm1(-t.abs() / scale))


def laplace_erl(
    loss: str, data: torch.Tensor, truth: torch.Tensor, loc: torch.Tensor, scale: float
) -> torch.Tensor:
    """Exact E over Z ~ Lap(scale) of L(x, q(x), loc + Z) per dataset: shape ``(B,)``.

    Shavit & Gjura Sec. 2.1 (squared error: (q − loc)² + 2·scale²); quantile error by the
    Laplace CDF as in the module docstring. ``scale = 0`` is the deterministic release.
    """
    check_choice("loss", loss, LOSSES)
    if loss == "squared":
        return (truth - loc) ** 2 + 2.0 * scale**2
    q = truth.unsqueeze(1)
    f = loc.unsqueeze(1)
    cdf = _laplace_cdf(data - f, scale)  # P(loc + Z < x_i) (ties have probability 0 if scale > 0)
    above = (data > q).to(data.dtype) * (1.0 - cdf)
    below = (data < q).to(data.dtype) * cdf
    if scale == 0.0:  # deterministic: strictly between means x_i < loc (above) or x_i > loc (below)
        above = (data > q).to(data.dtype) * (data < f).to(data.dtype)
        below = (data < q).to(data.dtype) * (data > f).to(data.dtype)
    return (above + below).sum(dim=1)
