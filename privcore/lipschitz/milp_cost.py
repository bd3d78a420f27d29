"""How long LipMIP's MILP is predicted to take on a query, from its binaries and the machine's load.

``(FLOOR + exp(a + b·k)) · (1 + load/cores)`` seconds for the MILP's ``k`` binaries (one per unstable
neuron, plus ``d`` for the input norm: a sign per input for ℓ∞, a one-hot over the inputs for ℓ1) and the
1-minute load average per core; a and b fitted to Gurobi's mean times on the Fig. 4 nets of the
benchmark's seeds, d = 8…16, each divided by its 1 + load/cores (``bench/fig4_dims.py``; it also
predicts the time-outs from d = 20). The load factor matches Gurobi's d = 16 means at load 0.4, 7–11 and
14–18 within 1.5×. Used to order work, never to decide anything about a bound.
"""

from __future__ import annotations

import math
import os

from privcore.lipschitz.ball import Ball

__all__ = ["cores", "load_factor", "milp_binaries", "milp_seconds"]

#: log-seconds of Gurobi's MILP on an idle core, linear in its binaries k, and its fixed part
#: (building the model, starting the solver) in seconds
MILP_LOG = (-9.83, 0.43)
MILP_FLOOR = 0.01


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def load_factor() -> float:
    """1 + the 1-minute load average per core: how much slower one thread runs than on an idle core."""
    return 1.0 + os.getloadavg()[0] / cores()


def milp_binaries(ball: Ball) -> int:
    """The MILP's binaries: one per unstable neuron, and d for the input norm."""
    return ball.n_unstable + ball.net.in_dim


def milp_seconds(ball: Ball) -> float:
    """The MILP's predicted seconds on ``ball`` at the machine's present load (module docstring)."""
    a, b = MILP_LOG
    return (MILP_FLOOR + math.exp(min(50.0, a + b * milp_binaries(ball)))) * load_factor()
