"""Cheap bounds on the local Lipschitz constant of a ReLU network over a box.

Notation (docs/DESIGN.md, "maths contract"): ``L(f, B) = sup_{x ∈ B} ‖J_f(x)‖_{p→q}`` with the
generalized (Clarke) Jacobian, ``B = [lo, hi]`` a box (the ℓ∞ ball ``B(z, r)`` in the API),
``p`` the input norm ("linf" or "l1") and ``q`` the output norm ("l1" or "linf").

* :func:`forward_bounds` — interval bound propagation (IBP, Gowal et al. 2018) of the hidden
  pre-activations over the box; it fixes the stable neurons and gives LipMIP's big-M constants.
* :func:`backward_bounds` / :func:`interval_upper_bound` — interval propagation of the Jacobian
  (Jordan & Dimakis 2020, §4 "bounds on the backward pass"): ``Jᵀ = W_1ᵀ D_1 … W_Lᵀ`` with
  ``D_i = diag(ReLU')`` fixed at 0 or 1 for stable neurons and the interval [0, 1] for unstable
  ones, evaluated in midpoint–radius interval arithmetic, followed by the exact maximum of the
  operator norm over the resulting interval matrix.
* :func:`global_upper_bound` — product of layer operator norms (Szegedy et al. 2014; valid on
  all of ℝ^d because ``‖diag(ReLU')‖_{k→k} ≤ 1``).
* :func:`sampled_lower_bound` — Jacobian norms at sampled points of the box and at points
  improved by a local random search; every reported value is the exact float64 norm of the
  Jacobian at a point where the network is affine nearby, hence a certified lower bound.

Monotonicity (what PTR needs of a certifier, docs/DESIGN.md "certifier choice"): interval
arithmetic is inclusion-isotone, so for boxes ``B' ⊆ B`` the pre-activation intervals, the
stability pattern (stable stays stable) and the Jacobian interval matrix over ``B'`` are
contained in those over ``B``; the maximum of a norm over a smaller set is no larger. Hence
``interval_upper_bound(B') ≤ interval_upper_bound(B)`` (exactly, not only up to rounding,
because every step is a monotone function of the box in floating point as well).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from privcore.lipschitz.network import ReluNetwork, as_network
from privcore.lipschitz.norms import Norms
from privcore.validation import check_finite_array, check_int, check_nonnegative

__all__ = [
    "BackwardBounds",
    "ForwardBounds",
    "LowerBound",
    "Witness",
    "backward_bounds",
    "box_around",
    "forward_bounds",
    "global_upper_bound",
    "interval_upper_bound",
    "jacobian_norms",
    "nearest_sampled_violation",
    "pattern_lower_norms",
    "sampled_lower_bound",
]

def box_around(center: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """The ℓ∞ ball ``B(center, radius)`` as a box ``[center − r, center + r]``."""
    c = np.asarray(center, dtype=np.float64)
    return c - radius, c + radius


@dataclass(frozen=True, eq=False)
class ForwardBounds:
    """Pre-activation intervals ``[lower[i], upper[i]]`` of every ReLU layer over a box."""

    lower: tuple[np.ndarray, ...]
    upper: tuple[np.ndarray, ...]

    # Strict inequalities: a neuron whose pre-activation touches 0 somewhere on the (closed) box
    # keeps both Clarke choices there, so it stays a binary of the MILP. This makes the MILP's
    # value the same for any valid bounds: the sup over the closed box of the generalized
    # Jacobian norm of f as a function on ℝ^d.
    def active(self, i: int) -> np.ndarray:
        """Neurons of layer ``i`` that are ReLU-active on the whole box (pre-activation > 0)."""
        return self.lower[i] > 0.0

    def inactive(self, i: int) -> np.ndarray:
        """Neurons of layer ``i`` that are off on the whole box (pre-activation < 0)."""
        return self.upper[i] < 0.0

    def unstable(self, i: int) -> np.ndarray:
        """Neurons of layer ``i`` whose sign changes over the box."""
        return ~(self.active(i) | self.inactive(i))

    @property
    def n_unstable(self) -> int:
        """Total number of unstable neurons."""
        return int(sum(int(self.unstable(i).sum()) for i in range(len(self.lower))))


def forward_bounds(net: ReluNetwork, lo: np.ndarray, hi: np.ndarray) -> ForwardBounds:
    """Interval bound propagation of hidden pre-activations over the box ``[lo, hi]`` (IBP)."""
    mid = (np.asarray(lo, dtype=np.float64) + hi) / 2.0
    rad = (np.asarray(hi, dtype=np.float64) - lo) / 2.0
    lows, ups = [], []
    for w, b in zip(net.weights[:-1], net.biases[:-1], strict=True):
        m = w @ mid + b
        r = np.abs(w) @ rad
        lower, upper = m - r, m + r
        lows.append(lower)
        ups.append(upper)
        post_lo, post_hi = np.maximum(lower, 0.0), np.maximum(upper, 0.0)
        mid, rad = (post_lo + post_hi) / 2.0, (post_hi - post_lo) / 2.0
    return ForwardBounds(lower=tuple(lows), upper=tuple(ups))


@dataclass(frozen=True, eq=False)
class BackwardBounds:
    """Interval matrices of the partial transposed Jacobians, midpoint–radius form.

    ``mid[i] ± rad[i]`` (shape ``(n_i, m)``) encloses ``W_{i+1}ᵀ D_{i+1} … W_Lᵀ`` for every
    admissible ``D``; index 0 is the full ``Jᵀ`` (shape ``(d, m)``); index ``i ≥ 1`` is the
    backward signal *before* the ReLU of hidden layer ``i`` (1-based).
    """

    mid: tuple[np.ndarray, ...]
    rad: tuple[np.ndarray, ...]

    def signal_bound(self, i: int, norms: Norms) -> np.ndarray:
        """``max |q_j|`` over the dual output set: ``q = M c``, ``c ∈ [-1,1]^m`` (output ℓ1) or
        ``‖c‖₁ ≤ 1`` (output ℓ∞), ``M`` in the interval matrix of layer ``i``."""
        return norms.dual_output_absmax(np.abs(self.mid[i]) + self.rad[i])


def backward_bounds(net: ReluNetwork, fwd: ForwardBounds) -> BackwardBounds:
    """Interval propagation of the transposed Jacobian through the ReLU pattern of ``fwd``."""
    n_hidden = len(net.weights) - 1
    mids: list[np.ndarray] = [np.empty(0)] * (n_hidden + 1)
    rads: list[np.ndarray] = [np.empty(0)] * (n_hidden + 1)
    mid = np.array(net.weights[-1].T)
    rad = np.zeros_like(mid)
    for i in range(n_hidden, 0, -1):  # hidden layer i (1-based) has bounds fwd.*[i-1]
        mids[i], rads[i] = mid, rad
        act, una = fwd.active(i - 1), fwd.unstable(i - 1)
        lo, hi = mid - rad, mid + rad
        lo = np.where(act[:, None], lo, np.where(una[:, None], np.minimum(lo, 0.0), 0.0))
        hi = np.where(act[:, None], hi, np.where(una[:, None], np.maximum(hi, 0.0), 0.0))
        mid, rad = (lo + hi) / 2.0, (hi - lo) / 2.0
        w = net.weights[i - 1]
        mid, rad = w.T @ mid, np.abs(w.T) @ rad
    mids[0], rads[0] = mid, rad
    return BackwardBounds(mid=tuple(mids), rad=tuple(rads))


def interval_upper_bound(
    net: Any,
    center: np.ndarray,
    radius: float,
    *,
    input_norm: str = "linf",
    output_norm: str = "l1",
    fwd: ForwardBounds | None = None,
) -> float:
    """Upper bound on ``L(f, B(center, radius))`` by interval propagation of the Jacobian
    (Jordan & Dimakis 2020, §4); monotone under ball inclusion (see module docstring). ``net``
    may be a torch module made of Linear/ReLU layers."""
    norms = Norms(input=input_norm, output=output_norm)
    net = as_network(net)
    if fwd is None:
        fwd = forward_bounds(net, *box_around(center, radius))
    bwd = backward_bounds(net, fwd)
    return float(norms.of_interval(bwd.mid[0].T, bwd.rad[0].T))


def global_upper_bound(net: Any, *, input_norm: str = "linf", output_norm: str = "l1") -> float:
    """Global Lipschitz upper bound: ``min_k ‖W_L‖_{k→q} ∏ ‖W_i‖_{k→k} ‖W_1‖_{p→k}`` over
    ``k ∈ {ℓ1, ℓ∞}`` (Szegedy et al. 2014; ReLU is 1-Lipschitz coordinatewise, so
    ``‖diag(ReLU')‖_{k→k} ≤ 1``). Independent of the ball, hence trivially monotone."""
    norms = Norms(input=input_norm, output=output_norm)
    ws = as_network(net).weights
    if len(ws) == 1:
        return norms.upper(ws[0])
    best = np.inf
    for k in ("linf", "l1"):  # the hidden layers' norm k→k; p and q as given at the ends
        first = Norms(input=norms.input, output=k).upper(ws[0])
        last = Norms(input=k, output=norms.output).upper(ws[-1])
        middle = 1.0
        for w in ws[1:-1]:
            middle *= Norms(input=k, output=k).upper(w)
        best = min(best, first * middle * last)
    return float(best)


@dataclass(frozen=True)
class LowerBound:
    """A certified lower bound: the Jacobian norm ``value`` at the point ``point`` of the box."""

    value: float
    point: np.ndarray | None
    n_evaluated: int


#: relative safety margin for float64 rounding in a reported lower bound
_LOWER_DEFLATE = 1e-12


#: (model, norms, pattern) → lower end of ‖J_D‖ (:meth:`Norms.bracket`): sampling and the searches
#: evaluate the same few patterns of a ball again and again
_PATTERN_NORMS: OrderedDict[tuple[str, Norms, bytes], float] = OrderedDict()
_PATTERN_NORMS_SIZE = 1 << 16
_PATTERN_LOCK = threading.Lock()


def pattern_lower_norms(net: ReluNetwork, bits: np.ndarray, norms: Norms) -> np.ndarray:
    """Per 0/1 pattern (rows of ``bits``, (n, n_hidden)): the lower end of ``‖J_D‖`` (the norm itself
    unless its search stopped early), each distinct pattern evaluated once and memoised."""
    if bits.shape[1] == 0:  # no hidden layer: one linear map
        low = float(np.atleast_1d(norms.bracket(net.weights[0])[0])[0])
        return np.full(bits.shape[0], low)
    packed = np.packbits(bits.astype(bool), axis=1)
    uniq, inverse = np.unique(packed, axis=0, return_inverse=True)
    keys = [(net.digest, norms, u.tobytes()) for u in uniq]
    vals = np.empty(uniq.shape[0])
    with _PATTERN_LOCK:
        hits = [_PATTERN_NORMS.get(key) for key in keys]
    todo = [i for i, h in enumerate(hits) if h is None]
    for i, h in enumerate(hits):
        if h is not None:
            vals[i] = h
    if todo:
        flat = np.unpackbits(uniq[todo], axis=1, count=bits.shape[1]).astype(np.float64)
        jac = net.jacobians(np.zeros((len(todo), net.in_dim)), net.split_pattern(flat))
        vals[todo] = np.atleast_1d(norms.bracket(jac)[0])
        with _PATTERN_LOCK:
            for i in todo:
                _PATTERN_NORMS[keys[i]] = float(vals[i])
            while len(_PATTERN_NORMS) > _PATTERN_NORMS_SIZE:
                _PATTERN_NORMS.popitem(last=False)
    return vals[inverse.reshape(-1)]


def jacobian_norms(net: ReluNetwork, points: np.ndarray, norms: Norms) -> tuple[np.ndarray, np.ndarray]:
    """Jacobian norms at a batch of points, and a mask of the points where the network is
    affine in a neighbourhood (no pre-activation within rounding of 0), where the norm is a
    certified lower bound on the local Lipschitz constant of any box containing the point.
    The Jacobian is constant on an activation region, so each distinct pattern's norm is computed
    once (:func:`pattern_lower_norms`); where an ∞→1 search stopped early, its lower end."""
    pts = np.atleast_2d(np.asarray(points, dtype=np.float64))
    pre = net.preactivations(pts)
    strict = np.ones(pts.shape[0], dtype=bool)
    for z in pre:
        scale = 1e-9 * (1.0 + np.abs(z).max(axis=1, keepdims=True))
        strict &= np.all(np.abs(z) > scale, axis=1)
    bits = np.hstack([z > 0 for z in pre]) if pre else np.zeros((pts.shape[0], 0), dtype=bool)
    return pattern_lower_norms(net, bits, norms), strict


def sampled_lower_bound(
    net: Any,
    center: np.ndarray,
    radius: float,
    *,
    input_norm: str = "linf",
    output_norm: str = "l1",
    n_samples: int = 256,
    n_rounds: int = 6,
    seed: int = 0,
) -> LowerBound:
    """Certified lower bound on ``L(f, B(center, radius))`` from Jacobians at sampled points
    (uniform, box vertices, the centre) and a local random search around the best ones.

    Sampling is deterministic given ``seed`` (a lower bound is not a privacy parameter: any
    point of the box gives a valid one, so no secure randomness is needed here).
    """
    norms = Norms(input=input_norm, output=output_norm)
    net = as_network(net)
    center = check_finite_array("center", center).reshape(-1)
    radius = check_nonnegative("radius", radius)
    n_samples = check_int("n_samples", n_samples, minimum=1)
    d = center.shape[0]
    rng = np.random.default_rng(seed)
    lo, hi = box_around(center, radius)
    n_vert = n_samples // 2
    pts = np.vstack(
        [
            center[None, :],
            center + radius * rng.choice((-1.0, 1.0), size=(n_vert, d)),
            rng.uniform(lo, hi, size=(n_samples - n_vert, d)),
        ]
    )
    best_val, best_pt, n_eval = -np.inf, None, 0

    def evaluate(p: np.ndarray) -> np.ndarray:
        nonlocal best_val, best_pt, n_eval
        vals, ok = jacobian_norms(net, p, norms)
        n_eval += p.shape[0]
        vals = np.where(ok, vals, -np.inf)
        k = int(np.argmax(vals))
        if vals[k] > best_val:
            best_val, best_pt = float(vals[k]), p[k].copy()
        return vals

    vals = evaluate(pts)
    n_top = min(8, pts.shape[0])
    per = max(1, n_samples // (2 * n_top))
    for rnd in range(n_rounds if radius > 0 else 0):
        top = pts[np.argsort(-vals)[:n_top]]
        scale = radius * 0.5**rnd
        moves = rng.uniform(-scale, scale, size=(n_top, per, d))
        flips = rng.random((n_top, per, d)) < 1.0 / max(d, 1)  # jump some coordinates to a face
        cand = top[:, None, :] + moves
        cand = np.where(flips, center + radius * np.sign(moves + 1e-300), cand)
        cand = np.clip(cand.reshape(-1, d), lo, hi)
        cand_vals = evaluate(cand)
        pts = np.vstack([top, cand])
        vals = np.concatenate([np.sort(vals)[::-1][:n_top], cand_vals])
    if not np.isfinite(best_val):
        return LowerBound(value=0.0, point=None, n_evaluated=n_eval)
    return LowerBound(value=best_val * (1.0 - _LOWER_DEFLATE), point=best_pt, n_evaluated=n_eval)


@dataclass(frozen=True)
class Witness:
    """A point at ℓ∞ distance ``distance`` from the centre where the network is affine nearby and
    its Jacobian norm ``norm`` exceeds the threshold: L(f, B(center, r)) ≥ norm for every r ≥ distance."""

    distance: float
    norm: float
    point: np.ndarray


def nearest_sampled_violation(
    net: Any,
    center: np.ndarray,
    radius: float,
    threshold: float,
    norms: Norms,
    *,
    per_shell: int = 48,
    n_shells: int = 7,
    seed: int = 0,
) -> Witness | None:
    """The closest sampled point of ``B(center, radius)`` whose Jacobian norm exceeds ``threshold``.

    Samples boxes of radius ``radius·2^{-k}`` from small to large (uniform points and vertices),
    stops at the first one holding a violation, then walks the segment from the centre towards it
    to find where the violation starts. A cheap certified witness (see :func:`jacobian_norms`) that
    bounds the distance to the nearest violation: used to prune the exact search of
    :mod:`privcore.lipschitz.patterns`, and a fail decision for every radius ≥ its distance.
    """
    net = as_network(net)
    center = np.asarray(center, dtype=np.float64)
    rng = np.random.default_rng(seed)
    d = center.shape[0]
    best: Witness | None = None
    for k in range(n_shells - 1, -1, -1):
        rho = radius * 0.5**k
        half = per_shell // 2
        pts = np.vstack([
            center + rho * rng.choice((-1.0, 1.0), size=(half, d)),
            center + rng.uniform(-rho, rho, size=(per_shell - half, d)),
        ])
        vals, ok = jacobian_norms(net, pts, norms)
        hit = ok & (vals * (1 - _LOWER_DEFLATE) > threshold)
        if hit.any():
            dist = np.max(np.abs(pts - center), axis=1)
            i = int(np.flatnonzero(hit)[np.argmin(dist[hit])])
            best = Witness(distance=float(dist[i]), norm=float(vals[i] * (1 - _LOWER_DEFLATE)), point=pts[i])
            break
    if best is None:
        return None
    ts = np.linspace(0.0, 1.0, 33)[1:]  # the violation may start before the sampled point
    seg = center + ts[:, None] * (best.point - center)
    vals, ok = jacobian_norms(net, seg, norms)
    hit = np.flatnonzero(ok & (vals * (1 - _LOWER_DEFLATE) > threshold))
    if hit.size and ts[hit[0]] < 1.0:
        p = seg[hit[0]]
        norm = float(vals[hit[0]] * (1 - _LOWER_DEFLATE))
        best = Witness(distance=float(np.max(np.abs(p - center))), norm=norm, point=p)
    return best
