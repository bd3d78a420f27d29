"""Soundness past 64 hidden neurons (issue 18): pattern codes must hold any neuron index.

int64 codes once dropped an unstable neuron with index ≥ 64 (``x << 64`` is 0 in numpy): the engine
reported an "exact" L below a value that sampled points attain and answered PTR decisions wrongly.
Here nets of 70–200 hidden neurons have their few unstable neurons past index 63; the reference
enumerates the unstable neurons' patterns with one LP each (tests/_reference.py),
independent of the engine's codes, tables and bounds.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privcore.lipschitz import Certifier, ReluNetwork, local_lipschitz
from privcore.lipschitz.bounds import box_around, forward_bounds
from privcore.lipschitz.codes import (
    FAST_BITS,
    codes_from_b64,
    codes_from_bits,
    codes_to_b64,
    consistent_mask,
    join_codes,
    layer_codes,
    pack,
    to_bits,
)
from privcore.lipschitz.norms import operator_norm
from tests._reference import pattern_region_feasible

RADIUS = 0.5


def planted_net(
    widths: tuple[int, ...], unstable: tuple[int, ...], seed: int, *, on_from: int | None = None
) -> ReluNetwork:
    """A ReLU net whose hidden neurons are stable on B(0, RADIUS) (margin ±40 at the centre, alternating
    on/off; all off from index ``on_from`` on when given) except ``unstable`` (global indices), whose
    pre-activation is 0 at the centre."""
    rng = np.random.default_rng(seed)
    weights, biases = [], []
    act, start = np.zeros(widths[0]), 0
    for i, (n_in, n_out) in enumerate(itertools.pairwise(widths)):
        w = rng.normal(size=(n_out, n_in)) / np.sqrt(n_in)
        last = i == len(widths) - 2
        if last:
            b = np.zeros(n_out)
        else:
            idx = np.arange(start, start + n_out)
            target = np.where(idx % 2 == 0, 40.0, -40.0)
            if on_from is not None:
                target[idx >= on_from] = -40.0
            target[np.isin(idx, unstable)] = 0.0
            b = target - w @ act
            act = np.maximum(w @ act + b, 0.0)
            start += n_out
        weights.append(w)
        biases.append(b)
    return ReluNetwork.from_arrays(weights, biases)


def reference_lipschitz(net: ReluNetwork, center: np.ndarray, radius: float) -> float:
    """max ‖J_D‖ over patterns D of the unstable neurons whose region meets the box (one LP each)."""
    lo, hi = box_around(center, radius)
    fwd = forward_bounds(net, lo, hi)
    on = np.concatenate([fwd.active(i) for i in range(len(fwd.lower))])
    free = np.flatnonzero(~(on | np.concatenate([fwd.inactive(i) for i in range(len(fwd.lower))])))
    assert free.size <= 10
    best = 0.0
    for assignment in itertools.product((0.0, 1.0), repeat=free.size):
        flat = on.astype(np.float64)
        flat[free] = assignment
        pattern = net.split_pattern(flat)
        if pattern_region_feasible(net, lo, hi, pattern):
            jac = net.jacobians(np.zeros((1, net.in_dim)), pattern)[0]
            best = max(best, float(operator_norm(jac)))
    return best


def sampled_max(net: ReluNetwork, center: np.ndarray, radius: float, n: int = 20_000) -> float:
    """The largest Jacobian norm at random points of the box (a lower bound on L)."""
    x = center + np.random.default_rng(7).uniform(-radius, radius, size=(n, net.in_dim))
    pats, a = [], x
    for w, b in zip(net.weights[:-1], net.biases[:-1], strict=True):
        z = a @ w.T + b
        pats.append((z > 0).astype(np.float64))
        a = np.maximum(z, 0.0)
    flat = np.unique(np.concatenate(pats, axis=1), axis=0)
    jac = net.jacobians(np.zeros((flat.shape[0], net.in_dim)), net.split_pattern(flat))
    return float(np.max(operator_norm(jac)))


WIDE = [
    # stable neurons past index 62 all off: int64 codes silently lost the unstable neurons ≥ 64 here
    pytest.param((4, 20, 50, 4), (63, 64, 65, 66, 67, 68, 69), 0, 63, id="4-20-50-4 63..69 rest off"),
    pytest.param((4, 20, 50, 4), (63, 64, 65, 66, 67, 68, 69), 0, None, id="4-20-50-4 unstable 63..69"),
    pytest.param((3, 40, 60, 3), (64, 70, 81, 99), 1, None, id="3-40-60-3 unstable 64..99"),
    pytest.param((4, 60, 80, 60, 4), (62, 63, 64, 127, 128, 190), 2, None, id="4-60-80-60-4 62..190"),
]


@pytest.mark.parametrize(("widths", "unstable", "seed", "on_from"), WIDE)
def test_exact_value_past_64_neurons_matches_the_reference(widths, unstable, seed, on_from) -> None:
    net = planted_net(widths, unstable, seed, on_from=on_from)
    center = np.zeros(net.in_dim)
    lo, hi = box_around(center, RADIUS)
    fwd = forward_bounds(net, lo, hi)
    free = np.flatnonzero(~np.concatenate(
        [fwd.active(i) | fwd.inactive(i) for i in range(len(fwd.lower))]))
    assert set(free) <= set(unstable) and free.max() >= 64  # the construction plants what it says
    truth = reference_lipschitz(net, center, RADIUS)
    cert = local_lipschitz(net, center, RADIUS, certifier="exact")
    assert cert.exact
    assert cert.upper == pytest.approx(truth, rel=1e-6)
    assert cert.upper >= sampled_max(net, center, RADIUS) * (1 - 1e-9)


@pytest.mark.parametrize(("widths", "unstable", "seed", "on_from"), WIDE)
def test_ptr_decisions_past_64_neurons_are_right(widths, unstable, seed, on_from) -> None:
    net = planted_net(widths, unstable, seed, on_from=on_from)
    center = np.zeros(net.in_dim)
    truth = reference_lipschitz(net, center, RADIUS)
    certifier = Certifier(kind="exact", cache=False)
    assert certifier.decide(net, center, RADIUS, 1.03 * truth) is True
    assert certifier.decide(net, center, RADIUS, 0.97 * truth) is False


def test_stable_neurons_past_index_63_raise_nothing() -> None:
    """A random 8→32→32→8 net at r = 0.01 (most neurons stable, many past index 63)."""
    rng = np.random.default_rng(3)
    widths = (8, 32, 32, 8)
    net = ReluNetwork.from_arrays(
        [rng.normal(size=(o, i)) / np.sqrt(i) for i, o in itertools.pairwise(widths)],
        [rng.normal(size=o) * 0.1 for o in widths[1:]],
    )
    for _ in range(4):
        center = rng.normal(size=8)
        cert = local_lipschitz(net, center, 0.01, certifier="exact", solver="highs")
        assert cert.upper >= sampled_max(net, center, 0.01, n=2000) * (1 - 1e-9)


@pytest.mark.parametrize("n", [5, FAST_BITS, FAST_BITS + 1, 64, 65, 200])
def test_codes_round_trip_at_any_width(n: int) -> None:
    rng = np.random.default_rng(n)
    bits = (rng.random((50, n)) < 0.5).astype(np.float64)
    bits[0] = 0.0
    bits[1] = 1.0
    bits = np.unique(bits, axis=0)  # stored codes are distinct patterns
    codes = codes_from_bits(bits)
    assert np.array_equal(to_bits(codes, n), bits)
    assert [pack(b) for b in bits] == [int(c) for c in codes]
    assert np.array_equal(to_bits(codes_from_b64(codes_to_b64(codes, n), codes.size, n), n), bits)
    on, off = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    on[n - 1], off[0] = True, True
    expected = (bits[:, n - 1] == 1) & (bits[:, 0] == 0)
    assert np.array_equal(consistent_mask(codes, on, off), expected)


def test_stored_codes_are_checked_at_any_width() -> None:
    n = 70
    codes = codes_from_bits(np.eye(n)[-3:])  # neurons 67, 68, 69
    text = codes_to_b64(codes, n)
    with pytest.raises(ValueError, match="wrong size"):
        codes_from_b64(text, 4, n)
    with pytest.raises(ValueError, match="out of range or repeated"):
        codes_from_b64(codes_to_b64(np.concatenate([codes, codes[:1]]), n), 4, n)
    with pytest.raises(ValueError, match="out of range or repeated"):
        codes_from_b64(text, 3, 65)  # bit 69 does not exist in a 65-neuron pattern


def test_layer_codes_join_across_bit_63() -> None:
    n = 72
    left = layer_codes(4, 58, n)  # bits 58..61
    right = layer_codes(6, 62, n)  # bits 62..67
    joined = join_codes(left, right, n)
    bits = to_bits(joined, n)
    assert joined.size == 16 * 64 and len({int(c) for c in joined}) == joined.size
    ones = sum(bin(a).count("1") + bin(b).count("1") for a in range(16) for b in range(64))
    assert bits[:, 58:68].sum() == ones
    assert bits[:, :58].sum() == 0 and bits[:, 68:].sum() == 0
