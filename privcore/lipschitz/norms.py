"""The Jacobian's operator norm ``‖J‖_{p→q}``: one validated value for every step of the engine.

Region and norms (docs/DESIGN.md): the region is always the ℓ∞ box ``[center − r, center + r]``;
``p`` ∈ {ℓ∞, ℓ1} (``input``) and ``q`` ∈ {ℓ1, ℓ∞} (``output``) only choose the norm of the
Jacobian — ℓ∞→ℓ1 by default (the product's d_X = ℓ∞, d_Y = ℓ1). The public functions take them as
the keywords ``input_norm``/``output_norm`` and build one :class:`Norms`; everything below them
takes that value.

Every norm here is ``‖A‖_{p→q} = max cᵀ A s`` over the vertices ``s`` of the input unit ball and
``c`` of the dual output ball (:meth:`Norms.dual_vertices`): ℓ1→ℓ1 is the largest column ℓ1 norm,
ℓ∞→ℓ∞ the largest row ℓ1 norm, ℓ1→ℓ∞ the largest |a_ij|, and ℓ∞→ℓ1 a maximum over sign vectors
(NP-hard in general: the smaller side's sign vectors are enumerated up to
:data:`MAX_ENUMERATED_SIGN_DIM`, past it searched by branch and bound, :mod:`~privcore.lipschitz.sign_norm`).

Floating point: a value is ``max ‖A s‖₁`` over sign vectors evaluated in float64, as a witness's
norm is; the branch and bound also reports how far it got. Where it stops at its node limit,
:meth:`Norms.of` is a certified upper bound (rounding margin included) and :meth:`Norms.bracket`
says so: its lower end, the best ``‖A s‖₁`` found, is what a lower bound or a witness may use.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from privcore.lipschitz.deadline import check_deadline
from privcore.lipschitz.sign_norm import inf_to_one_bnb
from privcore.validation import check_choice

__all__ = [
    "DEFAULT_NORMS", "INPUT_NORMS", "MAX_ENUMERATED_SIGN_DIM", "OUTPUT_NORMS", "Norms", "operator_norm",
]

INPUT_NORMS = ("linf", "l1")
OUTPUT_NORMS = ("l1", "linf")
#: ∞→1 norms enumerate the sign vectors of the smaller side up to this size (one matrix product for
#: a whole stack), and search them by branch and bound past it (bench/inf_to_one.py: the crossover)
MAX_ENUMERATED_SIGN_DIM = 18


@dataclass(frozen=True, kw_only=True)
class Norms:
    """The Jacobian's operator norm: ``input`` ∈ {"linf", "l1"}, ``output`` ∈ {"l1", "linf"}
    (validated on construction; the error names ``input_norm``/``output_norm``)."""

    input: str = "linf"
    output: str = "l1"

    def __post_init__(self) -> None:
        check_choice("input_norm", self.input, INPUT_NORMS)
        check_choice("output_norm", self.output, OUTPUT_NORMS)

    @property
    def kwargs(self) -> dict[str, str]:
        """``input_norm=…, output_norm=…`` for the public functions that take them as keywords."""
        return {"input_norm": self.input, "output_norm": self.output}

    def of(self, a: np.ndarray) -> float | np.ndarray:
        """``‖A‖_{p→q}`` of a matrix ``(m, d)`` or a stack ``(..., m, d)``: exact, or for an ∞→1 norm
        whose branch and bound hit its node limit a certified upper bound (:meth:`bracket`)."""
        return self.bracket(a)[1]

    def bracket(self, a: np.ndarray) -> tuple[float | np.ndarray, float | np.ndarray]:
        """``(lower, upper)`` with ``lower ≤ ‖A‖_{p→q} ≤ upper``: equal where the norm is exact; the lower
        end is ``‖A s‖₁`` at a sign vector found (what witnesses and lower bounds use)."""
        a = np.asarray(a, dtype=np.float64)
        if (self.input, self.output) == ("linf", "l1") and a.shape[-1] and a.shape[-2]:
            low, res = _inf_to_one(a)
            return (float(low), float(res)) if np.ndim(res) == 0 else (low, res)
        res = self._simple(a)
        return res, res

    def _simple(self, a: np.ndarray) -> float | np.ndarray:
        if a.shape[-1] == 0 or a.shape[-2] == 0:
            res = np.zeros(a.shape[:-2])
        elif (self.input, self.output) == ("l1", "l1"):
            res = np.abs(a).sum(axis=-2).max(axis=-1)
        elif (self.input, self.output) == ("linf", "linf"):
            res = np.abs(a).sum(axis=-1).max(axis=-1)
        elif (self.input, self.output) == ("l1", "linf"):
            res = np.abs(a).max(axis=(-1, -2))
        return float(res) if np.ndim(res) == 0 else res

    def upper(self, a: np.ndarray) -> float:
        """A certified upper bound on ``‖A‖_{p→q}`` of one matrix (:meth:`of`)."""
        return float(self.of(a))

    def of_interval(self, mid: np.ndarray, rad: np.ndarray) -> float | np.ndarray:
        """``max ‖J‖_{p→q}`` over the interval matrix ``J ∈ [mid − rad, mid + rad]`` (shape ``(..., m, d)``).

        For a fixed dual pair (c, s) the maximum over the box is attained entrywise, so for ∞→1 it is
        ``‖mid‖_{∞→1} + Σ rad`` — exact, not a further relaxation (an upper bound where ``‖mid‖``'s
        search stops at its node limit)."""
        mid, rad = np.asarray(mid, dtype=np.float64), np.asarray(rad, dtype=np.float64)
        absmax = np.abs(mid) + rad
        if mid.shape[-1] == 0 or mid.shape[-2] == 0:
            res = np.zeros(mid.shape[:-2])
        elif (self.input, self.output) == ("linf", "l1"):
            res = _inf_to_one(mid)[1] + rad.sum(axis=(-1, -2))
        elif (self.input, self.output) == ("linf", "linf"):  # max over outputs of Σ_j |J_kj|
            res = absmax.sum(axis=-1).max(axis=-1)
        elif (self.input, self.output) == ("l1", "l1"):  # max over inputs of Σ_k |J_kj|
            res = absmax.sum(axis=-2).max(axis=-1)
        else:
            res = absmax.max(axis=(-1, -2))
        return float(res) if np.ndim(res) == 0 else res

    def dual_output_absmax(self, absmax: np.ndarray) -> np.ndarray:
        """``max_c |Σ_k a_jk c_k|`` bound per row j of ``absmax`` (n, m) over the dual output ball:
        ``c ∈ [−1, 1]^m`` for ℓ1 output (the row's sum), ``‖c‖₁ ≤ 1`` for ℓ∞ (the row's maximum)."""
        if self.output == "l1":
            return absmax.sum(axis=1)
        return absmax.max(axis=1, initial=0.0)

    def dual_sizes(self, in_dim: int, out_dim: int) -> tuple[int, int]:
        """``(len(S), len(C))`` of :meth:`dual_vertices`, without building them."""
        n_s = (1 << (in_dim - 1)) if self.input == "linf" else in_dim
        n_c = (1 << out_dim) if self.output == "l1" else 2 * out_dim
        return n_s, n_c

    def pair_count(self, in_dim: int, out_dim: int) -> int:
        """``len(S) · len(C)``: the vertex pairs the norm maximises over."""
        n_s, n_c = self.dual_sizes(in_dim, out_dim)
        return n_s * n_c

    def dual_vertices(self, in_dim: int, out_dim: int) -> tuple[np.ndarray, np.ndarray]:
        """``(S, C)`` with ``‖A‖ = max cᵀ A s`` over rows s of S and c of C: half the input ball's
        vertices (s and −s give the same value) and all of the dual output ball's (``{±1}^m`` for ℓ1
        output, ±e_k for ℓ∞)."""
        S = np.array(_sign_vectors(in_dim)) if self.input == "linf" else np.eye(in_dim)
        if self.output == "l1":
            half = np.array(_sign_vectors(out_dim))
            return S, np.vstack([half, -half])
        return S, np.vstack([np.eye(out_dim), -np.eye(out_dim)])


#: ℓ∞ → ℓ1, the product's norm pair (docs/DESIGN.md)
DEFAULT_NORMS = Norms()


def operator_norm(a: np.ndarray, *, input_norm: str = "linf", output_norm: str = "l1") -> float | np.ndarray:
    """Exact operator norm ``‖A‖_{p→q}`` for ``p ∈ {ℓ∞, ℓ1}``, ``q ∈ {ℓ1, ℓ∞}`` (stacks allowed);
    see :meth:`Norms.of`."""
    return Norms(input=input_norm, output=output_norm).of(a)


@functools.lru_cache(maxsize=32)
def _sign_vectors(n: int) -> np.ndarray:
    """All sign vectors in {±1}^n with first entry +1 (the others are their negatives)."""
    if n == 0:
        return np.ones((1, 0))
    codes = np.arange(1 << (n - 1), dtype=np.int64)
    rest = 1.0 - 2.0 * ((codes[:, None] >> np.arange(n - 1, dtype=np.int64)) & 1)
    out = np.hstack([np.ones((codes.shape[0], 1)), rest])
    out.setflags(write=False)
    return out


def _inf_to_one(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` on ``‖A‖_{∞→1} = max_{s ∈ {±1}^d} ‖A s‖₁`` for a stack ``(..., m, d)``: the
    enumeration (equal ends) up to :data:`MAX_ENUMERATED_SIGN_DIM`, else the branch and bound."""
    m, d = a.shape[-2:]
    if min(m, d) > MAX_ENUMERATED_SIGN_DIM:
        flat = a.reshape(-1, m, d)
        res = [inf_to_one_bnb(x) for x in flat]
        low = np.array([r.lower for r in res]).reshape(a.shape[:-2])
        return low, np.array([r.value for r in res]).reshape(a.shape[:-2])
    if m < d:  # ‖A‖_{∞→1} = ‖Aᵀ‖_{∞→1}: enumerate over the smaller side
        a = np.swapaxes(a, -1, -2)
    lead = a.shape[:-2]
    rows, k = a.shape[-2:]
    flat = np.ascontiguousarray(a).reshape(-1, rows, k)
    signs = _sign_vectors(k).T  # (k, 2^(k-1))
    out = np.empty(flat.shape[0])
    step = max(1, (1 << 19) // max(1, rows * signs.shape[1]))  # scratch of a few MB: stays in cache
    for s in range(0, flat.shape[0], step):
        check_deadline("the ∞→1 norms' enumeration")
        block = flat[s : s + step]
        prod = block.reshape(-1, k) @ signs  # one GEMM: (n·rows, 2^(k-1))
        np.abs(prod, out=prod)
        out[s : s + step] = prod.reshape(block.shape[0], rows, -1).sum(axis=1).max(axis=1)
    out = out.reshape(lead)
    return out, out
