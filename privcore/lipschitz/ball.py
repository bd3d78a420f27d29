"""One engine query: a ReLU network on the ℓ∞ ball ``B(center, radius)`` under a pair of norms.

Every question the engine answers — the value L(f, B) (:func:`~privcore.lipschitz.engine.local_lipschitz`)
or the decision "L(f, B) ≤ τ?" (:func:`~privcore.lipschitz.decide.decide_exact`) — is asked of a
:class:`Ball`. It is validated once and caches what every step needs: the box, the interval
bounds on hidden pre-activations (IBP), the unstable neurons and the interval upper bound on L.

Region and norms (docs/DESIGN.md): the region is always the ℓ∞ box ``[center − r, center + r]``;
:class:`~privcore.lipschitz.norms.Norms` only chooses the operator norm of the Jacobian: ℓ∞→ℓ1
(default; the product's d_X = ℓ∞, d_Y = ℓ1), ℓ∞→ℓ∞, ℓ1→ℓ1 or ℓ1→ℓ∞.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from privcore.lipschitz.bounds import ForwardBounds, box_around, forward_bounds, interval_upper_bound
from privcore.lipschitz.network import ReluNetwork, as_network
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.pair_interval import pair_interval_bound
from privcore.validation import check_finite_array, check_in_range

__all__ = ["MAX_PREACTIVATION", "MAX_RADIUS", "Ball"]

#: largest ball radius the engine accepts: latent balls live within a few units of the origin, and
#: far larger boxes make interval bounds overflow float64
MAX_RADIUS = 1e6
#: largest |pre-activation bound| over a box that the engine certifies on: HiGHS reads 1e20 as
#: infinity, and big-M constants far above 1e12 swamp the solvers' feasibility tolerance
MAX_PREACTIVATION = 1e12


@dataclass(frozen=True, eq=False, kw_only=True)
class Ball:
    """``B(center, radius)`` of ``net`` under ``norms``; build it with :meth:`of` (validated)."""

    net: ReluNetwork
    center: np.ndarray
    radius: float
    norms: Norms

    @classmethod
    def of(
        cls, net: Any, center: Any, radius: Any, *, input_norm: str = "linf", output_norm: str = "l1"
    ) -> Ball:
        """Validate a query. The query's own parameters are checked before the network is parsed
        (a torch module of Linear and ReLU layers, or a :class:`ReluNetwork`)."""
        c = check_finite_array("center", center).reshape(-1)
        r = check_in_range("radius", radius, 0.0, MAX_RADIUS, high_open=False)
        norms = Norms(input=input_norm, output=output_norm)
        parsed = as_network(net)
        if c.shape[0] != parsed.in_dim:
            raise ValueError(
                f"center must have the network's input dimension {parsed.in_dim}, got {c.shape[0]}"
            )
        ball = cls(net=parsed, center=c, radius=r, norms=norms)
        ball.fwd  # noqa: B018 - refuse a box whose bounds leave the certifiable range now, not mid-chain
        return ball

    @cached_property
    def box(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)`` = ``center ∓ radius``."""
        return box_around(self.center, self.radius)

    @cached_property
    def fwd(self) -> ForwardBounds:
        """Interval bounds on every hidden pre-activation over the box; ValueError naming center and
        radius when one is not finite or exceeds :data:`MAX_PREACTIVATION` in magnitude."""
        with np.errstate(over="ignore", invalid="ignore"):
            fwd = forward_bounds(self.net, *self.box)
        worst = max((float(np.max(np.abs(b), initial=0.0)) for b in (*fwd.lower, *fwd.upper)), default=0.0)
        if not worst <= MAX_PREACTIVATION:
            raise ValueError(
                f"center (largest |value| {float(np.max(np.abs(self.center), initial=0.0)):.4g}) and "
                f"radius {self.radius!r} give hidden pre-activations of magnitude up to {worst:.4g} on "
                f"this network; the engine certifies only where they stay ≤ {MAX_PREACTIVATION:.0e} "
                "(solver big-M limits)"
            )
        return fwd

    @property
    def n_unstable(self) -> int:
        """Hidden neurons whose sign the box does not fix."""
        return self.fwd.n_unstable

    @cached_property
    def interval(self) -> float:
        """The interval Jacobian's norm bound on L over the box (certified; inclusion-monotone;
        microseconds: the exact chain's first step)."""
        return interval_upper_bound(self.net, self.center, self.radius, fwd=self.fwd, **self.norms.kwargs)

    @cached_property
    def relaxed_interval(self) -> float:
        """The interval term of the ``lp``/``interval`` certifiers: the largest per-vertex-pair interval
        bound (:func:`~privcore.lipschitz.pair_interval.pair_interval_bound`: certified, monotone under ball
        inclusion also in floating point, often several times tighter than :attr:`interval`; a few
        milliseconds), or :attr:`interval` where the norm has too many vertex pairs."""
        pair = pair_interval_bound(self.net, self.center, self.radius, **self.norms.kwargs)
        return self.interval if pair is None else pair

    def closed_form(self) -> float:
        """L itself when no neuron is unstable (the Jacobian is constant on the box): exact, or a
        certified upper bound where an ∞→1 search stopped early (:meth:`closed_form_bracket`)."""
        return self.closed_form_bracket[1]

    @cached_property
    def closed_form_bracket(self) -> tuple[float, float]:
        """``(lower, upper)`` on L when no neuron is unstable (:meth:`Norms.bracket` of the constant
        Jacobian; equal ends unless an ∞→1 search stopped early)."""
        if self.n_unstable:
            raise ValueError(f"closed form needs a box with no unstable neuron, got {self.n_unstable}")
        pats = [self.fwd.active(i).astype(np.float64) for i in range(len(self.net.weights) - 1)]
        jac = self.net.jacobians(np.zeros((1, self.net.in_dim)), pats)[0]
        low, up = self.norms.bracket(jac)
        return float(low), float(up)
