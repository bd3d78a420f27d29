"""Decide "L(f, B(z, r)) ≤ τ?" by a batched branch and bound over neurons and sub-boxes.

The local Lipschitz constant over a box is the largest generalised-Jacobian norm over its points
(Jordan & Dimakis, NeurIPS 2020, Thm. 3.2), ``‖J‖ = max cᵀ J s`` over vertex pairs (c, s), and
``cᵀ J s`` is multilinear in the 0/1 pattern D. A node is a sub-box with some neurons *split*: on
(the points where its pre-activation is ≥ 0, with D_j = 1) or off (≤ 0, D_j = 0). Splitting a
node's neuron covers it by its two children (a point with z_j = 0 lies in both, and the Clarke
hull's D_j ∈ [0, 1] needs only its ends, by multilinearity); halving its box covers it too. So
the nodes left open always cover every (point, pattern) of the ball. When the root's bounds do not
settle the question, a hill climb over realised patterns looks for a witness first
(:func:`~privcore.lipschitz.witnesses.ascend_witness`). Then a batch of open nodes gets, cheapest
first (after Shi et al., NeurIPS 2022, whose branch and bound splits neurons):

* certified pre-activation bounds on the node (:mod:`~privcore.lipschitz.clarke`: CROWN ∩ interval
  ∩ the parent's bounds, in which a split neuron's bound sits at ±:data:`_TINY`, so it is active or
  inactive and its ReLU is relaxed by the identity or zero: valid on the node's points). A split
  neuron whose bounds contradict its side leaves no point: the node is dropped;
* region feasibility: the split neurons' half-spaces, for every layer whose pre-activations are
  affine on the node (each earlier neuron active or inactive there), are exact linear constraints on
  x; one LP (:func:`~privcore.lipschitz.regions.polytope_in_box`, unless the parent's point satisfies
  them strictly) drops the node when HiGHS proves them infeasible on the box even relaxed by 1e-9.
  The unstable neurons of the first layer not yet affine get a range over that polytope, intersected
  into the bounds: deciding, the exact one (two LPs each, optima padded by 1e-6 relative as in OBBT);
  maximising, a closed-form one, exact for each cut alone (:mod:`~privcore.lipschitz.halfspace`), kept
  only where it proves the neuron's sign;
* bounds per open pair (the interval and linear bounds on ``cᵀ J s``). A pair whose bound is ``≤ τ``
  is cleared for the node and everything inside it, so children inherit only the open pairs. A node
  with no open pair is cleared;
* a witness: Jacobian norms at the node's centre, at sampled points and at its region LP's point,
  each re-evaluated in float64 where the network is affine, at a point of the ball itself, and
  deflated by 1e-12. One witness ``> τ`` fails the whole decision;
* otherwise it is split: the unstable neuron of the first layer that has any (so deeper layers
  become affine on the node sooner) with the largest ``influence × −l·u/(u − l)`` (how far its
  0/1 entry moves cᵀJs, times its ReLU relaxation's gap), or, with no unstable neuron left, its
  box along the most influential coordinate; nodes with the largest bounds first.

Every answer is exact (a pass is a cover of the ball by cleared or empty nodes, a fail a point of
the ball whose Jacobian norm exceeds τ); when the budget runs out the search returns None and the
caller goes on to the MILP.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from privcore.lipschitz.bounds import box_around, jacobian_norms, sampled_lower_bound
from privcore.lipschitz.clarke import ClarkeBounds, clarke_bounds, single_threaded
from privcore.lipschitz.halfspace import halfspace_range
from privcore.lipschitz.network import ReluNetwork
from privcore.lipschitz.norms import DEFAULT_NORMS, Norms
from privcore.lipschitz.regions import affine_range, polytope_in_box
from privcore.lipschitz.witnesses import ascend_witness
from privcore.validation import check_finite_array, check_nonnegative, check_real

__all__ = ["SplitResult", "ValueResult", "split_decide", "split_value"]

_DT = torch.float64
#: random points sampled per sub-box for a witness
_SAMPLES = 4
#: box vertices and uniform points sampled once for the hill climb's starts, and how many starts
_CLIMB_SAMPLES = 64
_CLIMB_STARTS = 4
#: (sub-box, pair) bounds computed together
_BATCH_PAIRS = 1 << 17
#: sub-boxes processed together
_BATCH_BOXES = 32
#: a split neuron's pre-activation bound is moved to ± this (the smallest subnormal), which marks it active
#: or inactive; its only other use, the next layer's interval centre, moves by far less than the margins
_TINY = 5e-324
#: maximising, the closed-form ranges pause for _RANGE_PAUSE nodes after a trial of _RANGE_TRIAL calls
#: that proved fewer than _RANGE_MIN_FIXES signs per call (measured over whole searches: 0.002 and 0.22
#: on He nets, 0.9-1.2 on uniform ones, where they prove few signs near the root and more deeper down)
_RANGE_TRIAL = 200
_RANGE_MIN_FIXES = 0.5
_RANGE_PAUSE = 1000


@dataclass(frozen=True)
class SplitResult:
    """``passed``; ``upper`` (certified on the whole box when passed), ``lower``/``point`` (a
    verified Jacobian norm and where, when failed), and how many sub-boxes were examined."""

    passed: bool
    upper: float
    lower: float
    point: np.ndarray | None
    boxes: int


@dataclass(frozen=True)
class ValueResult:
    """``lower ≤ L ≤ upper``: ``lower`` a Jacobian norm verified in float64 at ``point`` (None: no
    witness), ``upper`` certified; ``complete`` when ``upper ≤ lower · (1 + rtol) + slack`` was proven,
    ``slack`` being the bounds' float64 safety margin (absolute)."""

    upper: float
    lower: float
    point: np.ndarray | None
    boxes: int
    complete: bool
    slack: float = 0.0


@dataclass(eq=False)
class _Box:
    """A node: a sub-box, the neurons split on / off in it (None: none), its enclosing node's bounds
    (which carry those splits), its open pairs, and a point of its region from an ancestor's LP."""

    lo: np.ndarray
    hi: np.ndarray
    parent: tuple[list[torch.Tensor], list[torch.Tensor]] | None  # its enclosing node's bounds, (1, n_l) each
    pairs: torch.Tensor | None  # open pairs (None: all)
    forced: tuple[np.ndarray, np.ndarray] | None = None
    hint: np.ndarray | None = None


def _states(lows: list[torch.Tensor], ups: list[torch.Tensor], i: int) -> tuple[np.ndarray, np.ndarray]:
    """Node ``i``'s active and inactive masks over all hidden neurons (both set: contradictory bounds)."""
    return (np.concatenate([(x[i] > 0).cpu().numpy() for x in lows]),
            np.concatenate([(x[i] < 0).cpu().numpy() for x in ups]))


class _OutOfTime(Exception):
    """The budget ran out inside a batch (never a decision)."""


class _Search:
    def __init__(self, net: ReluNetwork, cb: ClarkeBounds, tau: float, norms: Norms, rng: np.random.Generator,
                 *, center: np.ndarray, radius: float, deadline: float, rtol: float | None = None):
        self.net, self.cb, self.tau, self.norms, self.rng = net, cb, tau, norms, rng
        self.center, self.radius, self.deadline = center, radius, deadline
        # maximising (rtol set): τ follows the best verified witness, τ = lower · (1 + rtol) + slack
        self.rtol, self.lower, self.point = rtol, -math.inf, None
        self.witness: tuple[float, np.ndarray] | None = None  # deciding: the point that failed τ
        paths, acc = [], np.eye(net.in_dim)
        for w in net.weights[:-1]:
            acc = np.abs(w) @ acc
            paths.append(acc)
        self.reach = np.vstack(paths)  # |W_l|…|W_1|: how far each input moves each hidden neuron
        outs, acc = [], np.abs(net.weights[-1]).sum(axis=0)
        for w in net.weights[-2:0:-1]:
            outs.append(acc)
            acc = acc @ np.abs(w)
        outs.append(acc)
        # how much a neuron's 0/1 entry of D can move cᵀJs: |W_L|…|W_{l+1}| 1 times |W_l|…|W_1| 1
        self.influence = np.concatenate(outs[::-1]) * self.reach.sum(axis=1)
        self.offsets = net.hidden_offsets
        self.cleared = -math.inf
        # deciding near τ, exact ranges by LP pay; maximising, the closed-form ranges (docs/ENGINE.md)
        self.exact_ranges = rtol is None
        self.range_counts = (0, 0, 0)  # maximising: closed-form range calls, signs proved, nodes skipped

    def preactivation(self, boxes: list[_Box]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Pre-activation bounds of a batch, each node's splits applied through its parent's bounds."""
        dev = self.cb.device
        lo = torch.tensor(np.array([b.lo for b in boxes]), dtype=torch.float64, device=dev)
        hi = torch.tensor(np.array([b.hi for b in boxes]), dtype=torch.float64, device=dev)
        parent = None
        if all(b.parent is not None for b in boxes):
            n_layers = len(boxes[0].parent[0])
            parent = ([torch.cat([b.parent[0][k] for b in boxes]) for k in range(n_layers)],
                      [torch.cat([b.parent[1][k] for b in boxes]) for k in range(n_layers)])
        return self.cb.preactivation_bounds(lo, hi, parent)

    def pair_values(self, lows: list[torch.Tensor], ups: list[torch.Tensor], live: list[tuple[int, _Box]]
                    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Per live node (index into the batch's bounds, node): its open pairs and their bounds."""
        dev = self.cb.device
        all_pairs = torch.arange(self.cb.n_pairs, device=dev, dtype=torch.int32)
        pairs = [all_pairs if b.pairs is None else b.pairs for _, b in live]
        node = torch.cat([torch.full((p.numel(),), i, device=dev, dtype=torch.long)
                          for (i, _), p in zip(live, pairs, strict=True)])
        flat = torch.cat(pairs).long()
        values = torch.cat([self.cb.pair_bounds(lows, ups, node[s:s + _BATCH_PAIRS], flat[s:s + _BATCH_PAIRS],
                                                    self.tau)
                            for s in range(0, flat.numel(), _BATCH_PAIRS)]) if flat.numel() else flat.double()
        sizes = [p.numel() for p in pairs]
        return list(torch.split(flat.int(), sizes)), list(torch.split(values, sizes))

    def region(self, box: _Box, act: np.ndarray, ina: np.ndarray) -> tuple[bool, np.ndarray | None, tuple]:
        """Does the node's region meet its box? The split neurons' half-spaces, for the layers whose
        pre-activations are affine on the node (every earlier neuron active or inactive there), are
        checked at the ancestor's point ``hint`` and, when it violates one, by one LP
        (:func:`~privcore.lipschitz.regions.polytope_in_box`). Returns (meets, a point of it or None, and
        the first layer not affine on the node with its affine map and the rows: ``(k, P, p0, G, h)``)."""
        f_on, f_off = box.forced
        offs = self.offsets
        A, a = np.eye(self.net.in_dim), np.zeros(self.net.in_dim)
        rows, rhs = [], []
        for k, (w, b) in enumerate(zip(self.net.weights[:-1], self.net.biases[:-1], strict=True)):
            P, p0 = w @ A, w @ a + b
            sl = slice(offs[k], offs[k + 1])
            fixed = f_on[sl] | f_off[sl]
            s = np.where(f_on[sl], 1.0, -1.0)
            rows.append(-(s[:, None] * P)[fixed])
            rhs.append((s * p0)[fixed])
            if not (act[sl] | ina[sl]).all():
                break
            d = act[sl].astype(np.float64)
            A, a = d[:, None] * P, d * p0
        G, h = np.vstack(rows), np.concatenate(rhs)
        rows_k = (k, P, p0, G, h)
        if box.hint is not None and bool(np.all(G @ box.hint < h)):
            return True, box.hint, rows_k
        return *polytope_in_box(G, h, box.lo, box.hi), rows_k

    def tighten_layer(self, lows: list[torch.Tensor], ups: list[torch.Tensor], i: int, box: _Box,
                      act: np.ndarray, ina: np.ndarray, rows: tuple) -> tuple[np.ndarray, np.ndarray] | None:
        """The unstable neurons of the node's first layer that is not affine on it get a range of their
        affine pre-activation over the split half-spaces and the box, intersected into the node's bounds
        (children inherit them): deciding, the exact range (two LPs each,
        :func:`~privcore.lipschitz.regions.affine_range`); maximising, the closed-form range one cut at a
        time (:func:`~privcore.lipschitz.halfspace.halfspace_range`), kept only where it proves the
        neuron's sign, and stopped where it rarely does. Returns the new active / inactive masks, or None
        when a split is contradicted."""
        k, P, p0, G, h = rows
        sl = slice(self.offsets[k], self.offsets[k + 1])
        free = ~(act[sl] | ina[sl])
        if not free.any() or G.shape[0] == 0:
            return act, ina
        if self.exact_ranges:
            ranges = affine_range(G, h, box.lo, box.hi, P[free], p0[free])
        else:
            calls, fixes, skipped = self.range_counts
            if calls >= _RANGE_TRIAL and fixes < _RANGE_MIN_FIXES * calls:
                # the ranges rarely prove a sign here: skip them, and try again after _RANGE_PAUSE nodes
                self.range_counts = (0, 0, 0) if skipped >= _RANGE_PAUSE else (calls, fixes, skipped + 1)
                return act, ina
            ranges = halfspace_range(G, h, box.lo, box.hi, P[free], p0[free])
            if ranges is not None:  # only the signs it proves: narrower unstable ranges steer splits worse
                fixed = (ranges[0] > 0) | (ranges[1] < 0)
                self.range_counts = (calls + 1, fixes + int(fixed.sum()), 0)
                ranges = np.where(fixed, ranges[0], -np.inf), np.where(fixed, ranges[1], np.inf)
        if ranges is None:
            return None
        lo_k, up_k = ranges
        dev = lows[k].device
        cols = torch.tensor(np.flatnonzero(free), device=dev)
        lows[k][i, cols] = torch.maximum(lows[k][i, cols], torch.tensor(lo_k, dtype=_DT, device=dev))
        ups[k][i, cols] = torch.minimum(ups[k][i, cols], torch.tensor(up_k, dtype=_DT, device=dev))
        if bool((lows[k][i] > ups[k][i]).any()):
            return None
        return _states(lows, ups, i)

    def step(self, boxes: list[_Box]) -> tuple[list[tuple[float, _Box]], tuple[float, np.ndarray] | None]:
        """Process a batch: the children to push (with priorities), or a witness above τ."""
        lows, ups = self.preactivation(boxes)
        live, points, states = self._live(boxes, lows, ups)
        if not live:
            return [], None
        open_nodes = self._open_nodes(lows, ups, live, points, states)
        if not open_nodes:
            return [], None
        found = self._witness_above(open_nodes)
        if found is not None:
            return [], found
        return self._children(open_nodes, lows, ups), None

    def _live(self, boxes: list[_Box], lows: list[torch.Tensor], ups: list[torch.Tensor]
              ) -> tuple[list[tuple[int, _Box]], list[Any], list[tuple[np.ndarray, np.ndarray]]]:
        """The boxes that may hold a point (their split neurons' signs and region possible), with the
        LP's point of the region and each neuron's active / inactive states."""
        live, points, states = [], [], []
        acts = torch.cat([x > 0 for x in lows], dim=1).cpu().numpy()  # the batch's states at once
        inas = torch.cat([x < 0 for x in ups], dim=1).cpu().numpy()
        for i, box in enumerate(boxes):
            act, ina = acts[i], inas[i]
            if (act & ina).any():
                continue  # a split neuron's sign is impossible on the box: the node has no point
            point = None
            if box.forced is not None:
                meets, point, rows = self.region(box, act, ina)
                if not meets:
                    continue  # the split neurons' region misses the box
                tightened = self.tighten_layer(lows, ups, i, box, act, ina, rows)
                if tightened is None:
                    continue  # the tightened bounds contradict a split: no point
                act, ina = tightened
            live.append((i, box))
            points.append(point)
            states.append((act, ina))
        return live, points, states

    def _open_nodes(self, lows: list[torch.Tensor], ups: list[torch.Tensor], live: list[tuple[int, _Box]],
                    points: list[Any], states: list[Any]) -> list[tuple]:
        """The live nodes with a pair whose bound is above τ (the others are cleared)."""
        pairs, values = self.pair_values(lows, ups, live)
        open_nodes = []
        for n, (i, box) in enumerate(live):
            keep = ~(values[n] <= self.tau)  # a NaN bound never clears a pair
            settled = values[n][~keep]
            if settled.numel():
                self.cleared = max(self.cleared, float(settled.max()))
            if not bool(keep.any()):
                continue
            if time.perf_counter() > self.deadline:
                raise _OutOfTime
            open_nodes.append((i, box, float(values[n][keep].max()), pairs[n][keep], states[n], points[n]))
        return open_nodes

    def _witness_above(self, open_nodes: list[tuple]) -> tuple[float, np.ndarray] | None:
        """Sample the open nodes (centres, random points, the LPs' points): a verified norm above τ is
        returned when deciding, and raises the lower bound when computing the value (``rtol``)."""
        pts = []
        for _, box, _, _, _, point in open_nodes:
            sampled = box.lo + (box.hi - box.lo) * self.rng.random((_SAMPLES, box.lo.size))
            pts += [(box.lo + box.hi) / 2.0, *sampled] + ([] if point is None else [point])
        pts = np.array(pts)
        vals, ok = jacobian_norms(self.net, pts, self.norms)
        inside = np.max(np.abs(pts - self.center), axis=1) <= self.radius  # the ball, not only fl(z ± r)
        vals = np.where(ok & inside, vals * (1.0 - 1e-12), -np.inf)  # a lower bound that survives rounding
        k = int(np.argmax(vals))
        if vals[k] > self.tau:
            if self.rtol is None:
                return float(vals[k]), pts[k]
            self.raise_lower(float(vals[k]), pts[k])
        return None

    def _children(self, open_nodes: list[tuple], lows: list[torch.Tensor], ups: list[torch.Tensor]
                  ) -> list[tuple[float, _Box]]:
        """Each open node still above τ split in two, on a neuron when one is unstable, else on an input."""
        children: list[tuple[float, _Box]] = []
        for i, box, upper, open_pairs, (act, ina), point in open_nodes:
            if upper <= self.tau:  # maximising: cleared by a witness found since its bounds
                self.cleared = max(self.cleared, upper)
                continue
            parent = ([x[i:i + 1] for x in lows], [x[i:i + 1] for x in ups])
            unstable = ~(act | ina)
            kids = self.split_neuron(box, unstable, lows, ups, i, parent, point) if unstable.any() else None
            if kids is None:
                kids = self.split_input(box, unstable, parent)
            children += [(upper, _Box(lo=lo, hi=hi, parent=par, pairs=open_pairs, forced=forced, hint=hint))
                         for lo, hi, par, forced, hint in kids]
        return children

    def split_neuron(self, box: _Box, unstable: np.ndarray, lows: list[torch.Tensor], ups: list[torch.Tensor],
                     i: int, parent: tuple[list[torch.Tensor], list[torch.Tensor]], point: np.ndarray | None
                     ) -> list[tuple]:
        """Two children splitting one unstable neuron of the first layer that has any (so the next
        layer's pre-activations become affine on the node sooner): the one whose 0/1 entry moves
        ``cᵀJs`` most, weighted by the gap ``−l·u/(u − l)`` of its ReLU's chord relaxation."""
        offs = self.offsets
        layer = int(np.searchsorted(offs, int(np.flatnonzero(unstable)[0]), side="right")) - 1
        sl = slice(offs[layer], offs[layer + 1])
        lo, up = lows[layer][i].cpu().numpy(), ups[layer][i].cpu().numpy()
        gap = -lo * up / np.maximum(up - lo, 1e-300)
        j = int(np.argmax(np.where(unstable[sl], self.influence[sl] * gap, -np.inf)))
        n = self.net.n_hidden
        f_on, f_off = box.forced or (np.zeros(n, dtype=bool), np.zeros(n, dtype=bool))
        kids = []
        for side in (True, False):
            pl, pu = [x.clone() for x in parent[0]], [x.clone() for x in parent[1]]
            on, off = f_on.copy(), f_off.copy()
            if side:  # z_j ≥ 0 with D_j = 1
                pl[layer][0, j] = max(float(pl[layer][0, j]), _TINY)
                on[offs[layer] + j] = True
            else:  # z_j ≤ 0 with D_j = 0
                pu[layer][0, j] = min(float(pu[layer][0, j]), -_TINY)
                off[offs[layer] + j] = True
            kids.append((box.lo, box.hi, (pl, pu), (on, off), point))
        return kids

    def split_input(self, box: _Box, unstable: np.ndarray,
                    parent: tuple[list[torch.Tensor], list[torch.Tensor]]) -> list[tuple]:
        """Two halves of the box along its most influential coordinate (width × ℓ1 norm of the first
        layer's column over the unstable neurons)."""
        reach = self.reach[unstable].sum(axis=0)
        j = int(np.argmax((box.hi - box.lo) * (reach + 1e-12)))
        mid = (box.lo[j] + box.hi[j]) / 2.0
        left_hi, right_lo = box.hi.copy(), box.lo.copy()
        left_hi[j], right_lo[j] = mid, mid
        return [(lo, hi, parent, box.forced, None) for lo, hi in ((box.lo, left_hi), (right_lo, box.hi))]

    def climb(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """Cheap evidence first: hill climbing over realised patterns
        (:func:`~privcore.lipschitz.witnesses.ascend_witness`) from the sampled lower bound's point
        (:func:`~privcore.lipschitz.bounds.sampled_lower_bound`, a local search in x) and the best of
        further box vertices and uniform points. Deciding, a verified value above τ is the failing
        witness; maximising, it raises the lower bound."""
        d = lo.size
        inner = self.radius * (1.0 - 1e-9)  # LP points sit on faces: keep them inside the ball after rounding
        lo, hi = np.maximum(lo, self.center - inner), np.minimum(hi, self.center + inner)
        pts = np.vstack([np.where(self.rng.random((_CLIMB_SAMPLES, d)) < 0.5, lo, hi),
                         lo + (hi - lo) * self.rng.random((_CLIMB_SAMPLES, d))])
        vals, ok = jacobian_norms(self.net, pts, self.norms)
        starts = pts[np.argsort(-np.where(ok, vals, -np.inf))[:_CLIMB_STARTS - 1]]
        sampled = sampled_lower_bound(self.net, self.center, self.radius, **self.norms.kwargs)
        if sampled.point is not None:
            starts = np.vstack([sampled.point[None], starts])
        value, point = ascend_witness(self.net, lo, hi, starts, self.norms)
        if point is None or np.max(np.abs(point - self.center)) > self.radius:
            return
        if self.rtol is not None:
            self.raise_lower(value, point)
        elif value > self.tau:
            self.witness = (value, point)

    def raise_lower(self, value: float, point: np.ndarray | None) -> None:
        """Maximising: a verified witness ``value`` at ``point``; τ moves up to ``value · (1 + rtol)``
        plus the bounds' safety margin (no bound can come closer to a value than that margin)."""
        if value > self.lower:
            self.lower, self.point = value, point
            self.tau = max(self.tau, value * (1.0 + self.rtol) + self.cb.pair_margin)


def split_decide(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    threshold: float,
    *,
    norms: Norms = DEFAULT_NORMS,
    max_boxes: int = 200_000,
    max_seconds: float = 10.0,
    seed: int = 0,
    device: str | None = None,
) -> SplitResult | None:
    """Exactly decide ``L(f, B(center, radius)) ≤ threshold`` by splitting neurons and the box (module
    docstring), or None when ``max_boxes`` sub-boxes or ``max_seconds`` did not settle it, or the norm has too
    many vertex pairs (:data:`~privcore.lipschitz.clarke.MAX_PAIRS`). ``seed`` drives only where
    witnesses are sampled, never a pass; ``device`` is where the bounds run (None: CUDA when present)."""
    threshold = check_real("threshold", threshold)
    center, radius, cb = _prepare(net, center, radius, norms, max_boxes, max_seconds, device)
    if cb is None:
        return None
    with single_threaded(cb.device):
        return _split(net, cb, center, radius, threshold, norms, max_boxes, max_seconds, seed)


def split_value(
    net: ReluNetwork,
    center: np.ndarray,
    radius: float,
    *,
    norms: Norms = DEFAULT_NORMS,
    rtol: float = 1e-6,
    lower: float = -math.inf,
    point: np.ndarray | None = None,
    max_boxes: int = 200_000,
    max_seconds: float = 10.0,
    seed: int = 0,
    device: str | None = None,
) -> ValueResult | None:
    """``L(f, B(center, radius))`` by the same search maximising: the decision of
    :func:`split_decide` at a moving threshold ``τ = lower · (1 + rtol) + slack``, where ``lower``
    is the best float64-verified witness so far (start: ``lower`` at ``point``, a verified value
    the caller has). A witness above τ raises it instead of ending the search; a pair cleared at
    an earlier τ stays cleared (τ only grows). ``complete`` when every sub-box is cleared: then
    ``lower ≤ L ≤ upper ≤ lower · (1 + rtol) + slack``, ``slack`` the pair bounds' absolute float64
    margin (:attr:`~privcore.lipschitz.clarke.ClarkeBounds.pair_margin`). Otherwise ``upper`` is
    still certified (the largest bound of the sub-boxes left). None where :func:`split_decide`
    returns None for the norm or net."""
    rtol = check_nonnegative("rtol", rtol)
    lower = check_real("lower", lower)
    center, radius, cb = _prepare(net, center, radius, norms, max_boxes, max_seconds, device)
    if cb is None:
        return None
    start = time.perf_counter()
    search = _Search(net, cb, -math.inf, norms, np.random.default_rng(seed), center=center, radius=radius,
                     deadline=start + max_seconds, rtol=rtol)
    if math.isfinite(lower):
        search.raise_lower(float(lower), point)
    with single_threaded(cb.device):
        left, count = _run(search, center, radius, max_boxes, max_seconds, start)
    upper = max(search.cleared, left)
    return ValueResult(upper=max(upper, search.lower), lower=search.lower, point=search.point, boxes=count,
                       complete=left == -math.inf, slack=cb.pair_margin)


def _prepare(net: ReluNetwork, center: np.ndarray, radius: float, norms: Norms, max_boxes: int,
             max_seconds: float, device: str | None) -> tuple[np.ndarray, float, ClarkeBounds | None]:
    """Validated centre and radius, and the bound tensors (None: no budget, no hidden layer, or too many
    vertex pairs)."""
    center = check_finite_array("center", center).reshape(-1)
    if center.shape[0] != net.in_dim:
        raise ValueError(f"center must have the input dimension {net.in_dim}, got {center.shape[0]}")
    radius = check_nonnegative("radius", radius)
    if max_seconds <= 0 or max_boxes <= 0 or len(net.weights) < 2:
        return center, radius, None
    return center, radius, clarke_bounds(net, norms, device=device)


def _run(search: _Search, center: np.ndarray, radius: float, max_boxes: int, max_seconds: float,
         start: float) -> tuple[float, int]:
    """Best first over sub-boxes (largest bound first) until none is open, the budget runs out, or (deciding)
    a witness fails τ. Returns the largest bound of the sub-boxes left open (+inf for the unexamined root,
    -inf when none is) and the number examined; a failing witness is left in ``search.witness``."""
    lo, hi = box_around(center, radius)
    heap: list[tuple[float, int, _Box]] = [(-math.inf, 0, _Box(lo=lo, hi=hi, parent=None, pairs=None))]
    count, tick = 0, 1
    while heap:
        if count >= max_boxes or time.perf_counter() - start > max_seconds:
            return -heap[0][0], count
        batch, n_pairs, left = [], 0, -math.inf
        while heap and len(batch) < _BATCH_BOXES and n_pairs < _BATCH_PAIRS:
            prio, _, box = heapq.heappop(heap)
            if -prio <= search.tau:  # maximising: every pair of it is below a τ reached since
                search.cleared = max(search.cleared, -prio)
                continue
            left = max(left, -prio)
            batch.append(box)
            n_pairs += search.cb.n_pairs if box.pairs is None else box.pairs.numel()
        if not batch:
            continue
        count += len(batch)
        try:
            children, witness = search.step(batch)
        except _OutOfTime:
            return max(left, -heap[0][0] if heap else -math.inf), count
        if witness is None and children and count == 1:  # the root's bounds did not settle it
            search.climb(lo, hi)
            witness = search.witness
        if witness is not None:
            search.witness = witness
            return math.inf, count
        for upper, child in children:
            heapq.heappush(heap, (-upper, tick, child))
            tick += 1
    return -math.inf, count


def _split(net: ReluNetwork, cb: ClarkeBounds, center: np.ndarray, radius: float, threshold: float,
           norms: Norms, max_boxes: int, max_seconds: float, seed: int) -> SplitResult | None:
    start = time.perf_counter()
    search = _Search(net, cb, threshold, norms, np.random.default_rng(seed), center=center, radius=radius,
                     deadline=start + max_seconds)
    left, count = _run(search, center, radius, max_boxes, max_seconds, start)
    if search.witness is not None:
        value, point = search.witness
        return SplitResult(passed=False, upper=math.inf, lower=value, point=point, boxes=count)
    if left != -math.inf:
        return None
    return SplitResult(passed=True, upper=search.cleared, lower=0.0, point=None, boxes=count)
