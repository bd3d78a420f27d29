"""The noise pool: each draw handed out once, in order, with the sampler's exact distribution; the
secure pool is never shared with a forked child.

The statistical test uses a fixed seed and rejects at p < 1e-3 (its false-alarm level when the seed
was chosen)."""

from __future__ import annotations

import math
import os
import threading

import numpy as np
import pytest
from scipy import stats

from privcore.mechanisms import RandomBits, add_noise, discrete_laplace_integers, plan_laplace
from privcore.mechanisms.noise_pool import NoisePool

ALPHA = 1e-3


class _Counter:
    """A draw function handing out 0, 1, 2, … (so every draw is recognisable), with the sizes asked."""

    def __init__(self) -> None:
        self.next = 0
        self.asked: list[int] = []

    def __call__(self, m: int) -> np.ndarray:
        self.asked.append(m)
        out = np.arange(self.next, self.next + m, dtype=np.int64)
        self.next += m
        return out


def test_draws_come_out_in_order_once_each_and_a_short_block_is_dropped() -> None:
    pool, draw = NoisePool(block=10), _Counter()
    got = [pool.take("k", 4, draw) for _ in range(3)]  # 4 + 4 from the first block, then a new one
    assert [g.tolist() for g in got] == [[0, 1, 2, 3], [4, 5, 6, 7], [10, 11, 12, 13]]
    assert pool.take("k", 25, draw).tolist() == list(range(20, 45))  # more than a block: drawn to size
    assert draw.asked == [10, 10, 25]
    other = _Counter()
    other.next = 1000
    assert pool.take("other key", 2, other).tolist() == [1000, 1001]  # keys never mix


def test_threads_never_get_the_same_draw() -> None:
    pool, draw = NoisePool(block=64), _Counter()
    out: list[np.ndarray] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(200):
            x = pool.take("k", 3, draw)
            with lock:
                out.append(x)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    values = np.concatenate(out)
    assert values.size == 2400 and np.unique(values).size == values.size


def test_pooled_draws_keep_the_exact_discrete_laplace() -> None:
    """Draws handed out 8 at a time from blocks of the exact sampler: P(N = k) ∝ exp(−|k|/t); chi-square,
    false alarm 1e-3."""
    t, bits = 3, RandomBits(41)
    pool = NoisePool(block=1000)
    samples = np.concatenate([pool.take(("laplace", t), 8, lambda m: discrete_laplace_integers(t, m, bits))
                              for _ in range(10_000)])
    ks = range(-60 * t, 60 * t + 1)
    weights = {k: math.exp(-abs(k) / t) for k in ks}
    total = sum(weights.values())
    keys = sorted(k for k, w in weights.items() if w / total * samples.size >= 20)
    observed = np.array([np.count_nonzero(samples == k) for k in keys], dtype=float)
    expected = np.array([weights[k] / total * samples.size for k in keys])
    observed = np.append(observed, samples.size - observed.sum())
    expected = np.append(expected, samples.size - expected.sum())
    assert float(stats.chisquare(observed, expected).pvalue) > ALPHA


def test_secure_releases_differ_and_seeded_ones_reproduce() -> None:
    plan = plan_laplace(sensitivity=1.0, epsilon=1.0, numel=8)
    secure = [add_noise(np.zeros(8), plan) for _ in range(3)]
    assert not np.array_equal(secure[0], secure[1]) and not np.array_equal(secure[1], secure[2])
    assert np.array_equal(add_noise(np.zeros(8), plan, rng=5), add_noise(np.zeros(8), plan, rng=5))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_never_hands_out_the_parents_draws() -> None:
    """Parent and child each take the next draws after a fork: a shared pool would give both the same
    8 integers (a fresh OS draw coincides with probability far below 2^-100)."""
    plan = plan_laplace(sensitivity=1.0, epsilon=1.0, numel=8)
    add_noise(np.zeros(8), plan)  # the parent's pool now holds a block for this scale
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: send its next draws, exit at once
        try:
            os.write(write, add_noise(np.zeros(8), plan).tobytes())
        finally:
            os._exit(0)
    os.close(write)
    child = np.frombuffer(os.read(read, 64), dtype=np.float64)
    os.close(read)
    os.waitpid(pid, 0)
    parent = add_noise(np.zeros(8), plan)
    assert child.size == 8 and not np.array_equal(child, parent)


@pytest.mark.parametrize("rng", [None, 3])
def test_a_draw_outside_the_exact_range_releases_nothing(rng: int | None,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A sampler output with |N| ≥ 2^52 (never drawn in practice) is refused when drawn, pooled or not."""
    import privcore.mechanisms.sampling as sampling
    from privcore.errors import PrivcoreError

    plan = plan_laplace(sensitivity=0.123456, epsilon=0.77, numel=8)  # a scale no other test draws at
    monkeypatch.setattr(sampling, "discrete_laplace_integers",
                        lambda t, m, bits: np.full(m, 2**52, dtype=np.int64))
    with pytest.raises(PrivcoreError, match="exact-arithmetic range"):
        add_noise(np.zeros(8), plan, rng=rng)
