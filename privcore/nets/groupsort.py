"""GroupSort (MaxMin) MLPs written as plain ``Linear``/``ReLU`` networks.

GroupSort with groups of two, MaxMin(a, b) = (max(a, b), min(a, b)), is 1-Lipschitz in every ℓp and
its derivative is a permutation at every point, so it keeps gradient norms where ReLU halves them
(Anil, Lucas & Grosse 2019, "Sorting out Lipschitz function approximation", Secs. 4-5). With weights
whose ∞→∞ norms (largest row ℓ1 sums) are bounded, such networks are universal approximators of the
ℓ∞-Lipschitz scalar functions (ibid., Thm. 3), the input norm of the certified global mechanism.

The obfuscators of the global mechanism must be ``nn.Sequential`` stacks of ``nn.Linear`` and
``nn.ReLU``: the exact engine, the release-aware noise and every loader read that form. MaxMin is
one: with u = ReLU(a − b) and a large offset M,

    max(a, b) = u + ReLU(b + M) − M,   min(a, b) = ReLU(a + M) − M − u,

exact wherever a, b ≥ −M, i.e. on the clipping box when M exceeds the pre-activations' range there.
Each GroupSort layer of width h becomes one ReLU layer of width 3h/2 (h/2 units that switch, h that
stay on); the offsets and the fixed maps S = [D; I] (D the pair differences) and E (the MaxMin
read-out) are folded into the weights, so training updates only the free GroupSort weights W_l
(:func:`maxmin_relu_mlp`) and :func:`bake` returns the plain
network. Certification never trusts the construction: G is computed from the baked weights.

``linf=True`` normalises every hidden weight's rows to ℓ1 norm 1 (‖W_l‖∞→∞ = 1) and the last weight
to ‖W_L‖∞→1 = 1 (max over t ∈ {±1}^k of ‖W_Lᵀt‖₁, exact), so the GroupSort function's ∞→1 constant
is at most 1 by construction (:func:`construction_bound`, the product of those norms).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from torch import nn

from privcore.validation import check_int, check_positive

__all__ = ["MAX_OUT_SIGNS", "OFFSET", "bake", "construction_bound", "maxmin_relu_mlp", "relu_form_widths"]

#: the offset M of the always-on units (exact on a box whose pre-activations stay above −M)
OFFSET = 64.0
#: largest output dimension whose exact ∞→1 norm enumerates the output sign vectors
MAX_OUT_SIGNS = 12


def relu_form_widths(widths: Sequence[int]) -> list[int]:
    """The ``relu_mlp`` widths of the MaxMin network of GroupSort ``widths`` (hidden h → 3h/2)."""
    ws = [check_int(f"widths[{i}]", int(w), minimum=1) for i, w in enumerate(widths)]
    if len(ws) < 3:
        raise ValueError(f"widths needs an input, at least one hidden and an output size, got {ws}")
    for i, w in enumerate(ws[1:-1], start=1):
        if w % 2:
            raise ValueError(f"widths[{i}] must be even (MaxMin sorts pairs), got {w}")
    return [ws[0], *(3 * w // 2 for w in ws[1:-1]), ws[-1]]


def _split(h: int) -> torch.Tensor:
    """S = [D; I] (3h/2 × h): the pair differences a − b, then every unit."""
    d = torch.zeros(h // 2, h)
    idx = torch.arange(h // 2)
    d[idx, 2 * idx], d[idx, 2 * idx + 1] = 1.0, -1.0
    return torch.cat([d, torch.eye(h)])


def _readout(h: int) -> torch.Tensor:
    """E (h × 3h/2): MaxMin's outputs (max₀, min₀, max₁, …) from (u, a + M, b + M, …), offsets aside."""
    e = torch.zeros(h, h // 2 + h)
    idx = torch.arange(h // 2)
    e[2 * idx, idx], e[2 * idx, h // 2 + 2 * idx + 1] = 1.0, 1.0  # max = u + (b + M)
    e[2 * idx + 1, idx], e[2 * idx + 1, h // 2 + 2 * idx] = -1.0, 1.0  # min = (a + M) − u
    return e


def _out_signs(k: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product((-1.0, 1.0), repeat=k)))


def _linf_to_l1(w: torch.Tensor, signs: torch.Tensor) -> torch.Tensor:
    """Exact ‖W‖∞→1 = max over t ∈ {±1}^k of ‖Wᵀt‖₁ (k = rows)."""
    return torch.matmul(signs.to(w), w).abs().sum(-1).amax()


class _MaxMinLinear(nn.Linear):
    """One layer of the ReLU form: weight S·Ŵ·E and bias S·(c − M·Ŵ·1) + (0, M) from the free GroupSort
    weight W (Ŵ: W, ∞-normalised with ``linf``) and bias c (the first layer has no read-out E and no
    −M term, the last no split S and no offsets). ``weight`` and ``bias`` are computed on access, so
    every reader of ``nn.Linear`` (forward, Jacobians, :func:`bake`) sees the ReLU form."""

    def __init__(self, a: int, b: int, *, first: bool, last: bool, linf: bool, offset: float) -> None:
        nn.Module.__init__(self)
        init = nn.Linear(a, b)
        self.free_weight = nn.Parameter(init.weight.detach().clone())
        self.free_bias = nn.Parameter(init.bias.detach().clone())
        self.register_buffer("split", None if last else _split(b), persistent=False)
        self.register_buffer("readout", None if first else _readout(a), persistent=False)
        self.register_buffer("signs", _out_signs(b) if last else None, persistent=False)
        self.linf, self.offset, self.last = linf, offset, last
        self.in_features = a if first else a // 2 + a
        self.out_features = b if last else b // 2 + b

    def normalised(self) -> torch.Tensor:
        """Ŵ: the free weight, with ``linf`` its rows ℓ1-normalised (hidden) or ‖·‖∞→1 = 1 (last)."""
        w = self.free_weight
        if not self.linf:
            return w
        if self.last:
            return w / _linf_to_l1(w, self.signs).clamp_min(1e-12)
        return w / w.abs().sum(1, keepdim=True).clamp_min(1e-12)

    @property
    def weight(self) -> torch.Tensor:  # type: ignore[override]
        w = self.normalised()
        if self.readout is not None:
            w = torch.matmul(w, self.readout)
        if self.split is not None:
            w = torch.matmul(self.split, w)
        return w

    @property
    def bias(self) -> torch.Tensor:  # type: ignore[override]
        c = self.free_bias
        if self.readout is not None:
            c = c - self.offset * self.normalised().sum(1)
        if self.split is None:
            return c
        h = self.split.shape[1]
        shift = torch.cat([c.new_zeros(h // 2), c.new_full((h,), self.offset)])
        return torch.matmul(self.split, c) + shift

    def norm(self) -> torch.Tensor:
        """‖Ŵ‖∞→∞ (hidden) or ‖Ŵ‖∞→1 (last), exact."""
        w = self.normalised()
        return _linf_to_l1(w, self.signs) if self.last else w.abs().sum(1).amax()


def maxmin_relu_mlp(widths: Sequence[int], *, linf: bool = False, offset: float = OFFSET) -> nn.Sequential:
    """A trainable MaxMin GroupSort MLP of ``widths`` as a ``Linear``/``ReLU`` ``nn.Sequential`` of
    :func:`relu_form_widths` (module docstring). ``linf``: ∞-normalised weights, ∞→1 constant ≤ 1."""
    ws = [int(w) for w in widths]
    relu_form_widths(ws)  # validates
    offset = check_positive("offset", offset)
    if ws[-1] > MAX_OUT_SIGNS:
        raise ValueError(f"widths[-1] must be at most {MAX_OUT_SIGNS} (the ∞→1 norm enumerates the "
                         f"output's sign vectors), got {ws[-1]}")
    n_layers = len(ws) - 1
    mods: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(ws)):
        last = i == n_layers - 1
        mods.append(_MaxMinLinear(a, b, first=i == 0, last=last, linf=linf, offset=offset))
        if not last:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


@torch.no_grad()
def bake(net: nn.Sequential) -> nn.Sequential:
    """The plain ``relu_mlp`` with ``net``'s current weights (same function, plain parameters)."""
    out: list[nn.Module] = []
    for m in net:
        if isinstance(m, nn.Linear):
            w, b = m.weight.detach().clone(), m.bias.detach().clone()
            lin = nn.Linear(w.shape[1], w.shape[0])
            lin.weight.copy_(w)
            lin.bias.copy_(b)
            out.append(lin)
        else:
            out.append(nn.ReLU())
    return nn.Sequential(*out)


def construction_bound(net: nn.Sequential) -> torch.Tensor:
    """Π_l ‖Ŵ_l‖∞→∞ · ‖Ŵ_L‖∞→1 of the free GroupSort weights of a :func:`maxmin_relu_mlp` (shape (1,),
    differentiable): MaxMin is 1-Lipschitz in ℓ∞, so this bounds the GroupSort function's ∞→1 constant
    where the offsets are exact (≤ 1 up to rounding with ``linf``). A training-time scale; releases use
    the G certified from the baked weights."""
    lins = [m for m in net if isinstance(m, nn.Linear)]
    if not lins or not all(isinstance(m, _MaxMinLinear) for m in lins):
        raise ValueError("net must come from maxmin_relu_mlp")
    bound = lins[0].norm()
    for m in lins[1:]:
        bound = bound * m.norm()
    return bound.reshape(1)
