"""Release-aware noise regulariser ("N") for obfuscator training.

The posthoc-PTR release is f(z) + Lap(Δp·R/ε) per output coordinate, with Δp = μ + 3σ of the
local ∞→1 Lipschitz constants L(f, N(z_i, R)) on training embeddings (paper Sec. 6 and
the authors' code, whose Table-1 noise is also Lap(Δp·R/ε); docs/DESIGN.md). The paper's "N"
regulariser (App. E: Gaussian/Laplace σ = 0.01 on z̃)
is blind to that noise: its effect depends on the arbitrary scale of z̃, while the release is
scale-invariant — only class separation in z̃ relative to Δp·R matters. The release-aware
regulariser trains the classifier on exactly the noise the release will add, computed from the
current f and differentiable in it:

* per sample, ‖J_f‖∞→1 (exact: max over the sign vectors s of ‖J s‖₁) at z and at ``n_ball``
  random vertices of the ℓ∞ ball B(z, R); each is a lower bound on L(f, N(z, R)), their max the
  estimate n_i (:func:`ball_jacobian_norms`);
* the batch proposal Δ̂ = mean(n) + n_sigma·std(n) (the Δp rule, :func:`delta_hat`);
* the classifier sees z̃ + Δ̂·R/ε·Laplace(1) with ε drawn per sample from a set of privacy
  levels and a clean fraction (:func:`release_noise`): reparameterised, so the gradient reaches
  Δ̂ and f learns to shrink its Lipschitz constant relative to its class separation;
* optionally a spread penalty std(n)/mean(n) (:func:`spread_penalty`) so that μ + 3σ is tight
  and PTR's test passes for most points.

Everything here is training-time estimation; the shipped Δp is recomputed afterwards with the
exact certifier (:mod:`privcore.train.delta_p`). Training noise is not a release.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
from torch import nn

from privcore.validation import check_in_range, check_int, check_nonnegative, check_positive

__all__ = [
    "MAX_SIGN_DIM",
    "ball_jacobian_norms",
    "box_jacobian_norms",
    "delta_hat",
    "laplace_release_noise",
    "layer_bound",
    "linf_to_l1_norms",
    "release_noise",
    "relu_mlp_jacobians",
    "spread_penalty",
]

#: largest min(rows, cols) for which the exact ∞→1 norm enumerates sign vectors (2^(k−1) of them)
MAX_SIGN_DIM = 16


def _linear_relu_layers(f: nn.Module) -> list[nn.Module]:
    mods = list(f) if isinstance(f, nn.Sequential) else [f]
    if not mods or not all(isinstance(m, (nn.Linear, nn.ReLU)) for m in mods):
        raise ValueError("f must be an nn.Sequential of nn.Linear and nn.ReLU layers (an obfuscator)")
    return mods


def relu_mlp_jacobians(f: nn.Module, z: torch.Tensor) -> torch.Tensor:
    """Jacobians J_f(z_b), shape (B, out, in), of a Linear/ReLU ``nn.Sequential`` at a batch of
    points: W_L·D_{L−1}·…·D_1·W_1 with D the activation pattern at each point (LipMIP's
    generalized Jacobian on the open linear regions, Jordan & Dimakis 2020). Differentiable
    in the weights; the pattern itself is piecewise constant."""
    mods = _linear_relu_layers(f)
    h = z
    jac: torch.Tensor | None = None
    for m in mods:
        if isinstance(m, nn.Linear):
            h = m(h)
            w = m.weight.unsqueeze(0)  # (1, out, in)
            jac = w.expand(z.shape[0], -1, -1) if jac is None else torch.matmul(w, jac)
        else:
            mask = (h > 0).to(h.dtype)
            h = h * mask
            jac = torch.diag_embed(mask) if jac is None else mask.unsqueeze(-1) * jac
    if jac is None:
        raise ValueError("f has no layers")
    return jac


@functools.lru_cache(maxsize=8)
def _signs(k: int) -> torch.Tensor:
    codes = torch.arange(1 << (k - 1), dtype=torch.int64)
    rest = 1.0 - 2.0 * ((codes[:, None] >> torch.arange(k - 1, dtype=torch.int64)) & 1).double()
    return torch.cat([torch.ones(codes.shape[0], 1, dtype=torch.float64), rest], dim=1).T  # (k, 2^(k−1))


def linf_to_l1_norms(jac: torch.Tensor) -> torch.Tensor:
    """Exact ‖J‖∞→1 = max over s ∈ {±1}^d of ‖J s‖₁ for a stack (..., m, d) of matrices
    (enumerating the smaller side: ‖J‖∞→1 = ‖Jᵀ‖∞→1); differentiable almost everywhere."""
    m, d = jac.shape[-2:]
    a = jac if d <= m else jac.transpose(-1, -2)
    k = a.shape[-1]
    if k > MAX_SIGN_DIM:
        raise ValueError(f"exact ∞→1 norm needs min(rows, cols) ≤ {MAX_SIGN_DIM}, got a {m}×{d} matrix")
    s = _signs(k).to(device=a.device, dtype=a.dtype)
    return torch.matmul(a, s).abs().sum(-2).amax(-1)


def ball_jacobian_norms(
    f: nn.Module,
    z: torch.Tensor,
    radius: float,
    *,
    n_ball: int = 4,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Per sample, the largest ‖J_f‖∞→1 over z and ``n_ball`` random vertices of the ℓ∞ ball
    B(z, radius): a lower bound on the local constant L(f, N(z, radius)) (each point's Jacobian
    is attained inside the ball), differentiable in f's weights. Shape (B,)."""
    check_positive("radius", radius)
    n_ball = check_int("n_ball", n_ball, minimum=0)
    pts = [z]
    if n_ball:
        shape = (n_ball, *z.shape)
        signs = torch.randint(0, 2, shape, generator=generator).to(device=z.device, dtype=z.dtype) * 2 - 1
        pts.extend(z.unsqueeze(0) + radius * signs)
    p = torch.cat([q.reshape(-1, z.shape[-1]) for q in pts])
    norms = linf_to_l1_norms(relu_mlp_jacobians(f, p)).reshape(len(pts) if n_ball else 1, z.shape[0])
    return norms.amax(0)


def box_jacobian_norms(
    f: nn.Module,
    lower: torch.Tensor,
    upper: torch.Tensor,
    *,
    n: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """‖J_f‖∞→1 at ``n`` random points of the box [lower, upper]: half uniform inside, half random
    vertices (where a ReLU net's steepest regions of a box often lie). Each is a lower bound on the
    box's G, their max an estimate of it; differentiable in f's weights. Shape (n,)."""
    n = check_int("n", n, minimum=1)
    d = lower.shape[-1]
    u = torch.rand((n, d), generator=generator).to(device=lower.device, dtype=lower.dtype)
    u[n // 2:] = u[n // 2:].round()
    p = lower + u * (upper - lower)
    return linf_to_l1_norms(relu_mlp_jacobians(f, p))


def layer_bound(f: nn.Module) -> torch.Tensor:
    """A differentiable upper bound on ‖J_f(z)‖∞→1 at every z of a Linear/ReLU ``nn.Sequential``:
    max over s ∈ {±1}^d of 1ᵀ|W_L|···|W_2|·|W_1 s|. Each ReLU's derivative lies in [0, 1], so
    |J_f(z) s| ≤ |W_L|···|W_2|·|W_1 s| entrywise (the first layer keeps its cancellations, the later
    ones are bounded by absolute values). Unlike the sampled norms it bounds the whole input space,
    so the certified G over any box is at most this value. Shape (1,)."""
    lin = [m for m in _linear_relu_layers(f) if isinstance(m, nn.Linear)]
    if not lin:
        raise ValueError("f has no Linear layer")
    w1 = lin[0].weight
    d = w1.shape[1]
    if d > MAX_SIGN_DIM:
        raise ValueError(f"layer_bound enumerates the input's sign vectors: needs ≤ {MAX_SIGN_DIM} inputs, "
                         f"got {d}")
    v = torch.matmul(w1, _signs(d).to(device=w1.device, dtype=w1.dtype)).abs()  # (h1, 2^(d−1))
    for m in lin[1:]:
        v = torch.matmul(m.weight.abs(), v)
    return v.sum(0).amax().reshape(1)


def delta_hat(norms: torch.Tensor, *, n_sigma: float = 3.0) -> torch.Tensor:
    """The Δp rule on a batch: mean + n_sigma·std (sample std, ddof = 1) of the per-sample norms."""
    check_nonnegative("n_sigma", n_sigma)
    if norms.numel() < 2:
        return norms.sum()
    return norms.mean() + n_sigma * norms.std()


def spread_penalty(norms: torch.Tensor) -> torch.Tensor:
    """std/mean of the per-sample norms (scale-free): small when Δp = μ + 3σ sits close to
    every point's constant, so PTR's test releases most points."""
    if norms.numel() < 2:
        return norms.sum() * 0.0
    return norms.std() / norms.mean().clamp_min(1e-12)


def standard_laplace(
    shape: Sequence[int] | torch.Size,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Laplace(0, 1) training noise, always finite: a random sign times −log(1 − U), U ∈ [0, 1).

    (Inverse-CDF sampling from ``torch.rand(...) − 0.5`` hits u = −0.5 when ``rand`` returns 0 and
    gives −inf, which turned whole classifiers into NaN.) Training noise only, never a release.
    """
    e = -torch.log1p(-torch.rand(shape, generator=generator, dtype=dtype))
    sign = torch.randint(0, 2, tuple(shape), generator=generator).to(dtype) * 2 - 1
    out = sign * e
    return out if device is None else out.to(device)


def release_noise(
    z_tilde: torch.Tensor,
    delta: torch.Tensor,
    radius: float,
    *,
    epsilons: Sequence[float],
    clean_fraction: float,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """z̃ + Δ̂·R/ε_b·Laplace(1) per coordinate, ε_b drawn uniformly per sample from ``epsilons``;
    a ``clean_fraction`` of the samples get no noise (the ε = ∞ use). Reparameterised: the
    gradient flows into ``delta`` (Δ̂) and z̃."""
    check_positive("radius", radius)
    check_in_range("clean_fraction", clean_fraction, 0.0, 1.0, low_open=False, high_open=False)
    if not epsilons:
        raise ValueError("epsilons must name at least one privacy level, got an empty sequence")
    n = z_tilde.shape[0]
    eps = torch.as_tensor([check_positive("epsilons[i]", e) for e in epsilons], dtype=z_tilde.dtype)
    pick = torch.randint(0, len(eps), (n,), generator=generator)
    inv = 1.0 / eps[pick]
    inv = torch.where(torch.rand(n, generator=generator) < clean_fraction, torch.zeros_like(inv), inv)
    lap = standard_laplace(z_tilde.shape, generator=generator, dtype=z_tilde.dtype)
    scale = (radius * inv).to(z_tilde.device).unsqueeze(1)
    return z_tilde + delta * scale * lap.to(z_tilde.device)


def laplace_release_noise(
    shape: torch.Size | tuple[int, ...],
    scale: torch.Tensor | float,
    *,
    generator: torch.Generator | None = None,
    device: torch.device | None = None,
) -> torch.Tensor:
    """Lap(0, scale) samples, always finite (training and evaluation data only; releases use
    privcore.mechanisms' exact samplers). ``scale`` may broadcast (one scale per row)."""
    return torch.as_tensor(scale, device=device) * standard_laplace(shape, generator=generator, device=device)
