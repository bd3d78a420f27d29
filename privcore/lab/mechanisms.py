"""Learned and hand-designed ε-DP mechanisms of the mechanism lab (Shavit & Gjura 2019).

Privacy model: a dataset is n reals; neighbours differ in one record (n fixed, bounded DP).
Every mechanism first clips each record to the public domain [low, high] (1-Lipschitz per
coordinate), so neighbours are at ℓ1 distance ≤ c = high − low, and the learned ones then
sort the record vector: sorting is non-expansive in every ℓp (‖sort x − sort y‖_p ≤
‖x − y‖_p, a rearrangement inequality), so it keeps that distance ≤ c and makes the
mechanism a function of the multiset, not of the order of the records.

* :class:`LearnedLaplaceMechanism` (Sec. 2.1): f(x) + Lap(k·c/ε) with f k-Lipschitz
  (ℓ1 → |·|). |f(x) − f(x')| ≤ k·‖x − x'‖₁ ≤ k·c, so this is the Laplace mechanism with
  sensitivity k·c: ε-DP.
* :class:`LearnedExponentialMechanism` (Sec. 2.2): P(r) ∝ exp(ε·u(x, r) / (2·k·c)) on a
  finite grid, u k-Lipschitz in x for each r, so Δu = k·c and this is McSherry & Talwar's
  exponential mechanism with the factor 2: ε-DP. The paper's Pexp uses exp(ε·u/(c·k))
  without the 2, which is only 2ε-DP for a utility that is not monotone in the data; we do
  not use it.
* Baselines: :class:`DataBlindMechanism` (the best constant answer for the dataset
  distribution: 0-DP, the paper's dotted line in Fig. 5), :class:`ExpertLaplaceMechanism`
  (mean: sensitivity c/n; variance: (n − 1)c²/n², the largest change of the population
  variance when one record moves in [low, high] — V is a convex parabola in that record
  with curvature (n − 1)/n², minimal at the mean of the others), and
  :class:`QuantileExponentialMechanism` (median, 10th percentile: utility −|#{x_i < r} − p·n|,
  sensitivity 1, P ∝ exp(ε·u/2) on the same grid).

Randomness of the releases is secure by default (``rng=None``: the OS CSPRNG); an int or a
``numpy.random.Generator`` seeds it explicitly (tests, reproducible demos). Laplace noise is
the project's exact discrete Laplace on a fine grid (:mod:`privcore.mechanisms.sampling`,
immune to Mironov's floating-point attack; its scale is ≥ the nominal Δ/ε by ~1e-9). The
exponential mechanisms draw by inverse CDF over the finite grid with one 53-bit uniform from
:class:`~privcore.mechanisms.sampling.RandomBits`; float rounding realises each probability
to within ~2⁻⁵² absolute, so formally they are (ε, δ)-DP with δ ≤ (1 + e^ε)·R·2⁻⁵² (≈ 1e-14
for R = 50 responses, ε ≤ 1) — nothing observable. The learned mechanisms evaluate the baked
float32 weights in float64: the very arrays the Lipschitz engine verifies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

import numpy as np
import torch
from scipy.special import log_softmax
from torch import nn

from privcore.errors import CertificationError
from privcore.lab.data import DEFAULT_DOMAIN, DataDomain
from privcore.lab.queries import QUERIES, discrete_erl, laplace_erl, loss_matrix, query_spec, query_values
from privcore.mechanisms.sampling import NoisePlan, RandomBits, add_noise, plan_laplace
from privcore.validation import check_choice, check_epsilon, check_finite_array, check_positive

__all__ = [
    "DataBlindMechanism",
    "DiscreteOutput",
    "ExpertLaplaceMechanism",
    "LaplaceOutput",
    "LearnedExponentialMechanism",
    "LearnedLaplaceMechanism",
    "Mechanism",
    "QuantileExponentialMechanism",
    "expected_response_loss",
    "expert_mechanism",
    "fit_data_blind",
    "prepare_data",
]


# ----------------------------------------------------------------------------------------- outputs
@dataclass(frozen=True, kw_only=True, eq=False)
class LaplaceOutput:
    """The output law loc + Lap(scale), one ``loc`` per dataset."""

    loc: np.ndarray
    scale: float

    def density(self, grid: np.ndarray) -> np.ndarray:
        """Density on ``grid`` for every dataset: shape ``(B, G)`` (needs scale > 0)."""
        g = np.asarray(grid, dtype=np.float64)[None, :]
        return np.exp(-np.abs(g - self.loc[:, None]) / self.scale) / (2.0 * self.scale)


@dataclass(frozen=True, kw_only=True, eq=False)
class DiscreteOutput:
    """A law on the finite ``support``: ``probs[b, j] = P(response = support[j])``."""

    support: np.ndarray
    probs: np.ndarray


Output = LaplaceOutput | DiscreteOutput


def expected_response_loss(output: Output, data: np.ndarray, truth: np.ndarray, loss: str) -> np.ndarray:
    """Exact ERL per dataset over the mechanism's randomness (Shavit & Gjura Defs. 2.2, Sec. 2.2)."""
    def t(a: object) -> torch.Tensor:  # a float64 copy (inputs may be read-only arrays)
        return torch.tensor(np.asarray(a, dtype=np.float64))

    x, q = t(data), t(truth)
    if isinstance(output, LaplaceOutput):
        return laplace_erl(loss, x, q, t(output.loc), float(output.scale)).numpy()
    r, p = t(output.support), t(output.probs)
    return discrete_erl(loss, x, q, r, p).numpy()


def prepare_data(data: object, domain: DataDomain, *, sort: bool) -> np.ndarray:
    """Checked float64 datasets of shape ``(B, n)``, clipped to the domain (and sorted).

    One dataset may be given as a vector of n records. Clipping bounds each record's
    influence (the mechanisms' privacy proof needs ‖x − x'‖₁ ≤ c for neighbours).
    """
    x = check_finite_array("data", data)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != domain.n:
        raise ValueError(f"data must hold datasets of exactly n={domain.n} records, got shape {x.shape}")
    x = np.clip(x, domain.low, domain.high)
    return np.sort(x, axis=1) if sort else x


def _single(data: object, domain: DataDomain, *, sort: bool) -> np.ndarray:
    x = prepare_data(data, domain, sort=sort)
    if x.shape[0] != 1:
        raise ValueError(f"release takes one dataset of n={domain.n} records, got {x.shape[0]} datasets")
    return x


def _l11(w: np.ndarray) -> Fraction:
    """‖W‖_{1→1} (max column abs-sum) exactly, in rational arithmetic on the stored floats.

    Only columns whose float64 sum is within 1e-9 of the largest can be the maximum (the
    float64 sums are accurate to ~1e-14 relative), so only those are summed exactly.
    """
    a = np.abs(np.asarray(w, dtype=np.float64))
    sums = a.sum(axis=0)
    top = float(sums.max())
    cand = np.flatnonzero(sums >= top * (1.0 - 1e-9))
    return max(sum(map(Fraction, a[:, j].tolist()), Fraction(0)) for j in cand)


def _certify_product(norms: list[Fraction], k: float, what: str) -> float:
    """The exact product of the layer norms, refused unless ≤ k; returned rounded up to a float."""
    prod = math.prod(norms, start=Fraction(1))
    if prod > Fraction(k):
        raise CertificationError(
            f"{what}: the product of the layers' ℓ1 operator norms is {float(prod):.9g} > k={k:g}; "
            "the network is not k-Lipschitz, refusing to build the mechanism"
        )
    up = float(prod)
    return up if Fraction(up) >= prod else math.nextafter(up, math.inf)


def _frozen(a: object, dtype: type) -> np.ndarray:
    """A private read-only copy: the certified weights cannot be changed after the check."""
    out = np.array(a, dtype=dtype, copy=True)
    out.setflags(write=False)
    return out


def _relu(a: np.ndarray) -> np.ndarray:
    return np.maximum(a, 0.0)


class Mechanism(Protocol):
    """What the lab, its experiments and its dashboard page use of a mechanism."""

    query: str
    name: str

    def output(self, data: object) -> Output:
        """The mechanism's output law on each dataset."""
        ...

    def release(self, data: object, *, rng: int | np.random.Generator | None = None) -> float:
        """One ε-DP release on one dataset."""
        ...


class _Base:
    """Shared: ERL evaluation on a batch of datasets."""

    query: str
    domain: DataDomain

    def output(self, data: object) -> Output:  # pragma: no cover - overridden
        raise NotImplementedError

    def expected_loss(self, data: object, loss: str) -> np.ndarray:
        """Exact expected response loss on each dataset (over the mechanism's randomness)."""
        x = prepare_data(data, self.domain, sort=False)
        truth = np.asarray(query_values(self.query, x))
        return expected_response_loss(self.output(x), x, truth, loss)


def _discrete_release(support: np.ndarray, probs: np.ndarray, rng: int | np.random.Generator | None) -> float:
    """Inverse-CDF draw from a finite law with one 53-bit uniform (secure unless seeded)."""
    cum = np.cumsum(np.asarray(probs, dtype=np.float64))
    u = float(RandomBits(rng).uniform53(1)[0]) * cum[-1]
    j = int(np.searchsorted(cum, u, side="right"))
    return float(support[min(j, len(support) - 1)])


def _laplace_release(value: float, *, sensitivity: float, epsilon: float,
                     rng: int | np.random.Generator | None) -> float:
    """value + Lap(sensitivity/ε) by the project's exact discrete-Laplace sampler."""
    plan = plan_laplace(sensitivity=sensitivity, epsilon=epsilon, numel=1)
    return float(add_noise(np.array([value]), plan, rng)[0])


# ----------------------------------------------------------------------------------------- learned
@dataclass(frozen=True, kw_only=True, eq=False)
class LearnedLaplaceMechanism(_Base):
    """f(x) + Lap(k·c/ε), f a baked k-Lipschitz ReLU network (Shavit & Gjura Sec. 2.1). ε-DP.

    ``weights``/``biases``: float32 layers of f (input = the sorted, clipped records).
    """

    query: str
    epsilon: float
    k: float
    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]
    domain: DataDomain = DEFAULT_DOMAIN
    sort_input: bool = True
    name: str = "learned Laplace"
    certified_bound: float = field(init=False)

    def __post_init__(self) -> None:
        check_choice("query", self.query, QUERIES)
        check_epsilon(self.epsilon)
        check_positive("k", self.k)
        ws = tuple(_frozen(w, np.float32) for w in self.weights)
        bs = tuple(_frozen(b, np.float32) for b in self.biases)
        if not ws or len(ws) != len(bs) or ws[0].shape[1] != self.domain.n or ws[-1].shape[0] != 1:
            raise ValueError("weights must map n records to one number, with one bias per layer")
        object.__setattr__(self, "weights", ws)
        object.__setattr__(self, "biases", bs)
        cert = _certify_product([_l11(w) for w in ws], self.k, "learned Laplace network")
        object.__setattr__(self, "certified_bound", cert)

    @property
    def sensitivity(self) -> float:
        """Global sensitivity k·c of f under a one-record change."""
        return self.k * self.domain.width

    @property
    def noise_scale(self) -> float:
        """Nominal Laplace scale k·c/ε (the sampler draws :meth:`noise_plan`'s, ≥ it by ~1e-9)."""
        return self.sensitivity / self.epsilon

    def noise_plan(self) -> NoisePlan:
        """How the exact sampler realises Lap(k·c/ε) for one release."""
        return plan_laplace(sensitivity=self.sensitivity, epsilon=self.epsilon, numel=1)

    def predict(self, data: object) -> np.ndarray:
        """f(x) per dataset (the noiseless centre; never release it)."""
        h = prepare_data(data, self.domain, sort=self.sort_input)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ w.astype(np.float64).T + b.astype(np.float64)
            if i < last:
                h = _relu(h)
        return h[:, 0]

    def output(self, data: object) -> LaplaceOutput:
        """f(x) + Lap(k·c/ε) per dataset."""
        return LaplaceOutput(loc=self.predict(data), scale=self.noise_scale)

    def release(self, data: object, *, rng: int | np.random.Generator | None = None) -> float:
        """One ε-DP release f(x) + Lap(k·c/ε) (noise secure unless ``rng`` seeds it)."""
        centre = float(self.predict(_single(data, self.domain, sort=False))[0])
        return _laplace_release(centre, sensitivity=self.sensitivity, epsilon=self.epsilon, rng=rng)

    def with_epsilon(self, epsilon: float) -> LearnedLaplaceMechanism:
        """The same network released at another ε (f does not depend on ε for squared loss)."""
        return LearnedLaplaceMechanism(query=self.query, epsilon=epsilon, k=self.k, weights=self.weights,
                                       biases=self.biases, domain=self.domain, sort_input=self.sort_input,
                                       name=self.name)

    def sequentials(self) -> list[nn.Sequential]:
        """f as one float64 ``Linear``/``ReLU`` ``nn.Sequential`` (for the Lipschitz engine)."""
        mods: list[nn.Module] = []
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            if i:
                mods.append(nn.ReLU())
            mods.append(_linear(w, b))
        return [nn.Sequential(*mods)]


def _linear(w: np.ndarray, b: np.ndarray) -> nn.Linear:
    lin = nn.Linear(w.shape[1], w.shape[0], dtype=torch.float64)
    with torch.no_grad():
        lin.weight.copy_(torch.as_tensor(np.asarray(w, dtype=np.float64)))
        lin.bias.copy_(torch.as_tensor(np.asarray(b, dtype=np.float64)))
    return lin


@dataclass(frozen=True, kw_only=True, eq=False)
class LearnedExponentialMechanism(_Base):
    """P(r) ∝ exp(ε·u(x, r) / (2·k·c)) on a response grid, u a baked network that is
    k-Lipschitz in x for every r (Shavit & Gjura Sec. 2.2 with the provably ε-DP factor 2).

    ``arrays``: ``d0, e0, d1, e1`` (G_d), ``a`` (head on z_d), ``c`` (per-response biases,
    R × hidden), ``w, v`` (output), ``responses`` (R,).
    """

    query: str
    epsilon: float
    k: float
    arrays: dict[str, np.ndarray]
    domain: DataDomain = DEFAULT_DOMAIN
    sort_input: bool = True
    name: str = "learned exponential"
    certified_bound: float = field(init=False)

    _KEYS = ("d0", "e0", "d1", "e1", "a", "c", "w", "v", "responses")

    def __post_init__(self) -> None:
        check_choice("query", self.query, QUERIES)
        check_epsilon(self.epsilon)
        check_positive("k", self.k)
        missing = [key for key in self._KEYS if key not in self.arrays]
        if missing:
            raise ValueError(f"arrays is missing {missing}")
        arr = {key: _frozen(self.arrays[key], np.float32) for key in self._KEYS[:-1]}
        arr["responses"] = _frozen(self.arrays["responses"], np.float64)
        if arr["d0"].shape[1] != self.domain.n or arr["c"].shape[0] != arr["responses"].shape[0]:
            raise ValueError("arrays do not fit the domain's n or the response grid")
        object.__setattr__(self, "arrays", arr)
        cert = _certify_product([_l11(arr[key]) for key in ("d0", "d1", "a", "w")], self.k,
                                "learned utility network")
        object.__setattr__(self, "certified_bound", cert)

    @property
    def responses(self) -> np.ndarray:
        """The finite response set R (Sec. 4.2: 50 points)."""
        return self.arrays["responses"]

    @property
    def temperature(self) -> float:
        """2·k·c/ε: the probabilities are ∝ exp(u / temperature)."""
        return 2.0 * self.k * self.domain.width / self.epsilon

    def utilities(self, data: object) -> np.ndarray:
        """u(x, r) for every dataset and response: ``(B, R)``."""
        x = prepare_data(data, self.domain, sort=self.sort_input)
        a = {key: v.astype(np.float64) for key, v in self.arrays.items()}
        z = _relu(x @ a["d0"].T + a["e0"]) @ a["d1"].T + a["e1"]
        h = _relu((z @ a["a"].T)[:, None, :] + a["c"][None, :, :])
        return h @ a["w"][0] + a["v"][0]

    def log_probabilities(self, data: object) -> np.ndarray:
        """log P(r | x) = u/T − logsumexp(u/T), T = 2kc/ε: shape ``(B, R)`` (no underflow)."""
        return log_softmax(self.utilities(data) / self.temperature, axis=1)

    def output(self, data: object) -> DiscreteOutput:
        """The exponential-mechanism law on the grid for every dataset."""
        return DiscreteOutput(support=self.responses, probs=np.exp(self.log_probabilities(data)))

    def release(self, data: object, *, rng: int | np.random.Generator | None = None) -> float:
        """One ε-DP draw from the grid (inverse CDF; secure unless ``rng`` seeds it)."""
        out = self.output(_single(data, self.domain, sort=False))
        return _discrete_release(out.support, out.probs[0], rng)

    def with_epsilon(self, epsilon: float) -> LearnedExponentialMechanism:
        """The same utility network at another ε (still ε-DP; trained for its own ε)."""
        return LearnedExponentialMechanism(query=self.query, epsilon=epsilon, k=self.k, arrays=self.arrays,
                                           domain=self.domain, sort_input=self.sort_input, name=self.name)

    def sequentials(self) -> list[nn.Sequential]:
        """x ↦ u(x, r_j) for every response j, each a float64 ``Linear``/``ReLU`` chain (the
        Lipschitz engine composes the two consecutive affine maps)."""
        a = self.arrays
        nets = []
        for j in range(len(self.responses)):
            nets.append(nn.Sequential(
                _linear(a["d0"], a["e0"]), nn.ReLU(), _linear(a["d1"], a["e1"]),
                _linear(a["a"], a["c"][j]), nn.ReLU(), _linear(a["w"], a["v"]),
            ))
        return nets


# ----------------------------------------------------------------------------------------- baselines
@dataclass(frozen=True, kw_only=True, eq=False)
class DataBlindMechanism(_Base):
    """Always the same answer, chosen from the dataset distribution only (0-DP; Fig. 5's
    dotted baseline). Fit it with :func:`fit_data_blind`."""

    query: str
    value: float
    domain: DataDomain = DEFAULT_DOMAIN
    name: str = "data-blind"

    def output(self, data: object) -> DiscreteOutput:
        """A point mass at ``value``."""
        x = prepare_data(data, self.domain, sort=False)
        return DiscreteOutput(support=np.array([float(self.value)]), probs=np.ones((x.shape[0], 1)))

    def release(self, data: object, *, rng: int | np.random.Generator | None = None) -> float:
        """``value`` (independent of the data)."""
        _single(data, self.domain, sort=False)
        return float(self.value)


@dataclass(frozen=True, kw_only=True, eq=False)
class ExpertLaplaceMechanism(_Base):
    """q(x) + Lap(GS/ε) with the textbook global sensitivity (Dwork et al. 2006): mean c/n,
    population variance (n − 1)c²/n² (proof in the module docstring)."""

    query: str
    epsilon: float
    domain: DataDomain = DEFAULT_DOMAIN
    name: str = "standard Laplace"

    def __post_init__(self) -> None:
        check_choice("query", self.query, ("mean", "variance"))
        check_epsilon(self.epsilon)

    @property
    def sensitivity(self) -> float:
        """Global sensitivity of the query on [low, high]^n under one-record changes."""
        n, c = self.domain.n, self.domain.width
        return c / n if self.query == "mean" else (n - 1) * c * c / (n * n)

    def output(self, data: object) -> LaplaceOutput:
        """q(clip(x)) + Lap(GS/ε)."""
        x = prepare_data(data, self.domain, sort=False)
        loc = np.asarray(query_values(self.query, x))
        return LaplaceOutput(loc=loc, scale=self.sensitivity / self.epsilon)

    def release(self, data: object, *, rng: int | np.random.Generator | None = None) -> float:
        """One ε-DP release."""
        out = self.output(_single(data, self.domain, sort=False))
        centre = float(out.loc[0])
        return _laplace_release(centre, sensitivity=self.sensitivity, epsilon=self.epsilon, rng=rng)


@dataclass(frozen=True, kw_only=True, eq=False)
class QuantileExponentialMechanism(_Base):
    """Exponential mechanism for a quantile on a grid: u(x, r) = −|#{x_i < r} − p·n|, Δu = 1,
    P ∝ exp(ε·u/2) (McSherry & Talwar 2007; the experts' mechanism for the median and the
    10th percentile)."""

    query: str
    epsilon: float
    responses: np.ndarray
    domain: DataDomain = DEFAULT_DOMAIN
    name: str = "quantile exponential"

    def __post_init__(self) -> None:
        check_choice("query", self.query, ("median", "percentile10"))
        check_epsilon(self.epsilon)
        r = check_finite_array("responses", self.responses)
        if r.ndim != 1 or r.size < 1:
            raise ValueError(f"responses must be a non-empty vector, got shape {r.shape}")
        object.__setattr__(self, "responses", r)

    @property
    def p(self) -> float:
        """The quantile level: 0.5 (median) or 0.1."""
        return 0.5 if self.query == "median" else 0.1

    def utilities(self, data: object) -> np.ndarray:
        """−|#{x_i < r} − p·n| for every dataset and response."""
        x = prepare_data(data, self.domain, sort=False)
        counts = (x[:, None, :] < self.responses[None, :, None]).sum(axis=2)
        return -np.abs(counts - self.p * self.domain.n)

    def log_probabilities(self, data: object) -> np.ndarray:
        """log P(r | x) with P ∝ exp(ε·u/2): shape ``(B, R)``."""
        return log_softmax(self.epsilon * self.utilities(data) / 2.0, axis=1)

    def output(self, data: object) -> DiscreteOutput:
        """P ∝ exp(ε·u/2) on the grid."""
        return DiscreteOutput(support=self.responses, probs=np.exp(self.log_probabilities(data)))

    def release(self, data: object, *, rng: int | np.random.Generator | None = None) -> float:
        """One ε-DP draw from the grid."""
        out = self.output(_single(data, self.domain, sort=False))
        return _discrete_release(out.support, out.probs[0], rng)


def expert_mechanism(query: str, *, epsilon: float, domain: DataDomain = DEFAULT_DOMAIN,
                     n_responses: int = 50) -> ExpertLaplaceMechanism | QuantileExponentialMechanism:
    """The hand-designed mechanism the paper compares against for ``query``."""
    if query in ("mean", "variance"):
        return ExpertLaplaceMechanism(query=query, epsilon=epsilon, domain=domain)
    grid = query_spec(query, domain).grid(n_responses)
    return QuantileExponentialMechanism(query=query, epsilon=epsilon, responses=grid, domain=domain)


def fit_data_blind(query: str, loss: str, train_data: object, *, candidates: np.ndarray,
                   domain: DataDomain = DEFAULT_DOMAIN) -> DataBlindMechanism:
    """The constant answer among ``candidates`` with the smallest mean response loss on the
    training datasets (the "mechanism trained without seeing the data", Fig. 5). The mean
    of q over the training data is always a candidate too (the squared-loss optimum)."""
    x = prepare_data(train_data, domain, sort=False)
    truth = np.asarray(query_values(query, x))
    cands = np.unique(np.append(check_finite_array("candidates", candidates), truth.mean()))
    xt, qt = torch.as_tensor(x), torch.as_tensor(truth)
    mean_loss = loss_matrix(loss, xt, qt, torch.as_tensor(cands)).mean(dim=0).numpy()
    return DataBlindMechanism(query=query, value=float(cands[int(np.argmin(mean_loss))]), domain=domain)
