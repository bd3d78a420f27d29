"""Lipschitz-constrained linear layers and MLPs with a certified global bound.

Two families, each a reparameterisation of a stored free weight ``W`` (so that training is
ordinary unconstrained optimisation):

* :class:`L1LipschitzLinear` — ℓ1 column-norm reparameterisation of Shavit & Gjura (2019),
  Sec. 3, Eq. (1), after Gouk et al. (2018): ``W'[:, j] = W[:, j] / max(1, ‖W[:, j]‖₁ / k)``,
  so every column of ``W'`` absolute-sums to at most ``k`` and ``‖W'‖_{1→1}`` (the maximum
  column absolute sum) is at most ``k``.
* :class:`SpectralLipschitzLinear` — ℓ2 spectral normalisation with the *exact* largest
  singular value (an SVD at every forward pass, not power iteration, which only
  under-estimates it): ``W' = W / max(1, σ_max(W) / k)`` so ``‖W'‖₂ ≤ k``. This is the
  ℓ2 family the Gauss-Output mechanism of the inference-privacy paper needs (Sec. 4).

ReLU is 1-Lipschitz in every ℓp norm (it acts coordinate-wise and each coordinate is
1-Lipschitz), so a ReLU MLP of such layers is Lipschitz with the product of the layer bounds
(:class:`LipschitzMLP`, Shavit & Gjura Sec. 3: "forcing each [layer] individually to be
k^{1/b}-Lipschitz" — the paper's ``b√k`` is a typo for the b-th root).

Floating point. The bound must hold for the float32 weights actually used, not only for
the real-number formula. The rescaling is computed in float64 towards a target slightly
below the bound, with a margin that covers rounding the result to the weight's dtype
(relative error ≤ u = 2⁻²⁴ per entry for float32, so a column sum grows by at most a factor
1 + u; a spectral norm by at most u·‖W'‖_F ≤ u·√rank·‖W'‖₂). The exact operator norm of
the baked weights (checked in the tests) is therefore ≤ the stated bound, and reaches it to
within about 1e-6 relative when a column saturates.

Every layer and model offers ``lipschitz_bound(p)`` (a certified global bound in ℓp→ℓp)
and ``to_linear()`` / ``to_sequential()`` exporting plain ``nn.Linear``/``nn.ReLU`` modules
with the reparameterised weights baked in, for the exact Lipschitz engine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn

from privcore.validation import check_choice, check_int, check_positive

__all__ = [
    "L1LipschitzLinear",
    "LipschitzMLP",
    "SpectralLipschitzLinear",
    "operator_norm",
    "sequential_lipschitz_bound",
    "split_bound",
]

Norm = Literal["l1", "l2"]
_P_ALIASES: dict[object, float] = {
    1: 1.0,
    "l1": 1.0,
    "1": 1.0,
    2: 2.0,
    "l2": 2.0,
    "2": 2.0,
    math.inf: math.inf,
    "inf": math.inf,
    "linf": math.inf,
}


def _as_p(p: float | str) -> float:
    """Normalise a norm name (1, 2, inf, 'l1', 'l2', 'linf') to 1.0, 2.0 or inf."""
    try:
        return _P_ALIASES[p]
    except (KeyError, TypeError):
        raise ValueError(f"p must be one of 1, 2, inf (or 'l1', 'l2', 'linf'), got {p!r}") from None


def _round_up(x: float) -> float:
    """The next float above ``x`` (to keep a product of bounds an upper bound)."""
    return math.nextafter(x, math.inf)


def _unit_roundoff(dtype: torch.dtype) -> float:
    """Unit roundoff u of a floating dtype (2⁻²⁴ for float32)."""
    return float(torch.finfo(dtype).eps) / 2.0


def operator_norm(weight: torch.Tensor, p: float | str) -> float:
    """Certified ``‖W‖_{p→p}`` of a matrix (shape ``(out, in)`` as in ``nn.Linear``).

    Closed forms (e.g. Horn & Johnson, Matrix Analysis, 5.6): ``‖W‖_{1→1}`` = maximum
    column absolute sum, ``‖W‖_{∞→∞}`` = maximum row absolute sum, ``‖W‖₂`` = largest
    singular value. Computed in float64 and rounded up by a relative 1e-12 (sums) or 1e-9
    (the backward-stable LAPACK SVD) so that the value is an upper bound, not an estimate.
    """
    q = _as_p(p)
    w = weight.detach().to(torch.float64)
    if w.ndim != 2:
        raise ValueError(f"weight must be a matrix, got shape {tuple(w.shape)}")
    if w.numel() == 0:
        return 0.0
    if q == 1.0:
        v = float(w.abs().sum(dim=0).max())
        return v * (1.0 + 1e-12)
    if q == math.inf:
        v = float(w.abs().sum(dim=1).max())
        return v * (1.0 + 1e-12)
    v = float(torch.linalg.matrix_norm(w, ord=2))
    return v * (1.0 + 1e-9)


def sequential_lipschitz_bound(net: nn.Sequential, p: float | str) -> float:
    """Certified global ℓp→ℓp Lipschitz bound of a ``Linear``/``ReLU`` ``nn.Sequential``.

    The product of the exact layer operator norms (:func:`operator_norm`); ReLU is
    1-Lipschitz in every ℓp (Shavit & Gjura Sec. 3, composition rule). An upper bound on
    the exact constant that the Lipschitz engine computes.
    """
    bound = 1.0
    for module in net:
        if isinstance(module, nn.Linear):
            bound = _round_up(bound * operator_norm(module.weight, p))
        elif not isinstance(module, nn.ReLU):
            raise TypeError(f"net may hold only nn.Linear and nn.ReLU modules, got {type(module).__name__}")
    return bound


def split_bound(bound: float, n_layers: int) -> tuple[float, ...]:
    """Equal per-layer bounds ``k^{1/b}`` whose (rounded-up) product is ≤ ``bound``.

    Shavit & Gjura Sec. 3 (each of b layers k^{1/b}-Lipschitz). The root is nudged down by
    a few ulps until the product, rounded up at every step, does not exceed ``bound``.
    """
    bound = check_positive("bound", bound)
    n_layers = check_int("n_layers", n_layers, minimum=1)
    k_i = bound ** (1.0 / n_layers)
    while True:
        prod = 1.0
        for _ in range(n_layers):
            prod = _round_up(prod * k_i)
        if prod <= bound:
            return (k_i,) * n_layers
        k_i = math.nextafter(k_i, 0.0)


class _ConstrainedLinear(nn.Module):
    """Shared machinery: a free weight, a reparameterised weight with norm ≤ ``bound``."""

    native_p: float = 1.0

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        bound: float = 1.0,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.in_features = check_int("in_features", in_features, minimum=1)
        self.out_features = check_int("out_features", out_features, minimum=1)
        self.bound = check_positive("bound", bound)
        init = nn.Linear(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.weight = nn.Parameter(init.weight.detach().clone())
        self.bias = nn.Parameter(init.bias.detach().clone()) if bias else None

    def _target(self) -> float:
        raise NotImplementedError

    def _scale(self, w64: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def constrained_weight(self) -> torch.Tensor:
        """The reparameterised weight W' (differentiable w.r.t. the free weight W)."""
        w64 = self.weight.to(torch.float64)
        return (w64 / self._scale(w64)).to(self.weight.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ W'ᵀ + b``."""
        return nn.functional.linear(x, self.constrained_weight(), self.bias)

    def lipschitz_bound(self, p: float | str | None = None) -> float:
        """Certified global ℓp→ℓp Lipschitz bound of this layer.

        In the layer's own norm (the default) it is ``bound``, by construction; in another
        norm it is the exact operator norm of the baked weight (:func:`operator_norm`).
        """
        q = self.native_p if p is None else _as_p(p)
        if q == self.native_p:
            return self.bound
        return operator_norm(self.constrained_weight(), q)

    @torch.no_grad()
    def to_linear(self) -> nn.Linear:
        """A plain ``nn.Linear`` holding the baked reparameterised weight (same dtype/device)."""
        w = self.constrained_weight()
        lin = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None,
                        device=w.device, dtype=w.dtype)
        lin.weight.copy_(w)
        if self.bias is not None:
            lin.bias.copy_(self.bias)
        return lin

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bound={self.bound:g}"


class L1LipschitzLinear(_ConstrainedLinear):
    """Linear layer with ``‖W'‖_{1→1} ≤ bound`` by ℓ1 column-norm reparameterisation.

    Shavit & Gjura (2019) Sec. 3 Eq. (1); Gouk et al. (2018):
    ``W'[:, j] = W[:, j] / max(1, ‖W[:, j]‖₁ / k)``. Columns index inputs, so a change of
    the input by ``d`` changes the output by at most ``k·‖d‖₁``.
    """

    native_p = 1.0

    def _target(self) -> float:
        # Rounding each entry to the weight dtype grows a column sum by at most (1 + u); the
        # float64 sum and division add a few 2⁻⁵³; a margin of 4u covers both with room.
        return self.bound * (1.0 - 4.0 * _unit_roundoff(self.weight.dtype))

    def _scale(self, w64: torch.Tensor) -> torch.Tensor:
        col = w64.abs().sum(dim=0, keepdim=True)
        return torch.clamp(col / self._target(), min=1.0)


class SpectralLipschitzLinear(_ConstrainedLinear):
    """Linear layer with ``‖W'‖₂ ≤ bound`` by exact spectral normalisation.

    ``W' = W / max(1, σ_max(W) / k)`` with σ_max from a float64 SVD at every call (exact,
    unlike power iteration; Miyato et al. 2018 / Gouk et al. 2018 with the exact norm).
    This is the ℓ2 layer family for Gauss-Output (inference privacy, Sec. 4).
    """

    native_p = 2.0

    def _target(self) -> float:
        # Rounding W' to the weight dtype adds E with ‖E‖₂ ≤ ‖E‖_F ≤ u·√rank·‖W'‖₂; the
        # float64 SVD is accurate to ~1e-15 relative. Margin u·(√rank + 2) covers both.
        rank = min(self.in_features, self.out_features)
        return self.bound * (1.0 - _unit_roundoff(self.weight.dtype) * (math.sqrt(rank) + 2.0) - 1e-12)

    def _scale(self, w64: torch.Tensor) -> torch.Tensor:
        sigma = torch.linalg.matrix_norm(w64, ord=2)
        return torch.clamp(sigma / self._target(), min=1.0)


_LAYER_FOR_NORM: dict[str, type[_ConstrainedLinear]] = {
    "l1": L1LipschitzLinear,
    "l2": SpectralLipschitzLinear,
}


class LipschitzMLP(nn.Module):
    """ReLU MLP whose global ℓp→ℓp Lipschitz constant is at most ``bound`` by construction.

    ``sizes = (d_in, h_1, …, d_out)``; ReLU between layers, none after the last. The bound
    is split equally over the layers (:func:`split_bound`, Shavit & Gjura Sec. 3) unless
    ``layer_bounds`` gives each layer's bound explicitly (their product, rounded up, must
    not exceed ``bound``). ``norm="l1"`` uses :class:`L1LipschitzLinear` (ℓ1→ℓ1, the
    mechanism-design paper), ``norm="l2"`` :class:`SpectralLipschitzLinear` (ℓ2→ℓ2).
    """

    def __init__(
        self,
        sizes: Sequence[int],
        *,
        bound: float,
        norm: Norm = "l1",
        layer_bounds: Sequence[float] | None = None,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        sizes = tuple(check_int(f"sizes[{i}]", s, minimum=1) for i, s in enumerate(sizes))
        if len(sizes) < 2:
            raise ValueError(f"sizes must name at least an input and an output size, got {sizes!r}")
        self.bound = check_positive("bound", bound)
        self.norm: Norm = check_choice("norm", norm, ("l1", "l2"))  # type: ignore[assignment]
        n_layers = len(sizes) - 1
        if layer_bounds is None:
            bounds = split_bound(self.bound, n_layers)
        else:
            bounds = tuple(check_positive(f"layer_bounds[{i}]", b) for i, b in enumerate(layer_bounds))
            if len(bounds) != n_layers:
                raise ValueError(f"layer_bounds must have {n_layers} entries got {len(bounds)}")
            if self._product(bounds) > self.bound:
                raise ValueError(
                    f"layer_bounds multiply to more than bound={self.bound:g}: {bounds!r}"
                )
        cls = _LAYER_FOR_NORM[self.norm]
        self.sizes = sizes
        self.layers = nn.ModuleList(
            cls(i, o, bound=b, bias=bias, device=device, dtype=dtype)
            for i, o, b in zip(sizes[:-1], sizes[1:], bounds, strict=True)
        )

    @staticmethod
    def _product(values: Sequence[float]) -> float:
        prod = 1.0
        for v in values:
            prod = _round_up(prod * v)
        return prod

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Layers with ReLU in between."""
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < last:
                x = torch.relu(x)
        return x

    def lipschitz_bound(self, p: float | str | None = None) -> float:
        """Certified global ℓp→ℓp bound: the product of the layer bounds (≤ ``bound`` in
        the model's own norm), rounded up at every multiplication."""
        return self._product([layer.lipschitz_bound(p) for layer in self.layers])

    @torch.no_grad()
    def to_sequential(self) -> nn.Sequential:
        """A plain ``nn.Sequential`` of ``nn.Linear``/``nn.ReLU`` computing the same function,
        with the reparameterised weights baked in (for the exact Lipschitz engine)."""
        modules: list[nn.Module] = []
        for i, layer in enumerate(self.layers):
            if i:
                modules.append(nn.ReLU())
            modules.append(layer.to_linear())
        return nn.Sequential(*modules)
