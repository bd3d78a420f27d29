"""Shared test networks: seeded random ReLU nets (He-scaled weights) and the plain LipMIP reference."""

from __future__ import annotations

import numpy as np

from privcore.lipschitz import ReluNetwork, build_milp
from privcore.lipschitz.backends import solve


def random_net(seed: int, dims: tuple[int, ...], bias: float = 0.3) -> ReluNetwork:
    """A ReLU net of layer widths ``dims`` with N(0, 2/fan-in) weights and N(0, bias²) biases."""
    rng = np.random.default_rng(seed)
    ws = [rng.standard_normal((dims[i + 1], dims[i])) * np.sqrt(2.0 / dims[i]) for i in range(len(dims) - 1)]
    bs = [rng.standard_normal(dims[i + 1]) * bias for i in range(len(dims) - 1)]
    return ReluNetwork.from_arrays(ws, bs)


def mip_value(net: ReluNetwork, center: np.ndarray, radius: float) -> float:
    """The plain LipMIP optimum (no bounds, no enumeration): the reference for decisions."""
    res = solve(build_milp(net, center, radius), solver="gurobi", mip_gap=1e-9)
    assert res.status == "optimal"
    return res.upper
