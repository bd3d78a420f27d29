"""bench/value_paths.py's candidate value path (branch and bound over realised activation patterns)
against the brute-force reference on tiny nets: its bracket always contains L and, when it says it
is complete, equals L within its stated 1e-6 relative tolerance. No timing here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from tests._nets import random_net
from tests._reference import brute_force_lipschitz

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def value_paths():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("bench_value_paths", ROOT / "bench" / "value_paths.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("output_norm", ["l1", "linf"])
@pytest.mark.parametrize(
    ("dims", "radius"),
    [((3, 5, 4, 2), 0.5),  # the larger two run with `make test-slow` (the default suite has 5 minutes)
     pytest.param((4, 6, 6, 3), 1.5, marks=pytest.mark.slow),
     pytest.param((3, 4, 4, 4, 2), 1.0, marks=pytest.mark.slow)],
)
def test_region_bnb_brackets_the_brute_force_value(value_paths, dims, radius, output_norm) -> None:
    for seed in range(2):
        net = random_net(seed, dims)
        center = np.random.default_rng(100 + seed).standard_normal(dims[0])
        truth = brute_force_lipschitz(net, center, radius, output_norm=output_norm)
        b = value_paths.region_bnb(net, center, radius, input_norm="linf", output_norm=output_norm,
                                   max_seconds=60.0)
        assert b.lower <= truth * (1 + 1e-9) and b.upper >= truth * (1 - 1e-9), (seed, b, truth)
        assert b.complete, (seed, b, truth)  # tiny nets: always within the budget
        assert b.upper <= truth * (1 + 2e-6) + 1e-12, (seed, b, truth)
