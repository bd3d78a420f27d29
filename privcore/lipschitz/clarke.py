"""Bounds on the Clarke Jacobian's norm over a box, per vertex pair, batched over boxes (torch).

After Shi et al., NeurIPS 2022 ("Efficiently computing local Lipschitz constants of neural networks
via bound propagation"): ``‖J‖ = max cᵀ J s`` over the vertex pairs (c, s) of the dual output ball
and the input ball (:mod:`~privcore.lipschitz.pattern_bnb`), and for one pair every generalised
Jacobian of a box satisfies ``cᵀ J s = aᵀ t_{L−1}`` with ``a = W_Lᵀ c``, ``t_0 = s``,
``v_l = W_l t_{l−1}`` and ``t_l = D_l v_l``, where ``D_l`` is 1 on the box's active neurons, 0 on
its inactive ones and anything in [0, 1] on unstable ones (the Clarke hull, so a bound on it covers
every 0/1 pattern the box realises, and L(f, B) = max over them: Jordan & Dimakis 2020, Thm. 3.2).

* :func:`preactivation_bounds` — CROWN (Zhang et al., NeurIPS 2018) back-substitution bounds on the
  hidden pre-activations, intersected with interval propagation and with the enclosing box's bounds
  (valid for a sub-box), so a child never has fewer stable neurons than its parent.
* :func:`pair_bounds` — per pair, the smaller of two certified bounds:
  *interval*: ``t_l`` in intervals (an unstable neuron spans ``[min(0, v), max(0, v)]``), the last
  step maximised exactly; *linear*: backwards from ``λ = a``, an unstable neuron's term
  ``λ_k t_k ≤ max(0, λ_k v_k)`` is bounded by that convex function's chord over ``v_k``'s interval,
  so the bound stays linear in the previous layer's ``t`` (``λ ← W_lᵀ slope``); at the first layer
  ``v_1 = W_1 s`` is exact and ``Σ_k max(0, λ_k v_k)`` (unstable) + ``λ_k v_k`` (active) is exact.
  The chord's intercept is the least one whose line lies above both endpoints, so a rounded slope
  still gives an upper line.

Floating point: pre-activation bounds are widened, and pair bounds raised, by 1e-9·(depth + 2) of
the absolute scale of their terms (far above the rounding of float64 sums), before they fix a
neuron's sign or clear a pair.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import Norms
from privcore.lipschitz.pair_interval import _SAFETY, MAX_PAIRS, _path_scale

__all__ = ["MAX_PAIRS", "ClarkeBounds", "clarke_bounds", "single_threaded"]

_DT = torch.float64
_THREADS = threading.local()  # per thread: nesting depth, torch's thread count before the outermost


@contextmanager
def single_threaded(device: torch.device) -> Iterator[None]:
    """Run torch's CPU kernels on one thread while a search runs in this thread (restored when its
    outermost search ends; torch's OpenMP thread count is per thread).

    The engine parallelises across images (executors), one solver thread each; torch's intra-op pool
    on these small tensors only spins against the other workers (measured 100× slower on a loaded
    2-core machine)."""
    if device.type != "cpu":
        yield
        return
    depth = getattr(_THREADS, "depth", 0)
    if depth == 0:
        _THREADS.saved = torch.get_num_threads()
        torch.set_num_threads(1)
    _THREADS.depth = depth + 1
    try:
        yield
    finally:
        _THREADS.depth = depth
        if depth == 0:
            torch.set_num_threads(_THREADS.saved)


@dataclass(frozen=True, eq=False)
class ClarkeBounds:
    """A network's weights and vertex pairs as float64 tensors on ``device``.

    Pair ``p`` is (dual output vertex ``p // n_s``, input vertex ``p % n_s``)."""

    net: ReluNetwork
    device: torch.device
    weights: tuple[torch.Tensor, ...]
    biases: tuple[torch.Tensor, ...]
    u1: torch.Tensor  # (n_s, n_1): W_1 s
    a: torch.Tensor  # (n_c, n_{L-1}): W_Lᵀ c
    scale: float  # 1ᵀ|W_L|…|W_1|1: bounds the magnitude of every term of a pair's bound

    @property
    def n_pairs(self) -> int:
        """Number of vertex pairs."""
        return int(self.u1.shape[0] * self.a.shape[0])

    @property
    def pair_margin(self) -> float:
        """What every pair bound is raised by against float64 rounding (module docstring)."""
        return _SAFETY * (len(self.weights) + 2) * (1.0 + self.scale)

    @cached_property
    def abs_a(self) -> torch.Tensor:
        return self.a.abs()

    @cached_property
    def abs_weights(self) -> tuple[torch.Tensor, ...]:
        return tuple(w.abs() for w in self.weights)

    def preactivation_bounds(
        self, lo: torch.Tensor, hi: torch.Tensor,
        parent: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None,
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Certified ``(lower, upper)`` per hidden layer, each ``(B, n_l)``, over the boxes ``[lo, hi]``
        (``(B, d)``): CROWN ∩ interval propagation ∩ ``parent`` (bounds of enclosing boxes)."""
        mid, rad = (lo + hi) / 2.0, (hi - lo) / 2.0
        mag = mid.abs() + rad  # |x| over the box; a_l = |W_l| relu(a_{l-1}) + |b_l| bounds every term
        lows: list[torch.Tensor] = []
        ups: list[torch.Tensor] = []
        n_b = lo.shape[0]
        for layer, (w, b) in enumerate(zip(self.weights[:-1], self.biases[:-1], strict=True)):
            mag = mag @ self.abs_weights[layer].T + b.abs()
            if layer == 0:
                c = mid @ w.T + b
                r = rad @ self.abs_weights[0].T
                low, up = c - r, c + r
            else:
                low, up = self._crown(layer, mid, rad, lows, ups, n_b)
                prev_lo, prev_hi = lows[-1].clamp_min(0.0), ups[-1].clamp_min(0.0)
                pm, pr = (prev_lo + prev_hi) / 2.0, (prev_hi - prev_lo) / 2.0
                ibp_c, ibp_r = pm @ w.T + b, pr @ self.abs_weights[layer].T
                low, up = torch.maximum(low, ibp_c - ibp_r), torch.minimum(up, ibp_c + ibp_r)
            margin = _SAFETY * (layer + 2) * (1.0 + mag)
            low, up = low - margin, up + margin
            if parent is not None:
                low, up = torch.maximum(low, parent[0][layer]), torch.minimum(up, parent[1][layer])
            lows.append(low)
            ups.append(up)
        return lows, ups

    def _crown(self, layer: int, mid: torch.Tensor, rad: torch.Tensor, lows: list[torch.Tensor],
               ups: list[torch.Tensor], n_b: int) -> tuple[torch.Tensor, torch.Tensor]:
        w, b = self.weights[layer], self.biases[layer]
        lam_u = w.expand(n_b, *w.shape)
        lam_l = lam_u
        c_u = b.expand(n_b, -1)
        c_l = c_u
        for k in range(layer - 1, -1, -1):
            lk, uk = lows[k], ups[k]
            act, ina = lk > 0, uk < 0
            unst = ~(act | ina)
            width = (uk - lk).clamp_min(1e-300)
            s_up = torch.where(act, 1.0, torch.where(ina, 0.0, uk / width)).to(_DT)  # upper line slope
            i_up = torch.where(unst, -s_up * lk, 0.0)  # its intercept (≥ 0)
            s_lo = torch.where(act, 1.0, torch.where(ina, 0.0, (uk > -lk).to(_DT)))  # lower line, 0 intercept
            pos, neg = lam_u.clamp_min(0.0), lam_u.clamp_max(0.0)
            c_u = c_u + (pos * i_up[:, None, :]).sum(-1)
            lam_u = pos * s_up[:, None, :] + neg * s_lo[:, None, :]
            pos, neg = lam_l.clamp_min(0.0), lam_l.clamp_max(0.0)
            c_l = c_l + (neg * i_up[:, None, :]).sum(-1)
            lam_l = pos * s_lo[:, None, :] + neg * s_up[:, None, :]
            c_u = c_u + lam_u @ self.biases[k]
            c_l = c_l + lam_l @ self.biases[k]
            lam_u = lam_u @ self.weights[k]
            lam_l = lam_l @ self.weights[k]
        up = (lam_u @ mid[:, :, None]).squeeze(-1) + (lam_u.abs() @ rad[:, :, None]).squeeze(-1) + c_u
        low = (lam_l @ mid[:, :, None]).squeeze(-1) - (lam_l.abs() @ rad[:, :, None]).squeeze(-1) + c_l
        return low, up

    def signal_intervals(
        self, lows: list[torch.Tensor], ups: list[torch.Tensor]
    ) -> list[tuple[torch.Tensor, ...]]:
        """Per hidden layer ``l ≥ 2`` (list index l − 1): ``(v_lo, v_hi)`` of ``v_l`` per box and input
        vertex, ``(B, n_s, n_l)``; then the last layer's ``t`` as ``(t_lo, t_hi)``."""
        out = []
        n_b = lows[0].shape[0]
        v = self.u1.expand(n_b, *self.u1.shape)
        vlo, vhi = tlo, thi = v, v
        for layer in range(len(self.weights) - 1):
            if layer:
                m, r = (tlo + thi) / 2.0, (thi - tlo) / 2.0
                m, r = m @ self.weights[layer].T, r @ self.abs_weights[layer].T
                vlo, vhi = m - r, m + r
                out.append((vlo, vhi))
            act = (lows[layer] > 0)[:, None, :]
            ina = (ups[layer] < 0)[:, None, :]
            tlo = torch.where(act, vlo, torch.where(ina, 0.0, vlo.clamp_max(0.0)))
            thi = torch.where(act, vhi, torch.where(ina, 0.0, vhi.clamp_min(0.0)))
        out.append((tlo, thi))
        return out

    def pair_bounds(self, lows: list[torch.Tensor], ups: list[torch.Tensor], node: torch.Tensor,
                    pair: torch.Tensor, threshold: float = -np.inf) -> torch.Tensor:
        """Certified upper bounds on ``cᵀ J s`` over box ``node[i]`` for pair ``pair[i]``, shape ``(P,)``:
        the interval bound, and where it exceeds ``threshold`` the smaller of it and the linear bound
        (module docstring)."""
        n_s = self.u1.shape[0]
        margin = self.pair_margin
        sig = self.signal_intervals(lows, ups)
        tlo, thi = sig[-1]
        mid, rad = (tlo + thi) / 2.0, (thi - tlo) / 2.0  # (B, n_s, n)
        cid, sid = pair // n_s, pair % n_s
        if pair.numel() * 4 < mid.shape[0] * n_s * self.a.shape[0]:  # few open pairs: only theirs
            out = (mid[node, sid] * self.a[cid]).sum(-1) + (rad[node, sid] * self.abs_a[cid]).sum(-1) + margin
        else:  # (B, n_s, n_c): every pair of every box, one GEMM
            out = (mid @ self.a.T + rad @ self.abs_a.T)[node, sid, cid] + margin
        hot = torch.nonzero(out > threshold).squeeze(-1)
        if hot.numel():
            linear = self._linear(lows, ups, sig, node[hot], sid[hot], cid[hot]) + margin
            out[hot] = torch.minimum(out[hot], linear)
        return out

    def _linear(self, lows: list[torch.Tensor], ups: list[torch.Tensor], sig: list[tuple[torch.Tensor, ...]],
                node: torch.Tensor, sid: torch.Tensor, cid: torch.Tensor) -> torch.Tensor:
        lam = self.a[cid]
        const = torch.zeros(lam.shape[0], dtype=_DT, device=lam.device)
        for layer in range(len(self.weights) - 2, 0, -1):
            act, ina = lows[layer][node] > 0, ups[layer][node] < 0
            vlo, vhi = sig[layer - 1][0][node, sid], sig[layer - 1][1][node, sid]
            f_lo, f_hi = (lam * vlo).clamp_min(0.0), (lam * vhi).clamp_min(0.0)
            width = vhi - vlo
            wide = width > 1e-12 * (vlo.abs() + vhi.abs())
            slope = torch.where(wide, (f_hi - f_lo) / torch.where(wide, width, 1.0), 0.0)
            inter = torch.maximum(f_lo - slope * vlo, f_hi - slope * vhi)
            slope = torch.where(act, lam, torch.where(ina, 0.0, slope))
            inter = torch.where(act | ina, 0.0, inter)
            const = const + inter.sum(-1)
            lam = slope @ self.weights[layer]
        act, ina = lows[0][node] > 0, ups[0][node] < 0
        term = lam * self.u1[sid]
        return const + torch.where(act, term, torch.where(ina, 0.0, term.clamp_min(0.0))).sum(-1)


_MEMO: OrderedDict[tuple, ClarkeBounds | None] = OrderedDict()
_MEMO_LOCK = threading.Lock()
_MEMO_SIZE = 16


def clarke_bounds(net: ReluNetwork, norms: Norms, *, device: str | torch.device | None = None
                  ) -> ClarkeBounds | None:
    """The tensors of :class:`ClarkeBounds` for ``net`` and the norm pair (``device`` None: CUDA when
    present, else CPU), or None when the norm has more than :data:`MAX_PAIRS` vertex pairs. Memoised
    per model hash, norms and device."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    key = (net.digest, norms, str(dev))
    with _MEMO_LOCK:
        if key in _MEMO:
            _MEMO.move_to_end(key)
            return _MEMO[key]
    out = _build(net, norms, dev)
    with _MEMO_LOCK:
        _MEMO[key] = out
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    return out


def _build(net: ReluNetwork, norms: Norms, dev: torch.device) -> ClarkeBounds | None:
    if norms.pair_count(net.in_dim, net.out_dim) > MAX_PAIRS:
        return None
    S, C = norms.dual_vertices(net.in_dim, net.out_dim)
    weights = tuple(torch.tensor(w, dtype=_DT, device=dev) for w in net.weights)
    biases = tuple(torch.tensor(b, dtype=_DT, device=dev) for b in net.biases)
    return ClarkeBounds(
        net=net, device=dev, weights=weights, biases=biases,
        u1=torch.tensor(S @ net.weights[0].T, dtype=_DT, device=dev),
        a=torch.tensor(C @ net.weights[-1], dtype=_DT, device=dev),
        scale=_path_scale(net),
    )
