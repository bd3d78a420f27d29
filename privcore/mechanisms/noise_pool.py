"""Exact noise integers drawn in blocks and handed out once each: the fast path of the secure sampler.

The exact samplers (:mod:`privcore.mechanisms.sampling`, CKS20 Alg. 2 and 3) cost about 0.4 µs a draw
on a block of thousands, but a release of 8 coordinates pays numpy's or Python's per-call cost many
times over. A :class:`NoisePool` keeps, per noise kind and scale, one block of i.i.d. draws made by the
same exact sampler from the same source of bits, and hands out the next ``n`` unused ones; a block is
drawn again when it runs out. Consecutive slices of one i.i.d. sequence are i.i.d., and every draw is
handed out once (its slot is zeroed as it leaves), so a release gets exactly the distribution the
sampler gives. The draws depend only on the public scale, never on a private value.

The secure pool (:data:`SECURE_POOL`) draws from the OS CSPRNG; a child made by ``os.fork`` empties
it before it runs (``os.register_at_fork``), so parent and child never hand out the same draws. A
lock makes it safe across threads. Seeded streams (tests, experiments) never go through it: they
draw directly, so a seed reproduces its draws.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

__all__ = ["BLOCK", "SECURE_POOL", "NoisePool"]

#: draws made at a time per noise kind and scale
BLOCK = 4096
#: noise kinds and scales kept at a time (the least recently drawn block is dropped, zeroed)
_KEYS = 8


class NoisePool:
    """Blocks of i.i.d. noise integers per key, handed out in order, each draw once (module docstring).

    ``take(key, n, draw)`` returns the next ``n`` draws of the block for ``key`` (int64), calling
    ``draw(m)`` for ``m ≥ n`` fresh i.i.d. draws of that key's distribution when the block has fewer
    than ``n`` left (the rest of the old block is discarded, zeroed). The caller guarantees that one
    key always means one distribution and one source of bits."""

    def __init__(self, block: int = BLOCK, keys: int = _KEYS) -> None:
        self._block = int(block)
        self._keys = int(keys)
        self._lock = threading.Lock()
        self._pools: OrderedDict[Hashable, list[Any]] = OrderedDict()  # key: [block, draws used]

    def take(self, key: Hashable, n: int, draw: Callable[[int], np.ndarray]) -> np.ndarray:
        """The next ``n`` unused draws for ``key`` (a copy; their slots are zeroed)."""
        with self._lock:
            entry = self._pools.get(key)
            if entry is None or entry[0].size - entry[1] < n:
                if entry is not None:
                    entry[0][entry[1] :] = 0
                entry = [np.array(draw(max(n, self._block)), dtype=np.int64), 0]
                self._pools[key] = entry
                self._pools.move_to_end(key)
                while len(self._pools) > self._keys:  # the least recently drawn block goes, zeroed
                    self._pools.popitem(last=False)[1][0][:] = 0
            buf, used = entry
            out = buf[used : used + n].copy()
            buf[used : used + n] = 0
            entry[1] = used + n
            return out

    def clear(self) -> None:
        """Drop every block (zeroed): the next draw of every key is a fresh one."""
        with self._lock:
            for buf, _ in self._pools.values():
                buf[:] = 0
            self._pools.clear()

    def _forget_after_fork(self) -> None:
        """In a forked child: drop the parent's blocks without taking the lock (the parent's thread
        that held it does not exist here), so no draw of the parent is ever handed out again."""
        self._lock = threading.Lock()
        for buf, _ in self._pools.values():
            buf[:] = 0
        self._pools = OrderedDict()


#: the pool of the OS CSPRNG's draws (:func:`~privcore.mechanisms.sampling.add_noise` with the default
#: source); emptied in every forked child
SECURE_POOL = NoisePool()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=SECURE_POOL._forget_after_fork)
