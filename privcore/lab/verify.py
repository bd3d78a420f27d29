"""Verify a learned mechanism's Lipschitz bound with the project's exact Lipschitz engine.

The mechanisms' privacy rests on "f (or u(·, r) for every r) is k-Lipschitz from ℓ1 to |·|
over the data domain". By construction the product of the baked layers' ℓ1 operator norms
is ≤ k (checked again when a mechanism is built); here the engine of
:mod:`privcore.lipschitz` (LipMIP, Jordan & Dimakis 2020) bounds the *exact* constant
sup ‖∇f(x)‖_{1→1} over the box [low, high]^n — centre (low + high)/2, ℓ∞ radius c/2 —
which covers every (clipped, sorted) input. Its ``upper`` is a certified bound even when the
MIP stops at a time limit; ``exact`` says whether it was solved to optimality. The check
passes when every ``upper`` ≤ k·(1 + 1e-6).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from privcore.errors import CertificationError
from privcore.lab.mechanisms import LearnedExponentialMechanism, LearnedLaplaceMechanism

__all__ = ["LipschitzVerification", "NetCheck", "verify_mechanism"]

TOLERANCE = 1e-6


@dataclass(frozen=True, kw_only=True)
class NetCheck:
    """The engine's certificate for one network (f, or x ↦ u(x, r) for one response r)."""

    label: str
    upper: float
    lower: float
    exact: bool
    solver: str
    seconds: float


@dataclass(frozen=True, kw_only=True)
class LipschitzVerification:
    """All certificates of one mechanism against its stated k."""

    k: float
    layer_product: float
    checks: tuple[NetCheck, ...]

    @property
    def upper(self) -> float:
        """Largest certified upper bound over the checked networks."""
        return max(c.upper for c in self.checks)

    @property
    def lower(self) -> float:
        """Largest proven lower bound (a point where the gradient is that large)."""
        return max(c.lower for c in self.checks)

    @property
    def exact(self) -> bool:
        """Every MIP solved to optimality."""
        return all(c.exact for c in self.checks)

    @property
    def passed(self) -> bool:
        """Every certified upper bound ≤ k·(1 + 1e-6)."""
        return self.upper <= self.k * (1.0 + TOLERANCE)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready summary (for model cards)."""
        return {
            "k": self.k,
            "layer_product": self.layer_product,
            "engine_upper": self.upper,
            "engine_lower": self.lower,
            "exact": self.exact,
            "passed": self.passed,
            "solvers": sorted({c.solver for c in self.checks}),
            "n_networks": len(self.checks),
            "seconds": sum(c.seconds for c in self.checks),
            "checks": [asdict(c) for c in self.checks],
        }


def verify_mechanism(
    mechanism: LearnedLaplaceMechanism | LearnedExponentialMechanism,
    *,
    time_limit: float | None = None,
    solver: str = "auto",
    certifier: str = "exact",
    responses: Sequence[int] | None = None,
    require: bool = False,
) -> LipschitzVerification:
    """Certify the exact global ℓ1 Lipschitz constant of the mechanism's network(s) over the
    data domain with :func:`privcore.lipschitz.local_lipschitz` (module docstring).

    ``responses`` limits the exponential mechanism's check to some grid indices (all by
    default). ``certifier``: ``exact`` (LipMIP; ``exact`` tells whether it reached optimality),
    or the engine's cheaper certified relaxations ``lp`` / ``interval`` (``exact`` only when
    their bound meets the engine's verified lower bound). With ``require=True`` a
    failed check raises :class:`CertificationError`.
    """
    from privcore.lipschitz import local_lipschitz

    dom = mechanism.domain
    centre = np.full(dom.n, dom.center)
    radius = dom.width / 2.0
    nets = mechanism.sequentials()
    if isinstance(mechanism, LearnedExponentialMechanism):
        idx = range(len(nets)) if responses is None else [int(j) for j in responses]
        labelled = [(f"u(x, r={mechanism.responses[j]:.4g})", nets[j]) for j in idx]
    else:
        labelled = [("f(x)", nets[0])]
    checks = []
    for label, net in labelled:
        t0 = time.perf_counter()
        cert = local_lipschitz(net, centre, radius, input_norm="l1", output_norm="l1", solver=solver,
                               time_limit=time_limit, certifier=certifier)
        # The constant is known exactly when the MIP reached optimality, or when the certified
        # upper bound meets the verified lower bound (a point with that gradient norm).
        exact = (bool(cert.exact) and (certifier == "exact" or cert.solver == "closed-form")) or (
            float(cert.upper) - float(cert.lower) <= 1e-9 * float(cert.upper))
        checks.append(NetCheck(label=label, upper=float(cert.upper), lower=float(cert.lower),
                               exact=exact, solver=f"{certifier}:{cert.solver}",
                               seconds=time.perf_counter() - t0))
    report = LipschitzVerification(k=mechanism.k, layer_product=mechanism.certified_bound,
                                   checks=tuple(checks))
    if require and not report.passed:
        raise CertificationError(
            f"the Lipschitz engine's certified bound {report.upper:.9g} exceeds k={mechanism.k:g}; "
            "the mechanism must not be used"
        )
    return report
