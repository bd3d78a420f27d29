"""Datasets for the mechanism lab: a hierarchical mixture of truncated Gaussians on [0, 10].

Shavit & Gjura (2019), Sec. 4.1: every dataset holds n = 100 reals drawn from a mixture of
truncated Gaussians on [0, 10] whose parameters (mean, variance, relative weight) are drawn
afresh for each dataset; 4 components to train, 2 to test generalisation. The paper defers
the hyper-distribution to "forthcoming work", so it is fixed here and stated on every card:

* component means ~ Uniform(low, high);
* component standard deviations ~ LogUniform(std_range) × (high − low) / 10;
* mixture weights ~ Dirichlet(concentration · 1);
* each point: pick a component by weight, draw from N(mean, std²) truncated to [low, high]
  (``scipy.stats.truncnorm``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import truncnorm

from privcore.validation import check_in_range, check_int, check_positive

__all__ = ["DEFAULT_DOMAIN", "DataDomain", "TruncatedGaussianMixture", "as_generator"]


def as_generator(seed: int | np.random.Generator) -> np.random.Generator:
    """A numpy Generator from an int seed (explicit, reproducible) or an existing Generator.

    Lab datasets are synthetic training/evaluation data, not private data, so a seeded
    PCG64 is appropriate here; releases use :mod:`privcore.mechanisms.sampling` instead.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(check_int("seed", seed, minimum=0))


@dataclass(frozen=True, kw_only=True)
class DataDomain:
    """The public data domain: ``n`` reals in ``[low, high]`` per dataset.

    Neighbouring datasets differ in one record (bounded DP, n fixed), so two neighbours
    are at ℓ1 distance at most ``width = high − low`` (the paper's c, Sec. 3).
    """

    low: float = 0.0
    high: float = 10.0
    n: int = 100

    def __post_init__(self) -> None:
        check_in_range("low", self.low, -math.inf, math.inf)
        check_in_range("high", self.high, self.low, math.inf)
        check_int("n", self.n, minimum=1)

    @property
    def width(self) -> float:
        """c = high − low: the largest change of one record."""
        return float(self.high) - float(self.low)

    @property
    def center(self) -> float:
        """Midpoint of the domain (the centre of the verification box)."""
        return (float(self.low) + float(self.high)) / 2.0


DEFAULT_DOMAIN = DataDomain()


@dataclass(frozen=True, kw_only=True)
class TruncatedGaussianMixture:
    """Distribution over datasets: a random K-component truncated-Gaussian mixture per dataset.

    Shavit & Gjura Sec. 4.1 (K = 4 to train, K = 2 to test); hyper-distribution as in the
    module docstring.
    """

    n_components: int = 4
    domain: DataDomain = DEFAULT_DOMAIN
    std_range: tuple[float, float] = (0.3, 3.0)
    concentration: float = 1.0

    def __post_init__(self) -> None:
        check_int("n_components", self.n_components, minimum=1)
        lo, hi = self.std_range
        check_positive("std_range[0]", lo)
        check_in_range("std_range[1]", hi, lo, math.inf, low_open=False)
        check_positive("concentration", self.concentration)

    def describe(self) -> dict[str, object]:
        """A JSON-ready description (for model cards and CSV headers)."""
        d = asdict(self)
        d["family"] = "hierarchical mixture of truncated Gaussians (Shavit & Gjura Sec. 4.1)"
        return d

    def sample(self, num_datasets: int, *, seed: int | np.random.Generator) -> np.ndarray:
        """``num_datasets`` datasets as a float64 array of shape ``(num_datasets, n)``."""
        num = check_int("num_datasets", num_datasets, minimum=1)
        rng = as_generator(seed)
        dom, k, n = self.domain, self.n_components, self.domain.n
        means = rng.uniform(dom.low, dom.high, size=(num, k))
        log_lo, log_hi = np.log(self.std_range[0]), np.log(self.std_range[1])
        stds = np.exp(rng.uniform(log_lo, log_hi, size=(num, k))) * dom.width / 10.0
        weights = rng.dirichlet(np.full(k, float(self.concentration)), size=num)
        # Component of every point by inverse CDF on the cumulative weights.
        cum = np.cumsum(weights, axis=1)
        cum[:, -1] = 1.0
        u = rng.random((num, n))
        comp = (u[:, :, None] > cum[:, None, :]).sum(axis=2)
        mu = np.take_along_axis(means, comp, axis=1)
        sd = np.take_along_axis(stds, comp, axis=1)
        x = truncnorm.rvs((dom.low - mu) / sd, (dom.high - mu) / sd, loc=mu, scale=sd, size=mu.shape,
                          random_state=rng)  # size: scipy would squeeze a leading 1
        return np.clip(np.asarray(x, dtype=np.float64), dom.low, dom.high)
