"""Float-safe sensitivity: certified bounds on the rounding error of a Linear/ReLU network.

Why. A mechanism that releases f(x) + noise calibrates the noise to a sensitivity L·α certified for
the real-number function f (its stored weights, exact arithmetic), but the code releases f̂(x), what
floating point computes. If ‖f̂(x) − f(x)‖ ≤ η for every admissible x, with η public, then
‖f̂(x) − f̂(x')‖ ≤ L·α + 2η for neighbours, so calibrating to L·α + 2η (rounded up,
:func:`sensitivity_with_rounding`) keeps the guarantee for what is actually released (without η,
the digits ``ip-lipschitz-l1`` model, μ₁ = 1, gave float32 outputs 1.19× μ₁·α apart at α = 1e-6
and 4.3× at α = 1e-7). η must not depend on the private input: it is fixed by public quantities (the
weights, a public bound on the input domain, or the sensitivity itself).

What is evaluated. :class:`CertifiedNet` holds the network as a chain of affine maps x ↦ Wx + b and
ReLUs, with the weights as stored (float32 weights convert to float64 exactly), and evaluates it in
float64 (numpy/BLAS, any summation order, with or without FMA). Layers other than Linear, ReLU,
Identity, Dropout (evaluated as in eval mode: identity), Flatten, Sequential and the Lipschitz
layers of :mod:`privcore.nets.lipschitz_layers` are refused: the analysis would not describe them.

Error model (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed. 2002, §2.2 and
§3.1). With u = 2⁻⁵³ and γ_n = n·u/(1 − n·u), a dot product plus bias computed in any order
satisfies |fl(wᵀh + b) − (wᵀh + b)| ≤ γ_{n+1}(|w|ᵀ|h| + |b|) + (n+1)·2⁻¹⁰⁷⁴ for n inputs (Higham
Eq. 3.5 with the bias as an (n+1)-th term; the absolute term covers gradual underflow: a product
that underflows is off by ≤ 2⁻¹⁰⁷⁵, additions of subnormals are exact, and later roundings grow
each such error by at most (1 + γ_n) < 2). ReLU is exact and 1-Lipschitz coordinate-wise. For
one affine layer with computed input ĥ = h + e, |e| ≤ E, and |ĥ| ≤ M componentwise:

    |fl(Wĥ + b) − (Wh + b)| ≤ |W|·E + γ_{n+1}(|W|·M + |b|) + (n+1)·2⁻¹⁰⁷⁴ =: E'
    |fl(Wĥ + b)|            ≤ (1 + γ_{n+1})(|W|·M + |b|) + (n+1)·2⁻¹⁰⁷⁴ =: M'

* A priori (:meth:`CertifiedNet.error_bound`): start from E = 0 and M = a public bound on |x|
  (pixels in [0, 1]: M = 1) and carry (E, M) through the layers; ‖E_L‖_p bounds the error in the
  output norm for EVERY input in the domain. The IP models use this (their inputs are pixels).
* A posteriori (:meth:`CertifiedNet.running_error`): M = |ĥ| of the actual evaluation (a
  running-error bound, Higham §3.3). PTR's embedding z has no public bound, so
  :meth:`CertifiedNet.within` releases f̂(z) when this bound is ≤ the public η and otherwise
  evaluates f(z) exactly (all values are dyadic rationals: integer arithmetic) and rounds each
  coordinate once to float64, checking the rounding error exactly; if even that exceeds η (only
  when ‖f(z)‖ ≳ η/u) it raises and nothing is released. Either way the value v(z) satisfies
  ‖v(z) − f(z)‖ ≤ η, which is all the sensitivity argument uses; which path ran (and BLAS's
  summation order) does not matter. Only timing reveals the path; the refusal, like the sampler's
  "values too large for the noise grid", is a deterministic function of z outside the noise.

The bounds themselves are computed in float64 on nonnegative numbers: a k-term sum of products
evaluated as ŝ has true value s ≤ (ŝ + k·2⁻¹⁰⁷⁴)/(1 − γ_k), and :func:`_up` returns
next_up(fl(fl(ŝ + k·2⁻¹⁰⁷⁴)·(1 + (k+2)·2⁻⁵¹))), which dominates that for k·u ≤ 2⁻²⁰ (the extra
(2k + 6)·u covers 1/(1 − γ_k) and the two roundings of the correction). Every operation is monotone
on nonnegative numbers, so feeding upper bounds in gives upper bounds out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np

from privcore.validation import check_finite_array, check_nonnegative, check_positive

__all__ = [
    "ALLOWANCE_BITS",
    "CertifiedNet",
    "CertifiedOutput",
    "gamma",
    "rounding_allowance",
    "sensitivity_with_rounding",
]

_U = 2.0**-53
_TINY = 2.0**-1074  # the smallest positive subnormal float64
_MAX_TERMS = 2**30  # k·u ≤ 2⁻²³: the correction in _up stays valid
#: PTR's public rounding budget is η = 2^-ALLOWANCE_BITS · (Δp·R): the noise grows by 2·2⁻²⁴ ≈ 1.2e-7.
ALLOWANCE_BITS = 24

_P_NAMES: dict[Any, float] = {
    1: 1.0, "l1": 1.0, 2: 2.0, "l2": 2.0, math.inf: math.inf, "inf": math.inf, "linf": math.inf,
}  # fmt: skip


def _as_p(p: Any) -> float:
    try:
        return _P_NAMES[p]
    except (KeyError, TypeError):
        raise ValueError(f"p must be one of 1, 2, inf (or 'l1', 'l2', 'linf'), got {p!r}") from None


def gamma(n: int) -> float:
    """γ_n = n·u/(1 − n·u) for float64 (u = 2⁻⁵³; Higham §3.1), rounded up."""
    if not 0 <= n <= _MAX_TERMS:
        raise ValueError(f"n must be in [0, {_MAX_TERMS}], got {n!r}")
    return math.nextafter(float(Fraction(n, 2**53 - n)), math.inf) if n else 0.0


def _up(s_hat: Any, k: int) -> Any:
    """Upper bound on a nonnegative k-term sum of products whose float64 evaluation gave ``s_hat``."""
    if not 1 <= k <= _MAX_TERMS:
        raise ValueError(f"a bound over {k} terms is outside the analysed range [1, {_MAX_TERMS}]")
    with np.errstate(over="ignore"):
        return np.nextafter((s_hat + k * _TINY) * (1.0 + (k + 2) * 2.0**-51), np.inf)


def _norm_up(e: np.ndarray, p: float) -> np.ndarray:
    """Upper bound on ‖e‖_p along the last axis for e ≥ 0."""
    m = e.shape[-1]
    if p == math.inf:
        return e.max(axis=-1)
    if p == 1.0:
        return _up(e.sum(axis=-1), m)
    with np.errstate(over="ignore"):
        return np.nextafter(np.sqrt(_up((e * e).sum(axis=-1), m)), np.inf)


def sensitivity_with_rounding(*, lipschitz: float, radius: float, rounding: float) -> float:
    """L·α + 2η rounded up: the sensitivity of what is computed when ‖f̂ − f‖ ≤ η (module docstring).

    ``rounding = 0`` gives L·α rounded up by one ulp (f evaluated exactly).
    """
    lip = check_positive("lipschitz", lipschitz)
    rad = check_positive("radius", radius)
    eta = check_nonnegative("rounding", rounding)
    base = math.nextafter(lip * rad, math.inf)
    total = base if eta == 0.0 else math.nextafter(base + 2.0 * eta, math.inf)
    if not math.isfinite(total):
        raise ValueError(
            f"lipschitz·radius + 2·rounding must be finite, got lipschitz={lipschitz!r}, "
            f"radius={radius!r}, rounding={rounding!r}"
        )
    return total


def rounding_allowance(sensitivity: float) -> float:
    """PTR's public rounding budget η = 2^-ALLOWANCE_BITS · sensitivity (a function of Δp and R only)."""
    return math.ldexp(check_positive("sensitivity", sensitivity), -ALLOWANCE_BITS)


# ----------------------------------------------------------------------------- exact dyadic arithmetic


def _dyadic(a: np.ndarray) -> tuple[np.ndarray, int]:
    """Exact a = ints·2^exponent: an object array of Python ints and one common exponent."""
    flat = np.asarray(a, dtype=np.float64)
    mant, expo = np.frexp(flat)  # a = mant·2^expo, 0.5 ≤ |mant| < 1 (subnormals included)
    ints = np.ldexp(mant, 53).astype(np.int64)  # exact: |ints| < 2^53
    shift = expo.astype(np.int64) - 53
    nonzero = ints != 0
    if not nonzero.any():
        return np.zeros(flat.shape, dtype=object), 0
    base = int(shift[nonzero].min())
    out = np.empty(flat.shape, dtype=object)
    for idx, (m, s) in enumerate(zip(ints.ravel().tolist(), shift.ravel().tolist(), strict=True)):
        out.flat[idx] = m << (s - base) if m else 0
    return out, base


def _to_float(value: int, exponent: int) -> float:
    """value·2^exponent rounded to nearest float64 (correctly rounded; OverflowError when too large)."""
    if exponent >= 0:
        return float(value << exponent)
    return float(Fraction(value, 1 << -exponent))


# ----------------------------------------------------------------------------- the network


@dataclass(frozen=True, kw_only=True)
class CertifiedOutput:
    """f̂(x) with ‖value − f(x)‖_p ≤ ``bound`` ≤ the requested η; ``exact`` when the exact path ran."""

    value: np.ndarray
    bound: float
    exact: bool


@dataclass(frozen=True, eq=False)
class CertifiedNet:
    """A chain of affine maps (W, b) and ReLUs (``None``), evaluated in float64 with certified error.

    Build it with :meth:`from_module` (torch) or :meth:`from_layers` (arrays). Inputs are flat
    vectors (d,) or batches (n, d). See the module docstring for the analysis.
    """

    layers: tuple[tuple[np.ndarray, np.ndarray] | None, ...]
    in_dim: int = field(init=False)
    out_dim: int = field(init=False)

    def __post_init__(self) -> None:
        dims = [w.shape for w, _ in (layer for layer in self.layers if layer is not None)]
        if not dims:
            raise ValueError("a CertifiedNet needs at least one affine layer")
        for (m, _), (_, n) in itertools.pairwise(dims):
            if m != n:
                raise ValueError(f"layer sizes do not chain: an output of {m} feeds an input of {n}")
        object.__setattr__(self, "in_dim", int(dims[0][1]))
        object.__setattr__(self, "out_dim", int(dims[-1][0]))

    @classmethod
    def from_layers(cls, layers: Sequence[tuple[Any, Any] | None]) -> CertifiedNet:
        """From ``[(W, b), None, (W, b), …]`` (None = ReLU); W of shape (out, in), b of shape (out,)."""
        parsed: list[tuple[np.ndarray, np.ndarray] | None] = []
        for i, layer in enumerate(layers):
            if layer is None:
                parsed.append(None)
                continue
            w = np.array(check_finite_array(f"layers[{i}].weight", layer[0]), dtype=np.float64)
            b = np.array(check_finite_array(f"layers[{i}].bias", layer[1]), dtype=np.float64)
            if w.ndim != 2 or b.shape != (w.shape[0],) or w.size == 0:
                raise ValueError(
                    f"layers[{i}] must be a non-empty (out, in) weight and an (out,) bias, got "
                    f"shapes {w.shape} and {b.shape}"
                )
            if w.shape[1] + 1 > _MAX_TERMS:
                raise ValueError(
                    f"layers[{i}] has {w.shape[1]} inputs; at most {_MAX_TERMS - 1} are analysed"
                )
            w.setflags(write=False)
            b.setflags(write=False)
            parsed.append((w, b))
        return cls(tuple(parsed))

    @classmethod
    def from_module(cls, module: Any) -> CertifiedNet:
        """Parse a torch module (see the module docstring for what is accepted; anything else raises
        TypeError). The weights are copied to CPU float64 exactly as stored (or, for the Lipschitz
        layers, as their forward pass uses them)."""
        layers: list[tuple[Any, Any] | None] = []
        _parse(module, layers, "f")
        return cls.from_layers(layers)

    # --------------------------------------------------------------------- evaluation

    def _check_input(self, x: Any) -> np.ndarray:
        arr = check_finite_array("x", x)
        if arr.ndim not in (1, 2) or arr.shape[-1] != self.in_dim:
            raise ValueError(f"x must have shape ({self.in_dim},) or (n, {self.in_dim}), got {arr.shape}")
        return arr

    def __call__(self, x: Any) -> np.ndarray:
        """f̂(x): the float64 evaluation (what the bounds are about)."""
        h = self._check_input(x)
        for layer in self.layers:
            if layer is None:
                h = np.maximum(h, 0.0)
            else:
                w, b = layer
                h = h @ w.T + b
        return h

    @cached_property
    def _abs(self) -> tuple[tuple[np.ndarray, np.ndarray] | None, ...]:
        return tuple(None if layer is None else (np.abs(layer[0]), np.abs(layer[1])) for layer in self.layers)

    @staticmethod
    def _step(
        wa: np.ndarray, ba: np.ndarray, err: np.ndarray | None, mag: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(E', bound on |W|·M + |b|) for one affine layer (module docstring)."""
        k = wa.shape[1] + 1
        with np.errstate(over="ignore", invalid="ignore"):
            s = _up(mag @ wa.T + ba, k)
            new = gamma(k) * s + k * _TINY
            if err is not None:
                new = new + _up(err @ wa.T, k - 1)
            return _up(new, 3), s

    def error_bound(self, *, p: Any, input_bound: Any = 1.0) -> float:
        """A priori η: ‖f̂(x) − f(x)‖_p ≤ η for every x with |x_i| ≤ ``input_bound`` (a scalar or one
        bound per input). Raises ValueError when the bound is not finite (the domain is too large)."""
        q = _as_p(p)
        bound = check_finite_array("input_bound", input_bound)
        if np.any(bound < 0):
            raise ValueError("input_bound must be ≥ 0 (a bound on |x_i|)")
        mag = np.broadcast_to(bound, (self.in_dim,)).astype(np.float64)
        err: np.ndarray | None = None
        for layer in self._abs:
            if layer is None:
                continue  # |relu(a)| ≤ |a| and relu is 1-Lipschitz: (E, M) carry over
            wa, ba = layer
            k = wa.shape[1] + 1
            err, s = self._step(wa, ba, err, mag)
            with np.errstate(over="ignore"):
                mag = _up(s + gamma(k) * s + k * _TINY, 3)
        assert err is not None
        eta = float(_norm_up(err, q))
        if not math.isfinite(eta):
            raise ValueError(
                f"input_bound {np.max(bound):.3g} is too large: the rounding-error bound of this "
                "network overflows float64"
            )
        return eta

    def running_error(self, x: Any) -> tuple[np.ndarray, np.ndarray]:
        """(f̂(x), E) with |f̂(x) − f(x)| ≤ E componentwise (a posteriori; E may be inf on overflow)."""
        h = self._check_input(x)
        err: np.ndarray | None = None
        for layer, absolute in zip(self.layers, self._abs, strict=True):
            if layer is None:
                h = np.maximum(h, 0.0)
                continue
            assert absolute is not None
            w, b = layer
            err, _ = self._step(absolute[0], absolute[1], err, np.abs(h))
            with np.errstate(over="ignore", invalid="ignore"):
                h = h @ w.T + b
        assert err is not None
        err = np.where(np.isfinite(h), err, np.inf)
        return h, err

    @cached_property
    def _dyadic_layers(self) -> tuple[tuple[np.ndarray, int, np.ndarray, int] | None, ...]:
        return tuple(
            None if layer is None else (*_dyadic(layer[0]), *_dyadic(layer[1])) for layer in self.layers
        )

    def exact(self, x: Any) -> list[Fraction]:
        """f(x) exactly, as Fractions, for one input vector (d,)."""
        value, exponent = self._exact_dyadic(x)
        scale = Fraction(2) ** exponent
        return [Fraction(int(v)) * scale for v in value]

    def _exact_dyadic(self, x: Any) -> tuple[np.ndarray, int]:
        arr = self._check_input(x)
        if arr.ndim != 1:
            raise ValueError(f"x must be one input vector of shape ({self.in_dim},), got {arr.shape}")
        h, eh = _dyadic(arr)
        for layer in self._dyadic_layers:
            if layer is None:
                h = np.array([v if v > 0 else 0 for v in h.tolist()], dtype=object)
                continue
            wi, ew, bi, eb = layer
            prod = wi.dot(h) if h.size else np.zeros(wi.shape[0], dtype=object)
            ep = ew + eh
            e = min(ep, eb)
            h = np.array(
                [(int(p) << (ep - e)) + (int(c) << (eb - e)) for p, c in zip(prod, bi, strict=True)],
                dtype=object,
            )
            eh = e
        return h, eh

    def within(self, x: Any, *, eta: float, p: Any) -> CertifiedOutput:
        """f̂(x) for one input vector with ‖f̂(x) − f(x)‖_p ≤ ``eta`` guaranteed (module docstring).

        Float64 when its running-error bound is ≤ η, else exact evaluation rounded once per
        coordinate; ValueError (nothing to release) when even that is more than η away.
        """
        q = _as_p(p)
        budget = check_nonnegative("eta", eta)
        arr = self._check_input(x)
        if arr.ndim != 1:
            raise ValueError(f"x must be one input vector of shape ({self.in_dim},), got {arr.shape}")
        value, err = self.running_error(arr)
        bound = float(_norm_up(err, q))
        if bound <= budget:
            return CertifiedOutput(value=value, bound=bound, exact=False)
        ints, exponent = self._exact_dyadic(arr)
        exact = [Fraction(int(v)) * Fraction(2) ** exponent for v in ints]
        try:
            rounded = [_to_float(int(v), exponent) for v in ints]
        except OverflowError:
            rounded = None
        if rounded is not None:
            errors = [abs(Fraction(r) - e) for r, e in zip(rounded, exact, strict=True)]
            if q == 1.0:
                ok = sum(errors, Fraction(0)) <= Fraction(budget)
            elif q == 2.0:
                ok = sum((e * e for e in errors), Fraction(0)) <= Fraction(budget) ** 2
            else:
                ok = max(errors) <= Fraction(budget)
            if ok:
                return CertifiedOutput(value=np.array(rounded, dtype=np.float64), bound=budget, exact=True)
        raise ValueError(
            f"f(x) is too large to be represented within the public rounding budget η = {budget:.3g} "
            f"(float64 spacing near its largest output exceeds it); nothing released"
        )


# ----------------------------------------------------------------------------- torch parsing


def _plain(module: Any, base: type) -> bool:
    """``module`` is a ``base`` whose forward is base's own and that carries no hooks."""
    return (
        isinstance(module, base)
        and type(module).forward is base.forward
        and not getattr(module, "_forward_hooks", None)
        and not getattr(module, "_forward_pre_hooks", None)
    )


def _parse(module: Any, out: list[tuple[Any, Any] | None], where: str) -> None:
    import torch
    from torch import nn

    from privcore.nets.lipschitz_layers import LipschitzMLP, _ConstrainedLinear
    from privcore.nets.models import LipschitzClassifier

    def to64(t: torch.Tensor) -> np.ndarray:
        return t.detach().to(device="cpu", dtype=torch.float64).numpy().copy()

    if _plain(module, nn.Sequential):
        for name, child in module.named_children():
            _parse(child, out, f"{where}.{name}")
    elif _plain(module, nn.Linear):
        w = to64(module.weight)
        out.append((w, to64(module.bias) if module.bias is not None else np.zeros(w.shape[0])))
    elif _plain(module, nn.ReLU):
        out.append(None)
    elif _plain(module, nn.Identity) or _plain(module, nn.Dropout):
        pass  # identity (Dropout as in eval mode: the certified function)
    elif _plain(module, nn.Flatten):
        if (module.start_dim, module.end_dim) != (1, -1):
            raise TypeError(f"{where}: only nn.Flatten(start_dim=1, end_dim=-1) is supported")
    elif _plain(module, LipschitzClassifier):
        _parse(module.flatten, out, f"{where}.flatten")
        _parse(module.mlp, out, f"{where}.mlp")
    elif _plain(module, LipschitzMLP):
        last = len(module.layers) - 1
        for i, layer in enumerate(module.layers):
            if not _plain(layer, _ConstrainedLinear):
                raise TypeError(f"{where}.layers.{i} is {type(layer).__name__}, not a plain Lipschitz layer")
            with torch.no_grad():
                w = to64(layer.constrained_weight())
            out.append((w, to64(layer.bias) if layer.bias is not None else np.zeros(w.shape[0])))
            if i < last:
                out.append(None)
    else:
        raise TypeError(
            f"{where} is {type(module).__name__}: the rounding-error analysis covers only Linear, ReLU, "
            "Identity, Dropout, Flatten, Sequential and the Lipschitz layers (no custom forward, no hooks)"
        )
